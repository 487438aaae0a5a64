"""The Anthropic provider through the real ``anthropic`` SDK, against a loopback Messages API.

Nothing is mocked: the SDK makes real HTTP requests to ``tests/loopback_api.py``
on 127.0.0.1, which streams SSE the way the API does, or fails the way it does.
Retry delays are kept tiny, or recorded by the provider's injectable ``sleep``
where a test checks the delay a header asked for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loopback_api import (
    Dropped,
    ErrorResponse,
    LoopbackAPI,
    Malformed,
    Reply,
    StreamError,
    overloaded,
    prompt_too_long,
    prompt_too_long_in_stream,
    rate_limited,
    request_too_large,
    server_error,
    text,
    thinking,
    tool_use,
    unauthorized,
)

from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.providers.base import (
    ContextLimitExceeded,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RetryNotice,
    StreamDelta,
    StreamItem,
    SystemBlock,
)
from workbench.engine.transcript.models import TextPart, ThinkingPart, ToolUsePart, Usage

MODEL = "claude-sonnet-4-5"

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def request() -> ModelRequest:
    return ModelRequest(
        model=MODEL,
        system=[SystemBlock("You are a test.", cache=True), SystemBlock("[Context: 81% used.]")],
        messages=[{"role": "user", "content": [{"type": "text", "text": "Fix the bug in app.py"}]}],
        tools=[{"name": "read_file", "description": "Read a file.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        max_tokens=1024,
    )


def provider(api: LoopbackAPI, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(api_key="test-key", base_url=api.url, base_delay=0.01, **kwargs)


async def collect(p: AnthropicProvider, req: ModelRequest) -> list[StreamItem]:
    """Everything the provider yields for one call; the SDK client is closed inside the loop."""
    try:
        return [item async for item in p.stream(req)]
    finally:
        await p._client.close()  # the provider has no close(); avoid the SDK closing on a dead loop


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key a request carried: ``x-api-key``, or a bearer token (the 2.x SDK's way)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" else None


def run(p: AnthropicProvider, req: ModelRequest | None = None) -> list[StreamItem]:
    return asyncio.run(collect(p, req or request()))


def run_fresh(reply: Reply) -> list[StreamItem]:
    """The same reply served cleanly by a server of its own, for comparison."""
    with LoopbackAPI() as other:
        other.queue(reply)
        return run(provider(other))


def final(items: list[StreamItem]) -> ModelResponse:
    responses = [i for i in items if isinstance(i, ModelResponse)]
    assert len(responses) == 1, items
    assert items[-1] is responses[0], "the response is the last item"
    return responses[0]


def retries(items: list[StreamItem]) -> list[RetryNotice]:
    return [i for i in items if isinstance(i, RetryNotice)]


def full_reply() -> Reply:
    return Reply(
        [
            thinking("The test says add should sum; the code subtracts.", "sig-abc123"),
            text("I'll read the file first."),
            tool_use("toolu_01", "read_file", {"path": "app.py", "start_line": 1, "end_line": 40}),
        ],
        input_tokens=312,
        output_tokens=87,
        cache_creation_input_tokens=2048,
        cache_read_input_tokens=4096,
        model="claude-sonnet-4-5-20250929",
        pieces=4,
    )


# --- a streamed response ------------------------------------------------------


def test_stream_assembles_text_thinking_and_tool_use(api: LoopbackAPI) -> None:
    api.queue(full_reply())
    items = run(provider(api))
    response = final(items)

    assert response.parts == [
        ThinkingPart(text="The test says add should sum; the code subtracts.", signature="sig-abc123"),
        TextPart(text="I'll read the file first."),
        ToolUsePart(id="toolu_01", name="read_file", input={"path": "app.py", "start_line": 1, "end_line": 40}),
    ]
    assert response.stop_reason == "tool_use"
    assert response.model == "claude-sonnet-4-5-20250929"
    assert response.usage == Usage(
        input_tokens=312, output_tokens=87, cache_creation_input_tokens=2048, cache_read_input_tokens=4096,
        model="claude-sonnet-4-5-20250929", synthetic=False,
    )
    # Deltas arrive as the server sent them, in several pieces, before the response.
    deltas = [i for i in items if isinstance(i, StreamDelta)]
    thinking_pieces = [d.text for d in deltas if d.kind == "thinking"]
    text_pieces = [d.text for d in deltas if d.kind == "text"]
    assert len(thinking_pieces) > 1 and len(text_pieces) > 1
    assert "".join(thinking_pieces) == "The test says add should sum; the code subtracts."
    assert "".join(text_pieces) == "I'll read the file first."
    assert not retries(items)


def test_the_request_sent_is_the_request_body(api: LoopbackAPI) -> None:
    api.queue(Reply([text("ok")]))
    req = request()
    run(provider(api), req)

    [sent] = api.message_requests
    assert sent_key(sent.headers) == "test-key"
    assert "anthropic-version" in sent.headers
    assert sent.body == {**req.body(), "stream": True}
    assert sent.body["system"] == [
        {"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "[Context: 81% used.]"},
    ]


def test_end_turn_text_only(api: LoopbackAPI) -> None:
    api.queue(Reply([text("All done.")], input_tokens=50, output_tokens=5))
    response = final(run(provider(api)))
    assert response.parts == [TextPart(text="All done.")]
    assert response.stop_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (50, 5)
    assert response.model == MODEL  # the server echoes the requested model


def test_loopback_non_streaming_reply_parses_with_the_sdk(api: LoopbackAPI) -> None:
    """The fake itself: its JSON reply is a valid SDK Message with the same blocks as the stream."""
    api.queue(full_reply())
    p = provider(api)

    async def create() -> Any:
        try:
            return await p._client.messages.create(**request().body())
        finally:
            await p._client.close()

    message = asyncio.run(create())
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[2].input == {"path": "app.py", "start_line": 1, "end_line": 40}
    assert message.usage.cache_read_input_tokens == 4096
    assert "stream" not in api.bodies[0]


def test_count_tokens(api: LoopbackAPI) -> None:
    seen: list[dict[str, Any]] = []

    def count(body: dict[str, Any]) -> int:
        seen.append(body)
        return 4321

    api.count_tokens = count
    p = provider(api)
    req = request()

    async def go() -> int | None:
        try:
            return await p.count_tokens(req)
        finally:
            await p._client.close()

    assert asyncio.run(go()) == 4321
    [sent] = [r for r in api.requests if r.path == "/v1/messages/count_tokens"]
    expected = req.body()
    del expected["max_tokens"]  # count_tokens takes no max_tokens
    assert sent.body == expected == seen[0]


def test_base_url_and_key_from_the_environment(api: LoopbackAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    api.queue(Reply([text("from the env")]))
    response = final(run(AnthropicProvider(base_delay=0.01)))
    assert response.parts == [TextPart(text="from the env")]
    assert [sent_key(r.headers) for r in api.message_requests] == ["env-key"]


# --- errors that are not retried -----------------------------------------------


def test_prompt_too_long_is_context_limit_exceeded(api: LoopbackAPI) -> None:
    api.queue(prompt_too_long(), Reply([text("never sent")]))
    with pytest.raises(ContextLimitExceeded) as info:
        run(provider(api))
    assert str(info.value) == (
        "the model rejected the request (HTTP 400 invalid_request_error: "
        "prompt is too long: 210000 tokens > 200000 maximum)"
    )
    assert len(api.message_requests) == 1, "a too-long prompt is not retried as is"
    assert api.pending == 1


def test_413_request_too_large_is_context_limit_exceeded(api: LoopbackAPI) -> None:
    api.queue(request_too_large(), Reply([text("never sent")]))
    with pytest.raises(ContextLimitExceeded) as info:
        run(provider(api))
    assert str(info.value) == ("the model rejected the request (HTTP 413 request_too_large: "
                               "Request exceeds the maximum allowed number of bytes.)")
    assert len(api.message_requests) == 1 and api.pending == 1


@pytest.mark.parametrize("after_events", [0, 3], ids=["first-event", "mid-stream"])
def test_prompt_too_long_as_an_error_event_in_a_200_stream_is_context_limit_exceeded(
    api: LoopbackAPI, after_events: int
) -> None:
    api.queue(prompt_too_long_in_stream(after_events), Reply([text("never sent")]))
    with pytest.raises(ContextLimitExceeded) as info:
        run(provider(api))
    assert str(info.value) == (
        "the model rejected the request (stream error invalid_request_error: "
        "prompt is too long: 210000 tokens > 200000 maximum)"
    ), "the error names the stream, not an HTTP 200"
    assert len(api.message_requests) == 1 and api.pending == 1


def test_another_invalid_request_error_event_in_a_stream_fails_without_retry(api: LoopbackAPI) -> None:
    refused = ErrorResponse(400, "invalid_request_error", "messages: text content blocks must be non-empty")
    api.queue(StreamError(full_reply(), error=refused), Reply([text("never sent")]))
    with pytest.raises(ProviderError) as info:
        run(provider(api))
    assert not isinstance(info.value, ContextLimitExceeded)
    assert str(info.value) == ("model call failed (stream error invalid_request_error: "
                               "messages: text content blocks must be non-empty)")
    assert len(api.message_requests) == 1


def test_unauthorized_names_the_key_variable(api: LoopbackAPI) -> None:
    api.queue(unauthorized(), Reply([text("never sent")]))
    with pytest.raises(ProviderError) as info:
        run(provider(api))
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert "401" in str(info.value)
    assert len(api.message_requests) == 1


def test_no_key_at_all_names_the_key_variable() -> None:
    with pytest.raises(ProviderError) as info:
        AnthropicProvider(base_url="http://127.0.0.1:9")
    assert "ANTHROPIC_API_KEY" in str(info.value)


def test_other_client_errors_fail_with_the_api_message(api: LoopbackAPI) -> None:
    api.queue(ErrorResponse(400, "invalid_request_error", "messages: roles must alternate"))
    with pytest.raises(ProviderError) as info:
        run(provider(api))
    assert str(info.value) == "model call failed (HTTP 400 invalid_request_error: messages: roles must alternate)"
    assert len(api.message_requests) == 1


# --- retried errors ------------------------------------------------------------


def test_429_with_retry_after_waits_what_the_header_says(api: LoopbackAPI) -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    api.queue(rate_limited(retry_after="7"), Reply([text("after the wait")]))
    items = run(provider(api, sleep=sleep))
    assert [(n.attempt, n.delay, n.reason) for n in retries(items)] == [(1, 7.0, "HTTP 429")]
    assert slept == [7.0]
    assert final(items).parts == [TextPart(text="after the wait")]
    assert len(api.message_requests) == 2
    assert api.bodies[0] == api.bodies[1], "the retry sends the same request"


def test_retry_after_is_capped(api: LoopbackAPI) -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    api.queue(rate_limited(retry_after="3600"), Reply([text("ok")]))
    items = run(provider(api, sleep=sleep))
    assert slept == [60.0]
    assert retries(items)[0].delay == 60.0


def test_429_without_retry_after_backs_off_exponentially(api: LoopbackAPI) -> None:
    api.queue(rate_limited(), rate_limited(), rate_limited(), Reply([text("finally")]))
    items = run(provider(api))
    notices = retries(items)
    assert [n.attempt for n in notices] == [1, 2, 3]
    for notice, base in zip(notices, (0.01, 0.02, 0.04), strict=True):
        assert base <= notice.delay <= base * 1.25, notice  # base × 2^(n-1), plus up to 25% jitter
    assert final(items).parts == [TextPart(text="finally")]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [(overloaded(), "HTTP 529"), (server_error(), "HTTP 500"), (ErrorResponse(503, "api_error", "busy"), "HTTP 503")],
    ids=["529-overloaded", "500", "503"],
)
def test_server_side_errors_are_retried(api: LoopbackAPI, fault: ErrorResponse, reason: str) -> None:
    api.queue(fault, Reply([text("recovered")]))
    items = run(provider(api))
    assert [(n.attempt, n.reason) for n in retries(items)] == [(1, reason)]
    assert final(items).parts == [TextPart(text="recovered")]


def test_overloaded_error_event_inside_a_200_stream_is_retried(api: LoopbackAPI) -> None:
    api.queue(StreamError(full_reply(), after_events=5), full_reply())
    items = run(provider(api))
    [notice] = retries(items)
    assert "overloaded_error" in notice.reason
    assert final(items).parts[1] == TextPart(text="I'll read the file first.")


def test_dropped_connection_mid_stream_is_retried_without_duplicates(api: LoopbackAPI) -> None:
    reply = full_reply()
    # Cut inside the text block: thinking and part of the text have streamed.
    api.queue(Dropped(reply, after_events=10), reply)
    items = run(provider(api))
    [notice] = retries(items)
    assert notice.attempt == 1 and notice.reason.startswith("connection:")
    response = final(items)
    assert response.parts == final(run_fresh(reply)).parts
    assert [type(p) for p in response.parts] == [ThinkingPart, TextPart, ToolUsePart]
    # Deltas after the retry notice spell the whole text exactly once: a front end that
    # starts over on a retry shows no duplicated content.
    after = items[items.index(notice) + 1 :]
    assert "".join(d.text for d in after if isinstance(d, StreamDelta) and d.kind == "text") == "I'll read the file first."
    before = items[: items.index(notice)]
    assert any(isinstance(d, StreamDelta) for d in before), "the cut came after some content had streamed"


def test_stream_that_stops_before_message_stop_is_retried(api: LoopbackAPI) -> None:
    reply = full_reply()
    api.queue(Dropped(reply, after_events=8, clean_eof=True), reply)
    items = run(provider(api))
    assert [n.reason for n in retries(items)] == ["connection: StreamCut"]
    assert len(final(items).parts) == 3


def test_malformed_event_is_retried(api: LoopbackAPI) -> None:
    reply = full_reply()
    api.queue(Malformed(reply), reply)
    items = run(provider(api))
    assert len(retries(items)) == 1
    assert final(items).parts[2] == ToolUsePart(
        id="toolu_01", name="read_file", input={"path": "app.py", "start_line": 1, "end_line": 40}
    )


def test_exhausted_retries_raise_a_clear_provider_error(api: LoopbackAPI) -> None:
    api.queue(overloaded(), overloaded(), overloaded(), Reply([text("too late")]))
    notices: list[RetryNotice] = []

    async def go() -> None:
        p = provider(api, max_retries=2)
        try:
            async for item in p.stream(request()):
                if isinstance(item, RetryNotice):
                    notices.append(item)
        finally:
            await p._client.close()

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())
    assert str(info.value) == "model call failed after 3 attempts (HTTP 529 overloaded_error: Overloaded)"
    assert [n.attempt for n in notices] == [1, 2]
    assert len(api.message_requests) == 3
    assert api.pending == 1


def test_exhausted_retries_on_broken_connections(api: LoopbackAPI) -> None:
    reply = full_reply()
    api.queue(*(Dropped(reply, after_events=4) for _ in range(3)))
    with pytest.raises(ProviderError) as info:
        run(provider(api, max_retries=2))
    assert "after 3 attempts" in str(info.value)
    assert len(api.message_requests) == 3

