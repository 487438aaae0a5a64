"""What requests cost: the price table (``workbench/data/prices.toml``) applied to reported usage.

The API other code calls::

    prices_for("claude-sonnet-4-5-20250929")    # Prices | None: the table's rates for a model id
    request_cost(usage, "claude-opus-4-8")      # USD for one request's Usage (0.0 when there is no price)
    token_cost(12_000, "claude-opus-4-8")       # USD for tokens at one rate ("input", "cache_read"...)
    session_cost(messages)                      # SessionCost: per request and in total, and on what basis

A model id is read as :func:`workbench.engine.settings.limits.normalize` reads it (dated, ``-latest``, ``[1m]``
and provider-prefixed ids use their model's entry). A Claude id the table does not know is priced as
its family's newest model, with ``Prices.exact`` False; any other unknown model has no price (None).

A request whose input (uncached + cache writes + cache reads) exceeds the model's long-context
threshold is billed at its long-context rates for every token, output included, where the table has
them (Sonnet 4 and 4.5 above 200k; Haiku 5.5 above 100k).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from functools import cache, lru_cache
from importlib import resources
from typing import Any, Literal, cast, overload

from workbench.engine.settings.limits import STANDARD_WINDOW, family_key, match_key, normalize
from workbench.engine.transcript.models import Message, Usage

PRICES_RESOURCE = "prices.toml"
PER_TOKEN = 1 / 1_000_000
"""The table is in USD per million tokens."""

Rate = Literal["input", "output", "cache_write_5m", "cache_write_1h", "cache_read"]
CostBasis = Literal["reported", "estimated", "none"]


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float

    def of(self, rate: Rate) -> float:
        value: float = getattr(self, rate)
        return value


@dataclass(frozen=True, slots=True)
class Prices:
    """One model's prices, as the table gives them on ``as_of``."""

    model: str
    """The table entry the id was priced as (``claude-opus-4-8``)."""
    standard: Rates
    long_context: Rates | None
    long_context_above: int
    """Input tokens above which ``long_context`` applies (when there is one)."""
    as_of: date
    exact: bool = True
    """False when an unknown id was priced as its family's newest model."""

    def rates(self, input_total: int) -> Rates:
        """The rates of a request that sent ``input_total`` tokens (cached or not)."""
        if self.long_context is not None and input_total > self.long_context_above:
            return self.long_context
        return self.standard


@dataclass(frozen=True, slots=True)
class PriceTable:
    """The prices shipped with the workbench: per model, its rates (and its long-context rates above a size)."""

    as_of: date
    source: str
    models: Mapping[str, tuple[Rates, Rates | None, int]]


def _rates(data: Mapping[str, Any]) -> Rates:
    return Rates(**{name: float(data[name]) for name in Rates.__slots__})


@cache
def price_table() -> PriceTable:
    """The table shipped with the workbench, read once when first asked for."""
    import tomllib  # here: a session reopened shows its stored cost without the table (5 ms of its start)

    text = resources.files("workbench.data").joinpath(PRICES_RESOURCE).read_text(encoding="utf-8")
    data = tomllib.loads(text)
    models: dict[str, tuple[Rates, Rates | None, int]] = {}
    for name, entry in data["models"].items():
        long = entry.get("long_context")
        models[name] = (_rates(entry), _rates(long) if long else None, int(long["above"]) if long else STANDARD_WINDOW)
    as_of = data["as_of"]
    return PriceTable(as_of=as_of if isinstance(as_of, date) else date.fromisoformat(str(as_of)),
                      source=str(data.get("source", "")), models=models)


@lru_cache(maxsize=256)
def prices_for(model: str | None) -> Prices | None:
    """The prices of ``model`` (any form of its id), or None when the table has none for it."""
    if not model:
        return None
    table = price_table()
    key = match_key(normalize(model), table.models)
    exact = key is not None
    if key is None:
        key = family_key(model, list(table.models))
    if key is None:
        return None
    standard, long, above = table.models[key]
    return Prices(model=key, standard=standard, long_context=long, long_context_above=above,
                  as_of=table.as_of, exact=exact)


def usage_cost(usage: Usage, prices: Prices) -> float:
    """USD for one request's usage at ``prices``."""
    rates = prices.rates(usage.total_input)
    one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    return PER_TOKEN * (
        usage.input_tokens * rates.input
        + usage.output_tokens * rates.output
        + (usage.cache_creation_input_tokens - one_hour) * rates.cache_write_5m
        + one_hour * rates.cache_write_1h
        + usage.cache_read_input_tokens * rates.cache_read
    )


