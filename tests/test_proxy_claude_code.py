"""Claude Code itself through ``workbench wrap``, against the loopback Messages API: a tool-using session
is stored with its system prompt and tools attributed, and a tool result pruned in the workbench is
gone from the very next request Claude Code sends when the session is resumed; a result offloaded in the
workbench is read back by Claude Code's own Read tool from the file the proxy wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from claude_code_agent import KEY, SECRET_WORD, has_result, model, size, wrap
from loopback_api import LoopbackAPI, Reply, check_wire_messages, text, tool_use

from workbench.engine.context.breakdown import breakdown
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.request_diff import request_diff
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction_prompt import SUMMARY_PREFIX
from workbench.engine.sources.session_list import session_list
from workbench.engine.transcript.request_store import list_requests
from workbench.engine.transcript.store import Store


def test_claude_code_through_wrap_is_attributed_and_steered_on_resume(tmp_path: Path, claude: Path) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    with LoopbackAPI() as api:
        api.queue(*([model(work)] * 40))
        first = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        assert SECRET_WORD in first["result"]
        with Store(db) as store:
            [session] = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session") == first["session_id"]]
            ctx = SessionContext.load(store, session.id)
            budget = ctx.budget()
            assert budget.components["system"] > 1000, "Claude Code's system prompt is attributed"
            assert budget.components["tools"] > 1000, "its tool definitions too"
            assert budget.output_reserve == api.bodies[-1]["max_tokens"]
            assert str(session.metadata.get("agent_transcript", "")).endswith(f"{first['session_id']}.jsonl")
            [listed] = [row for row in session_list(store) if row.session.id == session.id]
            assert (listed.directory, listed.agent_session) == (str(work), first["session_id"]), \
                "the session list tells it apart by where Claude Code worked and its own session id"
            results = [m for m in ctx.messages if m.tool_results()]
            assert results, "the Read result is in the proxied session"
            target = results[-1]
        pruned = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "prune", session.id, target.id],
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, "WORKBENCH_CONFIG": str(home / "none.toml")})
        assert pruned.returncode == 0, pruned.stderr
        sent_before = len(api.bodies)
        second = wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", "Say it again?")
        assert second["session_id"] == first["session_id"]
        resumed = api.bodies[sent_before]
    results_sent = [b for m in resumed["messages"] if isinstance(m.get("content"), list)
                    for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    old = [b for b in results_sent if b["tool_use_id"] == target.tool_results()[0].tool_use_id]
    assert old and old[0]["content"] == PRUNED_PLACEHOLDER, "the pruned result is replaced in the next request"
    assert any(SECRET_WORD in json.dumps(b["content"]) for b in results_sent if b not in old) or len(results_sent) == 1
    with Store(db) as store:
        sessions = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session") == first["session_id"]]
        assert session.id in [s.id for s in sessions], "the resumed requests joined the same proxied session"
        found = breakdown(store, session.id)
        sent_tools = [tool["name"] for tool in api.bodies[-1]["tools"]]
        assert [e.name for e in (*found.of("tools"), *found.of("tools_mcp"))] == sent_tools
        resumed_seq = next(row.seq for row in list_requests(store, session.id) if row.edited)
        replaced = request_diff(store, session.id, resumed_seq).of("replaced")
        assert [(c.text, c.new) for c in replaced] == [(PRUNED_PLACEHOLDER, True)], "the prune, as the wire got it"
    for path in tmp_path.rglob("*"):
        if path.is_file() and "node_modules" not in path.parts and ".claude" not in path.parts:
            assert KEY.encode() not in path.read_bytes(), path


def reads_back_offloaded(work: Path) -> Any:
    """A model that reads big.txt, and once a result of it has been offloaded, reads the offload file."""
    def respond(body: dict[str, Any]) -> Reply:
        names = [t.get("name") for t in body.get("tools") or []]
        if "Read" not in names:
            return Reply([text('{"title": "Reading big"}')], input_tokens=120, output_tokens=8)
        if has_result(body):
            return Reply([text("Done reading.")], input_tokens=size(body), output_tokens=5)
        found = OFFLOAD_PATH.search(json.dumps(body["messages"]))
        path = found.group(1) if found else str(work / "big.txt")
        turn = len(body["messages"])
        return Reply([tool_use(f"toolu_{turn:02d}", "Read", {"file_path": path})], input_tokens=size(body),
                     output_tokens=20)
    return respond


OFFLOAD_PATH = re.compile(r"The whole output is in (/[^\s:]+\.txt)")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if isinstance(m.get("content"), list) for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def test_claude_code_reads_an_offloaded_result_back_with_its_own_read_tool(tmp_path: Path, claude: Path) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "big.txt").write_text("".join(f"line {n:04d}: the {SECRET_WORD} counted to {n}\n" for n in range(400)))
    with LoopbackAPI() as api:
        api.queue(*([reads_back_offloaded(work)] * 40))
        first = wrap(db, api.url, home, work, claude, "-p", "Read big.txt")
        with Store(db) as store:
            [session] = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session") == first["session_id"]]
            assert session.metadata.get("agent_cwd") == str(work), "the working directory of Claude Code's prompt"
            assert session.metadata.get("read_tool") == "Read"
            ctx = SessionContext.load(store, session.id)
            target = next(m for m in ctx.messages if m.tool_results())
            original = target.tool_results()[0].text
        assert f"line 0399: the {SECRET_WORD}" in original
        offloaded = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "offload", session.id,
                                    target.id], capture_output=True, text=True, timeout=60,
                                   env={**os.environ, "WORKBENCH_CONFIG": str(home / "none.toml")}, check=False)
        assert offloaded.returncode == 0, offloaded.stderr
        sent_before = len(api.bodies)
        second = wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", "Read it again")
        assert second["session_id"] == first["session_id"]
        resumed = [b for b in api.bodies[sent_before:] if "Read" in [t.get("name") for t in b.get("tools") or []]]
    reference = next(result_text(b) for b in tool_results(resumed[0])
                     if b["tool_use_id"] == target.tool_results()[0].tool_use_id)
    found = OFFLOAD_PATH.search(reference)
    assert found and len(reference) < len(original) / 4, "Claude Code's next request carries the reference"
    path = Path(found.group(1))
    assert path.parent == work / ".workbench" / "offload" and path.read_text() == original
    calls = [b for m in resumed[-1]["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
             for b in m["content"] if b.get("type") == "tool_use"]
    assert calls[-1]["name"] == "Read" and calls[-1]["input"] == {"file_path": str(path)}, "the offload file is read"
    [read_back] = [result_text(b) for b in tool_results(resumed[-1]) if b["tool_use_id"] == calls[-1]["id"]]
    for line in original.splitlines():
        assert line in read_back, "Claude Code's Read of the offload file gave it the original result"


def _workbench(db: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "WORKBENCH_CONFIG": str(home / "none.toml")}, check=False)


def _proxied_session(db: Path, agent_session: str) -> str:
    with Store(db) as store:
        [session] = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session") == agent_session]
        return session.id


def test_claude_code_continues_on_a_compacted_history_and_on_the_full_one_after_undo(
    tmp_path: Path, claude: Path
) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    (home / "none.toml").write_text("[compaction]\ntail_min = 0\ntail_max = 300\nkeep_recent_tokens = 200\n"
                                    "keep_recent_messages = 2\n")
    with LoopbackAPI() as api:
        api.queue(*([model(work)] * 80))
        first = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        agent = first["session_id"]
        wrap(db, api.url, home, work, claude, "--resume", agent, "-p", "Read it again, please.")
        session_id = _proxied_session(db, agent)
        applied = _workbench(db, home, "compact", session_id, "--apply")
        assert applied.returncode == 0, applied.stderr

        sent_before = len(api.bodies)
        third = wrap(db, api.url, home, work, claude, "--resume", agent, "-p", "And once more?")
        assert SECRET_WORD in third["result"], "Claude Code completed the turn on the compacted history"
        compacted = api.bodies[sent_before:]
        main = [b for b in compacted if any(t.get("name") == "Read" for t in b.get("tools") or [])]
        assert main, "Claude Code's own requests went through"
        for body in main:
            opening = body["messages"][0]["content"]
            assert isinstance(opening, list) and opening[0]["text"].startswith(SUMMARY_PREFIX), "the summary first"
            check_wire_messages([{**m, "content": [{"type": "text", "text": m["content"]}]}
                                 if isinstance(m["content"], str) else m for m in body["messages"]])
        full_then = len(main[0]["messages"])

        undone = _workbench(db, home, "compact", session_id, "--undo")
        assert undone.returncode == 0, undone.stderr
        sent_before = len(api.bodies)
        fourth = wrap(db, api.url, home, work, claude, "--resume", agent, "-p", "Last time?")
        assert SECRET_WORD in fourth["result"], "Claude Code completed the turn on the full history"
        restored = [b for b in api.bodies[sent_before:] if any(t.get("name") == "Read" for t in b.get("tools") or [])]
        assert restored[0]["messages"][0]["content"][0].get("text", "").startswith(SUMMARY_PREFIX) is False
        assert len(restored[0]["messages"]) > full_then, "the full history again"
        assert any(b.get("type") == "text" and "What does hello.txt say?" in b.get("text", "")
                   for b in restored[0]["messages"][0]["content"]), "from its first message on"
        assert _proxied_session(db, agent) == session_id, "one session throughout"


def test_claude_code_pinned_result_is_refused_for_pruning_and_sent_as_written(tmp_path: Path, claude: Path) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    with LoopbackAPI() as api:
        api.queue(*([model(work)] * 40))
        first = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        session_id = _proxied_session(db, first["session_id"])
        with Store(db) as store:
            target = [m for m in store.load_messages(session_id) if m.tool_results()][-1]
        position = str(target.index + 1)
        assert _workbench(db, home, "pin", session_id, position).returncode == 0
        refused = _workbench(db, home, "prune", session_id, position)
        assert refused.returncode != 0
        [line] = refused.stderr.strip().splitlines()
        assert "pinned" in line and "unpin it to prune it" in line
        sent_before = len(api.bodies)
        second = wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", "Say it again?")
        assert SECRET_WORD in second["result"]
        resumed = api.bodies[sent_before]
    tool_id = target.tool_results()[0].tool_use_id
    [sent] = [b for m in resumed["messages"] if isinstance(m.get("content"), list)
              for b in m["content"] if isinstance(b, dict) and b.get("tool_use_id") == tool_id]
    assert SECRET_WORD in json.dumps(sent["content"]), "the pinned result reached the model as written"


def test_claude_code_continues_without_an_archived_call_and_gets_it_back_after_unarchive(
    tmp_path: Path, claude: Path
) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    with LoopbackAPI() as api:
        api.queue(*([model(work)] * 80))
        first = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        agent = first["session_id"]
        session_id = _proxied_session(db, agent)
        with Store(db) as store:
            call = next(m for m in store.load_messages(session_id) if m.role == "assistant" and m.tool_uses())
        tool_id = call.tool_uses()[0].id
        archived = _workbench(db, home, "archive", session_id, call.id)
        assert archived.returncode == 0, archived.stderr

        sent_before = len(api.bodies)
        second = wrap(db, api.url, home, work, claude, "--resume", agent, "-p", "Read it again, please.")
        assert SECRET_WORD in second["result"], "Claude Code completed the turn without the archived call"
        main = [b for b in api.bodies[sent_before:] if any(t.get("name") == "Read" for t in b.get("tools") or [])]
        assert main, "Claude Code's own requests went through"
        for body in main:
            assert tool_id not in json.dumps(body["messages"]), "the archived call and its result left the request"
            # Claude Code sends a message of its own with the role "system" (its agent types), as the agent sent it.
            check_wire_messages([{**m, "content": [{"type": "text", "text": m["content"]}]}
                                 if isinstance(m["content"], str) else m for m in body["messages"] if m["role"] != "system"])

        assert _workbench(db, home, "unarchive", session_id, call.id).returncode == 0
        sent_before = len(api.bodies)
        third = wrap(db, api.url, home, work, claude, "--resume", agent, "-p", "Once more?")
        assert SECRET_WORD in third["result"]
        back = next(b for b in api.bodies[sent_before:] if any(t.get("name") == "Read" for t in b.get("tools") or []))
        assert tool_id in json.dumps(back["messages"]), "unarchived: the call is in the next request again"
        assert _proxied_session(db, agent) == session_id, "one session throughout"


ARCHIVE_PATH = re.compile(r"are in a file written by the workbench: (/\S+\.txt) \(")


def reads_back_archived(work: Path) -> Any:
    """A model that reads hello.txt, and once its history carries an archive's digest, the file the digest names."""
    def respond(body: dict[str, Any]) -> Reply:
        names = [t.get("name") for t in body.get("tools") or []]
        if "Read" not in names:
            return Reply([text('{"title": "Reading the archive"}')], input_tokens=120, output_tokens=8)
        if has_result(body):
            return Reply([text("Done reading.")], input_tokens=size(body), output_tokens=5)
        found = ARCHIVE_PATH.search(json.dumps(body["messages"]))
        path = found.group(1) if found else str(work / "hello.txt")
        turn = len(body["messages"])
        return Reply([tool_use(f"toolu_{turn:02d}", "Read", {"file_path": path})], input_tokens=size(body),
                     output_tokens=20)
    return respond


