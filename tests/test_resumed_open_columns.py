"""A resumed open takes what it needs of every message from the stored view state's columns (ids, order, the
cost of each request) and works out the rest in bulk; it shows exactly what a replayed open shows, including
what it reads late (the messages' times, placing a dated drop on the timeline) and after its items change."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tests.helpers import FIXTURES_DIR
from workbench.engine.context import view_state
from workbench.engine.context.item_log import ItemLog, StoredItems
from workbench.engine.context.projection import ContextItem
from workbench.engine.context.request_log import RequestLog
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript import view_states
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.message_log import MessageLog
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.tui.screen_state import ScreenState
from workbench.tui.widgets.row_lookups import ItemIndex
from workbench.tui.widgets.rows import Positions

FIXTURE = "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"  # a compaction, sub-agents


def imported(tmp_path: Path) -> tuple[Store, str]:
    store = Store(tmp_path / "w.db")
    return store, import_file(store, FIXTURES_DIR / FIXTURE).session.id


def replayed_and_resumed(store: Store, session_id: str) -> tuple[SessionContext, SessionContext]:
    replayed = SessionContext.load(store, session_id)
    assert not replayed.resumed_view and replayed.keep_view(store, view_states.revision(store, session_id))
    resumed = SessionContext.load(store, session_id)
    assert resumed.resumed_view and isinstance(resumed.messages, MessageLog) and resumed.messages.lazy
    return replayed, resumed


def test_a_resumed_open_reads_no_row_of_the_messages_table(tmp_path: Path) -> None:
    store, session_id = imported(tmp_path)
    replayed = SessionContext.load(store, session_id)
    assert replayed.keep_view(store, view_states.revision(store, session_id))
    statements: list[str] = []
    store.connection.set_trace_callback(statements.append)
    resumed = SessionContext.load(store, session_id)
    store.connection.set_trace_callback(None)
    assert resumed.resumed_view
    scans = [s for s in statements if "FROM messages" in s and "COUNT(*)" not in s and "LIMIT 1" not in s]
    assert scans == [], "ids and order come from the view state; only a count and two ids are checked"
    assert resumed.messages.ids == replayed.messages.ids
    assert isinstance(resumed.messages, MessageLog) and resumed.messages.order() == [m.index for m in replayed.messages]


def test_a_state_of_other_messages_as_many_is_not_resumed(tmp_path: Path) -> None:
    """The state's last id is not the store's: the open replays (and does not trust the state's ids)."""
    store, session_id = imported(tmp_path)
    ctx = SessionContext.load(store, session_id)
    body = view_state.capture(ctx.builder, ctx.messages)
    assert body is not None
    last = ctx.messages.ids[-1]
    body = body.replace(f'"{last}"'.encode(), f'"{"x" * len(last)}"'.encode())
    key = view_state.state_key(ctx.session, ctx.fixed_items)
    assert view_states.save(store, session_id, view_states.revision(store, session_id), key, body)
    reopened = SessionContext.load(store, session_id)
    assert not reopened.resumed_view and reopened.messages.ids == ctx.messages.ids


def test_a_dated_drop_is_placed_alike_resumed_or_replayed(tmp_path: Path) -> None:
    """A prune placed by its time: the resumed open reads its messages' times (one column) only for it."""
    store, session_id = imported(tmp_path)
    messages = store.load_messages(session_id)
    target = next(m for m in messages[len(messages) // 2:] if any(isinstance(p, ToolResultPart) for p in m.parts))
    part = next(i for i, p in enumerate(target.parts) if isinstance(p, ToolResultPart))
    assert target.created_at is not None
    store.add_overlay_events([OverlayEvent(id="e1", session_id=session_id, plan_id="p1", action="prune",
                                           message_id=target.id, part_index=part, tokens_saved=40,
                                           created_at=target.created_at + timedelta(seconds=1))])
    replayed, resumed = replayed_and_resumed(store, session_id)
    lazy, eager = ScreenState.compute(resumed), ScreenState.compute(replayed)
    assert any(drop.kind == "prune" for drop in eager.timeline.drops)
    assert lazy.timeline == eager.timeline
    assert isinstance(resumed.messages, MessageLog) and resumed.messages.pages_read == [], "times, not messages"


def test_the_cost_restored_as_columns_is_the_cost_added_up(tmp_path: Path) -> None:
    store, session_id = imported(tmp_path)
    replayed, resumed = replayed_and_resumed(store, session_id)
    lazy, eager = resumed.cost(), replayed.cost()
    assert lazy == eager and hash(lazy) == hash(eager) and len(lazy.requests) > 2
    assert list(lazy.requests) == list(eager.requests) and lazy.requests[-1] == eager.requests[-1]
    assert lazy.requests[1:3] == eager.requests[1:3]
    assert (lazy.label, lazy.short, lazy.last) == (eager.label, eager.short, eager.last)


def test_the_requests_resumed_as_columns_are_made_when_read_and_read_as_replayed(tmp_path: Path) -> None:
    """Resuming makes no request; one at a time, in bulk by field, sliced or with one made since, the requests
    read as a replay made them; the screen state's timeline made from their columns is the replay's."""
    store, session_id = imported(tmp_path)
    replayed, resumed = replayed_and_resumed(store, session_id)
    made: list[int] = []
    requests = resumed.builder.estimator.requests
    assert isinstance(requests, RequestLog) and len(requests) > 2
    stored = requests._stored
    assert stored is not None
    original = stored.request
    stored.request = lambda index: made.append(index) or original(index)  # type: ignore[method-assign]
    lazy, eager = ScreenState.compute(resumed), ScreenState.compute(replayed)
    assert made == [] and lazy.timeline == eager.timeline
    replay = list(replayed.builder.estimator.requests)
    assert requests == replay and list(requests) == replay and requests[1:3] == replay[1:3]
    assert requests[-1] == replay[-1] and made[-1] == len(replay) - 1
    for name in ("message_id", "model", "anchor_input_tokens", "anchorless", "cache_read_input_tokens"):
        assert requests.field(name) == [getattr(r, name) for r in replay]
    newer = replace(replay[-1], message_id="later")
    requests.append(newer)
    assert requests[-1] == newer and requests.field("message_id")[-1] == "later" and len(requests) == len(replay) + 1
    assert requests != replay and resumed.view().requests == (*replay, newer)


def test_the_item_index_reads_a_resumed_view_in_bulk_and_its_changes_one_by_one(tmp_path: Path) -> None:
    store, session_id = imported(tmp_path)
    _, resumed = replayed_and_resumed(store, session_id)
    items = resumed.builder.items
    assert isinstance(items, ItemLog) and items.untouched == len(items)
    ids = list(resumed.messages.ids)
    extra = [ContextItem(kind="message", tokens=n, components={"text": n}, message_id=f"new-{n}") for n in range(4)]
    position = {message_id: at for at, message_id in enumerate([*ids, *(item.message_id for item in extra)])}
    bulk = ItemIndex(items, position.get)  # the resumed rows, by their messages' positions
    assert len(bulk) == len(items) and dict(bulk) == {items.message_id(i): items[i] for i in range(len(items))}
    assert all(bulk.item(bulk.slot_at(position[m], m)) is bulk[m] for m in ids if m in bulk)
    for change in (lambda: items.insert(len(items), extra[0]), lambda: items.insert(-5, extra[1]),
                   lambda: items.__setitem__(7, extra[2]), lambda: items.__delitem__(slice(3, 1, -1)),
                   lambda: items.insert(0, extra[3])):
        change()
        index = ItemIndex(items, position.get)
        expected = {items.message_id(i): items[i] for i in range(len(items)) if items.message_id(i) is not None}
        assert dict(index) == expected
        assert all(index.tokens(message_id) == item.tokens for message_id, item in expected.items())
        assert items.untouched <= len(items) and all(items.slot(i) == i for i in range(items.untouched))
    assert items.untouched == 0


def test_a_resumed_screen_state_makes_no_entry_per_message_and_looks_rows_up_as_a_replay(tmp_path: Path) -> None:
    """A resumed view's rows are found by their messages' positions: the screen state makes neither the map of
    positions nor an item index entry per message; its rows, tokens, badges and positions are the replay's."""
    store, session_id = imported(tmp_path)
    replayed, resumed = replayed_and_resumed(store, session_id)
    lazy, eager = ScreenState.compute(resumed), ScreenState.compute(replayed)
    table = lazy.rows.table
    assert table.positions._map is None and not table.items._where  # nothing made per message yet
    assert lazy.timeline == eager.timeline
    count = len(eager.rows)
    for index in (0, 1, count // 2, count - 1):
        assert lazy.rows.row(index) == eager.rows.row(index)
    assert table.positions._map is None  # rows on screen are looked up by position
    ItemIndex.SCATTER_AFTER, was = 8, ItemIndex.SCATTER_AFTER  # a sort of every row: position -> row made once
    try:
        assert [lazy.rows.tokens(i) for i in range(count)] == [eager.rows.tokens(i) for i in range(count)]
        assert [lazy.rows.badges(i) for i in range(count)] == [eager.rows.badges(i) for i in range(count)]
        assert table.items._row_at is not None
    finally:
        ItemIndex.SCATTER_AFTER = was
    last = eager.rows.message_id(count - 1)
    assert lazy.rows.index_of(last) == eager.rows.index_of(last) == count - 1  # the map, made when asked
    assert dict(table.items) == dict(eager.rows.table.items)


def test_positions_are_looked_for_then_mapped_and_grow_either_way() -> None:
    ids = [f"m{n}" for n in range(20)]
    positions = Positions(ids, 10)  # a table of the first ten
    assert [positions.get(f"m{n}") for n in (0, 9, 10, 19)] == [0, 9, None, None]  # scans: the map is not made
    assert positions._map is None
    positions.grow(ids[10:15], 10)
    assert positions.get("m14") == 14 and positions.get("m15") is None
    for _ in range(Positions.SCANS):
        positions.get("m3")
    assert positions._map is not None and positions.get("m12") == 12  # made, with what grew before
    positions.grow(ids[15:], 15)
    assert [positions.get(message_id) for message_id in ids] == list(range(20)) and positions.get("x") is None


def test_stored_rows_out_of_transcript_order_are_indexed_one_by_one() -> None:
    """A view that holds a message before an earlier one (a summary placed first) is not looked up by
    bisection: its rows are entered by id, and every one is found."""
    ids = ["a", "b", "c"]
    messages = [Message(id=m, session_id="s", index=n, role="user", parts=[TextPart(text=m)]) for n, m in enumerate(ids)]
    for at, bulk in (([0, 1, 2], True), ([2, 0, 1], False)):
        stored = StoredItems(messages, ids, at, [0, 0, 0], [10, 20, 30], [10, 20, 30], [10, 20, 30],
                             [(("text",), ())], lambda message: tuple(message.parts), dict)
        index = ItemIndex(ItemLog(stored), {m: n for n, m in enumerate(ids)}.get)
        assert bool(index._bulk) is bulk and bool(index._where) is not bulk
        assert {m: index.tokens(m) for m in ids} == {ids[a]: tokens for a, tokens in zip(at, (10, 20, 30))}
        assert [index.tokens_of(index.slot_at(n, m)) for n, m in enumerate(ids)] == [index.tokens(m) for m in ids]
