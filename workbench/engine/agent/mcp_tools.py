"""MCP servers over stdio: their tools join the agent's registry as ``mcp__<server>__<tool>``.

Configured as::

    [[mcp.servers]]
    name = "github"
    command = "github-mcp-server"
    args = ["stdio"]
    env = { GITHUB_TOKEN = "..." }

:class:`McpConnections` is an async context manager (the runner's ``RunSetup`` enters
it): it starts every server, lists its tools and adds adapters to the registry; on
exit it removes them and stops the servers. A server that fails to start (missing
command, crash, no answer within ``startup_timeout``) is reported as a warning and
the agent carries on without its tools. Each server's stderr goes to a log file
under the data dir, named in the warnings.

Each connection lives in its own task (the official SDK's ``stdio_client`` and
``ClientSession`` are entered and left there), so the context manager may be
entered and left from different tasks; calls go through the session from any task.
The ``mcp`` package is imported only when a server is started.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict

from workbench import locations
from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry
from workbench.engine.settings.sections import McpConfig, McpServerConfig

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import PaginatedRequestParams

TOOL_NAME_LIMIT = 64
"""The Messages API's limit on a tool name (``^[a-zA-Z0-9_-]{1,64}$``)."""






class McpStartError(Exception):
    """A server did not start; the message says why."""


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, made a valid API tool name."""
    name = re.sub(r"[^A-Za-z0-9_\-]", "_", f"mcp__{server}__{tool}")
    return name[:TOOL_NAME_LIMIT]


def describe(exc: BaseException) -> str:
    """The innermost reasons of an exception (task groups wrap them)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(describe(e) for e in exc.exceptions))
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}{f': {exc.filename}' if exc.filename else ''}"
    return str(exc) or type(exc).__name__


def result_text(result: Any) -> tuple[str, bool]:
    """A ``CallToolResult`` as text for the model, and whether it is an error."""
    pieces: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            pieces.append(str(getattr(block, "text", "")))
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            pieces.append(str(getattr(resource, "text", None) or f"[resource {getattr(resource, 'uri', '')}]"))
        else:
            pieces.append(f"[{kind or 'content'} omitted]")
    structured = getattr(result, "structured_content", None)
    if not pieces and structured is not None:
        pieces.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(pieces) or "(no output)", bool(getattr(result, "is_error", False))


class McpTool(Tool):
    """A tool of an MCP server; subclassed per tool (name and description are class attributes)."""

    origin: ClassVar[str] = "mcp"
    description = ""

    class Input(BaseModel):
        model_config = ConfigDict(extra="allow")

    def __init__(self, connection: McpConnection, remote_name: str, schema: dict[str, Any]) -> None:
        self.connection = connection
        self.remote_name = remote_name
        self.schema = schema

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.schema}

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:
        text, is_error = await self.connection.call(self.remote_name, args.model_dump())
        return ToolOutput(text, is_error=is_error)


def adapter(connection: McpConnection, remote: Any) -> McpTool:
    name = tool_name(connection.config.name, str(remote.name))
    raw_schema = getattr(remote, "input_schema", None) or getattr(remote, "inputSchema", None)
    schema = dict(raw_schema or {"type": "object", "properties": {}})
    description = str(getattr(remote, "description", None) or getattr(remote, "title", None) or "")
    cls: type[McpTool] = type(f"McpTool_{name}", (McpTool,), {"name": name, "description": description})
    return cls(connection, str(remote.name), schema)