def test_claude_code_reads_an_archive_back_with_its_own_read_tool(tmp_path: Path, claude: Path) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text("".join(f"line {n}: the word is {SECRET_WORD}\n" for n in range(30)))
    (home / "archive.toml").write_text("[strategies.archive]\ncutoff = 0\n")
    with LoopbackAPI() as api:
        api.queue(*([reads_back_archived(work)] * 80))
        first = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        agent = first["session_id"]
        session_id = _proxied_session(db, agent)
        with Store(db) as store:
            call = next(m for m in store.load_messages(session_id) if m.role == "assistant" and m.tool_uses())
            [result] = [p for m in store.load_messages(session_id) for p in m.tool_results()]
        tool_id = call.tool_uses()[0].id
        archived = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "apply", session_id,
                                   "--strategy", "archive"], capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "WORKBENCH_CONFIG": str(home / "archive.toml")}, check=False)
        assert archived.returncode == 0, archived.stderr

        sent_before = len(api.bodies)
        second = wrap(db, api.url, home, work, claude, "--resume", agent, "-p", "What did you read before?")
        assert second["session_id"] == agent
        main = [b for b in api.bodies[sent_before:] if any(t.get("name") == "Read" for t in b.get("tools") or [])]
    assert main and tool_id not in json.dumps(main[0]["messages"]), "the archived call and its result left the request"
    found = ARCHIVE_PATH.search(json.dumps(main[0]["messages"]))
    assert found, "Claude Code's next request carries the digest naming the file"
    path = Path(found.group(1))
    held = path.read_text()
    assert path.parent == work / ".workbench" / "archive" and result.text in held and tool_id in held
    assert str(work / "hello.txt") in held, "the call's input is in the file with its result"
    calls = [b for m in main[-1]["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
             for b in m["content"] if b.get("type") == "tool_use"]
    assert calls[-1]["name"] == "Read" and calls[-1]["input"] == {"file_path": str(path)}, "the archive file is read"
    [read_back] = [result_text(b) for b in tool_results(main[-1]) if b["tool_use_id"] == calls[-1]["id"]]
    assert f"line 29: the word is {SECRET_WORD}" in read_back
    for line in held.splitlines():
        assert line in read_back, "Claude Code's Read of the archive file gave it the archived call and result"
