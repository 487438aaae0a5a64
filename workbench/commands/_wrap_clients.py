"""How ``workbench wrap`` points each agent at the proxy without touching the user's own config files.

Claude Code reads ``ANTHROPIC_BASE_URL``. Codex CLI ignores ``OPENAI_BASE_URL``: the model provider it
uses gets the proxy as its ``base_url`` through ``-c`` options on its command line (the user's provider,
its key variable and settings kept; the built-in ``openai`` provider becomes a provider entry of the same
shape, plain HTTP and ``OPENAI_API_KEY``). OpenCode merges ``OPENCODE_CONFIG_CONTENT`` over every config
file it reads: the provider of its model gets the proxy as ``baseURL`` there. Aider reads
``OPENAI_API_BASE``. Where the user's provider names its own base URL, that URL becomes the proxy's
upstream, so requests still go where they went.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

WORKBENCH_PROVIDER = "workbench"
ANTHROPIC_PACKAGES = ("@ai-sdk/anthropic",)


@dataclass
class ClientWrap:
    """What wrapping one agent takes: the upstreams to forward to, then its command line and environment."""

    client: str
    openai_upstream: str | None = None
    anthropic_upstream: str | None = None
    codex_provider: str | None = None
    """The Codex model provider to redirect (None: the built-in one, replaced by a provider entry)."""
    opencode_provider: tuple[str, str] | None = None
    """(provider id, ``openai`` or ``anthropic``): the OpenCode provider to redirect, and which side of the proxy."""
    notes: list[str] = field(default_factory=list)

    def launch(self, agent: list[str], url: str, environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """The command and environment that run the agent through the proxy at ``url``."""
        env = {**environ, "ANTHROPIC_BASE_URL": url}
        if self.client == "codex":
            return [agent[0], *self._codex_options(url), *agent[1:]], env
        if self.client == "opencode" and self.opencode_provider is not None:
            name, _ = self.opencode_provider
            overlay = {"provider": {name: {"options": {"baseURL": f"{url}/v1"}}}}
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(_merged(environ.get("OPENCODE_CONFIG_CONTENT"), overlay))
        if self.client == "aider":
            env["OPENAI_API_BASE"] = env["OPENAI_BASE_URL"] = f"{url}/v1"
        return agent, env

    def _codex_options(self, url: str) -> list[str]:
        base = json.dumps(f"{url}/v1")
        if self.codex_provider is not None:
            return ["-c", f"model_providers.{self.codex_provider}.base_url={base}"]
        entry = f'{{ name = "OpenAI through the workbench", base_url = {base}, env_key = "OPENAI_API_KEY", ' \
                'wire_api = "responses" }'
        return ["-c", f"model_providers.{WORKBENCH_PROVIDER}={entry}", "-c", f'model_provider="{WORKBENCH_PROVIDER}"']

    def said(self, url: str) -> str:
        """One line saying what wrapping did."""
        return f"workbench: {self.client} → {url}" + "".join(f"; {note}" for note in self.notes)


def _merged(existing: str | None, overlay: dict[str, Any]) -> dict[str, Any]:
    try:
        base = json.loads(existing) if existing else {}
    except ValueError:
        base = {}
    return _deep(base if isinstance(base, dict) else {}, overlay)


def _deep(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        out[key] = _deep(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def client_of(agent: list[str]) -> str:
    """``codex``, ``opencode``, ``aider`` or ``claude`` (any other program: as Claude Code, by its base URL)."""
    name = Path(agent[0]).name.lower() if agent else ""
    for known in ("codex", "opencode", "aider"):
        if name == known or name.startswith(f"{known}."):
            return known
    return "claude"


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _codex(agent: list[str], environ: Mapping[str, str], home: Path) -> ClientWrap:
    wrap = ClientWrap("codex")
    config = _toml(Path(environ.get("CODEX_HOME") or home / ".codex") / "config.toml")
    provider = _option(agent, "model_provider") or config.get("model_provider")
    providers = config.get("model_providers") or {}
    entry = providers.get(provider) if isinstance(providers, dict) and isinstance(provider, str) else None
    if isinstance(entry, dict) and isinstance(entry.get("base_url"), str):
        wrap.codex_provider, wrap.openai_upstream = str(provider), entry["base_url"]
        wrap.notes.append(f"model provider {provider}'s base_url set on the command line (-c), upstream "
                          f"{entry['base_url']}")
    else:
        wrap.notes.append("a 'workbench' model provider given on the command line (-c) with OPENAI_API_KEY, "
                          "in place of the built-in openai provider")
    return wrap


def _option(agent: list[str], key: str) -> str | None:
    """A ``-c key=value`` the user gave Codex on the command line."""
    for flag, value in pairwise(agent):
        if flag in ("-c", "--config") and value.startswith(f"{key}="):
            return value.split("=", 1)[1].strip().strip('"')
    return None


def _opencode_configs(environ: Mapping[str, str], home: Path, cwd: Path) -> dict[str, Any]:
    """OpenCode's config as its JSON files give it (global, ``OPENCODE_CONFIG``, then the project's)."""
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    paths = [config_home / "config.json", config_home / "opencode.json"]
    if environ.get("OPENCODE_CONFIG"):
        paths.append(Path(environ["OPENCODE_CONFIG"]))
    if not environ.get("OPENCODE_DISABLE_PROJECT_CONFIG"):
        paths += [folder / "opencode.json" for folder in reversed([cwd, *cwd.parents])]
    merged: dict[str, Any] = {}
    for path in paths:
        merged = _deep(merged, _json(path))
    return _deep(merged, _merged(environ.get("OPENCODE_CONFIG_CONTENT"), {}))


def _opencode(agent: list[str], environ: Mapping[str, str], home: Path, cwd: Path) -> ClientWrap:
    wrap = ClientWrap("opencode")
    config = _opencode_configs(environ, home, cwd)
    model = next((agent[i + 1] for i, flag in enumerate(agent[:-1]) if flag in ("-m", "--model")), None)
    model = model or config.get("model")
    name = model.split("/", 1)[0] if isinstance(model, str) and "/" in model else "openai"
    provider = (config.get("provider") or {}).get(name) or {}
    package = str(provider.get("npm") or ("@ai-sdk/anthropic" if name == "anthropic" else ""))
    side = "anthropic" if package in ANTHROPIC_PACKAGES else "openai"
    wrap.opencode_provider = (name, side)
    base = (provider.get("options") or {}).get("baseURL")
    if isinstance(base, str) and base:
        if side == "anthropic":
            wrap.anthropic_upstream = base.removesuffix("/").removesuffix("/v1")
        else:
            wrap.openai_upstream = base
    wrap.notes.append(f"provider {name}'s baseURL set in OPENCODE_CONFIG_CONTENT"
                      + (f", upstream {base}" if isinstance(base, str) and base else ""))
    return wrap


def plan(agent: list[str], environ: Mapping[str, str] | None = None, home: Path | None = None,
         cwd: Path | None = None) -> ClientWrap:
    """How to wrap ``agent``, read from its own config (never written)."""
    environ = os.environ if environ is None else environ
    home = home or Path(environ.get("HOME") or Path.home())
    client = client_of(agent)
    if client == "codex":
        return _codex(agent, environ, home)
    if client == "opencode":
        return _opencode(agent, environ, home, cwd or Path.cwd())
    if client == "aider":
        wrap = ClientWrap("aider", openai_upstream=environ.get("OPENAI_API_BASE") or None)
        wrap.notes.append("OPENAI_API_BASE set" + (f", upstream {wrap.openai_upstream}" if wrap.openai_upstream
                                                    else ""))
        return wrap
    return ClientWrap("claude", notes=["ANTHROPIC_BASE_URL set"])