def request_cost(usage: Usage, model: str | None = None) -> float:
    """USD for one request: ``usage`` priced as ``model`` (by default the model the usage names).

    0.0 when the model has no price: ask :func:`prices_for` first to tell "free" from "not known".
    """
    prices = prices_for(model or usage.model)
    return usage_cost(usage, prices) if prices is not None else 0.0


def token_cost(tokens: int, model: str | None, rate: Rate = "input", *, input_total: int = 0) -> float:
    """USD for ``tokens`` at one of the model's rates (0.0 without a price).

    For the price of an edit: tokens taken out of a cached prefix save ``cache_read`` on every later
    request that reads the cache, and ``input`` on one that does not. ``input_total``: the size of the
    request they belong to, for models whose long requests cost more.
    """
    prices = prices_for(model)
    return tokens * PER_TOKEN * prices.rates(input_total).of(rate) if prices is not None else 0.0


@dataclass(frozen=True, slots=True)
class RequestCost:
    """What one request cost, from the usage its response reported."""

    message_id: str
    model: str | None
    usd: float
    priced: bool
    """False when the model has no price: ``usd`` is 0 and not part of a known total."""
    synthetic: bool = False
    """The usage was computed by the engine (a scripted session), not reported by the API."""


PRICED, SYNTHETIC = 1, 2
"""A request's flags, as :class:`RequestCosts` keeps them."""


class RequestCosts(Sequence[RequestCost]):
    """The first ``count`` requests of a :class:`CostTally` (which only grows), each made into a
    :class:`RequestCost` when read: a long session resumed from its view state has tens of thousands, and what
    its header shows (the total, whether any request is priced, the latest) reads one at most."""

    __slots__ = ("_count", "_tally")

    def __init__(self, tally: CostTally, count: int) -> None:
        self._tally = tally
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> RequestCost: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[RequestCost, ...]: ...
    def __getitem__(self, index: int | slice) -> RequestCost | tuple[RequestCost, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._count)))
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("request index out of range")
        tally = self._tally
        flags = tally._flags[index]
        return RequestCost(tally._ids[index], tally._models[index], tally._usds[index], bool(flags & PRICED),
                           bool(flags & SYNTHETIC))

    def __iter__(self) -> Iterator[RequestCost]:
        return (self[index] for index in range(self._count))

    @property
    def priced(self) -> bool:
        """Whether any of these requests has a price."""
        first = self._tally._first_priced
        return first is not None and first < self._count

    def _columns(self) -> tuple[list[str], list[str | None], list[float], bytes]:
        tally, count = self._tally, self._count
        return tally._ids[:count], tally._models[:count], tally._usds[:count], bytes(tally._flags[:count])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestCosts):
            return self._columns() == other._columns()
        if isinstance(other, Sequence):
            return len(other) == self._count and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RequestCosts({list(self)!r})"


@dataclass(frozen=True, slots=True)
class SessionCost:
    """What a session's requests cost, request by request."""

    usd: float
    requests: RequestCosts
    basis: CostBasis
    """``reported``: every priced request's usage came from the API; ``estimated``: some came from the
    engine's own counts; ``none``: no request reported usage, so nothing can be priced."""
    unpriced: tuple[str, ...] = ()
    """Models of requests with no price in the table (their requests are left out of ``usd``)."""
    as_of: date | None = None

    @property
    def label(self) -> str:
        """``$1.23``, ``≈$1.23 est.``, or why there is no figure; for a header or a report line."""
        if not self.requests:
            return "cost not known: no usage reported"
        if not self.requests.priced:
            return f"cost not known: no price for {', '.join(self.unpriced) or 'an unnamed model'}"
        figure = format_usd(self.usd)
        if self.basis == "estimated":
            figure = f"≈{figure} est."
        return f"{figure} + unpriced" if self.unpriced else figure


    @property
    def short(self) -> str:
        """The figure alone for a header: ``$1.23``, ``≈$1.23 est.``, ``$1.23+`` (some requests unpriced), or ``""``."""
        if not self.requests.priced:
            return ""
        figure = format_usd(self.usd) + ("+" if self.unpriced else "")
        return f"≈{figure} est." if self.basis == "estimated" else figure

    @property
    def last(self) -> str:
        """The latest request's cost (``""`` when it has no price)."""
        last = self.requests[-1] if self.requests else None
        return format_usd(last.usd) if last is not None and last.priced else ""


def format_usd(usd: float) -> str:
    """Dollars to the cent, to the tenth of a cent below ten cents, and ``< $0.001`` below that (not ``$0.000``,
    which reads as free)."""
    if usd < 0:
        return f"-{format_usd(-usd)}" if usd <= -0.001 else "> -$0.001"
    if usd >= 0.1 or usd == 0:
        return f"${usd:,.2f}"
    return f"${usd:.3f}" if usd >= 0.001 else "< $0.001"


