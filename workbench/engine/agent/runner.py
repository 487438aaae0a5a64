"""Setting up an agent run: the session, the provider, the workspace. Shared by the CLI and the TUI."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Self

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent, AgentSettings, Approver, refuse_all
from workbench.engine.agent.mcp_tools import McpConnections
from workbench.engine.agent.prompt import PromptBuilder, agent_tools
from workbench.engine.agent.subagents import SubagentRunner
from workbench.engine.agent.tools import builtin_tools
from workbench.engine.agent.tools.dcp import Distill, Prune
from workbench.engine.context.session import MAX_TOKENS_KEY, SCRIPT_KEY, SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.events import EventSink
from workbench.engine.plans.strategies.dcp import dcp_active
from workbench.engine.providers.base import Provider
from workbench.engine.providers.scripted import Script, ScriptedProvider
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Session
from workbench.engine.transcript.persist import strip_persist_tag
from workbench.engine.transcript.store import Store

DEFAULT_MODEL = "claude-sonnet-4-5"


def script_path(name: str) -> Path:
    """A bundled script by name (``demo``), or a path to a script file."""
    candidate = Path(name).expanduser()
    if candidate.suffix == ".json" or candidate.exists():
        if not candidate.is_file():
            raise WorkbenchError(f"{name}: no such script file")
        return candidate
    bundled = Path(str(resources.files("workbench.data").joinpath("scripts", f"{name}.json")))
    if not bundled.is_file():
        raise WorkbenchError(f"no bundled script named {name!r} (try 'demo', or give a path to a .json script)")
    return bundled


def model_replies(ctx: SessionContext) -> int:
    """How many answers the model gave in this session: a script resumed on it skips as many responses."""
    return sum(1 for m in ctx.messages if m.role == "assistant" and m.kind == "message" and not m.sidechain)


def played_turns(ctx: SessionContext, turns: list[str]) -> int:
    """How many of a script's user turns the session already holds, in order."""
    sent = {m.text for m in ctx.messages if m.role == "user"}
    played = 0
    while played < len(turns) and strip_persist_tag(turns[played]) in sent:
        played += 1
    return played


COPY_PREFIX = "workbench-ws-"
"""A run's workspace copy is ``COPY_PREFIX`` + the pid of the process that made it + a random part."""


def copy_workspace(source: Path) -> Path:
    """A fresh copy of a script's workspace, so every run starts from the same files. Copies left by runs
    that were killed (their process is gone) are removed first: a run removes its own copy when it ends,
    but a SIGKILL gives it no chance to."""
    remove_orphan_copies(Path(tempfile.gettempdir()))
    target = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-"))
    shutil.copytree(source, target, dirs_exist_ok=True)
    return target


def remove_orphan_copies(folder: Path) -> list[Path]:
    """Remove this user's workspace copies in ``folder`` whose process no longer runs; the ones removed."""
    removed = []
    for path in folder.glob(f"{COPY_PREFIX}*-*"):
        pid = path.name[len(COPY_PREFIX):].split("-", 1)[0]
        try:
            owned = path.is_dir() and not path.is_symlink() and path.stat().st_uid == getattr(os, "getuid", lambda: -1)()
        except OSError:
            continue
        if owned and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    """Whether a process with this id exists (a copy of one that does is left alone, whoever it now is)."""
    if pid == os.getpid():
        return True
    if sys.platform == "win32":
        return True  # no cheap check there: copies are left to the temp folder's own cleaning
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True


@dataclass
class RunSetup:
    agent: Agent
    script: Script | None
    workspace: Path
    mcp: McpConnections | None = None
    """MCP servers: started (and their tools registered) while the setup is entered: ``async with setup:``."""
    temporary: bool = False
    """The workspace is a copy made for this run (a script's): removed when the run ends."""

    async def __aenter__(self) -> Self:
        if self.mcp is not None:
            await self.mcp.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.mcp is not None:
                await self.mcp.__aexit__(*exc)
        finally:
            self.remove_workspace()

    def remove_workspace(self) -> None:
        """A temporary copy goes when the run ends, so copies do not pile up in the temp folder."""
        if self.temporary:
            shutil.rmtree(self.workspace, ignore_errors=True)
            self.temporary = False


