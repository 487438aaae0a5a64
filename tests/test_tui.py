"""The TUI: behaviour first (Pilot), then snapshots of every state a user sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from tui_fixtures import (  # noqa: F401  (fixtures are found by name)
    BIG_SESSION_SIZE,
    Loader,
    big_context,
    compacted_loader,
    demo_context,
    demo_loader,
    empty_loader,
    isolated_dirs,
)

from workbench.cli import resolve
from workbench.engine.budget import Budget, budget_from_totals
from workbench.engine.config import BudgetConfig
from workbench.engine.limits import lookup
from workbench.engine.context import SessionContext
from workbench.engine.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.help import HelpScreen
from workbench.tui.widgets.budget_panel import BudgetPanel, allocate
from workbench.tui.widgets.format import LEVEL_LABELS
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList

SIZE = (140, 45)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text_of(widget: Widget) -> str:
    """What a widget paints, as plain text (one line per row)."""
    strips = widget.render_lines(Region(0, 0, *widget.outer_size))
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


def flat(text: str) -> str:
    """Painted text with borders dropped and wrapping undone, for phrase checks."""
    return " ".join(text.translate(str.maketrans("│╭╮╰╯─", "      ")).split())


async def loaded(pilot: Pilot[None]) -> None:
    """Wait for the loading worker and for its message to be handled."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


# --- behaviour ----------------------------------------------------------------


@pytest.mark.anyio
async def test_demo_loads_one_row_per_message(demo_loader: Loader, demo_context: SessionContext) -> None:
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        messages = app.screen.query_one(MessageList)
        assert messages.row_count == len(demo_context.messages) > 30
        assert messages.has_focus
        assert f"{len(demo_context.messages)} messages" in str(messages.border_title)
        info = app.screen.query_one(InfoBar)
        assert info.status == "idle · read-only"
        assert info.model == "claude-sonnet-4-5-20250929"


@pytest.mark.anyio
async def test_budget_panel_shows_the_budget(demo_loader: Loader, demo_context: SessionContext) -> None:
    budget = demo_context.budget()
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        panel = app.screen.query_one(BudgetPanel)
        assert panel.budget == budget
        painted = text_of(panel)
        assert f"{budget.used:,} of {budget.effective_window:,} usable tokens" in painted
        assert "reported by the API" in painted
        assert f"Output reserve {budget.output_reserve:,}" in painted
        assert panel.has_class("-ok")


@pytest.mark.anyio
async def test_cursor_keys_move_the_selection_and_the_detail_follows(
    demo_loader: Loader, demo_context: SessionContext
) -> None:
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        messages = app.screen.query_one(MessageList)
        detail = app.screen.query_one(MessageDetail)
        assert messages.cursor == 0
        assert "[PERSIST] Add a `--since` option" in text_of(detail.query_one("#detail-body"))

        await pilot.press("down", "down", "down")
        assert messages.cursor == 3
        selected = demo_context.messages[3]
        assert messages.selected_row is not None and messages.selected_row.message.id == selected.id
        body = flat(text_of(detail.query_one("#detail-body")))
        assert "tool call · Read" in body
        assert '"file_path": "/home/dev/projects/logsift/src/logsift/cli.py"' in body
        assert detail.border_title == "Message #4"

        await pilot.press("end")
        assert messages.cursor == len(demo_context.messages) - 1
        await pilot.press("home")
        assert messages.cursor == 0
        await pilot.press("pagedown")
        assert messages.cursor > 10
        await pilot.press("up")
        await pilot.press("pageup")
        assert messages.cursor == 0

        await pilot.click(MessageList, offset=(10, 4))  # border, header, then rows 0, 1, 2
        assert messages.cursor == 2

        await pilot.press("enter")
        assert detail.has_focus
        await pilot.press("escape")
        assert messages.has_focus


