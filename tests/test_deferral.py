"""Tool deferral (spec 001 §5): definitions beyond 10% of the window are held back (MCP first, then skill
tools, least recently used first; built-in never), ``tool_search`` finds and promotes them for the turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from loopback_api import LoopbackAPI, tool_use
from prompt_harness import (
    MODEL,
    Run,
    assert_counted_as_sent,
    breakpoints,
    done,
    reply,
    start,
    system_texts,
)
from pydantic import BaseModel

from workbench.engine.agent.deferral import DeferralManager
from workbench.engine.agent.prompt import deferral_note
from workbench.engine.agent.tools import (
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    builtin_tools,
)
from workbench.engine.agent.tools.tool_search import ToolSearch
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import ModelLimits
from workbench.engine.settings.sections import DeferralConfig, PromptConfig
from workbench.engine.transcript.models import Message, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

SMALL = Config(models={MODEL: ModelLimits(context_window=30_000, max_output=3_000)})
"""Effective window 27,000 tokens: tool definitions may take 2,700 before some are deferred."""


class FakeTool(Tool):
    origin = "mcp"

    class Input(BaseModel):
        city: str = ""

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(f"{self.name} ran for {args.city}")


def fake(name: str, purpose: str, origin: str = "mcp", size: int = 250) -> Tool:
    description = purpose + " " + " ".join(f"detail{i}" for i in range(size))
    cls = type(f"Fake_{name}", (FakeTool,), {"name": name, "description": description, "origin": origin})
    return cls()


EXTERNAL = [
    fake("mcp__weather__forecast", "Weather forecast for a city."),
    fake("mcp__weather__alerts", "Severe weather alerts."),
    fake("mcp__github__create_issue", "Open a GitHub issue."),
    fake("mcp__github__list_pulls", "List pull requests."),
    fake("mcp__db__query", "Run a read-only SQL query."),
]


def with_external(run: Run, tools: list[Tool] = EXTERNAL) -> Run:
    for tool in tools:
        run.agent.tools.tools[tool.name] = tool
    return run


def names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body["tools"]]


def test_deferred_tools_are_left_out_with_a_note_and_counted_apart(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(done())
    run = with_external(start(store, api, workspace, SMALL))
    run.send("hello")
    [body] = run.bodies
    [call] = run.provider.calls
    deferred = [n for n in (t.name for t in EXTERNAL) if n not in names(body)]
    assert deferred, "the definitions are over 10% of the window"
    assert names(body)[: len(builtin_tools().tools)] == list(builtin_tools().tools), "built-in tools are never deferred"
    assert names(body)[-1] == "tool_search"
    assert system_texts(body)[-1] == deferral_note(len(deferred))
    assert system_texts(body)[-1] == f"[{len(deferred)} tools deferred to save context. Use tool_search to find them.]"
    assert "cache_control" not in body["system"][-1]
    assert breakpoints(body)[1] == ["tool_search"]
    # The budget: active tools are the "tools" component; deferred ones are reported apart, not in "used".
    counter = TokenCounter()
    assert_counted_as_sent(body, call, counter)
    by_name = {t.name: t for t in EXTERNAL}
    expected = sum(counter.count_text(json.dumps(by_name[n].definition(), ensure_ascii=False)) for n in deferred)
    assert call.budget.deferred_tool_tokens == expected
    assert "tools_deferred" not in call.budget.components
    assert call.budget.used == sum(call.budget.components.values())
    active = sum(counter.count_text(json.dumps(t.definition(), ensure_ascii=False))
                 for t in run.agent.tools.tools.values() if t.name in names(body))
    assert active <= 0.10 * call.budget.effective_window < active + expected


def test_tool_search_promotes_matches_for_the_rest_of_the_turn(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(
        reply(tool_use("toolu_1", "tool_search", {"query": "weather forecast"})),
        reply(tool_use("toolu_2", "mcp__weather__forecast", {"city": "Oslo"})),
        done("Rain in Oslo."),
        done("Next turn."),
    )
    run = with_external(start(store, api, workspace, SMALL))
    run.send("Weather in Oslo?", "Thanks")
    first, second, third, fourth = run.bodies
    deferred_first = [t.name for t in EXTERNAL if t.name not in names(first)]
    assert "mcp__weather__forecast" in deferred_first and len(deferred_first) > 2
    found = second["messages"][-1]["content"][0]["content"]
    assert found.startswith("2 tools found; callable from your next request in this turn:")
    assert found.index("mcp__weather__forecast:") < found.index("mcp__weather__alerts:")
    assert '"city"' in found, "the schema comes with the match"
    # Promoted: sent after the stable tools (whose breakpoint stays put) for this turn's requests.
    assert names(second)[-2:] == ["mcp__weather__forecast", "mcp__weather__alerts"]
    assert system_texts(second)[-1] == deferral_note(len(deferred_first) - 2), "promoted ones are not deferred"
    # Once used, the forecast tool is the most recently used: no longer a deferral candidate at all.
    assert names(third)[-2:] == ["tool_search", "mcp__weather__alerts"]
    assert "mcp__weather__forecast" in names(third)
    for body in (second, third):
        assert breakpoints(body)[1] == ["tool_search"]
    assert third["messages"][-1]["content"][0]["content"] == "mcp__weather__forecast ran for Oslo"
    # A new user turn: the promotion is over.
    assert "mcp__weather__alerts" not in names(fourth)
    deferred_now = [t.name for t in EXTERNAL if t.name not in names(fourth)]
    assert system_texts(fourth)[-1] == deferral_note(len(deferred_now))


def test_search_without_a_match_lists_the_deferred_tools(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(reply(tool_use("toolu_1", "tool_search", {"query": "kubernetes"})), done())
    run = with_external(start(store, api, workspace, SMALL))
    run.send("Deploy it")
    result = run.bodies[1]["messages"][-1]["content"][0]["content"]
    assert result.startswith("No deferred tool matches 'kubernetes'. Deferred tools: mcp__")
    assert names(run.bodies[1]) == names(run.bodies[0])


def test_under_the_threshold_or_disabled_nothing_is_deferred(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(done(), done())
    big_window = with_external(start(store, api, workspace))
    big_window.send("hello")
    disabled_config = SMALL.model_copy(update={"prompt": PromptConfig(deferral=DeferralConfig(enabled=False))})
    disabled = with_external(start(store, api, workspace, disabled_config))
    disabled.send("hello")
    for body in api.bodies:
        assert {t.name for t in EXTERNAL} <= set(names(body))
        assert "tool_search" not in names(body)
        assert not any(t.startswith("[") and "deferred" in t for t in system_texts(body))


# --- the order ------------------------------------------------------------------------------


def _used(*tool_names: str) -> list[Message]:
    return [Message(id=f"m{i}", session_id="s", index=i, role="assistant",
                    parts=[ToolUsePart(id=f"t{i}", name=name)]) for i, name in enumerate(tool_names)]


def test_mcp_first_then_skill_tools_least_recently_used_first() -> None:
    counter = TokenCounter()
    external = [fake("mcp__a__one", "one"), fake("mcp__a__two", "two"), fake("mcp__b__three", "three"),
                fake("skill_tool", "a tool a skill registered", origin="skill")]
    registry = ToolRegistry([*builtin_tools().tools.values(), *external])
    manager = DeferralManager(DeferralConfig())
    registry.tools["tool_search"] = ToolSearch(manager)
    manager.observe(_used("mcp__a__two", "mcp__b__three", "mcp__a__one", "mcp__a__two"))
    sizes = {t.name: manager.tokens(counter, t.definition()) for t in registry.tools.values()}
    fixed = sum(v for k, v in sizes.items() if k.startswith(("read", "write", "edit", "list", "grep", "shell", "todo",
                                                                 "compact", "task", "tool_search")))

    def deferred_at(room: int) -> list[str]:
        window = int((fixed + room) / 0.10) + 1
        return manager.select(registry, counter, window).deferred

    assert deferred_at(10**6) == []
    one = deferred_at(sizes["mcp__a__two"] + sizes["mcp__a__one"] + sizes["skill_tool"])
    assert one == ["mcp__b__three"], "the least recently used MCP tool goes first"
    assert deferred_at(sizes["mcp__a__two"] + sizes["skill_tool"]) == ["mcp__b__three", "mcp__a__one"]
    assert deferred_at(sizes["skill_tool"]) == ["mcp__b__three", "mcp__a__one", "mcp__a__two"]
    assert deferred_at(0) == ["mcp__b__three", "mcp__a__one", "mcp__a__two", "skill_tool"]
    assert deferred_at(-10**4) == deferred_at(0), "built-in tools are never deferred"