class McpConnection:
    """One server: started in its own task, stopped by setting an event."""

    def __init__(self, config: McpServerConfig, workspace: Path, log_path: Path, call_timeout: float) -> None:
        self.config = config
        self.workspace = workspace
        self.log_path = log_path
        self.call_timeout = call_timeout
        self.session: ClientSession | None = None
        self.tools: list[McpTool] = []
        self.failure: str | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.config.name}")
        try:
            remote = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            ready.cancel()
            await self.stop(grace=0)
            raise McpStartError(f"no answer within {timeout:g} s") from None
        except Exception as exc:  # the server task's own failure, passed through the future
            await self.stop()
            raise McpStartError(describe(exc)) from exc
        self.tools = [adapter(self, tool) for tool in remote]

    async def _serve(self, ready: asyncio.Future[list[Any]]) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.config.command, args=self.config.args, env=self.config.env or None,
            cwd=self.config.cwd or str(self.workspace),
        )
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    tools: list[Any] = []
                    cursor: str | None = None
                    while True:
                        page = await session.list_tools(
                            params=None if cursor is None else _page(cursor))
                        tools.extend(page.tools)
                        cursor = page.next_cursor
                        if not cursor:
                            break
                    self.session = session
                    ready.set_result(tools)
                    await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - reported: to the starter through the future, or kept as the failure
            if not ready.done():
                ready.set_exception(exc)
            else:
                self.failure = describe(exc)
        finally:
            self.session = None

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        from mcp import MCPError

        session = self.session
        if session is None:
            reason = f" ({self.failure})" if self.failure else ""
            raise ToolError(f"MCP server {self.config.name!r} is not running{reason}; see {self.log_path}")
        try:
            result = await asyncio.wait_for(session.call_tool(name, arguments), self.call_timeout)
        except TimeoutError:
            raise ToolError(f"MCP server {self.config.name!r} did not answer within {self.call_timeout:g} s") from None
        except (MCPError, RuntimeError, OSError) as exc:
            raise ToolError(f"MCP server {self.config.name!r} failed: {describe(exc)}") from exc
        return result_text(result)

    async def stop(self, grace: float = 5.0) -> None:
        """Close the session and the server (the SDK ends the process, killing it if it must)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        if grace > 0:
            done, _ = await asyncio.wait({task}, timeout=grace)
            if done:
                return
        task.cancel()
        await asyncio.wait({task}, timeout=15)


def _page(cursor: str) -> PaginatedRequestParams:
    from mcp.types import PaginatedRequestParams

    return PaginatedRequestParams(cursor=cursor)


class McpConnections:
    """Starts the configured servers and registers their tools for as long as it is entered."""

    def __init__(
        self,
        config: McpConfig,
        registry: ToolRegistry,
        workspace: Path,
        warn: Callable[[str], None] = lambda message: None,
        log_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.workspace = workspace
        self.warn = warn
        self.log_dir = log_dir
        self.connections: dict[str, McpConnection] = {}

    async def __aenter__(self) -> Self:
        servers = [s for s in self.config.servers if s.enabled]
        log_dir = self.log_dir or locations.data_dir() / "logs"
        pending = {
            s.name: McpConnection(s, self.workspace, log_dir / f"mcp-{s.name}.log", self.config.call_timeout)
            for s in servers
        }
        results = await asyncio.gather(
            *(c.start(self.config.startup_timeout) for c in pending.values()), return_exceptions=True)
        for (name, connection), outcome in zip(pending.items(), results, strict=True):
            if isinstance(outcome, McpStartError):
                self.warn(f"MCP server {name!r} did not start ({outcome}); its tools are unavailable. "
                          f"Check [[mcp.servers]] in the config; server output: {connection.log_path}")
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                self.connections[name] = connection
                self._register(connection)
        return self

    def _register(self, connection: McpConnection) -> None:
        for tool in connection.tools:
            if tool.name in self.registry.tools:
                self.warn(f"MCP tool {tool.name} clashes with a tool of the same name; the MCP one is left out")
                continue
            self.registry.tools[tool.name] = tool

    async def __aexit__(self, *exc: object) -> None:
        for connection in self.connections.values():
            for tool in connection.tools:
                if self.registry.tools.get(tool.name) is tool:
                    del self.registry.tools[tool.name]
        await asyncio.gather(*(c.stop() for c in self.connections.values()))
        self.connections.clear()

    @property
    def tools(self) -> list[McpTool]:
        return [t for c in self.connections.values() for t in c.tools]
