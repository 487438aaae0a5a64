"""Removing a stored session (``workbench sessions --delete``) and which sessions are listed at all."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from helpers import claude_fixture, store_short_session

from workbench.cli import main
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import SessionNotFound
from workbench.engine.transcript import view_states
from workbench.engine.transcript.models import Session, ToolResultPart
from workbench.engine.transcript.sessions import delete_session, latest_session, listed_sessions
from workbench.engine.transcript.store import Store


def _run(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _rows_per_table(db: Path, session_id: str) -> dict[str, int]:
    """Rows that belong to ``session_id`` in every table that has a ``session_id`` column (and sessions)."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        counts = {"sessions": conn.execute("SELECT COUNT(*) FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]}
        for table in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            if "session_id" in columns:
                counts[table] = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id = ?",
                                             (session_id,)).fetchone()[0]
        return counts
    finally:
        conn.close()


def _steered_import(capsys: pytest.CaptureFixture[str], db: Path) -> str:
    """A real transcript, imported (messages, parts, usage), steered (overlay), with its view state kept and a stored result."""
    code, out, err = _run(capsys, "import", claude_fixture("258c7280"), "--json", "--db", db)
    assert code == 0, err
    session_id = str(json.loads(out)["session_id"])
    code, _, err = _run(capsys, "pin", session_id, "1", "--db", db)
    assert code == 0, err
    with Store(db) as store:
        messages = store.load_messages(session_id)
        assert SessionContext.load(store, session_id).keep_view(store, view_states.revision(store, session_id))
        store.save_blob(session_id, "ref-1", "Read", "a result moved out of the context by the agent")
    sizes = [sum(len(p.text) for p in m.parts if isinstance(p, ToolResultPart)) for m in messages]
    code, _, err = _run(capsys, "offload", session_id, str(sizes.index(max(sizes)) + 1), "--db", db)
    assert code == 0, err
    return session_id


def test_delete_removes_a_session_and_everything_it_owns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    session_id = _steered_import(capsys, db)
    with Store(db) as store:
        other = store_short_session(store, "other", count=4)
    before = _rows_per_table(db, session_id)
    for table in ("sessions", "messages", "parts", "overlay_events", "tool_result_blobs", "usage_records",
                  "view_states"):
        assert before[table] > 0, table  # the test really fills what it checks

    code, out, err = _run(capsys, "sessions", "--delete", session_id, "--db", db)

    assert code == 0, err
    assert out.startswith(f"deleted {session_id} (") and "messages" in out
    assert all(count == 0 for count in _rows_per_table(db, session_id).values()), _rows_per_table(db, session_id)
    with Store(db) as store:
        assert [s.id for s, _ in store.list_sessions()] == [other.id]
        assert store.message_count(other.id) == 4
        assert store.integrity_check() == "ok"
    code, out, _ = _run(capsys, "sessions", "--db", db)
    assert session_id not in out and "other" in out


def test_delete_takes_the_sub_agent_sessions_and_their_outputs(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    with Store(tmp_path / "wb.db") as store:
        parent = store_short_session(store, "parent")
        for child, of in (("child", "parent"), ("grandchild", "child")):
            store.save_session(Session(id=child, source_format="engine", metadata={"parent_session": of}))
        store_short_session(store, "bystander")
        for sid in ("parent", "child", "bystander"):
            (outputs / sid).mkdir(parents=True)
            (outputs / sid / "task.md").write_text("output")

        deleted = delete_session(store, parent.id, outputs)

        assert sorted(deleted.subagents) == ["child", "grandchild"] and deleted.messages == 3
        assert "and 2 sub-agent sessions" in deleted.describe() and not deleted.warnings
        assert [s.id for s, _ in store.list_sessions()] == ["bystander"]
    assert sorted(p.name for p in outputs.iterdir()) == ["bystander"]


def test_delete_of_an_unknown_session_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(tmp_path / "wb.db") as store, pytest.raises(SessionNotFound):
        delete_session(store, "nope")
    code, out, err = _run(capsys, "sessions", "--delete", "nope", "--db", tmp_path / "wb.db")
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "nope" in err


def test_delete_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(tmp_path / "wb.db") as store:
        store_short_session(store, "s1")
    code, out, err = _run(capsys, "sessions", "--delete", "s1", "--json", "--db", tmp_path / "wb.db")
    assert code == 0, err
    assert json.loads(out) == {"deleted": "s1", "messages": 3, "subagent_sessions": [], "side_calls": [],
                                "warnings": []}


def test_empty_runs_are_not_listed_nor_opened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed before its first message leaves an empty engine session: nothing to show, so not listed."""
    db = tmp_path / "wb.db"
    with Store(db) as store:
        store_short_session(store, "full")
        store.save_session(Session(id="killed", title="Scripted: demo", source_format="engine"))
        assert [s.id for s, _ in listed_sessions(store)] == ["full"]
        assert [s.id for s, _ in listed_sessions(store, keep="killed")] == ["killed", "full"]
        assert latest_session(store) == "full"
    code, out, err = _run(capsys, "sessions", "--db", db)
    assert code == 0, err
    assert "full" in out and "killed" not in out
    code, out, _ = _run(capsys, "sessions", "--json", "--db", db)
    assert [row["session_id"] for row in json.loads(out)] == ["full"]


def test_latest_session_is_none_without_messages(tmp_path: Path) -> None:
    with Store(tmp_path / "wb.db") as store:
        assert latest_session(store) is None
        store.save_session(Session(id="empty", source_format="engine"))
        assert latest_session(store) is None


def test_what_delete_says_has_secrets_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Like the listing, the line naming a deleted session does not repeat a key the user pasted in its title."""
    with Store(tmp_path / "wb.db") as store:
        store_short_session(store, "s1")
        store.save_session(Session(id="s1", title="try sk-ant-api03-" + "a" * 40, source_format="engine"))
    code, out, err = _run(capsys, "sessions", "--delete", "s1", "--db", tmp_path / "wb.db")
    assert code == 0, err
    assert "sk-ant-api03" not in out and "REDACTED" in out
