"""Real Claude Code compacts through the proxy (issue #42): ``/compact``, then a prompt that continues from
the summary; the workbench checks the agent's own summary against what it replaced and reports what it lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from claude_code_agent import SECRET_WORD, model, wrap
from loopback_api import LoopbackAPI, Reply, text

from workbench.engine.transcript.store import Store

NAME = "frobnicate_v2"
"""A name the user introduces and the agent's summary leaves out."""
SUMMARY = "The user asked what hello.txt says; the agent read it: the word is pelican."


def summarising(work: Path) -> Any:
    """``model``, except that a request for a summary is answered with one that forgets the user's name."""
    reading = model(work)

    def respond(body: dict[str, Any]) -> Reply:
        if "detailed summary of the conversation" in json.dumps(body.get("messages") or [])[-20_000:]:
            return Reply([text(f"<analysis>Short.</analysis>\n<summary>{SUMMARY}</summary>")], input_tokens=900,
                         output_tokens=40)
        return reading(body)

    return respond


def test_the_agents_own_compaction_is_checked(tmp_path: Path, claude: Path) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    with LoopbackAPI() as api:
        api.queue(*([summarising(work)] * 40))
        first = wrap(db, api.url, home, work, claude, "-p", f"What does hello.txt say? Call the result {NAME}.")
        wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", "/compact")
        wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", "Say it again?")
    assert any(SUMMARY in json.dumps(b["messages"][:1]) for b in api.bodies), "a request continued from the summary"
    with Store(db) as store:
        [session] = [s.id for s, _ in store.list_sessions()
                     if s.metadata.get("agent_session") == first["session_id"] and not s.metadata.get("side_call")]
    listed = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "compactions", session, "--json"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "WORKBENCH_CONFIG": str(home / "none.toml")})
    assert listed.returncode == 0, listed.stderr
    checked = [e["facts"] for e in json.loads(listed.stdout) if e["facts"] is not None]
    assert checked, listed.stdout
    facts = checked[-1]
    # The name is lost; the file read and the question are in the summary; Claude Code's own request for the
    # summary (its "do not call any tools" instructions) is not part of what the summary replaced.
    assert [(f["kind"], f["text"]) for f in facts["lost"]] == [("identifier", NAME)]
    assert facts["kept"] >= 1
