"""A progress bar for a long import, on a terminal only: ``--json`` output and redirected runs stay clean."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from workbench.engine.transcript.importers import Progress


def wanted(as_json: bool, stream: TextIO | None = None) -> bool:
    """Whether to draw progress: not for ``--json``, and only when stderr is a terminal."""
    target = stream if stream is not None else sys.stderr
    return not as_json and target.isatty()


@contextmanager
def import_progress(path: Path, show: bool) -> Iterator[Progress | None]:
    """A rich progress bar on stderr that follows an import of ``path``, gone when it ends; None if not ``show``."""
    if not show:
        yield None
        return
    # Here, not at the top: rich's progress is only needed when a terminal watches an import.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    with Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
             TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"reading {path.name}", total=None)

        def report(step: str, done: int, total: int) -> None:
            if step == "store":
                bar.update(task, description=f"storing {path.name}", completed=done, total=total)

        yield report
