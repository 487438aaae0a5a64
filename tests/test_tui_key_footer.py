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
from tui_fixtures import footer_builds

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


async def _builds_while_held(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int], list[str]]:
    """Key counts of each rebuild while held (focus moving twice), then after the release; and the keys shown."""
    builds = footer_builds(monkeypatch)
    footer = KeyFooter(held=True)
    app = FooterApp(footer)
    async with app.run_test() as pilot:
        await pilot.pause()
        for target in ("#one", "#two"):
            app.query_one(target).focus()
            await pilot.pause()
        held = [n for n in builds if n]
        builds.clear()
        footer.release()
        for _ in range(3):
            await pilot.pause()
        shown = [key.key for key in app.query(FooterKey)]
    return held, builds, shown


def test_a_held_footer_draws_no_keys_until_released_then_the_bindings_in_force_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loading screen's footer: a quick open draws the session's keys once, not the loading screen's first."""
    held, after, shown = asyncio.run(_builds_while_held(monkeypatch))
    assert held == []
    assert after == [len(shown)]
    assert "ctrl+p" in shown


async def _rebuilds(footer: Footer, monkeypatch: pytest.MonkeyPatch, new_key: bool) -> tuple[int, list[str]]:
    """Rebuilds of the keys when the footer is told twice, before the next refresh, that the bindings changed
    (``new_key``: a key was bound just before; else nothing it shows changed); and the keys it shows after."""
    rebuilds: list[Footer] = []
    recompose = Footer.recompose

    async def counted(self: Footer) -> None:
        rebuilds.append(self)
        await recompose(self)

    monkeypatch.setattr(Footer, "recompose", counted)
    app = FooterApp(footer)
    async with app.run_test() as pilot:
        await pilot.pause()
        rebuilds.clear()
        if new_key:
            app.bind("f5", "quit", description="Again")
        with footer._context():  # as the screen's signal calls it
            footer.bindings_changed(app.screen)
            footer.bindings_changed(app.screen)
        for _ in range(3):
            await pilot.pause()
        return len(rebuilds), [key.key for key in app.query(FooterKey)]


def test_changes_before_the_next_refresh_make_one_rebuild_and_none_if_the_keys_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    textuals, _ = asyncio.run(_rebuilds(Footer(), monkeypatch, new_key=True))
    assert textuals >= 2, "Textual's footer rebuilds for each (else this test measures nothing)"
    rebuilds, keys = asyncio.run(_rebuilds(KeyFooter(), monkeypatch, new_key=True))
    assert (rebuilds, "f5" in keys) == (1, True)
    rebuilds, same = asyncio.run(_rebuilds(KeyFooter(), monkeypatch, new_key=False))
    assert rebuilds == 0
    assert same == [key for key in keys if key != "f5"]
