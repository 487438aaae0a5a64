"""What the proxy stores when storage falters or other writers share its database, with real parts: the
proxy as a server in front of the loopback API, the real SDK, and the SQLite file itself."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest
from loopback_api import LoopbackAPI, Reply, text
from proxy_support import request

from workbench.engine.transcript.request_store import list_requests, request_body
from workbench.engine.transcript.store import Store
from workbench.proxy import recorder as recorder_module
from workbench.proxy import writer as writer_module
from workbench.proxy.exchange import Exchange
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import Answer
from workbench.proxy.server import ProxyServer, ProxySettings

AGENT = "eeeeeeee-2222-3333-4444-555555555555"


def agent_meta(session: str = AGENT) -> dict[str, str]:
    return {"user_id": orjson.dumps({"device_id": "d", "session_id": session}).decode()}


def user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": value}


@contextmanager
def serving(db: Path, api: LoopbackAPI, home: Path) -> Iterator[tuple[ProxyServer, list[str], list[Exchange]]]:
    """The proxy as a real server; the lines it says about storage, and the exchanges it reported."""
    said: list[str] = []
    reports: list[Exchange] = []
    recorder = Recorder(db, home=home, report=reports.append, warn=said.append)
    server = ProxyServer(ProxySettings(db_path=db, upstream=api.url, port=0), recorder).start()
    try:
        yield server, said, reports
    finally:
        server.stop()
        recorder.close()


def sdk(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0)


def proxy_sessions(db: Path) -> list[str]:
    with Store(db) as store:
        return [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]


def hold_lock(db: Path, seconds: float) -> threading.Thread:
    """Another program holds the database's write lock for ``seconds``."""
    ready = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        ready.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    ready.wait(5)
    return thread


def test_a_locked_database_makes_requests_wait_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, serving(db, api, tmp_path) as (server, said, reports):
        api.queue(*[Reply([text(f"answer {n}")]) for n in range(4)])
        history: list[dict[str, Any]] = []
        sdk(server.url).messages.create(**request([user("first")], metadata=agent_meta()))
        server.recorder.settle()
        holder = hold_lock(db, 3.0)
        for n in range(3):
            history = [user("first"), {"role": "assistant", "content": [text("answer 0")]}, user(f"then {n}")]
            sdk(server.url).messages.create(**request(history, metadata=agent_meta()))
        deadline = time.monotonic() + 2.5
        while server.recorder.notice is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.recorder.notice is not None and "locked" in server.recorder.notice, "the app can show it"
        holder.join()
        server.recorder.settle()
        assert server.recorder.notice is None
    assert any("locked by another program" in line and "nothing is lost" in line for line in said), said
    assert not any("not stored" in (e.warning or "") for e in reports)
    [session] = proxy_sessions(db)
    with Store(db) as store:
        assert [r.seq for r in list_requests(store, session)] == [1, 2, 3, 4]
        assert [request_body(store, session, seq)["messages"][-1]["content"] for seq in (2, 3, 4)] == [
            "then 0", "then 1", "then 2"]


