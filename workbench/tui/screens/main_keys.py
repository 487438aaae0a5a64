"""The main screen's keys: steering (each a plan through the engine), views, the list's order, sessions.

A base class of :class:`MainScreen`, so the screen module stays about layout and
what it shows. Every key is a :class:`Binding` with an id (remap it with
``App.set_keymap``); the app also lists each action in the command palette.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding, BindingType
from textual.screen import Screen

from workbench.tui.actions import AppCommands
from workbench.tui.demo_pace import SPEEDS
from workbench.tui.messages import LiveState
from workbench.tui.screen_state import ScreenState
from workbench.tui.steering import Action
from workbench.tui.widgets.agent_input import AgentInput
from workbench.tui.widgets.filter_bar import FilterBar
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.row_filter import RowQuery

if TYPE_CHECKING:
    from workbench.tui.widgets.compaction_pane import CompactionPane

STEER = Binding.Group("Steer")
NOT_PROXIED = ("Only a proxied session keeps what its agent was sent: run the agent through `workbench proxy` "
               "or `workbench wrap`.")
TOGGLES: dict[str, tuple[Action, Action]] = {
    "pin": ("pin", "unpin"), "prune": ("prune", "restore"), "offload": ("offload", "inline"),
    "archive": ("archive", "unarchive"),
}

FOOTER_ORDER = (
    "demo.faster", "detail.back", "compaction.apply", "compaction.cancel", "facts.add", "facts.pin", "input.leave",
    "filter.clear",
    "steer.pin", "steer.prune", "steer.offload", "steer.archive", "steer.undo", "detail.search", "steer.compact", "list.filter",
    "compaction.preview", "messages.focus_detail", "messages.next_heaviest", "steer.strategies",
    "messages.next_pinned", "app.sessions", "compaction.prompt",
)
"""The footer's keys after help, quit and the palette, kept in this order as the width shrinks: first the played
demo's faster key (only while it plays), the way out of the focused pane, or its main action (these are in force only while it has the focus), then steering, which
acts on the selected message wherever the focus is (a text box takes its letters), then the rest."""


class MainKeys(Screen[None]):
    """Actions of the main screen; :class:`MainScreen` provides the state they read."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "demo_faster", "Faster demo", id="demo.faster",  # first: while the demo plays, it leads
                tooltip="While the demo plays: 4x faster, then without pauses, then as it was"),
        Binding("p", "toggle_steering('pin')", "Pin/unpin", id="steer.pin", group=STEER,
                tooltip="Pin or unpin the selected message: a pinned message is kept word for word by compaction"),
        Binding("x", "toggle_steering('prune')", "Prune/restore", id="steer.prune", group=STEER,
                tooltip="Replace the selected message's tool output with a short placeholder, or bring it back"),
        Binding("o", "toggle_steering('offload')", "Offload/inline", id="steer.offload", group=STEER,
                tooltip="Move the selected message's tool output out of the context, behind a reference the agent "
                        "can read, or back"),
        Binding("a", "toggle_steering('archive')", "Archive/unarchive", id="steer.archive", group=STEER,
                tooltip="Hide the selected message (with its tool call or result) from the model, or show it again"),
        Binding("u", "undo", "Undo", id="steer.undo", tooltip="Undo the latest change to the context"),
        Binding("r", "redo", "Redo", id="steer.redo", show=False, tooltip="Make the change undone last again"),
        Binding("S", "strategies", "Strategies", key_display="S", id="steer.strategies",
                tooltip="What each pruning strategy would change now and the tokens it saves; apply one"),
        Binding("c", "compact", "Compact…", id="steer.compact",
                tooltip="Preview a compaction: tokens before → after, what is summarised and kept; apply or cancel"),
        Binding("C", "compactions", "Compaction history", key_display="C", id="steer.compactions", show=False,
                tooltip="Every compaction of this session, and the way to its summary"),
        Binding("Q", "queued", "Queued edits", key_display="Q", id="steer.queued", show=False,
                tooltip="The edits waiting for the agent's cache to go cold; cancel one before it reaches the agent"),
        Binding("B", "breakdown", "What the agent was sent", key_display="B", id="proxy.breakdown", show=False,
                tooltip="A proxied session: its system prompt, memory files, tools and reminders, each with its text"),
        Binding("R", "requests", "Requests and what changed", key_display="R", id="proxy.requests", show=False,
                tooltip="A proxied session's requests, each against the one before it"),
        Binding("slash", "filter", "Filter", key_display="/", id="list.filter",
                tooltip="Show only the messages with some words, a role, a badge or a tool: role:user badge:pinned"),
        Binding("s", "sort", "Sort by tokens", id="list.sort", show=False,
                tooltip="Sort the list by tokens, heaviest first; again for the transcript's order"),
        Binding("i", "focus_input", "Message agent", id="agent.focus", show=False,
                tooltip="Type a message to the agent (in a session the agent continues)"),
        Binding("g", "open_subagent", "Open sub-agent session", id="session.subagent", show=False,
                tooltip="Open the session of the sub-agent the selected message started"),
        Binding("b", "back_session", "Back to the parent session", id="session.back", show=False),
        Binding("escape", "close_pane", "Close the compaction pane / filter", id="main.close", show=False),
        Binding("e", "export", "Export the session to a file", id="session.export", show=False),
    ]

    screen_state: ScreenState | None
    live: LiveState
    query_state: RowQuery

    @property
    def workbench(self) -> AppCommands:
        assert isinstance(self.app, AppCommands)
        return self.app

    def _requery(self, query: RowQuery) -> None:
        raise NotImplementedError

    def close_compaction(self) -> None:
        raise NotImplementedError

    @property
    def subagents(self) -> Mapping[str, Sequence[str]]:
        raise NotImplementedError

    def _selected_id(self) -> str | None:
        row = self.query_one(MessageList).selected_row
        if row is None:
            self.notify("No message selected.", severity="warning", timeout=3)
        return row.message_id if row is not None else None

    def action_toggle_steering(self, kind: str) -> None:
        row = self.query_one(MessageList).selected_row
        if row is None:
            self.notify("No message selected.", severity="warning", timeout=3)
            return
        on_state = {"pin": row.pinned, "prune": "pruned" in row.badges, "offload": "offloaded" in row.badges,
                    "archive": row.archived}[kind]
        do, undo = TOGGLES[kind]
        self.workbench.steer(undo if on_state else do, row.message_id)

    def action_undo(self) -> None:
        self.workbench.undo()

    def action_redo(self) -> None:
        self.workbench.redo()

    def action_strategies(self) -> None:
        self.workbench.show_strategies()

    async def action_compact(self) -> None:
        await self.workbench.preview_compaction()

    def action_compactions(self) -> None:
        self.workbench.show_compactions()

    def action_queued(self) -> None:
        self.workbench.show_queued()

    def _proxied(self) -> tuple[Path, str] | None:
        """The database and id of the open session when the proxy stored its requests; else says why not."""
        state, db = self.screen_state, self.workbench.launch.db
        if state is None or db is None:
            self.notify("No stored session is open.", severity="warning", timeout=3)
            return None
        if state.session.source_format != "proxy":
            self.notify(NOT_PROXIED, severity="warning", timeout=6)
            return None
        return db, state.session.id

    def action_breakdown(self, component: str = "system") -> None:
        from workbench.tui.screens.breakdown import BreakdownScreen  # deferred: a modal loads with its first use

        if (target := self._proxied()) is not None:
            self.app.push_screen(BreakdownScreen(*target, component=component))

    def action_requests(self) -> None:
        from workbench.tui.screens.requests import RequestsScreen  # deferred: a modal loads with its first use

        if (target := self._proxied()) is not None:
            self.app.push_screen(RequestsScreen(*target))

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one(FilterBar).focus()

    def action_sort(self) -> None:
        by_tokens = not self.query_state.by_tokens
        self._requery(RowQuery.parse(self.query_one(FilterBar).value, by_tokens=by_tokens))
        self.notify("Heaviest first." if by_tokens else "Transcript order.", timeout=2)

    def action_focus_input(self) -> None:
        if self.live.can_send:
            self.query_one(AgentInput).focus()
        else:
            self.notify(self.live.reason, severity="warning", timeout=5)

    def action_open_subagent(self) -> None:
        message_id = self._selected_id()
        found = self.subagents.get(message_id or "", ())
        if not found:
            self.notify("No sub-agent session was started from this message.", severity="warning", timeout=3)
            return
        self.workbench.open_session(found[0], child=True)

    def action_close_pane(self) -> None:
        if self.has_class("-compacting"):
            self.close_compaction()
        elif self.has_class("-filtering"):
            self.query_one(FilterBar).action_clear_filter()

    def action_back_session(self) -> None:
        self.workbench.back_to_parent()

    def action_export(self) -> None:
        self.workbench.export_session()

    def action_search_message(self) -> None:
        self.query_one(MessageDetail).start_search()

    def demo_playing(self) -> bool:
        """The played demo is under way (its faster key applies)."""
        live = self.live
        return (self.workbench.launch.pace is not None and live.autoplay
                and (live.working or live.turn < live.turns))

    def action_demo_faster(self) -> None:
        pace = self.workbench.launch.pace
        if pace is None or not self.demo_playing():
            return
        pace.faster()
        self.notify(f"Demo speed: {pace.label()} (f again: {'as it was' if pace.speed == SPEEDS[-1] else 'faster'})",
                    timeout=3)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The faster key is there only while the demo plays (so the footer shows it only then)."""
        if action == "demo_faster":
            return self.demo_playing()
        return True

    # The compaction pane's messages, by their handler names: the pane loads when a compaction first asks for it.

    async def on_compaction_pane_preview_requested(self, event: CompactionPane.PreviewRequested) -> None:
        await self.workbench.preview_compaction(event.summarizer, event.focus)

    def on_compaction_pane_apply_requested(self, event: CompactionPane.ApplyRequested) -> None:
        self.workbench.apply_compaction(event.plan)

    async def on_compaction_pane_pin_requested(self, event: CompactionPane.PinRequested) -> None:
        """Pin the message a lost fact came from; the preview made again keeps it verbatim."""
        self.workbench.steer("pin", event.message_id)
        await self.workbench.preview_compaction()

    def on_compaction_pane_closed(self) -> None:
        self.close_compaction()
