"""The compaction preview with the facts its summary keeps and loses (issue #42), at 120×40 and 80×24: a real
Claude Code session whose offline summary loses some, the lost list focused so the footer shows its keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import claude_fixture
from test_tui_snapshots import snap
from textual.pilot import Pilot
from tui_fixtures import frozen, isolated_dirs, settle, until  # noqa: F401

from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.lost_facts import LostFacts

SnapCompare = Callable[..., bool]

pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")


@pytest.fixture
def no_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WorkbenchApp, "notify", lambda self, *args, **kwargs: None)


def _app(tmp_path: Path) -> WorkbenchApp:
    return WorkbenchApp(Launch.open(tmp_path / "t.db", str(claude_fixture("session-196820da"))))


async def _previewed(pilot: Pilot[None]) -> None:
    await pilot.press("c")
    await settle(pilot)
    assert isinstance(pilot.app, WorkbenchApp)
    pane = pilot.app.main_screen.query_one(CompactionPane)
    await until(pilot, lambda: pane.phase == "ready" and pane.kept is not None and bool(pane.kept.lost))
    pane.query_one(LostFacts).focus(scroll_visible=False)
    await pilot.pause(0.1)
    pane.scroll_home(animate=False, immediate=True)
    await until(pilot, lambda: pane.scroll_y == 0)


class TestCompactionFacts:
    @pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
    def test_preview_with_the_lost_facts(self, snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
        assert snap(snap_compare, _app(tmp_path), _previewed, size=size)
