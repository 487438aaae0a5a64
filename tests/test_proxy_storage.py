"""A proxied session under the strategies that replace content, and what its storage grows with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import orjson
from loopback_api import Reply, text, tool_use
from proxy_support import proxied, request

from tests.bench.proxy import body_of, conversation, unique_bytes, used_bytes
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.transcript.store import Store
from workbench.proxy.recorder import Recorder


def reading_turns(turns: int) -> list[dict[str, Any]]:
    """A user asks, the agent reads a file; the first and the last read are of the same file."""
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        path = "setup.py" if n in (0, turns - 1) else f"src/module_{n}.py"
        messages += [
            {"role": "user", "content": f"Question {n}: what is in {path}?"},
            {"role": "assistant", "content": [tool_use(f"toolu_{n}", "Read", {"path": path})]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                          "content": f"contents of {path}\n" * 80}]},
            {"role": "assistant", "content": [text(f"Answer {n}.")]},
        ]
    return messages


def test_a_strategy_applied_to_a_proxied_session_changes_the_agents_next_request(tmp_path: Path) -> None:
    history = reading_turns(9)
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]), Reply([text("ok again")]))
        api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        api.messages.create(**request([*history, {"role": "user", "content": "Anything else?"}]))
        p.settle()
        with Store(p.db) as store:
            session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
        done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(p.db), "apply", session_id,
                               "--strategy", "dedup"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "applied dedup: 1 change" in done.stdout
        later = [*history, {"role": "user", "content": "Anything else?"},
                 {"role": "assistant", "content": [text("ok")]}, {"role": "user", "content": "Thanks"}]
        api.messages.create(**request(later))
        sent = p.api.bodies[-1]["messages"]
    first_read = sent[2]["content"][0]
    assert first_read["tool_use_id"] == "toolu_0" and first_read["content"] == PRUNED_PLACEHOLDER
    last_read = 4 * 8 + 2
    assert sent[last_read]["content"][0]["tool_use_id"] == "toolu_8"
    assert sent[last_read] == later[last_read], "the newer read is kept"
    assert [m for i, m in enumerate(sent) if i != 2] == [m for i, m in enumerate(later) if i != 2]


def test_storage_grows_with_new_content_not_with_requests(tmp_path: Path) -> None:
    """300 requests whose history grows to 150k tokens: the database holds at most 1.5x the unique content
    (the benchmark prints the naive figure beside it)."""
    requests = conversation()
    recorder = Recorder(tmp_path / "p.db", home=tmp_path)
    for messages in requests:
        recorder.finish(recorder.prepare(orjson.dumps(body_of(messages))), 200, None)
    recorder.close()
    unique = unique_bytes(requests)
    naive = sum(len(orjson.dumps(body_of(m))) for m in requests)
    stored = used_bytes(tmp_path / "p.db")
    assert stored <= 1.5 * unique, f"{stored:,} bytes stored for {unique:,} unique"
    assert naive > 10 * stored
