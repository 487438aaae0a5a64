"""Codex rollout import: the real rollout (no usage in it) and synthetic ones for usage,
the context window, the model name and compaction.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import UNSUPPORTED_FIXTURES, fixture_path, write_jsonl

from workbench.engine.context.report import inspect_report
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.importers import detect_format, import_file, parse_file
from workbench.engine.transcript.models import TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter


def codex_fixture() -> Path:
    return fixture_path(UNSUPPORTED_FIXTURES["codex"])


def raw_payloads(path: Path) -> list[tuple[str, dict[str, Any]]]:
    return [(r["type"], r["payload"]) for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())]


# --- the real rollout -----------------------------------------------------------------


def test_raw_rollout_matches_documented_facts() -> None:
    records = raw_payloads(codex_fixture())
    assert len(records) == 99
    kinds = Counter((t, p.get("type")) for t, p in records)
    assert kinds[("session_meta", None)] == 1
    assert kinds[("response_item", "function_call")] == 38
    assert kinds[("response_item", "function_call_output")] == 38
    assert kinds[("response_item", "reasoning")] == 16
    assert kinds[("response_item", "message")] == 3
    assert kinds[("event_msg", "user_message")] == 3
    assert not any(t in ("turn_context", "compacted") or p.get("type") == "token_count" for t, p in records)


def test_real_rollout_imports() -> None:
    path = codex_fixture()
    assert detect_format(path) == "codex"
    parsed = parse_file(path)
    records = raw_payloads(path)
    meta = records[0][1]
    assert parsed.skipped_lines == [] and parsed.skipped_records == {}
    # The system prompt is one system message; the user's prompts come from event_msg records.
    system = [m for m in parsed.messages if m.role == "system"]
    assert len(system) == 1 and system[0].text == meta["base_instructions"]["text"]
    prompts = [p["message"] for t, p in records if p.get("type") == "user_message"]
    users = [m for m in parsed.messages if m.role == "user" and m.kind == "message"]
    assert [m.text for m in users] == prompts
    # Tool calls and outputs pair up by call_id, outputs in the message after their call.
    calls = [p for t, p in records if p.get("type") == "function_call"]
    uses = [p for m in parsed.messages for p in m.parts if isinstance(p, ToolUsePart)]
    results = [p for m in parsed.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert [u.id for u in uses] == [c["call_id"] for c in calls]
    assert [u.input for u in uses] == [json.loads(c["arguments"]) for c in calls]
    assert sorted(r.tool_use_id for r in results) == sorted(u.id for u in uses)
    assert max(len(r.text) for r in results) == 40_141
    for m in parsed.messages:
        if m.kind == "tool_result":
            before = parsed.messages[m.index - 1]
            assert before.role == "assistant"
            assert {r.tool_use_id for r in m.tool_results()} <= {u.id for u in before.tool_uses()}
    # Encrypted reasoning without a summary: redacted thinking.
    thinking = [p for m in parsed.messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert len(thinking) == 16 and all(t.redacted for t in thinking)
    answers = [p["content"][0]["text"] for t, p in records if p.get("type") == "message"]
    assert [p.text for m in parsed.messages if m.role == "assistant" for p in m.parts if isinstance(p, TextPart)] == answers
    # No usage, no model, no window in this rollout, and that is fine.
    assert all(m.usage is None for m in parsed.messages)
    assert parsed.session.model is None and parsed.session.context_window is None
    assert parsed.session.title is not None and parsed.session.title.startswith("analyze trascript")
    assert parsed.session.metadata["codex"]["cli_version"] == "0.128.0-alpha.1"
    assert [m.index for m in parsed.messages] == list(range(len(parsed.messages)))
    assert len({m.id for m in parsed.messages}) == len(parsed.messages)


def test_real_rollout_stores_and_projects(tmp_path: Path) -> None:
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, codex_fixture()).session.id
        ctx = SessionContext.load(store, session_id)
    report = inspect_report(ctx)
    assert report["format"] == "codex" and report["requests"] == []
    assert report["messages_in_context"] == report["messages"] == len(ctx.messages)


def test_real_rollout_budgets_its_instructions_as_system_prompt_and_its_tools_as_tool_definitions(
    tmp_path: Path,
) -> None:
    records = raw_payloads(codex_fixture())
    meta = records[0][1]
    counter = TokenCounter()
    with Store(tmp_path / "wb.db") as store:
        ctx = SessionContext.load(store, import_file(store, codex_fixture()).session.id)
    report = inspect_report(ctx)
    components = report["budget"]["components"]
    instructions = counter.count_text(meta["base_instructions"]["text"])
    # Counted like any message (calibrated, with per-block overhead): about the instructions' size.
    assert components["system"] == pytest.approx(instructions, rel=0.15)
    per_tool = [(t["name"], counter.count_text(json.dumps(t, ensure_ascii=False, separators=(",", ":"))))
                for t in meta["dynamic_tools"]]
    assert [t["name"] for t in report["tool_definitions"]] == [name for name, _ in per_tool]
    assert [t["tokens"] for t in report["tool_definitions"]] == pytest.approx([n for _, n in per_tool], rel=0.05)
    assert components["tools"] == sum(t["tokens"] for t in report["tool_definitions"]) > 0
    # User text is the three prompts only: neither the instructions nor the tools.
    prompts = [p["message"] for t, p in records if p.get("type") == "user_message"]
    assert components["user"] < sum(counter.count_text(p) for p in prompts) + 50
    assert components["user"] < min(instructions, components["tools"])


# --- synthetic rollouts ------------------------------------------------------------------


def rec(kind: str, payload: dict[str, Any], ts: str = "2026-05-11T10:00:00.000Z") -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def item(payload: dict[str, Any]) -> dict[str, Any]:
    return rec("response_item", payload)


def event(payload: dict[str, Any]) -> dict[str, Any]:
    return rec("event_msg", payload)


def usage(inp: int, cached: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": out // 2, "total_tokens": inp + out}


def token_count(last: dict[str, int], total: dict[str, int], window: int = 272_000) -> dict[str, Any]:
    return event({"type": "token_count", "info": {"last_token_usage": last, "total_token_usage": total,
                                                  "model_context_window": window}})


def user_item(text: str) -> dict[str, Any]:
    return item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})


def assistant_item(text: str) -> dict[str, Any]:
    return item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})


def synthetic_rollout() -> list[dict[str, Any] | str]:
    u1, u2, u3 = usage(5000, 0, 120), usage(5600, 4800, 80), usage(3000, 0, 40)
    return [
        rec("session_meta", {"id": "sess-1", "cwd": "/work", "cli_version": "0.50.0",
                             "base_instructions": {"text": "You are Codex."}}),
        rec("turn_context", {"cwd": "/work", "model": "gpt-5-codex", "effort": "medium"}),
        item({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]}),
        user_item("Fix the bug in app.py"),
        event({"type": "user_message", "message": "Fix the bug in app.py", "images": []}),
        event({"type": "token_count", "info": None}),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Looking at app.py**"}],
              "content": None, "encrypted_content": "gAAA"}),
        item({"type": "function_call", "name": "shell", "arguments": '{"command": ["cat", "app.py"]}', "call_id": "c1"}),
        item({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"}),
        token_count(u1, u1),
        token_count(u1, u1),  # a repeat: same cumulative total
        item({"type": "function_call_output", "call_id": "c1", "output": "def add(a, b):\n    return a - b\n"}),
        item({"type": "custom_tool_call_output", "call_id": "c2", "output": {"content": "patch failed", "success": False}}),
        item({"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "python add"}}),
        assistant_item("Fixed: add now adds."),
        token_count(u2, usage(10600, 4800, 200)),
        rec("compacted", {"message": "Summary: the bug in add() was fixed.", "replacement_history": [
            user_item("Fix the bug in app.py")["payload"],
            user_item("Summary: the bug in add() was fixed.")["payload"],
        ]}),
        event({"type": "user_message", "message": "Now add tests"}),
        item({"type": "ghost_snapshot", "ghost_commit": {}}),
        assistant_item("Added tests."),
        token_count(u3, usage(13600, 4800, 240), window=258_400),
        rec("mystery", {}),
    ]


def test_synthetic_rollout_usage_window_model_and_compaction(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rollout-1.jsonl", synthetic_rollout())
    parsed = parse_file(path)
    s = parsed.session
    assert s.model == "gpt-5-codex" and s.context_window == 258_400
    roles = [(m.role, m.kind) for m in parsed.messages]
    assert roles == [
        ("system", "message"),  # base instructions
        ("system", "message"),  # developer message
        ("user", "message"),  # the prompt, once although both records hold it
        ("assistant", "message"),  # reasoning + two calls: one response
        ("user", "tool_result"),
        ("assistant", "message"),  # web search note + answer
        ("system", "compact_boundary"),
        ("user", "message"),  # replayed history
        ("user", "summary"),
        ("user", "message"),
        ("assistant", "message"),
    ]
    first, second, third = (m for m in parsed.messages if m.role == "assistant")
    assert first.usage is not None and (first.usage.input_tokens, first.usage.cache_read_input_tokens,
                                        first.usage.output_tokens) == (5000, 0, 120)
    assert second.usage is not None and (second.usage.input_tokens, second.usage.cache_read_input_tokens) == (800, 4800)
    assert second.usage.total_input == 5600 and second.usage.model == "gpt-5-codex"
    assert third.usage is not None and third.usage.total_input == 3000
    # Summed per request, usage equals Codex's own cumulative total (the repeat is not counted).
    assert sum(m.usage.total_input + m.usage.output_tokens for m in parsed.messages if m.usage) == 13600 + 240
    assert parsed.skipped_records["event_msg:token_count(repeat)"] == 1
    assert parsed.skipped_records["event_msg:token_count(no info)"] == 1
    assert parsed.skipped_records["response_item:ghost_snapshot"] == 1
    assert parsed.skipped_records["unknown:mystery"] == 1
    assert parsed.skipped_records["event_msg:user_message(also a response_item)"] == 1
    thinking = first.parts[0]
    assert isinstance(thinking, ThinkingPart) and thinking.text == "**Looking at app.py**" and not thinking.redacted
    assert [p.name for p in first.tool_uses()] == ["shell", "apply_patch"]
    assert first.tool_uses()[0].input == {"command": ["cat", "app.py"]}
    assert first.tool_uses()[1].input == {"input": "*** Begin Patch"}
    results = parsed.messages[4].tool_results()
    assert [(r.tool_use_id, r.is_error) for r in results] == [("c1", False), ("c2", True)]
    assert results[1].text == "patch failed"
    assert second.parts[0] == TextPart(text="[web search: python add]")
    # Compaction: a pivot on the boundary, the summary marked, the old turns out of the view.
    pivot = next(e for e in parsed.events if e.action == "pivot")
    boundary = parsed.messages[6]
    assert pivot.message_id == boundary.id and not boundary.agent_visible
    assert pivot.data["pre_tokens"] == 5600 + 80
    summary = next(e for e in parsed.events if e.action == "summary")
    assert summary.message_id == parsed.messages[8].id
    ctx = SessionContext(s, parsed.messages, parsed.events)
    in_view = [i.message_id for i in ctx.view().items if i.kind == "message"]
    assert in_view == [m.id for m in parsed.messages[7:]]
    budget = ctx.budget()
    assert budget.context_window == 258_400
    report = inspect_report(ctx)
    assert [r["reported_input_tokens"] for r in report["requests"]] == [5000, 5600, 3000]


def test_compaction_without_replacement_history_adds_the_summary(tmp_path: Path) -> None:
    records = [
        user_item("hello"),
        assistant_item("hi"),
        rec("compacted", {"message": "We said hello."}),
        user_item("again"),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "r.jsonl", records))
    assert [(m.role, m.kind) for m in parsed.messages] == [
        ("user", "message"), ("assistant", "message"), ("system", "compact_boundary"),
        ("user", "summary"), ("user", "message"),
    ]
    assert parsed.messages[3].text == "We said hello."


def test_response_item_user_prompt_after_the_event_is_kept_once(tmp_path: Path) -> None:
    records = [event({"type": "user_message", "message": "hello  there"}), user_item("hello there"), assistant_item("hi")]
    parsed = parse_file(write_jsonl(tmp_path / "r.jsonl", records))
    assert [(m.role, m.text) for m in parsed.messages] == [("user", "hello there"), ("assistant", "hi")]


def test_bad_lines_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    records: list[dict[str, Any] | str] = [
        user_item("hello"),
        '{"timestamp": "x", "type": "response_item", "payload": {"type": "message", "role": "assist',
        "not json",
        '{"type": "response_item"}',
        '["a", "list"]',
        item({"type": "function_call", "name": "shell", "arguments": "{not json", "call_id": "c9"}),
        assistant_item("hi"),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "r.jsonl", records))
    assert [s.line for s in parsed.skipped_lines] == [2, 3, 4, 5]
    assert parsed.skipped_lines[0].reason == "truncated JSON"
    assert "Codex rollout record" in parsed.skipped_lines[2].reason
    call = parsed.messages[1].tool_uses()[0]
    assert call.input == {"arguments": "{not json"}


def test_long_first_line_is_still_detected(tmp_path: Path) -> None:
    records = [rec("session_meta", {"id": "s", "base_instructions": {"text": "x" * 100_000}}), user_item("hi")]
    path = write_jsonl(tmp_path / "rollout-long.jsonl", records)
    assert detect_format(path) == "codex"
    assert parse_file(path).messages[0].role == "system"


@pytest.mark.parametrize("forced", ["claude-code", "opencode"])
def test_codex_file_forced_to_another_format_fails_clearly(forced: str) -> None:
    with pytest.raises(ImportFailed):
        parse_file(codex_fixture(), forced)


def test_other_formats_forced_as_codex_fail_clearly() -> None:
    with pytest.raises(ImportFailed, match="no codex messages"):
        parse_file(fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"]), "codex")


@pytest.mark.parametrize("forced", ["claude-code", "opencode"])
def test_forced_wrong_format_is_a_one_line_cli_error(forced: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli import main

    code = main(["import", str(codex_fixture()), "--format", forced, "--db", str(tmp_path / "wb.db")])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("workbench: error:") and len(err.strip().splitlines()) == 1
