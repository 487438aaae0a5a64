"""The live estimate of the next request's input tokens.

Anchored on the last reported input total of the same model since the last
compaction, plus the response to it, plus the calibrated estimate of what was
added since. The response counts as its reported output, unless that count is
partial (Claude Code's transcript often keeps only the count a response started
with, and says so, see ``importers.claude_usage``): then as what it wrote,
counted as its model's whole responses were (``ModelCalibration.response``).
On ae4a77f8 those partial counts made the Opus median delta 8.5%; 5.0% now. Without an anchor: the calibrated estimate of the whole view
plus that model's unseen overhead (system prompt and tools a transcript does
not show). On a model's first request after another model's, the other
model's anchor carries the content and only the overhead differs.

The overhead is re-learned rather than smoothed over a session: each model's
first request after a pivot (or after another model's request) replaces it
with what that request reports. The next pivot uses the latest such measure:
a first request carries, like the one to come, the system prompt, the tools
and what the agent attaches to a fresh context, and few messages to count.
Implied overheads late in a segment also hold the reminders the agent
injected on the way, which the pivot drops: on the fixtures' two Claude Code
compactions the overhead implied just before the pivot did no better (+20%
and -27% on the first request after it, against -12.5% and -28%, measured
before the files Claude Code re-attaches were imported). With those files in
the view (``importers.claude_restore``) the first requests after the two
compactions are off +6.9% and -4.4%.

A summariser (OpenCode's compaction agent, keyed ``model + SUMMARISER``) does
not inherit the session's overhead: it runs with its own short prompt and no
session tools, so its first request is estimated from the content alone
(-6.6% on the fixture's one, against +22.3% with the session's overhead).
A model switch keeps the content anchor and takes the other model's overhead
until the new model reports its own; nothing in a transcript predicts the
difference (the fixture's first Haiku request after Opus ones: -12.8%, its
system prompt and tools 5,000 tokens larger than Opus's, though Anthropic
lists both models with the same tokenizer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from workbench.engine.context.calibration import Calibrator
from workbench.engine.context.records import SUMMARISER, MessageRecord, Restart
from workbench.engine.context.request_log import Anchorless, RequestEstimate, RequestLog
from workbench.engine.settings.limits import keeps_thinking
from workbench.engine.transcript.models import Usage

PARTIAL_OUTPUT_SHARE = 0.5
"""Reported output below this share of the transcript's raw count is taken as a partial report."""


Change = tuple[int, int, datetime | None]
"""An overlay change to one message: raw tokens, the view's calibrated tokens, when it was made (None: live)."""


NOW = datetime.max.replace(tzinfo=UTC)
"""The time of the next request: after every change made so far."""


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text is not None else None


def _aware(when: datetime | None) -> datetime | None:
    """Times compare only when all carry a zone; a transcript's zoneless time is taken as UTC."""
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


@dataclass
class _Anchor:
    """The last reported usage the estimate builds on, and what changed in the context since."""

    input_total: int
    output: int
    adjust: int = 0
    """Tokens known to have left the context since the anchor (stripped thinking)."""
    pending_raw: int = 0
    pending_blocks: int = 0
    at: datetime | None = None
    """When the anchoring response was written."""
    seq: int = 0
    """How many context changes had been seen when it was set."""

    def base(self) -> int:
        return self.input_total + self.output + self.adjust


