"""The footer: help and quit always, then the keys ranked first, whole; what does not fit is left out, never
cut mid-word; a text box's letters are not advertised as keys; a click presses a key."""

from __future__ import annotations

from typing import ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Button, Input
from tui_fixtures import footer_labels, footer_reads, text_of

from workbench.tui.widgets.key_footer import KeyFooter, fit, line_width

ORDER = ("main.one", "main.two", "main.three")
ALL_LABELS = ["? Help", "q Quit", "1 First main", "2 Second main", "3 Third main", "w Watch", "z Zoom",
              "^o Sessions", "^p palette"]


class FooterApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark,f1", "help", "Help"),
        Binding("ctrl+o", "sessions", "Sessions"),
        Binding("w", "watch", "Watch"),
        Binding("z", "zoom", "Zoom"),
        Binding("3", "pressed('three')", "Third main", id="main.three"),
        Binding("2", "pressed('two')", "Second main", id="main.two", tooltip="Press the second button"),
        Binding("1", "pressed('one')", "First main", id="main.one"),
        Binding("r", "pressed('hidden')", "Hidden", show=False),
    ]

    def __init__(self, footer: KeyFooter) -> None:
        super().__init__()
        self.footer = footer
        self.pressed: list[str] = []

    def compose(self) -> ComposeResult:
        yield Button("a button", id="button")
        yield Input(id="box")
        yield self.footer

    def action_pressed(self, name: str) -> None:
        self.pressed.append(name)

    def action_help(self) -> None:
        self.pressed.append("help")

    def action_sessions(self) -> None:
        self.pressed.append("sessions")


@pytest.mark.anyio
@pytest.mark.parametrize("width", [36, 50, 64, 80, 100, 120])
async def test_keys_that_do_not_fit_are_left_out_whole_the_lowest_ranked_first(width: int) -> None:
    app = FooterApp(KeyFooter(order=ORDER))
    async with app.run_test(size=(width, 12)) as pilot:
        app.query_one("#button").focus()
        await pilot.pause()
        await pilot.pause()
        painted = text_of(app.footer)
        shown = footer_labels(painted)
        assert len(painted) == width
        assert set(shown) <= set(ALL_LABELS), f"a label was cut: {shown}"
        assert {"? Help", "q Quit"} <= set(shown)
        ranked = ["? Help", "q Quit", "^p palette", "1 First main", "2 Second main", "3 Third main"]
        kept = [label for label in ranked if label in shown]
        assert kept == ranked[:len(kept)], "a key was dropped before a lower ranked one"
        if width >= 120:
            assert set(shown) == set(ALL_LABELS)
        assert "Hidden" not in painted


def test_fit_keeps_the_longest_prefix_of_the_ranking_that_fits() -> None:
    async def entries() -> list[object]:
        app = FooterApp(KeyFooter(order=ORDER))
        async with app.run_test(size=(140, 12)) as pilot:
            app.query_one("#button").focus()
            await pilot.pause()
            await pilot.pause()
            return list(app.footer.entries)

    import asyncio

    found = asyncio.run(entries())
    everything = fit(found, 1000)  # type: ignore[arg-type]
    for width in range(10, line_width(everything) + 1):
        kept = fit(found, width)  # type: ignore[arg-type]
        assert line_width(kept) <= width or not kept
        assert kept == everything[:len(kept)]


@pytest.mark.anyio
async def test_in_a_text_box_help_and_quit_are_the_keys_that_still_work_there() -> None:
    app = FooterApp(KeyFooter(order=ORDER))
    async with app.run_test(size=(120, 12)) as pilot:
        app.query_one("#box").focus()
        await pilot.pause()
        await pilot.pause()
        shown = footer_labels(text_of(app.footer))
        assert "f1 Help" in shown and "^q Quit" in shown
        assert not {"? Help", "q Quit", "w Watch", "1 First main"} & set(shown), "the box types these"
        assert "^o Sessions" in shown
        await pilot.press("q")
        assert app.query_one("#box", Input).value == "q" and app.is_running


@pytest.mark.anyio
async def test_a_click_on_a_key_presses_it_and_the_pointer_on_it_says_what_it_does() -> None:
    app = FooterApp(KeyFooter(order=ORDER))
    async with app.run_test(size=(120, 12)) as pilot:
        app.query_one("#button").focus()
        await pilot.pause()
        await pilot.pause()
        painted = text_of(app.footer)
        await pilot.click(KeyFooter, offset=(painted.index("Second main"), 0))
        await pilot.click(KeyFooter, offset=(painted.index("? Help"), 0))
        await pilot.pause()
        assert app.pressed == ["two", "help"]
        await pilot.hover(KeyFooter, offset=(painted.index("Second main"), 0))
        assert app.footer.tooltip == "Press the second button"
        await pilot.hover(KeyFooter, offset=(painted.index("w Watch"), 0))
        assert app.footer.tooltip == "Watch"


@pytest.mark.anyio
async def test_a_held_footer_reads_no_keys_until_released(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loading screen's footer: a quick open shows the session's keys, not the loading screen's first."""
    reads = footer_reads(monkeypatch)
    footer = KeyFooter(held=True)
    app = FooterApp(footer)
    async with app.run_test(size=(120, 12)) as pilot:
        await pilot.pause()
        for target in ("#button", "#box"):
            app.query_one(target).focus()
            await pilot.pause()
        assert reads == [] and text_of(footer).strip() == ""
        footer.release()
        for _ in range(3):
            await pilot.pause()
        assert len(reads) == 1 and "q" not in reads[0] and "f1" in reads[0]  # the box has the focus
        assert "f1 Help" in text_of(footer)


@pytest.mark.anyio
async def test_changes_before_the_next_refresh_make_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = footer_reads(monkeypatch)
    app = FooterApp(KeyFooter())
    async with app.run_test(size=(120, 12)) as pilot:
        await pilot.pause()
        await pilot.pause()
        reads.clear()
        app.bind("f5", "pressed('again')", description="Again")
        app.footer.bindings_changed(app.screen)
        app.footer.bindings_changed(app.screen)
        for _ in range(3):
            await pilot.pause()
        assert len(reads) == 1 and "f5" in reads[0]
        assert "f5 Again" in text_of(app.footer)
