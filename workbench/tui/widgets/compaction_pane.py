"""The compaction preview: tokens before → after and what would be summarised and kept first, the summary
below them as it streams in (then editable), apply or cancel; then the summariser's choice, the new budget bar,
the metadata and the exact prompt further down. It opens at its top: the figures are what a user decides on.

It also shows a compaction the agent started by itself (``live`` mode): the same
pane, without the controls, filled in when the engine reports the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Literal

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Input, Select, Static, TextArea

from workbench.engine.context.budget import Budget
from workbench.tui.widgets.budget_panel import BudgetPanel
from workbench.tui.widgets.compaction_facts import live_facts, plan_facts
from workbench.tui.widgets.lost_facts import LostFacts

if TYPE_CHECKING:
    from workbench.engine.plans.compaction import CompactionPreview
    from workbench.engine.plans.fact_check import FactCheck
    from workbench.engine.plans.facts import Fact

Mode = Literal["preview", "live"]
Phase = Literal["waiting", "ready", "applying", "done"]
SUMMARISERS = [("heuristic", "heuristic"), ("llm", "llm"), ("auto", "auto")]


class CompactionPane(VerticalScroll, can_focus=False):
    """Shown instead of the detail pane while a compaction is previewed or running."""

    ALLOW_MAXIMIZE = True
    """It takes the screen in narrow terminals (``MainScreen._place_compaction``), though it takes no focus."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "apply", "Apply compaction", id="compaction.apply",
                tooltip="Apply the compaction, with the summary as you edited it (u undoes it)"),
        Binding("ctrl+r", "preview", "Preview again", id="compaction.preview",
                tooltip="Make the preview again with the summariser and focus chosen in the pane"),
        Binding("ctrl+t", "toggle_prompt", "Show / hide the prompt", id="compaction.prompt",
                tooltip="Show or hide the exact prompt sent to the summariser"),
        Binding("escape", "cancel", "Cancel / close", id="compaction.cancel",
                tooltip="Close the pane; a preview not applied changes nothing"),
    ]

    DEFAULT_CSS = """
    CompactionPane {
        background: $surface;
        padding: 0 1;
        & #compaction-controls { height: 3; }
        & #compaction-summariser { width: 18; }
        & #compaction-focus { width: 1fr; }
        & #compaction-facts, & #compaction-prompt-text, & #compaction-metadata-text { width: 1fr; height: auto; }
        & #compaction-spinner { height: 1; color: $warning; text-style: italic; }
        & #compaction-summary { height: 14; }
        & #compaction-buttons { height: 3; align-horizontal: right; }
        & Button { margin-left: 1; }
        & .-label { color: $text-muted; margin-top: 1; }
        &.-live #compaction-controls, &.-live #compaction-prompt, &.-live #compaction-metadata,
        &.-live #compaction-apply, &.-live #compaction-lost, &.-live #compaction-lost-label { display: none; }
        &.-waiting #compaction-apply { display: none; }
        &.-ready #compaction-spinner, &.-done #compaction-spinner { display: none; }
    }
    """

    mode: reactive[Mode] = reactive("preview", init=False)
    phase: reactive[Phase] = reactive("waiting", init=False)

    class PreviewRequested(Message):
        def __init__(self, summarizer: str, focus: str) -> None:
            super().__init__()
            self.summarizer = summarizer
            self.focus = focus

    class ApplyRequested(Message):
        def __init__(self, plan: CompactionPreview) -> None:
            super().__init__()
            self.plan = plan

    class Closed(Message):
        """The pane is done (cancelled, applied or dismissed)."""

    class PinRequested(Message):
        """Pin the message a lost fact came from, then preview again (the plan keeps it verbatim)."""

        def __init__(self, message_id: str) -> None:
            super().__init__()
            self.message_id = message_id

    class FactsChecked(Message):
        """Which facts ``summary`` keeps, worked out off the event loop as the user edits."""

        def __init__(self, request: int, summary: str, kept: FactCheck) -> None:
            super().__init__()
            self.request = request
            self.summary = summary
            self.kept = kept

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.plan: CompactionPreview | None = None
        self.request = 0
        self._llm: bool | None = None
        self.facts: tuple[Fact, ...] = ()
        """The facts of the messages the plan summarises (extracted with the plan, on the engine thread)."""
        self.kept: FactCheck | None = None
        self._positions: Mapping[str, int] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="compaction-facts")
        yield Static("facts the summary loses (a adds one to it, p pins its message)", classes="-label",
                     id="compaction-lost-label")
        yield LostFacts(id="compaction-lost")
        yield Static("summary (edit it before applying)", classes="-label", id="compaction-summary-label")
        yield Static(id="compaction-spinner")
        yield TextArea(id="compaction-summary", read_only=True, soft_wrap=True, show_line_numbers=False)
        with Horizontal(id="compaction-buttons"):
            yield Button("Apply  ctrl+s", variant="success", id="compaction-apply")
            yield Button("Cancel  esc", id="compaction-cancel")
        yield Static("summariser and focus (ctrl+r previews again)", classes="-label")
        with Horizontal(id="compaction-controls"):
            yield Select(SUMMARISERS, value="heuristic", allow_blank=False, id="compaction-summariser")
            yield Input(placeholder="focus: what the summary should keep (optional)", id="compaction-focus")
            yield Button("Preview", id="compaction-run")
        yield BudgetPanel(id="compaction-budget")
        with Collapsible(title="Metadata kept with the summary", collapsed=True, id="compaction-metadata"):
            yield Static(id="compaction-metadata-text")
        with Collapsible(title="The exact prompt sent to the summariser", collapsed=True, id="compaction-prompt"):
            yield Static(id="compaction-prompt-text")

    def on_mount(self) -> None:
        self.query_one("#compaction-budget", BudgetPanel).border_title = "Budget after the compaction"
        self._show_kept(None)

    def watch_phase(self, phase: Phase) -> None:
        self.set_class(phase == "waiting" or phase == "applying", "-waiting")
        self.set_class(phase == "ready", "-ready")
        self.set_class(phase == "done", "-done")
        self.query_one("#compaction-summary", TextArea).read_only = phase != "ready" or self.mode == "live"
        self.refresh_bindings()  # an editable summary takes the letters: the footer's keys change with it

    def watch_mode(self, mode: Mode) -> None:
        self.set_class(mode == "live", "-live")
        self.query_one("#compaction-cancel", Button).label = "Close  esc" if mode == "live" else "Cancel  esc"

    # --- preview mode ---------------------------------------------------------------

    def start_preview(self, request: int, before: Budget | None, llm_available: bool) -> None:
        """A new preview was asked for: clear the old one and wait for the summary."""
        self.mode = "preview"
        self.request = request
        self.plan = None
        self._show_kept(None)
        self.facts = ()
        self.border_title = "Compaction preview · manual"
        self.query_one("#compaction-facts", Static).update(Text(
            f"Preparing the plan for {before.used:,} tokens…" if before is not None else "Preparing the plan…",
            style="italic"))
        self.query_one("#compaction-budget", BudgetPanel).budget = before
        self.query_one("#compaction-prompt-text", Static).update("")
        self.query_one("#compaction-metadata-text", Static).update("")
        self.query_one("#compaction-summary", TextArea).load_text("")
        self.query_one("#compaction-summary-label", Static).update("summary")
        self.query_one("#compaction-spinner", Static).update("⋯ summarising: the summary streams in here")
        select = self.query_one("#compaction-summariser", Select)
        if llm_available != self._llm:
            self._llm = llm_available
            value = select.value
            select.set_options(SUMMARISERS if llm_available else [SUMMARISERS[0]])
            select.value = value if llm_available or value == "heuristic" else "heuristic"
        self.phase = "waiting"
        self._focus_at_top(self.query_one("#compaction-summary", TextArea))

    def progress(self, request: int, text: str) -> None:
        if request == self.request and self.phase == "waiting":
            self.query_one("#compaction-spinner", Static).update(f"⋯ summarising: {len(text):,} characters so far")
            area = self.query_one("#compaction-summary", TextArea)
            area.load_text(text)
            area.scroll_end(animate=False, immediate=True)

    def previewed(self, request: int, plan: CompactionPreview, after: Budget, positions: Mapping[str, int],
                  facts: tuple[Fact, ...] = (), kept: FactCheck | None = None) -> None:
        """``kept``: the check of ``plan.summary`` against ``facts``, made with the plan."""
        if request != self.request:
            return
        self.plan = plan
        self.facts, self._positions = facts, positions
        self.border_title = f"Compaction preview · {plan.trigger} · {plan.summarizer}"
        self._show_kept(kept)
        self.query_one("#compaction-budget", BudgetPanel).budget = after
        prompt = Text(f"system:\n{plan.system_prompt}\n\nuser:\n{plan.prompt}")
        self.query_one("#compaction-prompt-text", Static).update(prompt)
        collapsible = self.query_one("#compaction-prompt", Collapsible)
        collapsible.title = f"The exact prompt sent to the summariser ({len(plan.prompt):,} characters)"
        self.query_one("#compaction-metadata-text", Static).update(Text(plan.metadata.as_text().strip()))
        area = self.query_one("#compaction-summary", TextArea)
        area.load_text(plan.summary)
        area.move_cursor((0, 0))
        area.scroll_home(animate=False, immediate=True)
        self.query_one("#compaction-summary-label", Static).update("summary (edit it before applying)")
        self.phase = "ready"
        if self.screen.focused is None or self in self.screen.focused.ancestors:
            self._focus_at_top(area)

    def _show_kept(self, kept: FactCheck | None) -> None:
        """The figure beside the tokens and the lost facts under it."""
        self.kept = kept
        if self.plan is not None:
            self.query_one("#compaction-facts", Static).update(plan_facts(self.plan, self._positions, kept))
        lost = kept.lost if kept is not None else []
        self.query_one(LostFacts).show(lost, self._positions)
        self.query_one("#compaction-lost-label", Static).display = bool(lost)

    @on(TextArea.Changed, "#compaction-summary")
    def _edited(self, event: TextArea.Changed) -> None:
        if self.mode == "preview" and self.phase == "ready" and self.facts:
            self._check(self.request, self.facts, event.text_area.text)

    @work(thread=True, exclusive=True, group="fact-check", exit_on_error=False)
    def _check(self, request: int, facts: tuple[Fact, ...], summary: str) -> None:
        from workbench.engine.plans.fact_check import check  # loaded with the plan that made the facts

        self.post_message(self.FactsChecked(request, summary, check(facts, summary)))

    @on(FactsChecked)
    def _checked(self, event: FactsChecked) -> None:
        if event.request == self.request and event.summary == self.summary_text:  # not overtaken by an edit
            self._show_kept(event.kept)

    @on(LostFacts.Add)
    def _add_fact(self, event: LostFacts.Add) -> None:
        """The fact as a line at the end of the summary."""
        area = self.query_one("#compaction-summary", TextArea)
        if self.phase != "ready" or area.read_only:
            return
        area.insert(f"\n- {event.fact.text}", area.document.end)

    @on(LostFacts.Pin)
    def _pin_fact(self, event: LostFacts.Pin) -> None:
        if self.phase == "ready":
            self.post_message(self.PinRequested(event.fact.message_id))

    def _focus_at_top(self, widget: Widget) -> None:
        """Focus ``widget`` and show the pane from its top (the tokens before → after), once the new content is
        laid out, at once rather than animated: focus's own scroll would run before that layout and animate, and
        bring the summary up past the figures."""
        widget.focus(scroll_visible=False)
        self.call_after_refresh(self.scroll_home, animate=False, immediate=True)

    def failed(self) -> None:
        self.phase = "ready" if self.plan is not None else "done"

    @property
    def choice(self) -> str:
        """The summariser chosen in the pane."""
        return str(self.query_one("#compaction-summariser", Select).value)

    @property
    def focus_text(self) -> str:
        return self.query_one("#compaction-focus", Input).value

    @focus_text.setter
    def focus_text(self, text: str) -> None:
        self.query_one("#compaction-focus", Input).value = text

    @property
    def summary_text(self) -> str:
        return self.query_one("#compaction-summary", TextArea).text

    def action_preview(self) -> None:
        if self.mode != "preview" or self.phase == "applying":
            return
        self.post_message(self.PreviewRequested(self.choice, self.focus_text))

    def action_apply(self) -> None:
        if self.mode != "preview" or self.phase != "ready" or self.plan is None:
            self.notify("Nothing to apply yet: wait for the summary.", severity="warning", timeout=3)
            return
        self.phase = "applying"
        self.post_message(self.ApplyRequested(self.plan.model_copy(update={"summary": self.summary_text})))

    def action_toggle_prompt(self) -> None:
        collapsible = self.query_one("#compaction-prompt", Collapsible)
        collapsible.collapsed = not collapsible.collapsed

    def action_cancel(self) -> None:
        self.post_message(self.Closed())

    # --- live mode -------------------------------------------------------------------

    def live_started(self, trigger: str, before: int) -> None:
        self.mode = "live"
        self.plan = None
        self.border_title = f"Compaction · {trigger} (by the agent)"
        self.query_one("#compaction-facts", Static).update(live_facts(trigger, before, None, "", 0, 0, None))
        self.query_one("#compaction-summary", TextArea).load_text("")
        self.query_one("#compaction-summary-label", Static).update("summary")
        self.query_one("#compaction-spinner", Static).update("⋯ the agent is summarising the older conversation")
        self.phase = "waiting"

    def live_finished(self, trigger: str, before: int, after: int, summary: str, summarizer: str, summarized: int,
                      preserved: int, error: str | None, budget: Budget | None, *, pinned: tuple[int, ...] = (),
                      kept: FactCheck | None = None) -> None:
        self.mode = "live"
        self.query_one("#compaction-facts", Static).update(
            live_facts(trigger, before, after, summarizer, summarized, preserved, error, pinned, kept))
        self.query_one("#compaction-summary", TextArea).load_text(summary)
        if budget is not None:
            self.query_one("#compaction-budget", BudgetPanel).budget = budget
        self.phase = "done"

    @on(Button.Pressed, "#compaction-run")
    def _run(self) -> None:
        self.action_preview()

    @on(Button.Pressed, "#compaction-apply")
    def _apply(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#compaction-cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Select.Changed, "#compaction-summariser")
    def _summariser(self, event: Select.Changed) -> None:
        if self.mode == "preview" and self.plan is not None and event.value != self.plan.summarizer:
            self.action_preview()