class Estimator:
    """Fed by the projector: :meth:`take` for each message's record, :meth:`restart` when nothing reported
    describes the context any more."""

    def __init__(self, calibrator: Calibrator, fixed_tokens: int = 0) -> None:
        self.calibrator = calibrator
        self.fixed_tokens = fixed_tokens
        self.requests = RequestLog()
        self._reported_model: str | None = None
        """The model of the latest report in the session, across pivots."""
        self._reported = False
        self.reset()

    def reset(self) -> None:
        """A compaction: nothing before it is in context any more."""
        self._anchors: dict[str | None, _Anchor] = {}
        self._latest_model: str | None = None
        """The model of the latest report since the pivot; meaningful only while ``_anchors`` is not empty."""
        self._raw = 0
        self._blocks = 0
        self._loop_thinking = 0
        self._loop_thinking_raw = 0
        self._stripped_raw = 0
        """Raw tokens of thinking a new turn took out of the context: in ``_raw``, no longer sent."""
        self._changes: list[Change] = []
        """(raw token change, calibrated token change, when) for messages whose content the overlay replaced.
        The calibrated change is the change of the message's item in the view: what the budget moves by."""
        self._untimed = ([0], [0])
        self._timed = ([0], [0])
        """Running sums over ``_changes`` (raw, calibrated) of the changes without / with a time: O(1) sums when
        times cannot interleave."""
        self._earliest: datetime | None = None
        self._latest: datetime | None = None
        """The range of the change times."""

    def resume(self, requests: Sequence[RequestEstimate]) -> None:
        """Continue after a compaction checkpoint: its requests were made, though no anchor survives them."""
        self.requests.extend(requests)
        if requests:
            self._reported, self._reported_model = True, requests[-1].model

    def state(self) -> dict[str, Any]:
        """Everything the estimate depends on but :attr:`requests`, as JSON-ready data (the caller stores those
        compactly): a stored session resumes from it (:meth:`restore`) instead of replaying every message."""
        return {
            "fixed_tokens": self.fixed_tokens,
            "reported_model": self._reported_model,
            "reported": self._reported,
            "anchors": [[model, a.input_total, a.output, a.adjust, a.pending_raw, a.pending_blocks, _iso(a.at), a.seq]
                        for model, a in self._anchors.items()],
            "latest_model": self._latest_model,
            "sums": [self._raw, self._blocks, self._loop_thinking, self._loop_thinking_raw, self._stripped_raw],
            "changes": [[raw, tokens, _iso(when)] for raw, tokens, when in self._changes],
        }

    def restore(self, state: Mapping[str, Any], requests: Iterable[RequestEstimate]) -> None:
        """Continue from :meth:`state` and the :attr:`requests` of an estimator over the same calibration (its
        calibrator restored too): exactly as the one it was taken from."""
        self.reset()
        self.requests = requests if isinstance(requests, RequestLog) else RequestLog(requests)
        self.fixed_tokens = int(state["fixed_tokens"])
        self._reported_model, self._reported = state["reported_model"], bool(state["reported"])
        self._anchors = {model: _Anchor(total, output, adjust, raw, blocks, _when(at), seq)
                         for model, total, output, adjust, raw, blocks, at, seq in state["anchors"]}
        self._latest_model = state["latest_model"]
        self._raw, self._blocks, self._loop_thinking, self._loop_thinking_raw, self._stripped_raw = state["sums"]
        for raw, tokens, at in state["changes"]:
            self._note_change(raw, tokens, _when(at))

    def _timed_sum(
        self, start: int, stop: int, after: datetime | None, until: datetime | None, calibrated: bool = False
    ) -> int:
        """Raw (or ``calibrated``) change of the timed changes in ``_changes[start:stop]`` made after ``after``,
        no later than ``until``.

        A None bound is open. Constant time when the change times cannot straddle a bound (strategies
        change old messages long after their requests); a scan of the range otherwise.
        """
        early, late = self._earliest, self._latest
        if early is None or late is None:
            return 0
        if (after is not None and late <= after) or (until is not None and early > until):
            return 0
        column = int(calibrated)
        if (after is None or early > after) and (until is None or late <= until):
            return self._timed[column][stop] - self._timed[column][start]
        return sum(
            (tokens if calibrated else raw) for raw, tokens, when in self._changes[start:stop]
            if when is not None and (after is None or when > after) and (until is None or when <= until)
        )

    def _untimed_sum(self, start: int, stop: int) -> int:
        """Calibrated changes without a time: made live and not stored yet, so after every request so far."""
        return self._untimed[1][stop] - self._untimed[1][start]

    @property
    def anchored(self) -> bool:
        return bool(self._anchors)

    def estimate(self, model: str | None) -> int:
        """The estimate of the next request: the context as it is now."""
        return self._estimate_at(model, NOW)

    def steered(self, model: str | None) -> int:
        """Tokens the overlay took out (negative: put back) of what the latest reported request of ``model``
        counted; 0 when nothing reported describes the context."""
        anchor = self._anchors.get(model)
        return 0 if anchor is None else -self._carried(anchor, NOW)[0]

    def _carried(self, anchor: _Anchor, at: datetime | None) -> tuple[int, int]:
        """For a request sent at ``at``: the calibrated change, in what the anchor had counted, of overlay
        changes made since the anchor (in the view's own token counts, so that the budget moves by what
        the changed items show); and the raw size of what was added since, as that request carried it. Changes with no time are live ones, made before any request still to come; a
        request with no time is taken to be older than every change with one."""
        between = self._untimed_sum(0, anchor.seq)
        if at is not None:
            between += self._timed_sum(0, anchor.seq, anchor.at, at, calibrated=True)
        pending = anchor.pending_raw - self._timed_sum(anchor.seq, len(self._changes), at, None)
        return between, pending

    def _content_raw(self, at: datetime | None) -> int:
        """Raw tokens of the messages a request sent at ``at`` carried."""
        return self._raw - self._stripped_raw - self._timed_sum(0, len(self._changes), at, None)

    def _overhead(self, model: str | None) -> float:
        """The model's unseen overhead; a model not seen yet is taken to carry what the latest one did, except a
        summariser: another agent, whose own short prompt no transcript shows (taken as none)."""
        own = self.calibrator.for_model(model).unseen_overhead
        if own is not None:
            return own
        if model is not None and model.endswith(SUMMARISER):
            return 0.0
        latest = self.calibrator.for_model(self._reported_model).unseen_overhead if self._reported else None
        return latest or 0.0

    def _switched(self, model: str | None, at: datetime | None) -> int:
        """A model with no anchor of its own while another has one: the other's estimate of the same
        content, with this model's overhead in place of the other's."""
        other = self._latest_model
        return self._estimate_at(other, at) + round(self._overhead(model) - self._overhead(other))

    def _estimate_at(self, model: str | None, at: datetime | None) -> int:
        cal = self.calibrator.for_model(model)
        anchor = self._anchors.get(model)
        if anchor is not None:
            between, pending = self._carried(anchor, at)
            return between + round(anchor.base() + cal.calibrate(pending, anchor.pending_blocks))
        if self._anchors:
            return self._switched(model, at)
        return round(self.fixed_tokens + cal.calibrate(self._content_raw(at), self._blocks) + self._overhead(model))

    def request(self, message_id: str, model: str | None, usage: Usage, at: datetime | None = None) -> None:
        """A response arrived (its request sent before ``at``): score the estimate made before it, then learn.

        Both compare with what that request carried: overlay changes made after it (a strategy
        pruning old outputs later) do not count, changes made before it do.
        """
        reported = usage.total_input
        at = _aware(at)
        cal = self.calibrator.for_model(model)
        anchor = self._anchors.get(model)
        estimated = self._estimate_at(model, at)
        anchorless: Anchorless | None = None
        if anchor is None:
            anchorless = "model" if self._anchors else "pivot" if self._reported else "start"
        self.requests.append(
            RequestEstimate(
                message_id=message_id,
                model=model,
                reported_input_tokens=reported,
                estimated_input_tokens=estimated,
                anchor_input_tokens=anchor.input_total if anchor else None,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                anchorless=anchorless,
            )
        )
        if anchor is not None:
            between, pending = self._carried(anchor, at)
            growth = reported - anchor.base() - between
            cal.observe_growth(pending, anchor.pending_blocks, round(growth))
        elif self._anchors:
            # The content is what the other model's anchor says; the rest is this model's own overhead.
            cal.relearn_unseen(reported - estimated + self._overhead(model))
        else:
            cal.relearn_unseen(reported - self.fixed_tokens - cal.calibrate(self._content_raw(at), self._blocks))

    def _note_change(self, raw_change: int, tokens_change: int, when: datetime | None) -> None:
        self._changes.append((raw_change, tokens_change, when))
        for column, change in enumerate((raw_change, tokens_change)):
            self._untimed[column].append(self._untimed[column][-1] + (change if when is None else 0))
            self._timed[column].append(self._timed[column][-1] + (0 if when is None else change))
        if when is not None:
            self._earliest = when if self._earliest is None else min(self._earliest, when)
            self._latest = when if self._latest is None else max(self._latest, when)

    def add(
        self,
        *,
        raw: int,
        blocks: int,
        visible_raw: int,
        visible_blocks: int,
        has_thinking: bool,
        new_turn: bool,
        model: str | None,
        usage: Usage | None,
        at: datetime | None = None,
        changes: Sequence[Change] = (),
        output_whole: bool | None = None,
    ) -> None:
        """A message joined the context; ``visible_*`` leave out its thinking.

        ``changes``: what the overlay removed from (or added to) the message as originally sent, one
        (raw tokens, the view's calibrated tokens, when) per time it changed; responses reported before
        a change counted the original.
        """
        at = _aware(at)
        overlay_delta = 0
        for raw_change, tokens_change, when in changes:
            if not (raw_change or tokens_change):
                continue
            overlay_delta += raw_change
            self._note_change(raw_change, tokens_change, _aware(when))
        if new_turn and self._loop_thinking:
            for anchor in self._anchors.values():
                anchor.adjust -= self._loop_thinking
            self._loop_thinking = 0
        if new_turn:
            self._stripped_raw += self._loop_thinking_raw
            self._loop_thinking_raw = 0
        for anchor in self._anchors.values():
            anchor.pending_raw += raw
            anchor.pending_blocks += blocks
        self._raw += raw
        self._blocks += blocks
        if usage is None or usage.total_input <= 0:
            return
        cal = self.calibrator.for_model(model)
        # The response joins the next request as reported, unless the report is partial (Claude Code
        # often keeps only the usage a response started with): as its transcript says, or, where it says
        # nothing, when clearly below what was written. A partial one counts as the model's whole ones
        # did; only a count said to be whole teaches that (an unmarked one may be a starting count). Judged
        # on the response as written: what the overlay took out of it since comes off as a change.
        output = usage.output_tokens
        written = raw - overlay_delta
        if output_whole and not has_thinking:
            cal.observe_response(written, blocks, output)
        whole = output >= PARTIAL_OUTPUT_SHARE * written if output_whole is None else output_whole
        if not whole:
            output = round(cal.response(written, blocks))
        if has_thinking and not keeps_thinking(model):
            visible = round(cal.calibrate(visible_raw - overlay_delta, visible_blocks))
            self._loop_thinking += max(0, output - visible)
            self._loop_thinking_raw += max(0, raw - visible_raw)
        self._anchors[model] = _Anchor(input_total=usage.total_input, output=output, at=at, seq=len(self._changes))
        self._latest_model = model
        self._reported_model = model
        self._reported = True

    # --- fed by the projector ----------------------------------------------------

    def take(self, record: MessageRecord) -> None:
        """A message was read into the view (or, ``record.left``, archived out of it): score and learn from the
        request it answers, then count what it added and what the overlay changed in it.

        An archived message's usage still anchors the estimate (the request happened, though it is not listed
        or learned from); what it held comes off as an overlay change dated when it was archived."""
        usage = record.usage
        if record.reported and not record.left and usage is not None:
            self.request(record.message_id, record.key, usage, at=record.at)
        changes = self._calibrated_changes(record) if record.changes or record.left else ()
        if record.left:
            self.add(
                raw=0, blocks=0, visible_raw=0, visible_blocks=0, has_thinking=False, new_turn=record.new_turn,
                model=record.key, usage=usage, at=record.at, changes=changes,
            )
            return
        self.add(
            raw=record.raw_total,
            blocks=record.blocks,
            visible_raw=record.visible_raw,
            visible_blocks=record.visible_blocks,
            has_thinking=record.thinking > 0,
            new_turn=record.new_turn,
            model=record.key,
            usage=usage,
            at=record.at,
            changes=changes,
            output_whole=record.output_whole,
        )

    def _calibrated_changes(self, record: MessageRecord) -> list[Change]:
        """The record's overlay changes with their calibrated figures, in the view's own calibration: they add
        up to the change of the message's item, so the budget moves by what the item shows. Older changes keep
        their figure whatever came after; the newest takes the rest. For a message that left, what it held as
        the view showed it goes too (a pruning before stays a change of its own); thinking a later turn strips
        anyway is not counted twice."""
        calibration = self.calibrator.for_model(record.view_model)
        shown = calibration.components(record.raw, record.blocks)
        changes: list[Change] = []
        if record.changes and record.written is not None:
            rest = sum(shown.values()) - sum(calibration.components(record.written, record.written_blocks).values())
            ratio = calibration.coefficients()[0]
            last = len(record.changes) - 1
            for n, (raw, when) in enumerate(record.changes):
                tokens = rest if n == last else round(ratio * raw)
                rest -= tokens
                changes.append((raw, tokens, when))
        if record.left:
            strip = "" if record.thinking and keeps_thinking(record.model) else "thinking"
            gone_raw = sum(raw for name, raw in record.raw.items() if name != strip)
            gone = sum(tokens for name, tokens in shown.items() if name != strip)
            changes.append((-gone_raw, -gone, record.left_at))
        return changes

    def restart(self, restart: Restart) -> None:
        """Nothing reported describes the context any more: estimate it from its items alone."""
        self.reset()
        for raw, blocks in restart.contents:
            self.add(
                raw=raw, blocks=blocks, visible_raw=raw, visible_blocks=blocks,
                has_thinking=False, new_turn=False, model=restart.model, usage=None,
            )
