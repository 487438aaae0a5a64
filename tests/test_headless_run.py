"""``workbench run`` as a user runs it: a subprocess, the real SDK, a loopback Messages API.

The child process finds the API through ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``
only; the database is a file in the test's temporary directory, and conftest keeps
the data dir and config away from the user's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from loopback_api import Dropped, LoopbackAPI, Reply, text, tool_use, unauthorized

from workbench.engine import events as ev
from workbench.engine.transcript.store import Store

MODEL = "claude-sonnet-4-5"


def workbench(args: list[str], cwd: Path, api: LoopbackAPI | None, key: str | None = "test-key",
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
    if key is not None:
        env["ANTHROPIC_API_KEY"] = key
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def parse_events(stdout: str) -> list[ev.Event]:
    lines = stdout.splitlines()
    assert lines, "no output"
    return [ev.EventAdapter.validate_json(line) for line in lines]


def test_json_run_prints_parseable_events(api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    api.queue(Reply([text("Hello from the loopback.")], input_tokens=900, output_tokens=6))
    result = workbench(["run", "--db", str(db), "--model", MODEL, "--json", "hello"], workspace, api)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    events = parse_events(result.stdout)
    types = [e.type for e in events]
    assert types[0] == "message" and "turn_start" in types and types[-2:] == ["turn_end", "budget"]
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Hello from the loopback."
    [usage] = [e for e in events if isinstance(e, ev.UsageReported)]
    assert (usage.input_tokens, usage.output_tokens, usage.synthetic) == (900, 6, False)
    [session_id] = {e.session_id for e in events}

    [request] = api.message_requests
    assert request.body["model"] == MODEL and request.body["stream"] is True
    assert request.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello",
                                                                       "cache_control": {"type": "ephemeral"}}]}]
    assert "test-key" in (request.headers.get("x-api-key", ""), request.headers.get("authorization", "")[7:])
    with Store(db) as store:
        stored = store.load_messages(session_id)
    assert [(m.role, m.text) for m in stored] == [("user", "hello"), ("assistant", "Hello from the loopback.")]


def test_tools_are_refused_without_yes(api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    api.queue(Reply([tool_use("toolu_01", "write_file", {"path": "new.txt", "content": "hi"})]),
              Reply([text("I was not allowed to write.")]))
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--model", MODEL, "--json", "write new.txt"],
                       workspace, api)
    # The model could not do what was asked: that is a failure that says how to allow it (it exited 0).
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        ("workbench: error: 1 tool call refused (write_file): a headless run asks no one; "
        "run again with --yes to allow them")]
    events = parse_events(result.stdout)
    [approval] = [e for e in events if isinstance(e, ev.ApprovalNeeded)]
    assert (approval.name, approval.approved) == ("write_file", False)
    assert not (workspace / "new.txt").exists()
    [refusal] = [b for b in api.bodies[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert refusal["is_error"] is True


def test_refusals_are_shown_as_they_happen_in_text_mode(api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    api.queue(Reply([tool_use("toolu_01", "shell", {"command": "ls"})]), Reply([text("Could not run it.")]))
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--model", MODEL, "list files"], workspace, api)
    assert result.returncode == 1
    assert "! shell refused: not approved (add --yes to allow shell and write tools)" in result.stdout
    assert result.stderr.splitlines()[-1].startswith("workbench: error: 1 tool call refused (shell)")


def test_dropped_connection_is_retried_and_shown(api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    reply = Reply([text("Made it through.")])
    api.queue(Dropped(reply, after_events=4), reply)
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--model", MODEL, "hello"], workspace, api)
    assert result.returncode == 0, result.stderr
    assert "! retry 1 in " in result.stdout and "(connection: " in result.stdout
    assert result.stdout.rstrip().endswith("Made it through.")


def test_usage_error_exits_2(workspace: Path, tmp_path: Path) -> None:
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--scripted", "demo", "--model", MODEL, "hi"],
                       workspace, None)
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run.db").exists(), "a usage error touches nothing"


def test_rejected_key_exits_1_with_one_line(api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    api.queue(unauthorized())
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--model", MODEL, "--json", "hello"],
                       workspace, api, key="wrong-key")
    assert result.returncode == 1
    assert result.stderr.splitlines() == ["workbench: error: the API refused the key (401); check ANTHROPIC_API_KEY"]
    events = parse_events(result.stdout)
    assert isinstance(events[-1], ev.ErrorEvent) and "ANTHROPIC_API_KEY" in events[-1].message
    assert len(api.message_requests) == 1, "a refused key is not retried"


def test_rejected_key_in_text_mode_has_no_traceback(api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    api.queue(unauthorized())
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--model", MODEL, "hello"], workspace, api)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("workbench: error:")]
    assert errors == ["workbench: error: the API refused the key (401); check ANTHROPIC_API_KEY"]
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_key_exits_1_naming_the_variable(workspace: Path, tmp_path: Path) -> None:
    result = workbench(["run", "--db", str(tmp_path / "run.db"), "--model", MODEL, "hello"], workspace, None,
                       key=None)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("workbench: error: ") and "ANTHROPIC_API_KEY" in line
    assert result.stdout == ""
