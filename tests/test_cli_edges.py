"""The command line's rough edges (issue 17): what a newcomer runs into in the first ten minutes.

Each case is one line of the issue: a bad target is refused before any full-screen app starts, a named
``--config`` or ``--db`` folder that is not there is an error naming it, configuration errors are one line,
``--version`` answers, and every number says what it is (a steered budget, the request table, titles).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest
from helpers import COMPACT_PRE_TOKENS, basic_conversation, cc_user, claude_fixture, run_cli, stderr_lines, write_jsonl

from workbench.cli import main, resolve
from workbench.engine.transcript.store import Store
from workbench.engine.version import program_version


def _run(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code: int, out: str, err: str) -> str:
    assert code != 0
    assert out == ""
    lines = stderr_lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("workbench: error: "), lines[0]
    assert "internal error" not in lines[0] and "Traceback" not in err
    return lines[0]


# --- open: the target is checked before the app starts ----------------------------------------


@pytest.mark.parametrize("kind", ["missing", "empty", "binary", "directory", "not-a-transcript"])
def test_open_refuses_a_bad_target_before_the_app_starts(kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.jsonl"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)))
    elif kind == "directory":
        path.mkdir()
    elif kind == "not-a-transcript":
        path.write_text('{"hello": "world"}\n', encoding="utf-8")
    db = tmp_path / "wb.db"
    # In a real process with its output piped, as `workbench open X | cat` runs: an app would hang here.
    result = run_cli(["open", path, "--db", db], cwd=tmp_path, timeout=30)
    line = _one_error_line(result.returncode, result.stdout, result.stderr)
    assert str(path) in line
    assert not db.exists(), "nothing is stored for a target that was refused"


def test_open_an_unknown_session_id_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    assert _run(capsys, "import", claude_fixture("short"), "--db", db)[0] == 0
    line = _one_error_line(*_run(capsys, "open", "cc-no-such-session", "--db", db))
    assert "cc-no-such-session: no such file, and no stored session with that id" in line


# --- --config and --db name things that must be there -------------------------------------------


def test_a_missing_config_file_named_on_the_command_line_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.toml"
    line = _one_error_line(*_run(capsys, "sessions", "--db", tmp_path / "wb.db", "--config", missing))
    assert line == f"workbench: error: config {missing}: no such file"


def test_the_default_config_file_may_be_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "sessions", "--db", tmp_path / "wb.db")  # conftest's WORKBENCH_CONFIG is absent
    assert code == 0, err


def test_a_db_in_a_missing_folder_is_an_error_and_no_folder_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "no" / "such" / "dir" / "x.db"
    line = _one_error_line(*_run(capsys, "import", claude_fixture("short"), "--db", db))
    assert str(db.parent) in line and "does not exist" in line
    assert not (tmp_path / "no").exists()


# --- configuration errors are one line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("WORKBENCH_BUDGET__WARN", "soon", "environment variable WORKBENCH_BUDGET__WARN: budget.warn: "),
        ("WORKBENCH_BUDGET__WARN", "0.99", "environment variable WORKBENCH_BUDGET__WARN: budget: "),
        ("WORKBENCH_BUDGET", "{not json", "environment (WORKBENCH_* variables): "),
    ],
)
def test_a_bad_environment_variable_is_one_line_naming_it(
    name: str, value: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    # `inspect`, which reads the settings: `sessions` starts without them (they are a third of start-up).
    result = run_cli(["inspect", claude_fixture("short"), "--db", tmp_path / "wb.db"], cwd=tmp_path)
    line = _one_error_line(result.returncode, result.stdout, result.stderr)
    assert line.startswith(f"workbench: error: {says}"), line
    assert "ValidationError" not in line and "errors.pydantic.dev" not in line


def test_a_bad_config_file_still_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[budget]\nwarn = 2\n", encoding="utf-8")
    line = _one_error_line(*_run(capsys, "sessions", "--db", tmp_path / "wb.db", "--config", config))
    assert line.startswith(f"workbench: error: config {config}: budget.warn: ")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom"])
def test_a_config_that_is_not_a_regular_file_is_refused_at_once(kind: str, tmp_path: Path) -> None:
    config = tmp_path / "pipe.toml"
    if kind == "fifo":
        os.mkfifo(config)  # no writer will ever come: reading it would wait forever
    else:
        config = Path(kind)
    result = run_cli(["inspect", claude_fixture("short"), "--db", tmp_path / "wb.db", "--config", config],
                     cwd=tmp_path, timeout=30)
    line = _one_error_line(result.returncode, result.stdout, result.stderr)
    assert line == f"workbench: error: config {config} is not a regular file (a pipe or a device); name a TOML file"


@pytest.mark.parametrize(("toml", "key"), [
    ('[prompt]\nmemory_files = ["a\\u0000b"]\n', "prompt.memory_files.0"),
    ('[proxy]\nupstream = "http://x\\u0000y"\n', "proxy.upstream"),
    ('["a\\u0000b"]\nc = 1\n', "'a\\x00b'"),
])
def test_a_nul_character_in_any_setting_is_one_line_naming_the_key(
    toml: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(toml, encoding="utf-8")
    line = _one_error_line(*_run(capsys, "inspect", claude_fixture("short"), "--db", tmp_path / "wb.db",
                                 "--config", config))
    assert line.startswith(f"workbench: error: config {config}: {key}"), line
    assert "embedded null" not in line and "internal error" not in line


# --- --version ------------------------------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    result = run_cli(["--version"], cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"workbench {program_version()}\n"


def test_the_version_is_the_installed_packages() -> None:
    """Read from the source, not from the package's metadata (slow to load): the two must be one."""
    assert program_version() == importlib.metadata.version("context-workbench")


