"""Sub-agents (spec 000 §4): the ``task`` tool's sub-agent gets the plan, the [PERSIST] messages and the
task (or only the task when fresh); its answer comes back inline and is saved to a file."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from loopback_api import ErrorResponse, LoopbackAPI, text, tool_use
from prompt_harness import (
    MODEL,
    Run,
    breakpoints,
    done,
    reply,
    section,
    start,
    system_texts,
)

from workbench.engine import events as ev
from workbench.engine.agent.loop import approve_all
from workbench.engine.agent.prompt import BASE_INSTRUCTIONS
from workbench.engine.agent.runner import prepare_run
from workbench.engine.agent.subagents import SUBAGENT_NOTE, cleanup_outputs
from workbench.engine.agent.tools import builtin_tools
from workbench.engine.providers.scripted import Script, ScriptedProvider, ScriptTurn
from workbench.engine.settings.config import Config
from workbench.engine.settings.sections import SubagentsConfig
from workbench.engine.transcript.store import Store

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

SUB_INSTRUCTIONS = f"{BASE_INSTRUCTIONS}\n\n{SUBAGENT_NOTE}"
FIRST = "/implement 1 Constraint: money stays in integer cents."
TASK = "Check src/totals.py for float arithmetic and report each line."

CACHE_MARK = {"cache_control": {"type": "ephemeral"}}
"""The mark on a request's last message: each step reads the ones before it from the cache."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "docs" / "plan").mkdir(parents=True)
    (ws / "docs" / "plan" / "01-vision.md").write_text("# Vision\n\nInvoices that add up.\n")
    (ws / "docs" / "phases" / "phase_1" / "plan").mkdir(parents=True)
    (ws / "docs" / "phases" / "phase_1" / "plan" / "plan.md").write_text("# Phase 1: Totals\n\nFix rounding.\n")
    (ws / "AGENTS.md").write_text("Parent-only rules.\n")
    (ws / "src").mkdir()
    (ws / "src" / "totals.py").write_text("def total(x):\n    return x * 1.0\n")
    return ws


def task_call(tool_id: str = "toolu_task", **fields: Any) -> dict[str, Any]:
    return tool_use(tool_id, "task", {"prompt": TASK, "agent": "reviewer", **fields})


def pinned_run(store: Store, api: LoopbackAPI, workspace: Path, *sub_and_after: Any) -> Run:
    """[PERSIST] first message, then a turn in which the parent calls ``task``."""
    api.queue(reply(text("Understood: cents only.")), *sub_and_after)
    run = start(store, api, workspace)
    run.send(f"[PERSIST] {FIRST}", "Have a sub-agent review the totals.")
    return run


def tool_result(body: dict[str, Any]) -> dict[str, Any]:
    [block] = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    return block


