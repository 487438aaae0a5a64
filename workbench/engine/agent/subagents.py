"""Sub-agents (spec 000 §4): the ``task`` tool runs another agent on the same engine.

The sub-agent has its own session (``metadata.parent_session`` / ``parent_message`` /
``parent_tool_use_id``; ``metadata.subagent`` is true, so DCP leaves it alone, and its
``AgentSettings.is_subagent`` is set). It uses the parent's provider, model, tools
(except ``task``: sub-agents do not start sub-agents) and approval callback.

What it receives:

* by default: the parent's plan section (``<project_context>``, as a system section),
  the parent's pinned ([PERSIST]) messages in ``<preserved_messages>``, then the task;
* ``fresh: true``: only the task prompt (and whatever it asks for below);
* ``recent_tool_calls: N``, ``tool_outputs: [ids]``, ``files: [paths]``: the last N tool
  calls with their results, chosen tool outputs, workspace files, before the task.

Its final answer is returned inline, and written with the task prompt, agent, model
and times to ``<data dir>/subagent-outputs/<parent session id>/<task id>.md``; files
older than ``subagents.retention_days`` are removed when a run starts.

With the scripted provider, the parent's script holds the sub-agent's responses in
order, right after the parent response that calls ``task``::

    "responses": [
      [{"tool": "task", "input": {"prompt": "Summarise docs/plan"}}],   # parent
      [{"text": "The plan has three phases ..."}],                      # sub-agent
      [{"text": "The sub-agent says ..."}]                              # parent again
    ]
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from workbench import locations
from workbench.engine.agent.tools.base import ToolContext, ToolError, ToolOutput
from workbench.engine.agent.tools.confined import read_bytes
from workbench.engine.agent.tools.task import TASK_TOOL, TaskInput
from workbench.engine.settings.sections import SubagentsConfig
from workbench.engine.transcript.models import Message, Session, ToolResultPart, ToolUsePart

if TYPE_CHECKING:
    from workbench.engine.agent.loop import Agent
    from workbench.engine.events import Event
    from workbench.engine.settings.config import Config
    from workbench.engine.transcript.store import Store

SUBAGENT_NOTE = (
    "You are a sub-agent started by another agent for one task. Work on that task only, then end with a "
    "complete, self-contained answer: it is all the calling agent will see."
)
MAX_FILE_BYTES = 256 * 1024
OUTPUTS_DIR = "subagent-outputs"




def outputs_root(config: SubagentsConfig) -> Path:
    return Path(config.output_dir).expanduser() if config.output_dir else locations.data_dir() / OUTPUTS_DIR


def cleanup_outputs(root: Path, retention_days: int | None, now: float | None = None) -> tuple[int, list[str]]:
    """Remove output files older than the retention; (files removed, warnings)."""
    if retention_days is None or not root.is_dir():
        return 0, []
    cutoff = (now if now is not None else time.time()) - retention_days * 86400
    removed = 0
    warnings: list[str] = []
    for path in sorted(root.glob("*/*.md")):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError as exc:
            warnings.append(f"cannot remove old sub-agent output {path} ({exc.strerror or type(exc).__name__})")
    for folder in root.iterdir():
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return removed, warnings


# --- what the sub-agent is given -------------------------------------------------------------


def preserved_messages(messages: Sequence[Message], pinned: set[str]) -> str | None:
    blocks = [f'<message role="{m.role}">\n{m.text.strip()}\n</message>'
              for m in messages if m.id in pinned and m.text.strip()]
    return "<preserved_messages>\n" + "\n".join(blocks) + "\n</preserved_messages>" if blocks else None


def _calls(messages: Sequence[Message]) -> tuple[list[ToolUsePart], dict[str, ToolResultPart]]:
    results = {p.tool_use_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    calls = [p for m in messages for p in m.parts if isinstance(p, ToolUsePart) and p.id in results]
    return calls, results


def recent_tool_calls(messages: Sequence[Message], count: int) -> str | None:
    calls, results = _calls(messages)
    chosen = calls[-count:] if count else []
    blocks = [
        f'<tool_call id="{c.id}" name="{c.name}">\ninput: {json.dumps(c.input, ensure_ascii=False)}\n'
        f"result{' (error)' if results[c.id].is_error else ''}:\n{results[c.id].text}\n</tool_call>"
        for c in chosen
    ]
    return "<recent_tool_calls>\n" + "\n".join(blocks) + "\n</recent_tool_calls>" if blocks else None


def tool_outputs(messages: Sequence[Message], ids: Sequence[str]) -> str | None:
    calls, results = _calls(messages)
    names = {c.id: c.name for c in calls}
    blocks = []
    for tool_id in ids:
        result = results.get(tool_id)
        if result is None:
            body, name = "(no tool output with this id in the session)", ""
        else:
            body, name = result.text, f' name="{names.get(tool_id, "")}"'
        blocks.append(f'<tool_output id="{tool_id}"{name}>\n{body}\n</tool_output>')
    return "\n".join(blocks) or None


def read_files(ctx: ToolContext, paths: Sequence[str]) -> str | None:
    blocks = []
    for path in paths:
        try:
            ctx.resolve(path, must_exist=True)
            body = read_bytes(ctx, path, MAX_FILE_BYTES, f"{path} is larger than {MAX_FILE_BYTES // 1024} KiB"
                              ).decode("utf-8", errors="replace")
        except ToolError as exc:
            body = f"(not read: {exc})"
        except OSError as exc:
            body = f"(not read: {exc.strerror or type(exc).__name__})"
        blocks.append(f'<file path="{path}">\n{body}\n</file>')
    return "\n".join(blocks) or None


def task_message(parent: Agent, request: TaskInput, ctx: ToolContext) -> str:
    """The sub-agent's first user message: the context asked for, then the task."""
    messages = parent.ctx.messages
    pieces = [
        None if request.fresh else preserved_messages(messages, parent.ctx.overlay.pinned),
        recent_tool_calls(messages, request.recent_tool_calls),
        tool_outputs(messages, request.tool_outputs),
        read_files(ctx, request.files),
    ]
    context = [p for p in pieces if p]
    if not context:
        return request.prompt
    return "\n\n".join([*context, f"<task>\n{request.prompt}\n</task>"])


