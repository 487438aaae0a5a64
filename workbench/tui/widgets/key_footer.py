"""Textual's footer, without a restyle of every key each time it is rebuilt, and without rebuilds nobody sees.

The footer rebuilds its keys whenever the bindings in force change: three or four times as a session opens
(the screen mounting, the list taking focus, ...). Textual's keys start compact and are then bound to the
footer's ``compact``; each of the two changes restyles that key on the spot (a stylesheet pass over it and its
component classes, about a millisecond), which came to 70-110 ms of the UI thread's time in every open of a
session, while the session loads and just after it shows. Here each key starts as the footer is, so neither
change happens; it looks the same.

A rebuild of the keys takes 25-30 ms more; so a change that leaves the keys as they are drawn rebuilds nothing,
changes that come before the last one is drawn make one rebuild, and a held footer (:meth:`hold`, the loading
screen's) only notes them until it is released: a quick open draws the session's keys once, instead of the
loading screen's and then the session's twice (the first took that time from the load itself).
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # the footer's own key widget (not exported by textual.widgets)

PALETTE_KEY = "-command-palette"
"""The class of the command palette's key: the one key the footer does not bind to its ``compact`` (it stays
compact, as keys start)."""


class KeyFooter(Footer):
    def __init__(self, *args: Any, held: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = held
        self._stale = False
        """Bindings changed while held: shown when released."""
        self._drawn: tuple[object, ...] | None = None
        """The keys the last rebuild drew (see :meth:`_keys_in_force`)."""
        self._due = False
        """A rebuild waits for the next refresh: it reads the bindings in force then, so later changes join it."""

    def hold(self) -> None:
        """Keep the keys as they are until :meth:`release`."""
        self._held = True

    def release(self) -> None:
        """Show the bindings in force now, if they changed while held or no key was drawn yet."""
        self._held = False
        if self._stale or self._drawn is None:
            self._stale = False
            self.bindings_changed(self.screen)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self._bindings_ready = True  # Textual's own flag: compose lists no key before the first change
        if self._held:
            self._stale = True
        elif not self._due and screen.app.app_focus and self.is_attached and screen is self.screen:
            self._due = True
            self.call_after_refresh(self._rebuild)

    async def _rebuild(self) -> None:
        self._due = False
        keys = self._keys_in_force()
        if keys == self._drawn:  # focus moving within the screen often changes nothing the footer shows
            return
        self._drawn = keys
        with self._context():  # the keys bind to this footer's reactives, whoever asked for the rebuild
            await self.recompose()

    def _keys_in_force(self) -> tuple[object, ...]:
        """What :meth:`compose` draws the keys from."""
        return (self.compact, self.show_command_palette, *(
            (binding.key, binding.action, binding.description, binding.group, binding.show, enabled, tooltip)
            for _, binding, enabled, tooltip in self.screen.active_bindings.values()))

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                compact = True if widget.has_class(PALETTE_KEY) else self.compact
                widget.set_reactive(FooterKey.compact, compact)  # its first value: no watcher runs
                widget.set_class(compact, "-compact", update=False)  # what the watcher would have set
            yield widget
