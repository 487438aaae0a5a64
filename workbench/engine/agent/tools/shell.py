"""Shell commands in the workspace, with a timeout that kills the whole process group."""

from __future__ import annotations

import asyncio
import os
import signal

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolOutput
from workbench.engine.transcript import credentials

HIDDEN_ENV = credentials.CREDENTIAL_ENV
"""The workbench's own credentials are not passed to commands: an ``env`` would copy them into the transcript."""


class Shell(Tool):
    name = "shell"
    description = "Run a shell command in the workspace; stdout and stderr are returned with the exit code."
    needs_approval = True

    class Input(BaseModel):
        command: str
        timeout: float | None = Field(None, gt=0, le=3600, description="seconds; default from settings")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        timeout = args.timeout or ctx.shell_timeout
        process = await asyncio.create_subprocess_shell(
            args.command,
            cwd=ctx.workspace,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=credentials.child_environment(),
        )
        try:
            out, _ = await asyncio.wait_for(process.communicate(), timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            _kill_group(process.pid)
            await process.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return ToolOutput(f"command timed out after {timeout:g} s and was killed", is_error=True)
        text = out.decode("utf-8", errors="replace")
        code = process.returncode
        return ToolOutput(f"{text}\n[exit code {code}]" if text else f"[exit code {code}]", is_error=code != 0)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
