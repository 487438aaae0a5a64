"""PreCompact and SessionStart hooks (spec 004), run like Claude Code hooks.

A hook is a shell command (from config) or a Python callable. A command gets the event as JSON on
stdin; exit 0 is success, and its stdout may be JSON: ``{"instructions": "..."}`` adds to the
summariser's instructions, ``{"cancel": true, "reason": "..."}`` (or Claude Code's
``{"continue": false, "stopReason": "..."}``) cancels the compaction, ``{"additionalContext": ...}``
is kept as context. Plain stdout counts as instructions (PreCompact) or context (SessionStart).
Any other exit status, a timeout, or a callable that raises is a failure: reported with the hook's
stderr, never ignored. A callable receives the same payload dict and returns None, such a dict, or
a :class:`HookReply` (or an awaitable of one).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from workbench.engine.settings.compaction import CompactionHooks, HookCommand
from workbench.engine.transcript import credentials

HookEvent = Literal["PreCompact", "SessionStart"]
STDERR_SHOWN = 2_000


@dataclass
class HookReply:
    instructions: str | None = None
    cancel: bool = False
    reason: str | None = None
    context: str | None = None


PythonHook = Callable[[dict[str, Any]], Any]
"""A hook as a function: gets the payload dict, returns None, a dict, a :class:`HookReply`, or an awaitable of one."""


@dataclass
class HookOutcome:
    name: str
    """The command line, or the callable's qualified name."""
    reply: HookReply = field(default_factory=HookReply)
    error: str | None = None
    """Why the hook failed (exit status, timeout, exception), with its stderr."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class HookReport:
    event: HookEvent
    outcomes: list[HookOutcome] = field(default_factory=list)

    @property
    def instructions(self) -> list[str]:
        return [o.reply.instructions for o in self.outcomes if o.ok and o.reply.instructions]

    @property
    def context(self) -> list[str]:
        return [o.reply.context for o in self.outcomes if o.ok and o.reply.context]

    @property
    def cancelled(self) -> HookOutcome | None:
        return next((o for o in self.outcomes if o.ok and o.reply.cancel), None)

    @property
    def failures(self) -> list[str]:
        return [f"{self.event} hook {o.name!r} failed: {o.error}" for o in self.outcomes if o.error]


def parse_reply(event: HookEvent, stdout: str) -> HookReply:
    text = stdout.strip()
    if not text:
        return HookReply()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        return HookReply(instructions=text) if event == "PreCompact" else HookReply(context=text)
    return reply_from_mapping(data)


def reply_from_mapping(data: Mapping[str, Any]) -> HookReply:
    raw_specific = data.get("hookSpecificOutput")
    specific: Mapping[str, Any] = raw_specific if isinstance(raw_specific, Mapping) else {}
    context = data.get("additionalContext") or specific.get("additionalContext")
    cancel = bool(data.get("cancel")) or data.get("continue") is False or data.get("decision") == "block"
    reason = data.get("reason") or data.get("stopReason")
    instructions = data.get("instructions") or data.get("custom_instructions")
    return HookReply(
        instructions=str(instructions) if instructions else None,
        cancel=cancel,
        reason=str(reason) if reason else None,
        context=str(context) if context else None,
    )


def _stderr(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    return text[-STDERR_SHOWN:] if text else "(no stderr)"


def _kill(process: asyncio.subprocess.Process) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows has no process groups to kill
            process.kill()
    except ProcessLookupError:  # it ended between the timeout and the kill
        return


async def run_command(hook: HookCommand, event: HookEvent, payload: Mapping[str, Any], cwd: Path | None) -> HookOutcome:
    outcome = HookOutcome(name=hook.command)
    env = {**credentials.child_environment(), "WORKBENCH_HOOK_EVENT": event}
    try:
        process = await asyncio.create_subprocess_shell(
            hook.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=str(cwd) if cwd and cwd.is_dir() else None, env=env,
            start_new_session=True,  # its own process group, so a timeout kills whatever the shell started
        )
    except OSError as exc:
        outcome.error = f"could not start: {exc}"
        return outcome
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(json.dumps(payload).encode()), hook.timeout)
    except TimeoutError:
        _kill(process)
        _, stderr = await process.communicate()
        outcome.error = f"timed out after {hook.timeout:g} s; stderr: {_stderr(stderr)}"
        return outcome
    if process.returncode != 0:
        outcome.error = f"exit status {process.returncode}; stderr: {_stderr(stderr)}"
        return outcome
    outcome.reply = parse_reply(event, stdout.decode("utf-8", errors="replace"))
    return outcome


async def run_callable(hook: PythonHook, payload: Mapping[str, Any]) -> HookOutcome:
    outcome = HookOutcome(name=getattr(hook, "__qualname__", repr(hook)))
    try:
        result = hook(dict(payload))
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # noqa: BLE001 - a user's hook failing is reported as a warning, not a crash
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
    if isinstance(result, HookReply):
        outcome.reply = result
    elif isinstance(result, Mapping):
        outcome.reply = reply_from_mapping(result)
    elif result is not None:
        outcome.error = f"returned {type(result).__name__}; expected None, a dict or a HookReply"
    return outcome


class HookRunner:
    """The configured commands and registered callables for each event, run in order."""

    def __init__(
        self,
        commands: CompactionHooks | None = None,
        callables: Mapping[HookEvent, Sequence[PythonHook]] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.commands = commands or CompactionHooks()
        self.callables: dict[HookEvent, list[PythonHook]] = {k: list(v) for k, v in (callables or {}).items()}
        self.cwd = cwd

    def add(self, event: HookEvent, hook: PythonHook) -> None:
        self.callables.setdefault(event, []).append(hook)

    def _commands(self, event: HookEvent) -> list[HookCommand]:
        return self.commands.pre_compact if event == "PreCompact" else self.commands.session_start

    async def run(self, event: HookEvent, payload: Mapping[str, Any]) -> HookReport:
        data = {"hook_event_name": event, **payload}
        report = HookReport(event)
        for command in self._commands(event):
            report.outcomes.append(await run_command(command, event, data, self.cwd))
            if report.cancelled:
                return report
        for hook in self.callables.get(event, []):
            report.outcomes.append(await run_callable(hook, data))
            if report.cancelled:
                return report
        return report
