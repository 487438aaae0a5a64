"""A small MCP server for the tests, run as a subprocess over stdio: ``python mcp_server_fixture.py``.

Built with the official ``mcp`` package (``MCPServer``, formerly FastMCP).
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def greeting() -> str:
    """The greeting configured in the server's environment."""
    return os.environ.get("FIXTURE_GREETING", "(no greeting set)")


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
