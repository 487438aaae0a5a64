"""The estimate of a request no report of its own model anchors: after a pivot, and on a model switch.

A synthetic session whose reports follow a known rule: every request of a model carries that model's
unseen overhead (system prompt and tools the transcript does not show) plus its messages at the
calibration prior's ratio. The estimate before each request can then be judged against what it should
have known from the reports before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engine.context.calibration import PRIOR_RATIO
from workbench.engine.context.projection import SUMMARISER, ViewBuilder, project
from workbench.engine.context.request_log import RequestEstimate
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart, ToolUsePart, Usage
from workbench.engine.transcript.overlay import OverlayState, Pivot
from workbench.engine.transcript.tokens import TokenCounter

_COUNTER = TokenCounter()
SID = "anchoring"
OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"


def _output(n: int) -> str:
    return "\n".join(f"{n}:{i} build step finished with status ok and 3 warnings in module m{i % 17}" for i in range(120))


@dataclass
class _Session:
    """Builds messages whose usage follows the rule above; ``overheads`` may change between segments."""

    overheads: dict[str, int]
    messages: list[Message] = field(default_factory=list)
    overlay: OverlayState = field(default_factory=OverlayState)

    def _raw(self) -> int:
        view = project(SID, self.messages, self.overlay, _COUNTER)
        return sum(item.raw_tokens for item in view.items if item.kind == "message")

    def _add(self, role: str, parts: list, **kw: object) -> Message:  # type: ignore[type-arg]
        message = Message(id=f"m{len(self.messages)}", session_id=SID, index=len(self.messages),
                          role=role, parts=parts, **kw)  # type: ignore[arg-type]
        self.messages.append(message)
        return message

    def turn(self, model: str) -> str:
        """A tool call by ``model`` and its result; returns the id of the reported response."""
        n = len(self.messages)
        self._add("user", [TextPart(text=f"Run the build, step {n}")])
        before = self._raw()
        reply = self._add("assistant", [ToolUsePart(id=f"t{n}", name="Bash", input={"command": f"make step{n}"})],
                          model=model)
        written = self._raw() - before
        reply.usage = Usage(input_tokens=self.overheads[model] + round(PRIOR_RATIO * before),
                            output_tokens=round(PRIOR_RATIO * written), model=model)
        self._add("user", [ToolResultPart(tool_use_id=f"t{n}", text=_output(n))], kind="tool_result")
        return reply.id

    def compact(self, summary: str) -> None:
        """A Claude Code compaction: the summary is the first message the model sees after it."""
        message = self._add("user", [TextPart(text=summary)], kind="summary")
        self.overlay.pivots.append(Pivot(message_id=message.id, trigger="auto"))

    def summarise(self, overhead: int, summary: str) -> str:
        """An OpenCode compaction: the compaction request, then the summariser's reply with its own usage
        (another agent: its own system prompt and tools). Returns the summary's id."""
        prompt = self._add("user", [TextPart(text="What did we do so far?")])
        before = self._raw() + 20
        reply = self._add("assistant", [TextPart(text=summary)], kind="summary", model=OPUS)
        reply.usage = Usage(input_tokens=overhead + round(PRIOR_RATIO * before), output_tokens=900, model=OPUS)
        self.overlay.pivots.append(Pivot(message_id=prompt.id, trigger="auto", summary_id=reply.id))
        self.overlay.summaries.add(reply.id)
        return reply.id

    def requests(self) -> dict[str, RequestEstimate]:
        view = project(SID, self.messages, self.overlay, _COUNTER)
        return {r.message_id: r for r in view.requests}


def _error(r: RequestEstimate) -> float:
    return abs(r.estimated_input_tokens - r.reported_input_tokens) / r.reported_input_tokens


SUMMARY = "Summary of the work so far: " + " ".join(f"fixed module m{i} and its tests;" for i in range(150))


def test_a_pivot_uses_the_overhead_of_the_latest_fresh_context_not_the_sessions_first() -> None:
    """The first request of a session carried 18,000 tokens the transcript does not show (a resumed
    conversation, say) that later contexts do not: after the second compaction the estimate must use the
    overhead the first compaction's fresh context reported, not a share still weighted by the start."""
    session = _Session({OPUS: 38_000})
    for _ in range(3):
        session.turn(OPUS)
    session.compact(SUMMARY)
    session.overheads[OPUS] = 20_000
    first_after_one = session.turn(OPUS)
    for _ in range(3):
        session.turn(OPUS)
    session.compact(SUMMARY)
    first_after_two = session.turn(OPUS)
    requests = session.requests()

    assert requests[first_after_one].anchorless == "pivot"
    assert requests[first_after_two].anchorless == "pivot"
    assert requests[first_after_two].anchor_input_tokens is None
    # Nothing before it could tell the first compaction dropped the extra share: that one is far off.
    assert _error(requests[first_after_one]) > 0.3
    # The second is what the first one's fresh context reported, plus the summary.
    assert _error(requests[first_after_two]) < 0.02


