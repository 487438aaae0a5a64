"""What a user sees of the played demo saying what its step is (with its faster key in the footer), and of
searching inside a message: the detail pane with every match highlighted, the current one apart, and where it
is among them. (Behaviour: ``test_tui_demo.py``.)"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_tui_snapshots import SnapCompare, no_toasts, select_row, snap
from textual.pilot import Pilot
from tui_fixtures import (  # noqa: F401
    SIZE,
    GatedProvider,
    demo_launch,
    frozen,
    isolated_dirs,
    no_blink,
    steady,
    until,
)

from workbench.engine.providers.base import Provider
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.widgets.live_stream import LiveStream

DEMO = json.loads((Path(__file__).parents[1] / "workbench" / "data" / "scripts" / "demo.json").read_text())

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



class TestPlayedDemo:
    def test_the_agent_box_says_what_the_step_is(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        """The bare ``workbench`` on an empty database, held two chunks into the demo's first answer."""
        gates: list[GatedProvider] = []

        def wrap(provider: Provider) -> Provider:
            gates.append(GatedProvider(provider, after=2))
            return gates[0]  # type: ignore[return-value]

        async def run_before(pilot: Pilot[None]) -> None:
            # Not ready(): the engine stays busy with the held answer until the picture is taken.
            await until(pilot, lambda: bool(gates) and gates[0].reached.is_set())
            assert isinstance(pilot.app, WorkbenchApp)
            stream = pilot.app.main_screen.query_one(LiveStream)
            first = DEMO["turns"][0]["responses"][0]
            expected = first[1]["thinking"][:48]  # two 24-character chunks
            await until(pilot, lambda: stream.thinking == expected and stream.narration == first[0]["narrate"])
            no_blink(pilot.app)
            pilot.app.clear_notifications()
            await steady(pilot)

        launch = replace(Launch.welcome(tmp_path / "wb.db"), chunk_delay=0.0, turn_pause=0.0, step_pause=0.0,
                         wrap_provider=wrap)
        try:
            assert snap_compare(WorkbenchApp(launch), terminal_size=SIZE, run_before=run_before)
        finally:
            for gate in gates:
                gate.release.set()
