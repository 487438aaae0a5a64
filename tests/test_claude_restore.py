"""What Claude Code sends that its transcript does not record, written by the importer as estimated parts: the
files it re-attaches after a compaction, and the message of a hook that blocked a call, sent twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    fixture_path,
    tool_result_block,
    tool_use_block,
    write_jsonl,
)

from workbench.engine.context.session import SessionContext
from workbench.engine.context.view import text_component
from workbench.engine.transcript.importers import import_file, parse_file
from workbench.engine.transcript.importers.claude_restore import MAX_FILE_TOKENS, MAX_FILES, numbered
from workbench.engine.transcript.models import TextPart
from workbench.engine.transcript.store import Store


def _call(n: int, tool: str, tool_input: dict[str, Any], result: Any, content: str = "ok") -> list[dict[str, Any]]:
    """An assistant file call and its answered result, with Claude Code's ``toolUseResult``."""
    answer = cc_user(f"r{n}", [tool_result_block(f"t{n}", content)])
    answer["toolUseResult"] = result
    return [cc_assistant(f"a{n}", f"msg_{n}", [tool_use_block(f"t{n}", tool, tool_input)], cc_usage(10, 5, 100)),
            answer]


def _read(n: int, path: str, content: str) -> list[dict[str, Any]]:
    return _call(n, "Read", {"file_path": path}, {"type": "text", "file": {"filePath": path, "content": content}})


def _compaction() -> list[dict[str, Any]]:
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
                "isSidechain": False, "sessionId": "synthetic-session", "timestamp": "2025-06-01T11:00:00.000Z",
                "compactMetadata": {"trigger": "auto", "preTokens": 150_000}}
    summary = cc_user("s1", "This session is being continued from a previous conversation.", isCompactSummary=True)
    return [boundary, summary, cc_user("u9", "go on")]


def test_the_most_recent_files_follow_the_summary_as_they_were_last_seen(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [cc_user("u0", "Start")]
    for n in range(1, 5):
        records += _read(n, f"/p/old{n}.py", f"old file {n}")
    records += _call(5, "Write", {"file_path": "/p/new.py"}, {"type": "create", "content": "print(1)\n"})
    edit = {"originalFile": "a = 1\nb = 2\n", "oldString": "b = 2", "newString": "b = 3", "replaceAll": False}
    records += _call(6, "Edit", {"file_path": "/p/old2.py"}, edit)
    records += _read(7, "/p/CLAUDE.md", "# memory")  # comes back with the system context, not as a file
    records += _call(8, "Read", {"file_path": "/p/failed.py"}, "Error: no such file")
    records[-1]["message"]["content"][0]["is_error"] = True
    records += _read(9, "/p/big.py", "y" * (MAX_FILE_TOKENS * 4 + 10))
    parsed = parse_file(write_jsonl(tmp_path / "s.jsonl", records + _compaction()))

    kinds = [(m.kind, m.source.get("reattached", False)) for m in parsed.messages[-4:]]
    assert kinds == [("compact_boundary", False), ("summary", False), ("message", True), ("message", False)]
    reattached = parsed.messages[-2]
    assert reattached.role == "user" and reattached.source["estimated"] is True
    assert [m.index for m in parsed.messages] == list(range(len(parsed.messages)))
    texts = [part.text for part in reattached.parts if isinstance(part, TextPart)]
    # The last MAX_FILES files touched, newest first, the memory file left out and the failed read not counted.
    assert len(texts) == MAX_FILES - 1
    assert "/p/big.py" in texts[0] and "too large" in texts[0] and "yyyy" not in texts[0]
    assert "/p/old2.py" in texts[1] and numbered("a = 1\nb = 3\n") in texts[1]  # the edit applied
    assert "/p/new.py" in texts[2] and numbered("print(1)\n") in texts[2]
    assert "/p/old4.py" in texts[3] and "old file 4" in texts[3]
    assert not any("old3" in t or "old1" in t or "CLAUDE.md" in t or "failed" in t for t in texts)
    assert all(text_component("user", t) == "reminders" for t in texts)


def test_no_files_read_adds_nothing(tmp_path: Path) -> None:
    parsed = parse_file(write_jsonl(tmp_path / "s.jsonl", [cc_user("u0", "Start"), *_compaction()]))
    assert not any(m.source.get("reattached") for m in parsed.messages)


COMPACTED = [claude_fixture(key) for key, fact in CLAUDE_FIXTURES.items() if fact.compactions]
COMPACTED.append(fixture_path("claude-code__marot__spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"))


@pytest.mark.parametrize("path", COMPACTED, ids=lambda p: p.stem.rsplit("__", 1)[-1][:8])
def test_the_first_request_after_a_compaction_counts_the_reattached_files(path: Path, tmp_path: Path) -> None:
    """Without them the first request after each real compaction was 12.5% and 28.4% short."""
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, path)
        ctx = SessionContext.load(store, parsed.session.id)
        view = ctx.view()
    (reattached,) = [m for m in ctx.messages if m.source.get("reattached")]
    item = view.item_for(reattached.id)
    assert item is not None and item.components.get("reminders", 0) > 1_000
    (first,) = [r for r in view.requests if r.anchorless == "pivot"]
    error = abs(first.estimated_input_tokens - first.reported_input_tokens) / first.reported_input_tokens
    assert error <= 0.10


def _hooked_bash(n: int, content: str, result: str, *, hooked: bool = True) -> list[dict[str, Any]]:
    """A Bash call (a PreToolUse hook ran for it when ``hooked``) and its error result."""
    progress = {"type": "progress", "uuid": f"p{n}", "isSidechain": False, "sessionId": "synthetic-session",
                "toolUseID": f"t{n}", "parentToolUseID": f"t{n}",
                "data": {"type": "hook_progress", "hookEvent": "PreToolUse", "hookName": "PreToolUse:Bash"}}
    call, answer = _call(n, "Bash", {"command": "git commit"}, result, content)
    answer["message"]["content"][0]["is_error"] = True
    return [call, *([progress] if hooked else []), answer]


def test_a_call_a_hook_blocked_carries_the_hooks_message_again(tmp_path: Path) -> None:
    blocked = "Pre-commit validation failed: run mix format"
    records = [cc_user("u0", "Commit it"),
               *_hooked_bash(1, blocked, "Error: " + blocked),
               *_hooked_bash(2, "Exit code 1\nnothing to commit", "Error: Exit code 1\nnothing to commit"),
               *_hooked_bash(3, "The user doesn't want to proceed with this tool use.", "User rejected tool use"),
               *_hooked_bash(4, blocked, "Error: " + blocked, hooked=False)]
    parsed = parse_file(write_jsonl(tmp_path / "s.jsonl", records))
    results = [m for m in parsed.messages if m.kind == "tool_result"]
    assert [bool(m.source.get("hook_repeat")) for m in results] == [True, False, False, False]
    repeat = results[0].parts[-1]
    assert isinstance(repeat, TextPart) and blocked in repeat.text
    assert text_component("user", repeat.text) == "reminders"
    assert results[0].source["estimated"] is True and len(results[0].tool_results()) == 1


def test_the_fixtures_blocked_commits_are_counted_twice() -> None:
    parsed = parse_file(fixture_path("claude-code__marot__spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"))
    repeated = [m for m in parsed.messages if m.source.get("hook_repeat")]
    assert len(repeated) == 8  # the eight "Pre-commit validation failed" results
    assert all("Pre-commit validation failed" in m.tool_results()[0].text for m in repeated)
