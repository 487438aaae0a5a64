"""Compaction checkpoints (spec 001 §6's snapshots): resume from the last compaction, not the whole history.

Each compaction writes, in its own transaction, the post-compaction message list (the projection's
items: summary, preserved messages, kept tail, as the model receives them, with their token counts)
and the token count into the ``snapshots`` table — one row per session, the latest compaction's.
The ``messages`` column holds a JSON object: the items plus what resuming needs to continue exactly
where a full replay would be (the token calibration learned so far, earlier compaction records).

Resuming starts a :class:`ViewBuilder` from the checkpoint and replays only the messages written
after it. A checkpoint is used only while it still describes the session: its compaction is the
latest live one, no overlay change before it was undone or redone, and every change since concerns
messages written after it. Otherwise the history is replayed (spec 001 §8: "snapshot fails →
resume loads full history"), which gives the same view, only slower.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from workbench.engine.context.calibration import Calibrator, ModelCalibration
from workbench.engine.context.projection import CompactionRecord, ContextItem, ViewBuilder
from workbench.engine.context.request_log import RequestEstimate
from workbench.engine.transcript.blocks import blocks_of
from workbench.engine.transcript.models import Message, Part, Session
from workbench.engine.transcript.overlay import OverlayEvent, fold
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

CHECKPOINT_VERSION = 1
STRUCTURAL_ACTIONS = frozenset({"pivot", "summary"})


class CheckpointItem(BaseModel):
    message_id: str
    index: int | None = None
    role: str | None = None
    tokens: int
    components: dict[str, int]
    badges: list[str] = Field(default_factory=list)
    parts: list[Part] = Field(default_factory=list)
    raw_tokens: int = 0

    @classmethod
    def of(cls, item: ContextItem) -> CheckpointItem:
        return cls(message_id=item.message_id or "", index=item.index, role=item.role, tokens=item.tokens,
                   components=dict(item.components), badges=list(item.badges), parts=list(item.parts),
                   raw_tokens=item.raw_tokens)

    def item(self) -> ContextItem:
        parts = tuple(self.parts)
        return ContextItem(kind="message", tokens=self.tokens, components=dict(self.components),
                           message_id=self.message_id, index=self.index, role=self.role, badges=tuple(self.badges),
                           parts=parts, raw_tokens=self.raw_tokens, blocks=blocks_of(parts))


class Checkpoint(BaseModel):
    version: int = CHECKPOINT_VERSION
    plan_id: str
    summary_id: str
    through_index: int
    """Index of the summary message: messages after it are replayed on resume."""
    message_count: int
    """Messages at or before ``through_index`` when the checkpoint was taken."""
    events_seq: int = 0
    events_digest: str = ""
    token_count: int
    model: str | None = None
    calibrator: dict[str, dict[str, Any]] = Field(default_factory=dict)
    cache_hit_rate: float | None = None
    items: list[CheckpointItem]
    compactions: list[dict[str, Any]] = Field(default_factory=list)
    excluded: dict[str, str] = Field(default_factory=dict)
    requests: list[dict[str, Any]] = Field(default_factory=list)


def capture(builder: ViewBuilder, *, plan_id: str, summary: Message, message_count: int, token_count: int) -> Checkpoint:
    """The state of ``builder`` (which has just taken the compaction summary) as a checkpoint."""
    view = builder.freeze()
    return Checkpoint(
        plan_id=plan_id,
        summary_id=summary.id,
        through_index=summary.index,
        message_count=message_count,
        token_count=token_count,
        model=builder.model,
        calibrator={name: asdict(cal) for name, cal in builder.calibrator.models.items()},
        cache_hit_rate=view.cache_hit_rate,
        items=[CheckpointItem.of(i) for i in view.items if i.kind == "message"],
        compactions=[asdict(c) for c in view.compactions],
        excluded=dict(view.excluded),
        requests=[asdict(r) for r in view.requests],
    )


def _event_rows(store: Store, session_id: str) -> list[tuple[str, int, bool, str, str]]:
    cursor = store.connection.execute(
        "SELECT id, seq, undone, message_id, action FROM overlay_events WHERE session_id = ? ORDER BY seq",
        [session_id],
    )
    return [(str(i), int(s), bool(u), str(m), str(a)) for i, s, u, m, a in cursor.fetchall()]


def _digest(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def save_checkpoint(store: Store, session_id: str, checkpoint: Checkpoint) -> None:
    """Write the checkpoint; call it inside the compaction's transaction, after its overlay events."""
    rows = _event_rows(store, session_id)
    checkpoint.events_seq = max((seq for _, seq, _, _, _ in rows), default=0)
    checkpoint.events_digest = _digest(i for i, _, undone, _, _ in rows if not undone)
    with store.transaction():
        store.connection.execute(
            "INSERT OR REPLACE INTO snapshots (session_id, messages, token_count, created_at) "
            "VALUES (?, ?, ?, datetime('now'))",
            [session_id, checkpoint.model_dump_json(), checkpoint.token_count],
        )


