"""``workbench compact`` and ``workbench compactions``, run as a user runs them (a subprocess).

``--preview`` prints the plan and changes nothing; ``--apply`` applies exactly the plan it made
(or a saved one, summary edited); ``--undo`` reverts it; ``compactions`` lists them all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from compaction_helpers import fingerprint, load, message_ids
from helpers import claude_fixture, run_cli
from loopback_api import LoopbackAPI, Reply, text

from workbench.engine.plans.compaction_prompt import SUMMARIZER_SYSTEM
from workbench.engine.transcript.models import Session
from workbench.engine.transcript.store import Store

REQUIRED = {"before_tokens": int, "after_tokens": int, "summarized": list, "preserved": list, "tail": list,
            "prompt": str, "summary": str, "summarizer": str}


@pytest.fixture
def transcript() -> Path:
    return claude_fixture("subagent")


def own_session(store: Store) -> Session:
    """The transcript's session (its sub-agent's, imported with it, names it as its parent)."""
    [(session, _)] = [(s, n) for s, n in store.list_sessions() if "parent_session" not in s.metadata]
    return session


def cli(tmp_path: Path, *args: str | Path) -> Any:
    result = run_cli(["--db", tmp_path / "wb.db", *args], cwd=tmp_path)
    return result


def ok_json(tmp_path: Path, *args: str | Path) -> Any:
    result = cli(tmp_path, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_preview_json_shows_the_plan_and_changes_nothing(tmp_path: Path, transcript: Path) -> None:
    plan = ok_json(tmp_path, "compact", transcript, "--preview")
    for key, kind in REQUIRED.items():
        assert isinstance(plan[key], kind), key
    assert plan["summarizer"] == "heuristic" and plan["after_tokens"] < plan["before_tokens"]
    assert plan["summary"].startswith("[Previous conversation summary]")
    assert "<conversation>" in plan["prompt"] and plan["summarized"] and plan["tail"]
    with Store(tmp_path / "wb.db") as store:
        session = own_session(store)
        ctx = load(store, session.id)
        assert not [e for e in ctx.events if e.origin == "compaction"]
        assert message_ids(ctx.view()) == [*plan["summarized"], *plan["preserved"], *plan["tail"]]
    again = ok_json(tmp_path, "compact", session.id, "--preview")
    assert again["summary"] == plan["summary"] and again["prompt"] == plan["prompt"]


def test_apply_applies_the_plan_it_shows_then_undo_and_list(tmp_path: Path, transcript: Path) -> None:
    applied = ok_json(tmp_path, "compact", transcript, "--apply", "--focus", "the linting beads")
    assert applied["applied"] is True and "the linting beads" in applied["prompt"]
    with Store(tmp_path / "wb.db") as store:
        session = own_session(store)
        ctx = load(store, session.id)
        summary_id = applied["result"]["summary_id"]
        assert next(m for m in ctx.messages if m.id == summary_id).text == applied["summary"]
        assert message_ids(ctx.view()) == [summary_id, *applied["preserved"], *applied["tail"]]
        assert ctx.budget().used == applied["after_tokens"] == applied["result"]["after_tokens"]
    [entry] = ok_json(tmp_path, "compactions", session.id)
    assert (entry["plan_id"], entry["trigger"], entry["summarizer"], entry["undone"]) == (
        applied["plan_id"], "manual", "heuristic", False)
    assert (entry["before_tokens"], entry["after_tokens"], entry["summarized"]) == (
        applied["before_tokens"], applied["after_tokens"], len(applied["summarized"]))
    undone = ok_json(tmp_path, "compact", session.id, "--undo")
    assert undone["plan_id"] == applied["plan_id"] and undone["undone"] is True
    listing = cli(tmp_path, "compactions", session.id)
    assert listing.returncode == 0 and "undone" in listing.stdout and applied["plan_id"] in listing.stdout
    again = cli(tmp_path, "compact", session.id, "--undo")
    assert again.returncode == 1 and "nothing to undo" in again.stderr


def test_apply_a_saved_preview_with_an_edited_summary(tmp_path: Path, transcript: Path) -> None:
    plan = ok_json(tmp_path, "compact", transcript, "--preview")
    plan["summary"] = "[Previous conversation summary]\n\nHand-written: the beads are drafted."
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(plan))
    applied = ok_json(tmp_path, "compact", plan["session_id"], "--apply", "--plan", saved)
    assert applied["plan_id"] == plan["plan_id"]
    with Store(tmp_path / "wb.db") as store:
        ctx = load(store, plan["session_id"])
        first = ctx.view().items[[i.kind for i in ctx.view().items].index("message")]
        assert first.parts[0].text == plan["summary"]  # type: ignore[union-attr]
        before = fingerprint(ctx.view())
    stale = cli(tmp_path, "compact", plan["session_id"], "--apply", "--plan", saved)
    assert stale.returncode == 1 and "changed since this compaction was previewed" in stale.stderr
    with Store(tmp_path / "wb.db") as store:
        assert fingerprint(load(store, plan["session_id"]).view()) == before


def test_text_output_and_usage_errors(tmp_path: Path, transcript: Path) -> None:
    shown = cli(tmp_path, "compact", transcript, "--preview")
    assert shown.returncode == 0, shown.stderr
    assert "tokens:" in shown.stdout and "[Previous conversation summary]" in shown.stdout
    assert cli(tmp_path, "compact", transcript).returncode == 2, "one of --preview / --apply / --undo is required"
    wrong = cli(tmp_path, "compact", transcript, "--preview", "--plan", "x.json")
    assert wrong.returncode == 1 and "--plan goes with --apply" in wrong.stderr
    missing = cli(tmp_path, "compact", "no-such-session", "--preview")
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_llm_without_a_key_says_how_to_fix_it(tmp_path: Path, transcript: Path) -> None:
    result = cli(tmp_path, "compact", transcript, "--preview", "--summarizer", "llm")
    assert result.returncode == 1
    assert "ANTHROPIC_API_KEY" in result.stderr and "Traceback" not in result.stderr


def test_llm_summary_headless_through_the_api(tmp_path: Path, transcript: Path, api: LoopbackAPI,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    api.queue(Reply([text("The user drafted linting beads with a planning sub-agent.")]))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    assert os.environ["ANTHROPIC_BASE_URL"] == api.url
    plan = ok_json(tmp_path, "compact", transcript, "--preview", "--summarizer", "llm", "--model", "claude-haiku-4-5")
    assert plan["summarizer"] == "llm" and plan["model"] == "claude-haiku-4-5"
    assert "drafted linting beads" in plan["summary"]
    [body] = api.bodies
    assert body["model"] == "claude-haiku-4-5" and "tools" not in body
    assert body["system"][0]["text"] == SUMMARIZER_SYSTEM
    assert body["messages"][0]["content"][0]["text"] == plan["prompt"]


def test_apply_of_an_edited_plan_prints_what_it_made_not_the_plans_old_figure(tmp_path: Path, transcript: Path) -> None:
    plan = ok_json(tmp_path, "compact", transcript, "--preview")
    plan["summary"] = "[Previous conversation summary]\n\nShort."  # far shorter than the summary it replaces
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(plan))
    shown = cli(tmp_path, "compact", plan["session_id"], "--apply", "--plan", saved)
    assert shown.returncode == 0, shown.stderr
    with Store(tmp_path / "wb.db") as store:
        after = load(store, plan["session_id"]).budget().used
    assert after != plan["after_tokens"]
    tokens = next(line for line in shown.stdout.splitlines() if line.startswith("tokens: "))
    assert tokens.startswith(f"tokens: {plan['before_tokens']:,} → {after:,} ")
    assert f"(the plan estimated {plan['before_tokens']:,} → {plan['after_tokens']:,} when it was made)" in tokens
    assert f"applied: {plan['before_tokens']:,} → {after:,} tokens" in shown.stdout


def test_compactions_labels_every_column(tmp_path: Path, transcript: Path) -> None:
    applied = ok_json(tmp_path, "compact", transcript, "--apply")
    listing = cli(tmp_path, "compactions", applied["session_id"])
    header, row = listing.stdout.splitlines()
    assert header.split() == ["time", "trigger", "summariser", "before", "after", "summarised", "facts", "state",
                              "plan"]
    assert row.endswith(f"applied  {applied['plan_id']}")
    assert header.index("plan") == row.index(applied["plan_id"])


def test_spec001_apply_with_nothing_to_compact_changes_nothing_and_says_so(tmp_path: Path) -> None:
    short = claude_fixture("short")  # five messages, all in the kept tail
    refused = ok_json(tmp_path, "compact", short, "--apply")
    assert refused["applied"] is False and refused["reason"].startswith("nothing to compact")
    text_out = cli(tmp_path, "compact", short, "--apply")
    assert text_out.returncode == 0 and "not applied: nothing to compact" in text_out.stdout
    with Store(tmp_path / "wb.db") as store:
        [(session, _)] = store.list_sessions()
        assert not [e for e in load(store, session.id).events if e.origin == "compaction"]