def test_a_model_switch_takes_the_content_from_the_other_models_anchor() -> None:
    """The first Haiku request of an Opus session: the content is what Opus's last report says, the
    overhead Opus's until Haiku reports its own."""
    session = _Session({OPUS: 20_000, HAIKU: 19_000})
    for _ in range(4):
        session.turn(OPUS)
    first_haiku = session.turn(HAIKU)
    requests = session.requests()
    r = requests[first_haiku]
    assert r.anchor_input_tokens is None and r.anchorless == "model"
    assert r.model == HAIKU
    assert _error(r) < 0.06  # only the 1,000-token overhead difference is unknown


def test_a_model_switch_relearns_the_overhead_per_model() -> None:
    """Each model keeps its own overhead, re-learned on its first request of each context: after tools
    were added (both overheads grew), the first request of each model after the next pivot uses what that
    model reported on its first request since, not a blend with what it carried before nor the other's."""
    session = _Session({OPUS: 20_000, HAIKU: 9_000})
    for _ in range(3):
        session.turn(OPUS)
    session.turn(HAIKU)
    session.turn(OPUS)
    session.compact(SUMMARY)
    session.overheads.update({OPUS: 24_000, HAIKU: 13_000})
    session.turn(OPUS)
    switched = session.turn(HAIKU)
    session.turn(OPUS)
    session.compact(SUMMARY)
    haiku_after = session.turn(HAIKU)
    opus_after = session.turn(OPUS)
    requests = session.requests()

    assert requests[switched].anchorless == "model"
    assert requests[haiku_after].anchorless == "pivot"
    assert _error(requests[haiku_after]) < 0.02
    assert requests[opus_after].anchorless == "model"
    assert _error(requests[opus_after]) < 0.02


def test_the_first_request_of_a_session_is_marked_as_such() -> None:
    session = _Session({OPUS: 20_000})
    first = session.turn(OPUS)
    second = session.turn(OPUS)
    requests = session.requests()
    assert requests[first].anchorless == "start" and requests[first].anchor_input_tokens is None
    assert requests[second].anchorless is None and requests[second].anchor_input_tokens is not None


def test_a_view_resumed_from_a_compaction_snapshot_judges_its_next_request_as_after_a_pivot() -> None:
    session = _Session({OPUS: 20_000})
    for _ in range(2):
        session.turn(OPUS)
    before = project(SID, session.messages, session.overlay, _COUNTER)
    kept = [item for item in before.items if item.kind == "message"][-2:]
    seen = len(session.messages)
    nxt = session.turn(OPUS)
    builder = ViewBuilder(SID, session.overlay, _COUNTER).seed(kept, requests=before.requests)
    builder.add_all(session.messages[seen:])
    requests = {r.message_id: r for r in builder.freeze().requests}
    assert len(requests) == 3
    assert requests[nxt].anchorless == "pivot"


def test_a_summariser_request_keeps_its_own_overhead() -> None:
    """OpenCode records the summariser's request, which runs as another agent without the session's system
    prompt and tools: the first is estimated without the session's overhead (only its own short prompt is
    missing), the next with what the first reported, and the session's own requests after a compaction keep
    theirs."""
    session = _Session({OPUS: 20_000})
    for _ in range(3):
        session.turn(OPUS)
    first = session.summarise(4_000, SUMMARY)
    after = session.turn(OPUS)
    for _ in range(3):
        session.turn(OPUS)
    second = session.summarise(4_000, SUMMARY)
    requests = session.requests()

    assert requests[first].model == OPUS + SUMMARISER and requests[first].anchorless == "model"
    # Short by the summariser's own 4,000, not 16,000 over with the session's 20,000 carried into it.
    short = requests[first].reported_input_tokens - requests[first].estimated_input_tokens
    assert abs(short - 4_000) < 0.02 * requests[first].reported_input_tokens
    assert requests[second].anchorless == "model"
    assert _error(requests[second]) < 0.02
    assert requests[after].anchorless == "pivot" and requests[after].model == OPUS
    assert _error(requests[after]) < 0.03
