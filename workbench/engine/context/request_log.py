"""What the engine knows of each API request of a session (:class:`RequestEstimate`), and the estimator's record of
them (:class:`RequestLog`): a resumed view's kept as stored columns until read."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload

Anchorless = Literal["start", "pivot", "model"]
"""Why a request had no anchor of its own model: nothing reported yet in the session, the first
since a pivot, or the first of its model since another model's request."""


@dataclass(slots=True)
class RequestEstimate:
    """One API request: what was reported, and what the engine estimated just before it. Never changed once
    made, though not frozen: a frozen dataclass's constructor took three times as long, and resuming a long
    session's view makes one per request (25,000 of them: 75 ms -> 23 ms)."""

    message_id: str
    model: str | None
    reported_input_tokens: int
    estimated_input_tokens: int
    anchor_input_tokens: int | None
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    anchorless: Anchorless | None = None
    """Set when ``anchor_input_tokens`` is None: why no report of this model anchored the estimate."""

    @property
    def cache_hit_rate(self) -> float | None:
        """Share of this request's input read from the prompt cache."""
        return self.cache_read_input_tokens / self.reported_input_tokens if self.reported_input_tokens else None


class StoredRequests(Protocol):
    """Requests kept as columns (a stored view state's, see ``view_state``): each made when read."""

    def __len__(self) -> int: ...

    def request(self, index: int) -> RequestEstimate:
        """The ``index``-th request (0 <= index < len)."""
        ...

    def field(self, name: str) -> list[Any]:
        """That field of every request, in order."""
        ...

    def positions(self) -> list[int]:
        """Each request's message by its position in the messages the requests were stored with."""
        ...


class RequestLog(Sequence[RequestEstimate]):
    """An estimator's requests, oldest first: those of a resumed view as their stored columns, each made into a
    :class:`RequestEstimate` when read; those made since as made. Resuming a long session made them all at
    once (25,000: some 80 million instructions, 4% of opening and showing it), and all a first frame needs of
    them, the timeline's series, is three of their fields (:meth:`field`)."""

    __slots__ = ("_made", "_stored", "_stored_count")

    def __init__(self, made: Iterable[RequestEstimate] = (), stored: StoredRequests | None = None) -> None:
        self._stored = stored
        self._stored_count = len(stored) if stored is not None else 0
        self._made = list(made)

    def __len__(self) -> int:
        return self._stored_count + len(self._made)

    @overload
    def __getitem__(self, index: int) -> RequestEstimate: ...
    @overload
    def __getitem__(self, index: slice) -> list[RequestEstimate]: ...
    def __getitem__(self, index: int | slice) -> RequestEstimate | list[RequestEstimate]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("request index out of range")
        if index < self._stored_count:
            assert self._stored is not None
            return self._stored.request(index)
        return self._made[index - self._stored_count]

    def __iter__(self) -> Iterator[RequestEstimate]:
        if self._stored is not None:
            yield from map(self._stored.request, range(self._stored_count))
        yield from self._made

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (RequestLog, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # it grows, as a list does

    def __repr__(self) -> str:
        return f"RequestLog({len(self):,} requests, {self._stored_count:,} of them stored)"

    def append(self, request: RequestEstimate) -> None:
        self._made.append(request)

    def extend(self, requests: Iterable[RequestEstimate]) -> None:
        self._made.extend(requests)

    def field(self, name: str) -> list[Any]:
        """That field of every request, in order, read from the columns where they are stored."""
        stored = self._stored.field(name) if self._stored is not None else []
        return stored + [getattr(request, name) for request in self._made]

    def positions(self, position_of: Callable[[str], int | None]) -> list[int | None]:
        """Each request's message by its position: stored with the stored requests, ``position_of`` its id for
        those made since."""
        stored: list[int | None] = list(self._stored.positions()) if self._stored is not None else []
        return stored + [position_of(request.message_id) for request in self._made]
