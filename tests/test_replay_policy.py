"""A policy run by the proxy: the strategies planned off the request's path, their edits sent when they pay, in
``history`` with origin ``policy``, and undone from the command line.

The proxy as a real server, the real ``anthropic`` SDK, the loopback API recording what it received. The agent
reads the same file in its first and its fourth turn; a policy that leaves the newest two turns alone prunes the
first read's output, and the next request the upstream receives holds the placeholder in its place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest
from loopback_api import Reply, text, tool_use
from proxy_support import TOOLS, proxied

from workbench.engine.context.effective import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.plan import history
from workbench.engine.plans.replay import Policy, policy_named
from workbench.engine.settings.config import Config, load_config
from workbench.engine.transcript.store import Store

MODEL = "claude-opus-4-6"
REPO = Path(__file__).resolve().parents[1]
CONFIG_BODY = "".join(f"setting_{n} = {n * 7}  # what it controls\n" for n in range(300))


class Agent:
    def __init__(self, url: str) -> None:
        self.client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        self.messages: list[dict[str, Any]] = []
        self.calls = 0

    def turn(self, question: str, *paths: str) -> None:
        """A user question, the model's reads of ``paths`` with their results, and its answer."""
        if self.messages:
            self.messages.append({"role": "assistant", "content": [text("done")]})
        self.messages.append({"role": "user", "content": [text(question)]})
        for path in paths:
            self.calls += 1
            call_id = f"toolu_{self.calls:03d}"
            self.messages.append({"role": "assistant", "content": [tool_use(call_id, "Read", {"file_path": path})]})
            body = CONFIG_BODY if path == "config.py" else f"contents of {path}\n"
            self.messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                                               "content": body}]})

    def send(self) -> None:
        messages = [{**m, "content": list(m["content"])} for m in self.messages]
        messages[-1]["content"][-1] = {**messages[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
        self.client.messages.create(model=MODEL, max_tokens=1024, system="You are a careful coding agent.",
                                    tools=TOOLS, messages=messages)  # type: ignore[arg-type]


def outputs(body: dict[str, Any]) -> list[Any]:
    """The content of every tool result in a request, in order."""
    return [block["content"] for message in body["messages"] if isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "tool_result"]


def test_a_policy_prunes_an_earlier_duplicate_read_on_the_wire_and_undo_redo_work(tmp_path: Path) -> None:
    # Paying at once (a payback longer than this session) so that the edit goes with the next request: waiting
    # for a cold cache would take five minutes of real time.
    policy = Policy(name="eager", payback=1000, plan_every=1)
    with proxied(tmp_path) as p:
        p.api.queue(*[Reply([text("done")]) for _ in range(10)])
        p.server.recorder.run_policy(policy, Config())
        agent = Agent(p.url)
        for n, paths in enumerate([("config.py",), ("a.py",), ("b.py",), ("config.py",)]):
            agent.turn(f"Turn {n}: look at it.", *paths)
            agent.send()
            p.settle()
        assert outputs(p.api.bodies[3])[0] == CONFIG_BODY, "nothing is pruned before the duplicate is known"
        for n in (4, 5):  # planned while request 5 waits (on what the store holds: requests 1-4), sent with 6
            agent.turn(f"Turn {n}: and now?", f"c{n}.py")
            agent.send()
            p.settle()
        assert outputs(p.api.bodies[4])[0] == CONFIG_BODY
        sent = outputs(p.api.bodies[5])
        assert sent[0] == PRUNED_PLACEHOLDER, "the first read's output went upstream as the placeholder"
        assert sent[3] == CONFIG_BODY, "the newest read is kept"
        with Store(p.db) as store:
            session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        found = subprocess.run([sys.executable, "-m", "workbench", "--db", str(p.db), "history", session_id,
                                "--json"], capture_output=True, text=True, env=env, check=True)
        entries = [e for e in json.loads(found.stdout)["history"] if e["origin"] == "policy"]
        assert [e["request"] for e in entries if e["state"] == "applied"] == [6]
        undone = subprocess.run([sys.executable, "-m", "workbench", "--db", str(p.db), "undo", session_id],
                                capture_output=True, text=True, env=env)
        assert undone.returncode == 0, undone.stderr
        p.server.recorder.policy = None  # the policy would plan the same edit again
        agent.turn("Turn 6: once more.")
        agent.send()
        p.settle()
        assert outputs(p.api.bodies[6])[0] == CONFIG_BODY, "after undo, the next request has the output again"
        redone = subprocess.run([sys.executable, "-m", "workbench", "--db", str(p.db), "redo", session_id],
                                capture_output=True, text=True, env=env)
        assert redone.returncode == 0, redone.stderr
        agent.turn("Turn 7: and again.")
        agent.send()
        p.settle()
        assert outputs(p.api.bodies[7])[0] == PRUNED_PLACEHOLDER, "redo sends the policy's edit again"


def test_a_policy_queued_without_paying_waits_and_changes_nothing(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        p.api.queue(*[Reply([text("done")]) for _ in range(10)])
        p.server.recorder.run_policy(Policy(name="patient", payback=1, plan_every=1), Config())
        agent = Agent(p.url)
        for n, paths in enumerate([("config.py",), ("a.py",), ("b.py",), ("config.py",), ("c.py",)]):
            agent.turn(f"Turn {n}: look at it.", *paths)
            agent.send()
            p.settle()
        assert outputs(p.api.bodies[-1])[0] == CONFIG_BODY, "an edit that does not pay waits for a cold cache"
        with Store(p.db) as store:
            session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
            entries = [e for e in history(SessionContext.load(store, session_id)) if e.origin == "policy"]
        assert [e.state for e in entries][-1] == "queued"
        assert sum(e.state == "queued" for e in entries) == 1, "one plan waits, holding every edit found"


def test_policies_come_from_the_config_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[proxy]\npolicy = "mine"\n\n[policies.mine]\npayback = 10\nstrategies = ["dedup"]\n')
    config = load_config(path)
    assert config.proxy.policy == "mine"
    mine = policy_named("mine", config.policies)
    assert mine.name == "mine" and mine.payback == 10 and mine.strategies == ["dedup"]
    assert Config().proxy.policy is None, "no policy unless the user asks"
    with pytest.raises(WorkbenchError, match="no policy 'other'"):
        policy_named("other", config.policies)
