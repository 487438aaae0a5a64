"""Compaction checkpoints (spec 001 §6's snapshots): written with every compaction, used to resume.

Resuming from a snapshot replays only the messages written after it, and gives exactly the view
a full replay gives — items, token counts, request, budget. A snapshot that no longer describes
the session (its compaction undone, an older change undone, a later change inside it) is not used.
"""

from __future__ import annotations

import json

import pytest
from compaction_helpers import (
    compact,
    filler,
    fingerprint,
    import_fixture,
    load,
    long_session,
    message_ids,
)
from helpers import COMPACTABLE, claude_fixture, sqlite_db

from workbench.engine.context.checkpoints import checkpoint_status
from workbench.engine.context.projection import ViewBuilder
from workbench.engine.context.session import SessionContext
from workbench.engine.plans import plan as plans
from workbench.engine.plans.compaction_history import undo_compaction
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.transcript.models import Message, TextPart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store


def _same(a: SessionContext, b: SessionContext) -> None:
    va, vb = a.view(), b.view()
    assert fingerprint(va) == fingerprint(vb)
    assert va.items == vb.items
    assert (va.compactions, va.requests, dict(va.excluded), va.estimate_source) == (
        vb.compactions, vb.requests, dict(vb.excluded), vb.estimate_source)
    assert a.budget() == b.budget()


def _more(store: Store, ctx: SessionContext, n: int = 2) -> None:
    extra = [Message(id=f"late{len(ctx.messages) + i}", session_id=ctx.session.id, index=len(ctx.messages) + i,
                     role="user" if i % 2 == 0 else "assistant", parts=[TextPart(text=filler(f"Late{i}", 80))])
             for i in range(n)]
    store.save_messages(extra, ctx.counter)


def test_a_compaction_writes_the_post_compaction_messages_and_token_count(store: Store) -> None:
    ctx = load(store, long_session(pins=(1,)).save(store))
    plan, result = compact(store, ctx)
    row = sqlite_db(store).execute("SELECT messages, token_count FROM snapshots WHERE session_id = ?",
                           [ctx.session.id]).fetchone()
    data = json.loads(row[0])
    assert row[1] == result.after_tokens
    assert [i["message_id"] for i in data["items"]] == message_ids(ctx.view())
    assert data["items"][0]["parts"][0]["text"] == plan.summary
    assert data["plan_id"] == plan.plan_id


@pytest.mark.parametrize("key", COMPACTABLE)
def test_resuming_loads_the_checkpoint_and_gives_the_full_view(store: Store, key: str) -> None:
    ctx = import_fixture(store, claude_fixture(key))
    plan, _ = compact(store, ctx)
    resumed = load(store, ctx.session.id, use_checkpoint=True)
    assert resumed.resumed_from == plan.plan_id
    full = load(store, ctx.session.id)
    assert full.resumed_from is None
    _same(resumed, full)


def test_resuming_replays_only_what_came_after_the_checkpoint(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = load(store, long_session(turns=16).save(store))
    compact(store, ctx)
    _more(store, ctx, 3)
    added: list[str] = []
    original = ViewBuilder.add

    def counting(self: ViewBuilder, message: Message) -> None:
        added.append(message.id)
        original(self, message)

    monkeypatch.setattr(ViewBuilder, "add", counting)
    resumed = load(store, ctx.session.id, use_checkpoint=True)
    assert added == [m.id for m in resumed.messages[-3:]]
    added.clear()
    full = load(store, ctx.session.id)
    assert len(added) == len(full.messages)
    _same(resumed, full)


def test_a_resumed_context_carries_on_like_a_full_one(store: Store) -> None:
    ctx = load(store, long_session(turns=14).save(store))
    compact(store, ctx)
    resumed, full = load(store, ctx.session.id, use_checkpoint=True), load(store, ctx.session.id)
    assert resumed.resumed_from
    late = Message(id="late", session_id=ctx.session.id, index=len(full.messages), role="user",
                   parts=[TextPart(text="and one more thing")])
    for c in (resumed, full):
        c.append(late)
    _same(resumed, full)
    pin = OverlayEvent(id="pin-late", session_id=ctx.session.id, plan_id="pin-late", action="pin",
                       message_id="late", origin="user")
    for c in (resumed, full):
        c.apply_events([pin])
    _same(resumed, full)


def test_undone_compaction_or_later_change_inside_it_stops_the_checkpoint_being_used(store: Store) -> None:
    ctx = load(store, long_session(turns=14).save(store))
    plan, _ = compact(store, ctx)
    _more(store, ctx)
    assert checkpoint_status(store, ctx.session.id)[1] is None
    undo_compaction(store, load(store, ctx.session.id))
    snapshot, reason = checkpoint_status(store, ctx.session.id)
    assert snapshot is not None and "undone" in (reason or "")
    resumed = load(store, ctx.session.id, use_checkpoint=True)
    assert resumed.resumed_from is None
    _same(resumed, load(store, ctx.session.id))
    plans.redo(store, load(store, ctx.session.id))
    assert load(store, ctx.session.id, use_checkpoint=True).resumed_from == plan.plan_id
    tail_message = plan.tail[-1]
    store.add_overlay_events([OverlayEvent(id="late-pin", session_id=ctx.session.id, plan_id="late-pin",
                                           action="pin", message_id=tail_message, origin="user")])
    assert "inside the checkpoint" in (checkpoint_status(store, ctx.session.id)[1] or "")
    resumed = load(store, ctx.session.id, use_checkpoint=True)
    assert resumed.resumed_from is None
    _same(resumed, load(store, ctx.session.id))


def test_each_compaction_replaces_the_checkpoint(store: Store) -> None:
    ctx = load(store, long_session(turns=14).save(store))
    compact(store, ctx, config=CompactionConfig(tail_max=2_000))
    _more(store, ctx, 6)
    ctx = load(store, ctx.session.id)
    second, _ = compact(store, ctx, config=CompactionConfig(tail_max=2_000))
    assert sqlite_db(store).execute("SELECT COUNT(*) FROM snapshots").fetchone()[0] == 1
    resumed = load(store, ctx.session.id, use_checkpoint=True)
    assert resumed.resumed_from == second.plan_id
    _same(resumed, load(store, ctx.session.id))


def test_an_unreadable_checkpoint_falls_back_to_the_full_history(store: Store) -> None:
    ctx = load(store, long_session().save(store))
    compact(store, ctx)
    sqlite_db(store).execute("UPDATE snapshots SET messages = ? WHERE session_id = ?", ['{"version": 1}', ctx.session.id])
    snapshot, reason = checkpoint_status(store, ctx.session.id)
    assert snapshot is None and "cannot be read" in (reason or "")
    resumed = load(store, ctx.session.id, use_checkpoint=True)
    assert resumed.resumed_from is None
    _same(resumed, load(store, ctx.session.id))
