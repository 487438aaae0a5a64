"""How fast the app plays and follows: plain numbers the command line shows in its help without loading the app."""

from __future__ import annotations

DEMO_CHUNK_DELAY = 0.02
"""Seconds between streamed chunks in the played demo: visible, and the demo still takes well under a minute."""
WATCH_INTERVAL = 0.5
"""Seconds between looks at a followed transcript: new lines show within a second."""
