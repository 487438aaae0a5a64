"""What a newcomer sees first, at the sizes they report from: the footer at 80 and 120 columns, the help at 80
columns, the compaction preview at 80×24 (the pane takes the screen) and 120×40 (beside the list).

Same conventions as ``test_tui_snapshots``: a temporary database, pinned clocks and ids, no blinking cursor,
every engine command finished before the picture. The behaviour behind each picture is asserted in
``test_tui_keys`` and ``test_tui_key_footer``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_snapshots import SnapCompare, no_toasts, snap  # noqa: F401
from textual.pilot import Pilot
from tui_fixtures import frozen, isolated_dirs  # noqa: F401

from workbench.cli import demo_path
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch


@pytest.fixture
def launch(tmp_path: Path) -> Launch:
    """The bundled recorded transcript, imported into a temporary database (``tui_fixtures.demo_launch``)."""
    return Launch.open(tmp_path / "t.db", str(demo_path()))


pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")


async def compact(pilot: Pilot[None]) -> None:
    await pilot.press("c")


async def open_help(pilot: Pilot[None]) -> None:
    await pilot.press("question_mark")


class TestFooter:
    def test_the_list_at_80_columns(self, snap_compare: SnapCompare, launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(launch), None, (80, 24))

    def test_the_list_at_120_columns(self, snap_compare: SnapCompare, launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(launch), None, (120, 40))


class TestHelp:
    def test_the_help_at_80_columns(self, snap_compare: SnapCompare, launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(launch), open_help, (80, 24))


class TestCompactionPreview:
    def test_the_pane_takes_the_screen_at_80x24(self, snap_compare: SnapCompare, launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(launch), compact, (80, 24))

    def test_beside_the_list_at_120x40(self, snap_compare: SnapCompare, launch: Launch) -> None:
        assert snap(snap_compare, WorkbenchApp(launch), compact, (120, 40))
