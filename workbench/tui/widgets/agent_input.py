"""The box for talking to the agent: Enter sends, ``[PERSIST]`` in front pins the message, and
``/compact [focus]`` opens the compaction preview as ``c`` does (spec 001 §7).

With ``workbench demo --no-autoplay`` the demo's next scripted message waits here,
with a hint to press Enter; it never replaces what the user typed meanwhile. Nothing
moves the focus here but the user (``i``, or a click): keys typed elsewhere act on
the list. A session that cannot be continued shows why, disabled.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

from workbench.tui.messages import LiveState

HINT = "press Enter to send"
COMPACT_COMMAND = "/compact"


def compact_command(text: str) -> str | None:
    """The focus of a ``/compact [focus]`` typed in the box ("" without one); None for a message to the agent."""
    words = text.strip().split(maxsplit=1)
    if not words or words[0] != COMPACT_COMMAND:
        return None
    return words[1].strip() if len(words) > 1 else ""


class AgentInput(Input):
    """An :class:`Input` that knows the live state of the session."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back to list", id="input.leave",
                tooltip="Back to the message list (what you typed stays in the box)"),
    ]

    DEFAULT_CSS = """
    AgentInput {
        border: round $panel-lighten-2;
        border-subtitle-color: $text-muted;
        &:focus { border: round $primary; }
        &.-prefilled { border: round $success; border-subtitle-color: $success; }
        &:disabled { border: round $panel; }
    }
    """

    class Leave(Message):
        """The user is done typing: back to the list."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="", id=id, select_on_focus=False)
        self.live = LiveState()
        self._prefilled = ""
        """The scripted message last put here: the box may be refilled while it holds only that."""

    def apply(self, live: LiveState) -> None:
        """Show ``live``: disabled with the reason, or ready (with the demo's next message, if any)."""
        self.live = live
        self.disabled = not live.can_send
        self.placeholder = live.reason
        self.border_title = "Message the agent" if live.can_send else (live.label or "Read-only").capitalize()
        prefill = live.prefill if live.can_send and not live.autoplay else None
        if prefill and self.value not in ("", self._prefilled, prefill):
            self.remove_class("-prefilled")  # the user's own words stay; the script waits for them
            self.border_subtitle = ""
        elif prefill:
            self.value = self._prefilled = prefill
            self.cursor_position = len(prefill)
            self.add_class("-prefilled")
            step = f"demo message {live.turn + 1} of {live.turns} · " if live.turns else ""
            self.border_subtitle = step + HINT
        elif live.autoplay:
            if self.value == self._prefilled:  # what the user typed stays
                self.value = self._prefilled = ""
            self.remove_class("-prefilled")
            finished = live.turns and live.turn >= live.turns
            self.border_subtitle = "the demo has finished" if finished else "playing the demo by itself"
        else:
            self.remove_class("-prefilled")
            self.border_subtitle = "sent · the agent is working" if live.working else ""

    def sent(self) -> None:
        self.value = self._prefilled = ""
        self.remove_class("-prefilled")
        self.border_subtitle = "sent · the agent is working"

    def action_leave(self) -> None:
        self.post_message(self.Leave())
