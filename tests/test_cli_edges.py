"""The command line's rough edges (issue 17): what a newcomer runs into in the first ten minutes.

Each case is one line of the issue: a bad target is refused before any full-screen app starts, a named
``--config`` or ``--db`` folder that is not there is an error naming it, configuration errors are one line,
and ``--version`` answers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import claude_fixture, run_cli, stderr_lines

from workbench.cli import main
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
    result = run_cli(["sessions", "--db", tmp_path / "wb.db"], cwd=tmp_path)
    line = _one_error_line(result.returncode, result.stdout, result.stderr)
    assert line.startswith(f"workbench: error: {says}"), line
    assert "ValidationError" not in line and "errors.pydantic.dev" not in line


def test_a_bad_config_file_still_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[budget]\nwarn = 2\n", encoding="utf-8")
    line = _one_error_line(*_run(capsys, "sessions", "--db", tmp_path / "wb.db", "--config", config))
    assert line.startswith(f"workbench: error: config {config}: budget.warn: ")


# --- --version ------------------------------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    result = run_cli(["--version"], cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"workbench {program_version()}\n"
