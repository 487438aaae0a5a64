"""What a compaction always keeps (spec 000 §2) and the offline heuristic summary.

Metadata comes from the transcript's tool calls (files written, sub-agents, the todo list),
agent text (decision markers) and the workspace's plan folders (phase, plan files).
"""

from __future__ import annotations

import json
from pathlib import Path

from compaction_helpers import SessionBuilder, filler, import_fixture, load, preview
from helpers import claude_fixture

from workbench.engine.plans.compaction_metadata import collect_metadata, workspace_position
from workbench.engine.plans.plan_context import collect, select
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.settings.sections import PlanConfig
from workbench.engine.transcript.models import TextPart
from workbench.engine.transcript.store import Store


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    for folder in ("docs/plan", "docs/phases/phase_1", "docs/phases/phase_2/plan", "docs/phases/phase_2/2-1/plan",
                   "docs/phases/phase_2/2-2/plan", "docs/phases/phase_3"):
        (ws / folder).mkdir(parents=True)
    files = {
        "docs/plan/01-vision.md": "# Vision", "docs/plan/phases.md": "# Phases",
        "docs/phases/phase_1/PROGRESS.md": "- [x] done",
        "docs/phases/phase_2/plan/overview.md": "# Phase 2",
        "docs/phases/phase_2/2-1/PROGRESS.md": "- [x] all done",
        "docs/phases/phase_2/2-1/plan/spec.md": "# 2.1",
        "docs/phases/phase_2/2-2/plan/spec.md": "# 2.2",
        "docs/phases/phase_2/PROGRESS.md": "- [x] 2.1\n- [ ] 2.2",
    }
    for name, text in files.items():
        (ws / name).write_text(text)
    return ws


def _busy_session(ws: Path | None = None) -> SessionBuilder:
    b = SessionBuilder(workspace=ws)
    b.user("Fix the invoice totals, then update the docs.")
    first_todos = {"todos": [{"content": "fix totals", "status": "pending"}]}
    b.assistant("Planning.", tools=[("todo_write", first_todos, "ok", False)])
    b.assistant("We decided to compute tax after the discount. Reading the code now.",
                tools=[("read_file", {"path": "docs/plan/01-vision.md"}, "# Vision", False)])
    b.assistant("Editing.", tools=[
        ("edit_file", {"path": "src/totals.py", "old": "a", "new": "b"}, "ok", False),
        ("write_file", {"path": "src/broken.py", "content": "x"}, "permission denied", True),
    ])
    b.assistant("Claude-style edits.", tools=[("Write", {"file_path": "README.md", "content": "x"}, "ok", False),
                                              ("MultiEdit", {"file_path": "src/report.py", "edits": []}, "ok", False),
                                              ("Edit", {"file_path": "src/totals.py", "old_string": "b"}, "ok", False)])
    b.assistant("Delegating.", tools=[("Task", {"description": "Check rounding", "prompt": "..."},
                                       "Rounding is fine.\nagentId: a881341 (for resuming)", False),
                                      ("task", {"description": "Second opinion"}, "done", False),
                                      ("task", {"description": "Third look"},
                                       ("Fine.\n[Sub-agent task-2 (general, session s-5e1f0a2b3c4d) finished; "
                                       "full output saved to x.md]"), False)])
    b.assistant("Chose the half-even rounding mode. The tests pass.",
                tools=[("TodoWrite", {"todos": [{"content": "fix totals", "status": "completed"},
                                                {"content": "update docs", "status": "in_progress"}]}, "ok", False)])
    b.user("Thanks. Now the docs.")
    b.assistant("Undecided wording aside, all good.")
    for n in range(6):
        b.user(filler(f"Docs{n}", 400))
        b.assistant(filler(f"Edit{n}", 400))
    return b


