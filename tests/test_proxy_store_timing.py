"""When the proxy stores a request: not while it waits for its answer's first byte, and once only."""

from __future__ import annotations

from pathlib import Path

import orjson
from proxy_support import request

from workbench.engine.transcript.request_store import list_requests
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
