"""What the screens may ask of the app: the commands it submits to the engine thread.

A protocol, so a screen depends on this and not on the app module (which imports the screens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from workbench.tui.launch import Launch
from workbench.tui.steering import Action

if TYPE_CHECKING:
    from workbench.engine.plans.compaction import CompactionPreview


@runtime_checkable
class AppCommands(Protocol):
    launch: Launch
    """What the app opened (its database, for a worker that reads a message while a session loads)."""

    def screen_ready(self) -> None: ...

    def send(self, text: str, *, typed: bool = True) -> None: ...

    def steer(self, action: Action, message_id: str, *, priced: bool = False, queue: bool = False) -> None: ...

    def undo(self) -> None: ...

    def redo(self) -> None: ...

    def show_strategies(self) -> None: ...

    async def preview_compaction(self, summarizer: str | None = None, focus: str | None = None) -> None: ...

    def apply_compaction(self, plan: CompactionPreview, *, priced: bool = False) -> None: ...

    def show_compactions(self) -> None: ...

    def show_queued(self) -> None: ...

    def cancel_queued(self, plan_id: str) -> None: ...

    def open_session(self, session_id: str, *, child: bool = False) -> None: ...

    def back_to_parent(self) -> None: ...

    def export_session(self) -> None: ...
