"""Claude Code sub-agents: their own sessions (model, requests, budget), linked to the call that started them.

The expected values are read from the fixture files independently of the importer (``helpers``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    FIXTURES_DIR,
    assistant_ids,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    raw_records,
    run_cli,
    text_block,
    tool_result_block,
    tool_use_block,
    usage_input_total,
    write_jsonl,
)

from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import Session, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.subagent_links import find_subagents, message_peaks

MAIN = claude_fixture("258c7280")
SUBAGENT_FOLDER = FIXTURES_DIR / MAIN.stem / "subagents"
REAL_SUBAGENT_FILES = sorted(SUBAGENT_FOLDER.glob("agent-*.jsonl"))
EMBEDDING = claude_fixture("subagent")


def last_input(records: list[dict[str, Any]]) -> int:
    """The input the last assistant record with usage reported."""
    usages = [r["message"]["usage"] for r in records if r.get("type") == "assistant" and r["message"].get("usage")]
    return usage_input_total(usages[-1])


def peak_input(records: list[dict[str, Any]]) -> int:
    return max(usage_input_total(r["message"]["usage"]) for r in records
               if r.get("type") == "assistant" and r["message"].get("usage"))


def last_model(records: list[dict[str, Any]]) -> str:
    return str([r["message"]["model"] for r in records if r.get("type") == "assistant"][-1])


def call_of(agent_id: str, path: Path) -> tuple[str, str]:
    """(message id, tool_use id) of the Task call whose result names ``agent_id``, read from the raw file."""
    records = [r for _, r in raw_records(path)]
    tool_use = next(b["tool_use_id"] for r in records if isinstance(r.get("toolUseResult"), dict)
                    and r["toolUseResult"].get("agentId") == agent_id for b in r["message"]["content"])
    message = next(r["message"]["id"] for r in records if r.get("type") == "assistant"
                   for b in r["message"]["content"] if b.get("type") == "tool_use" and b["id"] == tool_use)
    return message, tool_use


def assert_budget_on_last_report(ctx: SessionContext, records: list[dict[str, Any]]) -> None:
    """The budget is the last reported input, plus what the context holds from that request's answer on (an
    embedded sub-agent's last tool result too: its final answer is not embedded)."""
    view, budget = ctx.view(), ctx.budget()
    reported = last_input(records)
    assert view.requests[-1].reported_input_tokens == reported > 0
    ids = [item.message_id for item in view.items if item.kind == "message"]
    after = ids.index(view.requests[-1].message_id)
    answer = sum(item.tokens for item in view.items if item.kind == "message" and ids.index(item.message_id) >= after)
    assert budget.source in {"reported", "calibrated"} and not budget.steered
    assert budget.used == reported + answer


def sessions_by_agent(store: Store, parent: str) -> dict[str, Session]:
    return {s.metadata["agentId"]: s for s, _ in store.list_sessions() if s.metadata.get("parent_session") == parent}


def test_the_real_fixtures_are_there() -> None:
    assert [p.name for p in REAL_SUBAGENT_FILES] == ["agent-a881341.jsonl", "agent-acompact-fffbd0.jsonl"]


@pytest.mark.parametrize("path", REAL_SUBAGENT_FILES, ids=lambda p: p.stem)
def test_every_real_subagent_transcript_is_a_session_with_its_model_requests_and_budget(
        tmp_path: Path, path: Path) -> None:
    records = [r for _, r in raw_records(path)]
    assert all(r.get("isSidechain") is True for r in records if "isSidechain" in r)
    with Store(tmp_path / "wb.db") as store:
        ctx = SessionContext.load(store, import_file(store, path).session.id)
    assert ctx.model == last_model(records)
    requests = [r.message_id for r in ctx.view().requests]
    assert requests == assistant_ids(path, include_sidechain=True)
    assert_budget_on_last_report(ctx, records)


def test_a_main_transcript_links_its_task_call_to_the_subagent_file(tmp_path: Path) -> None:
    agent_file = SUBAGENT_FOLDER / "agent-a881341.jsonl"
    records = [r for _, r in raw_records(agent_file)]
    message_id, tool_use_id = call_of("a881341", MAIN)
    with Store(tmp_path / "wb.db") as store:
        parent = import_file(store, MAIN).session.id
        linked = sessions_by_agent(store, parent)
        sub = linked["a881341"]
        assert sub.metadata["parent_message"] == message_id
        assert sub.metadata["parent_tool_use_id"] == tool_use_id
        assert sub.metadata["subagent"] is True and sub.metadata["agent"] == "claude-code-guide"
        assert sub.source_path == str(agent_file.resolve())
        assert find_subagents(store, parent)[message_id] == (sub.id,)
        assert message_peaks(store, find_subagents(store, parent))[message_id] == peak_input(records)
        ctx = SessionContext.load(store, sub.id)
    assert ctx.model == "claude-sonnet-4-5-20250929"
    assert [r.message_id for r in ctx.view().requests] == assistant_ids(agent_file, include_sidechain=True)
    assert_budget_on_last_report(ctx, records)


