"""The projector is pure and the estimator consumes what it produces.

On a real Claude Code session with a compaction, steered on top (pruned tool results, one dated between its
requests and one live, an archived answer, a message pinned through the compaction): the projector's output does not depend on any estimator, and an
estimator fed only the projector's records arrives where the view builder does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import orjson
import pytest
from helpers import FIXTURES_DIR, claude_fixture

from workbench.engine.context.calibration import Calibrator
from workbench.engine.context.estimation import Estimator
from workbench.engine.context.projection import ViewBuilder
from workbench.engine.context.projector import Projector
from workbench.engine.context.records import MessageRecord, PivotRecord, Restart
from workbench.engine.transcript.importers import parse_file
from workbench.engine.transcript.models import Message, Session
from workbench.engine.transcript.overlay import OverlayEvent, OverlayState, fold
from workbench.engine.transcript.tokens import TokenCounter

KEY = "258c7280"
"""The fixture with an automatic compaction: a pivot, a kept tail, a summary the estimate waits for."""

OPENCODE_COMPACTED = (
    "opencode__victoryforphil__dark-factory__session__curious-sailor__ses_39b7f9e89ffe7J0WzLzYrUt4eW.json"
)
"""A compaction whose summary comes right after its pivot."""

Event = PivotRecord | Restart | MessageRecord


@pytest.fixture(scope="module")
def steered() -> tuple[Session, list[Message], OverlayState]:
    parsed = parse_file(claude_fixture(KEY))
    messages = parsed.messages
    results = [m for m in messages if m.kind == "tool_result" and not m.sidechain and m.created_at is not None]
    answers = [m for m in messages if m.role == "assistant" and m.usage is not None and not m.sidechain]
    assert len(results) > 20 and len(answers) > 20
    early, late, live = results[3], results[len(results) // 2], results[-2]
    archived = answers[len(answers) // 3]
    pinned = max(results[:20], key=lambda m: len(m.parts[0].text or ""))
    assert early.created_at is not None and late.created_at is not None and archived.created_at is not None
    events = [
        *parsed.events,
        _event(1, "prune", early, 0, early.created_at + timedelta(seconds=1)),  # before the requests after it
        _event(2, "prune", late, 0, late.created_at + timedelta(days=30)),  # after every request
        _event(3, "prune", live, 0, None),  # made now, not stored yet
        _event(4, "archive", archived, None, archived.created_at + timedelta(days=30)),
        _event(5, "pin", pinned, None, None),  # kept through the compaction: the estimate restarts from it
    ]
    return parsed.session, messages, fold(events)


def _event(n: int, action: str, message: Message, part: int | None, when: object) -> OverlayEvent:
    return OverlayEvent(id=f"split{n}", session_id=message.session_id, plan_id=f"split{n}", action=action,  # type: ignore[arg-type]
                        message_id=message.id, part_index=part, created_at=when)  # type: ignore[arg-type]


def _project_alone(
    overlay: OverlayState, messages: Sequence[Message], model: str | None
) -> tuple[Projector, list[Event]]:
    """The projector with no estimator anywhere: its calibration never learns. Returns what it produced, in order."""
    projector = Projector(overlay, TokenCounter(), Calibrator(), model)
    produced: list[Event] = []
    for message in messages:
        step = projector.read(message)
        produced += [e for e in (step.pivot, step.restart, step.record) if e is not None]
        restart = projector.count(step)
        if restart is not None:
            produced.append(restart)
    return projector, produced


def _shape(projector: Projector) -> list[tuple[object, ...]]:
    """Everything an item holds but its calibrated figures."""
    return [(i.message_id, i.index, i.role, i.parts, i.badges, i.raw_tokens) for i in projector.items]


def test_the_projectors_output_is_the_same_without_an_estimator(steered: tuple[Session, list[Message], OverlayState]) -> None:
    session, messages, overlay = steered
    builder = ViewBuilder(session.id, overlay, TokenCounter(), None, session.model).add_all(messages)
    alone, produced = _project_alone(overlay, messages, session.model)
    assert _shape(alone) == _shape(builder.projector) and len(alone.items) > 10
    assert alone.excluded == builder.excluded and set(alone.excluded.values()) >= {"archived", "before-compaction"}
    assert alone.pivots == builder.projector.pivots and len(alone.pivots) == 1
    assert alone.model == builder.model
    records = [e for e in produced if isinstance(e, MessageRecord)]
    assert any(isinstance(e, Restart) and e.contents for e in produced)
    assert any(r.left for r in records) and sum(len(r.changes) for r in records) >= 3
    # The figures are the calibration's: with no usage to learn from, nothing differs at all.
    unreported = [m.model_copy(update={"usage": None}) for m in messages]
    builder = ViewBuilder(session.id, overlay, TokenCounter(), None, session.model).add_all(unreported)
    alone, _ = _project_alone(overlay, unreported, session.model)
    assert alone.items == builder.items and alone.totals == builder.totals


def test_an_estimator_fed_the_records_estimates_as_the_view_builder(
    steered: tuple[Session, list[Message], OverlayState],
) -> None:
    session, messages, overlay = steered
    builder = ViewBuilder(session.id, overlay, TokenCounter(), None, session.model).add_all(messages)
    alone, produced = _project_alone(overlay, messages, session.model)
    estimator = Estimator(Calibrator())
    at_pivots: list[int] = []
    for event in produced:
        if isinstance(event, PivotRecord):
            at_pivots.append(estimator.estimate(event.model))
        elif isinstance(event, Restart):
            estimator.restart(event)
        else:
            estimator.take(event)
    assert len(estimator.requests) > 20 and estimator.requests == builder.estimator.requests
    assert at_pivots == [c.estimated_pre_tokens for c in builder.compactions]
    assert estimator.estimate(alone.model) == builder.estimate() > 0
    assert estimator.steered(alone.model) == builder.steered() != 0
    assert estimator.calibrator == builder.calibrator


def test_a_record_says_what_its_message_is(steered: tuple[Session, list[Message], OverlayState]) -> None:
    """Each field of the record from the message it describes (records are built positionally, for speed)."""
    session, messages, overlay = steered
    projector, produced = _project_alone(overlay, messages, session.model)
    records = {e.message_id: e for e in produced if isinstance(e, MessageRecord)}
    by_id = {m.id: m for m in messages}
    items = {i.message_id: i for i in projector.items}
    answer = next(by_id[i] for i in reversed(items) if i and records[i].reported and by_id[i].role == "assistant")
    record = records[answer.id]
    assert answer.usage is not None and answer.usage.model
    assert (record.message_id, record.usage, record.at) == (answer.id, answer.usage, answer.created_at)
    assert record.key == record.model == record.view_model == answer.usage.model
    assert not record.new_turn and not record.left and record.left_at is None and record.changes == ()
    assert record.raw_total == sum(record.raw.values()) == items[answer.id].raw_tokens
    assert record.blocks == len(answer.parts) and record.thinking == sum(p.kind == "thinking" for p in answer.parts)
    question = next(by_id[i] for i, r in records.items() if by_id[i].role == "user" and by_id[i].kind == "message")
    assert records[question.id].new_turn and not records[question.id].reported
    pruned = next(r for r in records.values() if r.changes)
    assert pruned.written is not None and sum(pruned.written.values()) - sum(pruned.raw.values()) == -sum(
        raw for raw, _ in pruned.changes
    )
    archived = next(r for r in records.values() if r.left)
    assert archived.left_at == overlay.archived_at[archived.message_id] is not None
    whole = {by_id[i].source["output"]: r.output_whole for i, r in records.items() if r.usage is not None}
    assert whole == {"final": True, "partial": False}, "Claude Code 2.1 says which outputs are whole"
    assert records[question.id].output_whole is None



def _restored_continues(
    session: Session, messages: Sequence[Message], overlay: OverlayState, cut: int
) -> dict[str, Any]:
    """A builder restored from the state (through JSON) of one that read ``messages[:cut]`` is where that one was,
    and reads the rest as it does. Returns the state at the cut."""
    original = ViewBuilder(session.id, overlay, TokenCounter(), None, session.model).add_all(messages[:cut])
    state: dict[str, Any] = orjson.loads(orjson.dumps(original.state()))
    restored = ViewBuilder(session.id, overlay, TokenCounter(), None, session.model)
    restored.restore(state, list(original.items), dict(original.excluded), list(original.estimator.requests))
    assert restored.state() == state and restored.freeze() == original.freeze()
    original.add_all(messages[cut:])
    restored.add_all(messages[cut:])
    assert restored.freeze() == original.freeze() and restored.state() == original.state()
    assert restored.estimate() == original.estimate() > 0
    return state


def test_a_builder_restored_from_its_parts_states_continues_as_the_original(
    steered: tuple[Session, list[Message], OverlayState],
) -> None:
    """Cut before the pivot, right after it, or near the end: the projector's and the estimator's states bring a
    fresh builder to where the original was, and on from there as it goes."""
    session, messages, overlay = steered
    after_pivot = next(n for n, m in enumerate(messages) if m.id == overlay.pivots[0].message_id) + 1
    for cut in (len(messages) // 4, after_pivot, len(messages) - 5):
        state = _restored_continues(session, messages, overlay, cut)
        assert bool(state["projector"]["pivots"]) == (cut >= after_pivot)
        assert bool(state["estimator"]["changes"]) == (cut != after_pivot), "the restart at the pivot clears them"


def test_a_builder_restored_while_a_summary_is_awaited_restarts_at_it() -> None:
    """OpenCode's compaction: between the pivot and its summary the estimate goes on as before; restored there,
    the summary still restarts it."""
    parsed = parse_file(FIXTURES_DIR / OPENCODE_COMPACTED)
    overlay = fold(parsed.events)
    pivot = overlay.pivots[0]
    cut = next(n for n, m in enumerate(parsed.messages) if m.id == pivot.message_id) + 1
    assert parsed.messages[cut].id == pivot.summary_id
    state = _restored_continues(parsed.session, parsed.messages, overlay, cut)
    assert state["projector"]["awaiting_summary"] == pivot.summary_id
