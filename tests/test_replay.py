"""``workbench replay``: a past session billed request by request under the prompt cache's rules, without and
with a policy.

A Claude Code-like client (a mark on the system prompt and on the last block of its last message) runs a session
through the proxy, with the real ``anthropic`` SDK, against the loopback API with a prompt cache that bills as the
API does (``loopback_cache``). Replayed without a policy, each request must be billed as the upstream billed it.
Time passing between requests is the upstream's clock moved on, and the same moves written into the stored
requests' times: the proxy stamps a request with the real clock, which a test cannot wait ten minutes for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import pytest
from loopback_api import tool_use
from loopback_cache import Bill, PromptCache
from proxy_support import TOOLS, proxied

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.replay import from_store, from_transcript, policy_named, replay
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.store import Store

MODEL = "claude-opus-4-6"
FIXTURES = Path(__file__).parent / "fixtures"
TRANSCRIPTS = sorted(FIXTURES.glob("claude-code__*.jsonl"))
REPO = Path(__file__).resolve().parents[1]
API_MESSAGES = {"short.jsonl": 1, "subagent.jsonl": 12, "258c7280-ae70-4798-800f-63464d01a85d.jsonl": 152,
                "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": 217, "session-196820da.jsonl": 47}
"""Distinct ``message.id`` of the main thread's assistant lines, as ``fixtures/README.md`` counts them."""


def system() -> list[dict[str, Any]]:
    return [{"type": "text", "text": "You are a careful coding agent. " * 40, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "# claudeMd\nAlways run the tests."}]


def read(n: int, path: str) -> dict[str, Any]:
    return tool_use(f"toolu_{n:03d}", "Read", {"file_path": path})


def output(n: int, path: str) -> dict[str, Any]:
    body = "".join(f"def f_{line}(value):  # {path}\n    return value * {line}\n" for line in range(40))
    return {"type": "tool_result", "tool_use_id": f"toolu_{n:03d}", "content": body}