@pytest.mark.anyio
async def test_error_result_and_thinking_show_in_detail(demo_loader: Loader, demo_context: SessionContext) -> None:
    error_index = next(
        i for i, m in enumerate(demo_context.messages) if any(getattr(p, "is_error", False) for p in m.parts)
    )
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        messages = app.screen.query_one(MessageList)
        messages.cursor = error_index
        await pilot.pause()
        body = flat(text_of(app.screen.query_one("#detail-body")))
        assert "tool result · Bash" in body and "· error" in body
        assert "TypeError: can't compare offset-naive and offset-aware datetimes" in body
        messages.cursor = 1
        await pilot.pause()
        assert "thinking" in text_of(app.screen.query_one("#detail-body"))


@pytest.mark.anyio
async def test_help_key_lists_every_binding(demo_loader: Loader) -> None:
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        listed = text_of(app.screen.query_one("#help-body"))
        for binding_id in (
            "app.quit",
            "app.help",
            "messages.cursor_up",
            "messages.cursor_down",
            "messages.page_up",
            "messages.page_down",
            "messages.first",
            "messages.last",
            "messages.focus_detail",
            "detail.back",
            "help.close",
        ):
            assert binding_id in listed
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.anyio
async def test_help_follows_a_remapped_key(demo_loader: Loader) -> None:
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        app.set_keymap({"messages.cursor_down": "j"})
        await pilot.press("j")
        assert app.screen.query_one(MessageList).cursor == 1
        await pilot.press("question_mark")
        listed = text_of(app.screen.query_one("#help-body"))
        assert any("j" in line and "messages.cursor_down" in line for line in listed.splitlines())


