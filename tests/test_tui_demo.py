"""The played demo at a followable pace: what each step is, said in the agent box; a key (in the footer while
the demo plays) to go faster. Exporting the open session from the app; searching inside a message."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from textual.message import Message
from textual.pilot import Pilot
from tui_fixtures import (  # noqa: F401
    SIZE,
    demo_launch,
    isolated_dirs,
    settle,
    until,
)

from workbench.cli import main as cli
from workbench.engine.errors import WorkbenchError
from workbench.tui import messages as msg
from workbench.tui.app import WorkbenchApp
from workbench.tui.demo_pace import DemoPace
from workbench.tui.launch import Launch
from workbench.tui.widgets.live_stream import LiveStream
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList


def quick(launch: Launch, step_pause: float = 0.0) -> Launch:
    """The demo without the pauses meant for watching it (``step_pause``: but that one)."""
    return replace(launch, chunk_delay=0.0, turn_pause=0.0, step_pause=step_pause)


def finished(app: WorkbenchApp) -> bool:
    live = app.main_screen.live
    return live.turns > 0 and live.turn == live.turns and not live.working and not app.pending


def faster_key_shown(app: WorkbenchApp) -> bool:
    """The faster key is among the screen's keys (what the footer and the help list)."""
    return any(active.binding.id == "demo.faster" for active in app.screen.active_bindings.values())


def test_the_demo_is_paced_for_a_person_and_tests_play_it_at_full_speed() -> None:
    launch = Launch.demo(Path("unused.db"))
    assert launch.pace is not None and launch.step_pause > 1 and launch.chunk_delay > 0 and launch.turn_pause > 1
    pace = DemoPace()
    assert [pace.faster() for _ in range(3)] == [4.0, math.inf, 1.0]
    assert pace.scaled(2.0) == 2.0 and DemoPace().scaled(1.0) == 1.0


def test_a_variable_sets_the_speed_the_demo_starts_at(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_DEMO_SPEED", "inf")
    pace = Launch.demo(Path("unused.db")).pace
    assert pace is not None and pace.speed == math.inf and pace.scaled(600.0) == 0.0
    assert pace.faster() == 1.0
    monkeypatch.setenv("WORKBENCH_DEMO_SPEED", "fast")
    with pytest.raises(WorkbenchError, match="WORKBENCH_DEMO_SPEED='fast': give a positive number"):
        Launch.demo(Path("unused.db"))


@pytest.mark.anyio
async def test_the_demo_says_what_each_step_is(tmp_path: Path) -> None:
    said: list[str] = []

    def hook(message: Message) -> None:
        if isinstance(message, msg.Narration):
            said.append(message.text)

    app = WorkbenchApp(quick(Launch.welcome(tmp_path / "wb.db")))
    async with app.run_test(size=(120, 32), message_hook=hook) as pilot:
        await until(pilot, lambda: finished(app), timeout=120)
        await settle(pilot)
        stream = app.main_screen.query_one(LiveStream)
        assert stream.narration == said[-1]
    assert said[0] == "the agent reads the project's notes and plan before touching code"
    assert "one test fails: the agent reads the failing test and the code it checks" in said
    assert "the budget passes the warn mark: the context is filling up" in said
    assert any(line.startswith("compaction starts: ") for line in said)
    kept = [line for line in said if line.startswith("compaction keeps the [PERSIST] pin, every pinned message "
                                                     "verbatim (#1")]
    assert kept, said
    assert said.index("the budget passes the warn mark: the context is filling up") < said.index(kept[0])
    assert said[-1] == "the agent writes the PR description"


@pytest.mark.anyio
async def test_the_faster_key_shortens_the_pauses_and_shows_only_while_the_demo_plays(tmp_path: Path) -> None:
    """With a pause of ten minutes before every step, the demo finishes only because the key was pressed."""
    app = WorkbenchApp(quick(Launch.welcome(tmp_path / "wb.db"), step_pause=600.0))
    notes: list[str] = []
    app.notify = lambda text, *args, **kwargs: notes.append(str(text))  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        stream = app.main_screen.query_one(LiveStream)
        await until(pilot, lambda: stream.narration.startswith("the agent reads the project's notes"))
        assert app.main_screen.live.working and faster_key_shown(app)
        await pilot.press("f")  # the engine's own toasts (the budget's warning) may come in between
        assert [note for note in notes if note.startswith("Demo speed")] == ["Demo speed: 4× (f again: faster)"]
        await pilot.press("f")
        assert [note for note in notes if note.startswith("Demo speed")][-1].startswith("Demo speed: full speed")
        await until(pilot, lambda: finished(app), timeout=120)
        await settle(pilot)
        assert not faster_key_shown(app)
        await pilot.press("f")  # nothing to speed up any more
        assert [note for note in notes if note.startswith("Demo speed")] == [
            "Demo speed: 4× (f again: faster)", "Demo speed: full speed (f again: as it was)"]


@pytest.mark.anyio
async def test_a_session_that_is_not_the_demo_has_no_faster_key(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main_screen.screen_state is not None and not faster_key_shown(app)


@pytest.mark.anyio
async def test_export_writes_what_workbench_export_prints(demo_launch: Launch, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "here"
    folder.mkdir()
    monkeypatch.chdir(folder)
    written: list[Path] = []
    notes: list[str] = []

    def hook(message: Message) -> None:
        if isinstance(message, msg.Exported):
            written.append(message.path)

    app = WorkbenchApp(demo_launch)
    app.notify = lambda text, *args, **kwargs: notes.append(str(text))  # type: ignore[method-assign]
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await settle(pilot)
        state = app.main_screen.screen_state
        assert state is not None
        session_id = state.session.id
        assert "Export the session" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("e")  # a second export never overwrites the first
        await settle(pilot)
    assert written == [folder / f"{session_id}.md", folder / f"{session_id}-2.md"]
    assert any(note == f"Exported {len(state.messages):,} messages to {written[0]}" for note in notes)
    capsys.readouterr()
    assert cli(["export", session_id, "--db", str(demo_launch.db)]) == 0
    printed = capsys.readouterr().out
    assert written[0].read_text(encoding="utf-8") == printed == written[1].read_text(encoding="utf-8")


async def search(pilot: Pilot[None], text: str) -> MessageDetail:
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    detail = app.main_screen.query_one(MessageDetail)
    await pilot.press("enter")  # to the detail pane
    await pilot.press("slash", *text, "enter")
    await pilot.pause()
    return detail


@pytest.mark.anyio
async def test_search_in_a_message_counts_its_matches_and_n_goes_round_them(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        state = app.main_screen.screen_state
        assert state is not None
        target = next(i for i, m in enumerate(state.messages) if m.text.lower().count("since") >= 3)
        app.main_screen.query_one(MessageList).cursor = target
        await pilot.pause()
        detail = await search(pilot, "SINCE")
        assert app.focused is detail and detail.query_text == "SINCE"
        expected = detail.matches
        assert expected >= state.messages[target].text.lower().count("since")
        assert detail.border_subtitle == f"“SINCE”: 1/{expected}"
        await pilot.press("n")
        assert detail.current == 1 and detail.border_subtitle == f"“SINCE”: 2/{expected}"
        await pilot.press("N", "N")
        assert detail.current == expected - 1
        await pilot.press("escape")  # the search closes; the pane stays
        assert app.focused is detail and detail.matches == 0 and detail.border_subtitle == ""
        await pilot.press("slash", "z", "q", "x", "enter")
        assert detail.matches == 0 and detail.border_subtitle == "“zqx”: no match"
