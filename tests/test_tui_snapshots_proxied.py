"""What a proxied agent was sent, as the app shows it: snapshots of the component drill-down (B) and the
request view (R) over a real Claude Code session replayed through the proxy (``claude_code_requests``).

Behaviour is asserted first (what the screen lists, what the upstream received), then the picture. The
session is made with the ``frozen`` fixture on (its ids are counted), and its requests' times are set, so
every run draws the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from claude_code_requests import steered_session
from test_tui_snapshots import SnapCompare, no_toasts, snap  # noqa: F401
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList
from tui_fixtures import frozen, isolated_dirs, text_of, until  # noqa: F401

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.breakdown import BreakdownScreen
from workbench.tui.screens.requests import RequestsScreen
from workbench.tui.widgets.sent_text import SentText

pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")


@pytest.fixture
def claude_code_launch(tmp_path: Path) -> Launch:
    """A proxied Claude Code session of two requests, the second with the first Read result pruned."""
    with steered_session(tmp_path) as session:
        sent = session.proxy.api.bodies[-1]["messages"][3]["content"][0]
        assert sent["content"] == PRUNED_PLACEHOLDER, "the upstream got the placeholder"
    with Store(session.proxy.db) as store, store.transaction():
        for seq, moment in ((1, "2026-11-28T09:30:00+00:00"), (2, "2026-11-28T09:31:05+00:00")):
            store.connection.execute("UPDATE requests SET created_at = ? WHERE session_id = ? AND seq = ?",
                                     [moment, session.session_id, seq])
    return Launch.open(session.proxy.db, session.session_id)


async def open_breakdown(pilot: Pilot[None], component: str) -> BreakdownScreen:
    await pilot.press("B")
    await until(pilot, lambda: isinstance(pilot.app.screen, BreakdownScreen) and pilot.app.screen.found is not None)
    screen = pilot.app.screen
    assert isinstance(screen, BreakdownScreen)
    options = screen.query_one("#breakdown-components", OptionList)
    options.highlighted = [options.get_option_at_index(n).id for n in range(options.option_count)].index(component)
    await pilot.pause()
    return screen


def table_text(table: DataTable[object]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(n)] for n in range(table.row_count)]


class TestWhatTheAgentWasSent:
    def test_tool_definitions_built_in_and_mcp_apart(self, snap_compare: SnapCompare,
                                                      claude_code_launch: Launch) -> None:
        async def tools(pilot: Pilot[None]) -> None:
            screen = await open_breakdown(pilot, "tools")
            table = screen.query_one("#breakdown-entries", DataTable)
            rows = table_text(table)
            names = [row[1] for row in rows]
            assert names[0] == "Built-in tools (27)" and "MCP tools (4)" in names
            mcp_at = names.index("MCP tools (4)")
            assert all(not name.startswith("mcp__") for name in names[1:mcp_at])
            assert names[mcp_at + 1:] == ["mcp__notes__add", "mcp__notes__crash", "mcp__notes__greeting",
                                          "mcp__notes__refuse"]
            assert all(row[3] == "MCP" for row in rows[mcp_at + 1:])
            table.focus()
            table.move_cursor(row=mcp_at + 1)
            table.scroll_end(animate=False)  # the MCP group whole, under the last built-in tools
            await pilot.pause()
            shown = text_of(screen.query_one("#sent-text-body"))
            assert "mcp__notes__add" in shown and "Add two integers." in shown

        assert snap(snap_compare, WorkbenchApp(claude_code_launch), tools)

    def test_a_memory_files_text(self, snap_compare: SnapCompare, claude_code_launch: Launch) -> None:
        async def memory(pilot: Pilot[None]) -> None:
            screen = await open_breakdown(pilot, "memory")
            table = screen.query_one("#breakdown-entries", DataTable)
            names = [row[1] for row in table_text(table)]
            claude_md = next(n for n, name in enumerate(names) if name.endswith("/CLAUDE.md"))
            table.focus()
            table.move_cursor(row=claude_md)
            await pilot.press("enter")
            assert isinstance(screen.focused, SentText)
            assert "Always answer in one sentence." in text_of(screen.query_one("#sent-text-body"))

        assert snap(snap_compare, WorkbenchApp(claude_code_launch), memory)


class TestRequests:
    def test_request_2_against_1_with_a_block_the_workbench_replaced(self, snap_compare: SnapCompare,
                                                                      claude_code_launch: Launch) -> None:
        async def diff(pilot: Pilot[None]) -> None:
            await pilot.press("R")

            def diffed() -> bool:
                screen = pilot.app.screen
                return isinstance(screen, RequestsScreen) and bool(screen.changes)

            await until(pilot, diffed)
            screen = pilot.app.screen
            assert isinstance(screen, RequestsScreen)
            assert [row[0] for row in table_text(screen.query_one("#requests-table", DataTable))] == ["#1", "#2"]
            changes = table_text(screen.query_one("#requests-changes", DataTable))
            assert [row[0] for row in changes] == ["added by the agent", "added by the agent",
                                                   "replaced by the workbench"]
            assert changes[2][1:4] == ["#4.1", "user", "tool_result"]
            await pilot.press("tab", "down", "down")
            shown = text_of(screen.query_one("#sent-text-body"))
            assert "[Old tool result" in shown and "What the agent sent" in shown

        assert snap(snap_compare, WorkbenchApp(claude_code_launch), diff)
