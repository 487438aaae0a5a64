"""Textual's footer, without a restyle of every key each time it is rebuilt.

The footer rebuilds its keys whenever the bindings in force change: three or four times as a session opens
(the screen mounting, the list taking focus, ...). Textual's keys start compact and are then bound to the
footer's ``compact``; each of the two changes restyles that key on the spot (a stylesheet pass over it and its
component classes, about a millisecond), which came to 70-110 ms of the UI thread's time in every open of a
session, while the session loads and just after it shows. Here each key starts as the footer is, so neither
change happens; it looks the same.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # the footer's own key widget (not exported by textual.widgets)

PALETTE_KEY = "-command-palette"
"""The class of the command palette's key: the one key the footer does not bind to its ``compact`` (it stays
compact, as keys start)."""


class KeyFooter(Footer):
    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                compact = True if widget.has_class(PALETTE_KEY) else self.compact
                widget.set_reactive(FooterKey.compact, compact)  # its first value: no watcher runs
                widget.set_class(compact, "-compact", update=False)  # what the watcher would have set
            yield widget
