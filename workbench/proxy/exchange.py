"""One request through the proxy, as the recorder, the server and the headless report see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from workbench.proxy.response import Answer
from workbench.proxy.threads import Placement


@dataclass
class Exchange:
    """One request through the proxy, from its arrival to the end of its answer."""

    body: bytes
    """What goes upstream: the client's bytes, or the steered request."""
    placement: Placement | None = None
    seq: int = 0
    parsed: dict[str, Any] | None = None
    steered: dict[str, Any] | None = None
    """The request as forwarded, when the overlay changed it (``body`` is its bytes)."""
    edited: bool = False
    changed: set[tuple[int, int]] = field(default_factory=set)
    """(message, block) positions the steering replaced, in what was sent."""
    sent_ids: list[str | None] | None = None
    """The transcript id of each message sent, when a compaction reshaped the list (None: the client's)."""
    warning: str | None = None
    beta: str | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The client's key (its headers'), held only to redact it from what is stored; never stored."""
    activated: list[str] = field(default_factory=list)
    """Queued edits this request found the cache cold for, so they apply from it on."""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    steered_at: datetime | None = None
    """When the overlay was read for this request: its answer's time, so the usage the API reports counts the
    steering made before it (already out of that figure) and not what was steered after."""
    status: int = 0
    answer: Answer | None = None
    outcome: str | None = None
    """How the answer ended when not as the API means it to (None): an error event in the stream, cut by the
    upstream, abandoned by the client, unreadable to the proxy."""
    pending: bool = False
    """Prepared, and not yet handed to the store (see :meth:`Recorder.store_request`)."""
    stored: bool = False
    """In the store, as request ``seq`` (the number is taken as it is written: another proxy may write the
    same session)."""