class CostTally:
    """A session's cost kept as messages arrive: O(1) per message, so a live session can ask after each one.

    The requests are kept as columns (restored as such from a view state: no object per request), made into
    :class:`RequestCost` when read (:class:`RequestCosts`)."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._models: list[str | None] = []
        self._usds: list[float] = []
        self._flags = bytearray()
        """Each request's ``PRICED`` and ``SYNTHETIC`` bits."""
        self._first_priced: int | None = None
        self._unpriced: dict[str, None] = {}
        self._synthetic = False
        self._usd = 0.0
        self._result: SessionCost | None = None
        self._as_of: date | None = None
        """The price table's date, kept with a restored tally: reading the table for it alone was 10 ms of
        reopening a session."""

    def add(self, message: Message) -> None:
        usage = message.usage
        if usage is None or (usage.total_input <= 0 and usage.output_tokens <= 0):
            return
        model = usage.model or message.model
        prices = prices_for(model)
        if prices is None:
            self._unpriced[model or "unknown"] = None
        elif self._first_priced is None:
            self._first_priced = len(self._ids)
        usd = usage_cost(usage, prices) if prices is not None else 0.0
        self._ids.append(message.id)
        self._models.append(model)
        self._usds.append(usd)
        self._flags.append((PRICED if prices is not None else 0) | (SYNTHETIC if usage.synthetic else 0))
        self._synthetic = self._synthetic or (usage.synthetic and prices is not None)
        self._usd += usd
        self._result = None

    def add_all(self, messages: Iterable[Message]) -> CostTally:
        for message in messages:
            self.add(message)
        return self

    def state(self, position: Mapping[str, int]) -> tuple[dict[str, Any], dict[str, array[Any]]]:
        """The tally as kept with a view state: its figures as JSON-ready data, and its requests as columns of
        8-byte numbers (each by its message's position), read back in place: 50,000 costs took 4 ms to parse
        from JSON."""
        models: dict[str | None, int] = {}
        columns: dict[str, array[Any]] = {
            "at": array("q", map(position.__getitem__, self._ids)),
            "model": array("q", [models.setdefault(model, len(models)) for model in self._models]),
            "usd": array("d", self._usds),
            "flags": array("q", list(self._flags)),
        }
        figures = {
            "models": list(models),
            "unpriced": list(self._unpriced),
            "synthetic": self._synthetic,
            "total": self._usd,
            "as_of": (self._as_of or price_table().as_of).isoformat(),
        }
        return figures, columns

    @classmethod
    def restore(cls, state: Mapping[str, Any], columns: Mapping[str, memoryview | array[Any]], ids: Sequence[str]
                ) -> CostTally:
        """The tally :meth:`state` kept (its figures and its columns), for the messages whose ids are ``ids`` by
        position."""
        tally, models = cls(), state["models"]
        tally._ids = list(map(ids.__getitem__, columns["at"].tolist()))
        tally._models = list(map(models.__getitem__, columns["model"].tolist()))
        tally._usds = cast(list[float], columns["usd"].tolist())
        tally._flags = bytearray(columns["flags"].tolist())
        first = tally._flags.find(PRICED), tally._flags.find(PRICED | SYNTHETIC)
        tally._first_priced = min((at for at in first if at >= 0), default=None)
        if len({len(tally._ids), len(tally._models), len(tally._usds), len(tally._flags)}) != 1:
            raise ValueError("a cost tally's columns differ in length")
        tally._unpriced = dict.fromkeys(state["unpriced"])
        tally._synthetic, tally._usd = state["synthetic"], state["total"]
        as_of = state.get("as_of")  # (a state kept before the date was, has none)
        tally._as_of = date.fromisoformat(as_of) if as_of else None
        return tally

    def result(self) -> SessionCost:
        if self._result is None:
            basis: CostBasis = "none" if not self._ids else ("estimated" if self._synthetic else "reported")
            self._result = SessionCost(
                usd=self._usd, requests=RequestCosts(self, len(self._ids)), basis=basis,
                unpriced=tuple(self._unpriced), as_of=self._as_of or price_table().as_of,
            )
        return self._result


def session_cost(messages: Iterable[Message]) -> SessionCost:
    """The cost of every request ``messages`` hold (one per message with usage, as importers merge a
    response's lines into one message), whatever the overlay does to them now: it was spent."""
    return CostTally().add_all(messages).result()
