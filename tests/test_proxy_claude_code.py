"""Claude Code itself through ``workbench wrap``, against the loopback Messages API: a tool-using session
is stored with its system prompt and tools attributed, and a tool result pruned in the workbench is
gone from the very next request Claude Code sends when the session is resumed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO_ROOT
from loopback_api import LoopbackAPI, Reply, text, tool_use

from workbench.engine.context import SessionContext
from workbench.engine.projection import PRUNED_PLACEHOLDER
from workbench.engine.store import Store

AGENTS = REPO_ROOT / "tests" / "e2e"
CLAUDE = AGENTS / "node_modules" / ".bin" / "claude"
KEY = "sk-ant-api03-e2e-planted-key-9876543210"
SECRET_WORD = "pelican"


@pytest.fixture(scope="session")
def claude() -> Path:
    """The pinned Claude Code (``tests/e2e/package.json``), installed with npm when it is not there yet."""
    if not CLAUDE.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("needs node and npm to install Claude Code")
        subprocess.run([npm, "ci" if (AGENTS / "package-lock.json").exists() else "install", "--no-audit",
                        "--no-fund"], cwd=AGENTS, check=True, capture_output=True, timeout=600)
    return CLAUDE


def has_result(body: dict[str, Any]) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def model(work: Path) -> Any:
    """A model that reads the file once per question, then answers from what it read."""
    def respond(body: dict[str, Any]) -> Reply:
        names = [t.get("name") for t in body.get("tools") or []]
        if "Read" in names and not has_result(body):
            turn = len(body.get("messages") or [])
            return Reply([text("Let me read it."), tool_use(f"toolu_{turn:02d}", "Read",
                                                            {"file_path": str(work / "hello.txt")})],
                         input_tokens=9000, output_tokens=30, cache_read_input_tokens=0)
        if has_result(body):
            return Reply([text(f"The file says the word is {SECRET_WORD}.")], input_tokens=9400, output_tokens=12)
        return Reply([text('{"title": "Reading hello"}')], input_tokens=120, output_tokens=8)
    return respond


def wrap(db: Path, upstream: str, home: Path, work: Path, claude: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "WORKBENCH_CONFIG": str(home / "none.toml")}
    env.pop("ANTHROPIC_BASE_URL", None)
    command = [sys.executable, "-m", "workbench", "--db", str(db), "wrap", "--upstream", upstream, "--",
               str(claude), *args, "--allowedTools", "Read", "--output-format", "json"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "stored session proxy-" in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


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
    for path in tmp_path.rglob("*"):
        if path.is_file() and "node_modules" not in path.parts and ".claude" not in path.parts:
            assert KEY.encode() not in path.read_bytes(), path
