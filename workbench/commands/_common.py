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
from workbench.engine.importers import ParsedTranscript, import_file
from workbench.engine.store import Store

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEMO_RESOURCE = "demo_session.jsonl"
FORMATS = ["claude-code", "codex", "opencode"]


class Environment:
    """Resolved paths and settings for one command run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.db_path: Path = args.db or locations.default_db_path()
        self.config: Config = load_config(args.config or locations.config_path())

    def store(self) -> Store:
        return Store(self.db_path)


Handler = Callable[[Environment, argparse.Namespace], int]


class AddCommand(Protocol):
    def __call__(self, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser: ...


def demo_path() -> Path:
    return Path(str(resources.files("workbench.data").joinpath(DEMO_RESOURCE)))


def resolve(store: Store, target: str, fmt: str | None) -> tuple[str, ParsedTranscript | None]:
    """A session id for ``target``: a transcript file is imported first."""
    path = Path(target).expanduser()
    if path.exists():
        parsed = import_file(store, path, fmt)
        return parsed.session.id, parsed
    try:
        store.get_session(target)
    except SessionNotFound:
        raise WorkbenchError(f"{target}: no such file, and no stored session with that id") from None
    return target, None


def warn_skipped(parsed: ParsedTranscript) -> None:
    if parsed.skipped_lines:
        lines = ", ".join(str(s.line) for s in parsed.skipped_lines[:10])
        more = "…" if len(parsed.skipped_lines) > 10 else ""
        print(f"warning: skipped {len(parsed.skipped_lines)} unreadable line(s): {lines}{more}", file=sys.stderr)
