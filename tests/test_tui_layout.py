"""The main screen from 80×24 up: what a short or narrow terminal keeps, and a budget legend that never lands on
its marks. Snapshots of a Claude Code, an OpenCode and a Codex session (real transcripts) at three sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import FIXTURES_DIR
from textual.pilot import Pilot
from tui_fixtures import COMPACTED_FIXTURE, frozen, import_and_load, no_blink, ready, text_of  # noqa: F401

from workbench.engine.context.budget import Budget
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.timeline import Timeline

SnapCompare = Callable[..., bool]

OPENCODE = FIXTURES_DIR / "opencode__victoryforphil__dark-factory__session__hidden-moon__ses_39b583141ffe5xDtTd3Mc1wh0o.json"
CODEX = FIXTURES_DIR / "codex__codemie-ai__codemie-code__rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
TRANSCRIPTS = {"claude_code": COMPACTED_FIXTURE, "opencode": OPENCODE, "codex": CODEX}
SIZES = [(80, 24), (120, 32), (200, 50)]
THRESHOLD_NAMES = ("warn", "compact", "block")

pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")


@pytest.fixture
def no_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WorkbenchApp, "notify", lambda self, *args, **kwargs: None)


@pytest.fixture(scope="module")
def budgets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Budget]:
    folder = tmp_path_factory.mktemp("budgets")
    return {name: import_and_load(folder / f"{name}.db", path).budget() for name, path in TRANSCRIPTS.items()}


# --- the budget panel at every width ----------------------------------------------------------------


def _check_panel(lines: list[str], budget: Budget, width: int) -> None:
    """The row under the bar holds the marks alone; the legend says what each is, and the window, in full."""
    bar = next(i for i, line in enumerate(lines) if "┃" in line)
    marks = lines[bar + 1]
    assert set(marks) <= {"▲", " "}, f"width {width}: something shares the marks' row: {marks!r}"
    assert marks.count("▲") == len({i for i, c in enumerate(lines[bar]) if c == "┃"})
    legend = " ".join(lines[bar + 2:])
    for name in THRESHOLD_NAMES:
        at = {"warn": budget.warn_at, "compact": budget.compact_at, "block": budget.block_at}[name]
        assert f"▲ {name} {at:,} (" in legend, f"width {width}: the {name} entry is cut or missing"
    assert f"window {budget.context_window:,}" in legend, f"width {width}: the window label is missing"
    assert all(len(line) <= width for line in lines), f"width {width}: a line is wider than the panel"


@pytest.mark.parametrize("name", list(TRANSCRIPTS))
def test_legend_and_marks_never_overlap_at_any_width(budgets: dict[str, Budget], name: str) -> None:
    """Every width the panel can have on a terminal from 80 to 250 columns (the timeline takes 36 to 52)."""
    budget = budgets[name]
    panel = BudgetPanel()
    for width in range(80 - 36 - 4, 250 - 4 + 1):
        _check_panel([line.plain for line in panel._build(budget, width)], budget, width)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["opencode", "codex"])
async def test_the_panel_on_screen_from_80_to_250_columns(tmp_path: Path, budgets: dict[str, Budget],
                                                          name: str) -> None:
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(TRANSCRIPTS[name])))
    async with app.run_test(size=(80, 40)) as pilot:
        await ready(pilot)
        panel = app.main_screen.query_one("#budget", BudgetPanel)
        for width in range(80, 251, 5):
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            inner = [line[2:-2].rstrip() for line in text_of(panel).splitlines()[1:-1]]  # border and padding off
            _check_panel([line for line in inner if line], budgets[name], panel.content_region.width)


# --- short and narrow terminals ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_below_30_rows_the_budget_is_one_line_and_the_timeline_hides(tmp_path: Path) -> None:
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(OPENCODE)))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        main = app.main_screen
        panel = main.query_one("#budget", BudgetPanel)
        assert main.has_class("-short") and panel.outer_size.height == 1
        line = text_of(panel)
        assert line.startswith(" Context 85,808 of 368,000 · 23.3%") and "● OK" in line and "┃" in line
        assert not any(timeline.display for timeline in main.query(Timeline))
        assert main.query_one(MessageList).size.height >= 15  # the list keeps most of the screen

        await pilot.resize_terminal(120, 32)
        await pilot.pause()
        assert main.has_class("-tall") and panel.outer_size.height > 5
        assert all(timeline.display for timeline in main.query(Timeline))


@pytest.mark.anyio
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=lambda size: f"{size[0]}x{size[1]}")
async def test_the_first_resize_restyles_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 size: tuple[int, int]) -> None:
    """The screen starts with the size classes of the terminal it opens in: the first resize, which gives
    them, changes no class and so restyles nothing (it restyled the whole screen in every open)."""
    restyled: list[str] = []
    update_styles = WorkbenchApp.update_styles

    def spy(self: WorkbenchApp, node: object = None, animate: bool = True) -> None:
        restyled.append(type(node).__name__)
        update_styles(self, node, animate)  # type: ignore[arg-type]

    monkeypatch.setattr(WorkbenchApp, "update_styles", spy)
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(OPENCODE)))
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        main = app.main_screen
        assert main.has_class("-short" if size[1] < 30 else "-tall")
        assert main.has_class("-narrow" if size[0] < 110 else "-wide")
        assert restyled.count("MainScreen") == 1  # Textual's own, as the screen resumes


# --- what a user sees -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("name", list(TRANSCRIPTS))
def test_main_screen(snap_compare: SnapCompare, tmp_path: Path, name: str, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await ready(pilot)
        assert isinstance(pilot.app, WorkbenchApp)
        no_blink(pilot.app)
        await pilot.pause()

    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(TRANSCRIPTS[name])))
    assert snap_compare(app, terminal_size=size, run_before=run_before)
