"""The proxy's OpenAI side: what it adds to the way to the first byte of a Codex-sized Responses request.

A Codex CLI request whose history has grown to about 150,000 tokens (a developer prompt, tools, 300 rounds of
``function_call`` / ``function_call_output``) is sent, streaming, to the loopback OpenAI API directly and
through ``workbench proxy --headless`` alternately in the same run; the figure is the difference of the medians
of the time to the first byte. Each proxied request is read, placed and recorded like the agent's next one.
"""

from __future__ import annotations

import asyncio
import socket
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
from tests.bench.proxy import WORDS
from tests.loopback_openai import LoopbackOpenAI, message, responses_stream

NAME = "proxy_openai"
HISTORY_TOKENS = 150_000
ROUNDS = 300
FIRST_BYTE_TARGET_MS = 3.0
HEADERS = {"content-type": "application/json", "authorization": "Bearer bench", "session-id": "bench-thread",
           "accept": "text/event-stream"}


def _prose(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] + str((seed + i) % 97) for i in range(words))


def codex_body() -> dict[str, Any]:
    """A Codex-shaped Responses request with about 150,000 tokens of history."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": _prose(1, 4000)}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing tests."}]},
    ]
    per_round = HISTORY_TOKENS // ROUNDS
    for n in range(ROUNDS):
        call = f"call_{n:04d}"
        items += [{"type": "function_call", "id": f"fc_{n}", "call_id": call, "name": "exec_command",
                   "arguments": orjson.dumps({"cmd": f"cat src/file_{n}.py"}).decode(), "status": "completed"},
                  {"type": "function_call_output", "call_id": call, "output": _prose(n * 31, per_round // 2)}]
    tools = [{"type": "function", "name": f"tool_{n}", "description": "does a thing " * 40, "strict": False,
              "parameters": {"type": "object", "properties": {}}} for n in range(20)]
    return {"model": "gpt-5.5", "stream": True, "input": items, "tools": tools, "tool_choice": "auto",
            "store": False, "prompt_cache_key": "bench-thread"}


@contextmanager
def headless_proxy(tmp: Path, openai_upstream: str) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-m", "workbench", "--db", str(tmp / "wire.db"), "proxy", "--headless",
                              "--port", str(port), "--openai-upstream", openai_upstream], stdout=subprocess.DEVNULL)
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
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        child.terminate()
        child.wait(timeout=30)


async def _first_byte(client: httpx2.AsyncClient, url: str, body: bytes) -> float:
    started = time.perf_counter()
    async with client.stream("POST", f"{url}/responses", content=body, headers=HEADERS) as response:
        chunks = response.aiter_raw()
        await anext(chunks)
        first = time.perf_counter() - started
        async for _ in chunks:
            pass
    return first


def first_bytes(tmp: Path) -> tuple[list[float], list[float], int]:
    body = orjson.dumps(codex_body())
    with LoopbackOpenAI(fallback=lambda seen: responses_stream([message("ok")])) as api, \
            headless_proxy(tmp, api.url) as proxy_url:

        async def measure() -> tuple[list[float], list[float]]:
            direct: list[float] = []
            proxied: list[float] = []
            async with httpx2.AsyncClient(timeout=60) as client:
                for _ in range(40):
                    direct.append(await _first_byte(client, api.url, body))
                    proxied.append(await _first_byte(client, proxy_url, body))
            return direct, proxied

        direct, proxied = asyncio.run(measure())
    return direct, proxied, len(body)


def run(console: Console) -> BenchResult:
    result = BenchResult(NAME)
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as tmp:
        direct, proxied, size = first_bytes(Path(tmp))
    added = median(proxied[5:]) - median(direct[5:])
    row = SummaryRow(f"proxy added latency to first byte, Responses request of ~{HISTORY_TOKENS:,} tokens",
                     ms(added), f"≤ {FIRST_BYTE_TARGET_MS} ms", f"direct {ms(median(direct[5:]))} ({size / 1e6:.1f} MB)",
                     added * 1000 <= FIRST_BYTE_TARGET_MS)
    table = Table(title=NAME)
    for header in ("figure", "measured", "target", "baseline"):
        table.add_column(header)
    table.add_row(row.name, row.measured, row.target, row.baseline)
    console.print(table)
    result.rows.append(row)
    return result
