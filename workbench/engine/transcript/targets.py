"""What a command names as its target: a transcript file or a stored session's id."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench.engine.errors import SessionNotFound, WorkbenchError
from workbench.engine.transcript.store import Store

if TYPE_CHECKING:
    from workbench.engine.transcript.importers.reading import SkippedLine


def resolve_target(store: Store, target: str, fmt: str | None) -> tuple[str, list[SkippedLine] | None]:
    """A session id for ``target``, and for a transcript file the lines it could not read. The file is
    imported first, unless it has not changed since it was (then its stored session is it). The importers
    load only for a file: opening a stored session by its id does without them."""
    path = Path(target).expanduser()
    if path.exists():
        from workbench.engine.transcript.importers import imported_target

        return imported_target(store, path, fmt)
    try:
        store.get_session(target)
    except SessionNotFound:
        raise WorkbenchError(f"{target}: no such file, and no stored session with that id") from None
    return target, None
