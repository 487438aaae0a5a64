"""DCP (spec 000 §5): deduplication, superseded writes, purged errors, protections, the nudge,
and the model's prune / distill tools."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_strategies_common import Transcript, big, event, prunes, strategies

from workbench.engine.agent.tools import ToolContext, ToolRegistry
from workbench.engine.agent.tools.dcp import DISTILLED_PREFIX, Distill, Prune
from workbench.engine.context.projection import PRUNED_INPUT_PLACEHOLDER, PRUNED_PLACEHOLDER
from workbench.engine.plans.measure import measure
from workbench.engine.plans.plan import undo
from workbench.engine.plans.strategies.base import SUBAGENT_KEY
from workbench.engine.plans.strategies.dcp import (
    FAILED_INPUT_PLACEHOLDER,
    nudge,
    plan_dedup,
    plan_purge_errors,
    plan_supersede_writes,
)
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store

UNPROTECTED = strategies(dcp={"turn_protection": 0})


def _dupes() -> tuple[Transcript, list[str]]:
    t = Transcript()
    t.user("look at the code")
    results = []
    for label, path in (("a1", "a.py"), ("a2", "a.py"), ("b", "b.py"), ("a3", "a.py")):
        _, result, _ = t.call("Read", {"file_path": f"/repo/src/{path}"}, big(label))
        results.append(result)
    t.say()
    return t, results


# --- deduplication -----------------------------------------------------------------------


def test_dedup_prunes_older_identical_calls_and_keeps_the_newest() -> None:
    t, (r1, r2, rb, r3) = _dupes()
    ctx = t.context()
    plan = measure(ctx, plan_dedup(ctx, UNPROTECTED))
    assert prunes(plan) == {(r1, 0), (r2, 0)}
    assert all("toolu_0004" in item.reason for item in plan.items)
    trial = t.context(plan.events())
    shown = {m: trial.view().item_for(m).parts[0] for m in (r1, r2, rb, r3)}  # type: ignore[union-attr]
    assert [p.text == PRUNED_PLACEHOLDER for p in shown.values()] == [True, True, False, False]  # type: ignore[union-attr]
    assert plan.tokens_saved == ctx.budget().used - trial.budget().used > 0


def test_dedup_needs_the_same_input_not_only_the_same_tool() -> None:
    t = Transcript()
    t.user("go")
    t.call("Read", {"file_path": "a.py"}, big("x"))
    t.call("Read", {"file_path": "a.py", "offset": 10}, big("y"))
    t.call("Bash", {"command": "cat a.py"}, big("z"))
    assert not plan_dedup(t.context(), UNPROTECTED).items


def test_dedup_key_ignores_the_order_of_arguments() -> None:
    t = Transcript()
    t.user("go")
    _, first, _ = t.call("Grep", {"pattern": "x", "path": "src"}, big("1"))
    t.call("Grep", {"path": "src", "pattern": "x"}, big("2"))
    assert prunes(plan_dedup(t.context(), UNPROTECTED)) == {(first, 0)}


def test_dedup_takes_an_argument_given_as_null_as_one_not_given() -> None:
    """``{filePath, offset: null}`` repeats ``{filePath}`` (an agent that writes every argument does that): the
    two inputs differ as written, and only their keys say they are the same call."""
    t = Transcript()
    t.user("go")
    _, first, _ = t.call("Read", {"filePath": "a.py", "offset": None}, big("1"))
    _, second, _ = t.call("Read", {"filePath": "a.py"}, big("2"))
    t.call("Read", {"filePath": "b.py", "offset": None}, big("3"))
    t.call("Read", {"offset": None, "filePath": "a.py"}, big("4"))
    assert prunes(plan_dedup(t.context(), UNPROTECTED)) == {(first, 0), (second, 0)}


def test_dedup_compares_nested_inputs_whatever_their_order() -> None:
    """An input holding a list or an object (not hashable) is compared as canonical JSON."""
    t = Transcript()
    t.user("go")
    _, first, _ = t.call("Edit", {"edits": [{"old": "a", "new": "b"}], "path": "x.py"}, big("1"))
    t.call("Edit", {"path": "x.py", "edits": [{"new": "b", "old": "a"}]}, big("2"))
    t.call("Edit", {"path": "x.py", "edits": [{"new": "c", "old": "a"}]}, big("3"))
    assert prunes(plan_dedup(t.context(), UNPROTECTED)) == {(first, 0)}


def test_calls_whose_keys_share_a_hash_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ToolUsePart, "call_hash", lambda self: 0)  # every key one hash
    t, (r1, r2, _rb, _r3) = _dupes()
    assert prunes(plan_dedup(t.context(), UNPROTECTED)) == {(r1, 0), (r2, 0)}


def test_a_calls_key_is_worked_out_once_and_a_changed_copy_has_its_own() -> None:
    part = ToolUsePart(id="t1", name="Read", input={"path": "a.py", "limit": 5})
    key = part.call_key()
    assert key == ("Read", (("limit", 5), ("path", "a.py"))) and part.call_key() is key
    assert part.call_hash() == hash(key)
    assert part.model_copy().call_key() == key
    assert part.model_copy(update={"input": {"path": "b.py"}}).call_key() == ("Read", (("path", "b.py"),))


def _dupes_in_turns() -> tuple[Transcript, str]:
    """The same call in turn 1 and turn 2; turn 3 is current: the older output is 2 turns old."""
    t = Transcript()
    t.user("one")
    _, old, _ = t.call("Bash", {"command": "git log"}, big("log"))
    t.user("two")
    t.call("Bash", {"command": "git log"}, big("log"))
    t.user("three")
    t.say()
    return t, old


@pytest.mark.parametrize(("protection", "pruned"), [(0, True), (2, True), (3, False), (6, False)])
def test_turn_protection_boundary(protection: int, pruned: bool) -> None:
    t, old = _dupes_in_turns()
    plan = plan_dedup(t.context(), strategies(dcp={"turn_protection": protection}))
    assert (prunes(plan) == {(old, 0)}) is pruned
    assert (not plan.items) is (not pruned)


@pytest.mark.parametrize(
    "path", ["docs/plan/01-vision.md", "/repo/docs/phases/phase_3/PROGRESS.md", "/repo/pkg/AGENTS.md"]
)
def test_protected_files_are_never_pruned(path: str) -> None:
    t = Transcript()
    t.user("read the plan")
    t.call("Read", {"file_path": path}, big("plan"))
    t.call("Read", {"file_path": path}, big("plan"))
    assert not plan_dedup(t.context(), UNPROTECTED).items
    custom = strategies(dcp={"turn_protection": 0, "protected_file_patterns": ["other/**"]})
    assert len(plan_dedup(t.context(), custom).items) == 1


@pytest.mark.parametrize("which", ["call", "result"])
def test_pinned_messages_are_never_pruned(which: str) -> None:
    t = Transcript()
    t.user("go")
    call, result, _ = t.call("Bash", {"command": "ls"}, big("ls"))
    t.call("Bash", {"command": "ls"}, big("ls"))
    ctx = t.context([event(1, "pin", call if which == "call" else result)])
    assert not plan_dedup(ctx, UNPROTECTED).items


def test_a_pinned_duplicate_is_passed_over_and_the_other_duplicates_of_its_call_still_pruned() -> None:
    """What protects a duplicate by its own message (a pin, its turn) is asked of each one; only what protects the
    call itself (its tool, its files) is the same for every duplicate of it."""
    t, (r1, r2, _, _) = _dupes()
    assert prunes(plan_dedup(t.context([event(1, "pin", r1)]), UNPROTECTED)) == {(r2, 0)}
    assert prunes(plan_dedup(t.context([event(1, "pin", r2)]), UNPROTECTED)) == {(r1, 0)}


def test_an_already_pruned_output_is_left_alone() -> None:
    t, (r1, r2, _, _) = _dupes()
    ctx = t.context([event(1, "prune", r1, 0)])
    assert prunes(plan_dedup(ctx, UNPROTECTED)) == {(r2, 0)}


# --- superseded writes ----------------------------------------------------------------------


def test_a_write_read_later_loses_its_content_but_keeps_its_path() -> None:
    t = Transcript()
    t.user("write it")
    write, _, write_id = t.call("Write", {"file_path": "/repo/a.py", "content": big("code")}, "File created",
                                text="Writing the module.")
    t.call("Read", {"file_path": "/repo/a.py"}, big("code"))
    ctx = t.context()
    plan = measure(ctx, plan_supersede_writes(ctx, UNPROTECTED))
    assert prunes(plan) == {(write, 1)}  # the tool_use part, after the text
    trial = t.context(plan.events())
    shown = trial.view().item_for(write).parts[1]  # type: ignore[union-attr]
    assert isinstance(shown, ToolUsePart)
    assert shown.input == {"file_path": "/repo/a.py", "content": PRUNED_INPUT_PLACEHOLDER}
    wire_uses = [b for m in trial.view().wire for b in m["content"] if b["type"] == "tool_use" and b["id"] == write_id]
    assert wire_uses[0]["input"]["content"] == PRUNED_INPUT_PLACEHOLDER
    assert plan.tokens_saved > 0


def test_an_edit_loses_old_and_new_text_and_keeps_its_flags() -> None:
    t = Transcript()
    t.user("edit it")
    edit, _, _ = t.call("Edit", {"file_path": "a.py", "old_string": big("old"), "new_string": big("new"),
                                 "replace_all": False}, "edited")
    t.call("Read", {"file_path": "./a.py"}, big("after"))
    trial = t.context(plan_supersede_writes(t.context(), UNPROTECTED).events())
    shown = trial.view().item_for(edit).parts[0]  # type: ignore[union-attr]
    assert shown.input == {"file_path": "a.py", "old_string": PRUNED_INPUT_PLACEHOLDER,  # type: ignore[union-attr]
                           "new_string": PRUNED_INPUT_PLACEHOLDER, "replace_all": False}


@pytest.mark.parametrize("case", ["read-before", "other-file", "read-failed", "not-a-write"])
def test_writes_that_are_not_superseded(case: str) -> None:
    t = Transcript()
    t.user("go")
    if case == "read-before":
        t.call("Read", {"file_path": "a.py"}, big("before"))
    t.call("Bash" if case == "not-a-write" else "Write", {"file_path": "a.py", "content": big("code")}, "ok")
    if case != "read-before":
        path = "b.py" if case == "other-file" else "a.py"
        t.call("Read", {"file_path": path}, "File does not exist." if case == "read-failed" else big("after"),
               error=case == "read-failed")
    plan = plan_supersede_writes(t.context(), UNPROTECTED)
    assert not [i for i in plan.items if "superseded by a later read" in i.reason]


def test_a_read_replaced_by_a_later_whole_file_write_loses_its_output() -> None:
    """What a read returned is no longer the file once a later write replaced all of it (opencode-DCP
    supersedes such reads too); the write's own input holds the file as it is now."""
    t = Transcript()
    t.user("rewrite it")
    _, read, _ = t.call("Read", {"file_path": "/repo/a.py"}, big("old"))
    t.call("Write", {"file_path": "/repo/a.py", "content": big("new")}, "File written")
    ctx = t.context()
    plan = measure(ctx, plan_supersede_writes(ctx, UNPROTECTED))
    assert prunes(plan) == {(read, 0)}
    assert "replaced by a later Write" in plan.items[0].reason
    shown = t.context(plan.events()).view().item_for(read).parts[0]  # type: ignore[union-attr]
    assert isinstance(shown, ToolResultPart) and shown.text == PRUNED_PLACEHOLDER


