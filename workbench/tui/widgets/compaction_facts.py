"""What a compaction plan does, as text for the compaction pane: tokens, ranges, what is kept and why."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from workbench.tui.widgets import format as fmt

if TYPE_CHECKING:
    from workbench.engine.plans.compaction import CompactionPreview
    from workbench.engine.plans.fact_check import FactCheck

LABEL = Style(color="#737aa2")
SAVED = Style(color="#9ece6a", bold=True)
LIVE_LOST = 5
"""Lost facts the pane names after the agent's own compaction."""


def ranges(positions: Iterable[int], limit: int = 8) -> str:
    """``#3–#9, #12, #15–#20``: sorted positions as runs."""
    ordered = sorted(set(positions))
    runs: list[tuple[int, int]] = []
    for p in ordered:
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    shown = [f"#{a}" if a == b else f"#{a}–#{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        shown.append(f"… {len(runs) - limit} more")
    return ", ".join(shown) or "none"


def _count(ids: list[str], positions: Mapping[str, int]) -> str:
    where = ranges(positions[i] for i in ids if i in positions)
    return f"{len(ids)} message{'s' if len(ids) != 1 else ''} · {where}" if ids else "none"


def tokens_line(before: int, after: int) -> Text:
    """``7,378 → 6,703 tokens  (saves 675 · 9%)``: the pane's first line, wrapped between words where narrow."""
    saved = before - after
    text = Text()
    text.append(f"{before:,}", Style(bold=True))
    text.append(" → ")
    text.append(f"{after:,}", SAVED)
    text.append(" tokens")
    if before:
        text.append(f"  (saves {saved:,} · {100 * saved / before:.0f}%)", Style(dim=True))
    return text


def kept_figure(kept: FactCheck) -> Text:
    """``keeps 41 of 48 facts``: green when nothing is lost."""
    style = SAVED if kept.kept == kept.total else Style(color="#ff9e64", bold=True)
    return Text.assemble("keeps ", (f"{kept.kept} of {kept.total}", style), " facts")


def plan_facts(plan: CompactionPreview, positions: Mapping[str, int], kept: FactCheck | None = None) -> RenderableType:
    """Tokens before → after on the first line, with how many facts of the summarised messages the summary keeps;
    then what is summarised and kept, then how."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style=LABEL, no_wrap=True)
    grid.add_column()
    summarized = _count(plan.summarized, positions)
    if plan.prior_summaries:
        summarized += f" (with {len(plan.prior_summaries)} earlier summary)"
    grid.add_row("summarised", Text(summarized, Style(color="#ff9e64")))
    preserved = _count(plan.preserved, positions)
    if plan.pair_pins:
        preserved += f" · {len(plan.pair_pins)} pinned to keep tool pairs whole"
    if plan.turn_pin is not None:
        preserved += " · the message of the turn in progress"
    if plan.preserved:
        preserved += "  (pinned: kept verbatim)"
    grid.add_row("preserved", Text(preserved, Style(color="#e0af68")))
    grid.add_row("kept verbatim", Text(_count(plan.tail, positions), Style(color="#7dcfff")))
    summariser = plan.summarizer + (f" ({plan.model})" if plan.model else "")
    tail_budget = f"{plan.tail_budget:,} tokens" if plan.tail_budget is not None else "a message count"
    grid.add_row("summariser", f"{summariser} · split rule {plan.split_rule}, tail budget {tail_budget}")
    if plan.focus:
        grid.add_row("focus", plan.focus)
    for instruction in plan.instructions:
        grid.add_row("hook", instruction)
    for warning in plan.warnings:
        grid.add_row("warning", Text(warning, Style(color="#e0af68")))
    headline = tokens_line(plan.before_tokens, plan.after_tokens)
    if kept is not None:
        headline.append(" · ", Style(dim=True))
        headline.append_text(kept_figure(kept))
    return Group(headline, grid)


def live_facts(trigger: str, before: int, after: int | None, summarizer: str, summarized: int, preserved: int,
               error: str | None, pinned: Iterable[int] = (), kept: FactCheck | None = None) -> RenderableType:
    """The same first line as a preview's (tokens before → after, the facts its summary keeps), then what the
    agent's compaction kept, and the facts its summary lost."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style=LABEL, no_wrap=True)
    grid.add_column()
    done = after is not None and not error
    headline = tokens_line(before, after) if after is not None and done else Text(f"{before:,} → … tokens",
                                                                                    Style(bold=True))
    if done and kept is not None:
        headline.append(" · ", Style(dim=True))
        headline.append_text(kept_figure(kept))
    if after is None:
        grid.add_row("status", Text("summarising the older conversation…", Style(italic=True)))
    elif error:
        grid.add_row("status", Text(f"failed: {error}", Style(color="#f7768e")))
    else:
        grid.add_row("summarised", f"{summarized} messages · preserved {preserved}")
        verbatim = sorted(pinned)
        if verbatim:
            line = Text(no_wrap=True)
            line.append(" PERSIST ", fmt.BADGE_STYLES["PERSIST"])
            line.append(f" {ranges(verbatim)} kept verbatim", Style(color="#e0af68"))
            grid.add_row("pinned", line)
        grid.add_row("summariser", summarizer or "unknown")
        for fact in kept.lost[:LIVE_LOST] if kept is not None else ():
            grid.add_row("lost", Text(f"{fact.kind} · {fact.text}", Style(color="#ff9e64"), no_wrap=True,
                                      overflow="ellipsis"))
        if kept is not None and len(kept.lost) > LIVE_LOST:
            grid.add_row("", Text(f"and {len(kept.lost) - LIVE_LOST} more (C lists the compactions)", Style(dim=True)))
    grid.add_row("trigger", f"{trigger} · the compaction threshold was reached while the agent was working")
    if done:
        grid.add_row("undo", "press u: the summary leaves the context and the messages come back")
    return Group(headline, grid)
