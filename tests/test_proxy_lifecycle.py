"""The proxy's own life, as a user runs it (``python -m workbench proxy`` in a process of its own): it says it
is ready only once its port accepts connections, and a signal stops it gently, every answer stored."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import anthropic
import pytest
from loopback_api import LoopbackAPI, Reply, text
from proxy_support import request

KEY = "sk-ant-api03-planted-key-0123456789abcdef"


def first_line(stream: IO[str], timeout: float = 30.0) -> str:
    """The first line the process prints (empty when it prints none in time)."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


@contextmanager
def proxy_process(db: Path, upstream: str, *flags: str) -> Iterator[subprocess.Popen[str]]:
    command = [sys.executable, "-m", "workbench", "--db", str(db), "proxy", "--port", "0", "--upstream", upstream,
               *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=db.parent, env=dict(os.environ))
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def ready(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The ready object; the lines after it are read (and dropped) as they come, as a user's terminal would."""
    assert process.stdout is not None
    line = first_line(process.stdout)
    assert line, "the proxy printed no ready line"
    announced: dict[str, Any] = json.loads(line)
    socket.create_connection(("127.0.0.1", announced["port"]), timeout=1).close()  # accepts at once
    threading.Thread(target=process.stdout.read, daemon=True).start()
    return announced


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def test_under_json_the_ready_object_names_the_port_once_it_accepts(tmp_path: Path) -> None:
    with LoopbackAPI() as api, proxy_process(tmp_path / "proxy.db", api.url, "--json") as process:
        announced = ready(process)
        assert announced["ready"] is True and announced["url"] == f"http://127.0.0.1:{announced['port']}"
        assert announced["port"] != 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def test_the_ready_line_comes_once_the_port_accepts(tmp_path: Path) -> None:
    with LoopbackAPI() as api, proxy_process(tmp_path / "proxy.db", api.url, "--headless") as process:
        assert process.stdout is not None
        line = first_line(process.stdout)
        assert line.startswith("workbench proxy on http://127.0.0.1:")
        port = int(line.split("http://127.0.0.1:", 1)[1].split()[0])
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def stored(db: Path) -> list[tuple[int, int | None]]:
    import sqlite3

    connection = sqlite3.connect(db)
    try:
        return [(row[0], row[1]) for row in connection.execute("SELECT seq, status FROM requests ORDER BY seq")]
    finally:
        connection.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_signal_after_200_fast_requests_stores_all_200_and_empties_the_wal(tmp_path: Path, signum: int) -> None:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, proxy_process(db, api.url, "--json") as process:
        url = ready(process)["url"]
        api.queue(*(Reply([text(f"answer {n}")]) for n in range(200)))
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        messages = [{"role": "user", "content": "count"}]
        for n in range(200):
            client.messages.create(**request(messages))
            messages = [*messages, {"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": "on"}]
        process.send_signal(signum)
        assert process.wait(timeout=60) == 0
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()
    assert stored(db) == [(n, 200) for n in range(1, 201)]
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_an_answer_under_way_finishes_and_is_stored_after_a_signal(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, proxy_process(db, api.url, "--json") as process:
        url = ready(process)["url"]
        api.pause = 0.05
        api.queue(Reply([text("word " * 60)], pieces=20))
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        with client.messages.stream(**request([{"role": "user", "content": "talk"}])) as stream:
            pieces = iter(stream.text_stream)
            received = next(pieces)
            process.send_signal(signal.SIGTERM)
            received += "".join(pieces)
        assert received == "word " * 60
        assert process.wait(timeout=30) == 0
    assert stored(db) == [(1, 200)]


def test_a_second_signal_stops_at_once_and_says_what_was_not_stored(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, proxy_process(db, api.url, "--json") as process:
        announced = ready(process)
        url, port = announced["url"], announced["port"]
        api.pause = 0.2
        api.queue(Reply([text("word " * 60)], pieces=30))
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        with client.messages.stream(**request([{"role": "user", "content": "talk"}])) as stream:
            next(iter(stream.text_stream))
            process.send_signal(signal.SIGTERM)
            while not refused(port):  # the first signal was taken: the proxy stopped accepting
                pass
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=10)
        assert code != 0
        assert process.stderr is not None
        said = process.stderr.read()
        assert "stopped at once: 1 request(s) under way" in said and "Traceback" not in said
