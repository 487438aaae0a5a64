"""An engine agent driven turn by turn against the loopback Messages API, for the tests of its model calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent
from workbench.engine.agent.model_call import AgentError
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.store import Store


@dataclass
class AgentSession:
    agent: Agent
    new_provider: Callable[[], AnthropicProvider]
    events: list[ev.Event]
    store: Store

    def send(self, *texts: str) -> list[AgentError]:
        """Send each message in turn, in one event loop with a client of its own; the errors the turns ended with."""
        failures: list[AgentError] = []
        provider = self.agent.provider = self.new_provider()

        async def go() -> None:
            try:
                for message in texts:
                    try:
                        await self.agent.send(message)
                    except AgentError as exc:
                        failures.append(exc)
            finally:
                await provider.aclose()

        asyncio.run(go())
        return failures

    def of(self, kind: type[ev._Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def stored(self) -> list[Message]:
        return self.store.load_messages(self.agent.ctx.session.id)
