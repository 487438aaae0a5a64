"""The played demo at a pace a person can follow, with a key to go faster, and a line saying what each step is.

A :class:`DemoPace` is shared by the UI (the faster key sets its speed) and the engine thread (every pause
reads it), so a speed chosen mid-pause applies at once. :class:`PacedScript` wraps the demo's scripted
provider: before each recorded response it says what that step is (the script's ``narrate`` block) and
pauses; its chunks stream at the pace's rate. :func:`event_narration` says what the engine's own events
mean (the budget passing a mark, a compaction starting). Tests play the demo with every pause at zero.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.engine import events as ev
    from workbench.engine.providers.base import ModelRequest, StreamItem
    from workbench.engine.providers.scripted import Script, ScriptedProvider

SPEEDS = (1.0, 4.0, math.inf)
"""What the faster key steps through, then back to the first: the demo's pace, four times it, no pauses."""
SLICE = 0.05
"""Seconds a pause sleeps between looks at the speed."""

Say = Callable[[str], None]


class DemoPace:
    """How fast the demo plays: a multiple of its pauses' speed (``math.inf``: no pauses). Set on the UI
    thread, read on the engine thread (a float's reads and writes are whole under the interpreter lock)."""

    def __init__(self, speed: float = SPEEDS[0]) -> None:
        self.speed = speed

    def faster(self) -> float:
        """The next speed of :data:`SPEEDS` (after the last, the first again)."""
        self.speed = next((speed for speed in SPEEDS if speed > self.speed), SPEEDS[0])
        return self.speed

    def label(self) -> str:
        return "full speed" if math.isinf(self.speed) else f"{self.speed:g}×"

    def scaled(self, seconds: float) -> float:
        return 0.0 if math.isinf(self.speed) else seconds / self.speed

    async def pause(self, seconds: float) -> None:
        """Wait ``seconds`` at speed 1, less at a higher speed, looking at the speed as it goes."""
        done = 0.0
        while done < seconds and not math.isinf(self.speed):
            step = min(SLICE, (seconds - done) / self.speed)
            started = time.monotonic()
            await asyncio.sleep(step)
            done += (time.monotonic() - started) * self.speed


def narration(script: Script) -> list[str | None]:
    """Each recorded response's ``narrate`` block, in the order the provider gives them (None: none)."""
    lines: list[str | None] = []
    for turn in script.turns:
        for response in turn.responses:
            said = [str(block["narrate"]) for block in response if "narrate" in block]
            lines.append(said[0] if said else None)
    return lines


class PacedScript:
    """The demo's scripted provider, paced by a :class:`DemoPace` and saying what each response is."""

    def __init__(self, inner: ScriptedProvider, pace: DemoPace, say: Say, *, step_pause: float,
                 chunk_delay: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.pace = pace
        self.say = say
        self.step_pause = step_pause
        self.chunk_delay = chunk_delay
        self._lines = narration(inner.script)

    async def count_tokens(self, request: ModelRequest) -> int | None:
        return await self.inner.count_tokens(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        index = len(self._lines) - self.inner.remaining  # the response the provider gives next
        if 0 <= index < len(self._lines) and self._lines[index]:
            self.say(str(self._lines[index]))
        await self.pace.pause(self.step_pause)
        self.inner.chunk_delay = self.pace.scaled(self.chunk_delay)
        async for item in self.inner.stream(request):
            yield item
            self.inner.chunk_delay = self.pace.scaled(self.chunk_delay)  # a new speed applies from the next chunk


def event_narration(event: ev.Event) -> str | None:
    """What an engine event means, said plainly, for the ones a viewer of the demo would miss."""
    from workbench.engine import events as ev  # deferred: loaded by the agent anyway, not by the app

    match event:
        case ev.Warning(kind="warn"):
            return "the budget passes the warn mark: the context is filling up"
        case ev.Warning(kind="compact"):
            return "the budget reaches the compact mark: the workbench compacts before the next request"
        case ev.CompactionStart(before_tokens=before):
            return f"compaction starts: {before:,} tokens to fold into a summary"
    return None


def compaction_narration(pinned: tuple[int, ...], before: int, after: int) -> str:
    """What a finished compaction kept (``pinned``: the positions of the pinned messages it kept)."""
    marks = ", ".join(f"#{position}" for position in pinned)
    kept = f"compaction keeps the [PERSIST] pin, every pinned message verbatim ({marks})" if pinned else \
        "compaction is done"
    return f"{kept}: {before:,} → {after:,} tokens"
