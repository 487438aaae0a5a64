"""A session's live context: transcript + overlay + projection + budget, kept current."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from workbench.engine.context import view_state
from workbench.engine.context.attribution import exact_items, request_items, tools_item
from workbench.engine.context.budget import Budget, budget_from_totals
from workbench.engine.context.calibration import Calibrator
from workbench.engine.context.pricing import CostTally, SessionCost
from workbench.engine.context.projection import ContextItem, ContextView, ViewBuilder
from workbench.engine.context.view import ItemKind
from workbench.engine.errors import StaleSession, StoreError
from workbench.engine.settings.config import Config
from workbench.engine.settings.limits import ModelLimits, inferred_window, lookup, match_key, normalize
from workbench.engine.transcript import view_states
from workbench.engine.transcript.message_log import MessageLog
from workbench.engine.transcript.models import Message, Session
from workbench.engine.transcript.overlay import OverlayEvent, OverlayState, fold
from workbench.engine.transcript.request_store import latest_prompt, same_prompt
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

log = logging.getLogger(__name__)

FIXED_KINDS: dict[str, ItemKind] = {kind: kind for kind in ("system", "project", "memory", "skills", "tools")}
FIXED_ITEMS = "fixed_items"
"""Session metadata key: the system prompt, plan, memory, skills and tool sections an engine session last ran
with (kind, tokens, components), so reopening it shows the breakdown the live view showed."""


def fixed_record(items: Sequence[ContextItem]) -> list[dict[str, object]]:
    """What is kept of a session's fixed items: enough for the budget, not their text."""
    return [{"kind": item.kind, "tokens": item.tokens, "components": dict(item.components),
             "deferred_tokens": item.deferred_tokens, "cacheable": item.cacheable} for item in items]


def ran_with_items(session: Session) -> list[ContextItem]:
    """The fixed items an engine session last ran with, as :func:`fixed_record` kept them."""
    items: list[ContextItem] = []
    for entry in session.metadata.get(FIXED_ITEMS) or ():
        kind = FIXED_KINDS.get(str(entry.get("kind"))) if isinstance(entry, dict) else None
        if isinstance(entry, dict) and kind is not None:
            components = {str(k): int(v) for k, v in dict(entry.get("components") or {}).items()}
            items.append(ContextItem(kind=kind, tokens=int(entry.get("tokens", 0)), components=components,
                                     raw_tokens=int(entry.get("tokens", 0)),
                                     deferred_tokens=int(entry.get("deferred_tokens", 0)),
                                     cacheable=bool(entry.get("cacheable", False))))
    return items


def stored_items(store: Store, session: Session, counter: TokenCounter) -> list[ContextItem]:
    """A stored session's fixed items: a proxied session's from its latest request, an engine session's as it
    last ran; none for an imported transcript (it does not hold them)."""
    if session.source_format == "engine":
        return ran_with_items(session)
    return proxied_items(store, session, counter)


def proxied_items(store: Store, session: Session, counter: TokenCounter) -> list[ContextItem]:
    """A proxied session's system blocks and tools, from the latest request its agent sent."""
    if session.source_format != "proxy":
        return []
    prompt = latest_prompt(store, session.id)
    if prompt is None:
        return []
    items = request_items(counter, prompt[0], prompt[1])
    exact = session.metadata.get("exact")
    if isinstance(exact, dict) and isinstance(exact.get("seq"), int) and same_prompt(store, session.id, exact["seq"]):
        items = exact_items(items, int(exact.get("system", 0)), int(exact.get("tools", 0)))  # count_tokens said so
    return items


def reported_input(message: Message) -> int:
    """What a main-thread request reported sending (a sub-agent's requests have their own window)."""
    usage = message.usage
    return usage.total_input if usage is not None and not usage.synthetic and not message.sidechain else 0


def _betas(session: Session) -> tuple[str, ...]:
    """The ``anthropic-beta`` values a session's requests carried, as its recorder kept them
    (``metadata["anthropic_beta"]``: a list, or the header's comma-separated text)."""
    raw = session.metadata.get("anthropic_beta")
    if isinstance(raw, str):
        return tuple(part.strip() for part in raw.split(","))
    if isinstance(raw, list):
        return tuple(str(part) for part in raw)
    return ()


