"""Plan auto-injection (spec 000 §3): the project's plan files as one ``<project_context>`` section.

A workspace is in *phase mode* when ``docs/plan/`` exists. What is injected depends on
the session's mode and its current phase / sub-phase, taken from (first match wins):

1. the first user message: ``/implement 3.3``, ``/implement 3``, ``/plan-subphase 3.3``,
   ``/plan-phase 3``;
2. a workflow state file in the workspace (``.workbench/workflow.json`` by default):
   ``{"mode": "implementation", "phase": "3", "subphase": "3.3"}``;
3. ``[prompt.plan]`` in the config (``mode``, ``phase``, ``subphase``);
4. otherwise an implementation session with no current phase.

Layout (as in the spec): ``docs/plan/*`` (project plan), ``docs/phases/phase_3/plan/*``
(phase plan), ``docs/phases/phase_3/3-3/plan/*`` (sub-phase plan),
``docs/phases/phase_N/PROGRESS.md`` and ``docs/phases/phase_3/3-N/PROGRESS.md`` (progress).

Nothing here raises for a bad tree: every problem (missing, empty, unreadable, not a
file, not UTF-8, too large) becomes a warning naming the file, and the rest is used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from workbench.engine.settings.sections import PlanConfig, PlanMode

Group = Literal["project", "phase", "subphase", "progress"]
Counter = Callable[[str], int]

_COMMAND = re.compile(r"^\s*/(implement|plan-subphase|plan-phase)\s+(\d+)(?:[.\-](\d+))?\b")
_PHASE_DIR = re.compile(r"^phase[_\-]?(\d+)$", re.IGNORECASE)
_SUBPHASE_DIR = re.compile(r"^(\d+)[\-.](\d+)$")
_DROP_ORDER: dict[Group, int] = {"progress": 0, "project": 1, "phase": 2, "subphase": 3}
"""Lower goes first when the plan does not fit the window."""
HEADING_TOKENS = 24
"""A generous count for one file's heading line in the rendered section."""




class WorkflowState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: PlanMode = "implementation"
    phase: str | int | None = None
    subphase: str | None = None


@dataclass(frozen=True)
class PlanSelection:
    mode: PlanMode
    phase: int | None
    subphase: int | None
    source: str
    """Where the mode and phase came from: ``message``, ``state file``, ``config`` or ``default``."""

    @property
    def label(self) -> str:
        if self.phase is None:
            return "no current phase"
        return f"{self.phase}.{self.subphase}" if self.subphase is not None else str(self.phase)


@dataclass(frozen=True)
class PlanEntry:
    group: Group
    heading: str
    path: str
    text: str


@dataclass
class PlanContext:
    selection: PlanSelection
    entries: list[PlanEntry]
    phase_title: str | None = None
    subphase_title: str | None = None
    omitted: list[str] = field(default_factory=list)
    """Files left out to fit the window."""

    @property
    def files(self) -> list[str]:
        """Workspace-relative paths of the files injected (for compaction metadata)."""
        return [e.path for e in self.entries]

    def as_text(self) -> str:
        return section_text(self)


# --- which session is this -------------------------------------------------------------


def _ids(phase: str | int | None, subphase: str | None) -> tuple[int | None, int | None]:
    p = int(phase) if phase is not None and str(phase).strip().isdigit() else None
    s: int | None = None
    if subphase:
        parts = re.split(r"[.\-]", str(subphase).strip())
        if len(parts) == 2 and all(x.isdigit() for x in parts):
            p = p if p is not None else int(parts[0])
            s = int(parts[1])
        elif len(parts) == 1 and parts[0].isdigit():
            s = int(parts[0])
    return p, s


