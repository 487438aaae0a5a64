"""The request messages of a growing view, built once: each view asks only for the items added since.

A live session appends a message and freezes a view many times a turn; building the wire (the Messages API
``messages`` list) from scratch each time would cost O(session) per message. :class:`WireCache` keeps what
it built and extends it; when the items stop being a prefix of what they were (a compaction, a summary
moved first) :meth:`restart` starts it again and views frozen before then build their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from threading import Lock
from typing import Any

from workbench.engine.context.view import ContextItem, Wire
from workbench.engine.transcript.blocks import append_wire, blocks_of


class WireCache:
    """Thread-safe: a view may be read on another thread than the one adding messages."""

    def __init__(self, items: Sequence[ContextItem]) -> None:
        """``items``: the builder's item list, read as it grows (never copied)."""
        self._items = items
        self._wire: list[dict[str, Any]] = []
        self._wired = 0
        """How many of ``items`` are in ``_wire``: it is extended when a view's wire is asked for."""
        self.generation = 0
        """Changes whenever the items stop being a prefix of what they were."""
        self._lock = Lock()

    def restart(self, items: Sequence[ContextItem]) -> None:
        """The items changed other than by growing (``items``: the list now in use)."""
        with self._lock:
            self._items = items
            self._wire = []
            self._wired = 0
            self.generation += 1

    def source(self, count: int) -> Callable[[], Wire | None]:
        """What a view of the first ``count`` items calls for its wire."""
        return partial(self._until, self.generation, count)

    def _until(self, generation: int, count: int) -> Wire | None:
        """The wire of the first ``count`` items, folding in those added since it was last asked for;
        None if the items changed since (the view then builds its own)."""
        with self._lock:
            if generation != self.generation or self._wired > count:
                return None
            for item in self._items[self._wired:count]:
                append_wire(self._wire, item.role or "", item.blocks or blocks_of(item.parts))
            self._wired = count
            return tuple(self._wire)
