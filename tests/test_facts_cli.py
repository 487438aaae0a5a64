"""Facts headless (issue #42): ``compact --preview --json`` says which facts of the summarised messages its
summary keeps; ``compactions`` says it for every past compaction; ``inspect`` for a Claude Code transcript's own
compactions. Run as a user runs them (a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import claude_fixture, run_cli

from workbench.engine.plans.facts import KINDS


def cli(tmp_path: Path, *args: str | Path) -> Any:
    return run_cli(["--db", tmp_path / "wb.db", *args], cwd=tmp_path)


def ok_json(tmp_path: Path, *args: str | Path) -> Any:
    result = cli(tmp_path, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_preview_json_has_the_facts_and_adding_the_lost_ones_keeps_them(tmp_path: Path) -> None:
    plan = ok_json(tmp_path, "compact", claude_fixture("session-196820da"), "--preview")
    facts = plan["facts"]
    assert set(facts) == {"kept", "total", "lost"}
    assert 0 < facts["total"] and facts["kept"] + len(facts["lost"]) == facts["total"]
    assert facts["lost"], "the heuristic summary of this session loses something"
    for lost in facts["lost"]:
        assert lost["kind"] in KINDS and lost["message_id"] in plan["summarized"]
    # The user adds each lost fact as a line at the end of the summary, then applies that plan.
    plan["summary"] += "\n" + "\n".join(f["text"] for f in facts["lost"])
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(plan))
    applied = ok_json(tmp_path, "compact", plan["session_id"], "--apply", "--plan", saved)
    assert applied["applied"] is True
    assert applied["facts"] == {"kept": facts["total"], "total": facts["total"], "lost": []}
    [entry] = ok_json(tmp_path, "compactions", plan["session_id"])
    assert entry["facts"] == applied["facts"]  # the past compaction's span and summary, found again


def test_compactions_shows_kept_n_of_m_per_compaction(tmp_path: Path) -> None:
    applied = ok_json(tmp_path, "compact", claude_fixture("subagent"), "--apply")
    facts = applied["facts"]
    listing = cli(tmp_path, "compactions", applied["session_id"])
    assert listing.returncode == 0, listing.stderr
    header, row = listing.stdout.splitlines()
    assert header.split() == ["time", "trigger", "summariser", "before", "after", "summarised", "facts", "state",
                              "plan"]
    assert f"kept {facts['kept']} of {facts['total']}" in row
    assert header.index("facts") == row.index("kept ")
    text_out = cli(tmp_path, "compact", applied["session_id"], "--preview")
    assert "facts: the summary keeps " in text_out.stdout


def test_inspect_reports_what_claude_codes_own_summary_kept(tmp_path: Path) -> None:
    transcript = claude_fixture("258c7280")
    report = ok_json(tmp_path, "inspect", transcript)
    [compaction] = report["compactions"]
    facts = compaction["facts"]
    assert facts is not None and 0 < facts["kept"] < facts["total"]
    [entry] = ok_json(tmp_path, "compactions", transcript)
    assert entry["facts"] == facts and entry["summarizer"] == "recorded in the transcript"
    shown = cli(tmp_path, "inspect", transcript)
    assert f"summary kept {facts['kept']} of {facts['total']} facts" in shown.stdout
    assert f"lost {facts['lost'][0]['kind']}: " in shown.stdout


def test_a_session_without_compactions_has_no_facts_to_show(tmp_path: Path) -> None:
    report = ok_json(tmp_path, "inspect", claude_fixture("short"))
    assert report["compactions"] == []
    assert ok_json(tmp_path, "compactions", claude_fixture("short")) == []
