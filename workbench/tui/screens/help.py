"""Every key the workbench answers to, read from the live bindings so the list cannot go stale."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingsMap, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList

HIDDEN_ACTIONS = frozenset({"scroll_left", "scroll_right", "page_left", "page_right", "help_quit"})
"""Inherited bindings that do nothing here (no horizontal scrolling) or duplicate another key."""


KEY_NAMES = {
    "up": "↑",
    "down": "↓",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "home": "Home",
    "end": "End",
    "enter": "Enter",
    "tab": "Tab",
    "shift+tab": "Shift+Tab",
    "escape": "Esc",
    "question_mark": "?",
}


def class_bindings(node_type: type[object], stop_at: type[object] | None = None) -> list[Binding]:
    """Bindings of a class and its bases up to ``stop_at`` (excluded), the most derived winning for a key."""
    seen: set[str] = set()
    out: list[Binding] = []
    for cls in node_type.__mro__:
        if stop_at is not None and cls is stop_at:
            break
        declared: Sequence[BindingType] = cls.__dict__.get("BINDINGS", ())
        for binding in Binding.make_bindings(declared):
            if binding.key in seen or binding.system or binding.action in HIDDEN_ACTIONS:
                continue
            seen.add(binding.key)
            out.append(binding)
    return out


def with_keymap(bindings: Iterable[Binding], keymap: dict[str, str]) -> list[Binding]:
    """The bindings as the user has remapped them (``App.set_keymap``), by binding id."""
    bindings_map = BindingsMap(list(bindings))
    if keymap:
        bindings_map.apply_keymap(keymap)
    merged: dict[tuple[str, str], list[str]] = {}
    first: dict[tuple[str, str], Binding] = {}
    for key, key_bindings in bindings_map.key_to_bindings.items():
        for binding in key_bindings:
            ident = (binding.action, binding.id or binding.description)
            merged.setdefault(ident, []).append(key)
            first.setdefault(ident, binding)
    return [first[ident].with_key(",".join(keys), first[ident].key_display) for ident, keys in merged.items()]


class HelpScreen(ModalScreen[None]):
    """A modal table of keys, grouped by where they work."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark", "close", "Close help", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
        & > #help-box {
            width: 84;
            max-height: 90%;
            height: auto;
            border: round $primary;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
    }
    """

    def compose(self) -> ComposeResult:
        box = VerticalScroll(Static(self._table(), id="help-body"), id="help-box")
        box.border_title = "Keys"
        box.border_subtitle = "esc or ? to close"
        yield box

    def _sections(self) -> list[tuple[str, list[Binding]]]:
        anywhere = class_bindings(type(self.app)) + class_bindings(Screen)
        anywhere.append(Binding(App.COMMAND_PALETTE_BINDING, "command_palette", "Command palette", id="app.command_palette"))
        return [
            ("Anywhere", anywhere),
            ("Message list", class_bindings(MessageList)),
            ("Detail pane", class_bindings(MessageDetail)),
            ("This help", class_bindings(HelpScreen, stop_at=ModalScreen)),
        ]

    def _key_name(self, key: str) -> str:
        return KEY_NAMES.get(key) or self.app.get_key_display(Binding(key, ""))

    def _table(self) -> Group:
        keymap: dict[str, str] = dict(getattr(self.app, "_keymap", {}))  # Textual keeps set_keymap() here
        tables = []
        for title, bindings in self._sections():
            table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=False, title_justify="left")
            table.title = Text(title, style=Style(bold=True, color="#7aa2f7"))
            table.add_column("key", style=Style(bold=True, color="#e0af68"), min_width=18, no_wrap=True)
            table.add_column("action", min_width=30)
            table.add_column("id", style=Style(dim=True))
            for binding in with_keymap(bindings, keymap):
                keys = " / ".join(self._key_name(k) for k in binding.key.split(","))
                description = binding.description or binding.action.replace("_", " ").capitalize()
                if binding.group is not None and binding.group.description:
                    description = f"{binding.group.description}: {description.lower()}"
                table.add_row(keys, description, binding.id or "")
            tables.append(table)
            tables.append(Text(""))
        return Group(*tables[:-1])

    def action_close(self) -> None:
        self.dismiss(None)
