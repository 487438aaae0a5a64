"""What a user sees of searching inside a message: the detail pane with every match highlighted, the
current one apart, and where it is among them. (Behaviour: ``test_tui_demo.py``.)"""

from __future__ import annotations

import pytest
from test_tui_snapshots import SnapCompare, no_toasts, select_row, snap
from textual.pilot import Pilot
from tui_fixtures import (  # noqa: F401
    demo_launch,
    frozen,
    isolated_dirs,
)

from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch

pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")

__all__ = ["no_toasts"]


def says_since(message: object) -> bool:
    return str(getattr(message, "text", "")).lower().count("since") >= 3


class TestMessageSearch:
    def test_matches_highlighted_in_the_detail_pane(self, snap_compare: SnapCompare, demo_launch: Launch) -> None:
        """``/`` in the detail pane, ``since``, Enter, then ``n``: the second match is the current one."""

        async def steps(pilot: Pilot[None]) -> None:
            await select_row(pilot, says_since)
            await pilot.press("enter", "slash", *"since", "enter", "n")

        assert snap(snap_compare, WorkbenchApp(demo_launch), steps)

