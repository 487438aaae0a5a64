"""The SQLite store: pragmas, schema versioning, refusing files it must not touch, atomic writes."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import sqlite_db

from workbench.engine.errors import SessionNotFound, StoreError
from workbench.engine.transcript.migrations import MIGRATIONS, SCHEMA_VERSION
from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Session,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

TABLES = {"schema_version", "sessions", "messages", "parts", "overlay_events", "tool_result_blobs", "snapshots", "usage_records"}


def _session(session_id: str = "s1") -> Session:
    return Session(id=session_id, title="a session", source_format="engine", model="claude-sonnet-4-5")


def _messages(session_id: str = "s1") -> list[Message]:
    return [
        Message(
            id="m0",
            session_id=session_id,
            index=0,
            role="user",
            parts=[TextPart(text="hello there"), ImagePart(media_type="image/jpeg", byte_size=10, width=800, height=600)],
            created_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
            source={"format": "test", "lines": [1]},
        ),
        Message(
            id="m1",
            session_id=session_id,
            index=1,
            role="assistant",
            parts=[
                ThinkingPart(text="let me think"),
                ThinkingPart(redacted=True),
                ToolUsePart(id="t1", name="Read", input={"path": "a.py", "limit": 3}),
            ],
            model="claude-sonnet-4-5",
            usage=Usage(input_tokens=5, output_tokens=7, cache_creation_input_tokens=11, cache_read_input_tokens=13, model="claude-sonnet-4-5"),
        ),
        Message(
            id="m2",
            session_id=session_id,
            index=2,
            role="user",
            kind="tool_result",
            parts=[ToolResultPart(tool_use_id="t1", text="print(1)", is_error=True, images=(ImagePart(width=10, height=10),))],
        ),
    ]


def _count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _file_state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_wal_mode_and_foreign_keys_are_on(store: Store, db_path: Path) -> None:
    assert sqlite_db(store).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sqlite_db(store).execute("PRAGMA foreign_keys").fetchone()[0] == 1
    # WAL is a property of the file: a plain connection sees it too.
    other = sqlite3.connect(db_path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_foreign_keys_are_enforced(store: Store) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        store.save_messages(_messages("no-such-session"), TokenCounter())
    assert store.message_count("no-such-session") == 0


def test_new_database_is_at_schema_version(store: Store, db_path: Path) -> None:
    assert store.schema_version() == SCHEMA_VERSION == max(MIGRATIONS)
    rows = sqlite3.connect(db_path).execute("SELECT version FROM schema_version").fetchall()
    assert rows == [(SCHEMA_VERSION,)]
    assert TABLES <= set(sqlite_db(store).table_names())


def test_reopening_keeps_data_and_version(db_path: Path) -> None:
    with Store(db_path) as s:
        s.save_session(_session())
        s.save_messages(_messages(), TokenCounter())
    with Store(db_path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.message_count("s1") == 3
    assert sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 1


def test_migrates_an_unversioned_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with Store(path) as s:
        assert s.schema_version() == SCHEMA_VERSION


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_newer_schema_is_refused_and_file_left_untouched(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, payload TEXT)")
    conn.execute("INSERT INTO sessions VALUES ('keep-me', 'future data')")
    conn.commit()
    conn.close()
    before = _file_state(path)
    listing = sorted(p.name for p in tmp_path.iterdir())

    with pytest.raises(StoreError) as info:
        Store(path)

    message = str(info.value)
    assert "newer" in message and str(SCHEMA_VERSION + 1) in message and str(path) in message
    assert _file_state(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing, "no -wal/-shm left behind by a refused open"


@pytest.mark.parametrize(
    "content",
    [b"this is a plain text file, not a database\n" * 50, bytes(range(256)) * 20],
    ids=["text", "binary"],
)
def test_non_sqlite_file_is_refused_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    before = _file_state(path)
    with pytest.raises(StoreError, match="not a workbench database"):
        Store(path)
    assert _file_state(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_directory_as_database_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory"):
        Store(tmp_path)


def test_transaction_that_raises_leaves_nothing_written(store: Store, db_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), store.transaction():
        store.save_session(_session())
        store.save_messages(_messages(), TokenCounter())
        store.add_overlay_events([OverlayEvent(id="e1", session_id="s1", plan_id="p", action="pin", message_id="m0")])
        assert store.message_count("s1") == 3  # visible inside the transaction
        raise RuntimeError("boom")
    with pytest.raises(SessionNotFound):
        store.get_session("s1")
    for table in ("sessions", "messages", "parts", "overlay_events"):
        assert _count(db_path, table) == 0, table


def test_nested_transaction_joins_the_outer_one(store: Store, db_path: Path) -> None:
    store.save_session(_session())
    with pytest.raises(ValueError), store.transaction():
        store.save_messages(_messages()[:1], TokenCounter())
        with store.transaction():
            store.save_messages(_messages()[1:], TokenCounter())
        raise ValueError("outer fails after the inner block finished")
    assert _count(db_path, "messages") == 0
    assert store.get_session("s1").title == "a session"


def test_messages_round_trip(store: Store) -> None:
    store.save_session(_session())
    original = _messages()
    store.save_messages(original, TokenCounter())
    loaded = store.load_messages("s1")
    assert [m.model_dump() for m in loaded] == [m.model_dump() for m in original]


def test_saving_a_message_again_replaces_its_parts(store: Store, db_path: Path) -> None:
    store.save_session(_session())
    counter = TokenCounter()
    store.save_messages(_messages(), counter)
    edited = _messages()[0].model_copy(update={"parts": [TextPart(text="only one part now")]})
    store.save_messages([edited], counter)
    assert _count(db_path, "messages") == 3
    assert _count(db_path, "parts") == 1 + 3 + 1
    assert store.load_messages("s1")[0].parts == [TextPart(text="only one part now")]


def test_overlay_events_round_trip_and_ignore_existing(store: Store) -> None:
    store.save_session(_session())
    events = [
        OverlayEvent(id="e1", session_id="s1", plan_id="p1", action="pin", message_id="m0", reason="keep"),
        OverlayEvent(id="e2", session_id="s1", plan_id="p1", action="pivot", message_id="m1", origin="import",
                     data={"trigger": "auto", "pre_tokens": 123}, tokens_saved=5),
    ]
    store.add_overlay_events(events)
    store.add_overlay_events(events, ignore_existing=True)
    loaded = store.load_overlay("s1")
    assert [e.model_dump(exclude={"created_at"}) for e in loaded] == [e.model_dump(exclude={"created_at"}) for e in events]
    with pytest.raises(sqlite3.IntegrityError):
        store.add_overlay_events(events[:1])


def test_token_counts_are_stored_per_part(store: Store) -> None:
    store.save_session(_session())
    counter = TokenCounter()
    messages = _messages()
    store.save_messages(messages, counter)
    expected = {p.content_key(): counter.count_part(p) for m in messages for p in m.parts}
    assert store.token_cache("s1") == expected


def test_sessions_list_with_counts(store: Store) -> None:
    store.save_session(_session("a"))
    store.save_session(_session("b"))
    store.save_messages(_messages("b"), TokenCounter())
    counts = {s.id: n for s, n in store.list_sessions()}
    assert counts == {"a": 0, "b": 3}
    assert store.integrity_check() == "ok"


@pytest.mark.parametrize("parent", ["p-1", "café \"quoted\" \\ 日本"])
def test_sub_agents_are_found_by_the_parent_their_metadata_names(store: Store, parent: str) -> None:
    """Found without listing every session, whatever characters the parent's id holds (JSON escapes some)."""
    from workbench.engine.transcript.subagent_links import find_subagents

    store.save_session(_session(parent))
    children = [Session(id=f"child-{n}", title="sub", metadata={"parent_session": parent, "parent_message": "m1"})
                for n in range(2)]
    for child in children:
        store.save_session(child)
    store.save_session(Session(id="other", title="x", metadata={"parent_session": parent + "-not"}))
    store.save_session(Session(id="no-message", title="x", metadata={"parent_session": parent}))
    assert sorted(s.id for s in store.sessions_mentioning(parent)) == ["child-0", "child-1", "no-message", "other"]
    assert {k: sorted(v) for k, v in find_subagents(store, parent).items()} == {"m1": ["child-0", "child-1"]}


