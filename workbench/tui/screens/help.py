"""Every key the workbench answers to and what it does, in words, read from the live bindings so the list cannot
go stale (a binding's ``tooltip`` says what it does; its short ``description`` is the footer's label)."""

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
from textual.widgets import Input, OptionList, Static

from workbench.tui.screens.approval import ApprovalScreen
from workbench.tui.screens.breakdown import BreakdownScreen
from workbench.tui.screens.compactions import CompactionHistoryScreen
from workbench.tui.screens.confirm import ConfirmScreen
from workbench.tui.screens.main import MainScreen
from workbench.tui.screens.plans import PlanScreen
from workbench.tui.screens.queued import QueuedEditsScreen
from workbench.tui.screens.requests import RequestsScreen
from workbench.tui.screens.sessions import SessionPicker
from workbench.tui.widgets.agent_input import COMPACT_COMMAND, AgentInput
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.filter_bar import FilterBar
from workbench.tui.widgets.lost_facts import LostFacts
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList

HIDDEN_ACTIONS = frozenset({"scroll_left", "scroll_right", "page_left", "page_right", "help_quit"})
"""Inherited bindings that do nothing here (no horizontal scrolling) or duplicate another key."""


TYPED: dict[str, list[tuple[str, str]]] = {
    "Message box": [(f"{COMPACT_COMMAND} [focus]", ("Typed, then Enter: the compaction preview, as c opens it; "
                                                    "the summary keeps to what follows the command"))],
}
"""What a section answers to that is not a key binding: commands typed in the message box."""


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
    "slash": "/",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
}

ABOUT = """\
The demo. `workbench` on a database with nothing in it plays the bundled scripted session by
itself (offline, no API key): a recorded agent fixes a bug in a temporary copy of a small
project, its tool calls approved for it, and the automatic compaction opens the compaction
pane; after that, `workbench` opens the most recent session. `workbench demo` plays it again
from a fresh start, approving each shell or file-write tool after a short countdown;
`workbench demo --no-autoplay` waits with each scripted message in the message box: press
Enter to send it (you may edit it). Steer between turns. `workbench open FILE|SESSION`
shows a transcript or stored session; an engine session continues with ANTHROPIC_API_KEY set.

Filter syntax (/): words to find, role:user, badge:pinned|pruned|offloaded|summary|error|
compacted|archived, tool:NAME. Every steering key applies a plan through the engine and
tells you the tokens saved; u undoes it."""


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


def what_it_does(binding: Binding) -> str:
    """The binding's explanation (its tooltip), else its label, named by its group where it has one."""
    if binding.tooltip:
        return binding.tooltip
    description = binding.description or binding.action.replace("_", " ").capitalize()
    if binding.group is not None and binding.group.description:
        description = f"{binding.group.description}: {description.lower()}"
    return description


class HelpScreen(ModalScreen[None]):
    """A modal table of keys, grouped by where they work."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark", "close", "Close help", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
        & > #help-box {
            width: 92;
            max-width: 100%;
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

    def sections(self) -> list[tuple[str, list[Binding]]]:
        anywhere = class_bindings(type(self.app)) + class_bindings(Screen)
        anywhere.append(Binding(App.COMMAND_PALETTE_BINDING, "command_palette", "Command palette", id="app.command_palette"))
        return [
            ("Anywhere", anywhere),
            ("Main screen: steering and views", class_bindings(MainScreen, stop_at=Screen)),
            ("Message list", class_bindings(MessageList)),
            ("Filter bar", class_bindings(FilterBar, stop_at=Input)),
            ("Detail pane", class_bindings(MessageDetail)),
            ("Message box", class_bindings(AgentInput, stop_at=Input)),
            ("Compaction pane", class_bindings(CompactionPane, stop_at=VerticalScroll)),
            ("Facts the summary loses (compaction pane)", class_bindings(LostFacts, stop_at=OptionList)),
            ("Strategy plans", class_bindings(PlanScreen, stop_at=ModalScreen)),
            ("Approval", class_bindings(ApprovalScreen, stop_at=ModalScreen)),
            ("Sessions", class_bindings(SessionPicker, stop_at=ModalScreen)),
            ("Asked before deleting", class_bindings(ConfirmScreen, stop_at=ModalScreen)),
            ("Compaction history", class_bindings(CompactionHistoryScreen, stop_at=ModalScreen)),
            ("Queued edits", class_bindings(QueuedEditsScreen, stop_at=ModalScreen)),
            ("What the agent was sent (B)", class_bindings(BreakdownScreen, stop_at=ModalScreen)),
            ("Requests (R)", class_bindings(RequestsScreen, stop_at=ModalScreen)),
            ("This help", class_bindings(HelpScreen, stop_at=ModalScreen)),
        ]

    def _key_name(self, key: str) -> str:
        return KEY_NAMES.get(key) or self.app.get_key_display(Binding(key, ""))

    def _table(self) -> Group:
        keymap: dict[str, str] = dict(getattr(self.app, "_keymap", {}))  # Textual keeps set_keymap() here
        tables: list[Table | Text] = []
        for title, bindings in self.sections():
            table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=True, title_justify="left")
            table.title = Text(title, style=Style(bold=True, color="#7aa2f7"))
            table.add_column("key", style=Style(bold=True, color="#e0af68"), min_width=16, no_wrap=True)
            table.add_column("what it does", ratio=1)
            for binding in with_keymap(bindings, keymap):
                keys = " / ".join(self._key_name(k) for k in binding.key.split(","))
                table.add_row(keys, what_it_does(binding))
            for typed, description in TYPED.get(title, []):
                table.add_row(Text(typed), description)  # Text: "[focus]" is not markup
            tables.append(table)
            tables.append(Text(""))
        about = "\n\n".join(" ".join(paragraph.split("\n")) for paragraph in ABOUT.split("\n\n"))
        tables.append(Text(about, style=Style(color="#a9b1d6")))
        return Group(*tables)

    def action_close(self) -> None:
        self.dismiss(None)