@pytest.mark.anyio
async def test_bad_target_shows_the_error_and_q_quits(tmp_path: Path) -> None:
    def loader() -> SessionContext:
        with Store(tmp_path / "t.db") as store:
            session_id, _ = resolve(store, str(tmp_path / "missing.jsonl"), None)
            return SessionContext.load(store, session_id)

    app = WorkbenchApp(loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert app.screen.has_class("-failed")
        status = flat(text_of(app.screen.query_one("#status-text")))
        assert app.screen.query_one("#status-text").border_title == "Could not open the session"
        assert "missing.jsonl: no such file, and no stored session with that id" in status
        assert "Traceback" not in status
        assert not app.screen.query_one("#body").display
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.anyio
async def test_unexpected_failure_is_reported_with_a_log(tmp_path: Path, isolated_dirs: Path) -> None:
    def loader() -> SessionContext:
        raise RuntimeError("disk on fire")

    app = WorkbenchApp(loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        status = flat(text_of(app.screen.query_one("#status-text")))
        assert "Internal error: RuntimeError: disk on fire" in status
        assert "workbench.log" in status
    log = isolated_dirs / "workbench.log"
    assert "RuntimeError: disk on fire" in log.read_text(encoding="utf-8")


@pytest.mark.anyio
async def test_empty_session(empty_loader: Loader) -> None:
    app = WorkbenchApp(empty_loader)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        messages = app.screen.query_one(MessageList)
        assert messages.row_count == 0 and messages.selected_row is None
        await pilot.press("down", "end", "pageup")
        assert "No messages in this session." in text_of(messages)
        assert "unknown model" in text_of(app.screen.query_one(BudgetPanel))


@pytest.mark.anyio
async def test_100k_messages_stay_virtual(big_context: SessionContext) -> None:
    """No widget per row, and only the visible rows are ever painted."""
    app = WorkbenchApp(lambda: big_context)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        messages = app.screen.query_one(MessageList)
        assert messages.row_count == BIG_SESSION_SIZE
        assert len(app.screen.query("*")) < 60
        await pilot.press("end")
        for _ in range(5):
            await pilot.press("pageup")
        page = messages.scrollable_content_region.height - 2
        assert messages.cursor == BIG_SESSION_SIZE - 1 - 5 * page
        messages.cursor = BIG_SESSION_SIZE // 2
        await pilot.pause()
        painted = text_of(messages)
        assert f"message {BIG_SESSION_SIZE // 2 + 1}: the quick" in painted
        assert f"{BIG_SESSION_SIZE // 2 + 1:>6}  " in painted
        assert len(messages._strips) < 400  # rows painted so far: a few screens, not 100,000


class BudgetLevels(App[None]):
    """One panel per level, for checking the threshold colours and labels."""

    def compose(self) -> ComposeResult:
        for used in LEVEL_USAGE.values():
            yield BudgetPanel()

    def on_mount(self) -> None:
        for panel, used in zip(self.query(BudgetPanel), LEVEL_USAGE.values(), strict=True):
            panel.budget = synthetic_budget(used)


LEVEL_USAGE = {"ok": 40_000, "warn": 130_000, "compact": 161_000, "block": 175_000}


def synthetic_budget(used: int) -> Budget:
    limits, _ = lookup("claude-sonnet-4-5")
    totals = {"system": 3_000, "tools": 9_000, "user": 2_000, "assistant": 6_000, "tool_calls": 4_000}
    totals["tool_results"] = used - sum(totals.values())
    return budget_from_totals(
        totals, model="claude-sonnet-4-5", limits=limits, config=BudgetConfig(), source="calibrated", cache_hit_rate=None
    )


@pytest.mark.anyio
async def test_budget_panel_changes_at_each_threshold() -> None:
    app = BudgetLevels()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for panel, level in zip(app.query(BudgetPanel), LEVEL_USAGE, strict=True):
            assert panel.budget is not None and panel.budget.level == level
            assert panel.has_class(f"-{level}")
            painted = text_of(panel)
            assert LEVEL_LABELS[level] in flat(painted)
            assert "calibrated estimate" in painted


def test_allocate_gives_every_component_a_cell() -> None:
    assert allocate([1, 1_000_000, 0], 1_000_001, 10) == [1, 9, 0]
    assert sum(allocate([3, 3, 3], 9, 10)) == 10
    assert allocate([0, 0], 0, 10) == [0, 0]


# --- snapshots ----------------------------------------------------------------


class TestSnapshots:
    """What a user sees, at a fixed size, after the session has loaded."""

    def test_demo_session(self, snap_compare, demo_loader: Loader) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(WorkbenchApp(demo_loader), terminal_size=SIZE, run_before=loaded)

    def test_demo_error_result_selected(self, snap_compare, demo_loader: Loader) -> None:  # type: ignore[no-untyped-def]
        async def select_error(pilot: Pilot[None]) -> None:
            await loaded(pilot)
            await pilot.press(*["down"] * 28)

        assert snap_compare(WorkbenchApp(demo_loader), terminal_size=SIZE, run_before=select_error)

    def test_compacted_fixture(self, snap_compare, compacted_loader: Loader) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(WorkbenchApp(compacted_loader), terminal_size=SIZE, run_before=loaded)

    def test_compacted_fixture_end(self, snap_compare, compacted_loader: Loader) -> None:  # type: ignore[no-untyped-def]
        async def to_end(pilot: Pilot[None]) -> None:
            await loaded(pilot)
            await pilot.press("end")

        assert snap_compare(WorkbenchApp(compacted_loader), terminal_size=SIZE, run_before=to_end)

    def test_empty_session(self, snap_compare, empty_loader: Loader) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(WorkbenchApp(empty_loader), terminal_size=SIZE, run_before=loaded)

    def test_help_screen(self, snap_compare, demo_loader: Loader) -> None:  # type: ignore[no-untyped-def]
        async def open_help(pilot: Pilot[None]) -> None:
            await loaded(pilot)
            await pilot.press("question_mark")

        assert snap_compare(WorkbenchApp(demo_loader), terminal_size=SIZE, run_before=open_help)

    def test_budget_levels(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(BudgetLevels(), terminal_size=(120, 40))

    def test_load_error(self, snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        def loader() -> SessionContext:
            with Store(tmp_path / "t.db") as store:
                session_id, _ = resolve(store, "no-such-session", None)
                return SessionContext.load(store, session_id)

        assert snap_compare(WorkbenchApp(loader), terminal_size=SIZE, run_before=loaded)
