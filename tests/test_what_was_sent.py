"""What a proxied agent was sent (``context.breakdown``) and request N against N−1 (``context.request_diff``),
in the engine and headless (``workbench components``, ``workbench requests N --diff``).

Real parts: recorded Claude Code requests (and the SDK's own requests) through the proxy as a real server,
a loopback upstream, the real store; the command line in a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
from claude_code_requests import recorded, send, steered_session
from helpers import claude_fixture, run_cli
from loopback_api import Reply, text, thinking
from proxy_support import SYSTEM, proxied, request

from workbench.engine.context.breakdown import breakdown, memory_entries
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.request_diff import request_diff
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.plan import undo
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

TODAY = {"type": "text", "text": "# currentDate\nToday's date is 2026-11-28."}


def cli_json(db: Path, tmp_path: Path, *args: str) -> Any:
    result = run_cli(["--db", db, *args, "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_breakdown_lists_each_tool_memory_file_and_system_block_as_the_budget_counts_them(tmp_path: Path) -> None:
    body = recorded()[3]
    with steered_session(tmp_path) as session, Store(session.proxy.db) as store:
        found = breakdown(store, session.session_id)
        budget = SessionContext.load(store, session.session_id).budget()
    assert found.seq == 2
    builtin, mcp = found.of("tools"), found.of("tools_mcp")
    names = [tool["name"] for tool in body["tools"]]
    assert [e.name for e in builtin] == [n for n in names if not n.startswith("mcp__")]
    assert [e.name for e in mcp] == [n for n in names if n.startswith("mcp__")] and len(mcp) == 4
    read = found.find("tools", "Read")
    assert read.text.startswith("Read\n") and body["tools"][names.index("Read")]["description"].strip() in read.text
    totals = found.totals()
    assert totals["tools"] == budget.components["tools"] and totals["tools_mcp"] == budget.components["tools_mcp"]
    claude_md = [e for e in found.of("memory") if e.name.endswith("/CLAUDE.md")]
    assert len(claude_md) == 1 and "Always answer in one sentence." in claude_md[0].text
    assert claude_md[0].where == "message #1"
    system = found.of("system")
    assert [e.where for e in system][:3] == ["system block 1", "system block 2", "system block 3"]
    assert any(e.where == "message #2" for e in system), "Claude Code's system-role message counts as system"
    for component in ("system", "memory"):
        assert abs(totals[component] - budget.components[component]) <= budget.components[component] * 0.1


def test_request_2_against_1_shows_what_the_agent_added_and_what_the_workbench_replaced(tmp_path: Path) -> None:
    with steered_session(tmp_path) as session, Store(session.proxy.db) as store:
        diff = request_diff(store, session.session_id, 2)
        first = request_diff(store, session.session_id, 1)
    assert first.previous is None and len(first.of("added")) == 6
    assert diff.previous is not None and diff.previous.seq == 1
    added = diff.of("added")
    assert [(c.message, c.role) for c in added] == [(7, "assistant"), (8, "user")]
    [replaced] = diff.of("replaced")
    assert (replaced.message, replaced.block, replaced.what, replaced.new) == (4, 1, "tool_result", True)
    assert replaced.text == PRUNED_PLACEHOLDER and "The word is pelican." in replaced.before
    assert not diff.of("agent_changed") and not diff.of("agent_dropped") and not diff.of("prompt")
    assert diff.request.steered and not diff.previous.steered
    assert (diff.request.cache_read, diff.request.cache_write, diff.request.output_tokens) == (9_700, 150, 12)
    assert diff.request.cost is not None and diff.previous.cost is not None
    assert diff.request.cost < diff.previous.cost, "a cache read costs less than the first request's cache write"


def test_a_steering_undone_goes_as_the_agent_wrote_it_again(tmp_path: Path) -> None:
    bodies = recorded()
    third = {**bodies[3], "messages": [*bodies[3]["messages"], {"role": "assistant", "content": [text("ok")]},
                                       {"role": "user", "content": "Thanks"}]}
    with steered_session(tmp_path) as session:
        with Store(session.proxy.db) as store:
            undo(store, SessionContext.load(store, session.session_id))
        session.proxy.api.queue(Reply([text("You're welcome.")]))
        send(session.proxy.url, third)
        session.proxy.settle()
        with Store(session.proxy.db) as store:
            diff = request_diff(store, session.session_id, 3)
    [restored] = diff.of("restored")
    assert (restored.message, restored.block) == (4, 1)
    assert restored.before == PRUNED_PLACEHOLDER and "The word is pelican." in restored.text
    assert not diff.of("replaced") and len(diff.of("added")) == 2


def test_the_agents_own_edits_cleared_thinking_and_a_compaction(tmp_path: Path) -> None:
    """The agent sends an earlier answer again without its thinking, then starts afresh from a summary."""
    answer = [thinking("Let me think.", "sig-1"), text("Hello.")]
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": answer},
                                     {"role": "user", "content": "more"}]
    cleared = [history[0], {"role": "assistant", "content": [text("Hello.")]}, history[2],
               {"role": "assistant", "content": [text("More.")]}, {"role": "user", "content": "again"}]
    summary = "This session is being continued from a previous conversation. Summary: we said hello twice."
    compacted = [{"role": "user", "content": summary}]
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("More.")]), Reply([text("Again.")]), Reply([text("Fine.")]))
        client = anthropic.Anthropic(base_url=p.url, api_key="sk-test", max_retries=0)
        # In its session, as Claude Code names it: a client that names none and rewrites its history cannot be
        # told from another client, and is a new session.
        meta = {"user_id": '{"session_id":"dddddddd-2222-3333-4444-555555555555"}'}
        for messages, system in ((history, SYSTEM), (cleared, SYSTEM), (compacted, [*SYSTEM, TODAY])):
            client.messages.create(**request(messages, system=system, metadata=meta))
            p.settle()
        with Store(p.db) as store:
            [session] = [s for s, _ in store.list_sessions() if s.source_format == "proxy"]
            second = request_diff(store, session.id, 2)
            third = request_diff(store, session.id, 3)
    [dropped] = second.of("agent_dropped")
    assert (dropped.what, dropped.message, dropped.block, dropped.text) == ("thinking", 2, 1, "")
    assert dropped.before == "Let me think."
    assert [c.message for c in second.of("added")] == [4, 5]
    [rewritten] = third.of("agent_changed")
    assert (rewritten.message, rewritten.text, rewritten.before) == (1, summary, "hi")
    assert [c.message for c in third.of("agent_dropped")] == [2, 3, 4, 5]
    assert not third.of("added") and not third.of("replaced")
    assert not second.of("prompt")
    [prompt] = third.of("prompt")
    assert (prompt.what, prompt.block, prompt.text, prompt.before) == ("system", 3, TODAY["text"], "")


def test_the_headless_commands_say_the_same(tmp_path: Path) -> None:
    with steered_session(tmp_path) as session:
        db, sid = session.proxy.db, session.session_id
    totals = cli_json(db, tmp_path, "components", sid)
    assert totals["request"] == 2 and totals["totals"]["tools_mcp"] > 0
    assert len([e for e in totals["entries"] if e["component"] == "tools"]) == 27
    mcp = cli_json(db, tmp_path, "components", sid, "mcp")
    assert [e["name"] for e in mcp["entries"]] == ["mcp__notes__add", "mcp__notes__crash", "mcp__notes__greeting",
                                                   "mcp__notes__refuse"]
    assert mcp["tokens"] == sum(e["tokens"] for e in mcp["entries"])
    entry = cli_json(db, tmp_path, "components", sid, "tools", "mcp__notes__add")
    assert "Add two integers." in entry["text"]
    plain = run_cli(["--db", db, "components", sid, "memory", "2"], cwd=tmp_path)
    assert plain.returncode == 0 and "Always answer in one sentence." in plain.stdout
    diff = cli_json(db, tmp_path, "requests", sid, "2", "--diff")
    assert diff["counts"]["added"] == 2 and diff["counts"]["replaced"] == 1
    [replaced] = [c for c in diff["changes"] if c["kind"] == "replaced"]
    assert replaced["text"] == PRUNED_PLACEHOLDER and replaced["message"] == 4
    assert diff["request"]["cost_usd"] > 0 and diff["previous"]["seq"] == 1
    shown = run_cli(["--db", db, "requests", sid, "2", "--diff"], cwd=tmp_path)
    assert shown.returncode == 0 and "replaced by the workbench (1):" in shown.stdout
    listed = cli_json(db, tmp_path, "requests", sid)
    assert [r["seq"] for r in listed] == [1, 2] and listed[1]["steered"] is True


def test_the_commands_say_in_one_line_what_is_wrong(tmp_path: Path) -> None:
    db = tmp_path / "wb.db"
    imported = run_cli(["--db", db, "import", claude_fixture("short"), "--json"], cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    with Store(db) as store:
        [(session, _)] = store.list_sessions()
    for args, phrase in ((["components", session.id], "only a session recorded by `workbench proxy`"),
                         (["requests", session.id, "3", "--diff"], "has no request 3"),
                         (["requests", session.id, "--diff"], "--diff needs a request number"),
                         (["components", session.id, "bogus"], "no component 'bogus'")):
        result = run_cli(["--db", db, *args], cwd=tmp_path)
        assert result.returncode != 0 and phrase in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_two_memory_files_in_one_reminder_are_two_entries_and_the_rest_a_third() -> None:
    """Claude Code's context reminder as it sends it with a user and a project CLAUDE.md."""
    reminder = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
                "# claudeMd\nCodebase and user instructions are shown below.\n\n"
                "Contents of /home/u/.claude/CLAUDE.md (user's private global instructions for all projects):\n\n"
                "# Me\nPrefer short answers.\n\n"
                "Contents of /work/app/CLAUDE.md (project instructions, checked into the codebase):\n\n"
                "# Project notes\nRun `make test`.\n# currentDate\nToday's date is 2026-11-28.\n</system-reminder>\n")
    entries = memory_entries(TokenCounter(), reminder, "message #1")
    assert [e.name for e in entries] == ["/home/u/.claude/CLAUDE.md", "/work/app/CLAUDE.md",
                                         "(around the memory files)"]
    assert "Prefer short answers." in entries[0].text and "Run `make test`." not in entries[0].text
    assert "# Project notes" in entries[1].text and "currentDate" not in entries[1].text
    assert "# claudeMd" in entries[2].text and "Today's date is 2026-11-28." in entries[2].text
    assert sorted("".join(e.text for e in entries)) == sorted(reminder), "every character in exactly one entry"


