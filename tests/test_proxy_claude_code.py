"""Claude Code itself through ``workbench wrap``, against the loopback Messages API: a tool-using session
is stored with its system prompt and tools attributed, and a tool result pruned in the workbench is
gone from the very next request Claude Code sends when the session is resumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from claude_code_agent import KEY, SECRET_WORD, install_claude, model, wrap
from loopback_api import LoopbackAPI

from workbench.engine.context.breakdown import breakdown
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.request_diff import request_diff
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.request_store import list_requests
from workbench.engine.transcript.store import Store


@pytest.fixture(scope="session")
def claude() -> Path:
    found = install_claude()
    if found is None:
        pytest.skip("needs node and npm to install Claude Code")
    return found


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
