"""A policy on real Claude Code: ``workbench wrap --policy`` against the loopback Messages API, in a session that
reads the same file in every turn (``-p``, then ``--resume`` with a new question each time).

With the policy on, a later request Claude Code sends upstream holds the earlier duplicate read as the placeholder,
``history`` lists the policy's change with the request it reached, and after ``workbench undo`` the next request
has the read's output again. The policy is a user's own (``[policies.eager]``): it sends its edits at once
(a payback longer than the session), where the built-in one would wait for a cold cache, five minutes away.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from claude_code_agent import KEY, SECRET_WORD, model
from loopback_api import LoopbackAPI

from workbench.engine.context.effective import PRUNED_PLACEHOLDER
from workbench.engine.transcript.store import Store

CONFIG = '[policies.eager]\npayback = 1000\nplan_every = 1\nprotect_turns = 1\n'


def wrap(db: Path, upstream: str, home: Path, work: Path, claude: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "WORKBENCH_CONFIG": str(home / "config.toml")}
    env.pop("ANTHROPIC_BASE_URL", None)
    command = [sys.executable, "-m", "workbench", "--db", str(db), "wrap", "--upstream", upstream, "--policy", "eager",
               "--", str(claude), *args, "--allowedTools", "Read", "--output-format", "json"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=180)
    if done.returncode != 0 or "stored session proxy-" not in done.stderr:
        raise RuntimeError(f"workbench wrap failed: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def reads(body: dict[str, Any]) -> dict[str, Any]:
    """Each tool result of a request by its call's id."""
    return {b["tool_use_id"]: b["content"] for m in body["messages"] if isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}


def test_claude_code_gets_the_policys_placeholder_and_the_read_back_after_undo(tmp_path: Path, claude: Path) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(CONFIG)
    filler = "".join(f"Line {n}: nothing more to say here, the word is above.\n" for n in range(150))
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n{filler}")  # worth pruning
    with LoopbackAPI() as api:
        api.queue(*([model(work)] * 60))
        first = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        for question in ("Say it again?", "And once more?"):
            wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", question)
        agent = [body for body in api.bodies if body.get("tools")]
        first_read = next(iter(reads(agent[1])))
        pruned = [n for n, body in enumerate(agent) if reads(body).get(first_read) == PRUNED_PLACEHOLDER]
        assert pruned, "a later request carried the first read as the placeholder"
        assert all(SECRET_WORD in json.dumps(reads(agent[-1])[k]) for k in list(reads(agent[-1]))[1:]), \
            "the newest read is sent whole"
        for n in pruned:  # the steered requests still answer every call (Claude Code's own ending is its own)
            uses = {b["id"] for m in agent[n]["messages"] if isinstance(m.get("content"), list)
                    for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}
            assert uses == set(reads(agent[n]))
        with Store(db) as store:
            [session] = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session") == first["session_id"]]
        env = {**os.environ, "WORKBENCH_CONFIG": str(home / "config.toml")}
        listed = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "history", session.id, "--json"],
                                capture_output=True, text=True, env=env, check=True)
        applied = [e for e in json.loads(listed.stdout)["history"] if e["origin"] == "policy" and e["state"] == "applied"]
        assert applied and all(isinstance(e["request"], int) for e in applied), "history names the request it reached"
        undone = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "undo", session.id],
                                capture_output=True, text=True, env=env)
        assert undone.returncode == 0, undone.stderr
        before = len(api.bodies)
        wrap(db, api.url, home, work, claude, "--resume", first["session_id"], "-p", "Last time?")
        resumed = next(body for body in api.bodies[before:] if body.get("tools"))
        assert SECRET_WORD in json.dumps(reads(resumed)[first_read]), "after undo the read goes whole again"
