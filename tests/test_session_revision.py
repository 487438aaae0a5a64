"""A session's revision, kept by the database on every write: what is stored as worked out from a session is
current while it holds."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

from helpers import short_message, store_short_session

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import undo
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.transcript.migrations import MIGRATIONS
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.engine.transcript.view_states import revision as session_revision


def _pin(store: Store, ctx: SessionContext, message_id: str) -> None:
    message = next(m for m in ctx.messages if m.id == message_id)
    apply(store, ctx, measure(ctx, plan_action(ctx, "pin", message, ctx.config.strategies)))


# --- the revision ---------------------------------------------------------------------------------


def test_every_write_to_a_session_moves_its_revision_and_no_other(store: Store) -> None:
    session = store_short_session(store)
    other = store_short_session(store, "s2")
    seen = [session_revision(store, session.id)]
    untouched = session_revision(store, other.id)

    store.save_messages([short_message(session.id, 3)], TokenCounter())  # a new message
    seen.append(session_revision(store, session.id))
    store.save_messages([short_message(session.id, 0, "changed")], TokenCounter())  # a message written again
    seen.append(session_revision(store, session.id))
    ctx = SessionContext.load(store, session.id)
    _pin(store, ctx, "m1")  # an overlay change
    seen.append(session_revision(store, session.id))
    undo(store, ctx)  # an overlay change undone
    seen.append(session_revision(store, session.id))
    with sqlite3.connect(store.path) as other_program:  # even a writer that knows nothing of revisions
        other_program.execute("UPDATE messages SET role = 'user' WHERE session_id = ? AND id = 'm1'", (session.id,))
    seen.append(session_revision(store, session.id))

    assert all(later > earlier for earlier, later in itertools.pairwise(seen)), seen
    assert session_revision(store, other.id) == untouched


def test_a_database_of_the_previous_schema_gains_revisions_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        for statement in MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute("INSERT INTO sessions (id, source_format, created_at, updated_at) VALUES ('old', 'engine', "
                     "'2026-01-01', '2026-01-01')")
        conn.execute("INSERT INTO messages (session_id, id, idx, role, kind, agent_visible, user_visible, sidechain) "
                     "VALUES ('old', 'm0', 0, 'user', 'message', 1, 1, 0)")
    conn.close()
    with Store(path) as store:
        assert store.schema_version() == max(MIGRATIONS)
        tables = {row[0] for row in store.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "view_states" in tables and not tables & {"pictures", "picture_chunks"}, tables
        assert session_revision(store, "old") == 0
        assert [m.id for m in store.load_messages("old")] == ["m0"]
        store.save_messages([short_message("old", 1)], TokenCounter())
        assert session_revision(store, "old") == 1