def select(first_message: str, workspace: Path, config: PlanConfig, warn: Callable[[str], None]) -> PlanSelection:
    match = _COMMAND.match(first_message)
    if match:
        command, phase, sub = match.groups()
        mode: PlanMode = "implementation" if command == "implement" else "planning"
        return PlanSelection(mode, int(phase), int(sub) if sub else None, "message")
    state = workspace / config.state_file
    if state.is_file():
        try:
            data = WorkflowState.model_validate(json.loads(state.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
            warn(f"workflow state {config.state_file} is unreadable ({_reason(exc)}); using the config instead")
        else:
            return PlanSelection(data.mode, *_ids(data.phase, data.subphase), "state file")
    if config.mode or config.phase or config.subphase:
        return PlanSelection(config.mode or "implementation", *_ids(config.phase, config.subphase), "config")
    return PlanSelection("implementation", None, None, "default")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, ValidationError):
        return f"{exc.error_count()} invalid field(s)"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# --- reading the tree ---------------------------------------------------------------------


class _Reader:
    def __init__(self, workspace: Path, config: PlanConfig, warn: Callable[[str], None]) -> None:
        self.root = workspace.resolve()
        self.config = config
        self.warn = warn

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def read(self, path: Path, *, required: bool) -> str | None:
        """The file's text, or None with a warning saying why it was left out."""
        name = self.rel(path)
        if not path.exists():
            if required:
                self.warn(f"{name} not found; left out of the project context")
            return None
        if path.is_dir():
            self.warn(f"{name} is a directory, not a file; left out of the project context")
            return None
        if not path.resolve().is_relative_to(self.root):
            self.warn(f"{name} leads outside the workspace; left out of the project context")
            return None
        try:
            size = path.stat().st_size
            if size > self.config.max_file_bytes:
                self.warn(f"{name} is {size:,} bytes, over the {self.config.max_file_bytes:,}-byte limit; left out")
                return None
            return path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            self.warn(f"{name} is not UTF-8 text; left out of the project context")
        except OSError as exc:
            self.warn(f"cannot read {name} ({exc.strerror or type(exc).__name__}); left out of the project context")
        return None

    def files_in(self, folder: Path, *, required: bool) -> list[Path]:
        name = self.rel(folder)
        if not folder.exists():
            if required:
                self.warn(f"{name}/ not found; nothing from it in the project context")
            return []
        if not folder.is_dir():
            self.warn(f"{name} is not a directory; nothing from it in the project context")
            return []
        try:
            found = sorted(p for p in folder.rglob("*") if not _hidden(p.relative_to(folder)))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            self.warn(f"cannot list {name}/ ({reason}); nothing from it in the project context")
            return []
        files = [p for p in found if not p.is_dir()]
        if not files and required:
            self.warn(f"{name}/ is empty; nothing from it in the project context")
        return files

    def subdirs(self, folder: Path, pattern: re.Pattern[str]) -> dict[tuple[int, ...], Path]:
        if not folder.is_dir():
            return {}
        try:
            children = list(folder.iterdir())
        except OSError as exc:
            self.warn(f"cannot list {self.rel(folder)}/ ({exc.strerror or type(exc).__name__})")
            return {}
        out: dict[tuple[int, ...], Path] = {}
        for child in children:
            match = pattern.match(child.name)
            if match and child.is_dir():
                out[tuple(int(g) for g in match.groups())] = child
        return dict(sorted(out.items()))

    def subphases(self, phase_dir: Path, phase: int) -> dict[int, Path]:
        """``3-1``, ``3-2`` ... (or ``3.1``) under ``phase_3``, by sub-phase number."""
        return {k[1]: v for k, v in self.subdirs(phase_dir, _SUBPHASE_DIR).items() if k[0] == phase}


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def doc_title(name: str) -> str:
    """``01-vision.md`` → ``Vision``."""
    stem = Path(name).stem
    stem = re.sub(r"^\d+[\-_. ]*", "", stem) or stem
    return re.sub(r"[\-_]+", " ", stem).strip().title()


def _heading_of(text: str, prefix: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            title = re.sub(rf"^(sub-?phase|phase)?\s*{re.escape(prefix)}\s*[:—–\-]\s*", "", title, flags=re.IGNORECASE)
            return title or None
    return None


def collect(workspace: Path, config: PlanConfig, selection: PlanSelection, warn: Callable[[str], None]) -> PlanContext:
    reader = _Reader(workspace, config, warn)
    plan_dir = reader.root / config.plan_dir
    phases_dir = reader.root / config.phases_dir
    entries: list[PlanEntry] = []

    def add(group: Group, heading: str, path: Path, *, required: bool) -> None:
        text = reader.read(path, required=required)
        if text is not None and text.strip():
            entries.append(PlanEntry(group, f"{heading} ({reader.rel(path)})", reader.rel(path), text))

    if selection.mode == "planning":
        for path in reader.files_in(plan_dir, required=True):
            add("project", doc_title(path.name), path, required=True)
    elif reader.files_in(plan_dir, required=True):  # when empty, the warning is enough
        for name in config.key_documents:
            add("project", doc_title(name), plan_dir / name, required=True)
    phases = {k[0]: v for k, v in reader.subdirs(phases_dir, _PHASE_DIR).items()}
    context = PlanContext(selection, entries)
    current = selection.phase
    if current is not None:
        phase_dir = phases.get(current)
        planning_a_phase = selection.mode == "planning" and selection.subphase is None
        if phase_dir is None:
            if not planning_a_phase:
                warn(f"no {config.phases_dir}/phase_{current}/ for the current phase {current}")
        else:
            for path in reader.files_in(phase_dir / "plan", required=not planning_a_phase):
                add("phase", "Phase Plan", path, required=True)
            context.phase_title = next(
                (_heading_of(e.text, str(current)) for e in entries if e.group == "phase"), None)
            if selection.subphase is not None and selection.mode == "implementation":
                sub_dir = reader.subphases(phase_dir, current).get(selection.subphase)
                if sub_dir is None:
                    warn(f"no sub-phase directory {config.phases_dir}/phase_{current}/{current}-{selection.subphase}/")
                else:
                    for path in reader.files_in(sub_dir / "plan", required=True):
                        add("subphase", "Sub-Phase Plan", path, required=True)
                    context.subphase_title = next(
                        (_heading_of(e.text, selection.label) for e in entries if e.group == "subphase"), None)
    for number, folder in phases.items():
        if current is None or number < current:
            add("progress", f"Phase {number} Progress", folder / "PROGRESS.md", required=False)
    if current is not None and selection.subphase is not None and current in phases:
        for number, folder in reader.subphases(phases[current], current).items():
            if number < selection.subphase:
                add("progress", f"Sub-Phase {current}.{number} Progress", folder / "PROGRESS.md", required=False)
    return context


# --- its text and size -------------------------------------------------------------------


def section_text(context: PlanContext) -> str:
    sel = context.selection
    lines = ["<project_context>"]

    def block(entry: PlanEntry) -> None:
        lines.extend([f"### {entry.heading}", entry.text.strip(), ""])

    project = [e for e in context.entries if e.group == "project"]
    if project:
        lines.append("## Project Plan")
        for entry in project:
            block(entry)
    if sel.phase is not None:
        title = f" — {context.phase_title}" if context.phase_title else ""
        lines.append(f"## Current Phase: Phase {sel.phase}{title}")
        for entry in (e for e in context.entries if e.group == "phase"):
            block(entry)
        if sel.subphase is not None:
            title = f" — {context.subphase_title}" if context.subphase_title else ""
            lines.append(f"## Current Sub-Phase: {sel.label}{title}")
            for entry in (e for e in context.entries if e.group == "subphase"):
                block(entry)
    progress = [e for e in context.entries if e.group == "progress"]
    if progress:
        lines.append("## Previous Progress")
        for entry in progress:
            block(entry)
    while lines and not lines[-1]:
        lines.pop()
    lines.append("</project_context>")
    return "\n".join(lines)


def fit(context: PlanContext, count: Counter, max_tokens: int) -> None:
    """Leave files out (progress first, the sub-phase plan last) until the section fits ``max_tokens``."""
    sizes = {id(e): count(e.text) + HEADING_TOKENS for e in context.entries}
    total = count(section_text(context))
    for victim in sorted(context.entries, key=lambda e: _DROP_ORDER[e.group]):
        if total <= max_tokens or len(context.entries) == 1:
            break
        context.entries = [e for e in context.entries if e is not victim]
        context.omitted.append(victim.path)
        total -= sizes[id(victim)]
    for _ in range(4):  # one file is still too large: cut it down
        total = count(section_text(context))
        if total <= max_tokens or not context.entries:
            return
        entry = context.entries[0]
        keep = max(0, int(len(entry.text) * (1 - (total - max_tokens) / max(1, sizes[id(entry)])) * 0.95) - 200)
        note = f"\n[truncated to fit the context window: {len(entry.text) - keep:,} characters left out]"
        cut = PlanEntry(entry.group, entry.heading, entry.path, entry.text[:keep] + note)
        sizes[id(cut)] = count(cut.text) + HEADING_TOKENS
        context.entries[0] = cut
        if f"{entry.path} (truncated)" not in context.omitted:
            context.omitted.append(f"{entry.path} (truncated)")
    context.entries = []  # nothing fits: inject nothing rather than overflow


def size_warning(context: PlanContext, count: Counter, total: int, limit: int) -> str:
    sizes = sorted(((count(e.text), e.path) for e in context.entries), reverse=True)[:3]
    largest = ", ".join(f"{path} ({tokens:,} tokens)" for tokens, path in sizes)
    return (
        f"the project context is {total:,} tokens, over the {limit:,}-token warning threshold "
        f"(prompt.plan.warn_tokens). Largest files: {largest}. Trim or split them, or list fewer "
        "files in prompt.plan.key_documents."
    )


# --- one session's plan section -----------------------------------------------------------


class PlanInjector:
    """The plan section of one session: chosen at its first user message, re-read after a compaction.

    Between those moments the text is kept as it was, so the section stays byte-identical
    (and cached) even while the agent edits a PROGRESS.md.
    """

    def __init__(self, workspace: Path, config: PlanConfig) -> None:
        self.workspace = workspace
        self.config = config
        self.selection: PlanSelection | None = None
        self.context: PlanContext | None = None
        self.text: str | None = None
        self.decided = False
        """The first user message has been seen (whether or not anything was injected)."""

    def phase_mode(self) -> bool:
        return (self.workspace / self.config.plan_dir).exists()

    def inject(self, first_message: str, count: Counter, window: int, warn: Callable[[str], None]) -> None:
        self.decided = True
        if not self.config.enabled:
            return
        if not self.phase_mode():
            if _COMMAND.match(first_message):
                warn(f"{first_message.split()[0]} asks for phase mode, but there is no {self.config.plan_dir}/ "
                     "in the workspace: no plan injected")
            return
        self.selection = select(first_message, self.workspace, self.config, warn)
        self.reload(count, window, warn)

    def reload(self, count: Counter, window: int, warn: Callable[[str], None]) -> None:
        """Read the files again (after a compaction, or on demand)."""
        if self.selection is None:
            return
        context = collect(self.workspace, self.config, self.selection, warn)
        self.context = context
        if not context.entries:
            warn(f"phase mode ({self.selection.mode}, {self.selection.label}), but no plan file could be read: "
                 "no project context injected")
            self.text = None
            return
        full = count(section_text(context))
        if full > self.config.warn_tokens:
            warn(size_warning(context, count, full, self.config.warn_tokens))
        cap = int(window * self.config.max_window_share)
        if full > cap:
            fit(context, count, cap)
            left_out = ", ".join(context.omitted) or "everything"
            warn(f"the project context ({full:,} tokens) does not fit in {cap:,} tokens "
                 f"(prompt.plan.max_window_share of the window); left out: {left_out}")
        self.text = section_text(context) if context.entries else None
