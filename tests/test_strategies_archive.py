"""Archiving old tool results behind one digest (spec 003), and manual pin / unpin."""

from __future__ import annotations

import pytest
from test_strategies_common import Transcript, big, event, strategies

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply, measure, trial
from workbench.engine.plans.plan import Plan, history, redo, undo
from workbench.engine.plans.strategies.archive import DIGEST_HEADER, clip, digest, digest_line, plan_archive
from workbench.engine.plans.strategies.base import SessionIndex
from workbench.engine.plans.strategies.manual import find_message, plan_action, plan_pin, plan_unpin
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import TextPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store


def _calls(n: int, *, usage: bool = False) -> tuple[Transcript, list[tuple[str, str]]]:
    t = Transcript(usage=usage)
    t.user("do many things")
    pairs = []
    for k in range(n):
        call, result, _ = t.call("Bash", {"command": f"step {k}"}, big(f"output {k}", 200))
        pairs.append((call, result))
    t.say()
    return t, pairs


def trial_wire(ctx: SessionContext, plan: Plan) -> tuple[object, ...]:
    return trial(ctx, plan).view().wire


def _pairs_whole(wire: tuple[object, ...]) -> bool:
    uses: list[str] = []
    results: list[str] = []
    for message in wire:
        for block in message["content"]:  # type: ignore[index]
            if block["type"] == "tool_use":
                uses.append(block["id"])
            elif block["type"] == "tool_result":
                results.append(block["tool_use_id"])
    return sorted(uses) == sorted(results)


@pytest.mark.parametrize(("visible", "archived"), [(10, 0), (11, 1), (12, 2)])
def test_cutoff_boundary(visible: int, archived: int) -> None:
    t, pairs = _calls(visible)
    plan = plan_archive(t.context(), StrategiesConfig())
    archived_ids = [i.message_id for i in plan.items if i.action == "archive"]
    assert archived_ids == [m for pair in pairs[:archived] for m in pair]
    assert [i.action for i in plan.items].count("summary") == (1 if archived else 0)


def test_archive_hides_the_oldest_pairs_behind_one_digest(store: Store) -> None:
    t, pairs = _calls(13, usage=True)
    ctx = t.stored(store)
    before_view = ctx.view()
    before = ctx.budget().used
    plan = measure(ctx, plan_archive(ctx, StrategiesConfig()))
    added = apply(store, ctx, plan)
    assert len(added) == 1
    digest = added[0]
    assert (digest.role, digest.kind, digest.agent_visible, digest.user_visible) == ("user", "tool_summary", True, False)
    assert digest.source["archive_plan"] == plan.plan_id
    text = digest.text
    assert text.startswith(DIGEST_HEADER) and "3 older tool results" in text and "Bash(command=step 0)" in text
    view = ctx.view()
    for call, result in pairs[:3]:
        assert view.excluded[call] == view.excluded[result] == "archived"
    assert view.item_for(digest.id) is not None
    assert sum(isinstance(p, ToolResultPart) for i in view.items for p in i.parts) == 10
    assert _pairs_whole(view.wire)
    after = ctx.budget().used
    assert before - after == plan.tokens_saved > 0  # the reported usage no longer hides the archived messages
    assert sum(i.tokens_saved for i in plan.items) == plan.tokens_saved
    assert store.load_messages("s")[: len(t.messages)] == t.messages  # the transcript is untouched

    entry = undo(store, ctx)
    assert entry.plan_id == plan.plan_id
    assert ctx.view().excluded[digest.id] == "undone-summary"
    assert ctx.view().items == before_view.items and ctx.view().wire == before_view.wire
    assert ctx.budget().used == before
    redo(store, ctx)
    assert ctx.view().item_for(digest.id) is not None and ctx.budget().used == after


def test_parallel_calls_are_archived_together() -> None:
    t = Transcript()
    t.user("go")
    call, results, _ = t.calls([("Read", {"file_path": "a"}, big("a")), ("Read", {"file_path": "b"}, big("b"))])
    for k in range(9):
        t.call("Bash", {"command": f"later {k}"}, big("later"))
    plan = plan_archive(t.context(), StrategiesConfig())  # 11 visible: the pair of two goes, leaving 9
    assert [i.message_id for i in plan.items if i.action == "archive"] == [call, results]
    assert "2 older tool results" in plan.items[-1].data["new_message"]["text"]


def test_unclean_and_pinned_pairs_are_skipped() -> None:
    t = Transcript()
    t.user("go")
    _pinned_call, pinned_result, _ = t.call("Bash", {"command": "pinned"}, big("p"))
    _mixed_call, _mixed_result, _ = t.call("Bash", {"command": "mixed"}, big("m"))
    t.messages[-1] = t.messages[-1].model_copy(
        update={"parts": [*t.messages[-1].parts, TextPart(text="and a user remark")]})
    clean_call, clean_result, _ = t.call("Bash", {"command": "clean"}, big("c"))
    for k in range(8):
        t.call("Bash", {"command": f"more {k}"}, big("x"))
    plan = plan_archive(t.context([event(1, "pin", pinned_result)]), StrategiesConfig())  # 11 visible
    assert [i.message_id for i in plan.items if i.action == "archive"] == [clean_call, clean_result]


