"""How fast the app plays and follows: plain numbers the command line shows in its help without loading the app."""

from __future__ import annotations

DEMO_CHUNK_DELAY = 0.03
"""Seconds between streamed chunks in the played demo: an answer appears at about reading speed."""
DEMO_STEP_PAUSE = 1.5
"""Seconds before each of the demo's model calls, with the line saying what the step is on screen: the
played demo takes about a minute, and the faster key shortens every pause."""
DEMO_TURN_PAUSE = 2.5
"""Seconds between the end of a demo turn and the next scripted message."""
WATCH_INTERVAL = 0.5
"""Seconds between looks at a followed transcript: new lines show within a second."""
