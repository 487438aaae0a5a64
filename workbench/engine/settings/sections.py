"""Settings of the agent's parts, as leaves: plain pydantic models that import nothing of the engine.

``config.Config`` aggregates them with the other sections; each feature module imports its own settings
from here, so settings never pull a feature module (and its imports) into the configuration.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PlanMode = Literal["implementation", "planning"]


USAGE_NOTE_AT = 0.80


API_BREAKPOINT_LIMIT = 4


class ProviderConfig(BaseModel):
    """How patient a real provider is (``[provider]`` in the config file)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    timeout: float = Field(600.0, gt=0, le=3600)
    """Seconds one model call may take before it counts as a failed attempt."""
    max_retries: int = Field(4, ge=0, le=20)
    """Retries after a rate limit, overload, server error, timeout or broken connection."""
    base_delay: float = Field(1.0, ge=0, le=120)
    """The first retry's wait in seconds (doubling after that) when the API does not say ``retry-after``."""


class SkillsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    dirs: list[str] = Field(default_factory=lambda: [".workbench/skills"])
    """Directories searched for skills, in order (the first of two same-named skills wins).
    Relative paths are relative to the workspace; ``~`` is expanded."""
    active: list[str] = Field(default_factory=list)
    """Skills active when a session starts."""
    max_file_bytes: int = Field(default=256 * 1024, gt=0)


class SubagentsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    retention_days: int | None = Field(default=30, ge=1)
    """Output files older than this are removed when a run starts; unset keeps them forever."""
    output_dir: str | None = None
    """Where output files go; ``<data dir>/subagent-outputs`` by default."""
    instructions: str | None = None
    """The sub-agent's base instructions; by default the parent's plus a note that it is a sub-agent."""


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Added to a minimal safe environment (HOME, PATH, ...), as the SDK does."""
    cwd: str | None = None
    """Working directory; the workspace by default."""
    enabled: bool = True


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    servers: list[McpServerConfig] = Field(default_factory=list)
    startup_timeout: float = Field(default=30.0, gt=0)
    """Seconds a server has to start and list its tools."""
    call_timeout: float = Field(default=300.0, gt=0)
    """Seconds one tool call may take."""

    @model_validator(mode="after")
    def _unique(self) -> McpConfig:
        names = [s.name for s in self.servers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"MCP server names must be unique: {', '.join(duplicates)}")
        return self


class DeferralConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    enabled: bool = True
    threshold: float = Field(default=0.10, gt=0, le=1)
    """Share of the effective window tool definitions may take before some are deferred."""
    order: list[str] = Field(default_factory=lambda: ["mcp", "skill"])
    """Tool origins that may be deferred, the first deferred first (built-in tools never are)."""


class PlanConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    enabled: bool = True
    """Inject the plan on the first user message of a session in phase mode."""
    plan_dir: str = "docs/plan"
    """Its existence (relative to the workspace) is what makes a session phase mode."""
    phases_dir: str = "docs/phases"
    key_documents: list[str] = Field(default_factory=lambda: ["01-vision.md", "03-architecture.md", "phases.md"])
    """Project-plan files (under ``plan_dir``) an implementation session gets; planning gets them all."""
    state_file: str = ".workbench/workflow.json"
    """Workflow state (mode, phase, subphase), relative to the workspace."""
    mode: PlanMode | None = None
    phase: str | None = None
    subphase: str | None = None
    """``"3.3"`` (or just ``"3"`` with ``phase``)."""
    warn_tokens: int = Field(default=100_000, ge=0)
    """Above this size the user is warned and told what to trim."""
    max_window_share: float = Field(default=0.5, gt=0, le=1)
    """Hard cap as a share of the effective window: beyond it files are left out, progress first."""
    max_file_bytes: int = Field(default=2 * 1024 * 1024, gt=0)


class PromptConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    memory_files: list[str] = Field(default_factory=lambda: ["AGENTS.md", "CLAUDE.md"])
    """Project-rule files read from the workspace (relative paths) into the system prompt."""
    memories: str | None = None
    """Cross-session memories: a markdown file, or a directory whose ``*.md`` files are read
    (``~`` expanded; relative to the workspace)."""
    usage_note_at: float = Field(default=USAGE_NOTE_AT, gt=0, le=1)
    """Share of the effective window from which the context-usage note is added (spec 001 §7)."""
    max_cache_breakpoints: int = Field(default=API_BREAKPOINT_LIMIT - 1, ge=0, le=API_BREAKPOINT_LIMIT)
    """Breakpoints for system sections and tools; what is left of the API's 4 marks the conversation's last
    message (one by default: every step of a turn then reads the steps before it from the cache)."""
    max_file_bytes: int = Field(default=256 * 1024, gt=0)
    """Memory files larger than this are left out (with a warning)."""
    plan: PlanConfig = Field(default_factory=PlanConfig)
    deferral: DeferralConfig = Field(default_factory=DeferralConfig)


class OutputLimits(BaseModel):
    """What the agent keeps of one tool result (``[tool_output]``, spec 003); ``tools.limits`` applies it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_lines: int = Field(2000, ge=1)
    """Lines kept (head and tail) before the characters are counted."""
    max_bytes: int = Field(50 * 1024, ge=256)
    max_chars: int = Field(200 * 1024, ge=64)
    mode: Literal["head", "head_tail"] = "head_tail"
    """``head_tail`` keeps the start and the end with a marker between; ``head`` only the start."""
    spill_threshold: int = Field(200 * 1024, ge=0)
    """Characters above which the whole output is written to a file named by its SHA-256 and the context gets
    its head and tail with the file's path (spec 003's large-output threshold); 0: never."""
    spill_preview: int = Field(3_000, ge=200)
    """Characters of a spilled output kept in context, head and tail (below the offload threshold)."""
