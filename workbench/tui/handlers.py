"""The app's side of the engine thread: what each engine message does to the screens.

The base class of :class:`WorkbenchApp`, so ``app.py`` stays about the app itself.
Handlers run on the UI thread and own every widget change; they call the main
screen's methods directly so that the order of engine messages is the order of
screen updates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App
from textual.timer import Timer

from workbench.tui import messages as msg
from workbench.tui.host import EngineHost, Work
from workbench.tui.launch import Launch
from workbench.tui.screens.main import MainScreen
from workbench.tui.steering import Action, applied_notice
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.live_stream import LiveStream
from workbench.tui.widgets.message_list import MessageList

if TYPE_CHECKING:
    from workbench.engine.plans.compaction import CompactionPreview
    from workbench.engine.plans.plan import Plan
    from workbench.tui.screens.cache_price import When
    from workbench.tui.screens.sessions import DeleteRequested, Pick

BUSY_AFTER = 0.5
"""Seconds of engine work before the affected pane shows progress."""
LOADING_AFTER = 1.0
"""Seconds an open takes before the loading screen's spinner turns (its text shows at once): a spinner's
frames compete with the load itself, so a quick open never starts one."""
DEMO_NOTICE = ("A recorded agent fixes a bug in a temporary copy of a small project, offline; its tool calls are "
               "approved for it. ? lists the keys; ctrl+o opens your sessions.")


class HostHandlers(App[None]):
    """``on_*`` handlers for :mod:`workbench.tui.messages`; :class:`WorkbenchApp` derives from it."""

    _busy_timer: Timer | None = None

    pending: int = 0
    """Commands submitted to the engine thread and not finished yet."""
    host: EngineHost
    launch: Launch

    @property
    def main_screen(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    # What the app implements (submitting commands to the engine thread):
    def send(self, text: str, *, typed: bool = True) -> None:
        raise NotImplementedError

    def apply_plan(self, plan: Plan, *, priced: bool = False, queue: bool = False) -> None:
        raise NotImplementedError

    def apply_compaction(self, plan: CompactionPreview, *, priced: bool = False) -> None:
        raise NotImplementedError

    def cancel_queued(self, plan_id: str) -> None:
        raise NotImplementedError

    def open_session(self, session_id: str, *, child: bool = False) -> None:
        raise NotImplementedError

    def submit(self, name: str, job: Work) -> None:
        raise NotImplementedError

    def steer(self, action: Action, message_id: str, *, priced: bool = False, queue: bool = False) -> None:
        raise NotImplementedError

    def remove_session(self, session_id: str) -> None:
        raise NotImplementedError

    def watch_file(self, path: str, fmt: str | None = None) -> None:
        """Follow a transcript another agent is writing (the session picker's watch key)."""
        self.main_screen.show_loading()
        launch = self.launch.watching(path, fmt)
        self.submit("open", lambda: self.host.open(launch))

    # --- sessions ---------------------------------------------------------------------

    def on_session_opened(self, event: msg.SessionOpened) -> None:
        self.main_screen.show_session(event.screen_state, event.live)
        live = event.live
        if live.turns and live.autoplay and live.turn == 0:
            self.notify(DEMO_NOTICE, title="A scripted demo", timeout=12, markup=False)
        self.main_screen.query_one(InfoBar).following = event.live.watching or ""
        if event.live.watching:
            self.main_screen.query_one(MessageList).action_last()  # at the end, the list follows what arrives

    def on_session_changed(self, event: msg.SessionChanged) -> None:
        if self.main_screen.screen_state is not None:
            self.main_screen.update(event.screen_state, follow=event.follow)

    def on_live_changed(self, event: msg.LiveChanged) -> None:
        self.main_screen.show_live(event.live)

    def on_autoplay_next(self, event: msg.AutoplayNext) -> None:
        self.main_screen.query_one(LiveStream).new_step()
        self.send(event.text, typed=False)

    def on_streaming(self, event: msg.Streaming) -> None:
        stream = self.main_screen.query_one(LiveStream)
        if not event.text and not event.thinking:
            stream.new_step()
        stream.text, stream.thinking = event.text, event.thinking

    def on_narration(self, event: msg.Narration) -> None:
        self.main_screen.query_one(LiveStream).narration = event.text

    def on_tool_activity(self, event: msg.ToolActivity) -> None:
        self.main_screen.query_one(LiveStream).activity(event.kind, event.name, event.detail, event.is_error)

    def on_status_changed(self, event: msg.StatusChanged) -> None:
        self.main_screen.set_status(event.status, event.detail)

    def on_notice(self, event: msg.Notice) -> None:
        self.notify(event.text, severity=event.severity, timeout=8 if event.severity != "information" else 5)

    # --- progress and failures ----------------------------------------------------------

    def on_busy(self, event: msg.Busy) -> None:
        if self._busy_timer is not None:
            self._busy_timer.stop()
        self.main_screen.set_status("working", event.label)
        after = LOADING_AFTER if event.pane == "session" else BUSY_AFTER
        self._busy_timer = self.set_timer(after, lambda: self.main_screen.set_busy(True, event.pane))

    def on_command_done(self, event: msg.CommandDone) -> None:
        self.pending = max(0, self.pending - 1)
        if self._busy_timer is not None:
            self._busy_timer.stop()
            self._busy_timer = None
        if self.screen_stack:  # a command that ends as the app closes reports after its screens are gone
            self.main_screen.set_busy(False)

    def on_command_failed(self, event: msg.CommandFailed) -> None:
        if event.name == "open":
            self.main_screen.show_error(event.text, event.log)
            return
        where = f" Details: {event.log}" if event.log else ""
        self.notify(f"{event.name}: {event.text}.{where}", severity="error", timeout=10)
        if (pane := self.main_screen.mounted_compaction_pane) is not None:
            pane.failed()

    # --- steering -------------------------------------------------------------------------

    def on_plan_applied(self, event: msg.PlanApplied) -> None:
        self.main_screen.update(event.screen_state, keep=event.message_id)
        self.notify(applied_notice(event.verb, event.description, event.tokens_before, event.tokens_after), timeout=6)

    # The modals below load with their first use: none is on screen as a session opens (25 ms of start-up).

    def on_edit_priced(self, event: msg.EditPriced) -> None:
        from workbench.tui.screens.cache_price import CachePriceScreen

        then = event.then

        def answered(when: When | None) -> None:
            if isinstance(then, msg.SteerAgain):
                if when is not None:
                    self.steer(then.action, then.message_id, priced=True, queue=when == "cold")
            elif isinstance(then, msg.ApplyAgain):
                if when is not None:
                    self.apply_plan(then.plan, priced=True, queue=when == "cold")
            elif when is not None:
                self.apply_compaction(then.preview, priced=True)
            elif (pane := self.main_screen.mounted_compaction_pane) is not None:
                pane.failed()  # back to its preview, to apply later or close

        can_wait = not isinstance(then, msg.CompactAgain)
        self.push_screen(CachePriceScreen(event.what, event.price, event.assumption, can_wait=can_wait), answered)

    def on_strategy_plans(self, event: msg.StrategyPlans) -> None:
        from workbench.engine.plans.plan import Plan  # (loaded by the planning that made these)
        from workbench.tui.screens.plans import PlanScreen

        def chosen(plan: object) -> None:
            if plan is not None:
                assert isinstance(plan, Plan)
                self.apply_plan(plan)

        self.push_screen(PlanScreen(event.plans, event.positions), chosen)

    # --- compaction --------------------------------------------------------------------------

    def on_compaction_progress(self, event: msg.CompactionProgress) -> None:
        if (pane := self.main_screen.mounted_compaction_pane) is not None:
            pane.progress(event.request, event.text)

    def on_compaction_previewed(self, event: msg.CompactionPreviewed) -> None:
        if (pane := self.main_screen.mounted_compaction_pane) is not None:
            pane.previewed(event.request, event.plan, event.after, event.positions, event.facts, event.kept)

    def on_compaction_applied(self, event: msg.CompactionApplied) -> None:
        main = self.main_screen
        main.close_compaction()
        main.update(event.screen_state, keep=event.summary_id)
        self.notify(f"Compacted: {event.before_tokens:,} → {event.after_tokens:,} tokens. "
                    "The list shows the boundary and the summary; u undoes it.", timeout=8)
        for warning in event.warnings:
            self.notify(warning, severity="warning", timeout=8)

    async def on_live_compaction(self, event: msg.LiveCompaction) -> None:
        pane = await self.main_screen.compaction_pane()
        if event.phase == "start":
            pane.live_started(event.trigger, event.before_tokens)
        else:
            pane.live_finished(event.trigger, event.before_tokens, event.after_tokens, event.summary,
                               event.summarizer, event.summarized, event.preserved, event.error, event.after,
                               pinned=event.pinned, kept=event.kept)

    # --- modals -----------------------------------------------------------------------------

    def on_approval_requested(self, event: msg.ApprovalRequested) -> None:
        from workbench.tui.screens.approval import ApprovalScreen

        answer = event.answer

        def answered(approved: bool | None) -> None:
            if not answer.done():
                answer.set_result(bool(approved))

        self.push_screen(ApprovalScreen(event.call, event.countdown), answered)

    def on_sessions_listed(self, event: msg.SessionsListed) -> None:
        from workbench.tui.screens.sessions import SessionPicker  # deferred: it and its discovery wait for its key

        def chosen(pick: Pick | None) -> None:
            if pick is None or (pick.kind == "stored" and pick.target == event.current):
                return
            if pick.kind == "watch":
                self.watch_file(pick.target, pick.fmt)
            else:
                self.open_session(pick.target)  # a discovered file is imported first

        self.push_screen(SessionPicker(event.sessions, event.current), chosen)

    def on_delete_requested(self, event: DeleteRequested) -> None:
        self.remove_session(event.session_id)

    def on_session_deleted(self, event: msg.SessionDeleted) -> None:
        self.notify(f"Deleted {event.text}.", timeout=6, markup=False)
        for warning in event.warnings:
            self.notify(warning, severity="warning", timeout=8, markup=False)
        from workbench.tui.screens.sessions import SessionPicker

        for screen in self.screen_stack:
            if isinstance(screen, SessionPicker):
                screen.forget(event.ids)

    def on_queued_listed(self, event: msg.QueuedListed) -> None:
        from workbench.tui.screens.queued import QueuedEditsScreen

        def chosen(plan_id: str | None) -> None:
            if plan_id is not None:
                self.cancel_queued(plan_id)

        self.push_screen(QueuedEditsScreen(event.entries, event.positions), chosen)

    def on_compactions_listed(self, event: msg.CompactionsListed) -> None:
        from workbench.tui.screens.compactions import CompactionHistoryScreen

        def chosen(summary_id: str | None) -> None:
            if summary_id is not None and not self.main_screen.query_one(MessageList).move_to(summary_id):
                self.notify("That summary is not shown (clear the filter with / then Esc).", severity="warning")

        self.push_screen(CompactionHistoryScreen(event.entries, event.positions), chosen)
