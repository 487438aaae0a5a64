"""docs/spec-conformance.md names, for every behaviour it lists, the test that checks it: every row that
says "as specified" names one, and every test it names exists (in the file it names, where it names one)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "spec-conformance.md"
NAME = re.compile(r"`(test_[a-z0-9_]+)`")


def _defined() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.update(re.findall(r"^\s*(?:async )?def (test_[a-z0-9_]+)", path.read_text(encoding="utf-8"), re.MULTILINE))
    return names


def _rows() -> list[str]:
    return [line for line in DOC.read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("| behaviour") and not line.startswith("|---")]


def test_every_row_that_says_as_specified_names_a_test() -> None:
    rows = _rows()
    assert len(rows) > 40
    unchecked = [row[:80] for row in rows if "as specified" in row and not NAME.search(row)]
    assert not unchecked, unchecked


def test_every_test_the_document_names_exists() -> None:
    named = {name for row in _rows() for name in NAME.findall(row)}
    missing = sorted(named - _defined())
    assert not missing, missing


def test_a_test_named_with_its_file_is_in_that_file() -> None:
    """``name`` (file.py): each name of the run of names before a file is in that file."""
    wrong = []
    for row in _rows():
        for run, file in re.findall(r"((?:`test_[a-z0-9_]+`(?:, )?)+)\s*\(([a-z0-9_]+\.py)\)", row.split("|")[-2]):
            text = (ROOT / "tests" / file).read_text(encoding="utf-8") if (ROOT / "tests" / file).exists() else ""
            wrong += [f"{name} ({file})" for name in NAME.findall(run) if not re.search(rf"def {name}\b", text)]
    assert not wrong, wrong
