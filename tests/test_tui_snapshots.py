"""What a user sees, state by state, at a fixed size: snapshot tests grouped by screen.

Deterministic by construction: a temporary database and data dir, clocks and ids
pinned by the ``frozen`` fixture, cursors that do not blink, live streams held by
a gate at a known chunk, every engine command finished before the picture.
Behaviour is asserted in the other ``test_tui_*`` modules; these catch what
only pixels show.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import FIXTURES_DIR
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Select
from tui_fixtures import (  # noqa: F401
    BIG_SESSION_SIZE,
    SIZE,
    TUI_SCRIPT,
    GatedProvider,
    Loader,
    big_context,
    compacted_launch,
    demo_launch,
    empty_loader,
    frozen,
    isolated_dirs,
    no_blink,
    ready,
    script_launch,
    settle,
    steady,
    summary_provider,
    tui_script,
    until,
)

from workbench.engine.context.session import SessionContext
from workbench.engine.providers.base import Provider
from workbench.engine.transcript.models import ToolResultPart
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.approval import ApprovalScreen
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.message_list import MessageList

Steps = Callable[[Pilot[None]], Awaitable[None]]
SnapCompare = Callable[..., bool]

pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")


@pytest.fixture
def no_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Toasts come and go on their own clock: keep them out of the pictures (behaviour tests check them)."""
    monkeypatch.setattr(WorkbenchApp, "notify", lambda self, *args, **kwargs: None)


