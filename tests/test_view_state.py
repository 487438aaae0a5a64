"""A session resumed from its stored view state shows exactly what a replay of its messages shows: the
same items, totals, estimate and request history; after an overlay change and after new messages too."""

from __future__ import annotations

import sqlite3
from array import array
from pathlib import Path

import pytest

from tests.helpers import FIXTURES_DIR, short_message, store_short_session
from workbench.engine.context import view_state
from workbench.engine.context.projection import ViewBuilder
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript import view_states
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.migrations import MIGRATIONS
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

FIXTURES = [
    "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl",  # a compaction, sub-agents
    "claude-code__marot__spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",  # two models, a compaction
    "opencode__victoryforphil__dark-factory__session__curious-sailor__ses_39b7f9e89ffe7J0WzLzYrUt4eW.json",
    "codex__codemie-ai__codemie-code__rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
]


def shown(ctx: SessionContext) -> tuple[object, ...]:
    """Every number a user sees of a context, and what a request would carry."""
    view = ctx.view()
    return (view.items, view.requests, view.compactions, dict(view.excluded), view.estimate_source,
            view.cache_hit_rate, view.model, ctx.budget(), ctx.builder.estimate(), ctx.builder.steered(),
            dict(ctx.builder.totals), ctx.builder.calibrator, view.wire, ctx.builder.state())


def imported(tmp_path: Path, name: str) -> tuple[Store, str]:
    store = Store(tmp_path / "w.db")
    result = import_file(store, FIXTURES_DIR / name)
    return store, result.session.id


def kept(store: Store, session_id: str) -> SessionContext:
    """A replayed load whose state is then kept, as a long session's load keeps it."""
    ctx = SessionContext.load(store, session_id)
    assert not ctx.resumed_view
    assert ctx.keep_view(store, view_states.revision(store, session_id))
    return ctx


@pytest.mark.parametrize("name", FIXTURES)
def test_a_resumed_open_equals_a_replayed_one(tmp_path: Path, name: str) -> None:
    store, session_id = imported(tmp_path, name)
    replayed = kept(store, session_id)
    resumed = SessionContext.load(store, session_id)
    assert resumed.resumed_view
    assert shown(resumed) == shown(replayed)


def test_items_with_the_same_components_share_one_mapping_replayed_or_resumed(tmp_path: Path) -> None:
    """A long session repeats a few thousand distinct components among all its items: one mapping each,
    whether the view was replayed or resumed (and the numbers are those of a mapping per item)."""
    store, session_id = imported(tmp_path, FIXTURES[1])
    for ctx in (kept(store, session_id), SessionContext.load(store, session_id)):
        items = [item for item in ctx.view().items if item.kind == "message"]
        distinct = {id(item.components) for item in items}
        contents = {tuple(item.components.items()) for item in items}
        assert len(distinct) == len(contents) < len(items)
        assert all(item.tokens == sum(item.components.values()) for item in items)


@pytest.mark.parametrize("name", FIXTURES[:3])
def test_after_an_overlay_change_the_open_replays_and_a_resumed_context_follows_it(tmp_path: Path, name: str) -> None:
    store, session_id = imported(tmp_path, name)
    kept(store, session_id)
    resumed = SessionContext.load(store, session_id)
    assert resumed.resumed_view
    target = next(m for m in reversed(resumed.messages) if any(isinstance(p, ToolResultPart) for p in m.parts))
    position = next(i for i, p in enumerate(target.parts) if isinstance(p, ToolResultPart))
    prune = OverlayEvent(id="e-prune", session_id=session_id, plan_id="p1", action="prune", message_id=target.id,
                         part_index=position, reason="test")
    resumed.apply_events([prune])  # in memory, as the app applies a plan
    store.add_overlay_events([prune])
    reopened = SessionContext.load(store, session_id)
    assert not reopened.resumed_view, "the stored state describes the session before the change"
    assert shown(resumed) == shown(reopened)
    # Kept again, the state holds the change (dated, in the estimator): resumed, it goes on as a replay does.
    assert reopened.keep_view(store, view_states.revision(store, session_id))
    again = SessionContext.load(store, session_id)
    assert again.resumed_view
    if name != FIXTURES[2]:  # there the compaction summary comes last: it restarts the estimate after the change
        assert again.builder.estimator.state()["changes"]
    assert shown(again) == shown(reopened)
    reply = Message(id="live-reply", session_id=session_id, index=resumed.messages[-1].index + 1, role="user",
                    parts=[TextPart(text="after the change " * 20)])
    again.append(reply)
    reopened.append(reply)
    assert shown(again) == shown(reopened)


