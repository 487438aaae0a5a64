"""Settings, one section per concern, read from a TOML file and validated by pydantic."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workbench.engine.errors import ConfigError
from workbench.engine.settings.compaction import CompactionConfig
from workbench.engine.settings.limits import MAX_TOKENS, ModelLimits
from workbench.engine.settings.policies import Policy, ProxyConfig
from workbench.engine.settings.sections import (
    McpConfig,
    OutputLimits,
    PromptConfig,
    ProviderConfig,
    SkillsConfig,
    SubagentsConfig,
)
from workbench.engine.settings.strategies import StrategiesConfig

M = TypeVar("M", bound=BaseModel)

ENV_PREFIX = "WORKBENCH_"
ENV_DELIMITER = "__"
"""``WORKBENCH_BUDGET__WARN`` sets ``budget.warn``."""


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    warn: float = Field(0.70, gt=0, le=1)
    """Share of the effective window at which the user is warned (spec 000 §5)."""
    compact: float = Field(0.95, gt=0, le=1)
    """Share at which compaction runs (spec 001 §3)."""
    block: float = Field(0.98, gt=0, le=1)
    """Share at which no new user message is accepted before compaction (spec 001 §3)."""
    output_reserve: int | None = Field(None, ge=0, le=MAX_TOKENS)
    """Tokens kept free for the reply; by default the model's maximum output, at most ``output_reserve_cap``."""
    output_reserve_cap: int = Field(32_000, ge=0, le=MAX_TOKENS)
    context_window: int | None = Field(None, ge=0, le=MAX_TOKENS)
    """Override the model's context window (for example with the 1M beta). 0 is spec 002's unlimited: the
    model's window is shown, and the agent never compacts on its own (only when asked, or when the API refuses
    a request as too long)."""

    @model_validator(mode="after")
    def _ordered(self) -> BudgetConfig:
        if not self.warn <= self.compact <= self.block:
            raise ValueError("budget thresholds must satisfy warn <= compact <= block")
        return self


class Config(BaseModel):
    """All settings. A TOML file gives them; ``WORKBENCH_BUDGET__WARN=0.6``-style variables fill what it leaves out
    (read by :func:`load_config`: ``Config()`` is the defaults, whatever the environment holds)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    models: dict[str, ModelLimits] = Field(default_factory=dict)
    """Extra or corrected model limits, keyed by model name prefix."""
    strategies: StrategiesConfig = Field(default_factory=StrategiesConfig)
    """Context strategies (DCP, tool-output pruning, offloading, archiving): one ``[strategies.NAME]`` section each."""
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    """System prompt: memory files, cross-session memories, plan injection, cache breakpoints, tool deferral."""
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    """Skill directories and the skills active at start."""
    mcp: McpConfig = Field(default_factory=McpConfig)
    """MCP servers started over stdio (``[[mcp.servers]]``); their tools join the agent's."""
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    """Sub-agents (the ``task`` tool): output files and their retention."""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """Full compaction: the kept tail, the summariser, decision markers, PreCompact / SessionStart hooks."""
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    """The Anthropic API: per-call timeout and retries."""
    tool_output: OutputLimits = Field(default_factory=OutputLimits)
    """How much of one tool result the agent keeps before storing it (spec 003): lines, characters, bytes."""
    proxy: ProxyConfig = Field(default_factory=ProxyConfig)
    """The proxy: the policy it runs for the agents it sees (none by default)."""
    policies: dict[str, Policy] = Field(default_factory=dict)
    """Policies of the user's own, by name, beside the built-in ``default`` (see ``workbench replay``)."""


