"""Plan auto-injection (spec 000 §3): what the first request of a phase-mode session carries as its
``<project_context>`` section, in both modes, and how bad plan trees are reported."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import pytest
from loopback_api import LoopbackAPI, text
from prompt_harness import MODEL, Run, assert_counted_as_sent, reply, section, start

from workbench.engine.plans.plan_context import doc_title
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import ModelLimits
from workbench.engine.settings.sections import PlanConfig, PromptConfig
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

VISION = "# Vision\n\nBilling that never double-charges."
REQUIREMENTS = "# Requirements\n\nWebhooks, refunds, invoices."
ARCHITECTURE = "# Architecture\n\nWebhook-only materialisation; DB for enforcement."
PHASES = "# Phases\n\n1. Auth\n2. Schema\n3. Billing\n4. Reports"
PHASE_PLAN = "# Phase 3: Billing Integration\n\nRevenueCat, webhooks first."
SUB_PLAN = "# 3.3 — Webhook Handler\n\nVerify signatures; idempotent upserts."
P1, P2 = "Phase 1 done: auth works.", "Phase 2 done: schema migrated."
S31, S32 = "3.1 done: SDK wired.", "3.2 done: entitlements table."


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content + "\n", encoding="utf-8")
    return path


@pytest.fixture
def plan_tree(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "docs/plan/01-vision.md", VISION)
    write(ws, "docs/plan/02-requirements.md", REQUIREMENTS)
    write(ws, "docs/plan/03-architecture.md", ARCHITECTURE)
    write(ws, "docs/plan/phases.md", PHASES)
    write(ws, "docs/phases/phase_1/PROGRESS.md", P1)
    write(ws, "docs/phases/phase_2/PROGRESS.md", P2)
    write(ws, "docs/phases/phase_3/PROGRESS.md", "Phase 3 so far (not previous).")
    write(ws, "docs/phases/phase_3/plan/overview.md", PHASE_PLAN)
    write(ws, "docs/phases/phase_3/3-1/PROGRESS.md", S31)
    write(ws, "docs/phases/phase_3/3-2/PROGRESS.md", S32)
    write(ws, "docs/phases/phase_3/3-3/plan/spec.md", SUB_PLAN)
    write(ws, "docs/phases/phase_3/3-3/PROGRESS.md", "current sub-phase progress (not previous)")
    write(ws, "docs/phases/phase_4/PROGRESS.md", "a later phase")
    return ws


IMPLEMENTATION = f"""<project_context>
## Project Plan
### Vision (docs/plan/01-vision.md)
{VISION}

### Architecture (docs/plan/03-architecture.md)
{ARCHITECTURE}

### Phases (docs/plan/phases.md)
{PHASES}

## Current Phase: Phase 3 — Billing Integration
### Phase Plan (docs/phases/phase_3/plan/overview.md)
{PHASE_PLAN}

## Current Sub-Phase: 3.3 — Webhook Handler
### Sub-Phase Plan (docs/phases/phase_3/3-3/plan/spec.md)
{SUB_PLAN}

## Previous Progress
### Phase 1 Progress (docs/phases/phase_1/PROGRESS.md)
{P1}

### Phase 2 Progress (docs/phases/phase_2/PROGRESS.md)
{P2}

### Sub-Phase 3.1 Progress (docs/phases/phase_3/3-1/PROGRESS.md)
{S31}

### Sub-Phase 3.2 Progress (docs/phases/phase_3/3-2/PROGRESS.md)
{S32}
</project_context>"""

PLANNING = f"""<project_context>
## Project Plan
### Vision (docs/plan/01-vision.md)
{VISION}

### Requirements (docs/plan/02-requirements.md)
{REQUIREMENTS}

### Architecture (docs/plan/03-architecture.md)
{ARCHITECTURE}

### Phases (docs/plan/phases.md)
{PHASES}

## Current Phase: Phase 3 — Billing Integration
### Phase Plan (docs/phases/phase_3/plan/overview.md)
{PHASE_PLAN}

## Current Sub-Phase: 3.3
## Previous Progress
### Phase 1 Progress (docs/phases/phase_1/PROGRESS.md)
{P1}

### Phase 2 Progress (docs/phases/phase_2/PROGRESS.md)
{P2}

### Sub-Phase 3.1 Progress (docs/phases/phase_3/3-1/PROGRESS.md)
{S31}