def test_a_reused_tool_id_never_splits_a_pair() -> None:
    """A replayed script (a run resumed after a kill) uses the same tool ids again: the newest result of an id
    answers only the newest call of it, so the older call and its result stay together in view."""
    t, pairs = _calls(3)
    replay = Transcript()
    replay.user("again")
    replay.call("Bash", {"command": "replayed"}, big("replayed", 200))  # toolu_0000, as the first call
    t.messages += [m.model_copy(update={"id": f"r{m.id}", "index": len(t.messages) + k})
                   for k, m in enumerate(replay.messages)]
    for k in range(10):
        t.call("Bash", {"command": f"later {k}"}, big("later", 200))
    ctx = t.context()
    plan = plan_archive(ctx, strategies(archive={"cutoff": 12}))  # 14 visible: two go
    archived = [i.message_id for i in plan.items if i.action == "archive"]
    assert pairs[0][0] not in archived and pairs[0][1] not in archived
    assert archived == [*pairs[1], *pairs[2]]
    after = measure(ctx, plan)
    assert _pairs_whole(trial_wire(ctx, after))


def test_nothing_is_archived_while_calls_are_in_flight() -> None:
    t, _ = _calls(12)
    t.messages.pop()  # the closing reply
    t.call("Bash", {"command": "running"}, "…")
    t.messages.pop()  # its result is not there yet
    assert not plan_archive(t.context(), StrategiesConfig()).items


def test_the_digest_is_clipped_head_and_tail() -> None:
    t, _ = _calls(40)
    plan = plan_archive(t.context(), strategies(archive={"cutoff": 2, "max_chars": 300}))
    text = plan.items[-1].data["new_message"]["text"]
    assert len(text) == 300 and "digest clipped" in text
    assert text.startswith(DIGEST_HEADER) and "step 37" in text  # the tail: the newest archived call


def test_archiving_disabled_by_a_large_cutoff() -> None:
    t, _ = _calls(20)
    assert not plan_archive(t.context(), strategies(archive={"cutoff": 20})).items


# --- pin / unpin ([PERSIST], spec 000 §1) ------------------------------------------------------------


def test_pin_and_unpin_as_plans_keep_transcript_order(store: Store) -> None:
    t, pairs = _calls(3)
    ctx = t.stored(store)
    ids = [pairs[2][0], pairs[0][0], "m0000"]
    plan = measure(ctx, plan_pin(ctx, ids))
    assert plan.origin == "user" and plan.tokens_saved == 0
    assert [i.message_id for i in plan.items] == ["m0000", pairs[0][0], pairs[2][0]]
    apply(store, ctx, plan)
    assert ctx.overlay.pinned == set(ids)
    assert not plan_pin(ctx, ids).items  # already pinned
    assert all("PERSIST" in ctx.view().item_for(m).badges for m in ids)  # type: ignore[union-attr]
    unpin = plan_unpin(ctx, [pairs[0][0], pairs[1][0]])
    assert [i.message_id for i in unpin.items] == [pairs[0][0]]
    apply(store, ctx, unpin)
    assert ctx.overlay.pinned == {"m0000", pairs[2][0]}
    undo(store, ctx)
    assert ctx.overlay.pinned == set(ids)
    assert [e.origin for e in history(ctx)] == ["user", "user"]


def test_find_message_by_id_or_position() -> None:
    t, pairs = _calls(2)
    ctx = t.context()
    assert find_message(ctx, pairs[0][0]).id == pairs[0][0]
    assert find_message(ctx, "1").id == "m0000"
    assert find_message(ctx, str(len(t.messages))).id == t.messages[-1].id
    for bad in ("0", str(len(t.messages) + 1), "nope"):
        with pytest.raises(Exception, match="no message"):
            find_message(ctx, bad)


def test_manual_prune_of_a_write_prunes_its_input(store: Store) -> None:
    t = Transcript()
    t.user("go")
    write, _result, _ = t.call("Write", {"file_path": "a.py", "content": big("code")}, "ok")
    ctx = t.stored(store)
    plan = plan_action(ctx, "prune", find_message(ctx, write), StrategiesConfig())
    assert [(i.message_id, i.part_index) for i in plan.items] == [(write, 0)]
    apply(store, ctx, measure(ctx, plan))
    shown = ctx.view().item_for(write).parts[0]  # type: ignore[union-attr]
    assert isinstance(shown, ToolUsePart) and shown.input["file_path"] == "a.py"
    restore = measure(ctx, plan_action(ctx, "restore", find_message(ctx, write), StrategiesConfig()))
    apply(store, ctx, restore)
    assert ctx.view().item_for(write).parts[0] == t.messages[1].parts[0]  # type: ignore[union-attr]


@pytest.mark.parametrize("calls", [11, 14, 25, 60])
@pytest.mark.parametrize("limit", [120, 300, 800])
def test_the_digest_is_the_clipped_whole(calls: int, limit: int) -> None:
    """Only the lines that can show are written, yet the digest is the whole list clipped head and tail."""
    t, _ = _calls(calls)
    results = SessionIndex.build(t.context()).results
    header = digest(results, 100_000).split("\n")[0]
    whole = "\n".join([header, *(digest_line(r) for r in results)])
    assert digest(results, limit) == clip(whole, limit)