def test_metadata_from_the_transcript_and_the_workspace(store: Store, tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    b = _busy_session(ws)
    meta = collect_metadata(b.messages, CompactionConfig(), workspace=ws)
    assert meta.modified_files == ["src/totals.py", "README.md", "src/report.py"], "failed writes do not count"
    agents = [(a.id, a.description) for a in meta.subagents]
    # by the session each continues from (spec 000); a result naming none keeps its call's id
    assert agents == [("a881341", "Check rounding"), ("toolu_0009", "Second opinion"), ("s-5e1f0a2b3c4d", "Third look")]
    todos = [(t.content, t.status) for t in meta.todos or []]
    assert todos == [("fix totals", "completed"), ("update docs", "in_progress")]
    assert meta.decisions == ["We decided to compute tax after the discount.", "Chose the half-even rounding mode."]
    # No position set anywhere: inferred from the open checkboxes; the files are what the injector loads.
    assert (meta.phase, meta.subphase) == ("2", "2.2")
    assert meta.plan_files == ["docs/plan/01-vision.md", "docs/plan/phases.md", "docs/phases/phase_1/PROGRESS.md",
                               "docs/phases/phase_2/PROGRESS.md"]


def test_position_and_plan_files_follow_the_plan_injector(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / ".workbench").mkdir()
    (ws / ".workbench" / "workflow.json").write_text(json.dumps({"phase": "2", "subphase": "2.1"}))
    b = _busy_session(ws)
    meta = collect_metadata(b.messages, CompactionConfig(), workspace=ws)
    selection = select("", ws, PlanConfig(), lambda message: None)
    assert meta.plan_files == collect(ws, PlanConfig(), selection, lambda message: None).files
    assert (meta.phase, meta.subphase) == ("2", "2.1")
    assert "docs/phases/phase_2/2-1/plan/spec.md" in meta.plan_files
    b.messages[0] = b.messages[0].model_copy(update={"parts": [TextPart(text="/implement 2.2")]})
    meta = collect_metadata(b.messages, CompactionConfig(), workspace=ws)
    assert (meta.phase, meta.subphase) == ("2", "2.2") and "docs/phases/phase_2/2-2/plan/spec.md" in meta.plan_files


def test_decision_markers_are_configurable(store: Store) -> None:
    b = _busy_session()
    meta = collect_metadata(b.messages, CompactionConfig(decision_markers=["tests pass"]))
    assert meta.decisions == ["The tests pass."]
    assert collect_metadata(b.messages, CompactionConfig(decision_markers=[])).decisions == []


def test_workspace_without_plans_has_no_position(tmp_path: Path) -> None:
    assert workspace_position(tmp_path, PlanConfig()) == (None, None, [])


def test_metadata_reaches_the_prompt_and_the_summary(store: Store, tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    ctx = load(store, _busy_session(ws).save(store))
    plan = preview(store, ctx, config=CompactionConfig(tail_max=2_000), focus="the docs")
    for text in (plan.prompt, plan.summary):
        assert "- Current position: Phase 2, Sub-phase 2.2" in text
        assert "- Files modified: src/totals.py, README.md, src/report.py" in text
        assert "- Active sub-agent sessions: a881341 (Check rounding), toolu_0009 (Second opinion)" in text
        assert "- [x] fix totals (completed)" in text and "- [~] update docs (in_progress)" in text
        assert "- We decided to compute tax after the discount." in text
        assert "docs/phases/phase_2/PROGRESS.md" in text
    assert "The user asks the summary to focus on: the docs" in plan.prompt


def test_heuristic_summary_is_a_deterministic_checkpoint(store: Store) -> None:
    ctx = load(store, _busy_session().save(store))
    config = CompactionConfig(tail_max=2_000)
    first, second = preview(store, ctx, config=config), preview(store, ctx, config=config)
    assert first.summary == second.summary and first.prompt == second.prompt
    summary = first.summary
    for section in ("User requests:", "Files touched:", "Errors seen:", "Where work stopped:", "### Todo List",
                    "### Key Decisions"):
        assert section in summary, section
    assert "- Fix the invoice totals, then update the docs." in summary
    assert "write_file: permission denied" in summary
    assert "changed: src/totals.py" in summary


def test_fixture_metadata_finds_todos_and_subagents(store: Store) -> None:
    ctx = import_fixture(store, claude_fixture("session-196820da"))
    plan = preview(store, ctx)
    assert plan.metadata.todos and all(t.status == "completed" for t in plan.metadata.todos)
    ctx = import_fixture(store, claude_fixture("subagent"))
    meta = collect_metadata(ctx.messages, CompactionConfig())
    assert [a.id for a in meta.subagents] == ["afb92ff"]
