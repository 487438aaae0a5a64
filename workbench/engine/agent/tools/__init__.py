"""The built-in tools."""

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry
from workbench.engine.agent.tools.files import EditFile, ListFiles, ReadFile, WriteFile
from workbench.engine.agent.tools.search import Grep
from workbench.engine.agent.tools.session import CompactContext, ReadResult, TodoWrite
from workbench.engine.agent.tools.shell import Shell
from workbench.engine.agent.tools.task import Task


def builtin_tools() -> ToolRegistry:
    return ToolRegistry(
        [ReadFile(), WriteFile(), EditFile(), ListFiles(), Grep(), Shell(), TodoWrite(), ReadResult(), CompactContext(), Task()]
    )


__all__ = ["Tool", "ToolContext", "ToolError", "ToolOutput", "ToolRegistry", "builtin_tools"]
