"""The Anthropic provider, through the official SDK, streaming.

The SDK's own retries are off: the engine retries 429 / 529 / 5xx and dropped
connections itself so that each retry is visible to the user as an event and
``retry-after`` is honoured.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anthropic
import httpx2 as _httpx  # the SDK's HTTP client (anthropic 2.x)

from workbench.engine.errors import reason_of
from workbench.engine.providers.base import (
    ContextLimitExceeded,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RetryNotice,
    StreamDelta,
    StreamItem,
)
from workbench.engine.settings.sections import ProviderConfig
from workbench.engine.transcript import credentials
from workbench.engine.transcript.models import Part, Session, TextPart, ThinkingPart, ToolUsePart, Usage

API_KEY_ENV = "ANTHROPIC_API_KEY"
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
RETRYABLE_ERROR_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
"""Error types that are retried when they arrive as an ``error`` event inside a 200 stream."""
MAX_RETRY_AFTER = 60.0


class StreamCut(Exception):
    """The response stopped mid-way; nothing of it is kept and the request is retried."""


TOO_LARGE_ERROR_TYPES = {"request_too_large"}
"""The body is over the API's size limit (HTTP 413): as much a request to make smaller as "prompt is too long"."""


def _is_too_long(exc: anthropic.APIStatusError) -> bool:
    """The request does not fit: a 400 "prompt is too long", a 413, or either as an ``error`` event inside a
    200 stream (the SDK gives that one the stream's status, 200)."""
    if exc.status_code == 413 or _error_type(exc) in TOO_LARGE_ERROR_TYPES:
        return True
    return exc.status_code in (200, 400) and "prompt is too long" in str(exc).lower()


def _error_type(exc: anthropic.APIStatusError) -> str | None:
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _describe(exc: anthropic.APIStatusError) -> str:
    """``HTTP 529 overloaded_error: Overloaded`` from the API's error body, not the SDK's dict repr."""
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    # An ``error`` event inside a stream arrives with the stream's 200: say where it came from instead.
    where = "stream error" if exc.status_code == 200 else f"HTTP {exc.status_code}"
    if isinstance(error, dict) and error.get("message"):
        return f"{where} {error.get('type', 'error')}: {error['message']}"
    return f"{where}: {exc.message}"


