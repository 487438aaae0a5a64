"""What every enabled strategy would do now: one plan per strategy, its items and the tokens saved.

Nothing is changed until the user applies one (Enter); Esc dismisses the view.
Plans are measured each on the context as it is, so after applying one the
others are out of date: the view closes and ``S`` asks again.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option

from workbench.engine.plans.plan import Plan

ITEM_ROWS = 500
"""Items listed per plan; a long session's plan can hold thousands (the total is still shown)."""


class PlanScreen(ModalScreen[Plan | None]):
    """Dismissed with the plan to apply, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,a", "apply", "Apply this plan", id="plans.apply"),
        Binding("escape,q", "dismiss_view", "Dismiss", id="plans.dismiss"),
        Binding("tab", "switch", "Plans / items", id="plans.switch", show=False),
    ]

    DEFAULT_CSS = """
    PlanScreen {
        align: center middle;
        & > #plans-box {
            width: 120;
            max-width: 96%;
            height: 85%;
            border: round $primary;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
            padding: 0 1;
        }
        & #plans-list { height: 9; border: none; }
        & #plans-summary { height: auto; margin: 1 0 0 0; }
        & #plans-items { height: 1fr; }
    }
    """

    def __init__(self, plans: list[Plan], positions: dict[str, int]) -> None:
        super().__init__()
        self.plans = plans
        self.positions = positions

    def compose(self) -> ComposeResult:
        with Vertical(id="plans-box") as box:
            box.border_title = "What the strategies would do now"
            box.border_subtitle = "Enter applies the highlighted plan · Esc dismisses · nothing changes until then"
            options = [Option(self._label(plan), id=str(n)) for n, plan in enumerate(self.plans)]
            yield OptionList(*options, id="plans-list")
            yield Static(id="plans-summary")
            table: DataTable[object] = DataTable(id="plans-items", cursor_type="row", zebra_stripes=True)
            yield table

    def on_mount(self) -> None:
        table = self.query_one("#plans-items", DataTable)
        table.add_columns("message", "action", "tokens saved", "reason")
        options = self.query_one("#plans-list", OptionList)
        if self.plans:
            options.highlighted = max(range(len(self.plans)), key=lambda n: self.plans[n].tokens_saved)
        else:
            self.query_one("#plans-summary", Static).update("No strategy is enabled.")
        options.focus()

    @staticmethod
    def _label(plan: Plan) -> Text:
        text = Text(no_wrap=True)
        text.append(f"{plan.strategy:<22}", "bold")
        if plan.items:
            text.append(f"{len(plan.items):>5} change{'s' if len(plan.items) != 1 else ' '}  ")
            text.append(f"saves {plan.tokens_saved:>8,} tokens", "bold #9ece6a")
        else:
            text.append("  nothing to do", "dim italic")
        return text

    @property
    def current(self) -> Plan | None:
        index = self.query_one("#plans-list", OptionList).highlighted
        return self.plans[index] if index is not None and 0 <= index < len(self.plans) else None

    @on(OptionList.OptionHighlighted, "#plans-list")
    def _show(self) -> None:
        plan = self.current
        table = self.query_one("#plans-items", DataTable)
        table.clear()
        summary = self.query_one("#plans-summary", Static)
        if plan is None:
            return
        if not plan.items:
            summary.update(Text(f"{plan.strategy}: nothing to do on this session now.", "italic"))
            return
        summary.update(Text.assemble(
            (plan.strategy, "bold"), f": {len(plan.items):,} change(s), ",
            (f"{plan.tokens_before:,} → {plan.tokens_after:,} tokens", "bold"), f" (saves {plan.tokens_saved:,})"))
        for item in plan.items[:ITEM_ROWS]:
            where = self.positions.get(item.message_id)
            part = "" if item.part_index is None else f" part {item.part_index}"
            label = (f"#{where}" if where is not None else "new message") + part
            table.add_row(label, item.action, f"{item.tokens_saved:,}", item.reason)
        if len(plan.items) > ITEM_ROWS:
            table.add_row("…", "", "", f"{len(plan.items) - ITEM_ROWS:,} more changes in this plan")

    @on(OptionList.OptionSelected, "#plans-list")
    def _selected(self) -> None:
        self.action_apply()

    def action_apply(self) -> None:
        plan = self.current
        if plan is None or not plan.items:
            self.notify("This plan has nothing to apply.", severity="warning", timeout=3)
            return
        self.dismiss(plan)

    def action_dismiss_view(self) -> None:
        self.dismiss(None)

    def action_switch(self) -> None:
        options = self.query_one("#plans-list", OptionList)
        table = self.query_one("#plans-items", DataTable)
        (table if options.has_focus else options).focus()
