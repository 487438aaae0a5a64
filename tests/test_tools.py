"""The built-in tools, run for real by the agent: confinement, the shell's timeout, output limits, offloading.

Confinement and the shell run through the real Agent with the scripted provider
(a small inline Script); offloading runs through the real Anthropic SDK against
the loopback Messages API, whose "model" reads the reference out of the request
and asks for slices of it, as a model would.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from loopback_api import LoopbackAPI, Reply, iter_blocks, text, tool_use

from workbench.engine import events as ev
from workbench.engine.agent.loop import Agent, approve_all
from workbench.engine.agent.runner import prepare_run
from workbench.engine.agent.tools.limits import OutputLimits, truncate
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.providers.scripted import Script, ScriptedProvider, ScriptTurn
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import Message, Session, ToolResultPart
from workbench.engine.transcript.store import Store

SECRET = "TOP SECRET: outside the workspace"

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``tmp/ws`` is the workspace; ``tmp/outside`` and ``tmp/x`` are not, and links lead there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (tmp_path / "x").write_text(SECRET + " (x)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "link_out").symlink_to(outside / "secret.txt")
    (ws / "dir_out").symlink_to(outside, target_is_directory=True)
    (ws / "zero").symlink_to("/dev/zero")
    os.mkfifo(ws / "fifo")
    return tmp_path


@dataclass
class Run:
    agent: Agent
    provider: ScriptedProvider
    events: list[ev.Event]
    store: Store

    def stored(self) -> list[Message]:
        return self.store.load_messages(self.agent.ctx.session.id)

    def results(self) -> list[ToolResultPart]:
        """Every stored tool result, in call order."""
        return [p for m in self.stored() for p in m.parts if isinstance(p, ToolResultPart)]


def run_script(store: Store, workspace: Path, *responses: list[dict[str, Any]], user: str = "go",
               limit: float = 30) -> Run:
    """One user turn through the real agent; the scripted model answers ``responses`` in order."""
    script = Script(name="tools", model="scripted-demo", turns=[ScriptTurn(user=user, responses=list(responses))])
    provider = ScriptedProvider(script)
    events: list[ev.Event] = []
    setup = prepare_run(store, Config(), session_id=None, scripted=None, model="scripted-demo", workspace=workspace,
                        approve=approve_all, on_event=events.append, provider=provider)
    asyncio.run(asyncio.wait_for(setup.agent.send(user), timeout=limit))  # a turn that blocks fails here
    return Run(setup.agent, provider, events, store)


def call(tool: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool": tool, "input": tool_input}


# --- confinement -------------------------------------------------------------------


def test_reads_outside_the_workspace_are_errors_and_the_session_goes_on(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(
        store, ws,
        [call("read_file", path="/etc/passwd"), call("read_file", path="../x"), call("read_file", path="link_out"),
         call("read_file", path="dir_out/secret.txt"), call("read_file", path=str(layout / "outside" / "secret.txt")),
         call("read_file", path="app.py")],
        [{"text": "I can only read app.py."}],
    )
    results = run.results()
    assert [r.is_error for r in results] == [True] * 5 + [False]
    for result in results[:5]:
        assert "outside the workspace" in result.text, result.text
    assert "return a + b" in results[5].text
    everything = json.dumps([m.model_dump(mode="json") for m in run.stored()])
    assert SECRET not in everything and "root:" not in everything
    # The model saw the errors as errors, and the turn finished normally.
    second = run.provider.requests[1].messages[-1]["content"]
    assert [b.get("is_error", False) for b in second] == [True] * 5 + [False]
    assert run.stored()[-1].text == "I can only read app.py."
    assert [e.stop_reason for e in run.events if isinstance(e, ev.TurnEnd)] == ["tool_use", "end_turn"]


def test_device_files_and_fifos_are_refused(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(store, ws, [call("read_file", path="zero"), call("read_file", path="fifo")],
                     [{"text": "ok"}], limit=20)
    zero, fifo = run.results()
    assert zero.is_error and "outside the workspace" in zero.text  # /dev/zero, through the link
    assert fifo.is_error and "not a regular file" in fifo.text  # opening it would block forever


def test_symlink_loops_and_unreadable_paths_are_tool_errors_and_the_run_goes_on(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    (ws / "loop").symlink_to("loop")
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    (ws / "locked").mkdir()
    (ws / "locked" / "inside.txt").write_text("hidden\n")
    (ws / "locked").chmod(0)
    try:
        run = run_script(
            store, ws,
            [call("read_file", path="loop"), call("read_file", path="a/inner.txt"), call("write_file", path="b",
             content="x"), call("edit_file", path="loop", old="x", new="y"), call("write_file", path="loop/new.txt",
             content="x"), call("list_files"), call("grep", pattern="add"), call("read_file", path="locked/inside.txt"),
             call("read_file", path="app.py")],
            [{"text": "done"}],
        )
    finally:
        (ws / "locked").chmod(0o755)
    results = run.results()
    assert [r.is_error for r in results[:5]] == [True] * 5, [r.text for r in results]
    assert all("symbolic link" in r.text for r in results[:5]), [r.text for r in results[:5]]
    assert not results[5].is_error and "app.py" in results[5].text
    assert not results[6].is_error and "app.py" in results[6].text
    if os.geteuid() != 0:  # root reads a mode-0 folder
        assert results[7].is_error
    assert "return a + b" in results[8].text
    assert run.stored()[-1].text == "done"


def test_writes_and_edits_outside_the_workspace_are_refused(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(
        store, ws,
        [call("write_file", path="../escape.txt", content="pwned"),
         call("write_file", path=str(layout / "abs.txt"), content="pwned"),
         call("write_file", path="link_out", content="pwned"),
         call("write_file", path="dir_out/new.txt", content="pwned"),
         call("edit_file", path="../x", old="TOP", new="pwned"),
         call("edit_file", path="link_out", old="TOP", new="pwned"),
         call("write_file", path="notes/inside.txt", content="fine")],
        [{"text": "done"}],
    )
    results = run.results()
    assert [r.is_error for r in results] == [True] * 6 + [False]
    for result in results[:6]:
        assert "outside the workspace" in result.text, result.text
    assert not (layout / "escape.txt").exists() and not (layout / "abs.txt").exists()
    assert not (layout / "outside" / "new.txt").exists()
    assert (layout / "outside" / "secret.txt").read_text() == SECRET + "\n"
    assert (layout / "x").read_text() == SECRET + " (x)\n"
    assert (ws / "notes" / "inside.txt").read_text() == "fine"
    assert run.stored()[-1].text == "done"


def test_listing_and_grep_do_not_follow_links_out(store: Store, layout: Path) -> None:
    ws = layout / "ws"
    run = run_script(store, ws, [call("list_files"), call("grep", pattern="TOP SECRET"),
                                 call("grep", pattern="SECRET", glob="dir_out/*"),
                                 call("grep", pattern="x", glob="../*")],
                     [{"text": "ok"}])
    listing, grep_all, grep_link, grep_up = run.results()
    assert listing.text.splitlines() == ["app.py"]
    assert grep_all.text == "no matches" and grep_link.text == "no matches"
    assert grep_up.is_error and "may not contain '..'" in grep_up.text


# --- shell --------------------------------------------------------------------------


def _group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of live processes in a process group, from /proc; zombies left out."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append((int(entry.name), state))
    return members


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see the process group")
def test_shell_timeout_kills_the_whole_process_group(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = run_script(store, ws, [call("shell", command="echo $$ > pgid.txt; sleep 30 & sleep 30", timeout=1)],
                     [{"text": "it timed out"}], limit=20)  # under 30 s: the sleeps were killed
    [result] = run.results()
    assert result.is_error and result.text == "command timed out after 1 s and was killed"
    pgid = int((ws / "pgid.txt").read_text())
    deadline = time.monotonic() + 20  # the sleeps would outlive it by far
    while _group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_members(pgid) == [], "a process of the timed-out command survived"
    assert run.stored()[-1].text == "it timed out"


def test_shell_reports_output_and_exit_code(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = run_script(store, ws, [call("shell", command="pwd; echo oops >&2; exit 3")], [{"text": "ok"}])
    [result] = run.results()
    assert result.is_error
    assert result.text == f"{ws.resolve()}\noops\n\n[exit code 3]"


# --- output limits (spec 003) ---------------------------------------------------------


NOTE = re.compile(r"\n\[output truncated: (\d+) lines, (\d+) characters in full\]$")


def test_default_limits_are_the_spec_defaults() -> None:
    assert OutputLimits() == OutputLimits(max_lines=2000, max_bytes=50 * 1024, max_chars=200 * 1024, mode="head_tail")


def test_output_within_the_limits_is_unchanged() -> None:
    ok = "\n".join(f"line {i}" for i in range(2000))
    assert truncate(ok) == ok


def test_too_many_lines_keeps_head_and_tail() -> None:
    lines = [str(i) for i in range(1, 5001)]
    out = truncate("\n".join(lines))
    note = NOTE.search(out)
    assert note and note.groups() == ("5000", str(len("\n".join(lines))))
    kept = out[: note.start()].split("\n")
    assert kept == [*lines[:1000], "... [3000 lines omitted] ...", *lines[-1000:]]


def test_head_mode_keeps_only_the_head() -> None:
    lines = [str(i) for i in range(1, 5001)]
    out = truncate("\n".join(lines), OutputLimits(mode="head"))
    assert out[: NOTE.search(out).start()].split("\n") == lines[:2000]  # type: ignore[union-attr]


def test_too_many_bytes_keeps_head_and_tail_within_50_kib() -> None:
    body = "<" + "a" * 149_998 + ">"
    out = truncate(body)
    note = NOTE.search(out)
    assert note and note.groups() == ("1", "150000")
    kept = out[: note.start()]
    assert len(kept.encode()) <= 50 * 1024
    assert kept.startswith("<aaa") and kept.endswith("aaa>") and "\n... [truncated] ...\n" in kept
    assert len(kept.encode()) > 40 * 1024, "the limit is used, not undercut by far"


def test_byte_limit_counts_utf8_bytes_not_characters() -> None:
    body = "é" * 40_000  # 40,000 characters, 80,000 bytes
    kept = truncate(body)
    kept = kept[: NOTE.search(kept).start()]  # type: ignore[union-attr]
    assert len(kept.encode()) <= 50 * 1024 < 80_000
    assert len(kept) < 40_000


def test_character_limit_applies_before_bytes() -> None:
    body = "H" * 50 + "m" * 400 + "T" * 50
    out = truncate(body, OutputLimits(max_chars=100, max_bytes=10_000))
    assert out[: NOTE.search(out).start()] == "H" * 50 + "\n... [truncated] ...\n" + "T" * 50  # type: ignore[union-attr]


def test_the_agent_stores_truncated_output(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = run_script(store, ws, [call("shell", command="seq 1 5000")], [{"text": "ok"}])
    [result] = run.results()
    assert "\n... [3002 lines omitted] ...\n" in result.text  # 5000 numbers, an empty line, the exit code
    assert result.text.startswith("1\n2\n3\n") and NOTE.search(result.text)
    assert result.text.count("\n") == 2001


# --- offloading large results (spec 001 §2) ---------------------------------------------


REFERENCE = re.compile(
    r'^\[Tool result stored — (?P<size>[\d,]+) bytes from "read_file"\.\n'
    r"First 200 chars: (?P<head>.*)\]\n"
    r'Use the "read_result" tool with ref_id="(?P<ref>[^"]+)" to read specific portions\.$',
    re.DOTALL,
)


def test_large_results_are_offloaded_and_read_back_in_slices(store: Store, tmp_path: Path, api: LoopbackAPI) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("".join(f"row {i:05d} of the big file\n" for i in range(400)))  # ~11 KB
    other = Session(id="s-someone-else", source_format="engine")
    store.save_session(other)
    store.save_blob(other.id, "r-foreign00001", "read_file", "FOREIGN SECRET")

    refs: list[str] = []

    def read_slices(body: dict[str, Any]) -> Reply:
        """The "model" finds the reference in the tool result it was sent and asks for pieces of it."""
        [result] = list(iter_blocks(body["messages"][-1:], "tool_result"))
        match = REFERENCE.match(result["content"])
        assert match, result["content"]
        refs.append(match["ref"])
        return Reply([tool_use("toolu_02", "read_result", {"ref_id": match["ref"], "offset": 100, "limit": 50}),
                      tool_use("toolu_03", "read_result", {"ref_id": match["ref"], "offset": 0, "limit": 8000}),
                      tool_use("toolu_04", "read_result", {"ref_id": "r-foreign00001"})])

    api.queue(Reply([tool_use("toolu_01", "read_file", {"path": "big.txt"})]), read_slices,
              Reply([text("Read it.")]))
    events: list[ev.Event] = []
    provider = AnthropicProvider(api_key="test-key", base_url=api.url, base_delay=0.01)
    setup = prepare_run(store, Config(), session_id=None, scripted=None, model="claude-sonnet-4-5", workspace=ws,
                        approve=approve_all, on_event=events.append, provider=provider)

    async def go() -> None:
        try:
            await setup.agent.send("Read big.txt")
        finally:
            await provider._client.close()

    asyncio.run(go())
    session_id = setup.agent.ctx.session.id
    stored = store.load_messages(session_id)
    full = next(p for m in stored for p in m.parts if isinstance(p, ToolResultPart) and p.tool_use_id == "toolu_01")
    # The transcript keeps the whole result; the blob holds the same text.
    assert full.text.count("of the big file") == 400
    [ref] = refs
    assert store.read_blob(session_id, ref) == full.text

    # What the model was sent: the spec's reference text, with the right size and preview.
    [sent] = list(iter_blocks(api.bodies[1]["messages"][-1:], "tool_result"))
    match = REFERENCE.match(sent["content"])
    assert match is not None
    assert int(match["size"].replace(",", "")) == len(full.text.encode())
    assert match["head"] == full.text[:200]
    assert [e.ref_id for e in events if isinstance(e, ev.Offloaded)] == [ref]
    view = setup.agent.ctx.view()
    item = next(i for i in view.items if any(isinstance(p, ToolResultPart) and p.tool_use_id == "toolu_01"
                                              for p in i.parts))
    assert "offloaded" in item.badges and item.parts[0].text == sent["content"]  # type: ignore[union-attr]

    # read_result: slices with offset/limit, never offloaded again, and only this session's blobs.
    results = {b["tool_use_id"]: b for b in iter_blocks(api.bodies[2]["messages"][-1:], "tool_result")}
    assert results["toolu_02"]["content"] == (
        full.text[100:150] + f"\n[{len(full.text) - 150} more characters; continue with offset=150]")
    assert results["toolu_03"]["content"] == full.text[:8000] + (
        f"\n[{len(full.text) - 8000} more characters; continue with offset=8000]")
    assert results["toolu_04"].get("is_error") is True
    assert results["toolu_04"]["content"] == "no stored result 'r-foreign00001' in this session"
    assert "FOREIGN SECRET" not in json.dumps(api.bodies)
    assert stored[-1].text == "Read it."


def test_small_results_stay_inline(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "small.txt").write_text("x" * 3000)
    run = run_script(store, ws, [call("read_file", path="small.txt")], [{"text": "ok"}])
    [result] = run.provider.requests[1].messages[-1]["content"]
    assert result["content"] == "     1\t" + "x" * 3000
    assert not [e for e in run.events if isinstance(e, ev.Offloaded)]
