"""Edits queued until a proxied agent's cache is cold: the command line says queued, the history lists them
as queued until the proxy applies them (then with the request's number), a queued edit can be cancelled,
and each applies exactly once. Checked on what the loopback upstream received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
from loopback_api import Reply, text
from proxy_support import Proxied, proxied, request
from test_proxy_cache import turns

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.plans.edit_price import CACHE_LIFETIME
from workbench.engine.transcript.store import Store


def workbench(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_CONFIG": str(db.parent / "none.toml")}
    return subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=60, env=env, check=False)


def as_json(db: Path, *args: str) -> Any:
    done = workbench(db, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cool_down(p: Proxied) -> None:
    """Five minutes pass without a request: the agent's cache is cold."""
    for group in p.server.recorder.threads.groups().values():
        for thread in group:
            assert thread.last_request_at is not None
            thread.last_request_at -= CACHE_LIFETIME + timedelta(seconds=1)


class Agent:
    """The anthropic SDK through the proxy, one more turn each time."""

    def __init__(self, p: Proxied, rounds: int) -> None:
        self.p, self.history, self.turn = p, turns(rounds), 0
        self.api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)

    def send(self) -> list[dict[str, Any]]:
        self.p.api.queue(Reply([text(f"answer {self.turn}")]))
        self.api.messages.create(**request(self.history))
        self.history += [{"role": "assistant", "content": [text(f"answer {self.turn}")]},
                         {"role": "user", "content": f"next {self.turn}"}]
        self.turn += 1
        self.p.settle()
        messages: list[dict[str, Any]] = self.p.api.bodies[-1]["messages"]
        return messages


def first_session(db: Path) -> tuple[str, list[str]]:
    with Store(db) as store:
        session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
        return session_id, [m.id for m in store.load_messages(session_id)]


def result_of(messages: list[dict[str, Any]], index: int) -> Any:
    return messages[index]["content"][0]["content"]


def test_a_queued_edit_is_listed_as_queued_then_applied_once_with_its_request_number(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        agent = Agent(p, 2)
        agent.send()
        session_id, ids = first_session(p.db)
        done = workbench(p.db, "prune", session_id, ids[2], "--when-cache-cold")
        assert done.returncode == 0, done.stderr
        assert "queued prune: 1 change(s)" in done.stdout and "applied" not in done.stdout
        [entry] = as_json(p.db, "history", session_id)["history"]
        assert (entry["state"], entry["request"], entry["undone"]) == ("queued", None, False)
        assert "queued" in workbench(p.db, "history", session_id).stdout
        [listed] = as_json(p.db, "queued", session_id)["queued"]
        assert listed["plan_id"] == entry["plan_id"] and listed["message_ids"] == [ids[2]]
        assert workbench(p.db, "queued", session_id).stdout.startswith("  1  ")

        assert result_of(agent.send(), 2) != PRUNED_PLACEHOLDER, "request 2: the cache is warm, the edit waits"
        assert as_json(p.db, "history", session_id)["history"][0]["state"] == "queued"

        cool_down(p)
        assert result_of(agent.send(), 2) == PRUNED_PLACEHOLDER, "request 3 found the cache cold"
        [entry] = as_json(p.db, "history", session_id)["history"]
        assert (entry["state"], entry["request"]) == ("applied", 3)
        assert "applied from request 3" in workbench(p.db, "history", session_id).stdout
        assert as_json(p.db, "queued", session_id)["queued"] == []
        with Store(p.db) as store:
            [event] = store.load_overlay(session_id)
        activated = event.data["activated_at"]

        cool_down(p)
        assert result_of(agent.send(), 2) == PRUNED_PLACEHOLDER, "request 4 (cold again) carries it"
        assert result_of(agent.send(), 2) == PRUNED_PLACEHOLDER, "and request 5"
        with Store(p.db) as store:
            [event] = store.load_overlay(session_id)
        assert event.data["activated_at"] == activated and event.data["activated_seq"] == 3, "applied once"
        [entry] = as_json(p.db, "history", session_id)["history"]
        assert (entry["state"], entry["request"]) == ("applied", 3)
        assert [b["messages"][2]["content"][0]["content"] == PRUNED_PLACEHOLDER for b in p.api.bodies] == \
            [False, False, True, True, True]


def test_a_cancelled_edit_never_reaches_the_agent_and_an_applied_one_cannot_be_cancelled(tmp_path: Path) -> None:
    with proxied(tmp_path) as p:
        agent = Agent(p, 2)
        agent.send()
        session_id, ids = first_session(p.db)
        for message_id in (ids[2], ids[4]):
            assert workbench(p.db, "prune", session_id, message_id, "--when-cache-cold").returncode == 0
        first, second = as_json(p.db, "queued", session_id)["queued"]
        done = workbench(p.db, "queued", session_id, "--cancel", "1")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("cancelled prune (1 change(s))") and second["plan_id"] in done.stdout
        [left] = as_json(p.db, "queued", session_id)["queued"]
        assert left["plan_id"] == second["plan_id"]
        states = {e["plan_id"]: e["state"] for e in as_json(p.db, "history", session_id)["history"]}
        assert states == {first["plan_id"]: "cancelled", second["plan_id"]: "queued"}

        cool_down(p)
        sent = agent.send()
        assert result_of(sent, 2) != PRUNED_PLACEHOLDER, "the cancelled edit never reached the agent"
        assert result_of(sent, 4) == PRUNED_PLACEHOLDER, "the other one applied"
        done = workbench(p.db, "queued", session_id, "--cancel", second["plan_id"])
        assert done.returncode != 0 and done.stderr.strip().count("\n") == 0
        assert "no queued edit" in done.stderr
