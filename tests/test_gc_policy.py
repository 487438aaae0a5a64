"""The collector's policy per command: an import runs with it paused (it makes no cycles, so nothing waits for
a collection) and leaves it as it was; other commands keep it running. The app's modules load with it paused
and are frozen after."""

from __future__ import annotations

import gc
import subprocess
import sys
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


def test_loading_modules_collects_nothing_and_freezes_what_it_made() -> None:
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        frozen = gc.get_freeze_count()
        with gc_policy.loading_modules():
            assert not gc.isenabled()
            made = [[n] for n in range(3 * gc.get_threshold()[0])]  # enough to start a collection were it on
        assert collections == []
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.callbacks.remove(seen)
        gc.unfreeze()


def test_workbench_open_loads_the_apps_modules_frozen(tmp_path: Path) -> None:
    """In a process of its own (this one has the app loaded already): the command loads the app's modules
    before it looks for the session, and they end up out of the collector's way."""
    script = ("import gc, sys\n"
              "from workbench import cli\n"
              f"code = cli.main(['open', '--db', {str(tmp_path / 'wb.db')!r}, 'no-such-session'])\n"
              "print(code, 'workbench.tui.app' in sys.modules, gc.isenabled(), gc.get_freeze_count())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    code, loaded, enabled, frozen = done.stdout.split()
    assert (code, loaded, enabled) == ("1", "True", "True"), done.stderr
    assert int(frozen) > 50_000  # the app's modules are about 115,000 objects


def test_the_program_exits_with_the_commands_status_and_leaves_the_collector_nothing_to_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 3)
    monkeypatch.setattr(cli, "before_exit", lambda: calls.append("before_exit"))
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == 3
    assert calls == ["main", "before_exit"]


def test_python_m_workbench_is_the_program(tmp_path: Path) -> None:
    """``python -m workbench`` runs the program's exit (status included) after a real command."""
    from helpers import run_cli

    done = run_cli(["sessions", "--db", str(tmp_path / "wb.db")], tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    failed = run_cli(["inspect", "no-such-session", "--db", str(tmp_path / "wb.db")], tmp_path)
    assert failed.returncode == 1 and failed.stderr.startswith("workbench: error:")
