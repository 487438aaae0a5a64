"""The keys of a request's messages, remembered between requests: the same keys as computing each one, for
messages seen before, new ones, reordered fields and a cache that fills up."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from workbench.engine.transcript import request_blocks
from workbench.engine.transcript.request_blocks import MessageKeys, message_key


def _history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {n}"}]})
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"file_path": f"/f{n}"}}]})
    return messages


def test_keys_are_those_of_each_message_whether_remembered_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = MessageKeys()
    computed: list[object] = []
    real = request_blocks.message_key

    def counted(message: Any) -> str:
        computed.append(message)
        return real(message)

    monkeypatch.setattr(request_blocks, "message_key", counted)
    first = _history(3)
    assert keys.keys(first) == [message_key(m) for m in first] and len(computed) == 6
    computed.clear()
    grown = orjson.loads(orjson.dumps(_history(4)))  # the client sends it again, parsed afresh, one turn more
    grown[0]["content"][0]["cache_control"] = {"type": "ephemeral"}  # a mark moved: the same key, computed
    assert keys.keys(grown) == [message_key(m) for m in grown]
    assert computed == [grown[0], grown[6], grown[7]], "only the changed and the new messages are keyed again"
    reordered = [{"content": m["content"], "role": m["role"]} for m in first]  # other bytes, the same message
    assert keys.keys(reordered) == [message_key(m) for m in first]


def test_a_full_cache_keeps_only_the_latest_request() -> None:
    keys = MessageKeys(limit=10)
    for turns in (2, 4, 8):
        history = _history(turns)
        assert keys.keys(history) == [message_key(m) for m in history]
        assert len(keys._known) <= max(10, len(history))
