"""The sections that precede the conversation: system prompt and tool definitions (spec 001 §4, §5, §7).

Sections go from static to dynamic, each a :class:`ContextItem` of the budget component
it belongs to:

====  ======================================  =========  =========
 #    section                                 kind       cacheable
====  ======================================  =========  =========
 1    base instructions                       system     yes
 2    project rules (AGENTS.md, CLAUDE.md)    memory     yes
 3    plan ``<project_context>``              project    yes
 4    cross-session memories                  memory     yes
 5    active skills                           skills     yes
 6    scratchpad                              system     no
 6b   SessionStart hooks' context             system     no
 7    deferred-tools note, usage note         system     no
====  ======================================  =========  =========

Cache breakpoints (``cache_control``; the API allows 4 in a request, tools included)
go after the last cacheable section, on the last stable tool definition, and then at
the earlier stability boundaries: after the base instructions and after the
per-session sections (2–4), so a skill switch or an edited AGENTS.md still reuses the
prefix before it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from workbench.engine.agent.deferral import DeferralManager, ToolSelection
from workbench.engine.agent.skills import Skill, SkillSet
from workbench.engine.agent.tools.base import Tool, ToolRegistry
from workbench.engine.agent.tools.confined import read_text_under
from workbench.engine.agent.tools.skill import SKILL_TOOL, SkillTool
from workbench.engine.agent.tools.task import TASK_TOOL, SubagentLauncher, Task
from workbench.engine.agent.tools.tool_search import ToolSearch
from workbench.engine.context.projection import ContextItem
from workbench.engine.errors import reason_of
from workbench.engine.plans.plan_context import PlanInjector
from workbench.engine.settings.sections import (
    API_BREAKPOINT_LIMIT,
    USAGE_NOTE_AT,
    PromptConfig,
    SkillsConfig,
)
from workbench.engine.transcript.models import TextPart
from workbench.engine.transcript.redaction import Redactor
from workbench.engine.transcript.tokens import TokenCounter

if TYPE_CHECKING:
    from workbench.engine.context.session import SessionContext

BASE_INSTRUCTIONS = (
    "You are a careful software engineering agent working inside a project workspace. "
    "Use the tools to read, search, edit and run things; prefer small verified steps; "
    "say plainly what you changed and what is left to do."
)
EPHEMERAL = {"type": "ephemeral"}

SectionKind = Literal["system", "project", "memory", "skills"]
Count = Callable[[str], int]

# Stability tiers: a breakpoint is worth placing where the tier changes.
STATIC, SESSION, TOGGLED, DYNAMIC = 0, 1, 2, 3




@dataclass(frozen=True)
class PromptSection:
    name: str
    kind: SectionKind
    text: str
    cacheable: bool
    tier: int = STATIC


@dataclass(frozen=True)
class PromptWarning:
    kind: str
    message: str


def usage_note(percent: float) -> str:
    """Spec 001 §7: a non-cacheable nudge once the context is 80% full."""
    return (
        f"[Context: {percent:.0f}% used. You can call compact_context to free space "
        "before continuing with large operations.]"
    )


def deferral_note(count: int) -> str:
    """Spec 001 §5."""
    return f"[{count} tool{'s' if count != 1 else ''} deferred to save context. Use tool_search to find them.]"


# --- sections to items ----------------------------------------------------------------------


def place_breakpoints(sections: Sequence[PromptSection], stable_tools: int, limit: int) -> tuple[set[int], bool]:
    """Which sections a breakpoint follows, and whether the last stable tool definition carries one."""
    boundaries = [
        i for i, s in enumerate(sections)
        if s.cacheable and (i + 1 == len(sections) or not sections[i + 1].cacheable or sections[i + 1].tier != s.tier)
    ]
    chosen: set[int] = set()
    left = limit
    if boundaries and left:
        chosen.add(boundaries[-1])
        left -= 1
    tool = bool(stable_tools and left)
    left -= int(tool)
    for index in reversed(boundaries[:-1]):
        if left <= 0:
            break
        chosen.add(index)
        left -= 1
    return chosen, tool


def section_items(
    count: Count,
    sections: Sequence[PromptSection],
    stable: Sequence[Mapping[str, Any]],
    promoted: Sequence[Mapping[str, Any]] = (),
    deferred_tokens: int = 0,
    max_breakpoints: int = API_BREAKPOINT_LIMIT,
) -> list[ContextItem]:
    """The ContextItems for ``sections`` and tools; each token count is of exactly what is sent."""
    marks, tool_mark = place_breakpoints(sections, len(stable), max_breakpoints)
    items: list[ContextItem] = []
    for index, section in enumerate(sections):
        tokens = count(section.text)
        items.append(ContextItem(
            kind=section.kind, tokens=tokens, components={section.kind: tokens}, parts=(TextPart(text=section.text),),
            raw_tokens=tokens, cacheable=index in marks,
        ))
    definitions = [dict(d) for d in (*stable, *promoted)]
    if tool_mark:
        definitions[len(stable) - 1]["cache_control"] = dict(EPHEMERAL)
    if definitions:
        tokens = count(json.dumps(definitions, ensure_ascii=False))
        items.append(ContextItem(kind="tools", tokens=tokens, components={"tools": tokens}, raw_tokens=tokens,
                                 tools=tuple(definitions), deferred_tokens=deferred_tokens))
    return items


def fixed_items(
    counter: TokenCounter,
    instructions: str,
    definitions: Sequence[Mapping[str, Any]],
    percent_used: float | None = None,
) -> list[ContextItem]:
    """The items of a prompt with only base instructions (and the usage note): what
    :class:`PromptBuilder` gives for a workspace with no rules, plan, memories or skills."""
    sections = [PromptSection("instructions", "system", instructions, True, STATIC)]
    if percent_used is not None and percent_used >= USAGE_NOTE_AT * 100:
        sections.append(PromptSection("usage", "system", usage_note(percent_used), False, DYNAMIC))
    return section_items(counter.count_text, sections, definitions)


# --- files -------------------------------------------------------------------------------------


# --- the builder ----------------------------------------------------------------------------------


class PromptBuilder:
    """Builds one agent's fixed items before every model call.

    Engine API: :meth:`activate_skill` / :meth:`deactivate_skill`, :attr:`scratchpad`,
    :meth:`mark_compacted` (re-read the plan), :meth:`take_warnings`.
    """

    def __init__(
        self,
        workspace: Path,
        config: PromptConfig | None = None,
        skills: SkillsConfig | None = None,
        *,
        subagent: bool = False,
        inherited_plan: str | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config or PromptConfig()
        self.subagent = subagent
        """A sub-agent's prompt: no memory files, memories or skills; the plan is the parent's."""
        self.inherited_plan = inherited_plan
        self.plan = PlanInjector(workspace, self.config.plan)
        self.skills = SkillSet(workspace, skills, enabled=not subagent)
        self.deferral = DeferralManager(self.config.deferral)
        self.scratchpad = ""
        """Free notes for this session, sent as a non-cacheable section when not empty."""
        self.session_start_context = ""
        """What the SessionStart hooks returned after the latest compaction (spec 004's ``additionalContext``),
        sent as a non-cacheable section until the next compaction."""
        self.selection: ToolSelection | None = None
        """The tool selection of the last build."""
        self.redactor = Redactor()
        """Applied to every section before it is sent: a key written in CLAUDE.md or a plan file goes no further
        (the agent gives it the credentials it holds, to find them by value too)."""
        self._warnings: list[PromptWarning] = []
        self._warned: set[str] = set()
        self._pivots: tuple[str, ...] | None = None
        self._reinject = False
        self._counts: dict[str, int] = {}

    # --- engine API ---

    def activate_skill(self, name: str) -> Skill:
        return self.skills.activate(name)

    def deactivate_skill(self, name: str) -> Skill:
        return self.skills.deactivate(name)

    def mark_compacted(self) -> None:
        """Re-read the plan files at the next build (a compaction is also noticed by itself)."""
        self._reinject = True

    def plan_text(self) -> str | None:
        return self.inherited_plan if self.subagent else self.plan.text

    def take_warnings(self) -> list[PromptWarning]:
        out, self._warnings = self._warnings, []
        return out

    def warn(self, kind: str, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self._warnings.append(PromptWarning(kind, message))

    # --- building ---

    def build(self, ctx: SessionContext, tools: ToolRegistry, instructions: str) -> list[ContextItem]:
        count = self._counter(ctx.counter)
        budget = ctx.budget()
        self._update_plan(ctx, count, budget.effective_window)
        for message in self.skills.ensure_loaded():
            self.warn("skills", message)
        self.deferral.observe(ctx.messages)
        sections = [section if (clean := self.redactor.text(section.text)) == section.text
                    else replace(section, text=clean) for section in self.sections(instructions)]
        hidden = set() if self.skills.library else {SKILL_TOOL}
        self.selection = selection = self._select(tools, ctx.counter, budget.effective_window, hidden)
        if selection.deferred:
            sections.append(PromptSection("deferred_tools", "system", deferral_note(len(selection.deferred)), False,
                                          DYNAMIC))
        if budget.percent >= self.config.usage_note_at * 100:
            sections.append(PromptSection("usage", "system", usage_note(budget.percent), False, DYNAMIC))
        return section_items(count, sections, selection.stable, selection.promoted, selection.deferred_tokens,
                            self.config.max_cache_breakpoints)

    def _select(self, tools: ToolRegistry, counter: TokenCounter, window: int, hidden: set[str]) -> ToolSelection:
        """The deferral's choice; every tool when the deferral fails (spec 001 §8), said once."""
        try:
            return self.deferral.select(tools, counter, window, hidden)
        except Exception as exc:  # noqa: BLE001 - the request goes with every tool rather than not at all
            self.warn("deferral", f"tool deferral failed ({reason_of(exc)}); every tool is sent")
            definitions = [d for d in tools.definitions() if d.get("name") not in hidden]
            return ToolSelection(stable=definitions, promoted=[], deferred=[], deferred_tokens=0)

    def sections(self, instructions: str) -> list[PromptSection]:
        out = [PromptSection("instructions", "system", instructions, True, STATIC)]
        rules = None if self.subagent else self._rules()
        if rules:
            out.append(PromptSection("project_rules", "memory", rules, True, SESSION))
        plan = self.plan_text()
        if plan:
            out.append(PromptSection("project_context", "project", plan, True, SESSION))
        memories = None if self.subagent else self._memories()
        if memories:
            out.append(PromptSection("memories", "memory", memories, True, SESSION))
        skills = self.skills.section_text()
        if skills:
            out.append(PromptSection("skills", "skills", skills, True, TOGGLED))
        if self.scratchpad.strip():
            out.append(PromptSection("scratchpad", "system", f"<scratchpad>\n{self.scratchpad.strip()}\n</scratchpad>",
                                     False, DYNAMIC))
        if self.session_start_context.strip():
            text = f"<session_start_context>\n{self.session_start_context.strip()}\n</session_start_context>"
            out.append(PromptSection("session_start", "system", text, False, DYNAMIC))
        return out

    def _counter(self, counter: TokenCounter) -> Count:
        def count(text: str) -> int:
            cached = self._counts.get(text)
            if cached is None:
                if len(self._counts) > 256:
                    self._counts.clear()
                cached = self._counts[text] = counter.count_text(text)
            return cached

        return count

    def _update_plan(self, ctx: SessionContext, count: Count, window: int) -> None:
        if self.subagent:
            return
        pivots = tuple(p.message_id for p in ctx.overlay.pivots)
        warn: Callable[[str], None] = lambda message: self.warn("plan_context", message)
        if not self.plan.decided:
            first = next((m for m in ctx.messages if m.role == "user" and m.kind == "message"), None)
            if first is not None:
                self.plan.inject(first.text, count, window, warn)
                self._pivots = pivots
        elif pivots != self._pivots or self._reinject:
            self._pivots, self._reinject = pivots, False
            self.plan.reload(count, window, warn)

    def _read(self, root: Path, name: str, label: str) -> str | None:
        """``name`` under ``root`` by the file tools' rules (a link out of it is refused, with a warning)."""
        text, problem = read_text_under(root, name, self.config.max_file_bytes)
        if problem:
            self.warn("memory", f"{problem}; {label} left out of the system prompt")
        return text if text and text.strip() else None

    def _rules(self) -> str | None:
        """The memory files, read from inside the workspace only."""
        blocks: list[str] = []
        seen: set[Path] = set()
        root = self.workspace.resolve()
        for name in self.config.memory_files:
            try:
                real = (root / Path(name).expanduser()).resolve()
            except RuntimeError:  # a loop of links: refused, with its warning, by the read
                real = root / name
            if real in seen:  # CLAUDE.md is often a link to AGENTS.md
                continue
            seen.add(real)
            text = self._read(root, str(Path(name).expanduser()), "project rules")
            if text:
                blocks.append(f'<project_rules source="{name}">\n{text.strip()}\n</project_rules>')
        return "\n".join(blocks) or None

    def _memory_root(self, entry: Path) -> tuple[Path, str]:
        """The folder memories are read under and the configured path relative to it: the workspace for a path
        in it; for a folder of the user's own elsewhere (``~/memories``), that folder (a file: its folder)."""
        workspace = self.workspace.resolve()
        if not entry.is_absolute():
            return workspace, entry.as_posix()
        try:
            real = entry.resolve()
        except RuntimeError:  # a loop of links: refused by the read
            return workspace, str(entry)
        if real.is_relative_to(workspace):
            return workspace, real.relative_to(workspace).as_posix()
        return (real, ".") if real.is_dir() else (real.parent, real.name)

    def _memories(self) -> str | None:
        if not self.config.memories:
            return None
        entry = Path(self.config.memories).expanduser()
        root, name = self._memory_root(entry)
        target = root / name
        if target.is_dir():
            try:
                names = sorted(p.name for p in target.iterdir() if p.suffix.lower() == ".md")
            except OSError as exc:
                self.warn("memory", f"cannot list memories in {target} ({exc.strerror or type(exc).__name__})")
                return None
            paths = [n if name == "." else f"{name}/{n}" for n in names]
        else:
            paths = [name]
            if not os.path.lexists(target):
                self.warn("memory", f"memories {entry} (prompt.memories) not found")
                return None
        blocks = []
        for path in paths:
            text = self._read(root, path, "memory")
            if text:
                blocks.append(f'<memories source="{Path(path).name}">\n{text.strip()}\n</memories>')
        return "\n".join(blocks) or None


SESSION_BOUND_TOOLS = ("prune", "distill")


def agent_tools(base: ToolRegistry, builder: PromptBuilder, launcher: SubagentLauncher | None) -> ToolRegistry:
    """``base`` plus the tools bound to this agent: ``task`` (when sub-agents can be launched),
    ``tool_search`` (shown only while tools are deferred) and ``skill`` (shown when skills exist)."""
    tools: list[Tool] = []
    for tool in base.tools.values():
        if launcher is None and tool.name in SESSION_BOUND_TOOLS:
            continue  # bound to the parent's session; a sub-agent runs without DCP
        if tool.name == TASK_TOOL:
            if launcher is not None:
                tools.append(Task(launcher))
        elif tool.name not in (ToolSearch.name, SKILL_TOOL):
            tools.append(tool)
    if launcher is not None and TASK_TOOL not in base.tools:
        tools.append(Task(launcher))
    tools.append(ToolSearch(builder.deferral))
    if not builder.subagent:
        tools.append(SkillTool(builder.skills))
    return ToolRegistry(tools)
