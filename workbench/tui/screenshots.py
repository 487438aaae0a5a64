"""README screenshots, reproducibly: ``python -m workbench.tui.screenshots [OUTDIR]``.

Drives the real app headless at a fixed size and saves one SVG per state. Every
session is imported into a temporary database and the data dir points at a
temporary directory, so the user's own database and logs are never touched.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.context import SessionContext
from workbench.engine.importers import import_file
from workbench.engine.store import Store

SIZE = (140, 45)
DEFAULT_FIXTURE = Path("/work/shared/fixtures/claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl")


@dataclass(frozen=True)
class Shot:
    name: str
    loader: Callable[[], SessionContext]
    keys: tuple[str, ...] = ()


def file_loader(db: Path, path: Path) -> Callable[[], SessionContext]:
    def load() -> SessionContext:
        with Store(db) as store:
            parsed = import_file(store, path)
            return SessionContext.load(store, parsed.session.id)

    return load


async def take(shot: Shot, outdir: Path) -> Path:
    from workbench.tui.app import WorkbenchApp

    app = WorkbenchApp(shot.loader)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        if shot.keys:
            await pilot.press(*shot.keys)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return Path(app.save_screenshot(filename=f"{shot.name}.svg", path=str(outdir)))


def shots(db: Path, fixture: Path | None) -> list[Shot]:
    from workbench.cli import demo_path

    demo = file_loader(db, demo_path())
    out = [
        Shot("demo", demo),
        Shot("demo-error-result", demo, ("down",) * 28),
        Shot("help", demo, ("question_mark",)),
    ]
    if fixture is not None:
        compacted = file_loader(db, fixture)
        out += [Shot("compacted-session", compacted), Shot("compacted-session-end", compacted, ("end",))]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.tui.screenshots", description=__doc__)
    parser.add_argument("outdir", nargs="?", type=Path, default=Path("screenshots"), help="where to write (default: screenshots/)")
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="a real transcript to show as well, if it exists")
    args = parser.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    fixture = args.fixture if args.fixture.exists() else None
    if fixture is None:
        print(f"note: {args.fixture} not found; skipping the real-session screenshots", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="workbench-screenshots-") as tmp:
        os.environ["WORKBENCH_DATA_DIR"] = str(Path(tmp) / "data")
        for shot in shots(Path(tmp) / "screenshots.db", fixture):
            print(asyncio.run(take(shot, args.outdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
