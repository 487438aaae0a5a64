"""File tools, confined to the workspace: read, write, edit, list."""

from __future__ import annotations

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput
from workbench.engine.agent.tools.confined import read_bytes, write_bytes

MAX_READ_BYTES = 2 * 1024 * 1024


def _read_text(ctx: ToolContext, path: str) -> str:
    ctx.resolve(path, must_exist=True)
    data = read_bytes(ctx, path, MAX_READ_BYTES,
                      f"{path} is larger than {MAX_READ_BYTES // 1024 // 1024} MiB; read it with shell tools")
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path} is a binary file")
    return data.decode("utf-8", errors="replace")


class ReadFile(Tool):
    name = "read_file"
    description = "Read a text file in the workspace, optionally a range of lines (1-based, inclusive)."
    path_argument = "path"

    class Input(BaseModel):
        path: str = Field(description="file path relative to the workspace")
        start_line: int | None = Field(None, ge=1)
        end_line: int | None = Field(None, ge=1)

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        lines = _read_text(ctx, args.path).splitlines()
        start = (args.start_line or 1) - 1
        end = args.end_line or len(lines)
        numbered = [f"{n:>6}\t{line}" for n, line in enumerate(lines[start:end], start=start + 1)]
        return ToolOutput("\n".join(numbered) if numbered else "(empty file)")


class WriteFile(Tool):
    name = "write_file"
    description = "Create or overwrite a text file in the workspace."
    needs_approval = True
    path_argument = "path"

    class Input(BaseModel):
        path: str
        content: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        full = ctx.resolve(args.path)
        if full.is_dir():
            raise ToolError(f"{args.path} is a directory")
        write_bytes(ctx, args.path, args.content.encode("utf-8"))
        return ToolOutput(f"wrote {len(args.content.encode())} bytes to {ctx.relative(full)}")


class EditFile(Tool):
    name = "edit_file"
    description = "Replace an exact, unique piece of text in a workspace file with new text."
    needs_approval = True
    path_argument = "path"

    class Input(BaseModel):
        path: str
        old: str = Field(description="text to replace; must occur exactly once")
        new: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        text = _read_text(ctx, args.path)
        count = text.count(args.old) if args.old else 0
        if count != 1:
            raise ToolError(f"{args.path}: the text to replace occurs {count} times; it must occur exactly once")
        full = ctx.resolve(args.path)
        write_bytes(ctx, args.path, text.replace(args.old, args.new, 1).encode("utf-8"))
        return ToolOutput(f"edited {ctx.relative(full)}")


class ListFiles(Tool):
    name = "list_files"
    description = "List workspace files matching a glob pattern (e.g. 'src/**/*.py')."

    class Input(BaseModel):
        pattern: str = "**/*"

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        if args.pattern.startswith("/") or ".." in args.pattern.split("/"):
            raise ToolError("patterns are relative to the workspace and may not contain '..'")
        root = ctx.workspace.resolve()
        found = sorted(
            ctx.relative(p) for p in root.glob(args.pattern)
            if p.is_file() and p.resolve().is_relative_to(root) and ".git" not in p.parts
        )
        return ToolOutput("\n".join(found[:1000]) if found else "no files match")
