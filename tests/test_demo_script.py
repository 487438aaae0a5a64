"""The bundled offline demo (``workbench run --scripted demo``): a realistic session that
reads plans, hits tool errors, offloads a large result, crosses the warn and compact
thresholds, fixes a real bug in its workspace and finishes, all without network.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workbench.engine.agent.runner import script_path
from workbench.engine.context.session import SessionContext
from workbench.engine.events import EventAdapter
from workbench.engine.providers.scripted import Script
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store

SCRIPT = script_path("demo")
WORKSPACE = SCRIPT.parent / "demo_workspace"
APPROVAL_TOOLS = {"shell", "write_file", "edit_file"}
FIXED_LINE = "base = subtotal(invoice) - discount(invoice)"


# --- running the demo ---------------------------------------------------------------


class DemoRun:
    """The demo played headless. ``workspace``: a copy of the demo's files passed with ``--workspace``, kept
    after the run so the tests can read what it changed; without it the run makes (and removes) its own."""

    def __init__(self, root: Path, *, yes: bool, workspace: bool = True) -> None:
        self.root = root
        self.db = root / "demo.db"
        self.tmp = tmp = root / "tmp"  # the per-run workspace copy lands here, not in the system temp dir
        tmp.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
        env.update(
            WORKBENCH_DATA_DIR=str(root / "data"),
            WORKBENCH_CONFIG=str(root / "config.toml"),
            TMPDIR=str(tmp),
        )
        command = [sys.executable, "-m", "workbench", "run", "--scripted", "demo", "--json", "--db", str(self.db)]
        if yes:
            command.append("--yes")
        if workspace:
            command += ["--workspace", str(shutil.copytree(WORKSPACE, root / "ws"))]
        self.proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=root)
        self.events: list[dict[str, Any]] = [json.loads(line) for line in self.proc.stdout.splitlines() if line.strip()]
        with Store(self.db) as store:
            sessions = store.list_sessions()
            assert len(sessions) == 1, sessions
            self.session = sessions[0][0]
            self.ctx = SessionContext.load(store, self.session.id, Config())
        self.messages: list[Message] = list(self.ctx.messages)
        self.workspace = Path(self.session.metadata["workspace"])

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def tool_results(self, name: str) -> list[ToolResultPart]:
        """Stored results of every call to tool ``name``, in order."""
        names = {p.id: p.name for m in self.messages for p in m.parts if isinstance(p, ToolUsePart)}
        return [p for m in self.messages for p in m.parts
                if isinstance(p, ToolResultPart) and names.get(p.tool_use_id) == name]


@pytest.fixture(scope="module")
def approved(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    return DemoRun(tmp_path_factory.mktemp("demo-yes"), yes=True)


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    return DemoRun(tmp_path_factory.mktemp("demo-no"), yes=False)


def last_script_text() -> str:
    script = Script.load(SCRIPT)
    return "".join(b["text"] for b in script.turns[-1].responses[-1] if "text" in b)


# --- the script and its workspace ----------------------------------------------------


def test_script_is_well_formed() -> None:
    script = Script.load(SCRIPT)
    assert (script.model, script.context_window, script.max_output) == ("scripted-demo", 14000, 4096)
    assert script.workspace == "demo_workspace"
    assert 2 <= len(script.turns) <= 4
    assert script.turns[0].user.startswith("[PERSIST]")
    blocks = [b for turn in script.turns for response in turn.responses for b in response]
    assert any("thinking" in b for b in blocks)
    streamed = sum(len(b.get("text", "")) + len(b.get("thinking", "")) for b in blocks)
    assert streamed < 25_000, "real-time playback must stay short"
    tools = {b["tool"] for b in blocks if "tool" in b}
    assert {"read_file", "list_files", "grep", "shell", "edit_file", "write_file", "todo_write"} <= tools


def test_workspace_files_are_small_except_the_sample_export() -> None:
    files = [p for p in WORKSPACE.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    large = [p for p in files if p.stat().st_size > 4096]
    assert [p.relative_to(WORKSPACE).as_posix() for p in large] == ["data/invoices_2024.csv"]
    assert 8_000 <= large[0].stat().st_size <= 12_000
    for required in ("AGENTS.md", "README.md", "docs/plan/01-vision.md", "docs/plan/03-architecture.md",
                     "docs/plan/phases.md", "docs/phases/phase_1/PROGRESS.md"):
        assert (WORKSPACE / required).is_file(), required


def test_workspace_ships_with_exactly_one_failing_test(tmp_path: Path) -> None:
    copy = shutil.copytree(WORKSPACE, tmp_path / "ws")
    proc = subprocess.run([sys.executable, "-m", "unittest", "-v"], cwd=copy, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "test_tax_applies_after_discount" in proc.stderr
    assert "FAILED (failures=1)" in proc.stderr


# --- the approved run ----------------------------------------------------------------


def test_demo_completes_offline(approved: DemoRun) -> None:
    assert approved.proc.returncode == 0, approved.proc.stderr
    for event in approved.events:  # every line is a typed engine event
        EventAdapter.validate_python(event)
    assert not approved.of_type("error")


def test_demo_events_show_warn_offload_compaction_and_errors(approved: DemoRun) -> None:
    assert any(w["kind"] == "warn" for w in approved.of_type("warning"))
    offloads = approved.of_type("offload")
    assert offloads and all(o["bytes"] > 4096 for o in offloads)
    starts, ends = approved.of_type("compaction_start"), approved.of_type("compaction_end")
    assert starts and ends and len(starts) == len(ends)
    assert all(e["error"] is None for e in ends)
    assert any(r["is_error"] for r in approved.of_type("tool_result"))
    # the session goes on after the first compaction and still finishes
    first_end = approved.events.index(ends[0])
    assert any(e["type"] == "tool_result" for e in approved.events[first_end:])


def test_demo_warns_before_it_compacts(approved: DemoRun) -> None:
    warn = next(i for i, e in enumerate(approved.events) if e["type"] == "warning" and e["kind"] == "warn")
    compaction = next(i for i, e in enumerate(approved.events) if e["type"] == "compaction_start")
    assert warn < compaction


def test_demo_ends_with_the_final_assistant_message(approved: DemoRun) -> None:
    final = last_script_text()
    messages = approved.of_type("message")
    assert messages[-1]["role"] == "assistant"
    assert approved.of_type("turn_end")[-1]["stop_reason"] == "end_turn"
    assert "".join(e["text"] for e in approved.of_type("text_delta")).endswith(final)
    last = approved.messages[-1]
    assert last.role == "assistant"
    assert last.text.strip() == final.strip()


def test_demo_tool_errors_are_the_scripted_ones(approved: DemoRun) -> None:
    errors = [e for e in approved.of_type("tool_result") if e["is_error"]]
    previews = " | ".join(e["preview"] for e in errors)
    assert "no such file" in previews  # docs/plan/02-requirements.md
    assert "occurs 2 times" in previews  # the ambiguous edit_file


def test_demo_repeats_an_identical_read(approved: DemoRun) -> None:
    reads = [json.dumps(e["input"], sort_keys=True) for e in approved.of_type("tool_call") if e["name"] == "read_file"]
    assert len(reads) > len(set(reads))


def test_demo_pins_the_persist_message(approved: DemoRun) -> None:
    first = approved.messages[0]
    assert first.role == "user" and first.source.get("persist_tag") is True
    assert not first.text.startswith("[PERSIST]")
    assert first.id in approved.ctx.overlay.pinned


def test_demo_really_fixes_the_workspace(approved: DemoRun) -> None:
    shells = [r for r in approved.tool_results("shell") if "unittest" in r.text or "Ran " in r.text]
    assert len(shells) >= 2
    assert shells[0].is_error and "FAILED (failures=1)" in shells[0].text
    assert not shells[-1].is_error
    assert "test_tax_applies_after_discount" in shells[-1].text and "\nOK" in shells[-1].text
    totals = (approved.workspace / "src/invoicer/totals.py").read_text(encoding="utf-8")
    assert FIXED_LINE in totals
    progress = (approved.workspace / "docs/phases/phase_1/PROGRESS.md").read_text(encoding="utf-8")
    assert "486.39" in progress
    # the bundled workspace itself is untouched
    assert FIXED_LINE not in (WORKSPACE / "src/invoicer/totals.py").read_text(encoding="utf-8")


def test_demo_compaction_frees_context(approved: DemoRun) -> None:
    ends = approved.of_type("compaction_end")
    assert ends[0]["after_tokens"] < ends[0]["before_tokens"]
    assert len(ends) == 1, "one compaction should be enough for this session"


# --- the run without --yes -----------------------------------------------------------


def test_demo_without_yes_refuses_shell_and_writes(refused: DemoRun) -> None:
    # It used to exit 0 as if the script's claimed fix had happened: the refusals are a failure, said once.
    assert refused.proc.returncode == 1, refused.proc.stderr
    [line] = [line for line in refused.proc.stderr.splitlines() if line.strip()]
    assert line.startswith("workbench: error: 8 tool calls refused") and "--yes" in line, line
    approvals = refused.of_type("approval")
    assert approvals and {a["name"] for a in approvals} == APPROVAL_TOOLS
    assert not any(a["approved"] for a in approvals)
    for name in APPROVAL_TOOLS:
        results = refused.tool_results(name)
        assert results and all(r.is_error and "did not approve" in r.text for r in results), name
    # nothing in the workspace changed, and the replay still reached its last message
    totals = (refused.workspace / "src/invoicer/totals.py").read_text(encoding="utf-8")
    assert FIXED_LINE not in totals
    last = refused.messages[-1]
    assert last.role == "assistant" and isinstance(last.parts[-1], TextPart)
    assert last.text.strip() == last_script_text().strip()


def test_the_temporary_workspace_copy_is_removed_when_the_run_ends(tmp_path: Path) -> None:
    run = DemoRun(tmp_path, yes=True, workspace=False)
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.workspace.parent == run.tmp and run.workspace.name.startswith("workbench-ws-")
    assert not run.workspace.exists()
    assert not list(run.tmp.glob("workbench-ws-*"))


def test_a_killed_runs_workspace_copy_is_removed_by_the_next_run(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env.update(WORKBENCH_DATA_DIR=str(tmp_path / "data"), WORKBENCH_CONFIG=str(tmp_path / "config.toml"),
               TMPDIR=str(tmp), FAULT_CHUNK_DELAY="0.05")  # slowed, so the kill lands mid-run
    child = Path(__file__).parent / "faults" / "fault_child.py"  # ``workbench ARGS``, optionally slowed

    def command(db: str) -> list[str]:
        return [sys.executable, str(child), "run", "--scripted", "demo", "--json", "--yes", "--db", str(tmp_path / db)]

    killed = subprocess.Popen(command("killed.db"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=tmp_path)
    assert killed.stdout is not None
    killed.stdout.readline()  # the run has started: its copy is made
    left = list(tmp.glob("workbench-ws-*"))
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert len(left) == 1 and left[0].exists(), "a SIGKILL leaves the copy behind"

    after = subprocess.run(command("next.db"), env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert not left[0].exists(), "the next run removed the killed run's copy"
    assert not list(tmp.glob("workbench-ws-*")), "and its own, as it ended"
