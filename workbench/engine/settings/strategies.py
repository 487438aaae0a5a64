"""Settings of the context strategies: one TOML section each, under ``[strategies]``.

Defaults are the numbers of the specifications: DCP (spec 000 §5), tool-output
pruning (spec 002 §5), offloading (spec 001 §2), archiving (spec 003). Every
section has ``enabled`` and ``mode``: an automatic strategy runs in the agent
loop on its own; a manual one only when asked (``workbench apply``, the TUI).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["automatic", "manual"]
DigestWriter = Literal["auto", "llm", "heuristic"]

DCP_PROTECTED_TOOLS = ("task", "todo_write", "todowrite", "skill")
"""The engine's and Claude Code's names (``Task``, ``TodoWrite``, ``Skill``): matched without regard to case."""
WRITE_TOOLS = ["write_file", "edit_file", "Write", "Edit", "MultiEdit", "NotebookEdit"]
READ_TOOLS = ["read_file", "Read"]
WHOLE_FILE_TOOLS = ["write_file", "Write"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    enabled: bool = True
    mode: Mode = "automatic"
    """``automatic``: applied by the agent loop; ``manual``: only planned, applied on request."""


class DcpConfig(BaseModel):
    """What the three DCP strategies and the model's prune / distill tools share (spec 000 §5)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    enabled: bool = True
    """Off switches dedup, supersede-writes, purge-errors, the nudge and the prune / distill tools together."""
    turn_protection: int = Field(6, ge=0)
    """The newest this many turns (a user message and what follows it; in a sub-agent, a step) are never
    pruned."""
    protected_file_patterns: list[str] = Field(
        default_factory=lambda: ["docs/plan/**", "docs/phases/**/PROGRESS.md", "**/AGENTS.md"]
    )
    """Globs on file-path arguments; calls on matching files are never pruned."""
    protected_tools: list[str] = Field(default_factory=lambda: list(DCP_PROTECTED_TOOLS))
    """Tools whose calls and outputs DCP never prunes, nor the model's prune / distill (matched without regard
    to case): sub-agent results, the todo list and skills carry state and instructions that cannot be read again."""
    nudge_at: float = Field(0.70, gt=0, le=1)
    """Share of the effective window from which the agent is reminded that it can prune."""
    nudge_every: int = Field(15, ge=1)
    """Remind every this many tool calls."""
    subagents: bool = False
    """DCP is off for sub-agent sessions (they manage their own context); true turns it on there too."""


class DedupConfig(_Section):
    """Older outputs of identical tool calls (same tool, same input) replaced by a placeholder."""


class SupersedeWritesConfig(_Section):
    """The content of a write or edit whose file is read later is pruned from the call's input; and the output
    of a read whose file a later write replaced whole (``reads``)."""

    write_tools: list[str] = Field(default_factory=lambda: list(WRITE_TOOLS))
    read_tools: list[str] = Field(default_factory=lambda: list(READ_TOOLS))
    reads: bool = True
    """A read's output goes too once a later ``whole_file_tools`` call replaced the file (as opencode-DCP does):
    it is no longer the file, and the write's input holds the file as it is. A read before an edit stays: the
    edit changed part of the file, and the rest of what was read still holds."""
    whole_file_tools: list[str] = Field(default_factory=lambda: list(WHOLE_FILE_TOOLS))


class PurgeErrorsConfig(_Section):
    """The inputs of failed tool calls are pruned once they are this many turns old."""

    turns: int = Field(4, ge=0)
    """0 is taken as 1, as DCP does: an error of the current turn is the one the agent is fixing."""


class ToolOutputPruningConfig(_Section):
    """OpenCode's soft compaction (spec 002 §5), in raw tokens of tool output."""

    protect: int = Field(40_000, ge=0)
    """The newest this many tokens of tool output are kept."""
    minimum: int = Field(20_000, ge=0)
    """Prune only when it saves more than this."""
    skip_turns: int = Field(2, ge=0)
    """The newest this many user turns are never scanned."""
    protected_tools: list[str] = Field(default_factory=lambda: ["skill"])
    """Tools whose outputs act as instructions; matched without regard to case."""


class OffloadConfig(_Section):
    """Results already in context over the threshold move to the blob table (the agent does it for new ones)."""

    mode: Mode = "manual"
    threshold: int = Field(4096, ge=0)
    """Bytes; a result larger than this is offloaded."""


class ArchiveConfig(_Section):
    """When more tool results are visible than ``cutoff``, the oldest are archived behind one digest (spec 003).

    Automatic by default, as spec 003 has it: before each request, by the count of results (not
    ``[strategies] automatic_from``), once its own ``automatic_from`` share of the window is in use. ``manual``
    keeps early messages as they are (each archive changes the prompt from the oldest archived result on, so
    the cache is written again)."""

    mode: Mode = "automatic"
    cutoff: int = Field(10, ge=0)
    """Spec 003's ``ToolCallCutoff``: at most this many tool results stay visible."""
    automatic_from: float = Field(0.5, ge=0, le=1)
    """Share of the effective window from which the automatic path archives: below it, hiding results saves
    nothing the window needs and costs the model what it read (0: at any share, as spec 003 has it)."""
    batch: int = Field(10, ge=1)
    """The automatic path archives once this many results are past the cutoff, all in one pass, and the new
    digest replaces the one before it: one digest in view, and one model call per batch rather than one per
    result (each pass also re-writes the prompt cache from the oldest archived message on). ``workbench apply``
    archives whatever is past the cutoff at once."""
    summary: DigestWriter = "auto"
    """Who writes the digest: ``auto``, the model that writes compaction summaries when there is one
    (``[compaction] summarizer`` and ``model``; not a scripted replay), else the offline heuristic;
    ``llm`` the model always, ``heuristic`` never. The model reads 12,000 characters of the archived
    results and its digest is clipped to 1,200 (spec 003); ``workbench plan`` / ``apply`` show the heuristic one."""
    max_chars: int = Field(800, ge=80)
    """The heuristic digest is clipped head and tail to this many characters."""


class StrategiesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    automatic_from: float = Field(0.70, ge=0, le=1)
    """Share of the effective window from which the agent runs the automatic strategies before each request.
    Spec 000 §5 runs them on every request (0 here); the default waits for DCP's own ``contextLimit`` of 70%:
    below it, planning every request costs a tenth of a second or more on a long session for little gain."""

    dcp: DcpConfig = Field(default_factory=DcpConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    supersede_writes: SupersedeWritesConfig = Field(default_factory=SupersedeWritesConfig)
    purge_errors: PurgeErrorsConfig = Field(default_factory=PurgeErrorsConfig)
    tool_output_pruning: ToolOutputPruningConfig = Field(default_factory=ToolOutputPruningConfig)
    offload: OffloadConfig = Field(default_factory=OffloadConfig)
    archive: ArchiveConfig = Field(default_factory=ArchiveConfig)