class Agent:
    """A client that grows one conversation and marks its last block, and names its session, as Claude Code
    does (its history leaves out the upstream's answers, so only its session id keeps its requests together)."""

    def __init__(self, url: str) -> None:
        self.client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        self.user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": str(uuid.uuid4())})
        self.messages: list[dict[str, Any]] = []
        self.calls = 0

    def ask(self, text: str) -> None:
        self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def reads(self, *paths: str) -> None:
        """The model's calls of Read on ``paths`` and their results, in one round."""
        first = self.calls
        self.calls += len(paths)
        self.messages.append({"role": "assistant", "content": [read(first + k, p) for k, p in enumerate(paths)]})
        self.messages.append({"role": "user", "content": [output(first + k, p) for k, p in enumerate(paths)]})

    def send(self) -> None:
        messages = [{**m, "content": list(m["content"])} for m in self.messages]
        messages[-1]["content"][-1] = {**messages[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
        self.client.messages.create(model=MODEL, max_tokens=1024, system=system(),  # type: ignore[arg-type]
                                    tools=TOOLS, messages=messages,  # type: ignore[arg-type]
                                    metadata={"user_id": self.user_id})


def shift_times(db: Path, session_id: str, offsets: list[timedelta]) -> None:
    """Stamp each stored request with the time the upstream's clock said when it billed it."""
    with Store(db) as store, store.transaction():
        rows = store.connection.execute("SELECT seq, created_at FROM requests WHERE session_id = ? ORDER BY seq",
                                        [session_id]).fetchall()
        assert len(rows) == len(offsets)
        for (seq, created), offset in zip(rows, offsets, strict=True):
            stamped = (datetime.fromisoformat(created) + offset).isoformat()
            store.connection.execute("UPDATE requests SET created_at = ? WHERE session_id = ? AND seq = ?",
                                     [stamped, session_id, seq])


def run_session(tmp_path: Path, script: list[tuple[str, Any]]) -> tuple[Path, str, list[Bill]]:
    """Run ``script`` (``ask`` TEXT, ``reads`` PATHS, ``wait`` MINUTES, ``send``) through the proxy; the session's
    database, its id and what the upstream billed for each request."""
    with proxied(tmp_path) as p:
        cache = PromptCache()
        p.api.queue(*(lambda body: cache.answer(body) for _ in range(50)))
        agent = Agent(p.url)
        offsets: list[timedelta] = []
        for step, value in script:
            if step == "wait":
                cache.offset += timedelta(minutes=value)
            elif step == "prune":
                p.settle()
                prune_result(p.db, value)
            elif step == "send":
                agent.send()
                offsets.append(cache.offset)
            else:
                getattr(agent, step)(*value) if isinstance(value, tuple) else getattr(agent, step)(value)
        p.settle()
        with Store(p.db) as store:
            session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
        shift_times(p.db, session_id, offsets)
        return p.db, session_id, cache.bills


def prune_result(db: Path, call_id: str) -> None:
    """The user prunes the result of ``call_id``: the proxy steers it from the next request on."""
    with Store(db) as store:
        session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
        ctx = SessionContext.load(store, session_id)
        target = next(m for m in ctx.messages if any(r.tool_use_id == call_id for r in m.tool_results()))
        apply(store, ctx, measure(ctx, plan_action(ctx, "prune", target, StrategiesConfig())))


def close(replayed: int, billed: int) -> bool:
    return abs(replayed - billed) <= 0.02 * billed


SESSION: list[tuple[str, Any]] = [
    ("ask", "Read the modules."), ("send", None),
    *[item for n in range(6) for item in (("reads", (f"src/m{n}.py",)), ("send", None))],
    ("reads", tuple(f"src/wide_{n}.py" for n in range(24))), ("send", None),  # 24 blocks: past the lookback
    ("reads", ("src/m0.py",)), ("send", None),
    ("wait", 10), ("reads", ("src/m1.py",)), ("send", None),  # the cache expired meanwhile
    ("reads", ("src/m2.py",)), ("send", None),
]


def test_a_replay_without_policy_bills_each_request_as_the_upstream_did(tmp_path: Path) -> None:
    db, session_id, bills = run_session(tmp_path, SESSION)
    with Store(db) as store:
        timeline = from_store(store, session_id)
    result = replay(timeline, policy_named("default"))
    assert len(result.steps) == len(bills) == 11
    for step, bill in zip(result.steps, bills, strict=True):
        got = step.without
        assert close(got.cache_read, bill.read), (step.number, got, bill)
        assert close(got.cache_write, bill.written), (step.number, got, bill)
        assert close(got.uncached, bill.uncached), (step.number, got, bill)
    assert bills[7].read < bills[6].read + bills[6].written - 100, "the wide round missed past the lookback"
    assert bills[9].read < bills[8].read, "the cache had expired"


def test_a_replay_follows_the_users_own_steering_as_the_wire_got_it(tmp_path: Path) -> None:
    script: list[tuple[str, Any]] = [("ask", "Read the modules."), ("send", None)]
    script += [item for n in range(5) for item in (("reads", (f"src/m{n}.py",)), ("send", None))]
    script += [("prune", "toolu_003"), ("reads", ("src/m9.py",)), ("send", None), ("reads", ("src/m8.py",)),
               ("send", None)]
    db, session_id, bills = run_session(tmp_path, script)
    with Store(db) as store:
        result = replay(from_store(store, session_id), policy_named("default"))
    assert bills[6].written > bills[5].written, "the prune broke the cache from the pruned result on"
    for step, bill in zip(result.steps, bills, strict=True):
        got = step.without
        assert close(got.cache_read, bill.read) and close(got.cache_write, bill.written), (step.number, got, bill)


def test_a_policy_prunes_duplicate_reads_when_the_cache_is_cold_and_costs_less(tmp_path: Path) -> None:
    script: list[tuple[str, Any]] = []
    for turn in range(4):
        script += [("ask", f"Turn {turn}: check the config."), ("reads", ("src/config.py", f"src/t{turn}.py")),
                   ("send", None), ("reads", (f"src/u{turn}.py",)), ("send", None)]
    script += [("wait", 10), ("ask", "Once more."), ("reads", ("src/config.py",)), ("send", None),
               *[item for n in range(4) for item in (("reads", (f"src/v{n}.py",)), ("send", None))]]
    db, session_id, _ = run_session(tmp_path, script)
    with Store(db) as store:
        timeline = from_store(store, session_id)
    result = replay(timeline, policy_named("default"))
    totals = result.totals()
    cold = next(step for step in result.steps if step.gap is not None and step.gap > 300)
    assert cold.edits > 0, "the cold request carried the batched edits"
    assert all(step.edits == 0 for step in result.steps if step.number != cold.number), "one break, not several"
    assert isinstance(totals["cost_with_policy"], float) and isinstance(totals["cost_without_policy"], float)
    assert totals["cost_with_policy"] < totals["cost_without_policy"]
    assert cold.with_policy.input < cold.without.input
    assert result.steps[-1].with_policy.cache_read > 0, "after the edit, the cache is read again"


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.name for p in TRANSCRIPTS])
def test_the_default_policy_never_costs_more_on_a_real_transcript(tmp_path: Path, path: Path) -> None:
    with Store(tmp_path / "w.db") as store:
        timeline = from_transcript(store, import_file(store, path).session.id)
    assert len(timeline.requests) == API_MESSAGES[path.name.split("__")[-1]], "one request per API reply"
    totals = replay(timeline, policy_named("default")).totals()
    assert isinstance(totals["cost_with_policy"], float) and isinstance(totals["cost_without_policy"], float)
    assert totals["cost_with_policy"] <= totals["cost_without_policy"]
    assert totals["cost_without_policy"] > 0


def test_the_command_prints_one_json_object_with_requests_and_totals(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "WORKBENCH_DATA_DIR": str(tmp_path / "data")}
    path = FIXTURES / "claude-code__marot__spotter__subagent.jsonl"
    done = subprocess.run([sys.executable, "-m", "workbench", "replay", str(path), "--json"], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert len(found["requests"]) == 12 and "acted the same" in found["assumption"]
    for key in ("cost_without_policy", "cost_with_policy", "input_tokens_without_policy", "input_tokens_with_policy",
                "cache_write_tokens_without_policy", "cache_write_tokens_with_policy", "compaction_at_without_policy",
                "compaction_at_with_policy"):
        assert key in found["totals"]
    text = subprocess.run([sys.executable, "-m", "workbench", "replay", str(path)], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert "with policy" in text.stdout and "acted the same" in text.stdout
    missing = subprocess.run([sys.executable, "-m", "workbench", "replay", str(path), "--policy", "nope"],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
    assert missing.returncode != 0 and "no policy 'nope'" in missing.stderr and "Traceback" not in missing.stderr
