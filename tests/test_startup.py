"""Start-up: listing sessions and the help load only what they use (the settings, the importers, sqlite-utils
and the app load when a command needs them), and the light name lists agree with what they name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.commands.steer import ACTION_HELP
from workbench.engine.plans.strategies.names import MANUAL_ACTIONS, STRATEGY_NAMES
from workbench.engine.plans.strategies.registry import STRATEGIES
from workbench.engine.transcript.formats import FOLLOWABLE
from workbench.engine.transcript.importers import PARSERS

HEAVY = ("workbench.engine.settings.config", "pydantic_settings", "workbench.engine.transcript.importers", "workbench.engine.context.session",
         "sqlite_utils", "textual", "workbench.tui.launch", "tiktoken")


def _loaded_after(argv: list[str], cwd: Path) -> set[str]:
    script = (
        "import json, sys\n"
        "from workbench.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=True)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["sessions"], ["--help"], ["sessions", "--json"]])
def test_listing_sessions_and_the_help_load_nothing_heavy(argv: list[str], tmp_path: Path) -> None:
    loaded = _loaded_after([*argv, "--db", str(tmp_path / "wb.db")] if argv[0] == "sessions" else argv, tmp_path)
    assert "workbench.cli" in loaded
    assert sorted(m for m in HEAVY if m in loaded) == []
    if argv[0] == "sessions":  # nothing to list: no model is built, so pydantic (0.15 s) never loads
        assert sorted(m for m in ("pydantic", "workbench.engine.transcript.models") if m in loaded) == []


def test_the_settings_load_pydantic_settings_only_when_a_variable_names_one(tmp_path: Path) -> None:
    """pydantic-settings (50-80 ms of every start) reads ``WORKBENCH_*`` settings; without one it never loads."""
    script = ("import sys\n"
              "from workbench.engine.settings.config import load_config\n"
              "print(load_config(None).budget.warn, 'pydantic_settings' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("WORKBENCH_")}
    runs = [subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           check=True, env={**env, **extra}).stdout.split()
            for extra in ({"WORKBENCH_DATA_DIR": str(tmp_path)}, {"WORKBENCH_BUDGET__WARN": "0.5"})]
    assert runs == [["0.7", "False"], ["0.5", "True"]]


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["import", "--help"]])
def test_the_help_and_the_version_load_no_models(argv: list[str], tmp_path: Path) -> None:
    """Nothing a command runs is loaded before it runs: the models (pydantic), the store and the version's
    package metadata wait for the command that needs them."""
    loaded = _loaded_after(argv, tmp_path)
    unwanted = ["pydantic", "workbench.engine.transcript.store", "platformdirs"]
    if argv != ["--version"]:
        unwanted.append("importlib.metadata")
    assert sorted(m for m in unwanted if m in loaded) == []


@pytest.mark.parametrize("fixture", ["short", "subagent"])
def test_an_import_loads_what_it_needs_and_counts_in_a_process_started_first(fixture: str, tmp_path: Path) -> None:
    """The counting process starts once, before the command modules and the models load (its vocabulary loads
    meanwhile), and this process then never loads tiktoken: every part was counted there (on one core there
    is no such process, and counting happens here)."""
    from helpers import claude_fixture

    script = (
        "import json, os, sys\n"
        "from workbench.engine.transcript import token_process\n"
        "start, seen = token_process.TokenProcess.start, {}\n"
        "def watched():\n"
        "    seen['models_loaded'] = 'pydantic' in sys.modules\n"
        "    seen['commands_loaded'] = 'workbench.commands.transcripts' in sys.modules\n"
        "    seen['starts'] = seen.get('starts', 0) + 1\n"
        "    seen['started'] = (process := start()) is not None\n"
        "    return process\n"
        "token_process.TokenProcess.start = watched\n"
        "from workbench.cli import main\n"
        f"main(['import', {str(claude_fixture(fixture))!r}, '--db', {str(tmp_path / 'wb.db')!r}])\n"
        "print(json.dumps([seen, sorted(sys.modules), os.cpu_count()]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=True)
    seen, modules, cpus = json.loads(done.stderr.strip().splitlines()[-1])
    loaded = set(modules)
    assert "workbench.engine.transcript.importers" in loaded
    # The store writes sessions, events and blobs with its own statements, and the sub-agents' peak inputs
    # (the "subagent" fixture starts some) are one plain query.
    assert "sqlite_utils" not in loaded
    # A Claude Code file is read by its own module: the other formats' readers are not loaded.
    assert sorted(m for m in loaded if m.rsplit(".", 1)[-1] in ("codex", "opencode", "opencode_files")) == []
    assert seen == {"models_loaded": False, "commands_loaded": False, "starts": 1, "started": cpus > 1}
    assert ("tiktoken" in loaded) == (cpus < 2)


def test_the_light_name_lists_match_what_they_name() -> None:
    assert STRATEGY_NAMES == tuple(STRATEGIES)
    assert MANUAL_ACTIONS == tuple(ACTION_HELP)
    assert set(FOLLOWABLE) <= set(PARSERS)


@pytest.mark.parametrize(("argv", "word"), [
    (["import", "f.jsonl", "--json"], "import"),
    (["--db", "import", "sessions"], "sessions"),  # a database file named "import"
    (["--config", "c.toml", "--db", "x.db", "import", "f"], "import"),
    (["--help"], None),
    ([], None),
])
def test_the_command_is_read_before_the_parser_exists(argv: list[str], word: str | None) -> None:
    from workbench.cli import _command_word

    assert _command_word(argv) == word


def test_the_app_loads_without_the_agent_and_the_compaction(tmp_path: Path) -> None:
    """Opening an imported or proxied session (no agent continues it) starts without the agent's modules or
    the compaction's: they load when a session the agent continues opens, or when the compaction is asked for.
    Nor the engine's events (only the agent and the compaction emit them), the scripted demo's provider, the
    session picker with its search for other agents' sessions, deleting sessions, or the keys' help, which loads
    every screen; nor the compaction pane, the modals the engine asks for (approval, plans, cache price, the
    compaction history), or syntax highlighting (Pygments): each waits for what needs it."""
    script = "import json, sys\nimport workbench.tui.app\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=True)
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "textual" in loaded
    later = ["workbench.engine.agent.loop", "workbench.engine.agent.runner", "workbench.engine.plans.compaction",
             "workbench.engine.events", "workbench.engine.agent.subagents", "workbench.engine.agent.tools",
             "workbench.engine.providers.scripted", "workbench.engine.transcript.sessions",
             "workbench.engine.sources.discovery", "workbench.tui.screens.sessions", "workbench.tui.screens.help",
             "workbench.tui.widgets.compaction_pane", "workbench.tui.screens.approval", "workbench.tui.screens.plans",
             "workbench.tui.screens.cache_price", "workbench.tui.screens.compactions", "rich.syntax", "pygments"]
    assert sorted(m for m in later if m in loaded) == []


def test_the_command_table_names_the_module_registering_each_command() -> None:
    import argparse

    from workbench.commands import COMMANDS, command_modules

    registered: dict[str, str] = {}
    for module in command_modules():
        def add(name: str, help_text: str, handler: object, module: str = module.__name__) -> argparse.ArgumentParser:
            registered[name] = module.rsplit(".", 1)[1]
            return argparse.ArgumentParser()

        module.register(add)
    assert registered == COMMANDS


@pytest.mark.parametrize(("argv", "commands"), [
    (["sessions", "--json"], ["sessions"]),
    (["--db", "open", "open", "x"], ["open"]),  # a database file named "open"
    (["import", "--help"], ["import"]),
    ([], []),
    (["--db", "x.db"], []),
    (["--help"], None),  # the help lists every command
    (["-h", "open"], None),
    (["bogus"], None),  # so does the error
])
def test_the_parser_holds_the_command_named_or_all_for_the_help(argv: list[str], commands: list[str] | None) -> None:
    from workbench.cli import _commands_parsed

    assert _commands_parsed(argv) == commands


def test_a_command_loads_only_its_own_module(tmp_path: Path) -> None:
    """Each module's imports and every command's parser took 40-55 ms of each start."""
    loaded = _loaded_after(["sessions", "--db", str(tmp_path / "wb.db")], tmp_path)
    assert sorted(m for m in loaded if m.startswith("workbench.commands.") and not m.startswith("workbench.commands._")) \
        == ["workbench.commands.transcripts"]
    everything = _loaded_after(["--help"], tmp_path)
    assert {"workbench.commands.app", "workbench.commands.steer", "workbench.commands.proxy"} <= everything


def test_opening_a_stored_session_loads_no_importer_planner_or_follower(tmp_path: Path) -> None:
    """``workbench open --db DB SESSION`` up to the session loaded (the command's checks, the app's modules, the
    engine's load, its budget and screen state) reads no transcript, so the importers stay unloaded; nor the
    plans, the planners, the measuring and pricing of a change (the first steering key loads them), the follower
    of a transcript or the providers. Nor does it build any model's validator: the default settings, the stored session and its budget
    are made without one."""
    from helpers import claude_fixture

    from workbench.engine.transcript.importers import import_file
    from workbench.engine.transcript.store import Store

    db = tmp_path / "wb.db"
    with Store(db) as store:
        session_id = import_file(store, claude_fixture("short")).session.id
    script = (
        "import json, sys\n"
        "from workbench.cli import main\n"
        "from workbench.commands import app as command\n"
        "def run(launch):\n"
        "    from workbench.tui.live import open_session\n"
        "    opened = open_session(launch, lambda *args: None, lambda event: None)\n"
        "    opened.ctx.budget()\n"
        "    from workbench.tui.screen_state import StateKeeper\n"
        "    StateKeeper().state(opened.ctx)\n"
        "    from pydantic import BaseModel\n"
        "    models, built = [BaseModel], []\n"
        "    while models:\n"
        "        model = models.pop()\n"
        "        models.extend(model.__subclasses__())\n"
        "        if model.__module__.startswith('workbench') and model.__pydantic_complete__:\n"
        "            built.append(model.__name__)\n"
        "    print(json.dumps([opened.ctx.session.id, sorted(sys.modules), built]), file=sys.stderr)\n"
        "    return 0\n"
        "command.run = run\n"
        f"main(['open', '--db', {str(db)!r}, {session_id!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=True)
    opened, loaded, built = json.loads(done.stderr.strip().splitlines()[-1])
    assert opened == session_id
    assert built == []  # no model's validator: the process's first loads pydantic's plugins (55 ms)
    later = ["workbench.engine.transcript.importers", "workbench.engine.sources.watch", "workbench.engine.plans.plan",
             "workbench.engine.plans.measure",
             "workbench.engine.plans.edit_price", "workbench.engine.plans.strategies.registry",
             "workbench.engine.plans.strategies.base", "workbench.engine.providers.base"]
    assert sorted(m for m in later if m in loaded) == []