# --- every number says what it is -------------------------------------------------------------------


def _budget(capsys: pytest.CaptureFixture[str], target: str | Path, db: Path) -> dict[str, object]:
    code, out, err = _run(capsys, "inspect", target, "--json", "--db", db)
    assert code == 0, err
    budget: dict[str, object] = json.loads(out)["budget"]
    return budget


def test_after_steering_inspect_says_calibrated_and_by_how_much(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "wb.db"
    session = _run(capsys, "import", claude_fixture("session-196820da"), "--db", db)[1].split()[-1]  # the id ends the line
    before = _budget(capsys, session, db)
    assert (before["source"], before["source_label"], before["steered"]) == ("reported", "reported by the API", 0)
    assert _run(capsys, "prune", session, "8", "--db", db)[0] == 0
    after = _budget(capsys, session, db)
    steered = int(str(after["steered"]))
    assert steered > 0 and after["source"] == "calibrated"
    assert after["reported"] == before["used"] and after["used"] == int(str(before["used"])) - steered
    assert after["source_label"] == f"calibrated: reported {before['used']:,} − {steered:,} steered since"
    code, out, _ = _run(capsys, "inspect", session, "--db", db)
    assert code == 0 and f"calibrated: reported {before['used']:,} − {steered:,} steered since" in out
    assert _run(capsys, "restore", session, "8", "--db", db)[0] == 0
    assert _budget(capsys, session, db) == before


def test_inspect_text_has_the_request_table_and_unwrapped_header(tmp_path: Path) -> None:
    path = claude_fixture("session-196820da")
    result = run_cli(["inspect", path, "--db", tmp_path / "wb.db"], cwd=tmp_path)  # piped: 80 columns
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "window 200,000 · output reserve 32,000 · effective window 168,000" in lines
    assert not any(line.rstrip().endswith(("effective", "·")) for line in lines), "a header wrapped mid-phrase"
    report = json.loads(run_cli(["inspect", path, "--json", "--db", tmp_path / "wb.db"], cwd=tmp_path).stdout)
    requests = report["requests"]
    title = next(line for line in lines if "Requests: reported vs estimated input" in line)
    assert f"({len(requests):,};" in title and "mean |error|" in title
    header = next(line for line in lines if "reported" in line and "estimated" in line and "error" in line
                  and "Requests:" not in line)
    assert header.index("reported") < header.index("estimated") < header.index("error")
    last = requests[-1]
    error = 100 * (last["estimated_input_tokens"] - last["reported_input_tokens"]) / last["reported_input_tokens"]
    row = next(line for line in lines if line.startswith(f"│ {len(requests):,} │"))  # the last row (ids are cut at 80)
    assert f"{last['reported_input_tokens']:,}" in row and f"{last['estimated_input_tokens']:,}" in row
    assert f"{error:+.1f}%" in row and last["model"] in row


def test_compaction_line_formats_both_numbers_alike(tmp_path: Path) -> None:
    result = run_cli(["inspect", claude_fixture("258c7280"), "--db", tmp_path / "wb.db"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"reported {COMPACT_PRE_TOKENS:,} tokens before" in result.stdout
    assert str(COMPACT_PRE_TOKENS) not in result.stdout


SECRET = "sk-ant-api03-" + "A1b2C3d4" * 6


def test_session_titles_are_redacted_like_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = basic_conversation()
    records[0] = cc_user("u1", f"use the key {SECRET} to list the files")
    path = write_jsonl(tmp_path / "secret.jsonl", records)
    db = tmp_path / "wb.db"
    assert _run(capsys, "import", path, "--db", db)[0] == 0
    code, out, _ = _run(capsys, "sessions", "--db", db)
    assert code == 0 and "use the key" in out and SECRET not in out and "REDACTED" in out
    code, out, _ = _run(capsys, "sessions", "--json", "--db", db)
    [row] = json.loads(out)
    assert SECRET not in row["title"] and "REDACTED" in row["title"]


def test_open_refuses_a_transcript_with_no_readable_message_before_the_app_starts(tmp_path: Path) -> None:
    """It looks like a Claude Code transcript, but nothing in it is a message: one line, not an app."""
    path = tmp_path / "nothing.jsonl"
    path.write_text('{"type": "user", "uuid": "x"}\n{"type": "progress"}\n', encoding="utf-8")
    result = run_cli(["open", path, "--db", tmp_path / "wb.db"], cwd=tmp_path, timeout=30)
    line = _one_error_line(result.returncode, result.stdout, result.stderr)
    assert str(path) in line and "no claude-code messages could be read" in line


def test_open_imports_a_good_transcript_once(tmp_path: Path) -> None:
    """Checked by importing it before the app starts; the app then opens the stored session as it is."""
    from workbench.commands._common import check_target

    db = tmp_path / "wb.db"
    check_target(db, str(claude_fixture("short")), None)
    with Store(db) as store:
        [(session, count)] = store.list_sessions()
        assert count > 0
        assert resolve(store, str(claude_fixture("short")), None)[0] == session.id
