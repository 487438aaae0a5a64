"""A 30 MB request through the proxy delays another client's small request by 100 ms at most: reading,
redacting, counting and storing it run off the path the other clients' requests wait on.

A timing test, so it lives with the fault suite rather than with the unit tests: the proxy is a real server
in front of the loopback API, and the small requests go through it while the big one is read, answered and
stored."""

from __future__ import annotations

import random
import statistics
import string
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from loopback_api import LoopbackAPI, Reply, text

from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01", "content-type": "application/json"}
BIG_BYTES = 30 * 1024 * 1024
ALLOWED_DELAY = 0.100


def tool_output(size: int) -> str:
    """A long tool result: words, numbers and code-like lines, as a build log or a dumped file reads."""
    rnd = random.Random(43)
    words = ["".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(2, 9))) for _ in range(4000)]
    lines = []
    total = 0
    while total < size:
        line = f"{rnd.randint(1, 99999):>6} " + " ".join(rnd.choices(words, k=rnd.randint(4, 14)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def body(messages: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"model": "claude-opus-4-6", "max_tokens": 64, "messages": messages})


def small(client: httpx2.Client, url: str, n: int) -> float:
    started = time.perf_counter()
    answer = client.post(f"{url}/v1/messages", content=body([{"role": "user", "content": f"small {n}"}]),
                         headers=HEADERS)
    assert answer.status_code == 200, answer.text
    return time.perf_counter() - started


@pytest.mark.xfail(strict=True, reason="redaction and counting no longer stall others (54 s before), but reading a "
                   "30 MB body (JSON parse and message keys, ~1 s) still runs on the server's event loop")
def test_a_30_mb_request_delays_a_concurrent_small_request_by_100_ms_at_most(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    big = body([{"role": "user", "content": "Summarise this log."}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": tool_output(BIG_BYTES)}]}])
    with LoopbackAPI() as api:
        api.queue(*[Reply([text("ok")]) for _ in range(20_000)])
        recorder = Recorder(db, home=tmp_path)
        server = ProxyServer(ProxySettings(db_path=db, upstream=api.url, port=0), recorder).start()
        try:
            with httpx2.Client(timeout=600) as client:
                alone = [small(client, server.url, n) for n in range(20)]
                done = threading.Event()

                def send_big() -> None:
                    with httpx2.Client(timeout=600) as other:
                        assert other.post(f"{server.url}/v1/messages", content=big, headers=HEADERS).status_code == 200
                    recorder.flush()
                    done.set()

                sender = threading.Thread(target=send_big)
                sender.start()
                beside = []
                while not done.is_set() or len(beside) < 20:
                    beside.append(small(client, server.url, len(beside)))
                    time.sleep(0.02)
                sender.join()
        finally:
            server.stop()
            recorder.close()
    typical = statistics.median(alone)
    worst = max(beside)
    assert worst - typical <= ALLOWED_DELAY, (
        f"a small request took {worst * 1000:.0f} ms beside the 30 MB one ({typical * 1000:.1f} ms alone; "
        f"{len(beside)} sent while it was stored)")