@pytest.mark.parametrize("case", ["edit-after", "write-failed", "other-file", "switched-off"])
def test_reads_that_a_write_does_not_supersede(case: str) -> None:
    """An edit changes part of a file: the rest of what was read still holds."""
    t = Transcript()
    t.user("go")
    t.call("Read", {"file_path": "a.py"}, big("old"))
    if case == "edit-after":
        t.call("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, "edited")
    else:
        t.call("Write", {"file_path": "b.py" if case == "other-file" else "a.py", "content": big("new")},
               "Permission denied" if case == "write-failed" else "ok", error=case == "write-failed")
    config = strategies(dcp={"turn_protection": 0}, supersede_writes={"reads": case != "switched-off"})
    assert not plan_supersede_writes(t.context(), config).items


def test_engine_tool_names_are_writes_too() -> None:
    t = Transcript()
    t.user("go")
    write, _, _ = t.call("write_file", {"path": "notes.md", "content": big("notes")}, "wrote")
    t.call("read_file", {"path": "notes.md"}, big("notes"))
    assert prunes(plan_supersede_writes(t.context(), UNPROTECTED)) == {(write, 0)}


def test_superseded_write_to_a_protected_file_is_kept() -> None:
    t = Transcript()
    t.user("go")
    t.call("Write", {"file_path": "docs/plan/plan.md", "content": big("plan")}, "ok")
    t.call("Read", {"file_path": "docs/plan/plan.md"}, big("plan"))
    assert not plan_supersede_writes(t.context(), UNPROTECTED).items


# --- purged errors ------------------------------------------------------------------------------


def _failed_call(turns_after: int) -> tuple[Transcript, str, str]:
    t = Transcript()
    t.user("run it")
    call, result, _ = t.call("Bash", {"command": big("long command", 80)}, "exit 1: boom", error=True)
    for n in range(turns_after):
        t.user(f"turn {n}")
        t.say()
    return t, call, result


@pytest.mark.parametrize(("age", "pruned"), [(3, False), (4, True), (7, True)])
def test_failed_inputs_are_purged_from_four_turns_on(age: int, pruned: bool) -> None:
    t, call, result = _failed_call(age)
    ctx = t.context()
    plan = plan_purge_errors(ctx, UNPROTECTED)
    assert (prunes(plan) == {(call, 0)}) is pruned
    if pruned:
        trial = t.context(plan.events())
        assert trial.view().item_for(call).parts[0].input == {"command": FAILED_INPUT_PLACEHOLDER}  # type: ignore[union-attr]
        assert trial.view().item_for(result).parts[0].text == "exit 1: boom"  # type: ignore[union-attr]


def test_default_turn_protection_outlasts_the_purge_age() -> None:
    t, call, _ = _failed_call(5)
    assert not plan_purge_errors(t.context(), StrategiesConfig()).items
    t, call, _ = _failed_call(6)
    assert prunes(plan_purge_errors(t.context(), StrategiesConfig())) == {(call, 0)}


def test_a_failed_call_with_a_tiny_input_is_not_worth_it() -> None:
    t = Transcript()
    t.user("go")
    t.call("Bash", {"command": "x"}, "boom", error=True)
    for n in range(5):
        t.user(str(n))
    assert not plan_purge_errors(t.context(), UNPROTECTED).items


# --- switches -------------------------------------------------------------------------------------


def test_dcp_is_off_for_subagents_unless_asked() -> None:
    t, _ = _dupes()
    t.session.metadata[SUBAGENT_KEY] = True
    assert not plan_dedup(t.context(), UNPROTECTED).items
    on = strategies(dcp={"turn_protection": 0, "subagents": True})
    assert len(plan_dedup(t.context(), on).items) == 2


def test_dcp_in_a_subagent_protects_its_newest_steps_not_its_one_turn() -> None:
    """A sub-agent's session is one prompt and its steps: with the default protection (6 turns) and
    ``subagents = true``, a turn there is a step, so an early duplicate read is pruned (it was never, when
    the one prompt made the whole session its newest turn)."""
    t = Transcript()
    t.session.metadata[SUBAGENT_KEY] = True
    t.user("find where the config is read")
    _, early, _ = t.call("Read", {"file_path": "/repo/src/a.py"}, big("a"))
    for n in range(7):
        t.call("Bash", {"command": f"grep -n config part{n}"}, big(f"g{n}"))
    t.call("Read", {"file_path": "/repo/src/a.py"}, big("a"))
    on = strategies(dcp={"subagents": True})
    assert prunes(plan_dedup(t.context(), on)) == {(early, 0)}
    assert not plan_dedup(t.context(), strategies()).items, "still off for sub-agents by default"


def test_dcp_switched_off() -> None:
    t, _ = _dupes()
    assert not plan_dedup(t.context(), strategies(dcp={"enabled": False, "turn_protection": 0})).items


# --- the nudge --------------------------------------------------------------------------------------


def _nudge_session(share: float) -> tuple[Transcript, int]:
    """A session whose budget is ``share`` of its effective window (the window is small enough to be halved)."""
    t, _ = _dupes()
    used = t.context().budget().used
    effective = round(used / share)
    t.session.context_window = 2 * effective
    assert t.context().budget().effective_window == effective
    return t, used


def test_nudge_every_fifteen_calls_from_seventy_percent() -> None:
    t, _ = _nudge_session(0.75)
    config = StrategiesConfig()
    text = nudge(t.context(), 15, config)
    assert text is not None and "`prune`" in text and "`distill`" in text
    assert "toolu_0001" in text or "toolu_0002" in text
    assert nudge(t.context(), 14, config) is None
    assert nudge(t.context(), 30, config) is not None
    assert nudge(t.context(), 0, config) is None
    t, _ = _nudge_session(0.6)
    assert nudge(t.context(), 15, config) is None


def test_nudge_threshold_boundary() -> None:
    t, used = _nudge_session(0.5)
    effective = t.context().budget().effective_window
    assert used == round(effective * 0.5)
    assert nudge(t.context(), 15, strategies(dcp={"nudge_at": 0.5})) is not None
    assert nudge(t.context(), 15, strategies(dcp={"nudge_at": (used + 1) / effective})) is None


# --- the model's tools --------------------------------------------------------------------------------


def _run(registry: ToolRegistry, name: str, args: dict[str, object], tmp_path: Path) -> tuple[str, bool]:
    output = asyncio.run(registry.execute(name, args, ToolContext(workspace=tmp_path)))
    return output.text, output.is_error


def test_prune_tool(store: Store, tmp_path: Path) -> None:
    t, (r1, _r2, _, _) = _dupes()
    ctx = t.stored(store)
    before = ctx.budget().used
    registry = ToolRegistry([Prune(store, ctx), Distill(store, ctx)])
    text, error = _run(registry, "prune", {"ids": ["toolu_0001", "toolu_0002"]}, tmp_path)
    assert not error and "Pruned 2" in text
    assert ctx.view().item_for(r1).parts[0].text == PRUNED_PLACEHOLDER  # type: ignore[union-attr]
    assert ctx.events[-1].origin == "agent"
    assert store.load_overlay(t.session.id)[-1].origin == "agent"
    after = ctx.budget().used
    assert f"{before:,} → {after:,}" in text
    undo(store, ctx)
    assert ctx.budget().used == before


def test_prune_tool_refuses_what_it_may_not_touch(store: Store, tmp_path: Path) -> None:
    t = Transcript()
    t.user("go")
    _, pinned, _ = t.call("Bash", {"command": "ls"}, big("ls"))
    t.call("Read", {"file_path": "docs/plan/x.md"}, big("plan"))
    t.call("Bash", {"command": "pwd"}, big("pwd"))
    ctx = t.stored(store)
    store.add_overlay_events([event(1, "pin", pinned)])
    ctx.apply_events([event(1, "pin", pinned)])
    registry = ToolRegistry([Prune(store, ctx)])
    text, error = _run(registry, "prune", {"ids": ["toolu_0001", "toolu_0002", "toolu_9999", "toolu_0003"]}, tmp_path)
    assert error
    assert "toolu_0001: pinned" in text and "toolu_0002: reads a protected file" in text
    assert "toolu_9999: no result" in text and "toolu_0003" not in text
    assert not any(e.action == "prune" for e in ctx.events)
    text, error = _run(registry, "prune", {"ids": []}, tmp_path)
    assert error and "ids" in text


def test_distill_tool_shows_the_summary(store: Store, tmp_path: Path) -> None:
    t, (r1, r2, _, _) = _dupes()
    ctx = t.stored(store)
    registry = ToolRegistry([Distill(store, ctx)])
    text, error = _run(registry, "distill", {"ids": ["toolu_0002", "toolu_0001"], "summary": "a.py defines f()."},
                       tmp_path)
    assert not error, text
    newest = ctx.view().item_for(r2).parts[0]  # type: ignore[union-attr]
    oldest = ctx.view().item_for(r1).parts[0]  # type: ignore[union-attr]
    assert isinstance(newest, ToolResultPart) and newest.text == f"{DISTILLED_PREFIX}\na.py defines f()."
    assert isinstance(oldest, ToolResultPart) and "toolu_0002" in oldest.text and oldest.text.startswith("[Distilled")
    reloaded = t.stored(store)
    assert reloaded.view().item_for(r2).parts[0].text == newest.text  # type: ignore[union-attr]
    text, error = _run(registry, "distill", {"ids": ["toolu_0003"], "summary": big("long", 2000)}, tmp_path)
    assert error and "not shorter" in text


def test_restore_after_distill_shows_the_original() -> None:
    t, (r1, _, _, _) = _dupes()
    ctx = t.context([event(1, "prune", r1, 0, replacement="short"), event(2, "restore", r1, 0)])
    assert ctx.view().item_for(r1).parts[0].text.startswith("a1: ")  # type: ignore[union-attr]
    ctx = t.context([event(1, "prune", r1, 0, replacement="short"), event(2, "restore", r1, 0),
                     event(3, "prune", r1, 0)])
    assert ctx.view().item_for(r1).parts[0].text == PRUNED_PLACEHOLDER  # type: ignore[union-attr]
