"""The main screen's footer: the keys that matter where the focus is, on one line that never cuts a label.

Textual's footer lays out every key in force and cuts whatever passes the right edge, mid-word ("Filte",
"^ppalett e"), so help and quit, bound on the app and listed last, were the first to go. This one ranks the keys
and drops whole keys, the lowest ranked first, until the rest fit: help and quit always (by whichever of their
keys works where the focus is: a text box takes ``?`` and ``q`` as text), then the command palette's key, then
the keys the screen names (``order``, the focused pane's main actions first), then the rest in Textual's order.
What is dropped is in the help screen and the command palette.

It is one line drawn by :meth:`render`: a change of the bindings reads them again and repaints that line, with no
widget per key to compose again (the bindings change three or four times as a session opens). A click on a key
presses it and a pointer on it shows what it does (the binding's tooltip), as on Textual's footer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.keys import format_key, key_to_character
from textual.screen import Screen
from textual.widget import Widget

ALWAYS = ("help", "quit")
"""Actions whose key the footer always shows, in this order, at the right end."""
GAP = "  "
PALETTE_RULE = " ▏"


class FooterEntry(NamedTuple):
    """One key (or a group of keys with one description) as the footer shows it."""

    key: str
    """The key a click presses (the first of a group)."""
    display: str
    description: str
    enabled: bool
    rank: tuple[int, int]
    """Lower is kept longer: (0, i) help and quit, (1, 0) the palette, (2, i) named in the order, (3, i) others."""
    tooltip: str = ""
    """What it does, in a sentence (the binding's tooltip)."""

    @property
    def width(self) -> int:
        return cell_len(self.display) + 1 + cell_len(self.description)

    @property
    def always(self) -> bool:
        return self.rank[0] == 0

    @property
    def palette(self) -> bool:
        return self.rank[0] == 1


def line_width(entries: Sequence[FooterEntry]) -> int:
    """Cells the footer needs for ``entries``: a space, the ranked keys, then help and quit, then the palette."""
    left = [e.width for e in entries if not e.always and not e.palette]
    right = [e.width for e in entries if e.always]
    palette = [e.width for e in entries if e.palette]
    width = 1 + sum(left) + sum(right) + len(GAP) * max(0, len(left) + len(right) - 1)
    if palette:
        width += len(PALETTE_RULE) + palette[0]
    return width + 1


def fit(entries: Sequence[FooterEntry], width: int) -> list[FooterEntry]:
    """The highest ranked entries that fit in ``width`` cells, whole: the lowest ranked go first."""
    ranked = sorted(entries, key=lambda e: e.rank)
    while ranked and line_width(ranked) > width:
        ranked.pop()
    return ranked


def read_keys(screen: Screen[Any], order: Sequence[str] = ()) -> tuple[FooterEntry, ...]:
    """The footer's entries for the bindings in force on ``screen``, ranked (see the module's docstring)."""
    app = screen.app
    focused = screen.focused
    picked: dict[tuple[int, str], tuple[Binding, bool]] = {}
    for node, binding, enabled, _tooltip in screen.active_bindings.values():
        if binding.key == app.COMMAND_PALETTE_BINDING:
            continue
        if focused is not None and node is not focused and focused.check_consume_key(binding.key, typed(binding.key)):
            continue  # Textual leaves a few of these in force (``/``): it types in the focused box, not the key
        ident = (id(node), binding.action)
        if binding.action in ALWAYS:  # a shown binding of the action wins over a hidden one (q over ctrl+q)
            if ident not in picked or (binding.show and not picked[ident][0].show):
                picked[ident] = binding, enabled
        elif binding.show:
            picked.setdefault(ident, (binding, enabled))
    entries: list[FooterEntry] = []
    groups: set[int] = set()
    for position, (binding, enabled) in enumerate(picked.values()):
        group = binding.group
        members = [b for b, _ in picked.values() if group is not None and b.group is group]
        if group is None or len(members) < 2:
            entries.append(FooterEntry(binding.key, app.get_key_display(binding), binding.description, enabled,
                                       _rank(binding, order, position), binding.tooltip))
        elif id(group) not in groups:  # the group's keys and its one description, where its first key is
            groups.add(id(group))
            display = " ".join(app.get_key_display(b) for b in members)
            rank = min(_rank(b, order, position) for b in members)
            tooltip = "; ".join(f"{app.get_key_display(b)}: {b.tooltip or b.description}" for b in members)
            entries.append(FooterEntry(binding.key, display, group.description, enabled, rank, tooltip))
    palette = screen.active_bindings.get(app.COMMAND_PALETTE_BINDING) if app.ENABLE_COMMAND_PALETTE else None
    if palette is not None:
        entries.append(FooterEntry(palette.binding.key, app.get_key_display(palette.binding),
                                   palette.binding.description, palette.enabled, (1, 0), palette.binding.tooltip))
    return tuple(entries)


def typed(key: str) -> str | None:
    """The character a key types, if any: Textual's ``key_to_character`` knows no ``slash``."""
    character = key_to_character(key)
    if character is None and "+" not in key:
        shown = format_key(key)
        character = shown if len(shown) == 1 and shown.isascii() and shown.isprintable() else None
    return character


def _rank(binding: Binding, order: Sequence[str], position: int) -> tuple[int, int]:
    if binding.action in ALWAYS:
        return 0, ALWAYS.index(binding.action)
    if binding.id is not None and binding.id in order:
        return 2, order.index(binding.id)
    return 3, position


class KeyFooter(Widget):
    """The keys in force, ranked, on one line; the ones that do not fit whole are left out."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"key-footer--key", "key-footer--description", "key-footer--rule"}

    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-footer--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        & > .key-footer--description {
            color: $footer-description-foreground; background: $footer-description-background;
        }
        & > .key-footer--rule { color: $foreground 20%; }
    }
    """

    def __init__(self, *, order: Sequence[str] = (), held: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.order = tuple(order)
        """Binding ids the footer keeps longest after help, quit and the palette, the most important first."""
        self._held = held
        self._stale = False
        """Bindings changed while held: read when released."""
        self._due = False
        """A read of the bindings waits for the next refresh, so the changes before it make one read."""
        self.entries: tuple[FooterEntry, ...] = ()
        """Every key in force, ranked; :meth:`shown` is those that fit."""
        self._spans: list[tuple[int, int, FooterEntry]] = []
        """Where each drawn key is on the line (start, end, entry), for the pointer."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        if not self._held:
            self.bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def hold(self) -> None:
        """Keep the keys as they are until :meth:`release` (the loading screen's: it draws no key of its own)."""
        self._held = True

    def release(self) -> None:
        """Show the bindings in force now, if they changed while held or none were read yet."""
        self._held = False
        if self._stale or not self.entries:
            self._stale = False
            self.bindings_changed(self.screen)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if self._held:
            self._stale = True
        elif not self._due and self.is_attached and screen is self.screen:
            self._due = True
            self.call_after_refresh(self._read)

    def _read(self) -> None:
        self._due = False
        entries = read_keys(self.screen, self.order)
        if entries != self.entries:  # focus moving within the screen often changes nothing the footer shows
            self.entries = entries
            self.refresh()

    def shown(self) -> list[FooterEntry]:
        """The entries drawn at the footer's width, highest ranked first."""
        return fit(self.entries, self.size.width)

    def render(self) -> Text:
        shown = self.shown()
        left = [e for e in shown if not e.always and not e.palette]
        right = sorted((e for e in shown if e.always), key=lambda e: e.rank)
        palette = [e for e in shown if e.palette]
        line = Text(" ", no_wrap=True, overflow="crop", end="")
        self._spans = []
        self._draw(line, left)
        right_width = sum(e.width for e in right) + len(GAP) * max(0, len(right) - 1) + 1
        if palette:
            right_width += len(PALETTE_RULE) + palette[0].width
        line.append(" " * max(len(GAP) if left and right else 0, self.size.width - line.cell_len - right_width))
        self._draw(line, right)
        if palette:
            line.append(PALETTE_RULE, self.get_component_rich_style("key-footer--rule"))
            self._draw(line, palette)
        return line

    def _draw(self, line: Text, entries: Sequence[FooterEntry]) -> None:
        key_style = self.get_component_rich_style("key-footer--key")
        description_style = self.get_component_rich_style("key-footer--description")
        for index, entry in enumerate(entries):
            if index:
                line.append(GAP)
            dim = Style(dim=True) if not entry.enabled else Style()
            start = line.cell_len
            line.append(entry.display, key_style + dim)
            line.append(" " + entry.description, description_style + dim)
            self._spans.append((start, line.cell_len, entry))

    def _entry_at(self, x: int) -> FooterEntry | None:
        return next((entry for start, end, entry in self._spans if start <= x < end), None)

    def on_click(self, event: events.Click) -> None:
        entry = self._entry_at(event.x)
        if entry is not None:
            event.stop()
            self.app.simulate_key(entry.key)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        entry = self._entry_at(event.x)
        self.tooltip = (entry.tooltip or entry.description) if entry is not None else None
