"""Secrets: the API key is never written anywhere the workbench writes.

A fake key is planted in the environment (``ANTHROPIC_API_KEY``) and a second one in a transcript's
content (the user pasted it). Then the headless commands run: a real ``workbench run`` child process
against the loopback API (its model asks the shell for ``env``, reads a file holding the content key,
tries ``/proc/self/environ``, starts a sub-agent), a run that crashes (an injected bug) and writes the
crash log, ``import``, ``export`` in every form, ``inspect``, ``sessions``, ``history``, ``compact``,
``compactions`` and ``watch``. Every artefact is then read as bytes: the database, its ``-wal`` (kept
by a connection held open) and ``-shm``, the log, the sub-agent output files, the exports, and every
command's stdout and stderr.

* The environment key appears in none of them.
* The content key may be in the database (it is the user's data) but not in any export made with the
  default redaction, nor in a report; ``--no-redact`` keeps it (proving the plant worked).

The README screenshots (``python -m workbench.tui.screenshots``) are scanned too in the full suite.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fault_support import COUNTERS, FULL, child_env, cli, in_process
from loopback_api import LoopbackAPI, Reply, text, tool_use

from workbench.engine.agent.loop import Agent

ENV_KEY = "sk-ant-api03-FAKEenvKEYdo-not-leak-7Qx2Lw9Zp4Rk8Tn1Vb6Ym3Hc5Jd0Fg-AA"
CONTENT_KEY = "sk-ant-api03-FAKEcontentKEYpasted-by-the-user-2Wq8Er5Ty1Ui7Op4As-BB"
CORES = {ENV_KEY: "7Qx2Lw9Zp4Rk8Tn1Vb6Ym3Hc5Jd0Fg", CONTENT_KEY: "2Wq8Er5Ty1Ui7Op4As"}
"""The random middle of each key: a partial leak (a prefix redacted, the rest kept) is a leak too."""
MODEL = "claude-sonnet-4-5"

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def leaks(data: bytes, key: str) -> bool:
    return key.encode() in data or CORES[key].encode() in data


def transcript(path: Path) -> Path:
    """A Claude Code transcript in which the user pasted a key, into text and into a tool's input."""
    records = [
        {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2025-06-01T10:00:00Z",
         "message": {"role": "user", "content": f"My key is {CONTENT_KEY}, please configure the client."}},
        {"type": "assistant", "uuid": "a1", "timestamp": "2025-06-01T10:00:05Z",
         "message": {"id": "msg_1", "role": "assistant", "model": MODEL,
                     "content": [{"type": "text", "text": "Writing the config."},
                                 {"type": "tool_use", "id": "t1", "name": "Write",
                                  "input": {"file_path": "config.env", "content": f"ANTHROPIC_API_KEY={CONTENT_KEY}",
                                            "api_key": CONTENT_KEY}}],
                     "usage": {"input_tokens": 100, "output_tokens": 20}}},
        {"type": "user", "uuid": "u2", "timestamp": "2025-06-01T10:00:06Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                  "content": f"wrote key {CONTENT_KEY}"}]}},
        {"type": "assistant", "uuid": "a2", "timestamp": "2025-06-01T10:00:09Z",
         "message": {"id": "msg_2", "role": "assistant", "model": MODEL,
                     "content": [{"type": "text", "text": f"Done: the client uses {CONTENT_KEY}."}],
                     "usage": {"input_tokens": 150, "output_tokens": 12}}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_api_key_is_in_no_artefact(api: LoopbackAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    db = tmp_path / "wb.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text(f"deploy notes\nkey: {CONTENT_KEY}\n")
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(data_dir))
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    outputs: dict[str, str] = {}

    # 1. A real child process: the key only in its environment.
    api.queue(
        Reply([text("Looking around."),
               tool_use("t1", "shell", {"command": "env; printenv ANTHROPIC_API_KEY; echo end"}),
               tool_use("t2", "read_file", {"path": "notes.txt"}),
               tool_use("t3", "read_file", {"path": "/proc/self/environ"}),
               tool_use("t4", "task", {"prompt": "Summarise notes.txt", "files": ["notes.txt"]})]),
        Reply([text("The notes hold deployment details.")]),  # the sub-agent
        Reply([text(f"Done. The notes mention {CONTENT_KEY}.")]),
    )
    env = child_env(ANTHROPIC_API_KEY=ENV_KEY, ANTHROPIC_BASE_URL=api.url, WORKBENCH_DATA_DIR=str(data_dir))
    run = cli(["run", "--db", db, "--model", MODEL, "--yes", "--json", "--workspace", ws,
               f"Check the notes; my key is {CONTENT_KEY}"], env=env)
    assert run.returncode == 0, run.stderr
    outputs["run stdout"], outputs["run stderr"] = run.stdout, run.stderr
    sent = {r.headers.get("x-api-key") or r.headers.get("authorization", "").partition(" ")[2]
            for r in api.message_requests}
    assert sent == {ENV_KEY}, "the child used the key from its environment"
    session_id = json.loads(run.stdout.splitlines()[0])["session_id"]
    held = sqlite3.connect(db)  # held open: the -wal file stays to be scanned
    held.execute("SELECT COUNT(*) FROM messages").fetchone()

    # 2. A crash (an injected bug in the tool loop) writes the log.
    async def boom(self: Agent, calls: object) -> None:
        raise RuntimeError("injected fault: a bug in the tool loop")

    monkeypatch.setattr(Agent, "_run_tools", boom)
    api.queue(Reply([tool_use("t9", "read_file", {"path": "notes.txt"})]))
    crash = in_process(["run", "--db", db, "--session", session_id, "--model", MODEL, "--yes", "--json",
                        "--workspace", ws, "once more"])
    assert crash.returncode == 1 and "internal error: RuntimeError" in crash.stderr, crash.stderr
    log = data_dir / "workbench.log"
    assert "injected fault" in log.read_text()
    outputs["crash stdout"], outputs["crash stderr"] = crash.stdout, crash.stderr
    monkeypatch.undo()
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(data_dir))
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)

    # 3. Everything else, on the run's session and on an imported transcript holding the content key.
    pasted = transcript(tmp_path / "pasted.jsonl")
    exports = tmp_path / "exports"
    exports.mkdir()
    commands: dict[str, list[str | Path]] = {
        "import": ["import", pasted, "--json"],
        "inspect": ["inspect", pasted],
        "inspect json": ["inspect", pasted, "--json"],
        "sessions": ["sessions", "--json"],
        "history": ["history", session_id],
        "compact": ["compact", session_id, "--apply", "--json"],
        "compactions": ["compactions", session_id, "--json"],
        "watch": ["watch", pasted, "--once", "--json"],
    }
    for target, name in ((pasted, "pasted"), (session_id, "run")):
        for fmt in ("markdown", "jsonl"):
            for projected in (False, True):
                label = f"{name}-{fmt}{'-projected' if projected else ''}"
                commands[f"export {label}"] = ["export", target, "--format", fmt, "-o", exports / label,
                                               *(["--projected"] if projected else [])]
                commands[f"export {label} stdout"] = ["export", target, "--format", fmt,
                                                      *(["--projected"] if projected else [])]
    commands["export unredacted"] = ["export", pasted, "--no-redact", "-o", tmp_path / "unredacted.md"]
    for name, args in commands.items():
        result = in_process([*args[:1], "--db", db, *args[1:]])
        assert result.returncode == 0, (name, result.stderr)
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = result.stdout, result.stderr

    # The scan.
    files = [p for p in tmp_path.rglob("*") if p.is_file() and ws not in p.parents and p != pasted]
    names = {p.name for p in files}
    assert {"wb.db", "wb.db-wal", "workbench.log"} <= names, names
    assert any("subagent-outputs" in p.parts for p in files), "the sub-agent wrote its output file"
    found_env: list[str] = []
    found_content: list[str] = []
    for path in files:
        data = path.read_bytes()
        if leaks(data, ENV_KEY):
            found_env.append(str(path.relative_to(tmp_path)))
        if leaks(data, CONTENT_KEY) and path.suffix not in (".db", ".db-wal") and not path.name.startswith("wb.db") \
                and path.name != "unredacted.md" and "subagent-outputs" not in path.parts:
            found_content.append(str(path.relative_to(tmp_path)))
    for name, output in outputs.items():
        if leaks(output.encode(), ENV_KEY):
            found_env.append(name)
        if leaks(output.encode(), CONTENT_KEY) and name.startswith(("export", "inspect")) \
                and "unredacted" not in name:
            found_content.append(name)
    stored = db.read_bytes() + (tmp_path / "wb.db-wal").read_bytes()
    held.close()
    COUNTERS.add(artefacts=len(files) + len(outputs))
    assert found_env == [], f"the environment's API key was written to: {found_env}"
    assert found_content == [], f"the pasted key was exported unredacted to: {found_content}"
    # The plant worked: the user's data keeps the pasted key, an explicit --no-redact export too.
    assert leaks((tmp_path / "unredacted.md").read_bytes(), CONTENT_KEY)
    assert leaks(stored, CONTENT_KEY)


@pytest.mark.skipif(not FULL, reason="slow (renders the TUI): WORKBENCH_FAULT_FULL=1")
def test_screenshots_hold_no_key(tmp_path: Path) -> None:
    out = tmp_path / "shots"
    env = child_env(ANTHROPIC_API_KEY=ENV_KEY, WORKBENCH_DATA_DIR=str(tmp_path / "data"))
    try:
        subprocess.run([sys.executable, "-m", "workbench.tui.screenshots", str(out)], env=env, capture_output=True,
                       timeout=180)
    except subprocess.TimeoutExpired:
        pass  # the TUI is another suite's concern: scan what was written
    shots = list(out.glob("*.svg")) if out.exists() else []
    if not shots:
        pytest.skip("the screenshot script wrote no SVG")
    COUNTERS.add(artefacts=len(shots))
    assert [s.name for s in shots if leaks(s.read_bytes(), ENV_KEY)] == []


PROXY_TOKEN = "wb-proxy-credential-Zp4Rk8Tn1Vb6Ym3Hc5Jd0"
"""A credential of no known shape: only the workbench's knowing its value can redact it."""
CORES[PROXY_TOKEN] = "Zp4Rk8Tn1Vb6Ym3Hc5Jd0"


def test_a_shell_command_reading_the_workbench_environment_leaks_no_key(api: LoopbackAPI, tmp_path: Path) -> None:
    """The approved shell reads ``/proc/$PPID/environ`` (the workbench's own, as it was at start-up: taking the
    key out of ``os.environ`` does not change it) and runs ``env``; the output is redacted before it is
    stored or sent, so the key is in no file the workbench wrote and no request body the API received."""
    data_dir = tmp_path / "data"
    db = tmp_path / "wb.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    api.queue(
        Reply([tool_use("t1", "shell", {"command": "tr '\\0' '\\n' < /proc/$PPID/environ; echo ---; env; "
                                                   "echo key=$ANTHROPIC_API_KEY token=$ANTHROPIC_AUTH_TOKEN"})]),
        Reply([tool_use("t2", "shell", {"command": "cat /proc/$PPID/environ | base64 -w0 | head -c 0; "
                                                   "grep -a ANTHROPIC /proc/$PPID/environ"})]),
        Reply([text("Nothing to see.")]),
    )
    env = child_env(ANTHROPIC_API_KEY=ENV_KEY, ANTHROPIC_AUTH_TOKEN=PROXY_TOKEN, ANTHROPIC_BASE_URL=api.url,
                    WORKBENCH_DATA_DIR=str(data_dir))
    run = cli(["run", "--db", db, "--model", MODEL, "--yes", "--json", "--workspace", ws, "Look around."], env=env)
    assert run.returncode == 0, run.stderr
    held = sqlite3.connect(db)  # held open: the -wal file stays to be scanned
    results = [row[0] for row in held.execute("SELECT body FROM parts WHERE kind = 'tool_result' ORDER BY rowid")]
    # The plant worked: the command did read the workbench's start-up environment, and it was redacted.
    assert "ANTHROPIC_API_KEY=[REDACTED" in results[0] and "ANTHROPIC_AUTH_TOKEN=[REDACTED" in results[0], results[0]
    assert "key= token=" in results[0], "the shell's own environment holds neither"
    files = [p for p in tmp_path.rglob("*") if p.is_file() and ws not in p.parents]
    assert {"wb.db", "wb.db-wal"} <= {p.name for p in files}
    found = [str(p.relative_to(tmp_path)) for p in files for key in (ENV_KEY, PROXY_TOKEN) if leaks(p.read_bytes(), key)]
    bodies = json.dumps(api.bodies)
    assert len(api.bodies) == 3 and "[REDACTED" in bodies
    found += [f"request body {key[:12]}…" for key in (ENV_KEY, PROXY_TOKEN) if leaks(bodies.encode(), key)]
    found += [f"{name} {key[:12]}…" for name, out in (("stdout", run.stdout), ("stderr", run.stderr))
              for key in (ENV_KEY, PROXY_TOKEN) if leaks(out.encode(), key)]
    held.close()
    COUNTERS.add(artefacts=len(files) + len(api.bodies) + 2)
    assert found == [], f"the workbench's key was written to: {found}"


def test_the_key_leaves_os_environ_once_the_client_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.engine.providers.anthropic import AnthropicProvider
    from workbench.engine.transcript import credentials

    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    monkeypatch.setenv("MY_COPY", ENV_KEY)  # `export MY_COPY=$ANTHROPIC_API_KEY` before starting the workbench
    AnthropicProvider(base_url="http://127.0.0.1:9")
    assert "ANTHROPIC_API_KEY" not in os.environ
    assert credentials.get("ANTHROPIC_API_KEY") == ENV_KEY, "a second client (a summariser) still finds it"
    AnthropicProvider(base_url="http://127.0.0.1:9")
    child = credentials.child_environment()
    assert ENV_KEY not in child.values() and "PATH" in child