def test_a_compaction_run_is_linked_to_its_boundary(tmp_path: Path) -> None:
    boundary = next(r for _, r in raw_records(MAIN) if r.get("subtype") == "compact_boundary")
    with Store(tmp_path / "wb.db") as store:
        parent = import_file(store, MAIN).session.id
        run = sessions_by_agent(store, parent)["acompact-fffbd0"]
    assert run.metadata["parent_message"] == boundary["uuid"]
    assert run.metadata["agent"] == "compaction"


def test_subagent_messages_embedded_in_progress_records_become_its_session(tmp_path: Path) -> None:
    """No ``agent-afb92ff.jsonl`` beside this transcript: its ``agent_progress`` records are the sub-agent."""
    embedded = [r["data"]["message"] for _, r in raw_records(EMBEDDING)
                if r.get("type") == "progress" and r["data"].get("type") == "agent_progress"]
    expected_ids = list(dict.fromkeys(m["message"]["id"] for m in embedded if m["type"] == "assistant"))
    message_id, tool_use_id = call_of("afb92ff", EMBEDDING)
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, EMBEDDING)
        sub = sessions_by_agent(store, parsed.session.id)["afb92ff"]
        ctx = SessionContext.load(store, sub.id)
        main = SessionContext.load(store, parsed.session.id)
    assert (sub.metadata["parent_message"], sub.metadata["parent_tool_use_id"]) == (message_id, tool_use_id)
    assert ctx.model == "claude-haiku-4-5-20251001" == last_model(embedded)
    assert [r.message_id for r in ctx.view().requests] == expected_ids
    assert_budget_on_last_report(ctx, embedded)
    assert len(ctx.messages) == len({m["uuid"] for m in embedded if m["type"] == "user"}) + len(expected_ids)
    calls = [p for m in main.messages if m.id == message_id for p in m.parts if isinstance(p, ToolUsePart)]
    assert [c.name for c in calls] == ["Task"], "the sub-agent's messages stay out of the main session"
    assert all(m.id not in expected_ids for m in main.messages)


def test_importing_again_or_the_subagent_file_alone_makes_no_duplicate_and_keeps_the_link(tmp_path: Path) -> None:
    agent_file = SUBAGENT_FOLDER / "agent-a881341.jsonl"
    with Store(tmp_path / "wb.db") as store:
        first = import_file(store, agent_file).session.id  # on its own first: not linked yet
        assert "parent_session" not in store.get_session(first).metadata
        parent = import_file(store, MAIN).session.id
        import_file(store, MAIN)
        assert import_file(store, agent_file).session.id == first
        sessions = [s for s, _ in store.list_sessions()]
        assert len(sessions) == 1 + len(REAL_SUBAGENT_FILES)
        assert store.get_session(first).metadata["parent_session"] == parent


def sidechain(agent: str, answer: str) -> list[dict[str, Any]]:
    return [cc_user(f"{agent}-u", "Look around", sidechain=True, agentId=agent),
            cc_assistant(f"{agent}-a", f"msg_{agent}", [text_block(answer)], cc_usage(4, 9, 100, 2_000),
                         model="claude-haiku-4-5-20251001", sidechain=True)]