SCRIPT_KEY = "script"
"""Session metadata key: the script (bundled name or path) a scripted session was started with (reopened
without an API key, the script continues it)."""

MAX_TOKENS_KEY = "max_tokens"
"""Session metadata key: the ``max_tokens`` the session's agent sends (a proxied agent's latest request, a
script's ``max_output``); the budget reserves exactly that for the reply unless the config sets a reserve."""

TOOL_DEFINITIONS = "tool_definitions"
"""Session metadata key: the tool definitions a transcript records (Codex's ``dynamic_tools``)."""


def recorded_items(session: Session, counter: TokenCounter) -> tuple[ContextItem, ...]:
    """The tool definitions an imported transcript recorded, as the view's ``tools`` item (per-tool counts
    come from :func:`workbench.engine.context.attribution.tool_tokens`)."""
    item = tools_item(counter, session.metadata.get(TOOL_DEFINITIONS))
    return (item,) if item is not None else ()


def _resumed(session: Session, messages: Sequence[Message], events: Sequence[OverlayEvent], counter: TokenCounter,
             fixed: Sequence[ContextItem], stored: view_state.Stored | None
             ) -> tuple[ViewBuilder, Mapping[str, Any]] | None:
    """A builder resumed from the session's stored view state (current: of the revision its messages were read
    at), and what was kept beside it, when that state fits these messages."""
    if stored is None:
        return None
    builder = ViewBuilder(session.id, fold(events), counter, None, session.model, fixed)
    kept = view_state.resume(builder, stored, messages)
    return (builder, kept) if kept is not None else None


def _pages(store: Store) -> bool:
    """Whether a session of ``store`` can be read a page at a time (a file, open for writing: healthy)."""
    return str(store.path) != ":memory:" and store.writes_refused is None


