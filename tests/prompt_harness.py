"""Driving the real agent (``prepare_run``) against the loopback Messages API, for the prompt tests.

Every request body the server received is kept (``api.bodies``); the provider also
notes the engine's fixed items and budget at each call of the main agent, so a test
can compare what was counted with what was sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopback_api import LoopbackAPI, Reply, text

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent, approve_all
from workbench.engine.agent.runner import RunSetup, prepare_run
from workbench.engine.agent.wire import SYSTEM_KINDS
from workbench.engine.context.budget import Budget
from workbench.engine.context.projection import ContextItem
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.providers.base import ModelRequest
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

MODEL = "claude-sonnet-4-5"


@dataclass
class Call:
    request: ModelRequest
    items: tuple[ContextItem, ...]
    budget: Budget
    session_id: str


class RecordingProvider(AnthropicProvider):
    """The real provider; notes the calling agent's fixed items and budget at each call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.agents: list[Agent] = []
        self.calls: list[Call] = []

    async def stream(self, request: ModelRequest):  # type: ignore[override]
        agent = self._caller(request)
        if agent is not None:
            self.calls.append(Call(request, agent.ctx.fixed_items, agent.ctx.budget(), agent.ctx.session.id))
        async for item in super().stream(request):
            yield item

    def _caller(self, request: ModelRequest) -> Agent | None:
        for agent in self.agents:  # the last message differs by its cache mark (``wire.marked``)
            wire = agent.ctx.view().wire
            if len(wire) == len(request.messages) and wire[:-1] == tuple(request.messages[:-1]):
                return agent
        return None

    async def close(self) -> None:
        await self._client.close()


@dataclass
class Run:
    setup: RunSetup
    provider: RecordingProvider
    api: LoopbackAPI
    events: list[ev.Event] = field(default_factory=list)

    @property
    def agent(self) -> Agent:
        return self.setup.agent

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return self.api.bodies

    def warnings(self, kind: str | None = None) -> list[str]:
        return [e.message for e in self.events if isinstance(e, ev.Warning) and (kind is None or e.kind == kind)]

    def send(self, *messages: str, between: Callable[[Agent], Awaitable[None] | None] | None = None) -> None:
        """Each message in turn, in one event loop, with the MCP servers (if any) running."""

        async def go() -> None:
            try:
                async with self.setup:
                    for number, message in enumerate(messages):
                        if number and between is not None:
                            result = between(self.agent)
                            if result is not None:
                                await result
                        await self.agent.send(message)
            finally:
                await self.provider.close()

        asyncio.run(go())


def start(store: Store, api: LoopbackAPI, workspace: Path, config: Config | None = None) -> Run:
    events: list[ev.Event] = []
    provider = RecordingProvider(api_key="test-key", base_url=api.url, base_delay=0.01)
    setup = prepare_run(store, config or Config(), session_id=None, scripted=None, model=MODEL, workspace=workspace,
                        approve=approve_all, on_event=events.append, provider=provider)
    provider.agents.append(setup.agent)
    return Run(setup, provider, api, events)


def reply(*blocks: dict[str, Any], cache_read: int = 0, cache_write: int = 0, input_tokens: int = 100) -> Reply:
    return Reply(list(blocks), input_tokens=input_tokens, cache_read_input_tokens=cache_read,
                 cache_creation_input_tokens=cache_write)


def done(message: str = "Done.") -> Reply:
    return reply(text(message))


def sent(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "stream"}


def system_texts(body: dict[str, Any]) -> list[str]:
    return [block["text"] for block in body.get("system", [])]


def breakpoints(body: dict[str, Any]) -> tuple[list[int], list[str]]:
    """Indexes of system blocks and names of tools that carry ``cache_control``."""
    system = [i for i, block in enumerate(body.get("system", [])) if "cache_control" in block]
    tools = [tool["name"] for tool in body.get("tools", []) if "cache_control" in tool]
    return system, tools


def section(body: dict[str, Any], call: Call, kind: str) -> list[str]:
    """The texts of the system blocks of one kind, matched to the call's items by position."""
    kinds = [item.kind for item in call.items if item.kind in SYSTEM_KINDS]
    texts = system_texts(body)
    assert len(kinds) == len(texts), (kinds, texts)
    return [t for k, t in zip(kinds, texts, strict=True) if k == kind]


def assert_counted_as_sent(body: dict[str, Any], call: Call, counter: TokenCounter | None = None) -> None:
    """Each system/project/memory/skills/tools item's tokens are the count of exactly what was sent,
    and the budget's components are their sums."""
    counter = counter or TokenCounter()
    system_items = [item for item in call.items if item.kind in SYSTEM_KINDS]
    blocks = body.get("system", [])
    assert len(system_items) == len(blocks)
    for item, block in zip(system_items, blocks, strict=True):
        assert item.tokens == counter.count_text(block["text"]), item.kind
        assert item.cacheable == ("cache_control" in block)
    [tools] = [item for item in call.items if item.kind == "tools"]
    assert tools.tokens == counter.count_text(json.dumps(body["tools"], ensure_ascii=False))
    for kind in ("system", "project", "memory", "skills", "tools"):
        expected = sum(item.tokens for item in call.items if item.kind == kind)
        assert call.budget.components.get(kind, 0) == expected, kind
