"""A proxy on a loopback port in front of the loopback Messages API, for the proxy tests and benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopback_api import LoopbackAPI

from workbench.proxy.exchange import Exchange
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings

SYSTEM = [
    {"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "# claudeMd\nContents of /repo/CLAUDE.md:\nAlways run the tests."},
]
TOOLS = [
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "mcp__notes__search", "description": "Search notes", "input_schema": {"type": "object"}},
]


@dataclass
class Proxied:
    api: LoopbackAPI
    server: ProxyServer
    db: Path
    reports: list[Exchange] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def settle(self) -> None:
        """Everything the proxy has seen is through and stored."""
        self.server.recorder.settle()


@contextmanager
def proxied(tmp_path: Path, home: Path | None = None, *, exact: bool = False) -> Iterator[Proxied]:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api:
        reports: list[Exchange] = []
        recorder = Recorder(db, home=home or tmp_path, report=reports.append)
        server = ProxyServer(ProxySettings(db_path=db, upstream=api.url, port=0, exact=exact), recorder).start()
        try:
            yield Proxied(api=api, server=server, db=db, reports=reports)
        finally:
            server.stop()
            recorder.close()


def request(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-opus-4-6", "max_tokens": 4096, "system": SYSTEM, "tools": TOOLS,
            "messages": messages, **extra}
