"""What a compaction always keeps besides the summary (spec 000 §2): position in the plan, plan files,
files modified, sub-agent sessions, the todo list, key decisions.

Everything comes from the transcript (tool calls and their results) and, for the phase and plan
files, from the workspace's plan folders. Pure and deterministic: the same session gives the same
metadata.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from workbench.engine.plans.plan_context import collect, select
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.settings.sections import PlanConfig
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart, ToolUsePart

WRITE_TOOLS = frozenset({"write_file", "edit_file", "Write", "Edit", "MultiEdit", "NotebookEdit"})
PATCH_TOOLS = frozenset({"apply_patch"})
READ_TOOLS = frozenset({"read_file", "Read", "read"})
TASK_TOOLS = frozenset({"Task", "task", "Agent"})
TODO_TOOLS = frozenset({"todo_write", "TodoWrite", "todowrite"})
TRACKED_TOOLS = WRITE_TOOLS | PATCH_TOOLS | READ_TOOLS | TASK_TOOLS | TODO_TOOLS
PATH_KEYS = ("path", "file_path", "filePath", "notebook_path")
METADATA_HEADING = "### Session metadata (kept by the workbench)"
"""Starts the metadata block of every summary; a later compaction drops it from the prior summary."""

_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_AGENT_ID = re.compile(r"\b(?:(?:agentId|agent_id|session_id|sessionId)[:=]\s*\"?|session\s+(?=s-))([\w.-]+)")
"""A sub-agent's own id in its result: Claude Code's ``agentId: …``, or the engine's own footer
(``[Sub-agent task-1 (general, session s-…) …]``), whose session a summary can be continued from."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PHASE_DIR = re.compile(r"^phase[_-]?(\d+)$", re.IGNORECASE)
_SUBPHASE_DIR = re.compile(r"^(\d+)[-.](\d+)$")
MAX_PLAN_FILES = 40


class TodoEntry(BaseModel):
    content: str
    status: str = "pending"


class SubAgent(BaseModel):
    id: str
    """The sub-agent's own session id when its result names one, else the tool call's id."""
    tool_use_id: str
    description: str = ""


class CompactionMetadata(BaseModel):
    phase: str | None = None
    subphase: str | None = None
    plan_files: list[str] = Field(default_factory=list)
    modified_files: list[str] = Field(default_factory=list)
    subagents: list[SubAgent] = Field(default_factory=list)
    todos: list[TodoEntry] | None = None
    """The last todo list written; None when the session never wrote one."""
    decisions: list[str] = Field(default_factory=list)

    def as_text(self) -> str:
        """The markdown block of spec 000 §2: session metadata, todo list, key decisions."""
        position = f"Phase {self.phase or '(none)'}, Sub-phase {self.subphase or '(none)'}"
        agents = [f"{a.id} ({a.description})" if a.description else a.id for a in self.subagents]
        lines = [
            METADATA_HEADING,
            f"- Current position: {position}",
            f"- Plan files loaded: {', '.join(self.plan_files) or '(none)'}",
            f"- Files modified: {', '.join(self.modified_files) or '(none)'}",
            f"- Active sub-agent sessions: {', '.join(agents) or '(none)'}",
            "",
            "### Todo List",
            *(todo_lines(self.todos) if self.todos else ["(no todo list)"]),
            "",
            "### Key Decisions",
            *([f"- {d}" for d in self.decisions] or ["(none recorded)"]),
        ]
        return "\n".join(lines)


def todo_lines(todos: Iterable[TodoEntry]) -> list[str]:
    marks = {"completed": "[x]", "in_progress": "[~]"}
    return [f"- {marks.get(t.status, '[ ]')} {t.content} ({t.status})" for t in todos]


def _path_of(call: ToolUsePart) -> str | None:
    for key in PATH_KEYS:
        value = call.input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _relative(path: str, workspace: Path | None) -> str:
    if workspace is not None:
        try:
            return Path(path).relative_to(workspace).as_posix()
        except ValueError:
            return path
    return path


def _todos(raw: Any) -> list[TodoEntry] | None:
    if not isinstance(raw, list):
        return None
    out = []
    for entry in raw:
        if isinstance(entry, dict) and isinstance(entry.get("content"), str):
            out.append(TodoEntry(content=entry["content"], status=str(entry.get("status") or "pending")))
    return out


class DecisionMarkers:
    """Finds sentences with a decision marker (case-insensitive, at a word start)."""

    def __init__(self, markers: Sequence[str]) -> None:
        self.words = tuple(m.strip().lower() for m in markers if m.strip())
        self.pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in self.words) + r")", re.IGNORECASE)
        self._quick = re.compile("|".join(re.escape(w) for w in self.words))

    def __bool__(self) -> bool:
        return bool(self.words)

    def may_match(self, text: str) -> bool:
        """A cheap substring test first: most messages hold no marker at all."""
        return self._quick.search(text.lower()) is not None


def decisions_in(text: str, markers: DecisionMarkers) -> list[str]:
    """Sentences of ``text`` that contain a decision marker, whitespace-normalised."""
    if not markers or not markers.may_match(text) or not markers.pattern.search(text):
        return []
    pattern = markers.pattern
    out = []
    for line in text.splitlines():
        for sentence in _SENTENCE_END.split(line):
            if pattern.search(sentence):
                clean = " ".join(sentence.strip(" -*#>").split())
                if clean:
                    out.append(clean[:300])
    return out


