"""The Textual application: one session at a time, its engine on a thread of its own.

The engine thread (:mod:`workbench.tui.host`) owns the store, the session's
context and the agent; the app submits commands to it and shows what it
posts back (:mod:`workbench.tui.handlers`). Nothing here blocks the UI thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from workbench import locations
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.compaction import SummarizerChoice
from workbench.gc_policy import tune_for_sessions
from workbench.tui import operations as ops
from workbench.tui.crash import write_crash_log
from workbench.tui.handlers import HostHandlers
from workbench.tui.host import EngineHost, Work
from workbench.tui.launch import Launch
from workbench.tui.screens.main import MainScreen
from workbench.tui.steering import Action
from workbench.tui.widgets.agent_input import AgentInput

if TYPE_CHECKING:
    from workbench.engine.plans.compaction import CompactionPreview
    from workbench.engine.plans.plan import Plan

__all__ = ["Loader", "WorkbenchApp", "write_crash_log"]

Loader = Callable[[], SessionContext]


def plain(text: str) -> str:
    """``text`` as the command palette shows it: the palette reads help as markup, where ``[PERSIST]`` was a
    tag and vanished (Textual's own ``escape`` leaves upper-case tags alone), so every bracket is escaped."""
    return text.replace("[", "\\[")


class WorkbenchApp(HostHandlers):
    """See what an agent has in its context window, and steer it."""

    TITLE = "Context Workbench"
    CSS_PATH = [locations.styles_dir() / "app.tcss"]  # noqa: RUF012 - Textual's own attribute
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Quit the workbench"),
        Binding("question_mark,f1", "help", "Help", id="app.help",  # F1 works in a text box, which takes the ?
                tooltip="This list: every key and what it does"),
        Binding("ctrl+o", "sessions", "Sessions", id="app.sessions",
                tooltip="Open another stored session, or one found on this machine"),
    ]

    def __init__(self, launch: Launch | Loader) -> None:
        super().__init__()
        tune_for_sessions()
        self.launch = launch if isinstance(launch, Launch) else Launch.from_loader(launch)
        self.host = EngineHost(self, self.launch)
        self.pending = 0
        self._parents: list[str] = []
        self._compaction_request = 0

    def get_default_screen(self) -> Screen[None]:
        return MainScreen()

    def on_load(self) -> None:
        self.launch = self.launch.checking()  # before the screen is composed: the two go on side by side

    def on_mount(self) -> None:
        self.run_engine()

    def screen_ready(self) -> None:
        """The main screen is composed: open the session (its answer needs the screen's widgets)."""
        self.submit("open", lambda: self.host.open(self.launch))

    @work(thread=True, exclusive=True, group="engine", exit_on_error=False)
    async def run_engine(self) -> None:
        """The engine thread: its own asyncio loop, for as long as the app runs."""
        await self.host.serve()

    async def settled(self, timeout: float = 60.0) -> None:
        """Wait until every submitted command has finished and its messages were handled (tests, screenshots)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.pending and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if self.pending:
            raise TimeoutError(f"the engine is still busy after {timeout:.0f} s")

    # --- commands for the engine thread ---------------------------------------------

    def submit(self, name: str, job: Work) -> None:
        self.pending += 1
        self.host.submit(name, job)

    def _stored_session(self) -> bool:
        """A session is shown."""
        if self.main_screen.screen_state is None:
            self.notify("No session is open yet.", severity="warning", timeout=3)
            return False
        return True

    def steer(self, action: Action, message_id: str, *, priced: bool = False, queue: bool = False) -> None:
        if self._stored_session():
            self.submit(action, lambda: ops.steer(self.host, action, message_id, priced=priced, queue=queue))

    def undo(self) -> None:
        if self._stored_session():
            self.submit("undo", lambda: ops.undo(self.host))

    def redo(self) -> None:
        if self._stored_session():
            self.submit("redo", lambda: ops.redo(self.host))

    def show_strategies(self) -> None:
        if self._stored_session():
            self.submit("strategies", lambda: ops.strategy_plans(self.host))

    def apply_plan(self, plan: Plan, *, priced: bool = False, queue: bool = False) -> None:
        self.submit("apply", lambda: ops.apply_plan(self.host, plan, priced=priced, queue=queue))

    async def preview_compaction(self, summarizer: str | None = None, focus: str | None = None) -> None:
        """Open the compaction pane and make a plan (the pane's summariser and focus unless given)."""
        if not self._stored_session():
            return
        self._compaction_request += 1
        request = self._compaction_request
        pane = await self.main_screen.compaction_pane()
        summarizer = summarizer or pane.choice
        if focus is None:
            focus = pane.focus_text
        else:
            pane.focus_text = focus
        shown = self.main_screen.screen_state
        pane.start_preview(request, shown.budget if shown else None, self.launch.summary_provider is not None)
        choice: SummarizerChoice = "llm" if summarizer == "llm" else "auto" if summarizer == "auto" else "heuristic"
        self.submit("compaction preview", lambda: ops.preview_compaction(self.host, request, choice, focus))

    def apply_compaction(self, plan: CompactionPreview, *, priced: bool = False) -> None:
        self.submit("compaction", lambda: ops.apply_compaction(self.host, plan, priced=priced))

    def show_compactions(self) -> None:
        if self._stored_session():
            self.submit("compactions", lambda: ops.list_compactions(self.host))

    def show_queued(self) -> None:
        if self._stored_session():
            self.submit("queued", lambda: ops.list_queued(self.host))

    def cancel_queued(self, plan_id: str) -> None:
        self.submit("cancel", lambda: ops.cancel_queued(self.host, plan_id))

    def send(self, text: str, *, typed: bool = True) -> None:
        if not self.main_screen.live.can_send:
            self.notify(self.main_screen.live.reason, severity="warning", timeout=5)
            return
        if self.pending and typed:
            self.notify("Queued: the agent takes it when the current work is done.", timeout=3)
        self.main_screen.query_one(AgentInput).sent()
        self.submit("send", lambda: self.host.send(text))

    def open_session(self, session_id: str, *, child: bool = False) -> None:
        current = self.main_screen.screen_state
        if child and current is not None:
            self._parents.append(current.session.id)
        elif not child:
            self._parents.clear()
        self.main_screen.show_loading()
        self.submit("open", lambda: self.host.open(self.host.reopening(self.launch, session_id)))

    def remove_session(self, session_id: str) -> None:
        """Delete a stored session (the picker has asked the user); never the open one."""
        self.submit("delete", lambda: ops.remove_session(self.host, session_id))

    def back_to_parent(self) -> None:
        if not self._parents:
            self.notify("This session was not opened from a parent session.", severity="warning", timeout=3)
            return
        parent = self._parents.pop()
        self.main_screen.show_loading()
        self.submit("open", lambda: self.host.open(self.host.reopening(self.launch, parent)))

    def export_session(self) -> None:
        """Write the open session as ``workbench export`` does, to a new file in the current directory."""
        if self._stored_session():
            self.submit("export", lambda: ops.export_session(self.host, Path.cwd()))

    # --- app-wide actions -----------------------------------------------------------

    def action_help(self) -> None:
        from workbench.tui.screens.help import HelpScreen  # deferred: it loads every screen, to list their keys

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_sessions(self) -> None:
        self.submit("sessions", lambda: ops.list_sessions(self.host))

    async def action_quit(self) -> None:
        self.host.stop()
        self.exit()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show every key the workbench answers to", self.action_help)
        yield SystemCommand("Sessions", "Open another stored session", self.action_sessions)
        main = self.screen_stack[0] if self.screen_stack else None
        if not isinstance(main, MainScreen):
            return
        for title, help_text, callback in (
            ("Pin / unpin the message", "Keep it through compaction and strategies (its badge: [PERSIST])",
             lambda: main.action_toggle_steering("pin")),
            ("Prune / restore the message", "Replace its tool output with a placeholder, or bring it back",
             lambda: main.action_toggle_steering("prune")),
            ("Offload / inline the message", "Move its tool output out of context behind a reference, or back",
             lambda: main.action_toggle_steering("offload")),
            ("Archive / unarchive the message", "Hide it (with its tool pair) from the model, or bring it back",
             lambda: main.action_toggle_steering("archive")),
            ("Undo", "Revert the latest change to the context", main.action_undo),
            ("Redo", "Re-apply the change undone last", main.action_redo),
            ("Strategies: what would they do now", "List each strategy's plan; apply one or dismiss",
             main.action_strategies),
            ("Compact…", "Preview a compaction: summary, kept tail, tokens after; apply or cancel", main.action_compact),
            ("Compaction history", "Every compaction of this session", main.action_compactions),
            ("Queued edits", "Edits waiting for the proxied agent's cache to go cold; cancel one",
             main.action_queued),
            ("What the agent was sent", ("A proxied session: system prompt blocks, memory files, tool definitions "
                                         "(built-in and MCP), reminders, each with its tokens and text"),
             main.action_breakdown),
            ("Requests and what changed", ("A proxied session's requests, each against the one before: added, "
                                           "replaced by the workbench, changed by the agent, usage and cost"),
             main.action_requests),
            ("Filter messages", "By role, badge, tool or text", main.action_filter),
            ("Sort by tokens", "Heaviest first / transcript order", main.action_sort),
            ("Message the agent", "Focus the input box", main.action_focus_input),
            ("Open sub-agent session", "The session a task started from this message", main.action_open_subagent),
            ("Back to the parent session", "After opening a sub-agent session", main.action_back_session),
            ("Export the session", "Write it as Markdown (secrets redacted) to a new file in the current directory",
             main.action_export),
            ("Search in the message", "Find text in the selected message; n / N go to the next / previous match",
             main.action_search_message),
        ):
            yield SystemCommand(title, plain(help_text), callback)
        if main.demo_playing():
            yield SystemCommand("Faster demo", "Play the demo faster (4×, then without pauses, then as it was)",
                                main.action_demo_faster)
