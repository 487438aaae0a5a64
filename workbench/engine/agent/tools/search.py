"""grep over the workspace in pure Python, so it behaves the same everywhere."""

from __future__ import annotations

import re

from pydantic import BaseModel

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput
from workbench.engine.agent.tools.confined import read_bytes

MAX_MATCHES = 200
MAX_FILE_BYTES = 1024 * 1024


class Grep(Tool):
    name = "grep"
    description = "Search workspace files for a regular expression; prints path:line: text."

    class Input(BaseModel):
        pattern: str
        glob: str = "**/*"

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from exc
        if args.glob.startswith("/") or ".." in args.glob.split("/"):
            raise ToolError("globs are relative to the workspace and may not contain '..'")
        root = ctx.workspace.resolve()
        hits: list[str] = []
        linked = 0
        for path in sorted(root.glob(args.glob)):
            if not path.is_file() or ".git" in path.parts or not path.resolve().is_relative_to(root):
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            try:
                data = read_bytes(ctx, ctx.relative(path), MAX_FILE_BYTES, "too large")
            except ToolError as exc:  # a hard link, or a link swapped in since the listing
                linked += "hard links" in str(exc)
                continue
            if b"\x00" in data[:4096]:
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{ctx.relative(path)}:{number}: {line.strip()}")
                    if len(hits) >= MAX_MATCHES:
                        return ToolOutput("\n".join(hits) + f"\n[stopped at {MAX_MATCHES} matches]")
        note = f"\n[{linked} file(s) with more than one hard link not searched]" if linked else ""
        return ToolOutput(("\n".join(hits) if hits else "no matches") + note)