def test_each_system_reminder_is_an_entry_named_by_its_first_line(tmp_path: Path) -> None:
    reminder = "<system-reminder>\nThe user opened src/app.py in the IDE.\n</system-reminder>"
    todo = "<system-reminder>\nYour todo list is empty.\n</system-reminder>"
    messages = [{"role": "user", "content": [text(reminder), text("Fix the bug.")]},
                {"role": "assistant", "content": [text("Looking.")]},
                {"role": "user", "content": [text("Go on."), text(todo)]}]
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("Done.")]))
        anthropic.Anthropic(base_url=p.url, api_key="sk-test", max_retries=0).messages.create(**request(messages))
        p.settle()
        with Store(p.db) as store:
            [session] = [s for s, _ in store.list_sessions() if s.source_format == "proxy"]
            found = breakdown(store, session.id)
            budget = SessionContext.load(store, session.id).budget()
    reminders = found.of("reminders")
    assert [(e.name, e.where, e.text) for e in reminders] == [
        ("The user opened src/app.py in the IDE.", "message #1", reminder), ("Your todo list is empty.", "message #3", todo)]
    assert found.totals()["reminders"] == sum(e.tokens for e in reminders) > 0
    assert budget.components["reminders"] > 0
    memory = found.of("memory")  # the CLAUDE.md section of the system prompt (proxy_support.SYSTEM)
    assert [(e.name, e.where) for e in memory] == [("/repo/CLAUDE.md", "system block 2"),
                                                   ("(around the memory files)", "system block 2")]
    assert memory[0].text == "Contents of /repo/CLAUDE.md:\nAlways run the tests." and memory[1].text == "# claudeMd\n"
    assert [e.name for e in found.of("tools_mcp")] == ["mcp__notes__search"]