def collect_metadata(
    messages: Sequence[Message],
    config: CompactionConfig,
    *,
    workspace: Path | None = None,
    plan: PlanConfig | None = None,
    decision_scope: Collection[str] | None = None,
) -> CompactionMetadata:
    """Metadata of the whole session; decisions only from messages in ``decision_scope`` (all if None)."""
    plan = plan or PlanConfig()
    markers = DecisionMarkers(config.decision_markers)
    scan_decisions = bool(markers)
    calls: list[ToolUsePart] = []
    results: dict[str, ToolResultPart] = {}
    decisions: dict[str, None] = {}
    for message in messages:
        if message.sidechain:
            continue
        in_scope = decision_scope is None or message.id in decision_scope
        scan = scan_decisions and message.role == "assistant" and in_scope
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                results[part.tool_use_id] = part
            elif isinstance(part, ToolUsePart):
                if part.name in TRACKED_TOOLS:
                    calls.append(part)
            elif scan and isinstance(part, TextPart):
                for decision in decisions_in(part.text, markers):
                    decisions.pop(decision, None)  # a repeated decision moves to its latest place
                    decisions[decision] = None
    modified: dict[str, None] = {}
    plan_reads: dict[str, None] = {}
    agents: dict[str, SubAgent] = {}
    todos: list[TodoEntry] | None = None
    plan_markers = tuple(f"{d.strip('/')}/" for d in (plan.plan_dir, plan.phases_dir))
    for call in calls:
        result = results.get(call.id)
        ok = result is None or not result.is_error
        if call.name in TASK_TOOLS:
            found_id = _AGENT_ID.search(result.text if result else "")
            description = str(call.input.get("description") or call.input.get("prompt") or "")
            agents[call.id] = SubAgent(id=found_id.group(1) if found_id else call.id, tool_use_id=call.id,
                                       description=" ".join(description.split())[:80])
        elif not ok:
            continue  # a failed write changed nothing, a failed todo_write set nothing
        elif call.name in TODO_TOOLS:
            todos = _todos(call.input.get("todos"))
        elif call.name in PATCH_TOOLS:
            for found in _PATCH_FILE.findall(str(call.input.get("patchText") or call.input.get("input") or "")):
                modified.setdefault(_relative(found.strip(), workspace), None)
        elif (path := _path_of(call)) is not None:
            if call.name in WRITE_TOOLS:
                modified.setdefault(_relative(path, workspace), None)
            elif any(m in f"/{path}" for m in plan_markers):
                plan_reads.setdefault(_relative(path, workspace), None)
    first = next((m.text for m in messages if m.role == "user" and m.kind == "message" and not m.sidechain), "")
    phase, subphase, plan_files = workspace_position(workspace, plan, first) if workspace else (None, None, [])
    for path in plan_reads:
        if path not in plan_files:
            plan_files.append(path)
    kept = list(decisions)[-config.max_decisions :] if config.max_decisions else []
    return CompactionMetadata(
        phase=phase, subphase=subphase, plan_files=plan_files[:MAX_PLAN_FILES], modified_files=list(modified),
        subagents=list(agents.values()), todos=todos, decisions=kept,
    )


def _numbered(folder: Path, pattern: re.Pattern[str]) -> list[tuple[tuple[int, ...], Path]]:
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        match = pattern.match(child.name)
        if child.is_dir() and match:
            found.append((tuple(int(g) for g in match.groups()), child))
    return sorted(found)


def _unfinished(folder: Path) -> bool:
    """A phase is current while its PROGRESS.md has an open checkbox (or it has no progress file yet)."""
    progress = folder / "PROGRESS.md"
    if not progress.is_file():
        return True
    return "- [ ]" in progress.read_text(encoding="utf-8", errors="replace")


def _current(entries: list[tuple[tuple[int, ...], Path]]) -> tuple[tuple[int, ...], Path] | None:
    return next((e for e in entries if _unfinished(e[1])), entries[-1] if entries else None)


def infer_position(workspace: Path, plan: PlanConfig) -> tuple[int | None, int | None]:
    """The first phase (and sub-phase) whose PROGRESS.md still has an open checkbox, else the last one."""
    phase = _current(_numbered(workspace / plan.phases_dir, _PHASE_DIR))
    if phase is None:
        return None, None
    sub = _current(_numbered(phase[1], _SUBPHASE_DIR))
    return phase[0][0], (sub[0][1] if sub else None)


def _plan_problem(message: str) -> None:
    """Problems in the plan tree are the prompt builder's to report (it reads the same files)."""


def workspace_position(
    workspace: Path, plan: PlanConfig, first_message: str = ""
) -> tuple[str | None, str | None, list[str]]:
    """Phase, sub-phase and the plan files the injector loads (``plan_context``), in phase mode.

    The position is the session's (its first message, the workflow state file, the config); when
    none is set, it is inferred from the progress files, while the files stay what is injected.
    """
    if not (workspace / plan.plan_dir).is_dir():
        return None, None, []
    selection = select(first_message, workspace, plan, _plan_problem)
    files = collect(workspace, plan, selection, _plan_problem).files
    phase, subphase = selection.phase, selection.subphase
    if phase is None:
        phase, subphase = infer_position(workspace, plan)
    if phase is None:
        return None, None, files
    return str(phase), (f"{phase}.{subphase}" if subphase is not None else None), files


def strip_metadata(summary: str) -> str:
    """A summary without its metadata block (a new compaction writes a fresh one)."""
    at = summary.find(METADATA_HEADING)
    return summary[:at].rstrip() if at >= 0 else summary.rstrip()
