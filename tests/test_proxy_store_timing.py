"""When and how the proxy stores a request: not while it waits for its answer's first byte, once, on the
request before it, and without an overlay event a request."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import sqlite_db
from proxy_support import request

from workbench.engine.transcript import request_store
from workbench.engine.transcript.request_store import list_requests, request_body
from workbench.engine.transcript.store import Store
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import Answer


def stored(db: Path) -> list[int]:
    with Store(db) as store:
        return [row.seq for session, _ in store.list_sessions() for row in list_requests(store, session.id)]


def test_a_request_is_stored_when_its_answer_begins_and_only_once(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    exchange = recorder.prepare(orjson.dumps(request([{"role": "user", "content": "hello"}])))
    recorder.flush()
    assert exchange.pending and stored(db) == [], "nothing is written while the request waits"
    recorder.store_request(exchange)
    recorder.store_request(exchange)
    recorder.flush()
    assert not exchange.pending and stored(db) == [1]
    recorder.finish(exchange, 200, Answer(blocks=[{"type": "text", "text": "hi"}], complete=True))
    recorder.flush()
    assert stored(db) == [1]
    recorder.close()


def test_an_answer_that_never_began_still_stores_its_request(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    exchange = recorder.prepare(orjson.dumps(request([{"role": "user", "content": "hello"}])))
    recorder.finish(exchange, 502, None)
    recorder.close()
    assert stored(db) == [1]


def test_a_repeated_question_archives_its_dropped_answer_once(tmp_path: Path) -> None:
    """An agent that asks the same thing every time (Claude Code's quota check, in its session) drops the same
    answer every time: one archive event, not one a request, or every request would read a growing overlay.
    (A client that names no session asking again is a new session: it cannot be told from another client.)"""
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    meta = {"user_id": '{"session_id":"cccccccc-2222-3333-4444-555555555555"}'}
    for _ in range(5):
        exchange = recorder.prepare(orjson.dumps(request([{"role": "user", "content": "quota"}], metadata=meta)))
        recorder.finish(exchange, 200, Answer(blocks=[{"type": "text", "text": "ok"}], complete=True))
        recorder.flush()
    recorder.close()
    assert exchange.placement is not None
    with Store(db) as store:
        events = store.load_overlay(exchange.placement.thread.session_id)
    assert [e.action for e in events] == ["archive"] and stored(db) == [1, 2, 3, 4, 5]


def test_each_request_is_stored_on_the_last_without_reading_the_chain_of_earlier_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The base of each stored request is the one before, taken from memory: rebuilding its message hashes
    from the store walked every earlier request, a query each."""
    walked: list[int] = []
    real = request_store.message_keys

    def counted(store: Store, session_id: str, seq: int) -> list[str]:
        walked.append(seq)
        return real(store, session_id, seq)

    monkeypatch.setattr(request_store, "message_keys", counted)
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    history: list[dict[str, Any]] = []
    sent = []
    for n in range(6):
        history = [*history, {"role": "user", "content": f"question {n}"}]
        sent.append(request(history))
        exchange = recorder.prepare(orjson.dumps(sent[-1]))
        recorder.finish(exchange, 200, Answer(blocks=[{"type": "text", "text": f"answer {n}"}], complete=True))
        history = [*history, {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]}]
    recorder.close()
    assert walked == []
    assert exchange.placement is not None
    with Store(db) as store:
        session_id = exchange.placement.thread.session_id
        bases = sqlite_db(store).conn.execute("SELECT base_seq FROM requests WHERE session_id = ? ORDER BY seq", [session_id])
        assert [base for (base,) in bases] == [None, 1, 2, 3, 4, 5]
        assert [request_body(store, session_id, seq)["messages"] for seq in range(1, 7)] == \
            [body["messages"] for body in sent]


def test_settling_waits_for_an_answer_still_going_through(tmp_path: Path) -> None:
    """A client has the whole answer a moment before the proxy is done with it: settling waits for that."""
    db = tmp_path / "proxy.db"
    reports: list[object] = []
    recorder = Recorder(db, home=tmp_path, report=reports.append)
    exchange = recorder.prepare(orjson.dumps(request([{"role": "user", "content": "hello"}])))
    answer = Answer(blocks=[{"type": "text", "text": "hi"}], complete=True)
    late = threading.Timer(0.3, recorder.finish, (exchange, 200, answer))
    late.start()
    recorder.settle()
    assert reports == [exchange] and stored(db) == [1]
    late.join()
    recorder.close()
