"""MCP tools: real stdio servers (``mcp_server_fixture.py``, built with the official package) listed,
called through the agent, and servers that fail to start reported without stopping the agent."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from loopback_api import LoopbackAPI, tool_use
from prompt_harness import done, reply, start

from workbench.engine.agent.mcp_tools import McpConnections, McpTool, tool_name
from workbench.engine.agent.tools import builtin_tools
from workbench.engine.settings.config import Config
from workbench.engine.settings.sections import McpConfig, McpServerConfig
from workbench.engine.transcript.store import Store

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

FIXTURE = Path(__file__).resolve().parent / "mcp_server_fixture.py"


def fixture_server(name: str = "fixture", **env: str) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=[str(FIXTURE)], env=env)


def result_blocks(body: dict) -> list[dict]:
    return [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]


def test_server_tools_are_listed_and_called_through_the_session(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    config = Config(mcp=McpConfig(servers=[fixture_server(FIXTURE_GREETING="hello from the config")]))
    api.queue(
        reply(tool_use("toolu_1", "mcp__fixture__add", {"a": 2, "b": 3}),
              tool_use("toolu_2", "mcp__fixture__greeting", {}),
              tool_use("toolu_3", "mcp__fixture__refuse", {"reason": "not today"}),
              tool_use("toolu_4", "mcp__fixture__add", {"a": "two"})),
        done("2 + 3 = 5."),
    )
    run = start(store, api, workspace, config)
    run.send("Add 2 and 3")
    first, second = run.bodies
    tools = {t["name"]: t for t in first["tools"]}
    assert [n for n in tools if n.startswith("mcp__")] == [
        "mcp__fixture__add", "mcp__fixture__greeting", "mcp__fixture__refuse", "mcp__fixture__crash"]
    assert tools["mcp__fixture__add"]["description"] == "Add two integers."
    assert tools["mcp__fixture__add"]["input_schema"]["required"] == ["a", "b"]
    assert list(tools)[: len(builtin_tools().tools)] == list(builtin_tools().tools)
    add, greeting, refused, invalid = result_blocks(second)
    assert add["content"] == "5" and "is_error" not in add
    assert greeting["content"] == "hello from the config"
    assert refused["is_error"] is True and "refused: not today" in refused["content"]
    assert invalid["is_error"] is True
    assert not run.warnings("mcp")
    # Left: the tools are gone from the registry, the session is closed.
    assert not [n for n in run.agent.tools.tools if n.startswith("mcp__")]
    assert run.setup.mcp is not None and not run.setup.mcp.connections


def test_servers_that_fail_to_start_are_warnings_and_the_agent_works(
    store: Store, api: LoopbackAPI, workspace: Path, workbench_home: Path
) -> None:
    servers = [
        McpServerConfig(name="missing", command=str(workspace / "no-such-server")),
        McpServerConfig(name="quits", command=sys.executable, args=["-c", "import sys; sys.exit(3)"]),
        McpServerConfig(name="silent", command=sys.executable, args=["-c", "import time; time.sleep(60)"]),
        fixture_server(),
    ]
    # Long enough for the fixture server to start on a loaded machine; the silent one waits it out.
    config = Config(mcp=McpConfig(servers=servers, startup_timeout=15))
    api.queue(reply(tool_use("toolu_1", "mcp__fixture__add", {"a": 1, "b": 1})), done("Two."))
    run = start(store, api, workspace, config)
    run.send("1 + 1?")
    warnings = run.warnings("mcp")
    assert len(warnings) == 3, warnings
    missing, quits, silent = warnings
    assert missing.startswith("MCP server 'missing' did not start (No such file or directory")
    assert quits.startswith("MCP server 'quits' did not start (Connection closed)")
    assert silent.startswith("MCP server 'silent' did not start (no answer within 15 s)")
    log = workbench_home / "data" / "logs" / "mcp-silent.log"
    assert all("its tools are unavailable" in w and "[[mcp.servers]]" in w for w in warnings)
    assert str(log) in silent
    names = [t["name"] for t in run.bodies[0]["tools"]]
    assert "mcp__fixture__add" in names and not any(n.startswith(("mcp__missing", "mcp__quits")) for n in names)
    assert result_blocks(run.bodies[1])[0]["content"] == "2"
    assert run.agent.ctx.messages[-1].text == "Two."


def test_a_server_that_dies_mid_session_gives_error_results(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    config = Config(mcp=McpConfig(servers=[fixture_server()]))
    api.queue(
        reply(tool_use("toolu_1", "mcp__fixture__crash", {})),
        reply(tool_use("toolu_2", "mcp__fixture__add", {"a": 1, "b": 2})),
        done("The server is gone."),
    )
    run = start(store, api, workspace, config)
    run.send("Crash it")
    [crashed] = result_blocks(run.bodies[1])
    [after] = result_blocks(run.bodies[2])
    assert crashed["is_error"] is True and "MCP server 'fixture'" in crashed["content"]
    assert after["is_error"] is True and "MCP server 'fixture'" in after["content"]
    assert run.agent.ctx.messages[-1].text == "The server is gone."


def test_connections_on_their_own(workspace: Path, tmp_path: Path) -> None:
    registry = builtin_tools()
    warnings: list[str] = []

    async def go() -> None:
        async with McpConnections(McpConfig(servers=[fixture_server("calc")]), registry, workspace, warnings.append,
                                  log_dir=tmp_path / "logs") as connections:
            tool = registry.get("mcp__calc__add")
            assert isinstance(tool, McpTool) and tool.origin == "mcp"
            assert [t.name for t in connections.tools][:2] == ["mcp__calc__add", "mcp__calc__greeting"]
            out = await registry.execute("mcp__calc__add", {"a": 40, "b": 2}, None)  # type: ignore[arg-type]
            assert (out.text, out.is_error) == ("42", False)
        assert registry.get("mcp__calc__add") is None

    asyncio.run(go())
    assert warnings == []


def test_tool_names_are_valid_api_names() -> None:
    assert tool_name("git hub", "issues.list") == "mcp__git_hub__issues_list"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")


def test_server_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique: twice"):
        McpConfig(servers=[McpServerConfig(name="twice", command="a"), McpServerConfig(name="twice", command="b")])
