"""What a proxied agent's own compaction lost (issue #42): the agent asks for a summary of its conversation,
then continues from it; the proxy's headless line for that request says which facts of the conversation the
agent's summary kept and which it lost, and ``compactions`` says the same. Real proxy, real SDK, loopback API."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import pytest
from helpers import run_cli
from loopback_api import LoopbackAPI, Reply, text, tool_use
from proxy_support import request
from textual.message import Message
from tui_fixtures import SIZE, isolated_dirs, settle, until  # noqa: F401

from workbench.commands.proxy import reporter
from workbench.engine.settings.config import Config
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch

KEY = "sk-ant-api03-planted-key-0123456789abcdef"
META = {"user_id": '{"session_id":"cccccccc-2222-3333-4444-555555555555"}'}
ASKED = "Rename `parse_ts` to `parse_timestamp` in src/logsift/cli.py. Never touch tests/legacy_cases.py."
SUMMARISE = "Your task is to create a detailed summary of the conversation so far, paying close attention to requests."
SUMMARY = "The user asked to rename parse_ts in cli.py; the agent read cli.py and renamed it."
CONTINUED = ("This session is being continued from a previous conversation that ran out of context. The summary "
             f"below covers the earlier portion of the conversation.\n\nSummary:\n{SUMMARY}")


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


@contextmanager
def headless_proxy(tmp_path: Path, out: io.StringIO, as_json: bool = False) -> Iterator[tuple[LoopbackAPI, str, Path]]:
    """The proxy as ``workbench proxy --headless`` runs it: its report is the command's."""
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api:
        recorder = Recorder(db, home=tmp_path, report=reporter(db, Config(), as_json, out))
        server = ProxyServer(ProxySettings(db_path=db, upstream=api.url, port=0), recorder).start()
        try:
            yield api, server.url, db
        finally:
            server.stop()
            recorder.close()


def compact_like_claude_code(url: str, api: LoopbackAPI) -> None:
    """A turn that reads a file, the request that asks for the summary, and the first one that continues from it."""
    ask_for_a_summary(url, api)
    continue_from_it(url)


def ask_for_a_summary(url: str, api: LoopbackAPI) -> None:
    api.queue(Reply([text("Renamed.")]), Reply([text(SUMMARY)]), Reply([text("Continuing.")]))
    client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    history = [
        user(ASKED),
        {"role": "assistant", "content": [tool_use("toolu_1", "Read", {"file_path": "src/logsift/cli.py"})]},
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def parse_ts(value): ...\n"}]),
    ]
    client.messages.create(**request(history, metadata=META))
    history += [{"role": "assistant", "content": [text("Renamed.")]}, user(SUMMARISE)]
    client.messages.create(**request(history, metadata=META))


def continue_from_it(url: str) -> None:
    client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    client.messages.create(**request([user(CONTINUED)], metadata=META))


def test_the_headless_line_says_what_the_agents_summary_lost(tmp_path: Path) -> None:
    out = io.StringIO()
    with headless_proxy(tmp_path, out) as (api, url, db):
        compact_like_claude_code(url, api)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert "facts" not in lines[0] and "facts" not in lines[1]
    line = lines[2]
    assert "the agent's summary kept " in line
    lost = line.split("; lost: ", 1)[1]
    assert "identifier parse_timestamp" in lost and "tests/legacy_cases.py" in lost
    assert "parse_ts;" not in lost and "cli.py" not in lost.replace("tests/legacy_cases.py", "")
    assert "detailed summary" not in line  # the request for the summary is not part of what it summarises

    listed = run_cli(["--db", db, "compactions", _session(db), "--json"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    facts = entry["facts"]
    assert facts is not None and f"kept {facts['kept']} of {facts['total']} facts" in line
    assert [f["text"] for f in facts["lost"]][:1] == [lost.split("; ")[0].split(" ", 1)[1]]


def test_the_json_record_carries_the_facts(tmp_path: Path) -> None:
    out = io.StringIO()
    with headless_proxy(tmp_path, out, as_json=True) as (api, url, _):
        compact_like_claude_code(url, api)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert ["facts" in r for r in records] == [False, False, True]
    facts = records[2]["facts"]
    assert facts["total"] > facts["kept"] > 0
    assert {"kind": "identifier", "text": "parse_timestamp"} in [{k: f[k] for k in ("kind", "text")}
                                                                 for f in facts["lost"]]


def shown(app: WorkbenchApp) -> int:
    snapshot = app.main_screen.screen_state
    return len(snapshot.messages) if snapshot is not None else -1


def _session(db: Path) -> str:
    from workbench.engine.transcript.store import Store

    with Store(db) as store:
        [session] = [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]
    return session


@pytest.mark.anyio
async def test_the_app_following_the_agent_says_what_its_summary_lost(tmp_path: Path) -> None:
    seen: list[Message] = []
    out = io.StringIO()
    with headless_proxy(tmp_path, out) as (api, url, db):
        app = WorkbenchApp(Launch.proxy(db, url))
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await settle(pilot)
            await asyncio.to_thread(ask_for_a_summary, url, api)
            await until(pilot, lambda: shown(app) == 6, timeout=10)
            assert not [m for m in seen if isinstance(m, msg.Notice) and "agent compacted" in m.text]
            await asyncio.to_thread(continue_from_it, url)
            await until(pilot, lambda: any(isinstance(m, msg.Notice) and "agent compacted" in m.text for m in seen),
                        timeout=10)
    [notice] = [m for m in seen if isinstance(m, msg.Notice) and "agent compacted" in m.text]
    assert notice.severity == "warning"
    assert notice.text.startswith("The agent compacted: its summary keeps 3 of 5 facts. Lost: ")
    assert "identifier parse_timestamp" in notice.text and "tests/legacy_cases.py" in notice.text