def test_compressed_part_bodies_load_as_they_were_saved(store: Store) -> None:
    store.save_session(Session(id="s1"))
    long_text = "a tool output line that repeats\n" * 200
    parts = [TextPart(text="short"), ToolUsePart(id="t1", name="Read", input={"path": "x"}),
             ToolResultPart(tool_use_id="t1", text=long_text)]
    message = Message(id="m1", session_id="s1", index=0, role="user", parts=parts)
    store.save_messages([message], TokenCounter(), compress_over=100)
    rows = sqlite_db(store).conn.execute("SELECT position, typeof(body) FROM parts ORDER BY position").fetchall()
    assert rows == [(0, "text"), (1, "text"), (2, "blob")], "only the long body is compressed"
    [loaded] = store.load_messages("s1")
    assert loaded.parts == parts


def test_a_second_connection_in_this_process_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    """Opening a Store must not drop this process's SQLite locks on the file (closing any descriptor of a
    file drops them all), or another process closing the database deletes its log under the open ones."""
    import subprocess
    import sys

    path = tmp_path / "shared.db"
    first = Store(path)
    first.save_session(_session())
    second = Store(path)
    try:
        subprocess.run([sys.executable, "-c", f"from workbench.engine.transcript.store import Store; Store({str(path)!r}).close()"],
                       check=True, timeout=60)
        assert (tmp_path / "shared.db-wal").exists(), "the other process left the log of the open database alone"
        with Store(path) as third:
            assert third.get_session("s1").id == "s1"
        first.save_session(_session("s2"))
        assert {s.id for s, _ in second.list_sessions()} == {"s1", "s2"}
    finally:
        second.close()
        first.close()


def test_a_full_disk_is_one_line_saying_so_and_reads_still_work(store: Store) -> None:
    """SQLite's page limit set to the pages in use is a real SQLITE_FULL, as a full disk gives."""
    from helpers import short_message, store_short_session

    session = store_short_session(store)
    pages = store.connection.execute("PRAGMA page_count").fetchone()[0]
    store.connection.execute(f"PRAGMA max_page_count = {pages}")
    big = [short_message(session.id, 3 + n, "x" * 20_000) for n in range(20)]
    with pytest.raises(StoreError) as raised:
        store.save_messages(big, TokenCounter())
    assert str(raised.value) == (f"cannot write {store.path}: the disk is full; free some space and run it again "
                                 "(nothing was changed)")
    assert [m.id for m in store.load_messages(session.id)] == ["m0", "m1", "m2"]
