"""The collector's policy per command: an import runs with it paused (it makes no cycles, so nothing waits for
a collection) and leaves it as it was; other commands keep it running."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from helpers import claude_fixture

from workbench import cli, gc_policy
from workbench.engine.transcript import importers


def test_an_import_runs_with_the_collector_paused_and_puts_it_back(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = importers.import_file

    def watched(*args: object, **kwargs: object) -> importers.ParsedTranscript:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importers, "import_file", watched)
    assert gc.isenabled()
    assert cli.main(["import", str(claude_fixture("short")), "--json", "--db", str(tmp_path / "wb.db")]) == 0
    assert seen == [False]
    assert gc.isenabled()
    assert cli.main(["sessions", "--db", str(tmp_path / "wb.db")]) == 0 and gc.isenabled()


def test_paused_keeps_a_collector_that_was_off_off() -> None:
    gc.disable()
    try:
        with gc_policy.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), gc_policy.paused():
        raise RuntimeError("an import that fails")
    assert gc.isenabled()