# --- running one ----------------------------------------------------------------------------------


class SubagentRunner:
    """Launches sub-agents for one parent agent (the ``task`` tool's launcher)."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config
        self.parent: Agent | None = None
        self.root = outputs_root(config.subagents)
        self.last: Agent | None = None
        """The latest sub-agent launched (to inspect; its session is in the store)."""

    def bind(self, parent: Agent) -> None:
        """Attach to the parent agent, and clear out expired output files."""
        from workbench.engine import events as ev

        self.parent = parent
        try:
            _, warnings = cleanup_outputs(self.root, self.config.subagents.retention_days)
        except OSError as exc:
            warnings = [f"cannot clean up sub-agent outputs in {self.root} ({exc.strerror or type(exc).__name__})"]
        for message in warnings:
            parent.emit(ev.Warning(kind="subagent", message=message))

    async def launch(self, request: TaskInput, ctx: ToolContext) -> ToolOutput:
        from workbench.engine.agent.loop import Agent
        from workbench.engine.agent.model_call import AgentError
        from workbench.engine.agent.prompt import PromptBuilder, agent_tools
        from workbench.engine.context.session import SessionContext

        parent = self.parent
        if parent is None:
            raise ToolError("sub-agents are not available: the runner has no parent agent")
        task_id = f"t-{uuid.uuid4().hex[:12]}"
        session = self._session(parent, request, task_id)
        self.store.save_session(session)
        sub_ctx = SessionContext.load(self.store, session.id, parent.ctx.config)
        builder = PromptBuilder(ctx.workspace, self.config.prompt, subagent=True,
                                inherited_plan=None if request.fresh else parent.prompt.plan_text())
        instructions = self.config.subagents.instructions or f"{parent.settings.instructions}\n\n{SUBAGENT_NOTE}"
        agent = Agent(
            self.store, sub_ctx, parent.provider, agent_tools(parent.tools, builder, None), ctx.workspace,
            model=parent.model, settings=replace(parent.settings, is_subagent=True, instructions=instructions),
            approve=parent.approve, on_event=lambda event: self._forward(parent, task_id, event), prompt=builder,
        )
        self.last = agent
        started = datetime.now(UTC)
        error: str | None = None
        try:
            await agent.send(task_message(parent, request, ctx))
        except AgentError as exc:
            error = str(exc)
        output = final_answer(sub_ctx.messages)
        saved = self._save(parent, request, session, task_id, started, output, error)
        status = f"failed: {error}" if error else "finished"
        footer = f"[Sub-agent {task_id} ({request.agent}, session {session.id}) {status}; {saved}]"
        return ToolOutput(f"{output}\n\n{footer}" if output else footer, is_error=error is not None)

    def _session(self, parent: Agent, request: TaskInput, task_id: str) -> Session:
        from workbench.engine.context.session import MAX_TOKENS_KEY

        parent_message = next((m for m in reversed(parent.ctx.messages) if m.role == "assistant"), None)
        call = next((p for p in (parent_message.tool_uses() if parent_message else [])
                     if p.name == TASK_TOOL and p.input.get("prompt") == request.prompt), None)
        first_line = request.prompt.strip().splitlines()[0] if request.prompt.strip() else ""
        session = Session(
            id=f"s-{uuid.uuid4().hex[:12]}",
            title=f"Sub-agent ({request.agent}): {first_line[:60]}",
            source_format="engine",
            model=parent.model,
            context_window=parent.ctx.session.context_window,
            metadata={
                "workspace": str(parent.tool_ctx.workspace),
                "subagent": True,
                "agent": request.agent,
                "task_id": task_id,
                "fresh": request.fresh,
                "parent_session": parent.ctx.session.id,
                "parent_message": parent_message.id if parent_message else None,
                "parent_tool_use_id": call.id if call else None,
            },
        )
        if MAX_TOKENS_KEY in parent.ctx.session.metadata:  # it asks for the reply its parent asks for
            session.metadata[MAX_TOKENS_KEY] = parent.ctx.session.metadata[MAX_TOKENS_KEY]
        return session

    def _forward(self, parent: Agent, task_id: str, event: Event) -> None:
        """The parent's user hears about the sub-agent's warnings and errors."""
        from workbench.engine import events as ev

        if isinstance(event, ev.Warning):
            parent.emit(ev.Warning(kind=event.kind, message=f"sub-agent {task_id}: {event.message}"))
        elif isinstance(event, ev.ErrorEvent):
            parent.emit(ev.Warning(kind="subagent", message=f"sub-agent {task_id} failed: {event.message}"))

    def _save(self, parent: Agent, request: TaskInput, session: Session, task_id: str, started: datetime,
              output: str, error: str | None) -> str:
        path = self.root / parent.ctx.session.id / f"{task_id}.md"
        text = "\n".join([
            f"# Sub-agent task {task_id}",
            "",
            f"- Agent: {request.agent}",
            f"- Model: {parent.model}",
            f"- Started: {started.isoformat(timespec='seconds')}",
            f"- Finished: {datetime.now(UTC).isoformat(timespec='seconds')}",
            f"- Status: {'failed: ' + error if error else 'completed'}",
            f"- Parent session: {parent.ctx.session.id}",
            f"- Sub-agent session: {session.id}",
            f"- Fresh context: {'yes' if request.fresh else 'no'}",
            "",
            "## Task prompt",
            "",
            request.prompt,
            "",
            "## Output",
            "",
            output or "(no output)",
            "",
        ])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            return f"the output could not be saved to {path} ({exc.strerror or type(exc).__name__})"
        return f"full output saved to {path}"


def final_answer(messages: Sequence[Message]) -> str:
    """The sub-agent's last assistant text."""
    for message in reversed(messages):
        if message.role == "assistant" and message.text.strip():
            return message.text.strip()
    return ""
