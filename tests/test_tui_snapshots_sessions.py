"""The session picker with proxied Claude Code sessions: two sessions that began with the same words, told
apart by where the agent worked and its own session id, each with the title call Claude Code made to name it
listed under it (not as one more "(proxied request)"); and the picker at 80 columns.

The sessions are recorded by the proxy's real recorder from requests shaped as Claude Code 2.1 sends them
(``metadata.user_id`` carrying its session id, `` - Primary working directory:`` in the system prompt, and
the title call's own system prompt without tools), with no network.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import claude_fixture
from textual.pilot import Pilot
from tui_fixtures import SIZE, flat, frozen, isolated_dirs, no_blink, ready, text_of, until  # noqa: F401

from workbench.engine.sources.session_list import ListedSession
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import Usage
from workbench.engine.transcript.store import Store
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import Answer
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.sessions import SessionPicker

SnapCompare = Callable[..., bool]
pytestmark = pytest.mark.usefixtures("frozen")

TITLE_PROMPT = ("Generate a concise, sentence-case title (3-7 words) that captures the main topic or goal of this "
                "coding session. The title should be clear enough that the user recognizes the session in a list.")
TOOLS = [{"name": "Read", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
SESSIONS = {"/home/ada/shop": "3f2a9c1e-5b7d-4e21-9a0c-1d2e3f4a5b6c",
            "/home/ada/blog": "8c41d07b-2e9f-4a13-b6d5-7e8f9a0b1c2d"}
"""Working directory -> Claude Code's session id: two sessions, both begun with "read the readme"."""


def user_id(session: str) -> str:
    return orjson.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session}).decode()


def conversation(directory: str, session: str) -> dict[str, Any]:
    system = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
              {"type": "text", "text": "# Environment\nYou have been invoked in the following environment: \n"
                                       f" - Primary working directory: {directory}\n - Is a git repository: true\n"}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "system": system, "tools": TOOLS,
            "metadata": {"user_id": user_id(session)}, "messages": [{"role": "user", "content": "read the readme"}]}


def title_call(session: str) -> dict[str, Any]:
    system = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
              {"type": "text", "text": TITLE_PROMPT}]
    return {"model": "claude-haiku-4-5", "max_tokens": 512, "system": system, "metadata": {"user_id": user_id(session)},
            "messages": [{"role": "user", "content": "<session>read the readme</session>"}]}


def record(recorder: Recorder, body: dict[str, Any], text: str, input_tokens: int) -> str:
    exchange = recorder.prepare(orjson.dumps(body))
    usage = Usage(input_tokens=input_tokens, output_tokens=20, model=body["model"])
    recorder.finish(exchange, 200, Answer(blocks=[{"type": "text", "text": text}], usage=usage,
                                          model=body["model"], complete=True))
    assert exchange.placement is not None
    return exchange.placement.thread.session_id


def record_claude_code(db: Path, home: Path) -> dict[str, str]:
    """Each session's conversation and then its title call, as Claude Code sends them; -> stored id by role."""
    recorder = Recorder(db, home=home)
    ids: dict[str, str] = {}
    try:
        for n, (directory, session) in enumerate(SESSIONS.items()):
            name = Path(directory).name
            ids[name] = record(recorder, conversation(directory, session), "The README says: run make.", 9_000 + n)
            ids[f"{name} title"] = record(recorder, title_call(session), '{"title": "Read the readme"}', 120)
    finally:
        recorder.close()
    return ids


@pytest.fixture
def proxied_db(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "proxy.db"
    return db, record_claude_code(db, tmp_path)


async def open_picker(pilot: Pilot[None]) -> SessionPicker:
    await ready(pilot)
    await pilot.press("ctrl+o")
    await until(pilot, lambda: isinstance(pilot.app.screen, SessionPicker) and pilot.app.screen.discovered is not None)
    screen = pilot.app.screen
    assert isinstance(screen, SessionPicker)
    return screen


@pytest.mark.anyio
async def test_title_calls_are_listed_under_the_session_they_name(proxied_db: tuple[Path, dict[str, str]]) -> None:
    db, ids = proxied_db
    app = WorkbenchApp(Launch.open(db, ids["shop"]))
    async with app.run_test(size=SIZE) as pilot:
        picker = await open_picker(pilot)
        rows = [(e.session.id, e.role, e.parent) for e in picker.entries if isinstance(e, ListedSession)]
        assert sorted(rows) == sorted([
            (ids["shop"], "session", None), (ids["shop title"], "title call", ids["shop"]),
            (ids["blog"], "session", None), (ids["blog title"], "title call", ids["blog"]),
        ])
        for title in ("shop title", "blog title"):  # each right after the session it names
            index = next(i for i, (sid, _, _) in enumerate(rows) if sid == ids[title])
            assert rows[index - 1][0] == ids[title.split()[0]]
        painted = flat(text_of(picker.table))
        assert "(proxied request)" not in painted
        assert painted.count("└ title call") == 2
        assert "/home/ada/shop · proxy · 3f2a9c1e" in painted and "/home/ada/blog · proxy · 8c41d07b" in painted


@pytest.mark.anyio
async def test_the_picker_fits_80_columns_without_cutting_ids_dates_or_the_discovery_line(
        proxied_db: tuple[Path, dict[str, str]]) -> None:
    """With an imported sub-agent too, whose id (``cc-…-afb92ff``) is the longest."""
    db, ids = proxied_db
    with Store(db) as store:
        parsed = import_file(store, claude_fixture("subagent"))
        ids["imported"] = parsed.session.id
        ids["sub-agent"] = next(s.id for s, _ in store.list_sessions() if s.id.startswith(parsed.session.id + "-"))
    app = WorkbenchApp(Launch.open(db, ids["shop"]))
    async with app.run_test(size=(80, 30)) as pilot:
        picker = await open_picker(pilot)
        painted = text_of(picker.table)
        for session_id in ids.values():
            assert session_id in painted
        assert painted.count("2026-") == len(ids), "every last-use date whole"
        assert text_of(picker.query_one("#sessions-found")).strip() == "On this machine: no other agents' sessions"
        assert "…" not in str(picker.query_one("#sessions-box").border_subtitle)


class TestSessionPicker:
    def _snap(self, snap_compare: SnapCompare, db: Path, session_id: str, size: tuple[int, int]) -> bool:
        async def run_before(pilot: Pilot[None]) -> None:
            await open_picker(pilot)
            assert isinstance(pilot.app, WorkbenchApp)
            no_blink(pilot.app)
            pilot.app.clear_notifications()
            await pilot.pause()

        return bool(snap_compare(WorkbenchApp(Launch.open(db, session_id)), terminal_size=size, run_before=run_before))

    def test_grouped_title_calls(self, snap_compare: SnapCompare, proxied_db: tuple[Path, dict[str, str]]) -> None:
        db, ids = proxied_db
        assert self._snap(snap_compare, db, ids["shop"], SIZE)

    def test_at_80_columns(self, snap_compare: SnapCompare, proxied_db: tuple[Path, dict[str, str]]) -> None:
        db, ids = proxied_db
        assert self._snap(snap_compare, db, ids["shop"], (80, 30))
