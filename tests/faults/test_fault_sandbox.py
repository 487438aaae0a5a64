"""Tool sandboxing: what ``tests/test_tools.py`` does not already cover.

Covered there: ``..``, absolute paths, a symlinked file and directory leading out, ``/dev/zero`` through
a link, a FIFO, writes and edits through links, ``list_files`` / ``grep`` not following a linked
directory, the shell's timeout killing its process group. Added here, each through the real agent
(scripted model, real tools, real store), each ending with the turn finishing normally:

* paths the OS refuses (a NUL byte, an empty glob) are error results, not a crashed turn;
* a dangling symlink whose target is outside (a write would create the file there), a relative
  link that climbs out (``sub/up -> ../..``), ``/proc/self/environ``, ``/proc/self/root/…``,
  ``/dev/stdin``; an absolute path *inside* the workspace still works;
* ``list_files`` and ``grep`` with ``**`` over a linked directory, a symlink loop, and explicit
  patterns through the link;
* ``read_result`` only reads the session's own stored results: another session's reference, and
  references shaped like paths or SQL (``../x``, ``' OR 1=1 --``, ``%``) are errors naming the ref,
  and no file is read;
* the shell does not hand the workbench's API key to the commands it runs;
* a hard link to an outside file (``ln outside/secret.txt ws/hardlink``) is neither read (``read_file``,
  ``grep``, a sub-agent's ``files``) nor written (``write_file``, ``edit_file``);
* a directory swapped for a link leading out between the path check and the open is not followed.

Out of scope, and not guaranteed: the shell tool itself, which runs with the user's permissions after
approval and is not a sandbox.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent, approve_all
from workbench.engine.agent.runner import prepare_run
from workbench.engine.agent.tools.base import ToolContext, ToolError
from workbench.engine.agent.tools.confined import read_bytes, write_bytes
from workbench.engine.providers.scripted import Script, ScriptedProvider, ScriptTurn
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Message, ToolResultPart
from workbench.engine.transcript.store import Store

SECRET = "TOP SECRET: outside the workspace"
FAKE_KEY = "sk-ant-api03-FAKEsandboxKEY0123456789abcdefghijklmnopqrstuvwxyz-AAAA"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "sub" / "inner.txt").write_text("inner\n")
    (ws / "dangling").symlink_to(outside / "created-by-the-agent.txt")
    (ws / "sub" / "up").symlink_to("../..", target_is_directory=True)
    (ws / "dir_out").symlink_to(outside, target_is_directory=True)
    (ws / "loop").symlink_to(".", target_is_directory=True)
    return tmp_path


@dataclass
class Run:
    agent: Agent
    events: list[ev.Event]
    store: Store

    def stored(self) -> list[Message]:
        return self.store.load_messages(self.agent.ctx.session.id)

    def results(self) -> list[ToolResultPart]:
        return [p for m in self.stored() for p in m.parts if isinstance(p, ToolResultPart)]


def run_script(store: Store, workspace: Path, *responses: list[dict[str, Any]], session_id: str | None = None,
               limit: float = 30) -> Run:
    script = Script(name="sandbox", model="scripted-demo", turns=[ScriptTurn(user="go", responses=list(responses))])
    events: list[ev.Event] = []
    setup = prepare_run(store, Config(), session_id=session_id, scripted=None, model="scripted-demo",
                        workspace=workspace, approve=approve_all, on_event=events.append,
                        provider=ScriptedProvider(script))
    asyncio.run(asyncio.wait_for(setup.agent.send("go"), timeout=limit))
    return Run(setup.agent, events, store)


def call(tool: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool": tool, "input": tool_input}


def finished(run: Run) -> None:
    """The turn ended normally, after the model read every (error) result."""
    assert run.stored()[-1].role == "assistant" and run.stored()[-1].text == "done"
    assert [e.stop_reason for e in run.events if isinstance(e, ev.TurnEnd)][-1] == "end_turn"


def test_paths_the_os_refuses_are_error_results(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(store, ws, [
        call("read_file", path="app.py\x00../../outside/secret.txt"),
        call("write_file", path="notes\x00.txt", content="x"),
        call("edit_file", path="app.py\x00", old="a", new="b"),
        call("list_files", pattern=""),
        call("grep", pattern="def", glob=""),
        call("read_file", path="a" * 5000),
    ], [{"text": "done"}])
    results = run.results()
    assert [r.is_error for r in results] == [True] * 6, [r.text for r in results]
    assert "null byte" in results[0].text and "null byte" in results[1].text
    assert (ws / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    finished(run)


def test_links_and_special_files_that_lead_out_are_refused(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(store, ws, [
        call("write_file", path="dangling", content="pwned"),
        call("write_file", path="sub/up/outside/new.txt", content="pwned"),
        call("read_file", path="sub/up/outside/secret.txt"),
        call("read_file", path="/proc/self/environ"),
        call("read_file", path="/proc/self/root/etc/hostname"),
        call("read_file", path="/dev/stdin"),
        call("edit_file", path="dir_out/secret.txt", old="TOP", new="pwned"),
        call("read_file", path=str(ws / "sub" / "inner.txt")),  # absolute, but inside: fine
        call("read_file", path="loop/loop/app.py"),  # a loop that stays inside: fine
    ], [{"text": "done"}])
    results = run.results()
    assert [r.is_error for r in results] == [True] * 7 + [False, False], [r.text for r in results]
    for result in results[:7]:
        assert "outside the workspace" in result.text, result.text
    assert not (layout / "outside" / "created-by-the-agent.txt").exists()
    assert not (layout / "outside" / "new.txt").exists()
    assert (layout / "outside" / "secret.txt").read_text() == SECRET + "\n"
    stored = json.dumps([m.model_dump(mode="json") for m in run.stored()])
    assert SECRET not in stored
    finished(run)


def test_listing_and_grep_stay_inside_through_links_and_loops(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(store, ws, [
        call("list_files", pattern="**/*"),
        call("list_files", pattern="dir_out/**/*"),
        call("list_files", pattern="sub/up/**/*.txt"),
        call("grep", pattern="SECRET", glob="**/*"),
        call("grep", pattern="SECRET", glob="sub/up/outside/*"),
        call("grep", pattern="SECRET", glob="loop/**/*"),
    ], [{"text": "done"}], limit=20)
    listing, via_link, via_up, grep_all, grep_up, grep_loop = run.results()
    assert sorted(listing.text.splitlines()) == ["app.py", "sub/inner.txt"]
    assert via_link.text == "no files match"
    # Through sub/up (the workspace's parent) only what is inside the workspace is listed.
    assert via_up.text.splitlines() == ["sub/up/ws/sub/inner.txt"], via_up.text
    for result in (grep_all, grep_up, grep_loop):
        assert result.text == "no matches", result.text
    finished(run)


def test_read_result_reads_only_the_sessions_own_results(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    (ws / "big.txt").write_text("".join(f"line {i}: {'y' * 70}\n" for i in range(200)))
    first = run_script(store, ws, [call("read_file", path="big.txt")], [{"text": "done"}])
    [offload] = [e for e in first.events if isinstance(e, ev.Offloaded)]
    own = first.agent.ctx.session.id
    assert store.read_blob(own, offload.ref_id) is not None

    forged = [offload.ref_id, "../x", "' OR 1=1 --", "%", "*", "", "r-%", str(layout / "outside" / "secret.txt"),
              f"{offload.ref_id}' OR session_id != '"]
    other = run_script(store, ws, [call("read_result", ref_id=ref) for ref in forged], [{"text": "done"}])
    results = other.results()
    assert [r.is_error for r in results] == [True] * len(forged), [r.text for r in results]
    for ref, result in zip(forged, results, strict=True):
        assert result.text == f"no stored result {ref!r} in this session"
    stored = json.dumps([m.model_dump(mode="json") for m in other.stored()])
    assert "y" * 70 not in stored and SECRET not in stored
    # The owner still reads it, in slices.
    again = run_script(store, ws, [call("read_result", ref_id=offload.ref_id, limit=100)], [{"text": "done"}],
                       session_id=own)
    assert again.results()[-1].text.startswith("     1\tline 0: ")
    finished(other)


def test_the_shell_does_not_pass_on_the_api_key(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", FAKE_KEY + "-token")
    ws = tmp_path / "ws"
    ws.mkdir()
    run = run_script(store, ws, [call("shell", command="env; echo key=$ANTHROPIC_API_KEY")], [{"text": "done"}])
    [result] = run.results()
    assert "PATH=" in result.text and "key=\n" in result.text
    assert FAKE_KEY not in result.text
    assert os.environ["ANTHROPIC_API_KEY"] == FAKE_KEY, "the workbench's own environment is unchanged"
    finished(run)


def test_hard_links_to_outside_files_are_neither_read_nor_written(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    outside = layout / "outside" / "secret.txt"
    os.link(outside, ws / "hardlink")
    os.link(outside, ws / "sub" / "edit-me.txt")
    run = run_script(store, ws, [
        call("read_file", path="hardlink"),
        call("grep", pattern="SECRET", glob="**/*"),
        call("write_file", path="hardlink", content="pwned"),
        call("edit_file", path="sub/edit-me.txt", old="TOP", new="pwned"),
        call("task", prompt="Summarise hardlink", files=["hardlink"]),
        call("read_file", path="app.py"),
    ], [{"text": "The sub-agent saw no secret."}], [{"text": "done"}])
    results = run.results()
    read, grep, write, edit, task, fine = results
    assert [read.is_error, write.is_error, edit.is_error, fine.is_error] == [True, True, True, False]
    for result in (read, write, edit):
        assert "hard links" in result.text and "outside the workspace" in result.text, result.text
    assert grep.text == "no matches\n[2 file(s) with more than one hard link not searched]", grep.text
    assert outside.read_text() == SECRET + "\n", "the outside file was not written through the link"
    stored = json.dumps([m.model_dump(mode="json") for m in run.stored()])
    assert SECRET not in stored
    assert "hard links" in stored and task.text  # the sub-agent was told why the file was not read
    finished(run)


class SwappingContext(ToolContext):
    """Swaps ``ws/sub`` for a link to the outside folder right after each path check: the race in which
    a check by name and an open by name see different files."""

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        full = super().resolve(path, must_exist=must_exist)
        sub = self.workspace / "sub"
        if sub.is_dir() and not sub.is_symlink():
            sub.rename(self.workspace / "sub.moved")
            sub.symlink_to(self.workspace.parent / "outside", target_is_directory=True)
        return full


def test_a_link_swapped_in_after_the_check_is_not_followed(layout: Path) -> None:
    ws = layout / "ws"
    (layout / "outside" / "inner.txt").write_text(SECRET + "\n")
    ctx = SwappingContext(workspace=ws)
    with pytest.raises(ToolError, match="symbolic link on the way changed"):
        read_bytes(ctx, "sub/inner.txt", 1024, "too large")
    (ws / "sub").unlink()
    (ws / "sub.moved").rename(ws / "sub")
    with pytest.raises(ToolError, match="symbolic link on the way changed"):
        write_bytes(ctx, "sub/inner.txt", b"pwned")
    assert (layout / "outside" / "inner.txt").read_text() == SECRET + "\n"