@pytest.mark.parametrize("name", FIXTURES[:3])
def test_new_messages_continue_a_resumed_context_as_a_replayed_one(tmp_path: Path, name: str) -> None:
    store, session_id = imported(tmp_path, name)
    replayed = kept(store, session_id)
    resumed = SessionContext.load(store, session_id)
    assert resumed.resumed_view
    last = replayed.messages[-1]
    usage = next(m.usage for m in reversed(replayed.messages) if m.usage is not None and m.role == "assistant")
    new = [
        Message(id="live-user", session_id=session_id, index=last.index + 1, role="user",
                parts=[TextPart(text="and one more thing " * 30)]),
        Message(id="live-reply", session_id=session_id, index=last.index + 2, role="assistant", model=last.model,
                parts=[TextPart(text="done " * 50)],
                usage=usage.model_copy(update={"input_tokens": usage.input_tokens + 900}) if usage else None),
    ]
    for message in new:
        replayed.append(message)
        resumed.append(message)
        assert shown(resumed) == shown(replayed)
    store.save_messages(new, TokenCounter())
    reopened = SessionContext.load(store, session_id)
    assert not reopened.resumed_view, "stored messages move the revision on: the stored state is stale"
    assert shown(reopened) == shown(replayed)


def test_a_state_of_other_fixed_items_or_other_messages_is_not_resumed(tmp_path: Path) -> None:
    store, session_id = imported(tmp_path, FIXTURES[0])
    ctx = kept(store, session_id)
    body = view_state.capture(ctx.builder, [*ctx.messages, short_message(session_id, 10**6)])  # one more read
    assert body is not None
    key = view_state.state_key(ctx.session, ctx.fixed_items)
    assert view_states.save(store, session_id, view_states.revision(store, session_id), key, body)
    assert not SessionContext.load(store, session_id).resumed_view
    # The session moved on between reading its messages and keeping what they gave: nothing is kept.
    stale = view_states.revision(store, session_id)
    store.save_messages([short_message(session_id, len(ctx.messages) + 5)], TokenCounter())
    assert not ctx.keep_view(store, stale)


def test_long_sessions_keep_their_state_when_a_load_replays_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "w.db")
    store_short_session(store, "s1", count=12)
    monkeypatch.setattr(view_state, "KEEP_FROM", 10)
    first = SessionContext.load(store, "s1")
    second = SessionContext.load(store, "s1")
    assert (first.resumed_view, second.resumed_view) == (False, True)
    assert shown(first) == shown(second)
    monkeypatch.setattr(view_state, "KEEP_FROM", 100)
    store_short_session(store, "s2", count=12)
    SessionContext.load(store, "s2")
    assert not SessionContext.load(store, "s2").resumed_view, "a short session is replayed, nothing kept"


def test_a_database_of_the_previous_schema_gains_the_view_state_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        for version in (1, 2, 3):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (3)")
    conn.close()
    with Store(path) as store:
        assert store.schema_version() == max(MIGRATIONS)
        store_short_session(store, "old", count=3)
        ctx = SessionContext.load(store, "old")
        assert ctx.keep_view(store, view_states.revision(store, "old"))
        assert SessionContext.load(store, "old").resumed_view


def test_columns_kept_beside_a_state_come_back_in_place_floats_as_floats(tmp_path: Path) -> None:
    """What a context keeps per message beside the state (its costs) is columns, read back without parsing."""
    store, session_id = imported(tmp_path, FIXTURES[0])
    ctx = SessionContext.load(store, session_id)
    columns = {"cost": {"usd": array("d", [0.5, 1e-9, 3.25]), "at": array("q", [0, 2, 7])}}
    body = view_state.capture(ctx.builder, ctx.messages, {"cost": {"total": 3.75}}, columns)
    assert body is not None
    fresh = ViewBuilder(session_id, ctx.overlay, ctx.counter, None, ctx.session.model, ctx.fixed_items)
    kept = view_state.resume(fresh, view_state.Stored(body), ctx.messages)
    assert kept is not None and kept["cost"] == {"total": 3.75}
    back = kept["columns"]["cost"]
    assert back["usd"].tolist() == [0.5, 1e-9, 3.25] and back["at"].tolist() == [0, 2, 7]
    with pytest.raises(ValueError, match="8-byte"):
        view_state.capture(ctx.builder, ctx.messages, {}, {"cost": {"flags": array("b", [1])}})


@pytest.mark.parametrize(("values", "code"), [
    ([-128, 127], "b"), ([128], "h"), ([-32769], "i"), ([2**31 - 1], "i"), ([-(2**31) - 1], "q"), ([], "q"),
])
def test_a_column_is_kept_in_the_smallest_type_that_holds_it(values: list[int], code: str) -> None:
    column = view_state.narrowed(array("q", values))
    assert column.typecode == code and column.tolist() == values
    assert view_state.narrowed(array("d", [1.5])).typecode == "d"


def test_a_kept_state_is_read_back_in_its_columns_types(tmp_path: Path) -> None:
    store, session_id = imported(tmp_path, FIXTURES[0])
    replayed = kept(store, session_id)
    body = view_states.load(store, session_id, view_state.state_key(replayed.session, replayed.fixed_items))
    assert body is not None
    stored = view_state.Stored(body[1])
    assert {column.format for column in stored.columns.values()} >= {"b", "h", "d"}
    assert stored.columns["item_tokens"].tolist() == [item.tokens for item in replayed.builder.items]
