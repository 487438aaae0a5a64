"""Facts in the compaction pane (issue #42): the figure beside tokens before → after, the lost facts under it,
``a`` adds one to the summary, ``p`` pins its message, and the figure follows the user's edits."""

from __future__ import annotations

import pytest
from textual.widgets import TextArea
from tui_fixtures import (  # noqa: F401
    SIZE,
    autoplay,
    demo_launch,
    flat,
    isolated_dirs,
    script_launch,
    settle,
    stored,
    text_of,
    tui_script,
    until,
)

from workbench.engine.plans.fact_check import check, latest_check, preview_facts
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.widgets.compaction_pane import CompactionPane
from workbench.tui.widgets.lost_facts import LostFacts


async def _preview(pilot: object, app: WorkbenchApp) -> CompactionPane:
    await settle(pilot)  # type: ignore[arg-type]
    await pilot.press("c")  # type: ignore[attr-defined]
    await settle(pilot)  # type: ignore[arg-type]
    pane = app.main_screen.query_one(CompactionPane)
    assert pane.phase == "ready" and pane.plan is not None
    return pane


@pytest.mark.anyio
async def test_the_figure_and_the_lost_facts_follow_the_summary(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        pane = await _preview(pilot, app)
        assert pane.plan is not None and pane.kept is not None
        expected = check(preview_facts(stored(app), pane.plan.summarized), pane.plan.summary)
        assert pane.kept == expected and expected.total > 0
        shown = flat(text_of(pane.query_one("#compaction-facts")))
        assert f"→ {pane.plan.after_tokens:,} tokens" in shown
        assert f"keeps {expected.kept} of {expected.total} facts" in shown
        lost = pane.query_one(LostFacts)
        assert lost.facts == expected.lost and lost.display == bool(expected.lost)

        area = pane.query_one("#compaction-summary", TextArea)
        area.load_text("[Previous conversation summary]\n\nNothing worth keeping.")  # the user cuts it down
        await until(pilot, lambda: pane.kept is not None and pane.kept.kept < expected.kept)
        assert pane.kept is not None
        cut = pane.kept
        assert f"keeps {cut.kept} of {cut.total} facts" in flat(text_of(pane.query_one("#compaction-facts")))
        assert lost.facts == cut.lost and len(cut.lost) > len(expected.lost)

        lost.focus()
        await pilot.pause()
        first = lost.facts[0]
        await pilot.press("a")  # the highlighted fact goes to the end of the summary
        await until(pilot, lambda: pane.kept is not None and pane.kept.kept == cut.kept + 1)
        assert pane.summary_text.endswith(f"\n- {first.text}")
        assert first not in lost.facts


@pytest.mark.anyio
async def test_p_pins_the_message_of_a_lost_fact_and_previews_again(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        pane = await _preview(pilot, app)
        area = pane.query_one("#compaction-summary", TextArea)
        area.load_text("[Previous conversation summary]\n\nNothing worth keeping.")
        await until(pilot, lambda: bool(pane.query_one(LostFacts).facts))
        lost = pane.query_one(LostFacts)
        fact = lost.facts[0]
        lost.focus()
        await pilot.pause()
        await pilot.press("p")
        await settle(pilot)
        assert fact.message_id in stored(app).overlay.pinned
        assert pane.plan is not None and fact.message_id in pane.plan.preserved  # kept verbatim now
        assert fact.message_id not in {f.message_id for f in pane.facts}


@pytest.mark.anyio
async def test_the_agents_own_compaction_says_what_its_summary_keeps(script_launch: Launch) -> None:
    app = WorkbenchApp(autoplay(script_launch))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.main_screen.query_one(CompactionPane)
        assert pane.mode == "live" and pane.phase == "done"
        expected = latest_check(stored(app))
        assert expected is not None and expected.total > 0
        shown = flat(text_of(pane.query_one("#compaction-facts")))
        assert f"keeps {expected.kept} of {expected.total} facts" in shown
        for fact in expected.lost[:5]:
            assert f"lost {fact.kind} · {fact.text[:20]}" in shown
