"""The keys to what a proxied agent was sent (B) and to its requests (R): they open on a proxied session,
say why not on another, and are in the help and the command palette."""

from __future__ import annotations

from pathlib import Path

import pytest
from claude_code_requests import steered_session
from textual.widgets import DataTable, OptionList
from tui_fixtures import SIZE, isolated_dirs, settle, text_of, until  # noqa: F401 - isolated_dirs: autouse

from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.breakdown import BreakdownScreen
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.main_keys import NOT_PROXIED
from workbench.tui.screens.requests import RequestsScreen
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.sent_text import SentText

pytestmark = pytest.mark.anyio


async def test_b_and_r_open_on_a_proxied_session_and_list_what_the_engine_read(tmp_path: Path) -> None:
    with steered_session(tmp_path) as session:
        launch = Launch.open(session.proxy.db, session.session_id)
    app = WorkbenchApp(launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("B")
        await until(pilot, lambda: isinstance(app.screen, BreakdownScreen) and app.screen.found is not None)
        screen = app.screen
        assert isinstance(screen, BreakdownScreen)
        options = screen.query_one("#breakdown-components", OptionList)
        labels = [str(options.get_option_at_index(n).prompt) for n in range(options.option_count)]
        assert labels[0].startswith("System prompt") and any(label.startswith("MCP tools") for label in labels)
        await pilot.press("down", "down", "down", "enter")  # to the tool definitions, then into their list
        table = screen.query_one("#breakdown-entries", DataTable)
        assert screen.focused is table and str(table.get_row_at(0)[1]) == "Built-in tools (27)"
        await pilot.press("down", "enter")  # the first built-in tool, then its text
        assert str(table.get_row_at(1)[1]) == "Agent" and isinstance(screen.focused, SentText)
        assert text_of(screen.query_one("#sent-text-body")).lstrip("│ ").startswith("Agent")
        await pilot.press("escape")
        assert not isinstance(app.screen, BreakdownScreen)

        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RequestsScreen) and bool(app.screen.changes))
        requests = app.screen
        assert isinstance(requests, RequestsScreen)
        await pilot.press("up")  # request 1, against nothing: everything in it was added
        await until(pilot, lambda: len(requests.changes) == 6)
        assert {change.kind for change in requests.changes} == {"added"}
        await pilot.press("escape")
        assert not isinstance(app.screen, RequestsScreen)


async def test_a_click_on_a_budget_legend_label_lists_what_makes_it_up(tmp_path: Path) -> None:
    with steered_session(tmp_path) as session:
        launch = Launch.open(session.proxy.db, session.session_id)
    app = WorkbenchApp(launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lines = text_of(app.main_screen.query_one(BudgetPanel)).splitlines()  # as painted, borders and all
        row = next(n for n, line in enumerate(lines) if "MCP tools" in line)
        await pilot.click(BudgetPanel, offset=(lines[row].index("MCP tools") + 2, row))
        await until(pilot, lambda: isinstance(app.screen, BreakdownScreen) and app.screen.found is not None)
        assert isinstance(app.screen, BreakdownScreen) and app.screen.component == "tools_mcp"
        names = [str(row[1]) for row in map(app.screen.query_one("#breakdown-entries", DataTable).get_row_at,
                                             range(4))]
        assert names == ["mcp__notes__add", "mcp__notes__crash", "mcp__notes__greeting", "mcp__notes__refuse"]


async def test_on_a_session_that_was_not_proxied_the_keys_say_why(tmp_path: Path) -> None:
    said: list[str] = []
    app = WorkbenchApp(Launch.demo(tmp_path / "demo.db", autoplay=False))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.notify = lambda message, **_: said.append(str(message))  # type: ignore[method-assign]
        app.main_screen.query_one(MessageList).focus()  # (the demo waits with its message in the input box)
        await pilot.press("B", "R")
        assert said == [NOT_PROXIED, NOT_PROXIED]
        assert not isinstance(app.screen, BreakdownScreen | RequestsScreen)


async def test_the_keys_are_in_the_help_and_the_command_palette(tmp_path: Path) -> None:
    app = WorkbenchApp(Launch.demo(tmp_path / "demo.db", autoplay=False))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert "What the agent was sent" in titles and "Requests and what changed" in titles
        app.main_screen.query_one(MessageList).focus()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        listed = text_of(app.screen.query_one("#help-body"))
        for line in ("A proxied session: its system prompt, memory files, tools and reminders",
                     "A proxied session's requests, each against the one before it",
                     "What the agent was sent (B)", "Entries / read the entry's text", "Requests (R)"):
            assert line in " ".join(listed.split()), line
