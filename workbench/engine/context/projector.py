"""The projector: transcript + overlay + settings -> the items of the next request, what is left out and why,
and the compaction pivots; for each message, the record the estimator needs (``records.py``).

It knows nothing of estimates: it never calls the estimator and imports nothing from it. It counts items in
the calibrator's figures (that is how an item is counted), and since the calibration may learn from a
message's own usage, reading a message is two steps: :meth:`Projector.read` decides what the message is in
the view and makes its record, :meth:`Projector.count` then counts its item; whoever feeds an estimator
does so in between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableSequence
from datetime import datetime
from typing import Any, NamedTuple

from workbench.engine.context.calibration import Calibrator
from workbench.engine.context.effective import badges_of, effective_parts
from workbench.engine.context.pairs import Calls, with_partners
from workbench.engine.context.records import SUMMARISER, MessageRecord, PivotRecord, RawChange, Restart
from workbench.engine.context.view import PART_COMPONENTS, ContextItem, Wire, text_component
from workbench.engine.context.wire_cache import WireCache
from workbench.engine.transcript.models import Message, Part, TextPart
from workbench.engine.transcript.overlay import OverlayState, Pivot
from workbench.engine.transcript.tokens import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TokenCounter

ERROR_BADGES = ("error",)
OUTPUT_WHOLE: dict[object, bool] = {"final": True, "partial": False}
"""An importer's ``source["output"]``: whether the usage's output count is the whole response."""


def estimate_key(message: Message, model: str | None) -> str | None:
    """Whose anchor, calibration and overhead a message's request uses: its model, or its model's summariser."""
    if model and message.role == "assistant" and message.kind == "summary":
        return model + SUMMARISER
    return model


def _calls(item: ContextItem) -> Calls:
    kinds = {part.kind for part in item.parts}
    return "tool_use" in kinds, "tool_result" in kinds


class Step(NamedTuple):
    """What reading one message did; :meth:`Projector.count` finishes it. (A named tuple: one per message.)"""

    pivot: PivotRecord | None = None
    restart: Restart | None = None
    """At a pivot with no summary to wait for: the estimate restarts from the items the pivot left."""
    record: MessageRecord | None = None
    message: Message | None = None
    """The message whose item :meth:`Projector.count` adds, with its parts as sent and its badges."""
    parts: tuple[Part, ...] = ()
    badges: tuple[str, ...] = ()


NOTHING = Step()
"""A message that changes nothing the estimator sees (sidechain, hidden, a marker, an undone summary)."""


class Projector:
    """The view's items, one message at a time."""

    def __init__(
        self,
        overlay: OverlayState,
        counter: TokenCounter,
        calibrator: Calibrator | None = None,
        model: str | None = None,
        fixed_items: Iterable[ContextItem] = (),
    ) -> None:
        """``calibrator`` is read, never taught: items are counted in its figures as they are when counted."""
        self.overlay = overlay
        self.counter = counter
        self.calibrator = calibrator if calibrator is not None else Calibrator()
        self.model = model
        """The model of the latest assistant message: whose calibration counts the items."""
        self.fixed_items = tuple(fixed_items)
        """System prompt, tool definitions and other sections that precede the messages."""
        self._pivots = {p.message_id: p for p in overlay.pivots}
        self._summary_ids = {p.summary_id for p in overlay.pivots if p.summary_id}
        self._touched = {message_id for message_id, _ in (*overlay.pruned, *overlay.offloaded)} - overlay.pinned
        """Messages with a part the overlay replaces: the others (and every pinned one) are sent as written."""
        self._superseded: set[str] = set()
        """Summaries of compactions a later pivot came after: what that pivot summarised holds them."""
        self._plain_badge_exceptions = overlay.pinned | overlay.summaries
        self._front = 0
        self._awaiting_summary: str | None = None
        self.items: MutableSequence[ContextItem] = []
        self._wire = WireCache(self.items)
        self.totals: dict[str, int] = {}
        self.excluded: dict[str, str] = {}
        self.pivots: list[PivotRecord] = []
        self._shared: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}
        for item in self.fixed_items:
            self._count(item)

    # --- reading ------------------------------------------------------------

    def read(self, message: Message) -> Step:
        """Where ``message`` goes (an item to count, or excluded and why), and its record."""
        if message.sidechain:
            self.excluded[message.id] = "sidechain"
            return NOTHING
        pivot_record: PivotRecord | None = None
        restart: Restart | None = None
        pivot = self._pivots.get(message.id)
        if pivot is not None:
            pivot_record, restart = self._reset_at(message.id, pivot)
        reason = self._excluded_why(message, pivot is not None)
        if reason is not None and reason != "archived":
            self.excluded[message.id] = reason
            return NOTHING if pivot_record is None else Step(pivot_record, restart)
        touched = message.id in self._touched
        parts = self.sent_parts(message)
        if reason == "archived":  # out of the view; the estimator still takes what it held and its usage
            self.excluded[message.id] = reason
            return Step(pivot_record, restart, self._record(message, parts, touched, left=True))
        record = self._record(message, parts, touched)
        return Step(pivot_record, restart, record, message, parts, self._badges(message, touched))

    def sent_parts(self, message: Message) -> tuple[Part, ...]:
        """The message's parts as the model gets them: as written, unless the overlay replaces one."""
        if message.id in self._touched:
            return tuple(effective_parts(self.overlay, message))
        return tuple(message.parts)

    def _excluded_why(self, message: Message, at_pivot: bool) -> str | None:
        """Why a message is not in the view (None: it is); a pivot's own boundary is a marker even if hidden."""
        if at_pivot and message.kind == "compact_boundary":
            return "marker"
        if not message.agent_visible:
            return "hidden"
        if message.id in self.overlay.archived:
            return "archived"
        if message.kind == "compact_boundary":
            return "marker"
        if message.kind == "summary" and message.source.get("compaction") and message.id not in self._summary_ids:
            return "undone-summary"
        if message.id in self._superseded:
            return "before-compaction"
        if message.kind == "tool_summary" and message.source.get("archive_plan") and message.id not in self.overlay.summaries:
            return "undone-summary"  # the digest of an archive plan that was undone
        return None

    def _record(self, message: Message, parts: tuple[Part, ...], touched: bool, *, left: bool = False) -> MessageRecord:
        """The message's record (``parts``: as the model gets them); ``left``: it was archived, and what it held
        as the view showed it goes. Reading an assistant's message makes its model the view's."""
        usage = message.usage
        model = usage.model if usage and usage.model else message.model
        if message.role == "assistant" and model:
            self.model = model
        raw, blocks = self._raw_components(message.role, parts)
        changes, written, written_blocks = self._changes(message, parts) if touched else ((), None, 0)
        # Positional: made once per message, and keywords double a named tuple's construction time.
        return MessageRecord(
            message.id,  # message_id
            raw,
            sum(raw.values()) or MESSAGE_OVERHEAD,  # raw_total
            blocks,
            sum(1 for part in parts if part.kind == "thinking"),  # thinking
            message.role == "user" and message.kind in ("message", "summary"),  # new_turn
            estimate_key(message, model),  # key
            model,
            self.model,  # view_model
            usage,
            usage is not None and usage.total_input > 0,  # reported
            message.created_at,  # at
            changes,
            written,
            written_blocks,
            left,
            self.overlay.archived_at.get(message.id) if left else None,  # left_at
            OUTPUT_WHOLE.get(message.source.get("output")) if usage is not None else None,  # output_whole
        )

    def _raw_components(self, role: str, parts: tuple[Part, ...]) -> tuple[dict[str, int], int]:
        """Raw tokens of ``parts`` by budget component (framing included), and their block count."""
        count = self.counter.count_part
        role_component = "assistant" if role == "assistant" else "user"
        raw_by_component: dict[str, int] = {}
        for part in parts:
            name = text_component(role, part.text) if isinstance(part, TextPart) else PART_COMPONENTS.get(part.kind, role_component)
            raw_by_component[name] = raw_by_component.get(name, 0) + count(part) + BLOCK_OVERHEAD
        if raw_by_component:
            raw_by_component[next(iter(raw_by_component))] += MESSAGE_OVERHEAD
        return raw_by_component, max(1, len(parts))

    def _changes(
        self, message: Message, parts: tuple[Part, ...]
    ) -> tuple[tuple[RawChange, ...], Mapping[str, int] | None, int]:
        """What the overlay changed in this message, one raw change per time it was changed (a request made
        between two changes counted the first and not the second), oldest first; and, when it changed, the
        raw tokens by component and the blocks of the message as written."""
        by_time: dict[datetime | None, int] = {}
        for position, (original, now) in enumerate(zip(message.parts, parts, strict=True)):
            if original is not now:
                when = self.overlay.change_time(message.id, position)
                by_time[when] = by_time.get(when, 0) + self.counter.count_part(now) - self.counter.count_part(original)
        if not by_time:
            return (), None, 0
        times = sorted(by_time, key=lambda t: (t is None, t or datetime.min))  # oldest first; live ones last
        written, written_blocks = self._raw_components(message.role, tuple(message.parts))
        return tuple((by_time[when], when) for when in times), written, written_blocks

    def _badges(self, message: Message, touched: bool) -> tuple[str, ...]:
        """``badges_of``, without its overlay lookups for the many messages the overlay never mentions."""
        if touched or message.kind == "summary" or message.id in self._plain_badge_exceptions:
            return badges_of(self.overlay, message)
        for part in message.parts:
            if part.kind == "tool_result" and part.is_error:
                return ERROR_BADGES
        return ()

    # --- counting -----------------------------------------------------------

    def count(self, step: Step) -> Restart | None:
        """Count the item of a message :meth:`read` placed in the view, in the calibration as it is now.

        Returns the restart of the estimate when this is the summary a compaction waited for."""
        message, record = step.message, step.record
        if message is None or record is None:
            return None
        components = self.calibrator.for_model(record.view_model).components(record.raw, record.blocks)
        item = ContextItem(
            kind="message",
            tokens=sum(components.values()),
            components=self.shared(components),
            message_id=message.id,
            index=message.index,
            role=message.role,
            badges=step.badges,
            parts=step.parts,
            raw_tokens=record.raw_total,
        )
        self._keep(item, front=message.id in self._summary_ids)
        if message.id == self._awaiting_summary:
            return self._restart()
        return None

    def shared(self, components: dict[str, int]) -> Mapping[str, int]:
        """The one mapping kept for these components: a long session's items repeat a few thousand of them
        (a 50,000-message session holds 11,000 distinct), and a mapping per item was a tenth of its memory.
        Items never change their components, so they can share one."""
        return self._shared.setdefault(tuple(components.items()), components)

    def _reset_at(self, message_id: str, pivot: Pivot) -> tuple[PivotRecord, Restart | None]:
        record = PivotRecord(
            message_id=message_id, trigger=pivot.trigger, reported_pre_tokens=pivot.pre_tokens, model=self.model
        )
        self.pivots.append(record)
        items = self.items
        keep = with_partners(lambda i: _calls(items[i]), [item.message_id in self.overlay.pinned for item in items])
        preserved = [item for item, kept in zip(self.items, keep, strict=True) if kept]
        for item, kept in zip(self.items, keep, strict=True):
            if item.message_id and not kept:
                self.excluded[item.message_id] = "before-compaction"
        waiting = self._awaiting_summary
        if waiting is not None and waiting not in self.overlay.pinned:  # its summary, not read yet, is left too
            self._superseded.add(waiting)
        self.items = []
        self._wire.restart(self.items)
        self.totals = {}
        for item in self.fixed_items:
            self._count(item)
        self._front = 0
        for item in preserved:
            self._keep(item, front=False)
        if pivot.summary_id is None:
            return record, self._restart()
        # The kept tail was written before the compaction and its usage describes the old
        # context: the estimate goes on as before until the summary arrives, then starts afresh.
        self._awaiting_summary = pivot.summary_id
        return record, None

    def _restart(self) -> Restart:
        self._awaiting_summary = None
        return Restart(contents=tuple((i.raw_tokens, max(1, len(i.parts))) for i in self.items), model=self.model)

    def _keep(self, item: ContextItem, *, front: bool) -> None:
        """Add an item to the view; a compaction summary goes before everything after the pivot."""
        if front:
            self.items.insert(self._front, item)
            self._wire.restart(self.items)
        else:
            self.items.append(item)
        self._count(item)

    def _count(self, item: ContextItem, sign: int = 1) -> None:
        for name, tokens in item.components.items():
            self.totals[name] = self.totals.get(name, 0) + sign * tokens

    def seed(self, items: Iterable[ContextItem], excluded: Mapping[str, str] | None = None) -> Restart:
        """Start from message items already projected (a compaction checkpoint, or a compaction's preview):
        the state a replay reaches right after a compaction summary, the estimate restarted from them."""
        for item in items:
            self._keep(item, front=False)
        self.excluded.update(excluded or {})
        return self._restart()

    def replace_fixed(self, items: Iterable[ContextItem]) -> None:
        for item in self.fixed_items:
            self._count(item, -1)
        self.fixed_items = tuple(items)
        for item in self.fixed_items:
            self._count(item)

    # --- a stored state ----------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What reading messages left here besides :attr:`items` and :attr:`excluded`, as JSON-ready data; the
        caller keeps those two (it stores them compactly) and gives them back to :meth:`restore`."""
        return {
            "model": self.model,
            "front": self._front,
            "awaiting_summary": self._awaiting_summary,
            "superseded": sorted(self._superseded),
            "totals": self.totals,
            "pivots": [[p.message_id, p.trigger, p.reported_pre_tokens, p.model] for p in self.pivots],
        }

    def restore(self, state: Mapping[str, Any], items: MutableSequence[ContextItem], excluded: dict[str, str]) -> None:
        """Continue from :meth:`state` of a projector over the same overlay and fixed items, with the items and
        exclusions it had (the items' parts as :meth:`sent_parts` gives them): exactly where it was."""
        self.model = state["model"]
        self._front = state["front"]
        self._awaiting_summary = state["awaiting_summary"]
        self._superseded = set(state.get("superseded", ()))
        self.totals = dict(state["totals"])
        self.pivots = [PivotRecord(*pivot) for pivot in state["pivots"]]
        self.items = items
        self._wire = WireCache(items)
        self.excluded = excluded

    # --- the wire -----------------------------------------------------------

    @property
    def generation(self) -> int:
        """Changes whenever :attr:`items` stop being a prefix of what they were (a compaction, a summary moved
        first): while it stays, the view only grew, and what was read of it holds."""
        return self._wire.generation

    def wire_source(self) -> Callable[[], Wire | None]:
        """What a view of the items as they are now calls for its wire."""
        return self._wire.source(len(self.items))
