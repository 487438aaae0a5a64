"""What every command shares: paths, settings, the store, and turning a target into a session."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Protocol

from workbench import locations
from workbench.engine.config import Config, load_config
from workbench.engine.errors import SessionNotFound, WorkbenchError
from workbench.engine.importers import SkippedLine, import_file, unchanged_import
from workbench.engine.store import Store

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEMO_RESOURCE = "demo_session.jsonl"
FORMATS = ["claude-code", "codex", "opencode"]


class Environment:
    """Resolved paths and settings for one command run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.db_path: Path = args.db or locations.default_db_path()
        self.config: Config = load_config(args.config or locations.config_path())
        self.damage: str | None = None
        """Why the database was opened read-only (it is damaged), for the command's last word."""

    def store(self) -> Store:
        store = Store(self.db_path)
        self.damage = self.damage or store.damage
        return store


Handler = Callable[[Environment, argparse.Namespace], int]


class AddCommand(Protocol):
    def __call__(self, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser: ...


def demo_path() -> Path:
    return Path(str(resources.files("workbench.data").joinpath(DEMO_RESOURCE)))


def resolve(store: Store, target: str, fmt: str | None) -> tuple[str, list[SkippedLine] | None]:
    """A session id for ``target``, and for a transcript file the lines it could not read. The file is
    imported first, unless it has not changed since it was (then its stored session is it)."""
    path = Path(target).expanduser()
    if path.exists():
        known = unchanged_import(store, path, fmt)
        if known is not None:
            stored = known.metadata.get("skipped_lines", [])
            return known.id, [SkippedLine.model_validate(line) for line in stored]
        parsed = import_file(store, path, fmt)
        return parsed.session.id, parsed.skipped_lines
    try:
        store.get_session(target)
    except SessionNotFound:
        raise WorkbenchError(f"{target}: no such file, and no stored session with that id") from None
    return target, None


def warn_skipped(skipped: list[SkippedLine] | None) -> None:
    if skipped:
        lines = ", ".join(str(s.line) for s in skipped[:10])
        more = "…" if len(skipped) > 10 else ""
        print(f"warning: skipped {len(skipped)} unreadable line(s): {lines}{more}", file=sys.stderr)
