"""The garbage collector's settings for a program that holds long sessions: the application's choice,
made once at its start-up (the engine, a library, changes nothing process-wide).

Loading a session allocates a few objects per message and frees almost none, so with the default
thresholds the collector walks the growing session again and again for nothing; and once loaded, a
long session's millions of objects made every full collection pause the app. So: collect the young
generation less often, and after a session has loaded, move what it built out of the collector's way
(``gc.freeze``). Frozen objects are still freed when the session is let go (nothing in it is a cycle).
An import, which keeps nothing, runs with the collector paused (:func:`paused`); so does loading the app's
modules, which keeps everything (:func:`loading_modules`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
"""Allocations between young collections (CPython's default is 700)."""


def tune_for_sessions() -> None:
    """At start-up: collect less often while sessions load."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def before_exit() -> None:
    """When the program is about to end: everything alive ends with it, so the collections the interpreter
    makes while it shuts down need not walk it (measured after loading the importers: 27 ms to shut down,
    8 ms frozen). Only for the program's own exit: frozen objects are never collected."""
    gc.freeze()


def settle_loaded() -> None:
    """After a session has loaded: what it built is long-lived; keep full collections from walking it."""
    gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """While an import runs: no collections at all. It allocates about a million container objects for a
    2.7 MB transcript and makes no reference cycles, so reference counting frees all it drops;
    the young collections only walked what survived anyway (measured: a 100,000-message import 13% faster,
    its peak memory the same). The collector is as it was afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def loading_modules() -> Iterator[None]:
    """While the app's modules load: no collections (two of them walked the classes and functions loaded so far,
    70-120 ms of ``workbench open`` starting up), and after, what they made is frozen: a module's objects live
    as long as the program, so later full collections need not walk them either. What this keeps that a
    collection would have freed is small (measured: about a thousand objects of the 115,000 loaded)."""
    with paused():
        yield
        gc.freeze()  # before the collector is back: its first allocation would collect all that was loaded
