"""What Claude Code's own summaries kept (issue #42): on every real Claude Code transcript in tests/fixtures
that holds a compaction, the facts of the span each compaction replaced are checked against the agent's own
summary. The figure and the lost facts are a snapshot; a sample of the lost facts is verified against the raw
file, read without the importer: absent from the summary, present in the span."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES_DIR, raw_records
from syrupy.assertion import SnapshotAssertion

from workbench.engine.context.session import SessionContext
from workbench.engine.plans.fact_check import FactCheck, compacted_spans, past_checks
from workbench.engine.plans.facts import Fact
from workbench.engine.settings.config import Config
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.store import Store

COMPACTED = sorted(p.name for p in FIXTURES_DIR.glob("claude-code__*.jsonl")
                   if '"subtype":"compact_boundary"' in p.read_text(encoding="utf-8"))


def test_the_fixtures_hold_compactions() -> None:
    assert len(COMPACTED) >= 2, COMPACTED  # a fixture lost or renamed would empty the tests below


def _checks(tmp_path: Path, name: str) -> tuple[SessionContext, list[FactCheck]]:
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, FIXTURES_DIR / name, None)
        ctx = SessionContext.load(store, parsed.session.id, Config())
    return ctx, [c for _, c in past_checks(ctx) if c is not None]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _raw_span_and_summary(name: str) -> tuple[str, str]:
    """Every string of the main-thread messages before the (first) compact boundary, and the summary after it."""
    records = raw_records(FIXTURES_DIR / name)
    at = next(n for n, (_, r) in enumerate(records) if r.get("subtype") == "compact_boundary")
    span = "\n".join(s for _, r in records[:at] if not r.get("isSidechain") for s in _strings(r.get("message")))
    content = next(r["message"]["content"] for _, r in records[at:] if r.get("isCompactSummary"))
    summary = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
    return span, summary


def _sample(lost: list[Fact]) -> list[Fact]:
    """Every third lost fact of the kinds a raw text search can verify on its own."""
    return [f for f in lost if f.kind in ("file", "identifier", "number", "command")][::3]


def _evidence(fact: Fact) -> str:
    """What the raw span must hold and the summary must not: the file's name, the name or number, the command
    as shown."""
    if fact.kind == "file":
        return fact.text.rsplit(" ", 1)[-1].rsplit("/", 1)[-1]
    if fact.kind == "command":
        return fact.text.split("`", 1)[1].rsplit("`", 1)[0].rstrip("…")
    return fact.text


@pytest.mark.parametrize("name", COMPACTED)
def test_claude_codes_own_summary_keeps_and_loses(tmp_path: Path, name: str, snapshot: SnapshotAssertion) -> None:
    ctx, checks = _checks(tmp_path, name)
    [span] = compacted_spans(ctx)
    [result] = checks
    assert 0 < result.kept < result.total
    assert span.summary is not None and span.summary.startswith("This session is being continued")
    shown: dict[str, Any] = {"figure": result.figure(),
                             "lost": [[f.kind, f.text, f.message_id] for f in result.lost]}
    assert shown == snapshot
    raw_span, raw_summary = _raw_span_and_summary(name)
    assert raw_summary.strip() == span.summary.strip()
    sample = _sample(result.lost)
    assert sample, "no lost fact to verify"
    span_ids = {m.id for m in span.messages}
    for fact in sample:
        evidence = _evidence(fact)
        assert fact.message_id in span_ids
        assert evidence in raw_span, fact
        assert evidence.lower() not in raw_summary.lower(), fact