def _retryable(exc: anthropic.APIStatusError) -> bool:
    return exc.status_code in RETRYABLE_STATUS or _error_type(exc) in RETRYABLE_ERROR_TYPES


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        max_retries: int = 4,
        base_delay: float = 1.0,
        timeout: float = 600.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        key = api_key or credentials.get(API_KEY_ENV)
        if not key:
            raise ProviderError(f"no API key: set {API_KEY_ENV} (or use the scripted provider, which needs none)")
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=0,
            timeout=timeout,
        )
        credentials.remember(key)
        credentials.take_from_environment()  # the client holds it: nothing started from now on inherits it
        self.max_retries = max_retries
        self.base_delay = base_delay
        self._sleep = sleep

    @classmethod
    def from_config(cls, settings: ProviderConfig) -> AnthropicProvider:
        """The provider with the configured timeout and retries; key and endpoint from the environment."""
        return cls(max_retries=settings.max_retries, base_delay=settings.base_delay, timeout=settings.timeout)

    @classmethod
    def summariser_for(cls, settings: ProviderConfig, session: Session) -> AnthropicProvider:
        """The model that summarises ``session`` (the command line's ``--summarizer llm``, the app's compaction
        pane): a proxied session's through the upstream its agent uses, with the key from this process's
        environment (never one from the agent's traffic, which the proxy does not keep)."""
        upstream = session.metadata.get("upstream") if session.source_format == "proxy" else None
        return cls(base_url=upstream if isinstance(upstream, str) else None, max_retries=settings.max_retries,
                   base_delay=settings.base_delay, timeout=settings.timeout)

    async def aclose(self) -> None:
        """Close the HTTP client while its event loop is still running."""
        await self._client.close()

    async def count_tokens(self, request: ModelRequest) -> int | None:
        body = request.body()
        body.pop("max_tokens", None)
        result = await self._client.messages.count_tokens(**body)
        return int(result.input_tokens)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        attempt = 0
        while True:
            try:
                async for item in self._stream_once(request):
                    yield item
                return
            except anthropic.APIStatusError as exc:
                if _is_too_long(exc):
                    raise ContextLimitExceeded(f"the model rejected the request ({_describe(exc)})") from exc
                if exc.status_code in (401, 403):
                    raise ProviderError(
                        f"the API refused the key ({exc.status_code}); check {API_KEY_ENV}"
                    ) from exc
                if not _retryable(exc) or attempt >= self.max_retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise ProviderError(f"model call failed{tries} ({_describe(exc)})") from exc
                reason = f"HTTP {exc.status_code}" if exc.status_code != 200 else f"stream error: {_error_type(exc)}"
                delay = _retry_after(exc)
            except (
                anthropic.APIConnectionError,
                anthropic.APIResponseValidationError,
                _httpx.TransportError,  # the connection broke while the stream was being read
                StreamCut,
                ValueError,
            ) as exc:
                if attempt >= self.max_retries:
                    raise ProviderError(f"model call failed after {attempt + 1} attempts: {reason_of(exc)}") from exc
                reason = f"connection: {type(exc).__name__}"
                delay = None
            attempt += 1
            if delay is None:
                delay = self.base_delay * 2 ** (attempt - 1) * (1 + random.random() / 4)
            yield RetryNotice(attempt=attempt, delay=delay, reason=reason)
            await self._sleep(delay)

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        blocks: dict[int, dict[str, Any]] = {}
        usage: dict[str, int] = {}
        stop_reason: str | None = None
        model = request.model
        completed = False
        stream = await self._client.messages.create(**request.body(), stream=True)
        async for event in stream:
            match event.type:
                case "message_start":
                    model = event.message.model or model
                    usage.update(_usage_dict(event.message.usage))
                case "content_block_start":
                    blocks[event.index] = event.content_block.model_dump()
                    blocks[event.index]["_json"] = ""
                case "content_block_delta":
                    block = blocks.setdefault(event.index, {"type": "text", "text": "", "_json": ""})
                    delta = event.delta
                    if delta.type == "text_delta":
                        block["text"] = block.get("text", "") + delta.text
                        yield StreamDelta("text", delta.text)
                    elif delta.type == "thinking_delta":
                        block["thinking"] = block.get("thinking", "") + delta.thinking
                        yield StreamDelta("thinking", delta.thinking)
                    elif delta.type == "signature_delta":
                        block["signature"] = block.get("signature", "") + delta.signature
                    elif delta.type == "input_json_delta":
                        block["_json"] += delta.partial_json
                case "message_delta":
                    stop_reason = event.delta.stop_reason or stop_reason
                    usage.update({k: v for k, v in _usage_dict(event.usage).items() if v})
                case "message_stop":
                    completed = True
        if not completed:
            raise StreamCut("the stream ended before the message was complete")
        yield ModelResponse(
            parts=[p for p in (_part(blocks[i]) for i in sorted(blocks)) if p is not None],
            usage=Usage(
                model=model,
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                cache_creation_input_tokens=usage.get("cache_creation_input_tokens", 0),
                cache_read_input_tokens=usage.get("cache_read_input_tokens", 0),
                cache_creation_1h_input_tokens=usage.get("cache_creation_1h_input_tokens", 0),
            ),
            stop_reason=stop_reason,
            model=model,
        )


def _usage_dict(raw: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = getattr(raw, key, None)
        if isinstance(value, int):
            out[key] = value
    one_hour = getattr(getattr(raw, "cache_creation", None), "ephemeral_1h_input_tokens", None)
    if isinstance(one_hour, int):
        out["cache_creation_1h_input_tokens"] = one_hour
    return out


def _part(block: dict[str, Any]) -> Part | None:
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=block.get("text", ""))
    if kind == "thinking":
        return ThinkingPart(text=block.get("thinking", ""), signature=block.get("signature", ""))
    if kind == "redacted_thinking":
        return ThinkingPart(redacted=True)
    if kind == "tool_use":
        raw = block.get("_json") or ""
        try:
            tool_input = json.loads(raw) if raw else dict(block.get("input") or {})
        except json.JSONDecodeError as exc:
            raise ValueError(f"tool input arrived malformed: {exc}") from exc
        return ToolUsePart(id=block.get("id", ""), name=block.get("name", ""), input=tool_input)
    return None
