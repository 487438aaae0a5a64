"""The view state of a session just imported, kept by the import so that its first open resumes from it.

An import has just stored every message with its token counts; left to itself, the first open would read them
all back, replay them through the projection and the estimator, and keep the state it reached
(:meth:`SessionContext.keep_view`), before it shows a row. :func:`keep_imported_view` does that replay at the
end of the import instead, a batch at a time, holding neither the messages nor the parts of the items it makes
(what :mod:`view_state` keeps of an item is its tokens, components and badges): the import's memory stays what
it was, and the open that follows reads only the kept state. The state is the one a full load keeps, byte for
byte (``tests/test_import_state.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from workbench.engine.context import view_state
from workbench.engine.context.pricing import CostTally
from workbench.engine.context.projection import ViewBuilder
from workbench.engine.context.session import recorded_items, reported_input, stored_items
from workbench.engine.transcript import view_states
from workbench.engine.transcript.message_log import MessageLog
from workbench.engine.transcript.message_rows import read_messages
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.overlay import fold
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

BATCH = 2_000
"""Messages read back at a time."""


def keep_imported_view(store: Store, session_id: str, minimum: int = view_state.KEEP_FROM) -> bool:
    """Keep the view state of a long stored session (``minimum`` messages or more: a load keeps one from
    :data:`view_state.KEEP_FROM`), as its first load would; False when none is kept (a short session, a
    database in memory or damaged, or the session moved on while it was worked out)."""
    if str(store.path) == ":memory:" or store.writes_refused is not None:
        return False
    if store.message_count(session_id) < minimum:
        return False
    session = store.get_session(session_id)
    revision = view_states.revision(store, session_id)
    counter = TokenCounter()
    fixed = tuple(stored_items(store, session, counter)) or recorded_items(session, counter)
    builder = ViewBuilder(session.id, fold(store.load_overlay(session_id)), counter, None, session.model, fixed)
    log = MessageLog.stored(store.connection, store.path, session_id)
    cost, peak = CostTally(), 0
    for message in _batches(store, session_id, log.order()):
        builder.add(message)
        items = builder.items
        if items and items[-1].message_id == message.id and items[-1].parts:
            items[-1] = dataclasses.replace(items[-1], parts=())  # the state keeps no part: let the message go
        cost.add(message)
        peak = max(peak, reported_input(message))
    cost_state, cost_columns = cost.state(view_state.positions(log.ids))
    body = view_state.capture_chunks(builder, log, {"cost": cost_state, "peak_input": peak}, {"cost": cost_columns})
    if body is None:
        return False
    return view_states.save(store, session_id, revision, view_state.state_key(session, fixed), body)


def _batches(store: Store, session_id: str, order: list[int]) -> Iterator[Message]:
    """The session's messages in order, read :data:`BATCH` at a time (``order``: their ``idx`` by position)."""
    for start in range(0, len(order), BATCH):
        low, high = order[start], order[min(start + BATCH, len(order)) - 1]
        yield from read_messages(store.connection, session_id, " AND idx BETWEEN ? AND ?", (low, high))
