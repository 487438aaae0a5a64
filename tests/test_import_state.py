"""The view state an import keeps is the one a full load of the session keeps, byte for byte, and the open
that follows the import resumes from it and shows exactly what a replay shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.importing import write_synthetic
from tests.test_view_state import FIXTURES, imported, kept, shown
from workbench.cli import main
from workbench.engine.context import view_state
from workbench.engine.context.import_state import keep_imported_view
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript import view_states
from workbench.engine.transcript.store import Store


def stored_body(store: Store, session_id: str) -> bytes:
    row = store.connection.execute("SELECT body FROM view_states WHERE session_id = ?", (session_id,)).fetchone()
    assert row is not None
    return bytes(row[0])


@pytest.mark.parametrize("name", FIXTURES)
def test_the_state_an_import_keeps_is_the_one_a_full_load_keeps(tmp_path: Path, name: str) -> None:
    store, session_id = imported(tmp_path, name)
    assert keep_imported_view(store, session_id, minimum=1)
    by_import = stored_body(store, session_id)
    resumed = SessionContext.load(store, session_id)
    assert resumed.resumed_view
    store.connection.execute("DELETE FROM view_states")
    replayed = kept(store, session_id)
    assert stored_body(store, session_id) == by_import
    assert shown(resumed) == shown(replayed)
    assert resumed.cost() == replayed.cost() and resumed.peak_input() == replayed.peak_input()


def test_a_short_session_keeps_no_state(tmp_path: Path) -> None:
    store, session_id = imported(tmp_path, FIXTURES[0])
    assert store.message_count(session_id) < view_state.KEEP_FROM
    assert not keep_imported_view(store, session_id)
    assert view_states.load(store, session_id, "") is None


def test_workbench_import_of_a_long_transcript_leaves_its_first_open_nothing_to_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    transcript = write_synthetic(tmp_path / "long.jsonl", view_state.KEEP_FROM + 10)
    db = tmp_path / "w.db"
    assert main(["import", str(transcript), "--json", "--db", str(db)]) == 0
    session_id = json.loads(capsys.readouterr().out)["session_id"]
    with Store(db) as store:
        by_import = stored_body(store, session_id)
        opened = SessionContext.load(store, session_id)
        assert opened.resumed_view
        store.connection.execute("DELETE FROM view_states")
        replayed = kept(store, session_id)
        assert stored_body(store, session_id) == by_import
        assert shown(opened) == shown(replayed)
