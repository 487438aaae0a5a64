"""Fork: an imported session continued as an engine session, starting from what its model saw."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    UNSUPPORTED_FIXTURES,
    basic_conversation,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    fixture_path,
    text_block,
    tool_use_block,
    write_jsonl,
)
from loopback_api import LoopbackAPI, Reply, text

from workbench.cli import main
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.sources.fork import NO_RESULT, fork_session, plan_fork
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import ThinkingPart, ToolResultPart
from workbench.engine.transcript.store import Store

MODEL = "claude-sonnet-4-5"


def check_wire(messages: Sequence[Mapping[str, Any]]) -> None:
    """What the Messages API insists on: user first, roles alternate, every tool_use answered next."""
    assert messages and messages[0]["role"] == "user"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"]
    for i, message in enumerate(messages):
        calls = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
        results = {b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"}
        if results:
            previous = messages[i - 1]
            assert results <= {b["id"] for b in previous["content"] if b["type"] == "tool_use"}
        if calls:
            answered = {b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"} \
                if i + 1 < len(messages) else set()
            assert calls <= answered, f"unanswered tool calls in message {i}"
        for block in message["content"]:
            assert block["type"] != "thinking" or block["signature"], "unsigned thinking cannot be sent back"


def _import(store: Store, path: Path) -> SessionContext:
    return SessionContext.load(store, import_file(store, path).session.id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "wb.db") as s:
        yield s


def test_fork_of_an_opencode_session_starts_from_its_view(store: Store) -> None:
    source = _import(store, fixture_path(UNSUPPORTED_FIXTURES["opencode-hidden-moon"]))
    result = fork_session(store, source.session.id)
    forked = SessionContext.load(store, result.session.id)
    assert forked.session.source_format == "engine"
    origin = forked.session.metadata["forked_from"]
    assert origin["session"] == source.session.id and origin["format"] == "opencode"
    assert origin["directory"] == "/Users/alex/repos/vfp/dark-factory"
    assert forked.session.model is None, "gpt-5.3-codex is not something the engine can run"
    # Same messages in the same order (minus the ones that held only reasoning), same ids.
    view_ids = [i.message_id for i in source.view().items if i.kind == "message"]
    forked_ids = [m.id for m in forked.messages]
    assert forked_ids == [i for i in view_ids if i in set(forked_ids)]
    assert len(forked_ids) == len(view_ids) - result.changes.get("empty_messages", 0)
    # Pruned results are the placeholder itself now: the fork does not bring them back.
    results = [p for m in forked.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert sum(p.text == PRUNED_PLACEHOLDER for p in results) == 31
    assert forked.events == [] and not forked.overlay.pruned
    assert all(m.usage is None and m.model is None for m in forked.messages)
    assert not any(isinstance(p, ThinkingPart) for m in forked.messages for p in m.parts)
    assert result.changes["thinking"] == 94
    check_wire(forked.view().wire)
    assert forked.view().total < source.view().total


def test_fork_of_claude_code_keeps_pins_and_repairs_calls(store: Store, tmp_path: Path) -> None:
    records = [
        *basic_conversation(),
        cc_user("u3", "[PERSIST] Always run the tests with -x."),
        cc_assistant("a4", "msg_03", [text_block("Noted."), tool_use_block("toolu_9", "Bash", {"command": "pytest -x"})],
                     cc_usage(5, 20, 100, 3000)),
    ]  # the session stops before the last call's result
    source = _import(store, write_jsonl(tmp_path / "cc.jsonl", records))
    assert {"u3", "msg_03"} <= source.overlay.pinned
    result = fork_session(store, source.session.id, model=MODEL)
    forked = SessionContext.load(store, result.session.id)
    assert forked.overlay.pinned == {"u3", "msg_03"}
    assert forked.session.model == MODEL
    last = forked.messages[-1]
    assert last.kind == "tool_result" and last.tool_results()[0].text == NO_RESULT
    assert result.changes == {"missing_results": 1}
    check_wire(forked.view().wire)


def test_fork_of_codex_leaves_out_its_system_prompt(store: Store) -> None:
    source = _import(store, fixture_path(UNSUPPORTED_FIXTURES["codex"]))
    result = plan_fork(source)
    assert result.changes["system_messages"] == 1
    assert all(m.role != "system" for m in result.messages)
    forked = SessionContext(result.session, result.messages, result.events)
    check_wire(forked.view().wire)


def test_fork_after_a_compaction_starts_at_the_summary(store: Store) -> None:
    source = _import(store, claude_fixture("258c7280"))
    result = plan_fork(source)
    first = result.messages[0]
    assert first.kind == "summary" and first.role == "user"
    forked = SessionContext(result.session, result.messages, result.events)
    check_wire(forked.view().wire)


def test_cli_fork_then_run_continues_with_the_forked_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    path = fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"])
    assert main(["fork", str(path), "--json", "--db", str(db)]) == 0
    out, _ = capsys.readouterr()
    payload = json.loads(out)
    new_id = payload["session_id"]
    assert payload["forked_from"].startswith("oc-") and payload["messages"] > 0
    with Store(db) as s:
        expected = list(SessionContext.load(s, new_id).view().wire)

    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    with LoopbackAPI() as api:
        api.queue(Reply([text("Continuing from the fork.")], input_tokens=9000, output_tokens=5))
        env.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key")
        result = subprocess.run(
            [sys.executable, "-m", "workbench", "run", "--db", str(db), "--session", new_id, "--model", MODEL,
             "--json", "What is left to do?"],
            cwd=workspace, env=env, capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        [body] = api.bodies
    sent = body["messages"]
    check_wire(sent)
    assert body["model"] == MODEL
    # The request is the forked context plus the new prompt.
    assert sent[: len(expected) - 1] == expected[:-1]
    assert sent[-1]["content"][-1] == {"type": "text", "text": "What is left to do?", "cache_control": {"type": "ephemeral"}}


def test_cli_fork_of_an_unknown_session_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fork", "nope", "--db", str(tmp_path / "wb.db")]) == 1
    _, err = capsys.readouterr()
    assert err.startswith("workbench: error:") and len(err.strip().splitlines()) == 1
