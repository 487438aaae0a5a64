"""What every command shares: paths, settings, the store, and turning a target into a session."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from workbench import locations
from workbench.engine.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.engine.settings.config import Config
    from workbench.engine.transcript.importers import SkippedLine
    from workbench.engine.transcript.store import Store

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
SAY_IMPORTING = 5_000_000
"""Bytes above which opening a transcript says it is importing it first (it takes a moment)."""
FORMATS = ["claude-code", "codex", "opencode"]


class Environment:
    """Resolved paths and settings for one command run."""

    def __init__(self, args: argparse.Namespace) -> None:
        """A ``--config`` or ``--db`` the user names must be there (the config file, the database's
        folder): a typo is an error, not a silent fallback to defaults or a new folder tree."""
        if args.db is not None:
            folder = args.db.expanduser().parent
            if not folder.is_dir():
                raise WorkbenchError(f"--db {args.db}: folder {folder} does not exist; create it or choose another path")
        self.db_path: Path = args.db.expanduser() if args.db is not None else locations.default_db_path()
        self._named_config: Path | None = args.config.expanduser() if args.config is not None else None
        if self._named_config is not None:
            _ = self.config  # a file the user names is read at once: a typo or a bad file is said before any work
        self.damage: str | None = None
        """Why the database was opened read-only (it is damaged, or cannot be written), for the command's last
        word."""

    @cached_property
    def config(self) -> Config:
        """The settings, read when a command first needs them (listing sessions does not)."""
        from workbench.engine.settings.config import load_config  # deferred: pydantic and the settings models

        named = self._named_config
        return load_config(named or locations.config_path(), required=named is not None)

    def store(self) -> Store:
        from workbench.engine.transcript.store import Store  # deferred: its models load pydantic (0.1 s)

        store = Store(self.db_path)
        self.damage = self.damage or store.writes_refused
        return store


Handler = Callable[[Environment, argparse.Namespace], int]


class AddCommand(Protocol):
    def __call__(self, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser: ...


def check_target(db_path: Path, target: str, fmt: str | None, *, checked: bool = False, found: str | None = None
                 ) -> bool:
    """Before a full-screen app starts on ``target``: it is a file that looks like a transcript, or a
    stored session. Anything else is a :class:`WorkbenchError` saying which (a one-line error and a
    non-zero exit, not a dialog in an app the user then has to quit). True when the database was found
    healthy on the way (the app need not check it again). ``checked``: its health was checked just now, and
    ``found`` is what that found damaged (see :class:`Store`)."""
    from workbench.engine.transcript.store import Store

    path = Path(target).expanduser()
    if path.exists():
        # Deferred: the importers (and their models) are for a target that is a transcript.
        from workbench.engine.transcript.importers import detect_format, unchanged_import
        from workbench.engine.transcript.importers.reading import check_readable

        if fmt is None:
            detect_format(path)  # missing, empty, binary, a directory, or not a known format
        else:
            check_readable(path)
        # A transcript with no readable message is refused here too.
        with Store(db_path, checked=checked, found=found) as store:
            if path.is_file() and path.stat().st_size > SAY_IMPORTING and unchanged_import(store, path, fmt) is None:
                print(f"workbench: importing {path} ({path.stat().st_size / 1e6:,.1f} MB)…", file=sys.stderr, flush=True)
            resolve(store, target, fmt)  # the app then opens the stored session (the file is not read again)
        return store.damage is None
    if not db_path.exists():  # no database yet: no stored session either (and none is made to say so)
        raise WorkbenchError(f"{target}: no such file, and no stored session with that id")
    with Store(db_path, checked=checked, found=found) as store:
        resolve(store, target, fmt)  # the target is not a file here: this only looks the session up
    return store.damage is None


def warn_skipped(skipped: list[SkippedLine] | None) -> None:
    if skipped:
        lines = ", ".join(str(s.line) for s in skipped[:10])
        more = "…" if len(skipped) > 10 else ""
        print(f"warning: skipped {len(skipped)} unreadable line(s): {lines}{more}", file=sys.stderr)


def resolve(store: Store, target: str, fmt: str | None) -> tuple[str, list[SkippedLine] | None]:
    """A session id for a transcript file or a stored session (see ``targets.resolve_target``)."""
    from workbench.engine.transcript.targets import resolve_target  # deferred: only commands given a target need it

    return resolve_target(store, target, fmt)
