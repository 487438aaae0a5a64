"""A response's output in the next request: as reported when its count is whole, estimated when it is not.

Claude Code writes one transcript line per content block, each with the usage known when it was written: the
count the response started with, unless the final usage arrived before the last block was written. The importer
says which (``source["output"]``); the estimator takes a whole count as reported and estimates a partial one
from what the response wrote.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from helpers import cc_assistant, cc_usage, cc_user, fixture_path, text_block, tool_use_block, write_jsonl

from workbench.engine.context.calibration import Calibrator
from workbench.engine.context.estimation import Estimator
from workbench.engine.transcript.importers import parse_file
from workbench.engine.transcript.models import Usage

OPUS = "claude-opus-4-6"
MIXED = "claude-code__marot__spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
"""Opus and Haiku requests, Claude Code 2.1.39."""
COMPACTED = "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _line(uuid: str, message_id: str, block: dict[str, Any], output: int, *, final_keys: bool = False,
          stop_reason: str | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = cc_usage(3, output, 100, 20_000)
    if final_keys:  # the shape of the usage Claude Code 2.1 writes once the response has ended
        usage.update(server_tool_use={"web_search_requests": 0}, iterations=[])
    record = cc_assistant(uuid, message_id, [block], usage, model=OPUS)
    if stop_reason is not None:
        record["message"]["stop_reason"] = stop_reason
    return record


def _bash(n: int) -> dict[str, Any]:
    return tool_use_block(f"t{n}", "Bash", {"command": f"make step{n}", "description": "Build one step"})


def test_the_importer_says_which_output_counts_are_whole(tmp_path: Path) -> None:
    records = [
        cc_user("u1", "Build it"),
        _line("a1", "msg_single_early", _bash(1), 25),  # one unmarked line, no marked line seen yet: unknown
        _line("a1b", "msg_no_repeat", text_block("Reading."), 30),
        cc_assistant("a1c", "msg_no_repeat", [_bash(9)], None, model=OPUS),  # a line without usage repeats nothing
        _line("a2", "msg_flat", text_block("Building."), 3),
        _line("a3", "msg_flat", _bash(2), 3),  # every line repeats the starting count: partial
        _line("a4", "msg_rose", text_block("Next step."), 4),
        _line("a5", "msg_rose", _bash(3), 394),  # Claude Code 2.0: the last line carries the final count
        _line("a6", "msg_marked", text_block("And the next."), 2),
        _line("a7", "msg_marked", _bash(4), 240, final_keys=True),  # Claude Code 2.1: the final usage's shape
        _line("a8", "msg_single_late", _bash(5), 19),  # this writer marks final lines; this one is not
        _line("a9", "msg_stopped", text_block("Done."), 12, stop_reason="end_turn"),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "cc.jsonl", records))
    said = {m.id: m.source.get("output") for m in parsed.messages if m.role == "assistant"}
    assert said == {
        "msg_single_early": None, "msg_no_repeat": None, "msg_flat": "partial", "msg_rose": "final", "msg_marked": "final",
        "msg_single_late": "partial", "msg_stopped": "final",
    }


@pytest.mark.parametrize("name", [MIXED, COMPACTED])
def test_on_real_transcripts_partial_counts_are_the_starting_ones(name: str) -> None:
    """Read from the raw lines, not the importer: what it calls partial is a count a response starts with
    (a few tokens, below any whole one), and what it calls final is a count a line wrote at the end."""
    path = fixture_path(name)
    counts: dict[str, list[int]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        message = record.get("message")
        if record.get("type") == "assistant" and isinstance(message, dict) and message.get("usage"):
            counts[message["id"]].append(message["usage"]["output_tokens"])
    parsed = parse_file(path)
    said = {m.id: (m.source.get("output"), m.usage.output_tokens) for m in parsed.messages
            if m.role == "assistant" and m.usage is not None and m.id in counts}
    partial = [out for state, out in said.values() if state == "partial"]
    final = [out for state, out in said.values() if state == "final"]
    assert len(partial) > 20 and len(final) > 100
    assert max(partial) < min(final), "a starting count is below every whole response's"
    assert all(len(set(counts[mid])) == 1 for mid, (state, _) in said.items() if state == "partial")
    assert all(out == max(counts[mid]) for mid, (_, out) in said.items())


def _after(output: int, written: int, whole: bool | None) -> int:
    """The estimate after a reported response of ``written`` raw tokens (one block) reporting ``output``."""
    estimator = Estimator(Calibrator())
    usage = Usage(input_tokens=3, cache_read_input_tokens=20_000, output_tokens=output, model=OPUS)
    estimator.add(raw=written, blocks=1, visible_raw=written, visible_blocks=1, has_thinking=False,
                  new_turn=False, model=OPUS, usage=usage, output_whole=whole)
    return estimator.estimate(OPUS) - usage.total_input


def test_a_partial_count_is_estimated_from_what_the_response_wrote() -> None:
    expected = round(Calibrator().for_model(OPUS).calibrate(35, 1))
    assert expected > 35
    assert _after(19, 35, whole=False) == expected, "the transcript says 19 is only the starting count"
    assert _after(19, 35, whole=None) == 19, "nothing says so, and 19 is not clearly below what was written"
    assert _after(19, 35, whole=True) == 19


def test_a_whole_count_is_taken_as_reported_even_when_small() -> None:
    assert _after(10, 60, whole=True) == 10
    assert _after(10, 60, whole=None) == _after(10, 60, whole=False) > 10, "unknown: clearly partial"


def _estimator_after(responses: list[tuple[int, int, int, bool | None, bool]]) -> Estimator:
    """An estimator that read reported responses: (raw, blocks, output, whole, thinking) each."""
    estimator = Estimator(Calibrator())
    for n, (raw, blocks, output, whole, thinking) in enumerate(responses):
        usage = Usage(input_tokens=3, cache_read_input_tokens=20_000 + 1_000 * n, output_tokens=output, model=OPUS)
        estimator.add(raw=raw, blocks=blocks, visible_raw=raw, visible_blocks=blocks, has_thinking=thinking,
                      new_turn=False, model=OPUS, usage=usage, output_whole=whole)
    return estimator


def test_a_partial_count_takes_the_framing_whole_responses_showed() -> None:
    """Whole responses reported 30 tokens a block more than their content calibrates to (the framing of a tool
    call, which the transcript does not show): a partial one is estimated with it."""
    calibrated = Calibrator().for_model(OPUS).calibrate
    framed = [(raw, blocks, round(calibrated(raw, blocks)) + 30 * blocks, True, False)
              for raw, blocks in ((40, 1), (120, 2), (300, 1))]
    estimator = _estimator_after([*framed, (50, 2, 19, False, False)])
    assert estimator.estimate(OPUS) - 23_003 == round(calibrated(50, 2) + 60)
    response = estimator.calibrator.for_model(OPUS)
    assert response.response_blocks == 4 and response.response(100, 1) == calibrated(100, 1) + 30


@pytest.mark.parametrize(("whole", "thinking"), [(None, False), (True, True)])
def test_only_a_whole_count_without_thinking_teaches_how_responses_count(whole: bool | None, thinking: bool) -> None:
    """A count only taken to be whole (nothing said so) may be a starting one; a thinking block's count is the
    whole thinking, which a transcript may show summarised: neither teaches, and a partial count after them is
    estimated from its content alone."""
    calibration = Calibrator().for_model(OPUS)
    estimator = _estimator_after([(40, 1, 400, whole, thinking), (50, 2, 19, False, False)])
    assert estimator.calibrator.for_model(OPUS).response_blocks == 0
    assert estimator.estimate(OPUS) - 21_003 == round(calibration.calibrate(50, 2))
