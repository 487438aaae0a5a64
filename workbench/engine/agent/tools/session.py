"""Tools about the session itself: the todo list, offloaded results, compaction."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput


class TodoItem(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"


class TodoWrite(Tool):
    name = "todo_write"
    description = "Replace the session's todo list (each item: content and status)."

    class Input(BaseModel):
        todos: list[TodoItem]

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        ctx.todos[:] = [t.model_dump() for t in args.todos]
        marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
        return ToolOutput("\n".join(f"{marks[t.status]} {t.content}" for t in args.todos) or "(empty todo list)")


class ReadResult(Tool):
    name = "read_result"
    description = "Read part of a stored (offloaded) tool result by its ref_id."

    class Input(BaseModel):
        ref_id: str
        offset: int = Field(0, ge=0)
        limit: int = Field(4096, ge=1, le=65536)

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        content = ctx.read_blob(args.ref_id)
        if content is None:
            raise ToolError(f"no stored result {args.ref_id!r} in this session")
        piece = content[args.offset : args.offset + args.limit]
        end = args.offset + len(piece)
        more = f"\n[{len(content) - end} more characters; continue with offset={end}]" if end < len(content) else ""
        return ToolOutput(piece + more)


class CompactContext(Tool):
    name = "compact_context"
    description = "Compact the conversation now to free context before a large operation."

    class Input(BaseModel):
        pass

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        if ctx.compact is None:
            raise ToolError("compaction is not available here")
        return ToolOutput(await ctx.compact())
