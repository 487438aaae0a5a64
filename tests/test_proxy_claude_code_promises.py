"""Real Claude Code (the pinned 2.1.197) against the proxy's promises: it asks for ``gzip, deflate, br, zstd``
and reads a Brotli or zstd answer through the proxy, and a proxy whose upstream leads back to itself answers it
at once instead of hanging."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from claude_code_agent import KEY, SECRET_WORD, model, wrap
from loopback_api import LoopbackAPI

from workbench.engine.transcript.request_store import list_requests
from workbench.engine.transcript.store import Store
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_claude_code_reads_a_compressed_answer_through_the_proxy(tmp_path: Path, claude: Path, encoding: str) -> None:
    home, work, db = tmp_path / "home", tmp_path / "work", tmp_path / "workbench.db"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    with LoopbackAPI() as api:
        api.encoding = encoding
        api.queue(*([model(work)] * 40))
        result = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        assert SECRET_WORD in result["result"]
        assert all(encoding in r.headers.get("accept-encoding", "") for r in api.message_requests)
    with Store(db) as store:
        [session] = [s for s, _ in store.list_sessions() if s.metadata.get("agent_session") == result["session_id"]]
        rows = list(list_requests(store, session.id))
        assert rows and all(row.outcome is None and row.status == 200 for row in rows)
        assert any(SECRET_WORD in m.text for m in store.load_messages(session.id) if m.role == "assistant"), \
            "the proxy read the answer it forwarded"


def test_claude_code_through_proxies_that_lead_back_to_themselves_stops_at_once(tmp_path: Path, claude: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        second_port = int(probe.getsockname()[1])
    recorders = [Recorder(tmp_path / "a.db", home=tmp_path), Recorder(tmp_path / "b.db", home=tmp_path)]
    first = ProxyServer(ProxySettings(db_path=tmp_path / "a.db", upstream=f"http://127.0.0.1:{second_port}", port=0),
                        recorders[0]).start()
    second = ProxyServer(ProxySettings(db_path=tmp_path / "b.db", upstream=first.url, port=second_port),
                         recorders[1]).start()
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": first.url,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    try:
        done = subprocess.run([str(claude), "-p", "hello"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    finally:
        second.stop()
        first.stop()
        for recorder in recorders:
            recorder.close()
    assert done.returncode != 0
    assert "request loop" in done.stdout + done.stderr