def test_a_deleted_database_still_answers_and_says_once_what_is_not_stored(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, serving(db, api, tmp_path) as (server, said, reports):
        api.queue(Reply([text("one")]), Reply([text("two")]))
        sdk(server.url).messages.create(**request([user("first")], metadata=agent_meta()))
        server.recorder.settle()
        for file in tmp_path.glob("proxy.db*"):  # the user deleted the database while the proxy ran
            file.unlink()
        for n in range(3):
            answer = sdk(server.url).messages.create(**request(
                [user("first"), {"role": "assistant", "content": [text("one")]}, user(f"then {n}")],
                metadata=agent_meta()))
            assert answer.content[0].text == "two", "the request still went through"  # type: ignore[union-attr]
            api.queue(Reply([text("two")]))
        server.recorder.settle()
        assert server.recorder.notice is not None and "deleted" in server.recorder.notice
    assert sum("not storing requests" in line and "deleted" in line for line in said) == 1, said
    assert all("not stored" in (e.warning or "") for e in reports[1:]), "each request's own line says it"


def test_a_lost_request_marks_its_session_incomplete_and_the_next_one_stands_whole(tmp_path: Path) -> None:
    """The write of request 2 is refused (a bug, a full disk): request 3 still reads back whole, and the
    session says from where it is incomplete."""
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    first = [user("first")]
    second = [*first, {"role": "assistant", "content": [text("one")]}, user("second")]
    third = [*second, {"role": "assistant", "content": [text("two")]}, user("third")]
    original = recorder_module.store_request
    calls = 0

    def refused_once(store: Store, exchange: Exchange, context: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise sqlite3.OperationalError("database or disk is full")
        original(store, exchange, context)

    recorder_module.store_request = refused_once  # type: ignore[assignment]
    try:
        for messages, reply in ((first, "one"), (second, "two"), (third, "three")):
            exchange = recorder.prepare(orjson.dumps(request(messages, metadata=agent_meta())))
            recorder.finish(exchange, 200, Answer(blocks=[text(reply)], complete=True))
            recorder.flush()
    finally:
        recorder_module.store_request = original  # type: ignore[assignment]
    recorder.close()
    assert exchange.placement is not None
    session_id = exchange.placement.thread.session_id
    with Store(db) as store:
        assert [r.seq for r in list_requests(store, session_id)] == [1, 2]
        assert request_body(store, session_id, 2)["messages"] == third
        assert [m.role for m in store.load_messages(session_id)] == ["user", "assistant", "user", "assistant",
                                                                     "user", "assistant"]
        mark = store.get_session(session_id).metadata["incomplete"]
    assert mark["after_seq"] == 1 and "disk is full" in mark["reason"]


def test_a_request_whose_parents_blocks_are_gone_is_stored_whole(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    first = [user("first")]
    second = [*first, {"role": "assistant", "content": [text("one")]}, user("second")]
    exchange = recorder.prepare(orjson.dumps(request(first, metadata=agent_meta())))
    recorder.finish(exchange, 200, Answer(blocks=[text("one")], complete=True))
    recorder.flush()
    with sqlite3.connect(db) as conn:  # another program cleaned the blocks up under the proxy
        conn.execute("DELETE FROM request_blocks")
    exchange = recorder.prepare(orjson.dumps(request(second, metadata=agent_meta())))
    recorder.finish(exchange, 200, Answer(blocks=[text("two")], complete=True))
    recorder.close()
    assert exchange.placement is not None and exchange.stored
    with Store(db) as store:
        assert request_body(store, exchange.placement.thread.session_id, exchange.seq)["messages"] == second


def test_two_proxies_on_one_database_never_overwrite_each_others_requests(tmp_path: Path) -> None:
    """Both follow the same agent session (``claude --resume`` in two terminals): each request keeps its own
    number, and every one reads back as it was sent."""
    db = tmp_path / "proxy.db"
    recorders = [Recorder(db, home=tmp_path)]
    exchange = recorders[0].prepare(orjson.dumps(request([user("hello")], metadata=agent_meta())))
    recorders[0].finish(exchange, 200, Answer(blocks=[text("hi")], complete=True))
    recorders[0].flush()
    recorders.append(Recorder(db, home=tmp_path))  # resumes the session the first one stored
    sent: list[str] = ["hello"]
    for n in range(20):
        for which, recorder in enumerate(recorders):
            last = f"from proxy {which}, request {n}"
            sent.append(last)
            exchange = recorder.prepare(orjson.dumps(request([user("hello"), {"role": "assistant", "content": [
                text("hi")]}, user(last)], metadata=agent_meta())))
            recorder.finish(exchange, 200, Answer(blocks=[text("ok")], complete=True))
    for recorder in recorders:
        recorder.close()
    [session] = proxy_sessions(db)
    with Store(db) as store:
        rows = list(list_requests(store, session))
        stored = [request_body(store, session, r.seq)["messages"][-1]["content"] for r in rows]
    assert [r.seq for r in rows] == list(range(1, 42))
    assert sorted(stored) == sorted(sent)


def test_a_request_based_on_itself_is_refused_by_readers_not_looped_over(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    exchange = recorder.prepare(orjson.dumps(request([user("hello")], metadata=agent_meta())))
    recorder.finish(exchange, 200, Answer(blocks=[text("ok")], complete=True))
    recorder.close()
    assert exchange.placement is not None
    session = exchange.placement.thread.session_id
    with sqlite3.connect(db) as conn:  # as an older workbench wrote it
        conn.execute("UPDATE requests SET base_seq = seq, keep = 1")
    done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), "requests", session, "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "based on request 1" in done.stderr


@pytest.mark.parametrize("session", ["*", "../../../../secret", "*/../*", AGENT.upper().replace("E", "?")])
def test_a_session_id_from_a_client_is_never_a_path_or_a_pattern(tmp_path: Path, session: str) -> None:
    home = tmp_path / "home"
    projects = home / ".claude" / "projects" / "-work"
    projects.mkdir(parents=True)
    (projects / f"{AGENT}.jsonl").write_text("{}\n")
    (tmp_path / "secret.jsonl").write_text("{}\n")  # where projects/*/../../../../secret.jsonl leads
    db = tmp_path / "proxy.db"
    for group in (session, AGENT):
        recorder = Recorder(db, home=home)
        exchange = recorder.prepare(orjson.dumps(request([user(f"hello {group}")], metadata=agent_meta(group))))
        recorder.finish(exchange, 200, Answer(blocks=[text("ok")], complete=True))
        recorder.close()
    with Store(db) as store:
        linked = {s.metadata.get("agent_session"): s.metadata.get("agent_transcript")
                  for s, _ in store.list_sessions()}
    assert linked == {session: None, AGENT: str(projects / f"{AGENT}.jsonl")}


def test_clients_without_a_session_id_that_share_a_first_message_are_kept_apart(tmp_path: Path) -> None:
    """Six clients ask the same first question at once, then each goes its own way."""
    db = tmp_path / "proxy.db"
    with LoopbackAPI() as api, serving(db, api, tmp_path) as (server, _, _):
        api.queue(*[Reply([text("Hello.")]) for _ in range(6 * 3)])
        start = threading.Barrier(6)

        def client(n: int) -> None:
            messages = [user("Where is the build configured?")]
            start.wait()
            for turn in range(3):
                if turn:
                    messages += [{"role": "assistant", "content": [text("Hello.")]}, user(f"client {n}, turn {turn}")]
                sdk(server.url).messages.create(**request(messages))

        threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        server.recorder.settle()
    sessions = proxy_sessions(db)
    assert len(sessions) == 6
    with Store(db) as store:
        for session in sessions:
            texts = [m.parts[0].text for m in store.load_messages(session) if m.role == "user"]  # type: ignore[union-attr]
            assert len(texts) == 3 and texts[1].split(",")[0] == texts[2].split(",")[0], texts
            assert [r.seq for r in list_requests(store, session)] == [1, 2, 3]


def test_closing_truncates_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    for n in range(20):
        exchange = recorder.prepare(orjson.dumps(request([user(f"question {n} " + "x" * 20_000)])))
        recorder.finish(exchange, 200, Answer(blocks=[text("ok")], complete=True))
    recorder.close()
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_an_idle_session_leaves_memory_and_its_next_request_is_placed_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recorder_module, "REST_EVERY", 1)
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    first = [user("first")]
    second = [*first, {"role": "assistant", "content": [text("one")]}, user("second")]
    exchange = recorder.prepare(orjson.dumps(request(first)))
    recorder.finish(exchange, 200, Answer(blocks=[text("one")], complete=True))
    recorder.flush()
    assert exchange.placement is not None
    thread = exchange.placement.thread
    thread.last_request_at = thread.last_request_at.replace(year=2000)  # type: ignore[union-attr]
    other = recorder.prepare(orjson.dumps(request([user("someone else")])))
    recorder.finish(other, 200, Answer(blocks=[text("ok")], complete=True))
    recorder.flush()
    assert thread.resting and not thread.known and not thread.entries
    exchange = recorder.prepare(orjson.dumps(request(second)))
    recorder.finish(exchange, 200, Answer(blocks=[text("two")], complete=True))
    recorder.close()
    assert exchange.placement is not None and exchange.placement.thread is thread and not thread.resting
    with Store(db) as store:
        assert request_body(store, thread.session_id, 2)["messages"] == second
        assert [m.role for m in store.load_messages(thread.session_id)] == ["user", "assistant", "user", "assistant"]


def test_a_full_queue_says_what_it_does_not_store_instead_of_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer_module, "MAX_WAITING", 4)
    db = tmp_path / "proxy.db"
    said: list[str] = []
    recorder = Recorder(db, home=tmp_path, warn=said.append)
    recorder.flush()
    holder = hold_lock(db, 2.0)
    exchanges = []
    for n in range(6):
        exchange = recorder.prepare(orjson.dumps(request([user(f"question {n}")])))
        recorder.finish(exchange, 200, Answer(blocks=[text("ok")], complete=True))
        exchanges.append(exchange)
    assert recorder.waiting() <= 5
    holder.join()
    recorder.close()
    dropped = [e for e in exchanges if "not stored" in (e.warning or "")]
    assert dropped and all("writes behind" in (e.warning or "") for e in dropped)
    assert any("not storing a request: storage is" in line for line in said), said
    with Store(db) as store:
        stored = store.connection.execute("SELECT count(*) FROM requests").fetchone()[0]
    assert stored == len([e for e in exchanges if e.stored]) and 0 < stored < 6
