"""The headless CLI: ``import`` and ``inspect`` output contracts, and one-line errors for bad input.

Most cases call ``workbench.cli.main`` in-process (fast, same code path); the
subprocess cases run ``python -m workbench`` for real, where a traceback would show.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    COMPACT_PRE_TOKENS,
    UNSUPPORTED_FIXTURES,
    assistant_ids,
    basic_conversation,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    fixture_path,
    last_usage_by_id,
    run_cli,
    stderr_lines,
    text_block,
    usage_input_total,
    write_jsonl,
)

from workbench.cli import main
from workbench.engine.transcript.migrations import SCHEMA_VERSION


def _run(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_inspect_schema(report: dict[str, Any]) -> None:
    """The documented keys and types of ``inspect --json``."""
    assert report["format"] == "claude-code"
    assert isinstance(report["session_id"], str) and report["session_id"]
    assert report["title"] is None or isinstance(report["title"], str)
    assert report["model"] is None or isinstance(report["model"], str)
    for key in ("context_window", "output_reserve", "effective_window", "messages"):
        assert _is_int(report[key]), key
    assert report["effective_window"] == report["context_window"] - report["output_reserve"]
    assert isinstance(report["skipped_lines"], list)
    for skipped in report["skipped_lines"]:
        assert _is_int(skipped["line"]) and isinstance(skipped["reason"], str)
    budget = report["budget"]
    assert _is_int(budget["used"]) and _is_int(budget["free"])
    assert isinstance(budget["percent"], float)
    assert isinstance(budget["components"], dict)
    assert all(isinstance(k, str) and _is_int(v) for k, v in budget["components"].items())
    assert budget["used"] == sum(budget["components"].values())
    assert budget["free"] == max(0, report["effective_window"] - budget["used"])
    assert budget["percent"] == pytest.approx(100 * budget["used"] / report["effective_window"], abs=0.01)
    for r in report["requests"]:
        assert isinstance(r["message_id"], str)
        assert isinstance(r["model"], str)
        assert _is_int(r["reported_input_tokens"]) and _is_int(r["estimated_input_tokens"])
        assert r["anchor_input_tokens"] is None or _is_int(r["anchor_input_tokens"])
        assert (r["anchorless"] is None) == (r["anchor_input_tokens"] is not None)
        assert r["anchorless"] in (None, "start", "pivot", "model")
    for c in report["compactions"]:
        assert isinstance(c["message_id"], str) and isinstance(c["trigger"], str)
        assert c["reported_pre_tokens"] is None or _is_int(c["reported_pre_tokens"])
        assert _is_int(c["estimated_pre_tokens"])


def _assert_one_line_failure(code: int, out: str, err: str) -> None:
    assert code != 0
    assert "Traceback" not in err and "Traceback" not in out
    lines = stderr_lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("workbench: error:"), lines[0]
    assert "internal error" not in err, "a bad input is a user error, not a crash"


# --- import --json ----------------------------------------------------------------


def test_import_json_contract_and_reimport(tmp_path: Path) -> None:
    db = tmp_path / "wb.db"
    path = claude_fixture("subagent")
    first = run_cli(["import", path, "--json", "--db", db], cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    payload = json.loads(first.stdout)
    assert set(payload) == {"session_id", "messages", "tokens", "skipped_lines", "subagents", "warnings"}
    assert isinstance(payload["session_id"], str) and payload["session_id"]
    assert _is_int(payload["messages"]) and _is_int(payload["tokens"]) and payload["tokens"] > 0
    fact = CLAUDE_FIXTURES["subagent"]
    assert payload["messages"] == fact.assistant_ids + fact.user_records
    assert payload["skipped_lines"] == [] and payload["warnings"] == []
    (subagent,) = payload["subagents"]  # its Task call's sub-agent, from the records embedded in the transcript

    second = run_cli(["import", path, "--json", "--db", db], cwd=tmp_path)
    assert second.returncode == 0
    assert json.loads(second.stdout) == payload

    listed = run_cli(["sessions", "--json", "--db", db], cwd=tmp_path)
    sessions = json.loads(listed.stdout)
    assert [(s["session_id"], s["role"], s["parent"]) for s in sessions] == [
        (payload["session_id"], "session", None), (subagent["session_id"], "sub-agent", payload["session_id"])]
    assert next(s["messages"] for s in sessions if s["session_id"] == payload["session_id"]) == payload["messages"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("wb.db")) == []


def test_import_without_db_uses_the_data_dir(tmp_path: Path, workbench_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "import", claude_fixture("short"))
    assert code == 0
    assert (workbench_home / "data" / "workbench.db").is_file()
    session_id = out.split()[-1]
    assert out == f"imported 5 messages · 220 tokens · 0 skipped lines · session {session_id}\n"
    code, out2, _ = _run(capsys, "sessions")
    assert out2.splitlines()[1].startswith(session_id + "  ")


# --- inspect --json ---------------------------------------------------------------


@pytest.mark.parametrize("key", list(CLAUDE_FIXTURES))
def test_inspect_json_on_each_fixture(key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fact = CLAUDE_FIXTURES[key]
    path = claude_fixture(key)
    code, out, err = _run(capsys, "import", path, "--json", "--db", tmp_path / "wb.db")
    assert (code, err) == (0, "")
    imported = json.loads(out)
    # Each compaction adds its boundary and the files Claude Code re-attached after it.
    assert imported["messages"] == fact.assistant_ids + fact.user_records + 2 * fact.compactions
    code, out, err = _run(capsys, "inspect", path, "--json", "--db", tmp_path / "wb.db")
    assert code == 0, err
    assert "Traceback" not in err
    report = json.loads(out)
    check_inspect_schema(report)
    assert report["session_id"] == imported["session_id"]
    assert report["model"] == fact.model
    assert report["messages"] == fact.assistant_ids + fact.user_records + 2 * fact.compactions
    assert report["context_window"] == 200_000
    assert report["skipped_lines"] == []
    last = last_usage_by_id(path)
    assert [r["message_id"] for r in report["requests"]] == assistant_ids(path)
    assert [r["reported_input_tokens"] for r in report["requests"]] == [usage_input_total(last[i]) for i in assistant_ids(path)]
    assert report["requests"][0]["anchor_input_tokens"] is None
    assert report["requests"][0]["anchorless"] == "start"
    assert [r["anchorless"] for r in report["requests"]].count("pivot") == fact.compactions
    if fact.compactions:
        (c,) = report["compactions"]
        assert (c["trigger"], c["reported_pre_tokens"]) == ("auto", COMPACT_PRE_TOKENS)
    else:
        assert report["compactions"] == []


def test_inspect_by_stored_session_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    path = claude_fixture("258c7280")
    code, out, _ = _run(capsys, "import", path, "--json", "--db", db)
    session_id = json.loads(out)["session_id"]

    code, by_file, _ = _run(capsys, "inspect", path, "--json", "--db", db)
    assert code == 0
    code, by_id, err = _run(capsys, "inspect", session_id, "--json", "--db", db)
    assert code == 0, err
    code, by_id_global_flag, _ = _run(capsys, "--db", db, "inspect", session_id, "--json")
    assert code == 0
    report = json.loads(by_id)
    check_inspect_schema(report)
    assert report["session_id"] == session_id
    assert report == json.loads(by_file) == json.loads(by_id_global_flag)


def test_inspect_unknown_session_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "inspect", "cc-0000000000000000", "--db", tmp_path / "wb.db")
    _assert_one_line_failure(code, out, err)
    assert "no stored session" in err


def test_inspect_plain_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "inspect", claude_fixture("258c7280"), "--db", tmp_path / "wb.db")
    assert code == 0, err
    assert "Implement spotter-gqc" in out
    assert "Budget:" in out and "Heaviest messages" in out
    assert "compaction at" in out and "167,094" in out  # one number format (issue 17: it printed 167094)


def test_unknown_model_warns_but_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [cc_user("u1", "hello"), cc_assistant("a1", "msg_1", [text_block("hi")], cc_usage(5, 3, 700, 0), model="mystery-model-9")]
    path = write_jsonl(tmp_path / "mystery.jsonl", records)
    code, out, err = _run(capsys, "inspect", path, "--json", "--db", tmp_path / "wb.db")
    assert code == 0
    report = json.loads(out)
    assert report["known_model"] is False and report["model"] == "mystery-model-9"
    check_inspect_schema(report)
    lines = stderr_lines(err)
    assert len(lines) == 1 and "unknown model" in lines[0] and "mystery-model-9" in lines[0]


# --- bad input ----------------------------------------------------------------------


def _bad_input(kind: str, tmp_path: Path) -> Path:
    if kind in UNSUPPORTED_FIXTURES:
        return fixture_path(UNSUPPORTED_FIXTURES[kind])
    path = tmp_path / f"{kind}.jsonl"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "whitespace":
        path.write_bytes(b"\n  \n\t\n")
    elif kind == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    elif kind == "garbage":
        path.write_text("this is not json\n{nor is this\n]]]\n", encoding="utf-8")
    elif kind == "no-messages":
        write_jsonl(path, [{"type": "file-history-snapshot", "messageId": "x", "snapshot": {}}, "{broken"])
    elif kind == "missing":
        path = tmp_path / "does-not-exist.jsonl"
    elif kind == "directory":
        path = tmp_path / "a-directory"
        path.mkdir()
    elif kind == "truncated-export":  # an OpenCode export cut off before its first message
        path = tmp_path / "cut.json"
        path.write_bytes(fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"]).read_bytes()[:600])
    else:
        raise AssertionError(kind)
    return path


BAD_INPUTS = ["empty", "whitespace", "binary", "garbage", "no-messages", "missing", "directory", "truncated-export"]


@pytest.mark.parametrize("command", ["import", "inspect"])
@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_input_is_a_one_line_error(kind: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _bad_input(kind, tmp_path)
    db = tmp_path / "wb.db"
    code, out, err = _run(capsys, command, path, "--json", "--db", db)
    _assert_one_line_failure(code, out, err)
    assert out == ""
    if db.exists():  # nothing was stored for an unreadable input
        assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 0


@pytest.mark.parametrize("kind", ["binary", "garbage", "directory", "truncated-export"])
def test_bad_input_in_a_real_process(kind: str, tmp_path: Path) -> None:
    path = _bad_input(kind, tmp_path)
    result = run_cli(["import", path, "--db", tmp_path / "wb.db"], cwd=tmp_path)
    _assert_one_line_failure(result.returncode, result.stdout, result.stderr)


@pytest.mark.parametrize("key", list(UNSUPPORTED_FIXTURES))
def test_codex_and_opencode_fixtures_import_and_inspect(key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Once "recognised but not supported", these now import (details in test_import_codex/opencode)."""
    path = fixture_path(UNSUPPORTED_FIXTURES[key])
    db = tmp_path / "wb.db"
    code, out, err = _run(capsys, "import", path, "--json", "--db", db)
    assert code == 0, err
    assert json.loads(out)["messages"] > 0
    code, out, err = _run(capsys, "inspect", path, "--json", "--db", db)
    assert code == 0, err
    report = json.loads(out)
    assert report["format"] == key.split("-")[0]
    assert report["messages"] == json.loads(_run(capsys, "import", path, "--json", "--db", db)[1])["messages"]


