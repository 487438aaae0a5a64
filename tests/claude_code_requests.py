"""Real Claude Code requests replayed through the proxy, for the tests of what a proxied agent was sent.

The four request bodies Claude Code 2.1.197 sent in a two-question session (with one MCP server), recorded
from the loopback Messages API (``fixtures/README.md`` says how). :func:`steered_session` replays the last
two as requests 1 and 2 of a fresh proxied session, through the proxy as a real server, with the real
anthropic SDK; between them the first Read result is pruned, so request 2 goes upstream with a placeholder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anthropic
from helpers import FIXTURES_DIR
from loopback_api import Reply
from proxy_support import Proxied, proxied

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store

FIXTURE = FIXTURES_DIR / "claude-code-2.1.197-requests.json"
SDK_PARAMS = frozenset({"model", "messages", "system", "tools", "metadata", "max_tokens", "thinking", "stream"})
"""What ``messages.create`` takes by name; the rest of a body goes as ``extra_body``."""
PRUNED_AT = 3
"""The message of request 1 pruned before request 2: the first Read's result."""


@cache
def _recorded() -> str:
    return FIXTURE.read_text(encoding="utf-8")


def recorded() -> list[dict[str, Any]]:
    """The four bodies, in the order Claude Code sent them (a fresh copy each call)."""
    bodies: list[dict[str, Any]] = json.loads(_recorded())
    return bodies


def send(url: str, body: dict[str, Any]) -> None:
    """One request as Claude Code sent it, through the SDK, its stream read to the end."""
    client = anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0)
    named = {key: value for key, value in body.items() if key in SDK_PARAMS}
    extra = {key: value for key, value in body.items() if key not in SDK_PARAMS}
    for _ in client.messages.create(**named, extra_body=extra):
        pass


def answer(after: dict[str, Any], at: int, **usage: int) -> Reply:
    """The model's answer: the assistant message the agent's next request echoes at ``at``."""
    return Reply(list(after["messages"][at]["content"]), **usage)


@dataclass(frozen=True)
class SteeredSession:
    proxy: Proxied
    session_id: str
    pruned_id: str
    """The transcript message whose tool result was pruned."""


@contextmanager
def steered_session(tmp_path: Path) -> Iterator[SteeredSession]:
    """A proxied Claude Code session of two requests, the second steered (a Read result pruned)."""
    bodies = recorded()
    final = {"role": "assistant", "content": [{"type": "text", "text": "The file says the word is pelican."}]}
    with proxied(tmp_path) as p:
        p.api.queue(answer(bodies[3], 6, input_tokens=12, cache_creation_input_tokens=9_800, output_tokens=40),
                    Reply(final["content"], input_tokens=30, cache_read_input_tokens=9_700,
                          cache_creation_input_tokens=150, output_tokens=12))
        send(p.url, bodies[2])
        p.settle()
        with Store(p.db) as store:
            [session] = [s for s, _ in store.list_sessions() if s.source_format == "proxy"]
            ctx = SessionContext.load(store, session.id, Config())
            target = ctx.messages[PRUNED_AT]
            assert target.tool_results(), "the first Read's result"
            config = Config().strategies
            apply(store, ctx, measure(ctx, plan_action(ctx, "prune", target, config)))
        send(p.url, bodies[3])
        p.settle()
        yield SteeredSession(proxy=p, session_id=session.id, pruned_id=target.id)
