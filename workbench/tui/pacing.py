"""How fast the app plays and follows: plain numbers the command line shows in its help without loading the app."""

from __future__ import annotations

import math
import os

from workbench.engine.errors import WorkbenchError

DEMO_CHUNK_DELAY = 0.03
"""Seconds between streamed chunks in the played demo: an answer appears at about reading speed."""
DEMO_STEP_PAUSE = 1.5
"""Seconds before each of the demo's model calls, with the line saying what the step is on screen: the
played demo takes about a minute, and the faster key shortens every pause."""
DEMO_TURN_PAUSE = 2.5
"""Seconds between the end of a demo turn and the next scripted message."""
WATCH_INTERVAL = 0.5
"""Seconds between looks at a followed transcript: new lines show within a second."""
DEMO_SPEED_VARIABLE = "WORKBENCH_DEMO_SPEED"
"""A multiple of the demo's pace to start at (``inf``: no pauses at all, as the terminal tests play it)."""


def demo_speed() -> float:
    """The speed :data:`DEMO_SPEED_VARIABLE` asks the demo to start at (1 when it is not set)."""
    value = os.environ.get(DEMO_SPEED_VARIABLE, "").strip()
    if not value:
        return 1.0
    try:
        speed = float(value)
    except ValueError:
        speed = math.nan
    if not speed > 0:
        raise WorkbenchError(f"{DEMO_SPEED_VARIABLE}={value!r}: give a positive number, or inf for no pauses")
    return speed
