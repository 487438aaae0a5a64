"""Request bodies read from the one before and steered by splicing: always the same body, keys and bytes as
parsing the whole request and serialising the steered body whole, whatever the client sent."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.transcript.request_blocks import message_key
from workbench.engine.transcript.request_body import RequestBodies, RequestBody

SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=12)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                          max_size=3), max_leaves=8)
BLOCKS = st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_result", "tool_use"]), "text": st.text(max_size=20)},
                               optional={"cache_control": st.just({"type": "ephemeral"}), "extra": VALUES})
MESSAGES = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                  "content": st.text(max_size=20) | st.lists(BLOCKS, min_size=1, max_size=3)})
FIELDS = st.dictionaries(st.sampled_from(["model", "system", "tools", "metadata", "stream", "max_tokens"]), VALUES,
                         max_size=4)


def body(fields: dict[str, Any], messages: list[Any], after: dict[str, Any]) -> dict[str, Any]:
    return {**fields, "messages": messages, **{k: v for k, v in after.items() if k not in fields}}


def check(request: RequestBody | None, raw: bytes, changes: dict[int, dict[str, Any]]) -> None:
    expected = orjson.loads(raw)
    assert request is not None and request.body == expected and list(request.body) == list(expected)
    assert request.keys == [message_key(m) for m in expected["messages"]]
    changed = {i: m for i, m in changes.items() if i < len(expected["messages"])}
    whole = {**expected, "messages": [changed.get(i, m) for i, m in enumerate(expected["messages"])]}
    assert request.rewritten(changed) == orjson.dumps(whole)


@settings(max_examples=150, deadline=None)
@given(fields=FIELDS, after=FIELDS, history=st.lists(MESSAGES, min_size=1, max_size=8),
       turns=st.lists(st.tuples(st.integers(0, 8), st.lists(MESSAGES, max_size=3), st.booleans()), min_size=1,
                      max_size=5),
       changes=st.dictionaries(st.integers(0, 12), MESSAGES, max_size=3))
def test_a_growing_conversation_reads_and_splices_as_parsing_and_writing_it_whole(
    fields: dict[str, Any], after: dict[str, Any], history: list[Any],
    turns: list[tuple[int, list[Any], bool]], changes: dict[int, dict[str, Any]],
) -> None:
    bodies = RequestBodies(remembered=2)
    for kept, added, spaced in turns:  # each request keeps some of the history and adds to it
        history = history[:kept] + added
        request = body(fields, history, after)
        raw = json.dumps(request, separators=(", ", ": ") if spaced else (",", ":"), ensure_ascii=spaced).encode() \
            if spaced else orjson.dumps(request)
        check(bodies.read(raw), raw, changes)


def test_the_shared_history_is_taken_from_the_last_request_and_only_the_rest_is_parsed() -> None:
    bodies = RequestBodies()
    history: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"x": 1}}]}]
    first = bodies.read(orjson.dumps(body({"model": "m", "system": "s"}, history, {"stream": True})))
    grown = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "content": "hello"},
             {"role": "user", "content": "thanks"}]
    again = orjson.dumps(body({"model": "m", "system": "s"}, [*history, *grown[1:]], {"stream": True}))
    second = bodies.read(again)
    assert first is not None and second is not None and first.spans is not None and second.spans is not None
    assert second.messages[0] is first.messages[0], "the shared message is not parsed again"
    check(second, again, {2: {"role": "user", "content": "steered"}})
    moved = orjson.dumps(body({"model": "m", "system": "s"}, grown, {"stream": True}))  # its cache mark moved
    third = bodies.read(moved)
    assert third is not None and third.messages[0] is not first.messages[0] and third.messages[0] == grown[0]
    check(third, moved, {0: {"role": "user", "content": "steered"}})


def test_bytes_orjson_would_not_write_are_read_and_written_whole() -> None:
    bodies = RequestBodies()
    canonical = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "café"}]})
    assert bodies.read(canonical) is not None
    for raw in (b'{"model": "m", "messages": [{"role": "user", "content": "caf\\u00e9"}]}',
                b'{"model":"m","messages":[{"role":"user","content":"caf\xc3\xa9"}, {"role":"user","content":"x"}]}',
                b'{"model":"m","messages":[{"role":"user","content":"caf\xc3\xa9"}],"model":"n"}',
                b'{"model":"m","messages":[{"role":"user","content":"caf\xc3\xa9"},{"role":"user","content":1E2}]}'):
        request = bodies.read(raw)
        assert request is not None and request.spans is None
        check(request, raw, {0: {"role": "user", "content": "steered"}})
    assert bodies.read(b'{"model": "m"}') is None and bodies.read(b"[1]") is None