def test_default_context_is_the_plan_the_persist_messages_and_the_task(
    store: Store, api: LoopbackAPI, workspace: Path, workbench_home: Path
) -> None:
    run = pinned_run(store, api, workspace, reply(task_call()), done("Line 2 multiplies by 1.0."), done("Fixed."))
    parent_first, parent_task, sub, parent_after = run.bodies
    [plan] = section(parent_task, run.provider.calls[1], "project")
    # The sub-agent's request: its instructions, the parent's plan section, one user message.
    assert system_texts(sub) == [SUB_INSTRUCTIONS, plan]
    assert breakpoints(sub)[0] == [0, 1]
    assert "Parent-only rules." not in str(sub["system"]), "AGENTS.md is not part of what a sub-agent gets"
    assert sub["messages"] == [{"role": "user", "content": [{"type": "text", "text": (
        "<preserved_messages>\n"
        f'<message role="user">\n{FIRST}\n</message>\n'
        '<message role="assistant">\nUnderstood: cents only.\n</message>\n'
        "</preserved_messages>\n\n"
        f"<task>\n{TASK}\n</task>"), **CACHE_MARK}]}]
    sub_tools = [t["name"] for t in sub["tools"]]
    assert sub_tools == [n for n in builtin_tools().tools if n != "task"], "no sub-agents of sub-agents"
    # The parent gets the answer inline, and where it was saved.
    result = tool_result(parent_after)
    match = re.fullmatch(r"Line 2 multiplies by 1\.0\.\n\n\[Sub-agent (t-\w+) \(reviewer, session (s-\w+)\) "
                         r"finished; full output saved to (.+\.md)\]", result["content"])
    assert match, result["content"]
    task_id, sub_session_id, path = match.groups()
    parent = run.agent.ctx.session
    assert Path(path) == workbench_home / "data" / "subagent-outputs" / parent.id / f"{task_id}.md"
    saved = Path(path).read_text()
    for piece in (f"# Sub-agent task {task_id}", "- Agent: reviewer", f"- Model: {MODEL}", "- Status: completed",
                  f"## Task prompt\n\n{TASK}", "## Output\n\nLine 2 multiplies by 1.0.", "- Started: 20"):
        assert piece in saved, piece
    # Its own session, tied to the parent's message and tool call; DCP off.
    session = store.get_session(sub_session_id)
    assistant = [m for m in run.agent.ctx.messages if m.role == "assistant"][1]
    assert session.metadata["parent_session"] == parent.id
    assert session.metadata["parent_message"] == assistant.id
    assert session.metadata["parent_tool_use_id"] == "toolu_task"
    assert session.metadata["subagent"] is True
    sub_agent = run.setup.agent.tools.tools["task"].launcher.last  # type: ignore[attr-defined]
    assert sub_agent.settings.is_subagent and not run.agent.settings.is_subagent
    assert [m.role for m in store.load_messages(sub_session_id)] == ["user", "assistant"]
    assert parent_first["system"] == parent_task["system"]


