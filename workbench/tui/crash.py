"""Where a bug's details go: the workbench log, whose path the user is shown."""

from __future__ import annotations

import logging
from pathlib import Path

from workbench import locations

log = logging.getLogger("workbench.tui")


def write_crash_log(details: str) -> Path | None:
    """Append ``details`` to the workbench log; None when even that fails."""
    path = locations.log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(details)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)
        return None
    return path
