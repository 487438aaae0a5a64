"""The main screen's footer: the same keys, classes and look as Textual's, without restyling each key every
time the bindings change (70-110 ms of the UI thread per open of a session)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

from workbench.tui.widgets.key_footer import KeyFooter


class FooterApp(App[None]):
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [Binding("q", "quit", "Quit"), Binding("question_mark", "help", "Keys")]

    def __init__(self, footer: Footer) -> None:
        super().__init__()
        self.footer = footer

    def compose(self) -> ComposeResult:
        yield Input(id="one")
        yield Input(id="two")
        yield self.footer


async def _keys_after_focus_changes(footer: Footer, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[tuple[str, str]]]:
    """Restyles of the footer's keys while focus moves twice (each move rebuilds the keys), and each key with
    its classes at the end."""
    restyles: list[FooterKey] = []
    restyle = FooterKey.update_node_styles

    def counted(self: FooterKey, animate: bool = True) -> None:
        restyles.append(self)
        restyle(self, animate)

    monkeypatch.setattr(FooterKey, "update_node_styles", counted)
    app = FooterApp(footer)
    async with app.run_test() as pilot:
        await pilot.pause()
        for target in ("#one", "#two"):
            app.query_one(target).focus()
            await pilot.pause()
            await pilot.pause()
        keys = [(key.key, " ".join(sorted(key.classes))) for key in app.query(FooterKey)]
    return len(restyles), keys


@pytest.mark.parametrize("compact", [False, True])
def test_the_keys_are_textuals_without_a_restyle_apiece(compact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    textuals, expected = asyncio.run(_keys_after_focus_changes(Footer(compact=compact, show_command_palette=True),
                                                               monkeypatch))
    ours, keys = asyncio.run(_keys_after_focus_changes(KeyFooter(compact=compact, show_command_palette=True),
                                                       monkeypatch))
    assert keys == expected
    assert any(key == "ctrl+p" for key, _ in keys), "the command palette's key is among them"
    assert textuals >= len(keys), "Textual's footer restyles each key (else this test measures nothing)"
    assert ours == 0