def load_checkpoint(store: Store, session_id: str) -> tuple[Checkpoint | None, str | None]:
    """The stored checkpoint, or None and why there is none to use."""
    row = store.connection.execute("SELECT messages FROM snapshots WHERE session_id = ?", [session_id]).fetchone()
    if row is None:
        return None, "no checkpoint"
    try:
        checkpoint = Checkpoint.model_validate_json(row[0])
    except ValidationError as exc:  # another format or a damaged row: the history is replayed instead
        return None, f"the checkpoint cannot be read ({exc.error_count()} errors, first: {exc.errors()[0]['msg']})"
    if checkpoint.version != CHECKPOINT_VERSION:
        return None, f"checkpoint format {checkpoint.version} is not {CHECKPOINT_VERSION}"
    return checkpoint, None


def stale_reason(store: Store, session_id: str, checkpoint: Checkpoint, messages: Sequence[Message]) -> str | None:
    """Why ``checkpoint`` no longer describes the session (None: it does)."""
    index_of = {m.id: m.index for m in messages}
    if index_of.get(checkpoint.summary_id) != checkpoint.through_index:
        return "the checkpoint's summary message is not where it was"
    if sum(1 for m in messages if m.index <= checkpoint.through_index) != checkpoint.message_count:
        return "messages before the checkpoint changed"
    rows = _event_rows(store, session_id)
    before = [i for i, seq, undone, _, _ in rows if seq <= checkpoint.events_seq and not undone]
    if _digest(before) != checkpoint.events_digest:
        return "an overlay change from before the checkpoint was undone or redone (or its compaction was)"
    for _, seq, undone, message_id, action in rows:
        if seq <= checkpoint.events_seq or undone:
            continue
        if action in STRUCTURAL_ACTIONS:
            return "a later compaction is not in the checkpoint"
        if index_of.get(message_id, -1) <= checkpoint.through_index:
            return f"a later {action} changed a message inside the checkpoint"
    return None


@dataclass(frozen=True)
class Resumed:
    builder: ViewBuilder
    plan_id: str


def restore(checkpoint: Checkpoint, session: Session, events: Sequence[OverlayEvent], counter: TokenCounter) -> ViewBuilder:
    calibrator = Calibrator(models={name: ModelCalibration(**data) for name, data in checkpoint.calibrator.items()})
    builder = ViewBuilder(session.id, fold(events), counter, calibrator, checkpoint.model)
    return builder.seed(
        [i.item() for i in checkpoint.items],
        compactions=[CompactionRecord(**c) for c in checkpoint.compactions],
        excluded=checkpoint.excluded,
        requests=[RequestEstimate(**r) for r in checkpoint.requests],
        cache_hit_rate=checkpoint.cache_hit_rate,
    )


def resume_builder(
    store: Store, session: Session, messages: Sequence[Message], events: Sequence[OverlayEvent], counter: TokenCounter
) -> Resumed | None:
    """A builder holding ``messages`` started from the session's checkpoint, or None when there is no valid one."""
    checkpoint, _ = load_checkpoint(store, session.id)
    if checkpoint is None or stale_reason(store, session.id, checkpoint, messages) is not None:
        return None
    builder = restore(checkpoint, session, events, counter)
    builder.add_all(m for m in messages if m.index > checkpoint.through_index)
    return Resumed(builder=builder, plan_id=checkpoint.plan_id)


def checkpoint_status(store: Store, session_id: str) -> tuple[Checkpoint | None, str | None]:
    """The stored checkpoint and why it cannot be used (None when it can)."""
    checkpoint, reason = load_checkpoint(store, session_id)
    if checkpoint is None:
        return None, reason
    return checkpoint, stale_reason(store, session_id, checkpoint, store.load_messages(session_id))
