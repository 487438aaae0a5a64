"""README screenshots, reproducibly: ``python -m workbench.tui.screenshots [OUTDIR]``.

Drives the real app headless at a fixed size and saves one SVG per state.
Every session lives in a temporary database and the data dir points at a
temporary directory, so the user's own database and logs are never touched.
``main.svg`` is the bundled scripted demo after it has played by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.tui.launch import Launch

if TYPE_CHECKING:
    from textual.pilot import Pilot

SIZE = (140, 45)
DEFAULT_FIXTURE = (Path(__file__).resolve().parents[2] / "tests" / "fixtures"
                   / "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl")
"""A real transcript from the repository's test fixtures, when running from a checkout."""
Steps = Callable[["Pilot[None]"], Awaitable[None]]


@dataclass(frozen=True)
class Shot:
    name: str
    launch: Launch
    steps: tuple[Steps | str, ...] = ()
    """Coroutines run with the pilot, or key names to press; the engine settles after each."""


async def _quiet(pilot: Pilot[None]) -> None:
    """Until the engine is done, or waits for the user (an approval)."""
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens.approval import ApprovalScreen

    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    for _ in range(30_000):
        if not app.pending or isinstance(app.screen, ApprovalScreen):
            break
        await asyncio.sleep(0.01)
    await pilot.pause()


async def take(shot: Shot, outdir: Path) -> Path:
    from textual.widgets import Input, TextArea

    from workbench.tui.app import WorkbenchApp

    app = WorkbenchApp(shot.launch)
    async with app.run_test(size=SIZE) as pilot:
        await _quiet(pilot)
        for step in shot.steps:
            if isinstance(step, str):
                await pilot.press(step)
            else:
                await step(pilot)
            await _quiet(pilot)
        for screen in app.screen_stack:
            for field in screen.query(Input):
                field.cursor_blink = False
            for area in screen.query(TextArea):
                area.cursor_blink = False
        app.clear_notifications()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return Path(app.save_screenshot(filename=f"{shot.name}.svg", path=str(outdir)))


def _cursor_on(predicate: Callable[[object], bool], nth: int = 0) -> Steps:
    async def step(pilot: Pilot[None]) -> None:
        from workbench.tui.app import WorkbenchApp
        from workbench.tui.widgets.message_list import MessageList

        app = pilot.app
        assert isinstance(app, WorkbenchApp) and app.main_screen.screen_state is not None
        found = [i for i, m in enumerate(app.main_screen.screen_state.messages) if predicate(m)]
        if found:
            app.main_screen.query_one(MessageList).cursor = found[min(nth, len(found) - 1)]
        await pilot.pause()

    return step


def _tool_result(message: object) -> bool:
    from workbench.engine.transcript.models import ToolResultPart

    return any(isinstance(p, ToolResultPart) for p in getattr(message, "parts", []))


def _big_result(message: object) -> bool:
    from workbench.engine.transcript.models import ToolResultPart

    return any(isinstance(p, ToolResultPart) and len(p.text) > 400 for p in getattr(message, "parts", []))


def _summary(message: object) -> bool:
    return getattr(message, "kind", "") == "summary"


def shots(tmp: Path, fixture: Path | None, proxied: Path | None = None, codex: Path | None = None) -> list[Shot]:
    from workbench.locations import demo_path

    played = replace(Launch.demo(tmp / "played.db", autoplay=True), chunk_delay=0.0, turn_pause=0.0, step_pause=0.0,
                     approval="approve")
    ready = Launch.demo(tmp / "ready.db", autoplay=False)
    transcript = Launch.open(tmp / "transcript.db", str(demo_path()))
    out = [
        Shot("main", played, ("escape", _cursor_on(_summary, -1))),
        Shot("demo-live-compaction", played),
        Shot("demo-ready", ready),
        Shot("demo-approval", replace(ready, approval="ask"), ("enter",)),
        Shot("demo", transcript),
        Shot("demo-error-result", transcript, tuple(["down"] * 28)),
        Shot("steering", transcript, (_cursor_on(lambda m: getattr(m, "role", "") == "assistant", 3), "p",
                                       _cursor_on(_big_result, 0), "x", _cursor_on(_big_result, 1), "o", "home")),
        Shot("offloaded-detail", transcript, (_cursor_on(_big_result, 1), "o", "enter")),
        Shot("strategies", transcript, ("S",)),
        Shot("compaction-preview", transcript, ("c",)),
        Shot("compaction-applied", transcript, ("c", "ctrl+s")),
        Shot("filter", transcript, ("slash", *"tool:Bash", "enter")),
        Shot("help", transcript, ("question_mark",)),
        Shot("sessions", transcript, ("ctrl+o",)),
    ]
    if fixture is not None:
        compacted = Launch.open(tmp / "fixture.db", str(fixture))
        out += [Shot("compacted-session", compacted), Shot("compacted-session-end", compacted, ("end",)),
                Shot("watch", Launch.watch(_plant(tmp, fixture), db=tmp / "watch.db"))]
    if proxied is not None:
        session = Launch.open(proxied, _newest_proxied(proxied))
        out += [Shot("proxied-claude-code", session),
                Shot("proxied-price", session, (_cursor_on(_tool_result, 0), "x"))]
    if codex is not None:
        out.append(Shot("proxied-codex", Launch.open(codex, _newest_proxied(codex))))
    return out


def _newest_proxied(db: Path) -> str:
    from workbench.engine.transcript.request_store import proxied_sessions
    from workbench.engine.transcript.store import Store

    with Store(db) as store:
        found = proxied_sessions(store)
    if not found:
        raise SystemExit(f"{db} holds no proxied session")
    return found[0][0]


def _plant(home: Path, fixture: Path) -> Path:
    """A copy of the real transcript where discovery looks (``HOME`` is ``home``): the picker lists it."""
    folder = home / ".claude" / "projects" / "-home-user-spotter"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / fixture.name
    shutil.copyfile(fixture, copy)
    return copy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.tui.screenshots", description=__doc__)
    parser.add_argument("outdir", nargs="?", type=Path, default=Path("screenshots"), help="where to write (default: screenshots/)")
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="a real transcript to show as well, if it exists")
    parser.add_argument("--only", action="append", metavar="NAME", help="only these screenshots (repeatable)")
    parser.add_argument("--proxied", type=Path, metavar="DB",
                        help="also show the newest proxied session of DB (made by python -m tests.claude_code_agent DB)")
    parser.add_argument("--proxied-codex", type=Path, metavar="DB",
                        help="also show the newest proxied session of DB (made by python -m tests.openai_agents DB)")
    args = parser.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    fixture = args.fixture if args.fixture.exists() else None
    if fixture is None:
        print(f"note: {args.fixture} not found; skipping the real-session screenshots", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="workbench-screenshots-") as tmp:
        os.environ["WORKBENCH_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ.pop("ANTHROPIC_API_KEY", None)  # the pictures show the offline workbench
        os.environ["HOME"] = tmp  # the picker lists what is planted there, not this machine's sessions
        for name in ("CODEX_HOME", "XDG_DATA_HOME"):
            os.environ.pop(name, None)
        codex = args.proxied_codex.resolve() if args.proxied_codex else None
        for shot in shots(Path(tmp), fixture, args.proxied.resolve() if args.proxied else None, codex):
            if args.only and shot.name not in args.only:
                continue
            print(asyncio.run(take(shot, args.outdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