def test_fresh_gives_only_the_prompt(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    run = pinned_run(store, api, workspace, reply(task_call(fresh=True)), done("ok"), done("done"))
    sub = run.bodies[2]
    assert system_texts(sub) == [SUB_INSTRUCTIONS]
    assert sub["messages"] == [{"role": "user", "content": [{"type": "text", "text": TASK, **CACHE_MARK}]}]


def test_recent_tool_calls_chosen_outputs_and_files(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(
        reply(tool_use("toolu_a", "list_files", {"pattern": "src/*"})),
        reply(tool_use("toolu_b", "grep", {"pattern": "1.0"})),
        reply(task_call(fresh=True, recent_tool_calls=1, tool_outputs=["toolu_a", "toolu_nope"],
                        files=["src/totals.py", "../outside.txt"])),
        done("Looked."),
        done("Thanks."),
    )
    run = start(store, api, workspace)
    run.send("Look around, then delegate")
    [message] = run.bodies[3]["messages"]
    assert message["content"][0]["text"] == (
        "<recent_tool_calls>\n"
        '<tool_call id="toolu_b" name="grep">\ninput: {"pattern": "1.0"}\nresult:\nsrc/totals.py:2: return x * 1.0\n'
        "</tool_call>\n</recent_tool_calls>\n\n"
        '<tool_output id="toolu_a" name="list_files">\nsrc/totals.py\n</tool_output>\n'
        '<tool_output id="toolu_nope">\n(no tool output with this id in the session)\n</tool_output>\n\n'
        '<file path="src/totals.py">\ndef total(x):\n    return x * 1.0\n\n</file>\n'
        '<file path="../outside.txt">\n(not read: ../outside.txt: outside the workspace; only files under the '
        "workspace can be used)\n</file>\n\n"
        f"<task>\n{TASK}\n</task>")


def test_a_failing_sub_agent_is_an_error_result_and_the_parent_goes_on(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    run = pinned_run(store, api, workspace, reply(task_call()),
                     ErrorResponse(400, "invalid_request_error", "the sub-agent's request was refused"),
                     done("I'll do it myself."))
    result = tool_result(run.bodies[-1])
    assert result["is_error"] is True
    assert "failed:" in result["content"] and "the sub-agent's request was refused" in result["content"]
    assert "full output saved to" in result["content"]
    assert any(w.startswith("sub-agent t-") for w in run.warnings())
    assert run.agent.ctx.messages[-1].text == "I'll do it myself."


def test_the_scripted_provider_replays_the_sub_agents_responses_in_order(store: Store, workspace: Path) -> None:
    script = Script(name="delegate", model="scripted-demo", turns=[ScriptTurn(user="Delegate it", responses=[
        [{"tool": "task", "input": {"prompt": "Say hello", "fresh": True}}],
        [{"text": "Hello from the sub-agent."}],
        [{"text": "The sub-agent said hello."}],
    ])])
    provider = ScriptedProvider(script)
    setup = prepare_run(store, Config(), session_id=None, scripted=None, model="scripted-demo", workspace=workspace,
                        approve=approve_all, provider=provider)
    asyncio.run(setup.agent.send("Delegate it"))
    sub_request = provider.requests[1]
    assert sub_request.messages == [{"role": "user", "content": [{"type": "text", "text": "Say hello", **CACHE_MARK}]}]
    results = [p for m in setup.agent.ctx.messages for p in m.tool_results()]
    assert results[0].text.startswith("Hello from the sub-agent.\n\n[Sub-agent t-")
    assert setup.agent.ctx.messages[-1].text == "The sub-agent said hello."
    sessions = [s for s, *_ in store.list_sessions()]
    assert sorted(bool(s.metadata.get("subagent")) for s in sessions) == [False, True]


def test_old_outputs_are_removed_when_a_run_starts(store: Store, workspace: Path, tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    old = root / "s-old" / "t-1.md"
    recent = root / "s-new" / "t-2.md"
    for path in (old, recent):
        path.parent.mkdir(parents=True)
        path.write_text("x")
    forty_days = time.time() - 40 * 86400
    os.utime(old, (forty_days, forty_days))
    events: list[ev.Event] = []
    config = Config(subagents=SubagentsConfig(output_dir=str(root)))
    prepare_run(store, config, session_id=None, scripted=None, model=MODEL, workspace=workspace,
                on_event=events.append, provider=ScriptedProvider(Script(name="x", turns=[])))
    assert not old.exists() and not old.parent.exists()
    assert recent.exists()
    assert cleanup_outputs(root, None) == (0, [])
    assert not [e for e in events if isinstance(e, ev.Warning)]


@pytest.mark.parametrize("on", [True, False])
def test_dcp_runs_in_a_sub_agent_when_asked(store: Store, api: LoopbackAPI, workspace: Path, on: bool) -> None:
    """``[strategies.dcp] subagents = true``: the sub-agent's later requests carry its early duplicate read
    pruned (its steps are its turns); off by default, the sub-agent's requests are left as they were."""
    (workspace / "src" / "big.py").write_text("".join(f"value_{n} = {n}\n" for n in range(150)))  # under the offload threshold
    read = {"path": "src/big.py"}
    steps = [reply(tool_use("toolu_r0", "read_file", read))]
    steps += [reply(tool_use(f"toolu_g{n}", "grep", {"pattern": f"value_{n}"})) for n in range(7)]
    steps += [reply(tool_use("toolu_r1", "read_file", read)), done("Read it twice."), done("Thanks.")]
    api.queue(reply(task_call(fresh=True)), *steps)
    config = Config.model_validate({"strategies": {"automatic_from": 0, "dcp": {"subagents": on}}})
    run = start(store, api, workspace, config)
    run.send("Delegate the reading")
    last_sub = run.bodies[-2]  # the sub-agent's final request, before the parent's
    results = {b["tool_use_id"]: b["content"] for m in last_sub["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"}
    assert "value_149" in str(results["toolu_r1"])
    assert ("value_149" not in str(results["toolu_r0"])) is on