def load_config(path: Path | None, *, required: bool = False) -> Config:
    """Read ``path`` (a missing file means defaults, unless ``required``: the user named it) and the
    ``WORKBENCH_*`` variables; a bad file or variable is a one-line :class:`ConfigError` naming the key."""
    if path is None or not path.exists():
        if path is not None and required:
            raise ConfigError(f"config {path}: no such file")
        return _validated({}, "environment (WORKBENCH_* variables)")
    import tomllib  # here: most starts read no file, and the parser's import was 5 ms of each

    try:
        data: dict[str, Any] = tomllib.loads(_read(path))
    except RecursionError as exc:
        raise ConfigError(f"cannot read config {path}: values nested too deeply") from exc
    except (OSError, ValueError) as exc:  # not UTF-8, not TOML, or an integer too long to convert
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    _check_characters(data, f"config {path}")
    return _validated(data, f"config {path}")


MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A config file is a few kilobytes; anything this large was named by mistake."""


def _read(path: Path) -> str:
    """The file's text, refused at once when it is not a regular file: a pipe would wait for a writer forever,
    and ``/dev/zero`` never ends."""
    if path.is_dir():
        raise ConfigError(f"config {path} is a directory, not a TOML file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a pipe opens without waiting, then is refused
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"config {path} is not a regular file (a pipe or a device); name a TOML file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config {path} is {info.st_size:,} bytes; a config file is at most "
                              f"{MAX_CONFIG_BYTES // 1024 // 1024} MiB")
        data: bytes = fh.read(MAX_CONFIG_BYTES + 1)
    return data.decode("utf-8")


def _check_characters(value: object, where: str, key: str = "") -> None:
    """A one-line error naming the first setting that holds a NUL character: no path, name or command can hold
    one, and the operating system refuses it later with an error that names nothing."""
    if isinstance(value, str) and "\x00" in value:
        raise ConfigError(f"{where}: {key or '(top level)'}: holds a NUL character (\\u0000), which no setting may")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, item in items:
        label = str(name) if str(name).isprintable() else repr(name)
        _check_characters(item, where, f"{key}.{label}" if key else label)


def _validated(data: dict[str, Any], where: str) -> Config:
    """``Config`` from a file's data and the environment; what is wrong is said in one line."""
    try:
        if _sets_a_setting(os.environ):
            from workbench.engine.settings.environment import with_environment  # deferred: see there

            return with_environment(Config, data, ENV_PREFIX, ENV_DELIMITER)
        return Config(**data) if data else defaults(Config)
    except RecursionError as exc:
        raise ConfigError(f"{where}: values nested too deeply") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"]]
        key = ".".join(p if p.isprintable() else repr(p) for p in loc) or "(top level)"
        if loc and loc[0] not in data:  # the file does not set it: a WORKBENCH_* variable does
            where = _variables(loc)
        raise ConfigError(f"{where}: {key}: {first['msg']}") from exc


def _sets_a_setting(environ: Mapping[str, str]) -> bool:
    """Some ``WORKBENCH_*`` variable names a section of :class:`Config` (``WORKBENCH_DATA_DIR`` and the like
    name no setting)."""
    sections = Config.model_fields
    for name in environ:
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) and upper[len(ENV_PREFIX):].split(ENV_DELIMITER)[0].lower() in sections:
            return True
    return False


def _variables(loc: list[str]) -> str:
    """The ``WORKBENCH_*`` variables that set the setting at ``loc`` (or its section)."""
    for depth in range(len(loc), 0, -1):
        prefix = "WORKBENCH_" + "__".join(loc[:depth]).upper()
        names = sorted(n for n in os.environ if n.upper() == prefix or n.upper().startswith(prefix + "__"))
        if names:
            return "environment variable " + ", ".join(names)
    return "environment (WORKBENCH_* variables)"


def defaults(model: type[M]) -> M:
    """``model()``, made without validating: its defaults are valid by definition. Every settings model is built
    lazily (``defer_build``): validating the defaults built the validators of all 25 sections, and pydantic's
    first one loads its plugin machinery (55-90 ms in all), on every start that reads no config file, before
    the first frame. A config file or variable still validates everything, as ``Config(**data)`` does."""
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        factory = info.default_factory
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            values[name] = defaults(factory)
    return model.model_construct(_fields_set=set(), **values)
