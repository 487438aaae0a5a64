"""Tools the agent can call: a small class each, with a pydantic input model as its schema."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from workbench.engine.errors import reason_of


class ToolError(Exception):
    """A failure the model should read as the tool's (error) result."""


@dataclass
class ToolOutput:
    text: str
    is_error: bool = False


@dataclass
class ToolContext:
    """What a tool may reach: its workspace, and the session's own stored results."""

    workspace: Path
    session_id: str = ""
    read_blob: Callable[[str], str | None] = lambda ref: None
    compact: Callable[[], Awaitable[str]] | None = None
    shell_timeout: float = 120.0
    todos: list[dict[str, str]] = field(default_factory=list)

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        """``path`` inside the workspace, or a ToolError: no ``..``, absolute path or symlink leads out."""
        root = self.workspace.resolve()
        candidate = Path(path)
        try:
            full = (candidate if candidate.is_absolute() else root / candidate).resolve()
        except RuntimeError as exc:  # what pathlib raises for a loop of links (``loop -> loop``)
            raise ToolError(f"{path}: a loop of symbolic links; not followed") from exc
        if full != root and not full.is_relative_to(root):
            raise ToolError(f"{path}: outside the workspace; only files under the workspace can be used")
        if must_exist and not full.exists():
            raise ToolError(f"{path}: no such file or directory")
        if full.exists() and not (full.is_file() or full.is_dir()):
            raise ToolError(f"{path}: not a regular file")
        return full

    def relative(self, path: Path) -> str:
        return os.path.relpath(path, self.workspace.resolve())


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    needs_approval: ClassVar[bool] = False
    """Shell and write tools ask the user first."""
    path_argument: ClassVar[str | None] = None

    def definition(self) -> dict[str, Any]:
        schema = self.Input.model_json_schema()
        schema.pop("title", None)
        return {"name": self.name, "description": self.description, "input_schema": schema}

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: dict[str, Tool] = {t.name: t for t in tools}

    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition() for t in self.tools.values()]

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    async def execute(self, name: str, raw_input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutput(f"unknown tool {name!r}; available: {', '.join(self.tools)}", is_error=True)
        try:
            args = tool.Input.model_validate(raw_input)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
            return ToolOutput(f"invalid input for {name}: {problems}", is_error=True)
        try:
            return await tool.run(args, ctx)
        except ToolError as exc:
            return ToolOutput(str(exc), is_error=True)
        except OSError as exc:
            return ToolOutput(f"{name} failed: {exc.strerror or reason_of(exc)}", is_error=True)
        except ValueError as exc:  # an argument the OS or pathlib refuses: a NUL byte in a path, an empty glob
            return ToolOutput(f"{name} failed: {reason_of(exc)}", is_error=True)