class SessionContext:
    """Holds one session in memory; appending a message costs O(that message).

    Overlay changes rebuild the view from the transcript (the projection is pure,
    so the rebuilt view is exactly what a fresh load would give).
    """

    def __init__(
        self,
        session: Session,
        messages: Sequence[Message],
        events: Sequence[OverlayEvent],
        counter: TokenCounter | None = None,
        config: Config | None = None,
        calibrator: Calibrator | None = None,
        fixed_items: Sequence[ContextItem] = (),
        builder: ViewBuilder | None = None,
        kept: Mapping[str, Any] | None = None,
        peak_input: int | None = None,
    ) -> None:
        """``builder``: one that already holds these messages (resuming from a compaction checkpoint or a
        view state); by default the messages are replayed. ``kept``: what :meth:`keep_view` kept beside a
        view state (the cost, the peak input), when resuming from one. ``peak_input``: the largest input a
        request reported, when the caller knows it (a trial of another context's messages and a few of its
        own). Without ``fixed_items``, the tool definitions the session's transcript recorded (if any) precede
        the messages."""
        self.session = session
        self.messages = messages.copy() if isinstance(messages, MessageLog) else MessageLog(messages)
        self.events: list[OverlayEvent] = list(events)
        self.counter = counter or TokenCounter()
        self.fixed_items: tuple[ContextItem, ...] = tuple(fixed_items) or recorded_items(session, self.counter)
        self.config = config or Config()
        self.calibrator = calibrator
        self.overlay: OverlayState = fold(self.events)
        self._builder = builder if builder is not None else self._build()
        self._view: ContextView | None = None
        self._kept_cost: CostTally | None = (
            CostTally.restore(kept["cost"], kept["columns"]["cost"], self.messages.ids) if kept else None)
        self._kept_peak: int | None = kept["peak_input"] if kept else peak_input
        self.resumed_from: str | None = None
        """The compaction plan whose checkpoint this context was resumed from, if it was."""
        self.resumed_view = False
        """Whether the view was resumed from the session's stored view state rather than replayed."""
        self.derived: dict[str, tuple[ContextView, object]] = {}
        """What other modules work out from one view (the strategies' index), kept with the view it came
        from: an entry is stale as soon as :meth:`view` returns another object."""
        self.revision: int | None = None
        """The stored session's revision this context holds (set by :meth:`load`, moved on by :meth:`writing`);
        None for a context not read from a store (a trial, a followed file): its writes are not checked."""

    @classmethod
    def load(
        cls, store: Store, session_id: str, config: Config | None = None, *, use_checkpoint: bool = False
    ) -> SessionContext:
        """The session as stored. ``use_checkpoint``: start from the latest compaction's checkpoint
        (spec 001 §6) instead of replaying the history before it, when the checkpoint is still valid;
        the view is the same either way."""
        session = store.get_session(session_id)
        revision = view_states.revision(store, session_id)  # first: what is read next is at least as new
        events = store.load_overlay(session_id)
        counter = TokenCounter()
        fixed = tuple(stored_items(store, session, counter)) or recorded_items(session, counter)
        key = view_state.state_key(session, fixed)
        found_state = None if use_checkpoint else view_states.load(store, session.id, key)
        # none, or the session moved on between reading its revision and its state
        stored = view_state.Stored(found_state[1]) if found_state is not None and found_state[0] == revision else None
        messages: Sequence[Message] | None = None
        if stored is not None and _pages(store):  # read a page at a time, when asked
            messages = stored.messages(store.connection, store.path, session_id)
            stored = stored if messages is not None else None  # a state of other messages: replay
        if messages is None:
            messages = store.load_messages(session_id)  # with their stored counts: nothing is counted again
        resumed = None
        if use_checkpoint:
            from workbench.engine.context.checkpoints import resume_builder  # deferred: its models, 10-60 ms

            resumed = resume_builder(store, session, messages, events, counter)
        builder = resumed.builder if resumed else None
        found = None if builder is not None else _resumed(session, messages, events, counter, fixed, stored)
        if found is None and builder is None and isinstance(messages, MessageLog):  # its state did not fit after all
            messages = store.load_messages(session_id)
        ctx = cls(session, messages, events, counter, config, fixed_items=fixed,
                  builder=found[0] if found else builder, kept=found[1] if found else None)
        ctx.resumed_from = resumed.plan_id if resumed else None
        ctx.resumed_view = found is not None
        ctx.revision = revision
        if builder is None and found is None and len(messages) >= view_state.KEEP_FROM:
            ctx.keep_view(store, revision)
        return ctx

    @contextmanager
    def writing(self, store: Store, *, check: bool = True) -> Iterator[None]:
        """One write transaction on this session. ``check``: first make sure, inside the transaction, that the
        session is still at the revision this context holds, since whatever is written was planned against it;
        :class:`StaleSession` (nothing written) when another program changed it meanwhile. Appending a message
        (``check=False``) needs no such check. Either way the context then holds the revision it wrote, when
        it held the one before."""
        moved_to: int | None = None
        with store.transaction():
            now = view_states.revision(store, self.session.id)
            current = self.revision is not None and now == self.revision
            if check and self.revision is not None and not current:
                raise StaleSession
            yield
            if current:
                moved_to = view_states.revision(store, self.session.id)
        if moved_to is not None:
            self.revision = moved_to

    def keep_view(self, store: Store, revision: int) -> bool:
        """Store what the replay worked out, as of the session's ``revision`` when its messages were read, so
        the next open resumes from it; False when nothing was kept (the session moved on meanwhile, the
        database is read-only or busy: the next open replays again, and says why in the log)."""
        if self.resumed_from is not None or store.writes_refused is not None:
            return False
        cost, cost_columns = self._cost().state(view_state.positions(self.messages.ids))
        body = view_state.capture_chunks(self._builder, self.messages, {"cost": cost, "peak_input": self.peak_input()},
                                         {"cost": cost_columns})
        if body is None:
            return False
        key = view_state.state_key(self.session, self.fixed_items)
        try:
            return view_states.save(store, self.session.id, revision, key, body)
        except StoreError as exc:  # the view is right either way; only the next open's head start is lost
            log.warning("could not keep the view state of %s: %s", self.session.id, exc)
            return False

    def _build(self) -> ViewBuilder:
        builder = ViewBuilder(
            self.session.id, self.overlay, self.counter, self.calibrator, self.session.model, self.fixed_items
        )
        return builder.add_all(self.messages)

    def fork(self) -> SessionContext:
        """An independent copy, for trying a change before committing it."""
        return SessionContext(
            self.session, self.messages, self.events, self.counter, self.config, self.calibrator, self.fixed_items
        )

    def set_fixed_items(self, items: Sequence[ContextItem]) -> None:
        """Replace the system prompt / tool sections; O(sections), not O(messages)."""
        self.fixed_items = tuple(items)
        self._builder.replace_fixed(self.fixed_items)
        self._view = None

    @property
    def builder(self) -> ViewBuilder:
        """The live view builder, to read (calibration, model); change the context through
        :meth:`append` and :meth:`apply_events`."""
        return self._builder

    @property
    def model(self) -> str | None:
        return self._builder.model or self.session.model

    def limits(self) -> tuple[ModelLimits, bool]:
        return lookup(self.model, self.config.models)

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self._builder.add(message)
        if self._kept_cost is not None:  # (else the first ask goes through every message, this one included)
            self._kept_cost.add(message)
        if self._kept_peak is not None:
            self._kept_peak = max(self._kept_peak, reported_input(message))
        self._view = None

    def apply_events(self, events: Sequence[OverlayEvent]) -> None:
        self.events.extend(events)
        self.overlay = fold(self.events)
        self._builder = self._build()
        self._view = None

    def view(self) -> ContextView:
        if self._view is None:
            self._view = self._builder.freeze()
        return self._view

    def window(self) -> tuple[int | None, str | None]:
        """The window this session shows it has, and what shows it; (None, None) leaves it to config and table.

        The transcript's own record comes first (Codex's ``model_context_window``, Claude Code's
        ``contextWindow``); then, unless the config sets a window, the 1M context the session's
        model id, beta header or reported sizes reveal (see :func:`inferred_window`).
        """
        if self.session.context_window:
            return self.session.context_window, "recorded in the transcript"
        if self.config.budget.context_window is not None or self._configured_model():
            return None, None
        limits, _ = self.limits()
        return inferred_window(self.model, limits, peak_input=self.peak_input(), betas=_betas(self.session))

    def _configured_model(self) -> bool:
        """Whether the config's ``[models."..."]`` table names this session's model: its window is the user's."""
        return bool(self.model) and match_key(normalize(self.model or ""), self.config.models) is not None

    def cost(self) -> SessionCost:
        """What the session's requests cost (every request, including those compacted or archived since)."""
        return self._cost().result()

    def _cost(self) -> CostTally:
        """The running cost, tallied over every message the first time it is asked for: a context made only to
        measure a plan (a compaction's tokens after) never asks, and tallying 10,000 messages took half of a
        compaction preview."""
        if self._kept_cost is None:
            self._kept_cost = CostTally().add_all(self.messages)
        return self._kept_cost

    def peak_input(self) -> int:
        """The largest input a request reported (the window it reveals), worked out when first asked for."""
        if self._kept_peak is None:
            self._kept_peak = max((reported_input(m) for m in self.messages), default=0)
        return self._kept_peak

    def used(self) -> int:
        """Tokens the next request holds, ``budget().used``, without the rest of the budget (limits, window,
        levels): every plan asks it, and a planning of all strategies makes six plans."""
        builder = self._builder
        return sum(builder.totals.values()) + builder.unattributed()

    def budget(self) -> Budget:
        """From running totals: cheap enough to call on every engine event."""
        limits, known = self.limits()
        totals = dict(self._builder.totals)
        unattributed = self._builder.unattributed()
        if unattributed:
            # A proxied session's request holds everything the model got: what the API reports beyond the
            # workbench's own count is the difference between the two tokenizers, not missing content.
            totals["tokenizer_gap" if self.session.source_format == "proxy" else "unattributed"] = unattributed
        config = self.config.budget
        sent = self.session.metadata.get(MAX_TOKENS_KEY)
        if isinstance(sent, int) and config.output_reserve is None:
            config = config.model_copy(update={"output_reserve": sent})  # the reserve is what the agent asks for
        return budget_from_totals(
            totals,
            model=self.model,
            limits=limits,
            config=config,
            source=self._builder.source(),
            cache_hit_rate=self._builder.cache_hit_rate,
            known_model=known,
            context_window=self.window()[0],
            deferred_tool_tokens=sum(item.deferred_tokens for item in self.fixed_items),
            steered=self._builder.steered(),
            estimate=self._builder.estimate(),
            scripted=self._builder.scripted,
        )
