"""The garbage collector's settings for a program that holds long sessions: the application's choice,
made once at its start-up (the engine, a library, changes nothing process-wide).

Loading a session allocates a few objects per message and frees almost none, so with the default
thresholds the collector walks the growing session again and again for nothing; and once loaded, a
long session's millions of objects made every full collection pause the app. So: collect the young
generation less often, and after a session has loaded, move what it built out of the collector's way
(``gc.freeze``). Frozen objects are still freed when the session is let go (nothing in it is a cycle).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
"""Allocations between young collections (CPython's default is 700)."""


def tune_for_sessions() -> None:
    """At start-up: collect less often while sessions load."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def settle_loaded() -> None:
    """After a session has loaded: what it built is long-lived; keep full collections from walking it."""
    gc.freeze()
