"""A newcomer's first minutes, as text on the screen: the footer names help, quit and the focused pane's main
keys at 80 columns and up, with no label cut; the help says in words what each key does and fits 80 columns;
the compaction preview opens on tokens before → after, leaves the list a readable preview column at 120
columns, and takes the whole screen at 80×24 until it closes."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from tui_fixtures import flat, footer_labels, isolated_dirs, settle, text_of  # noqa: F401

from workbench.cli import demo_path
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.help import HelpScreen
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList


@pytest.fixture
def launch(tmp_path: Path) -> Launch:
    """The bundled recorded transcript, imported into a temporary database (``tui_fixtures.demo_launch``)."""
    return Launch.open(tmp_path / "t.db", str(demo_path()))


SIZES = [(80, 24), (120, 40)]
LIST_KEYS = {"? Help", "q Quit", "p x o a Steer", "u Undo", "c Compact…", "/ Filter"}
DETAIL_KEYS = {"? Help", "q Quit", "esc Back to list", "p x o a Steer", "u Undo"}
COMPACTION_KEYS = {"f1 Help", "^q Quit", "^s Apply compaction", "esc Cancel / close"}
"""The summary is being edited there: ``?`` and ``q`` type into it, F1 and ctrl+q still work."""


def footer_seen(pilot: Pilot[None]) -> list[str]:
    """The footer's labels as painted, each checked to be a whole key and its description."""
    footer = pilot.app.screen.query_one(KeyFooter)
    painted = text_of(footer)
    assert len(painted) == pilot.app.size.width
    whole = {f"{entry.display} {entry.description}" for entry in footer.entries}
    labels = footer_labels(painted)
    assert set(labels) <= whole, f"a label is cut: {labels}"
    return labels


async def open_compaction(pilot: Pilot[None]) -> CompactionPane:
    await pilot.press("c")
    await settle(pilot)
    assert isinstance(pilot.app, WorkbenchApp)
    pane = pilot.app.main_screen.query_one(CompactionPane)
    assert pane.phase == "ready" and pane.plan is not None
    return pane


@pytest.mark.anyio
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_footer_shows_help_quit_and_the_focused_panes_main_keys_whole(
    launch: Launch, size: tuple[int, int],
) -> None:
    app = WorkbenchApp(launch)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert app.main_screen.query_one(MessageList).has_focus
        assert LIST_KEYS <= set(footer_seen(pilot))

        await pilot.press("enter")
        await settle(pilot)
        assert app.main_screen.query_one(MessageDetail).has_focus
        assert DETAIL_KEYS <= set(footer_seen(pilot))

        await pilot.press("escape")
        await open_compaction(pilot)
        assert COMPACTION_KEYS <= set(footer_seen(pilot))


@pytest.mark.anyio
async def test_help_says_what_each_key_does_in_words_and_fits_80_columns(launch: Launch) -> None:
    app = WorkbenchApp(launch)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box")
        assert box.region.x >= 0 and box.region.right <= 80
        painted = text_of(box).splitlines()
        assert painted[0].startswith("╭") and painted[0].endswith("╮")
        assert painted[-1].startswith("╰") and painted[-1].endswith("╯")
        listed = flat(text_of(app.screen.query_one("#help-body")))
        for words in ("Quit the workbench", "Pin or unpin the selected message", "Undo the latest change",
                      "Preview a compaction: tokens before → after", "Back to the message list",
                      "Apply the compaction, with the summary as you edited it"):
            assert words in listed
        for internal in ("app.", "steer.", "list.", "messages.", "compaction.", "toggle_steering"):
            assert internal not in listed, internal


@pytest.mark.anyio
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_compaction_preview_opens_on_tokens_before_and_after(launch: Launch,
                                                                      size: tuple[int, int]) -> None:
    app = WorkbenchApp(launch)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        pane = await open_compaction(pilot)
        await pilot.pause()
        assert pane.plan is not None
        facts = pane.query_one("#compaction-facts")
        assert pane.scroll_y == 0 and facts.region.y == pane.content_region.y, "the figures are the first lines"
        lines = text_of(facts).splitlines()
        assert f"{pane.plan.before_tokens:,} → {pane.plan.after_tokens:,} tokens" in flat(" ".join(lines[:2]))
        shown = flat(text_of(facts))
        assert "summarised" in shown and "kept verbatim" in shown
        assert facts.region.bottom <= pane.content_region.bottom, "what is summarised and kept is in view too"
        summary = pane.query_one("#compaction-summary")
        assert summary.has_focus and summary.region.y > facts.region.y


def preview_width(messages: MessageList) -> int:
    """Cells of the list's preview column, read from its painted header."""
    header = text_of(messages).splitlines()[1]  # under the border
    inside = header[1:1 + messages.scrollable_content_region.width]
    return len(inside) - inside.index("preview")


@pytest.mark.anyio
async def test_at_120_columns_the_list_keeps_a_readable_preview_beside_the_pane(launch: Launch) -> None:
    app = WorkbenchApp(launch)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        messages = app.main_screen.query_one(MessageList)
        await open_compaction(pilot)
        assert messages.region.width > 0 and app.main_screen.maximized is None
        assert preview_width(messages) >= 24
        assert "badges" in text_of(messages).splitlines()[1]


@pytest.mark.anyio
async def test_at_80x24_the_pane_takes_the_screen_and_gives_it_back(launch: Launch) -> None:
    app = WorkbenchApp(launch)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app.main_screen
        messages = main.query_one(MessageList)
        pane = await open_compaction(pilot)
        await pilot.pause()
        assert main.maximized is pane
        assert pane.region.width == 80 and pane.region.height >= 24 - 2  # all but the header and the keys
        assert not messages.region.area
        await pilot.press("escape")
        await pilot.pause()
        assert main.maximized is None and not main.has_class("-compacting")
        assert messages.has_focus and messages.region.area
        assert "badges" in text_of(messages).splitlines()[1]


@pytest.mark.anyio
async def test_the_pane_gives_the_screen_back_when_the_terminal_widens(launch: Launch) -> None:
    app = WorkbenchApp(launch)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        pane = await open_compaction(pilot)
        assert app.main_screen.maximized is pane
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.pause()
        assert app.main_screen.maximized is None
        assert app.main_screen.query_one(MessageList).region.area and pane.region.area
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert app.main_screen.maximized is pane


@pytest.mark.anyio
async def test_another_session_opening_takes_the_screen_back_from_the_pane(launch: Launch) -> None:
    """The loading screen, then the next session, are shown whole: the pane is not left covering them."""
    app = WorkbenchApp(launch)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app.main_screen
        await open_compaction(pilot)
        state, live = main.screen_state, main.live
        assert state is not None
        main.show_loading()
        await pilot.pause()
        assert main.maximized is None and main.query_one("#status").region.area
        main.show_session(state, live)
        await pilot.pause()
        assert main.maximized is None and not main.has_class("-compacting")
        assert main.query_one(MessageList).region.area
