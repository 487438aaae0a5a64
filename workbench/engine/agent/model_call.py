"""One model call of the agent loop: the stream turned into engine events, and the recovery when the API
refuses the request as too long (``recovery``: send again after each step until it is accepted or nothing is
left to try; then undo what the recovery changed and fail in one line)."""

from __future__ import annotations

from collections.abc import Callable

from workbench.engine import events as ev
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.recovery import Recovery
from workbench.engine.providers.base import (
    ContextLimitExceeded,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderError,
    RetryNotice,
    StreamDelta,
)


class AgentError(WorkbenchError):
    """The turn could not complete; the events say why."""


async def stream_response(provider: Provider, request: ModelRequest, emit: ev.EventSink) -> ModelResponse:
    """Send ``request``; text, thinking and retries become events as they arrive."""
    async for item in provider.stream(request):
        match item:
            case StreamDelta(kind="text", text=text):
                emit(ev.TextDelta(text=text))
            case StreamDelta(kind="thinking", text=text):
                emit(ev.ThinkingDelta(text=text))
            case RetryNotice(attempt=attempt, delay=delay, reason=reason):
                emit(ev.Retry(attempt=attempt, delay=delay, reason=reason))
            case ModelResponse():
                return item
    raise ProviderError("the model stream ended without a response")


async def call_model(
    provider: Provider,
    build: Callable[[], ModelRequest],
    recovery: Recovery,
    emit: ev.EventSink,
    on_rollback: Callable[[], None] = lambda: None,
) -> ModelResponse:
    """The response to the request ``build`` makes of the context as it is now, recovering from "too long".

    A request the recovery cannot make fit, or any other failure on the way (retries exhausted, the run
    cancelled), undoes the recovery's changes before it ends the call: ``on_rollback`` runs after the undo,
    and for a failure the error event comes last.
    """
    try:
        while True:
            try:
                return await stream_response(provider, build(), emit)
            except ContextLimitExceeded as exc:
                if recovery.has_more:
                    emit(ev.Warning(kind="context_limit", message=f"{exc}; recovering"))
                    if await recovery.next():
                        continue
                raise AgentError(f"{exc}; recovery did not free enough context ({recovery.summary()})") from exc
    except BaseException as exc:
        if recovery.rollback():
            on_rollback()
        if isinstance(exc, AgentError | ProviderError):
            emit(ev.ErrorEvent(message=str(exc)))
        if isinstance(exc, ProviderError):
            raise AgentError(str(exc)) from exc
        raise