def prepare_run(
    store: Store,
    config: Config,
    *,
    session_id: str | None,
    scripted: str | None,
    model: str | None,
    workspace: Path | None,
    approve: Approver = refuse_all,
    on_event: EventSink = lambda e: None,
    chunk_delay: float = 0.0,
    provider: Provider | None = None,
) -> RunSetup:
    if store.writes_refused is not None:  # a run writes from its first message: refuse before anything is set up
        raise WorkbenchError(store.writes_refused)
    script: Script | None = None
    temporary = False
    if scripted is not None:
        path = script_path(scripted)
        script = Script.load(path)
        if workspace is None and script.workspace:
            workspace = copy_workspace(path.parent / script.workspace)
            temporary = True
    try:
        return _setup(store, config, session_id=session_id, script=script, script_name=scripted, model=model,
                      workspace=workspace, approve=approve, on_event=on_event, chunk_delay=chunk_delay,
                      provider=provider, temporary=temporary)
    except BaseException:
        if temporary and workspace is not None:  # the run never started: its copy goes now
            shutil.rmtree(workspace, ignore_errors=True)
        raise


def _setup(
    store: Store,
    config: Config,
    *,
    session_id: str | None,
    script: Script | None,
    script_name: str | None,
    model: str | None,
    workspace: Path | None,
    approve: Approver,
    on_event: EventSink,
    chunk_delay: float,
    provider: Provider | None,
    temporary: bool,
) -> RunSetup:
    workspace = (workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        raise WorkbenchError(f"workspace {workspace} is not a directory")
    model_name = script.model if script else (model or DEFAULT_MODEL)
    if session_id:
        session = store.get_session(session_id)
        model_name = session.model or model_name
    else:
        session = Session(
            id=f"s-{uuid.uuid4().hex[:12]}",
            title=(f"Scripted: {script.name}" if script else None),
            source_format="engine",
            model=model_name,
            context_window=script.context_window if script else None,
            metadata={"workspace": str(workspace)},
        )
        if script_name is not None:
            session.metadata[SCRIPT_KEY] = script_name  # reopened without an API key, the script continues it
        if script is not None and script.max_output:
            session.metadata[MAX_TOKENS_KEY] = script.max_output  # what every request asks for; the budget reserves it
        store.save_session(session)
    ctx = SessionContext.load(store, session.id, config, use_checkpoint=True)
    offload = config.strategies.offload
    settings = AgentSettings(auto_compact=config.compaction.auto and config.budget.context_window != 0,
                             offload_threshold=offload.threshold if offload.enabled else None,
                             output_limits=config.tool_output)
    if script is not None and script.system:
        settings.instructions = script.system
    if provider is None:
        if script is not None:
            provider = ScriptedProvider(script, ctx.counter, chunk_delay)
        else:
            from workbench.engine.providers.anthropic import AnthropicProvider

            provider = AnthropicProvider.from_config(config.provider)
    prompt = PromptBuilder(workspace, config.prompt, config.skills)
    subagents = SubagentRunner(store, config)
    base = builtin_tools()
    if dcp_active(ctx, config.strategies.dcp):  # the model's own pruning tools, bound to this session
        for tool in (Prune(store, ctx), Distill(store, ctx)):
            base.tools[tool.name] = tool
    tools = agent_tools(base, prompt, subagents)
    agent = Agent(store, ctx, provider, tools, workspace, model=model_name, settings=settings,
                  approve=approve, on_event=on_event, prompt=prompt)
    subagents.bind(agent)
    mcp = McpConnections(config.mcp, tools, workspace, warn=lambda m: agent.emit(ev.Warning(kind="mcp", message=m)))
    return RunSetup(agent=agent, script=script, workspace=workspace, mcp=mcp, temporary=temporary)