def _partly_garbage(tmp_path: Path) -> Path:
    good = basic_conversation()
    return write_jsonl(tmp_path / "partly.jsonl", [good[0], "{oops", good[1], good[2], "not json at all", good[3], good[4]])


def test_some_garbage_lines_import_with_a_warning(tmp_path: Path) -> None:
    path = _partly_garbage(tmp_path)
    result = run_cli(["import", path, "--db", tmp_path / "wb.db"], cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("imported 4 messages · ") and " · 2 skipped lines · session cc-" in result.stdout
    assert len(result.stdout.splitlines()) == 1
    lines = stderr_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("warning:")
    assert "2, 5" in lines[0]
    assert "Traceback" not in result.stderr


def test_some_garbage_lines_listed_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _partly_garbage(tmp_path)
    code, out, _ = _run(capsys, "import", path, "--json", "--db", tmp_path / "wb.db")
    assert code == 0
    payload = json.loads(out)
    assert payload["messages"] == 4
    assert [s["line"] for s in payload["skipped_lines"]] == [2, 5]
    code, out, err = _run(capsys, "inspect", path, "--json", "--db", tmp_path / "wb.db")
    assert code == 0
    report = json.loads(out)
    check_inspect_schema(report)
    assert [s["line"] for s in report["skipped_lines"]] == [2, 5]
    code, out, err = _run(capsys, "inspect", path, "--db", tmp_path / "wb.db")
    assert code == 0 and "warning: skipped 2" in err


@pytest.mark.parametrize("problem", ["not-sqlite", "newer-schema", "directory"])
def test_unusable_database_is_a_one_line_error(problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    if problem == "not-sqlite":
        db.write_text("just some notes\n" * 100, encoding="utf-8")
    elif problem == "newer-schema":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE schema_version (version INTEGER)")
        conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 5,))
        conn.commit()
        conn.close()
    else:
        db.mkdir()
    before = db.read_bytes() if db.is_file() else None
    code, out, err = _run(capsys, "import", claude_fixture("short"), "--db", db)
    _assert_one_line_failure(code, out, err)
    if before is not None:
        assert db.read_bytes() == before


def test_bad_config_is_a_one_line_error_naming_the_key(workbench_home: Path, tmp_path: Path) -> None:
    (workbench_home / "config.toml").write_text("[budget]\nwarn = 'soon'\n", encoding="utf-8")
    result = run_cli(["inspect", claude_fixture("short"), "--db", tmp_path / "wb.db"], cwd=tmp_path)
    _assert_one_line_failure(result.returncode, result.stdout, result.stderr)
    assert "budget.warn" in result.stderr


def test_config_flag_changes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "custom.toml"
    config.write_text("[budget]\noutput_reserve = 50000\n", encoding="utf-8")
    code, out, _ = _run(capsys, "inspect", claude_fixture("short"), "--json", "--db", tmp_path / "wb.db", "--config", config)
    assert code == 0
    report = json.loads(out)
    assert (report["output_reserve"], report["effective_window"]) == (50_000, 150_000)