def test_older_layout_unnamed_subagents_and_an_unreadable_one(tmp_path: Path) -> None:
    """``agent-<id>.jsonl`` beside the main file (older Claude Code) is found by the call's agent id; a file
    in the sub-agents folder no call names still comes with its session; one that cannot be read is a warning,
    not a failed import."""
    main = write_jsonl(tmp_path / "s1.jsonl", [
        cc_user("u1", "Start two sub-agents"),
        cc_assistant("a1", "msg_1", [tool_use_block("toolu_1", "Agent", {"prompt": "Look around"}),
                                     tool_use_block("toolu_2", "Task", {"prompt": "And here"})], cc_usage(3, 20)),
        cc_user("u2", [tool_result_block("toolu_1", "Found it.")], toolUseResult={"agentId": "b2"}),
    ])
    write_jsonl(tmp_path / "agent-b2.jsonl", sidechain("b2", "Found it."))
    folder = tmp_path / "s1" / "subagents"
    folder.mkdir(parents=True)
    write_jsonl(folder / "agent-c3.jsonl", sidechain("c3", "Cut off."))
    (folder / "agent-d4.jsonl").write_text("not json\n", encoding="utf-8")
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, main)
        linked = sessions_by_agent(store, parsed.session.id)
        assert find_subagents(store, parsed.session.id) == {"msg_1": (linked["b2"].id,)}
    assert set(linked) == {"b2", "c3"}
    assert (linked["b2"].metadata["parent_tool_use_id"], linked["b2"].metadata["agent"]) == ("toolu_1", "Agent")
    assert linked["c3"].metadata["parent_message"] is None
    (warning,) = parsed.warnings
    assert warning.startswith("sub-agent transcript not imported:") and "agent-d4.jsonl" in warning


def test_cli_import_lists_the_subagents_with_their_peak(tmp_path: Path) -> None:
    result = run_cli(["import", EMBEDDING, "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    embedded = [r["data"]["message"] for _, r in raw_records(EMBEDDING)
                if r.get("type") == "progress" and r["data"].get("type") == "agent_progress"]
    (sub,) = report["subagents"]
    assert sub["parent_message"] == call_of("afb92ff", EMBEDDING)[0]
    assert sub["peak_input"] == peak_input(embedded)
    assert sub["session_id"].startswith(report["session_id"])
    text = run_cli(["import", EMBEDDING], tmp_path)
    assert text.stdout == (f"imported {report['messages']:,} messages · {report['tokens']:,} tokens · 0 skipped lines · "
                           f"session {report['session_id']}\n"), "stdout is one line, the session id last"
    assert f"sub-agent {sub['session_id']} started by message {sub['parent_message']}" in text.stderr


@pytest.mark.anyio
async def test_the_task_row_shows_the_peak_and_g_opens_the_subagent_session(tmp_path: Path) -> None:
    from tui_fixtures import SIZE, flat, settle, text_of

    from workbench.tui.app import WorkbenchApp
    from workbench.tui.launch import Launch
    from workbench.tui.widgets.message_list import MessageList

    embedded = [r["data"]["message"] for _, r in raw_records(EMBEDDING)
                if r.get("type") == "progress" and r["data"].get("type") == "agent_progress"]
    task_message, _ = call_of("afb92ff", EMBEDDING)
    app = WorkbenchApp(Launch.open(tmp_path / "wb.db", str(EMBEDDING)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        snapshot = app.main_screen.screen_state
        assert snapshot is not None
        parent = snapshot.session.id
        index = snapshot.rows.index_of(task_message)
        assert index is not None
        assert snapshot.rows.row(index).subagent_peak == peak_input(embedded)
        assert all(snapshot.rows.row(i).subagent_peak is None for i in range(len(snapshot.rows)) if i != index)
        app.main_screen.query_one(MessageList).cursor = index
        await pilot.pause()
        detail = flat(text_of(app.screen.query_one("#detail-body")))
        assert f"peak input {peak_input(embedded):,} · press g to open" in detail
        await pilot.press("g")
        await settle(pilot)
        opened = app.main_screen.screen_state
        assert opened is not None and opened.session.metadata.get("parent_session") == parent
        assert opened.session.metadata["agentId"] == "afb92ff"
        assert opened.session.model == "claude-haiku-4-5-20251001"
        await pilot.press("b")
        await settle(pilot)
        assert app.main_screen.screen_state is not None and app.main_screen.screen_state.session.id == parent


def test_an_import_that_fails_while_storing_a_subagent_leaves_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The main transcript and its sub-agents are one transaction: a stop after the main session was written
    (a kill, a full disk) must not leave it stored without its sub-agents."""
    from workbench.engine.transcript import importers

    real_finish = importers._finish

    def failing_finish(store: Store, parsed: Any, *args: Any) -> None:
        if parsed.session.metadata.get("subagent"):
            raise OSError("disk full")
        real_finish(store, parsed, *args)

    monkeypatch.setattr(importers, "_finish", failing_finish)
    with Store(tmp_path / "wb.db") as store:
        with pytest.raises(OSError, match="disk full"):
            import_file(store, MAIN)
        assert store.list_sessions() == []
