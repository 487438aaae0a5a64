"""The provider interface: one streamed model call in, stream events out.

The request is already in the Anthropic Messages wire shape (the engine renders
it from the projection), so what a provider sends is exactly what the budget
counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.models import Part, Usage


class ContextLimitExceeded(WorkbenchError):
    """The API said the prompt is too long: run the recovery cascade."""


class ProviderError(WorkbenchError):
    """A model call failed in a way retries did not fix; the message says what to do."""


@dataclass
class SystemBlock:
    text: str
    cache: bool = False
    """A cache breakpoint after this block (``cache_control`` on the Anthropic request)."""


@dataclass
class ModelRequest:
    model: str
    system: list[SystemBlock]
    messages: list[Mapping[str, Any]]
    """Shared with the projection's running wire (see ``blocks.append_wire``): read, never changed."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    estimated_input_tokens: int | None = None
    """The engine's own estimate of this request's input, for providers that report no usage."""

    def body(self) -> dict[str, Any]:
        """The Messages API body, as sent."""
        system = []
        for block in self.system:
            entry: dict[str, Any] = {"type": "text", "text": block.text}
            if block.cache:
                entry["cache_control"] = {"type": "ephemeral"}
            system.append(entry)
        out: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": self.messages}
        if system:
            out["system"] = system
        if self.tools:
            out["tools"] = self.tools
        return out


@dataclass
class StreamDelta:
    """Part of the response as it streams: text or thinking."""

    kind: str  # "text" | "thinking"
    text: str


@dataclass
class RetryNotice:
    attempt: int
    delay: float
    reason: str


@dataclass
class ModelResponse:
    parts: list[Part]
    usage: Usage
    stop_reason: str | None
    model: str


StreamItem = StreamDelta | RetryNotice | ModelResponse


class Provider(Protocol):
    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas and retry notices, then exactly one ModelResponse."""
        ...

    async def count_tokens(self, request: ModelRequest) -> int | None:
        """An exact count of the request's input where the provider can give one."""
        ...


Sleep = Callable[[float], Any]
