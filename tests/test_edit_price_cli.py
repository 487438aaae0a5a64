"""``apply`` and ``compact --apply`` on a proxied session print what the change does to the agent's prompt
cache, as a prune does, before the plan they applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
from loopback_api import tool_use
from loopback_cache import PromptCache
from proxy_support import TOOLS, proxied

from workbench.engine.transcript.store import Store

MODEL = "claude-opus-4-6"
SYSTEM = [{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}]


def call(n: int) -> dict[str, Any]:
    return tool_use(f"toolu_{n:02d}", "Read", {"file_path": f"/repo/src/module_{n % 4}.py"})


def result(n: int) -> dict[str, Any]:
    body = "".join(f"def function_{n % 4}_{line}(value):\n    return value * {line}\n" for line in range(50))
    return {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": body}


def steps(count: int) -> list[dict[str, Any]]:
    """The first ``count`` messages of a session of turns that each ask for a module, read it and say so, the
    same four modules over and over (the dedup strategy's case)."""
    messages: list[dict[str, Any]] = []
    for n in range(count // 4 + 1):
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"Read module {n % 4}."}]},
            {"role": "assistant", "content": [call(n)]},
            {"role": "user", "content": [result(n)]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Module {n % 4} read."}]},
        ]
    return messages[:count]


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last block carries a cache mark, as Claude Code marks it."""
    last = messages[-1]
    return [*messages[:-1], {**last, "content": [*last["content"][:-1],
                                                 {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]}]


def recorded(tmp_path: Path) -> tuple[Path, str]:
    requests = [count for count in range(1, 48) if count % 2]  # each ends with a user message
    with proxied(tmp_path) as p:
        cache = PromptCache()
        p.api.queue(*(lambda body, count=count: cache.answer(body, steps(count + 1)[-1]["content"])
                      for count in requests))
        client = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        for count in requests:
            client.messages.create(model=MODEL, max_tokens=1024, system=SYSTEM, tools=TOOLS,  # type: ignore[arg-type]
                                   messages=marked(steps(count)))  # type: ignore[arg-type]
        p.settle()
        with Store(p.db) as store:
            return p.db, next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")


def workbench(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    small_tail = {"WORKBENCH_COMPACTION__TAIL_MIN": "500", "WORKBENCH_COMPACTION__TAIL_MAX": "1500"}
    done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, **small_tail})
    assert done.returncode == 0, done.stderr
    return done


def test_apply_and_compact_on_a_proxied_session_print_the_price_to_its_cache(tmp_path: Path) -> None:
    db, session_id = recorded(tmp_path)

    applied = workbench(db, "apply", session_id, "--strategy", "dedup").stdout
    lines = applied.splitlines()
    assert lines[0].startswith("cache: the next request writes ") and "write price" in lines[0], applied
    assert "assumes the cache was warm at the last request:" in lines[1] and "tokens read" in lines[1]
    assert any(line.startswith("applied dedup:") for line in lines), "the plan it applied, after its price"

    as_json = json.loads(workbench(db, "apply", session_id, "--strategy", "purge_errors", "--json").stdout)
    assert "cache" not in as_json["plans"][0], "a plan that changes nothing has no price"

    compacted = workbench(db, "compact", session_id, "--apply", "--summarizer", "heuristic").stdout
    price = [line for line in compacted.splitlines() if line.startswith("cache: ")]
    assert price and "the next request writes" in price[0], compacted
    assert "assumes the cache was warm" in compacted
    assert compacted.index("cache: ") < compacted.index("\napplied: ")


def test_a_stored_transcript_has_no_agent_cache_to_price(tmp_path: Path) -> None:
    from helpers import claude_fixture

    done = workbench(tmp_path / "w.db", "apply", str(claude_fixture("short")), "--strategy", "dedup")
    assert "cache:" not in done.stdout