### Sub-Phase 3.2 Progress (docs/phases/phase_3/3-2/PROGRESS.md)
{S32}
</project_context>"""


def project_sections(run: Run, number: int) -> list[str]:
    return section(run.bodies[number], run.provider.calls[number], "project")


def run_one(store: Store, api: LoopbackAPI, ws: Path, message: str, config: Config | None = None) -> Run:
    api.queue(reply(text("On it.")))
    run = start(store, api, ws, config)
    assert not [i for i in run.agent.ctx.fixed_items if i.kind == "project"], "nothing before the first message"
    run.send(message)
    return run


# --- what is injected -------------------------------------------------------------------


def test_implementation_session_gets_key_docs_phase_subphase_and_earlier_progress(
    store: Store, api: LoopbackAPI, plan_tree: Path
) -> None:
    run = run_one(store, api, plan_tree, "/implement 3.3")
    assert project_sections(run, 0) == [IMPLEMENTATION]
    assert_counted_as_sent(run.bodies[0], run.provider.calls[0])
    assert run.provider.calls[0].budget.components["project"] > 0
    assert run.agent.prompt.plan.context is not None
    assert run.agent.prompt.plan.context.files[:2] == ["docs/plan/01-vision.md", "docs/plan/03-architecture.md"]
    assert not run.warnings("plan_context")


def test_planning_session_gets_the_whole_plan_and_no_subphase_plan(
    store: Store, api: LoopbackAPI, plan_tree: Path
) -> None:
    run = run_one(store, api, plan_tree, "/plan-subphase 3.3")
    assert project_sections(run, 0) == [PLANNING]
    assert not run.warnings("plan_context")


@pytest.mark.parametrize("how", ["state file", "config"])
def test_mode_and_phase_from_a_state_file_or_the_config(
    store: Store, api: LoopbackAPI, plan_tree: Path, how: str
) -> None:
    config = Config()
    if how == "state file":
        write(plan_tree, ".workbench/workflow.json", json.dumps({"mode": "planning", "phase": "3", "subphase": "3.3"}))
    else:
        config = Config(prompt=PromptConfig(plan=PlanConfig(mode="planning", phase="3", subphase="3.3")))
    run = run_one(store, api, plan_tree, "Let's plan the webhook handler.", config)
    assert project_sections(run, 0) == [PLANNING]
    assert run.agent.prompt.plan.selection is not None and run.agent.prompt.plan.selection.source == how


def test_without_a_phase_the_key_docs_and_all_phase_progress(
    store: Store, api: LoopbackAPI, plan_tree: Path
) -> None:
    run = run_one(store, api, plan_tree, "What is this project?")
    [context] = project_sections(run, 0)
    assert "## Current Phase" not in context
    for progress in (P1, P2, "Phase 3 so far", "a later phase"):
        assert progress in context
    assert REQUIREMENTS not in context and SUB_PLAN not in context


def test_configured_key_documents(store: Store, api: LoopbackAPI, plan_tree: Path) -> None:
    config = Config(prompt=PromptConfig(plan=PlanConfig(key_documents=["02-requirements.md"])))
    run = run_one(store, api, plan_tree, "/implement 3.3", config)
    [context] = project_sections(run, 0)
    assert "### Requirements (docs/plan/02-requirements.md)" in context
    assert VISION not in context and ARCHITECTURE not in context


def test_only_the_first_user_message_decides_and_the_text_stays_put_until_a_compaction(
    store: Store, api: LoopbackAPI, plan_tree: Path
) -> None:
    api.queue(*(reply(text(f"answer {n}")) for n in range(4)))
    run = start(store, api, plan_tree)
    progress = plan_tree / "docs/phases/phase_3/3-2/PROGRESS.md"

    async def go() -> None:
        try:
            await run.agent.send("/implement 3.3")
            progress.write_text("3.2 done: entitlements table, and the refund path too.\n")
            await run.agent.send("/plan-phase 4")  # not a first message: changes nothing
            # A compaction (here just its pivot) makes the next request read the files again.
            ctx = run.agent.ctx
            kept = [m for m in ctx.messages if m.role == "user"][-1]
            pivot = OverlayEvent(id=uuid.uuid4().hex, session_id=ctx.session.id, plan_id=uuid.uuid4().hex,
                                 action="pivot", message_id=kept.id, origin="compaction", data={"trigger": "manual"})
            run.agent.store.add_overlay_events([pivot])
            ctx.apply_events([pivot])
            await run.agent.send("carry on")
            progress.write_text("3.2 done: edited once more.\n")
            run.agent.prompt.mark_compacted()
            await run.agent.send("and again")
        finally:
            await run.provider.close()

    asyncio.run(go())
    first, second, third, fourth = (project_sections(run, n)[0] for n in range(4))
    assert first == second == IMPLEMENTATION
    assert third == IMPLEMENTATION.replace(S32, "3.2 done: entitlements table, and the refund path too.")
    assert fourth == IMPLEMENTATION.replace(S32, "3.2 done: edited once more.")
    assert_counted_as_sent(run.bodies[2], run.provider.calls[2])


def test_no_plan_directory_is_not_phase_mode(store: Store, api: LoopbackAPI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = run_one(store, api, ws, "hello")
    assert project_sections(run, 0) == []
    assert not run.warnings()


def test_doc_titles() -> None:
    assert [doc_title(n) for n in ("01-vision.md", "03-architecture.md", "phases.md", "10_api-design.md")] == [
        "Vision", "Architecture", "Phases", "Api Design"]


# --- bad trees: a clear warning and a working session --------------------------------------


def test_missing_plan_tree_when_phase_mode_is_asked_for(store: Store, api: LoopbackAPI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = run_one(store, api, ws, "/implement 3.3")
    [warning] = run.warnings("plan_context")
    assert "/implement asks for phase mode, but there is no docs/plan/" in warning
    assert project_sections(run, 0) == []
    assert run.agent.ctx.messages[-1].text == "On it."


def test_missing_phase_directory(store: Store, api: LoopbackAPI, plan_tree: Path) -> None:
    run = run_one(store, api, plan_tree, "/implement 5.1")
    assert any("no docs/phases/phase_5/ for the current phase 5" in w for w in run.warnings("plan_context"))
    [context] = project_sections(run, 0)
    assert "## Current Phase: Phase 5" in context and VISION in context


def test_empty_plan_tree(store: Store, api: LoopbackAPI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs" / "plan").mkdir(parents=True)
    run = run_one(store, api, ws, "/implement 1")
    warnings = run.warnings("plan_context")
    assert any("docs/plan/ is empty" in w for w in warnings), warnings
    assert any("no plan file could be read" in w for w in warnings), warnings
    assert project_sections(run, 0) == []
    assert run.agent.ctx.messages[-1].text == "On it."


def test_unreadable_file(store: Store, api: LoopbackAPI, plan_tree: Path) -> None:
    vision = plan_tree / "docs/plan/01-vision.md"
    vision.chmod(0)
    try:
        if os.access(vision, os.R_OK):
            pytest.skip("running with privileges that read a chmod-000 file (root); see the next test")
        run = run_one(store, api, plan_tree, "/implement 3.3")
    finally:
        vision.chmod(0o644)
    assert any("cannot read docs/plan/01-vision.md (Permission denied)" in w for w in run.warnings("plan_context"))
    [context] = project_sections(run, 0)
    assert VISION not in context and ARCHITECTURE in context


def test_a_directory_where_a_file_is_expected_and_a_file_that_is_not_utf8(
    store: Store, api: LoopbackAPI, plan_tree: Path
) -> None:
    (plan_tree / "docs/plan/03-architecture.md").unlink()
    (plan_tree / "docs/plan/03-architecture.md").mkdir()
    write(plan_tree, "docs/plan/phases.md", b"# Phases\n\xff\xfe not utf-8\n")
    (plan_tree / "docs/phases/phase_2/PROGRESS.md").unlink()
    (plan_tree / "docs/phases/phase_2/PROGRESS.md").mkdir()
    run = run_one(store, api, plan_tree, "/implement 3.3")
    warnings = run.warnings("plan_context")
    assert any("docs/plan/03-architecture.md is a directory, not a file" in w for w in warnings), warnings
    assert any("docs/plan/phases.md is not UTF-8 text" in w for w in warnings), warnings
    assert any("docs/phases/phase_2/PROGRESS.md is a directory" in w for w in warnings), warnings
    [context] = project_sections(run, 0)
    assert VISION in context and SUB_PLAN in context and P1 in context
    assert "Architecture (" not in context and "### Phases (" not in context and P2 not in context


def test_a_large_plan_warns_with_what_to_trim(store: Store, api: LoopbackAPI, plan_tree: Path) -> None:
    write(plan_tree, "docs/phases/phase_1/PROGRESS.md", "Long notes. " + "detail " * 3000)
    config = Config(prompt=PromptConfig(plan=PlanConfig(warn_tokens=1000)))
    run = run_one(store, api, plan_tree, "/implement 3.3", config)
    [warning] = run.warnings("plan_context")
    assert "over the 1,000-token warning threshold" in warning
    assert "Largest files: docs/phases/phase_1/PROGRESS.md (" in warning
    assert "prompt.plan.key_documents" in warning
    [context] = project_sections(run, 0)
    assert "detail detail" in context, "a warning only: everything is still injected"


def test_a_plan_larger_than_the_window_is_cut_to_fit_and_the_session_works(
    store: Store, api: LoopbackAPI, plan_tree: Path
) -> None:
    write(plan_tree, "docs/phases/phase_1/PROGRESS.md", "Old notes. " + "history " * 15000)
    write(plan_tree, "docs/phases/phase_3/3-3/plan/spec.md", SUB_PLAN + "\n" + "requirement " * 12000)
    config = Config(models={MODEL: ModelLimits(context_window=20_000, max_output=2_000)})
    run = run_one(store, api, plan_tree, "/implement 3.3", config)
    warnings = run.warnings("plan_context")
    assert not any("warning threshold" in w for w in warnings)
    [cut] = [w for w in warnings if "does not fit" in w]
    assert "left out: docs/phases/phase_1/PROGRESS.md" in cut
    assert "docs/phases/phase_3/3-3/plan/spec.md (truncated)" in cut
    call = run.provider.calls[0]
    assert call.budget.components["project"] <= 9_000  # half of the 18,000-token effective window
    assert call.budget.level == "ok"
    [context] = project_sections(run, 0)
    assert "history history" not in context and "[truncated to fit the context window" in context
    assert run.agent.ctx.messages[-1].text == "On it."
