"""``task``: run a sub-agent on a self-contained task (spec 000 §4); its answer comes back inline."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput

TASK_TOOL = "task"


class TaskInput(BaseModel):
    prompt: str = Field(description="the complete instructions for the sub-agent")
    agent: str = Field(default="general", description="a short label for the kind of sub-agent (e.g. 'researcher')")
    fresh: bool = Field(
        default=False, description="true: the sub-agent gets only this prompt, no plan files or pinned messages")
    recent_tool_calls: int = Field(
        default=0, ge=0, le=50, description="also pass the last N tool calls and their results")
    tool_outputs: list[str] = Field(default_factory=list, description="tool_use ids whose outputs to pass along")
    files: list[str] = Field(default_factory=list, description="workspace files to read into the sub-agent's context")


class SubagentLauncher(Protocol):
    async def launch(self, request: TaskInput, ctx: ToolContext) -> ToolOutput:
        """Run the sub-agent to the end; its final answer (and where it was saved) is the output."""
        ...


class Task(Tool):
    name = TASK_TOOL
    description = (
        "Run a sub-agent with its own context on a self-contained task and get its final answer. By default "
        "it also sees the project plan and the user's pinned messages; the answer is saved to a file too."
    )
    Input = TaskInput

    def __init__(self, launcher: SubagentLauncher | None = None) -> None:
        self.launcher = launcher

    async def run(self, args: TaskInput, ctx: ToolContext) -> ToolOutput:
        if self.launcher is None:
            raise ToolError("sub-agents are not available here (the agent was not started by the engine's runner)")
        return await self.launcher.launch(args, ctx)
