"""Opening a long stored session reads its messages only as they are shown: the screen state of a resumed
open is the one an eager load gives, row for row, while reading no message until a row asks for it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.helpers import FIXTURES_DIR
from workbench.engine.context.item_log import ItemLog
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import StoreError
from workbench.engine.plans.plan import PlanItem
from workbench.engine.plans.strategies.registry import enabled_plans
from workbench.engine.settings.config import Config
from workbench.engine.transcript import view_states
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.message_log import PAGE, MessageLog, PageReader
from workbench.engine.transcript.models import Message, Session, TextPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.tui.screen_state import ScreenState, StateKeeper

FIXTURE = "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"  # a compaction, sub-agents


def opened(tmp_path: Path) -> tuple[Store, SessionContext, SessionContext]:
    """A session imported, replayed once (which keeps its view state), then opened again."""
    store = Store(tmp_path / "w.db")
    session_id = import_file(store, FIXTURES_DIR / FIXTURE).session.id
    replayed = SessionContext.load(store, session_id)
    assert replayed.keep_view(store, view_states.revision(store, session_id))
    resumed = SessionContext.load(store, session_id)
    assert resumed.resumed_view and isinstance(resumed.messages, MessageLog)
    return store, replayed, resumed


def rows_of(state: ScreenState) -> list[tuple[object, ...]]:
    rows = state.rows
    return [(row.position, row.message, row.item, row.excluded, row.share, rows.tokens(i), rows.badges(i),
             rows.message_id(i), rows.index_of(row.message_id)) for i, row in ((i, rows.row(i)) for i in range(len(rows)))]


def calls_of(state: ScreenState) -> dict[str, object]:
    return {part.tool_use_id: state.rows.tool_calls.get(part.tool_use_id)
            for message in state.messages for part in message.parts if isinstance(part, ToolResultPart)}


def test_a_resumed_open_reads_no_message_until_a_row_asks(tmp_path: Path) -> None:
    _, _, resumed = opened(tmp_path)
    state = ScreenState.compute(resumed)
    log = resumed.messages
    assert log.lazy and log.pages_read == [], "the open, the budget, the rows' lookups and the timeline read none"
    assert state.rows.tokens(len(state.rows) - 1) >= -1 and log.pages_read == [], "tokens and badges read none"
    state.rows.row(len(state.rows) - 1)
    assert log.pages_read == [(len(log) - 1) // PAGE], "a row reads its page, and only it"


def test_a_resumed_open_shows_what_an_eager_one_shows(tmp_path: Path) -> None:
    _, replayed, resumed = opened(tmp_path)
    lazy, eager = ScreenState.compute(resumed), ScreenState.compute(replayed)
    assert isinstance(resumed.builder.items, ItemLog) and not isinstance(replayed.builder.items, ItemLog)
    assert calls_of(lazy) == calls_of(eager) and any(calls_of(eager).values())
    assert rows_of(lazy) == rows_of(eager)
    assert (lazy.budget, lazy.cost, lazy.timeline) == (eager.budget, eager.cost, eager.timeline)
    assert list(resumed.messages) == list(replayed.messages)
    assert resumed.view().items == replayed.view().items


def test_every_message_at_once_reads_each_page_left_once_and_plans_as_an_eager_open(tmp_path: Path) -> None:
    _, replayed, resumed = opened(tmp_path)
    log = resumed.messages
    first = log[len(log) - 1]  # the last page read before
    every = log.every()
    assert every == list(replayed.messages) and every[-1] is first
    pages = (len(log) - 1) // PAGE + 1
    assert sorted(log.pages_read) == list(range(pages)) and len(log.pages_read) == pages, "each page read once"
    assert log.every() == every and not log.lazy
    def plans(ctx: SessionContext) -> list[tuple[str, list[PlanItem]]]:  # an archive's digest has a new id each time
        return [(p.strategy, [i for i in p.items if i.action != "summary"])
                for p in enabled_plans(ctx, Config(), exact=False)]

    assert plans(resumed) == plans(replayed) and any(items for _, items in plans(replayed))


def test_a_call_is_found_before_its_message_is_read(tmp_path: Path) -> None:
    _, replayed, resumed = opened(tmp_path)
    result = next(p for m in reversed(replayed.messages) for p in m.parts if isinstance(p, ToolResultPart))
    call = ScreenState.compute(resumed).rows.tool_calls.get(result.tool_use_id)
    assert call == ScreenState.compute(replayed).rows.tool_calls.get(result.tool_use_id) and call is not None
    assert len(resumed.messages.pages_read) == 1, "the store found which message calls it: one page read"


def test_a_resumed_context_grows_and_changes_as_a_replayed_one(tmp_path: Path) -> None:
    _store, replayed, resumed = opened(tmp_path)
    keeper, eager_keeper = StateKeeper(), StateKeeper()
    keeper.state(resumed)
    eager_keeper.state(replayed)
    last = replayed.messages[-1]
    new = Message(id="live", session_id=last.session_id, index=last.index + 1, role="user",
                  parts=[TextPart(text="one more thing " * 20)])
    for ctx in (resumed, replayed):
        ctx.append(new)
    lazy, eager = keeper.state(resumed), eager_keeper.state(replayed)
    assert rows_of(lazy) == rows_of(eager) and lazy.rows.row(len(lazy.rows) - 1).message is new
    assert (lazy.budget, lazy.timeline) == (eager.budget, eager.timeline)


def test_pages_are_read_once_whichever_thread_asks_and_after_the_store_is_closed(tmp_path: Path) -> None:
    store, replayed, resumed = opened(tmp_path)
    store.close()
    log = resumed.messages
    seen: list[Message] = []
    threads = [threading.Thread(target=lambda: seen.append(log[0])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(message) for message in seen}) == 1 and seen[0] == replayed.messages[0]
    assert log.pages_read == [0]


def test_a_copy_of_the_log_shares_its_pages_read_or_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The screen state holds a copy of the engine's log: a page either of them reads is read once, and the
    same message objects are the same in both; what one appends stays its own."""
    _, _, resumed = opened(tmp_path)
    log = resumed.messages
    copy = log.copy()
    reads: list[int] = []
    read = PageReader.read
    monkeypatch.setattr(PageReader, "read", lambda self, ids, start: reads.append(start) or read(self, ids, start))
    first = log[0]
    assert copy[0] is first and copy[1] is log[1] and reads == [0], "the copy found the page the log read"
    last = copy[len(copy) - 1]
    assert log[len(log) - 1] is last and reads == [0, (len(log) - 1) // PAGE * PAGE], "and the other way round"
    added = first.model_copy(update={"id": "added", "index": first.index + 10**6})
    copy.append(added)
    assert len(copy) == len(log) + 1 and copy[len(log)] is added and added.id not in log.ids


def test_a_message_gone_from_the_store_is_a_clear_error(tmp_path: Path) -> None:
    store, _, resumed = opened(tmp_path)
    store.connection.execute("DELETE FROM messages WHERE id = ?", (resumed.messages.ids[0],))
    store.connection.commit()
    with pytest.raises(StoreError, match="no longer in .*reopen the session"):
        resumed.messages[0]


def test_a_call_whose_body_is_compressed_is_found_by_reading(tmp_path: Path) -> None:
    """The proxy stores long part bodies compressed: the store cannot search them, the log reads instead."""
    store = Store(tmp_path / "w.db")
    store.save_session(Session(id="s", source_format="proxy"))
    call = ToolUsePart(id="toolu_1", name="Read", input={"file_path": "a" * 400})
    messages = [Message(id=f"m{i}", session_id="s", index=i, role="assistant" if i == 1 else "user",
                        parts=[call] if i == 1 else [TextPart(text=f"hi {i}")]) for i in range(2 * PAGE)]
    store.save_messages(messages, TokenCounter(), compress_over=100)
    log = MessageLog.stored(store.connection, store.path, "s")
    assert log.find_call("toolu_1") == (1, call)
    assert log.find_call("toolu_missing") is None and not log.lazy


@pytest.mark.anyio
async def test_the_app_shows_a_resumed_session_reading_only_the_pages_it_draws(tmp_path: Path) -> None:
    """The list draws its screenful and the detail pane the selected message: neither reads the rest (the
    detail pane once read every page, to learn whether the session had tool calls at all)."""
    from tests.bench.incremental import SyntheticSession
    from tests.tui_fixtures import SIZE, settle
    from workbench.engine.context.view_state import KEEP_FROM
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.launch import Launch

    messages = SyntheticSession("long").take(KEEP_FROM + 8 * PAGE)  # long enough to keep its view state
    assert any(m.tool_uses() for m in messages)
    with Store(tmp_path / "w.db") as store:
        store.save_session(Session(id="long", title="long", model="claude-sonnet-4-5"))
        store.save_messages(messages, TokenCounter())
        SessionContext.load(store, "long")  # a long session's first load keeps its view state
    app = WorkbenchApp(Launch(db=tmp_path / "w.db", target="long"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        ctx = app.host.ctx
        assert ctx is not None and isinstance(ctx.messages, MessageLog) and ctx.messages.lazy
        assert len(ctx.messages.pages_read) <= 2, ctx.messages.pages_read