def snap(snap_compare: SnapCompare, app: App[None], steps: Steps | None = None, size: tuple[int, int] = SIZE) -> bool:
    async def run_before(pilot: Pilot[None]) -> None:
        await ready(pilot)
        if steps is not None:
            await steps(pilot)
            await settle(pilot)
        assert isinstance(pilot.app, WorkbenchApp)
        no_blink(pilot.app)
        pilot.app.clear_notifications()
        await steady(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


async def select_row(pilot: Pilot[None], predicate: Callable[[object], bool], nth: int = 0) -> None:
    app = pilot.app
    assert isinstance(app, WorkbenchApp) and app.main_screen.screen_state is not None
    matches = [i for i, m in enumerate(app.main_screen.screen_state.messages) if predicate(m)]
    app.main_screen.query_one(MessageList).cursor = matches[nth]
    await pilot.pause()


def big_result(message: object) -> bool:
    parts = getattr(message, "parts", [])
    return any(isinstance(p, ToolResultPart) and len(p.text) > 400 for p in parts)


class TestMainScreen:
    def test_demo_session_idle(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        """``workbench demo --no-autoplay``: the scripted demo, its first message waiting in the input box."""
        assert snap(snap_compare, WorkbenchApp(Launch.demo(tmp_path / "demo.db", autoplay=False)))

    def test_imported_transcript(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(demo_launch))

    def test_real_fixture_transcript(self, snap_compare: SnapCompare, compacted_launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(compacted_launch))

    def test_task_row_with_its_subagent_peak(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        """The Task call that started a sub-agent: the sub-agent's peak context before the row's preview. (The
        cursor is on the next row: the Task row's detail names the sub-agent's session, whose id comes from
        the fixture's absolute path.)"""
        transcript = FIXTURES_DIR / "claude-code__marot__spotter__subagent.jsonl"

        async def on_task(pilot: Pilot[None]) -> None:
            await select_row(pilot, lambda m: any(getattr(p, "name", "") == "Task" for p in getattr(m, "parts", [])))
            await pilot.press("down")

        assert snap(snap_compare, WorkbenchApp(Launch.open(tmp_path / "t.db", str(transcript))), on_task)

    def test_empty_session(self, snap_compare: SnapCompare, empty_loader: Loader) -> None:
        assert snap(snap_compare, WorkbenchApp(empty_loader))

    def test_100k_messages_scrolled_to_the_middle(self, snap_compare: SnapCompare,
                                                  big_context: SessionContext) -> None:
        async def middle(pilot: Pilot[None]) -> None:
            assert isinstance(pilot.app, WorkbenchApp)
            pilot.app.main_screen.query_one(MessageList).cursor = BIG_SESSION_SIZE // 2

        assert snap(snap_compare, WorkbenchApp(lambda: big_context), middle)

    def test_load_error(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        assert snap(snap_compare, WorkbenchApp(Launch.open(tmp_path / "t.db", "no-such-session")))

    def test_filtered_and_sorted(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def filtered(pilot: Pilot[None]) -> None:
            await pilot.press("slash", *"role:user tool:Read", "enter", "s")

        assert snap(snap_compare, WorkbenchApp(demo_launch), filtered)


class TestSteering:
    def test_pinned_pruned_offloaded_rows(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def steer(pilot: Pilot[None]) -> None:
            await select_row(pilot, lambda m: getattr(m, "role", "") == "assistant", 3)
            await pilot.press("p")
            await settle(pilot)
            await select_row(pilot, big_result, 0)
            await pilot.press("x")
            await settle(pilot)
            await select_row(pilot, big_result, 1)
            await pilot.press("o")
            await settle(pilot)
            await pilot.press("home")

        assert snap(snap_compare, WorkbenchApp(demo_launch), steer)

    def test_detail_of_an_offloaded_result(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def offload(pilot: Pilot[None]) -> None:
            await select_row(pilot, big_result, 1)
            await pilot.press("o")
            await settle(pilot)
            await pilot.press("enter")

        assert snap(snap_compare, WorkbenchApp(demo_launch), offload)

    def test_strategy_plan_view(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def plans(pilot: Pilot[None]) -> None:
            await pilot.press("S")

        assert snap(snap_compare, WorkbenchApp(demo_launch), plans)


class TestCompaction:
    def _app(self, demo_launch: Launch, gate: GatedProvider) -> WorkbenchApp:
        return WorkbenchApp(replace(demo_launch, summary_provider=summary_provider(gate)))

    async def _streaming(self, pilot: Pilot[None], gate: GatedProvider) -> None:
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(pilot.app, WorkbenchApp)
        pane = pilot.app.main_screen.query_one(CompactionPane)
        pane.query_one("#compaction-summariser", Select).value = "llm"
        await until(pilot, gate.reached.is_set)
        await until(pilot, lambda: len(pane.summary_text) == 48)
        await pilot.pause(0.1)  # the layout the new preview asked for

    def test_preview_before_the_summary_arrives(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        gate = GatedProvider(None, after=2)  # type: ignore[arg-type]

        async def run_before(pilot: Pilot[None]) -> None:
            await ready(pilot)
            await self._streaming(pilot, gate)
            assert isinstance(pilot.app, WorkbenchApp)
            no_blink(pilot.app)
            pilot.app.clear_notifications()
            await pilot.pause()

        try:
            assert snap_compare(self._app(demo_launch, gate), terminal_size=SIZE, run_before=run_before)
        finally:
            gate.release.set()

    def test_preview_after_the_summary_arrives(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        gate = GatedProvider(None, after=2)  # type: ignore[arg-type]

        async def arrived(pilot: Pilot[None]) -> None:
            await self._streaming(pilot, gate)
            gate.release.set()
            assert isinstance(pilot.app, WorkbenchApp)
            pane = pilot.app.main_screen.query_one(CompactionPane)
            await until(pilot, lambda: pane.phase == "ready" and pane.plan is not None)
            await pilot.pause(0.1)  # the pane scrolls back to its top once the preview is laid out
            await until(pilot, lambda: pane.scroll_y == 0)

        assert snap(snap_compare, self._app(demo_launch, gate), arrived)

    def test_after_apply(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def apply(pilot: Pilot[None]) -> None:
            await pilot.press("c")
            await settle(pilot)
            await pilot.press("ctrl+s")

        assert snap(snap_compare, WorkbenchApp(demo_launch), apply)

    def test_after_undo(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def apply_then_undo(pilot: Pilot[None]) -> None:
            await pilot.press("c")
            await settle(pilot)
            await pilot.press("ctrl+s")
            await settle(pilot)
            await pilot.press("u")

        assert snap(snap_compare, WorkbenchApp(demo_launch), apply_then_undo)


class TestLive:
    def test_mid_stream(self, snap_compare: SnapCompare, script_launch: Launch) -> None:
        gates: list[GatedProvider] = []

        def wrap(provider: Provider) -> Provider:
            gates.append(GatedProvider(provider, after=5))
            return gates[0]  # type: ignore[return-value]

        async def run_before(pilot: Pilot[None]) -> None:
            await ready(pilot)
            await pilot.press("enter")
            await until(pilot, lambda: bool(gates) and gates[0].reached.is_set())
            assert isinstance(pilot.app, WorkbenchApp)
            stream = pilot.app.main_screen.query_one("LiveStream")
            expected = TUI_SCRIPT["turns"][0]["responses"][0][1]["text"][:48]  # two 24-character chunks
            await until(pilot, lambda: getattr(stream, "text", "") == expected)
            no_blink(pilot.app)
            pilot.app.clear_notifications()
            await pilot.pause()

        app = WorkbenchApp(replace(script_launch, approval="approve", wrap_provider=wrap))
        try:
            assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
        finally:
            for gate in gates:
                gate.release.set()

    def test_warn_state_after_the_first_turn(self, snap_compare: SnapCompare, script_launch: Launch) -> None:
        async def first_turn(pilot: Pilot[None]) -> None:
            await pilot.press("enter")

        assert snap(snap_compare, WorkbenchApp(replace(script_launch, approval="approve")), first_turn)

    def test_approval_modal(self, snap_compare: SnapCompare, script_launch: Launch) -> None:
        async def run_before(pilot: Pilot[None]) -> None:
            await ready(pilot)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen))
            assert isinstance(pilot.app, WorkbenchApp)
            no_blink(pilot.app)
            pilot.app.clear_notifications()
            await pilot.pause()

        assert snap_compare(WorkbenchApp(script_launch), terminal_size=SIZE, run_before=run_before)

    def test_automatic_compaction_in_a_live_session(self, snap_compare: SnapCompare, script_launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(replace(script_launch, autoplay=True, approval="approve")))


async def open_picker(pilot: Pilot[None]) -> None:
    """The session picker, once its look for other agents' sessions has reported."""
    from workbench.tui.screens.sessions import SessionPicker

    await pilot.press("ctrl+o")
    await until(pilot, lambda: isinstance(pilot.app.screen, SessionPicker) and pilot.app.screen.discovered is not None)


class TestModals:
    def test_help(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        async def open_help(pilot: Pilot[None]) -> None:
            await pilot.press("question_mark")

        assert snap(snap_compare, WorkbenchApp(demo_launch), open_help)

    def test_compaction_history_of_an_imported_session(self, snap_compare: SnapCompare,
                                                       compacted_launch: Launch) -> None:
        """C on a Claude Code transcript that compacted: dated by its compact_boundary, "not recorded" where
        the transcript gives no figure."""
        async def open_history(pilot: Pilot[None]) -> None:
            await pilot.press("C")

        assert snap(snap_compare, WorkbenchApp(compacted_launch), open_history)

    def test_session_picker(self, snap_compare: SnapCompare, demo_launch: Launch, tmp_path: Path) -> None:
        from tui_fixtures import COMPACTED_FIXTURE

        from workbench.engine.transcript.importers import import_file
        from workbench.engine.transcript.store import Store

        assert demo_launch.db is not None
        with Store(demo_launch.db) as store:
            if COMPACTED_FIXTURE.exists():
                import_file(store, COMPACTED_FIXTURE)

        assert snap(snap_compare, WorkbenchApp(demo_launch), open_picker)

    def test_delete_confirmation(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        """d in the session picker on a session that is not open: what goes with it, asked before it goes."""
        from tui_fixtures import COMPACTED_FIXTURE

        from workbench.engine.transcript.importers import import_file
        from workbench.engine.transcript.store import Store

        assert demo_launch.db is not None
        with Store(demo_launch.db) as store:
            other = import_file(store, COMPACTED_FIXTURE).session.id

        async def ask(pilot: Pilot[None]) -> None:
            from workbench.engine.sources.session_list import ListedSession
            from workbench.tui.screens.confirm import ConfirmScreen
            from workbench.tui.screens.sessions import SessionPicker

            await open_picker(pilot)
            picker = pilot.app.screen
            assert isinstance(picker, SessionPicker)
            row = next(i for i, e in enumerate(picker.entries) if isinstance(e, ListedSession) and e.session.id == other)
            picker.table.move_cursor(row=row)
            await pilot.press("d")
            await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))

        assert snap(snap_compare, WorkbenchApp(demo_launch), ask)

    def test_session_picker_with_found_sessions(self, snap_compare: SnapCompare, demo_launch: Launch,
                                                tmp_path: Path) -> None:
        """Other agents' sessions under (a temporary) home, below the stored ones, dated by a fixed mtime."""
        from tui_fixtures import plant

        plant(Path(os.environ["HOME"]), tmp_path)
        assert snap(snap_compare, WorkbenchApp(demo_launch), open_picker)

    def test_budget_levels(self, snap_compare: SnapCompare) -> None:
        from test_tui import BudgetLevels

        assert snap_compare(BudgetLevels(), terminal_size=(120, 40))


class TestWatch:
    def test_watch_view(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        """``workbench watch``: a followed transcript, its name and "watching" in the header."""
        from helpers import claude_fixture

        path = tmp_path / "live.jsonl"
        path.write_bytes(claude_fixture("short").read_bytes())
        assert snap(snap_compare, WorkbenchApp(Launch.watch(path)))


class TestProxy:
    def test_the_price_of_a_prune_to_the_agents_cache(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        """A proxied session (recorded by the proxy's recorder, no network): its budget attributed from the
        request, and the modal a prune opens first, with what it does to the agent's prompt cache."""
        import orjson
        from proxy_support import request
        from test_tui_proxy import turns

        from workbench.proxy.recorder import Recorder
        from workbench.proxy.response import Answer

        db = tmp_path / "proxy.db"
        recorder = Recorder(db, home=tmp_path)
        exchange = recorder.prepare(orjson.dumps(request(turns())))
        recorder.finish(exchange, 200, Answer(blocks=[{"type": "text", "text": "It calls setup()."}], complete=True))
        recorder.close()
        assert exchange.placement is not None
        launch = Launch.open(db, exchange.placement.thread.session_id)

        async def prune(pilot: Pilot[None]) -> None:
            await select_row(pilot, big_result)
            await pilot.press("x")

        assert snap(snap_compare, WorkbenchApp(launch), prune)
