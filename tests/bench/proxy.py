"""The proxy: what it stores, what it adds to a request's way, and whether it slows streams down.

- Storage: a synthetic session of 300 requests whose history grows to about 150,000 tokens goes through
  the recorder; the database's used pages are compared with the session's unique content (every distinct
  block's JSON once) and with the naive figure (every request body stored whole).
- Rewrite: preparing the last request (one tool result pruned, so it is steered and re-serialised)
  against the naive way (parse and re-serialise the whole body with the standard library).
- Overlay: preparing the last request once its session has 50 more pruned tool results and a compaction
  (the overlay applied, the request reshaped), against preparing it before any steering.
- First byte: time from sending a streaming request to its first byte, direct to the loopback API and
  through the proxy, measured alternately in the same run.
- Concurrency: 20 clients stream answers paced like a model writing (60 text deltas 30 ms apart) at
  once, direct and through the proxy; per round, the slowest proxied stream against the direct streams'
  median, the median over three rounds after one that opens the connections.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import orjson
from rich.console import Console
from rich.table import Table

from tests.bench.common import BenchResult, SummaryRow, median, ms
from tests.loopback_api import LoopbackAPI, Reply, text
from workbench.engine.plans.compaction_prompt import SUMMARY_PREFIX
from workbench.engine.transcript.models import Message, TextPart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.request_blocks import identity_block
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import Answer

NAME = "proxy"
REQUESTS = 300
HISTORY_TOKENS = 150_000
STORAGE_TARGET = 1.5
REWRITE_TARGET_MS = 5.0
OVERLAY_TARGET_MS = 5.0
FIRST_BYTE_TARGET_MS = 3.0
CLIENTS = 20
ROUNDS = 3
DELTAS = 60
PACE = 0.03
"""Each concurrent answer streams like a model writing: 60 text deltas 30 ms apart, about two seconds."""
SLOWDOWN_TARGET = 0.10
SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 400, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": f"tool_{n}", "description": "does a thing " * 40, "input_schema": {"type": "object"}}
         for n in range(20)]
WORDS = ["session", "context", "token", "budget", "request", "stream", "proxy", "message", "result", "file", "line", "value", "change"]


def _prose(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] + str((seed + i) % 97) for i in range(words))


def conversation() -> list[list[dict[str, Any]]]:
    """300 request message lists, each extending the last; about 500 tokens added per request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Please fix the failing tests."}]
    requests = [list(messages)]
    per_turn = HISTORY_TOKENS // REQUESTS
    for n in range(1, REQUESTS):
        call = f"toolu_{n:04d}"
        messages = [*messages,
                    {"role": "assistant", "content": [{"type": "text", "text": _prose(n, 20)},
                                                      {"type": "tool_use", "id": call, "name": "tool_1",
                                                       "input": {"path": f"src/file_{n}.py"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                                  "content": _prose(n * 31, per_turn // 2),
                                                  "cache_control": {"type": "ephemeral"}}]}]
        for earlier in messages[:-1]:  # one cache mark, on the last message, as agents send it
            if isinstance(earlier["content"], list):
                earlier["content"] = [{k: v for k, v in b.items() if k != "cache_control"} for b in earlier["content"]]
        requests.append(messages)
    return requests


USER_ID = orjson.dumps({"device_id": "d" * 64, "account_uuid": "",
                        "session_id": "0b8e6f4a-3c2d-4e1f-9a7b-5c6d7e8f9a0b"}).decode()
"""Claude Code names its session in every request: the bench's requests are one session whatever they repeat."""


def body_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-opus-4-6", "max_tokens": 8192, "system": SYSTEM, "tools": TOOLS,
            "messages": messages, "stream": True, "metadata": {"user_id": USER_ID}}


def unique_bytes(requests: list[list[dict[str, Any]]]) -> int:
    seen: set[bytes] = set()
    for block in [*SYSTEM, *TOOLS]:
        seen.add(orjson.dumps(identity_block(block), option=orjson.OPT_SORT_KEYS))
    for messages in requests:
        for message in messages:
            content = message["content"]
            for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
                seen.add(orjson.dumps(identity_block(block), option=orjson.OPT_SORT_KEYS))
    return sum(len(b) for b in seen)


def used_bytes(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int(pages * conn.execute("PRAGMA page_size").fetchone()[0])


def storage_and_rewrite(tmp: Path) -> tuple[int, int, int, list[float], list[float]]:
    requests = conversation()
    db = tmp / "proxy.db"
    recorder = Recorder(db, home=tmp)
    for messages in requests:
        exchange = recorder.prepare(orjson.dumps(body_of(messages)))
        answer = Answer(blocks=[{"type": "text", "text": "ok"}]) if messages is requests[-1] else None
        recorder.finish(exchange, 200, answer)
    recorder.flush()
    stored = used_bytes(db)
    naive = sum(len(orjson.dumps(body_of(m))) for m in requests)
    unique = unique_bytes(requests)
    with Store(db) as store:
        session_id = store.list_sessions()[0][0].id
        target = next(m for m in store.load_messages(session_id) if m.tool_results())
        store.add_overlay_events([OverlayEvent(id="bench-prune", session_id=session_id, plan_id="bench",
                                               action="prune", message_id=target.id, part_index=0)])
    raw = orjson.dumps(body_of(requests[-1]))
    plain = _prepared(recorder, raw)
    steered: list[float] = []
    baseline: list[float] = []
    for _ in range(15):
        started = time.perf_counter()
        exchange = recorder.prepare(raw)
        steered.append(time.perf_counter() - started)
        assert exchange.edited, "the bench request must be steered"
        recorder.flush()
        started = time.perf_counter()
        json.dumps(json.loads(raw)).encode()
        baseline.append(time.perf_counter() - started)
    with Store(db) as store:
        _steer_and_compact(store, session_id)
    overlaid = _prepared(recorder, raw)
    recorder.close()
    return stored, unique, naive, steered, baseline, plain, overlaid


def _prepared(recorder: Recorder, raw: bytes) -> list[float]:
    """Times to prepare ``raw`` (read, place, steer: what the overlay adds to the way to the first byte)."""
    times: list[float] = []
    for _ in range(15):
        started = time.perf_counter()
        recorder.prepare(raw)
        times.append(time.perf_counter() - started)
        recorder.flush()
    return times


def _steer_and_compact(store: Store, session_id: str) -> None:
    """50 more pruned tool results and a compaction that keeps the last 150 messages (a summary, then the
    tail as sent): the overlay a steered long session has."""
    messages = store.load_messages(session_id)
    pivot = messages[-150]
    results = [m for m in messages[-150:] if m.tool_results()][-51:-1]
    summary = Message(id="bench-summary", session_id=session_id, index=len(messages), role="user", kind="summary",
                      parts=[TextPart(text=SUMMARY_PREFIX + "\n\n" + _prose(7, 2_000))])
    store.save_messages([summary], TokenCounter())
    events = [OverlayEvent(id=f"bench-steer-{n}", session_id=session_id, plan_id="bench-steer", action="prune",
                           message_id=m.id, part_index=0) for n, m in enumerate(results)]
    events += [OverlayEvent(id="bench-pivot", session_id=session_id, plan_id="bench-compaction", action="pivot",
                            message_id=pivot.id, data={"trigger": "manual", "summary_id": summary.id}),
               OverlayEvent(id="bench-summary", session_id=session_id, plan_id="bench-compaction", action="summary",
                            message_id=summary.id)]
    store.add_overlay_events(events)


async def _first_byte(client: httpx2.AsyncClient, url: str, body: bytes) -> float:
    started = time.perf_counter()
    async with client.stream("POST", f"{url}/v1/messages", content=body,
                             headers={"content-type": "application/json", "x-api-key": "bench"}) as response:
        chunks = response.aiter_raw()
        await anext(chunks)
        first = time.perf_counter() - started
        async for _ in chunks:
            pass
    return first


async def _whole(client: httpx2.AsyncClient, url: str, body: bytes) -> float:
    started = time.perf_counter()
    async with client.stream("POST", f"{url}/v1/messages", content=body,
                             headers={"content-type": "application/json", "x-api-key": "bench"}) as response:
        async for _ in response.aiter_raw():
            pass
    return time.perf_counter() - started


@contextmanager
def headless_proxy(tmp: Path, upstream: str) -> Iterator[str]:
    """``workbench proxy --headless`` in a process of its own, as a user runs it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-m", "workbench", "--db", str(tmp / "wire.db"), "proxy", "--headless",
                              "--port", str(port), "--upstream", upstream], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise RuntimeError("the proxy did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        child.terminate()
        child.wait(timeout=30)


def wire_figures(tmp: Path) -> tuple[list[float], list[float], list[float], list[float]]:
    body = orjson.dumps(body_of([{"role": "user", "content": "hello"}]))
    with LoopbackAPI() as api, headless_proxy(tmp, api.url) as proxy_url:

        async def measure() -> tuple[list[float], list[float], list[float], list[float]]:
            direct: list[float] = []
            proxied: list[float] = []
            async with httpx2.AsyncClient(timeout=60) as client:
                for _ in range(40):
                    api.queue(Reply([text("hi there")]), Reply([text("hi there")]))
                    direct.append(await _first_byte(client, api.url, body))
                    proxied.append(await _first_byte(client, proxy_url, body))
                api.pause = PACE
                alone: list[float] = []
                through: list[float] = []
                for round_ in range(ROUNDS + 1):  # the first round opens the connections, as a running agent has
                    api.queue(*(Reply([text("word " * 300)], pieces=DELTAS) for _ in range(2 * CLIENTS)))
                    direct_round = await asyncio.gather(*(_whole(client, api.url, body) for _ in range(CLIENTS)))
                    proxied_round = await asyncio.gather(*(_whole(client, proxy_url, body) for _ in range(CLIENTS)))
                    if round_:
                        alone.append(median(direct_round))
                        through.append(max(proxied_round))
                api.pause = 0.0
            return direct, proxied, alone, through

        return asyncio.run(measure())


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as tmp:
        stored, unique, naive, steered, rewrite_base, plain, overlaid = storage_and_rewrite(Path(tmp))
        direct, proxied, alone, through = wire_figures(Path(tmp))
    ratio = stored / unique
    added = median(proxied) - median(direct)
    overlay_added = median(overlaid) - median(plain)
    slowdown = median([t / a for t, a in zip(through, alone, strict=True)]) - 1
    table = Table(title=f"{NAME} — {REQUESTS} requests, history to ~{HISTORY_TOKENS:,} tokens")
    for header in ("figure", "measured", "target", "baseline"):
        table.add_column(header)
    rows = [
        SummaryRow("proxy storage / unique content", f"{ratio:.2f}× ({stored / 1e6:.2f} MB)", f"≤ {STORAGE_TARGET}×",
                   f"naive {naive / unique:.0f}× ({naive / 1e6:.1f} MB); unique {unique / 1e6:.2f} MB",
                   ratio <= STORAGE_TARGET),
        SummaryRow("proxy rewrite at 150k tokens", ms(median(steered)), f"≤ {REWRITE_TARGET_MS} ms",
                   f"naive re-serialise {ms(median(rewrite_base))}", median(steered) * 1000 <= REWRITE_TARGET_MS),
        SummaryRow("proxy overlay at 150k tokens: 50 steered blocks and a compaction, added to first byte",
                   ms(overlay_added), f"≤ {OVERLAY_TARGET_MS} ms", f"unsteered request {ms(median(plain))}",
                   overlay_added * 1000 <= OVERLAY_TARGET_MS),
        SummaryRow("proxy added latency to first byte", ms(added), f"≤ {FIRST_BYTE_TARGET_MS} ms",
                   f"direct {ms(median(direct))}", added * 1000 <= FIRST_BYTE_TARGET_MS),
        SummaryRow(f"proxy {CLIENTS} concurrent streams, slowest one's slowdown", f"{100 * slowdown:.1f}%",
                   f"≤ {100 * SLOWDOWN_TARGET:.0f}%", f"direct median {ms(median(alone))}",
                   slowdown <= SLOWDOWN_TARGET),
    ]
    for row in rows:
        table.add_row(row.name, row.measured, row.target, row.baseline)
    console.print(table)
    result.rows.extend(rows)
    return result
