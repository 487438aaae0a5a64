"""Codex CLI, OpenCode and Aider themselves through ``workbench wrap``, against the loopback OpenAI API on
127.0.0.1: each completes a tool round (Aider: an edit), and the session is stored and attributed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopback_openai import LoopbackOpenAI
from openai_agents import (
    CODEX,
    KEY,
    OPENCODE,
    SECRET,
    aider_env,
    aider_model,
    base_env,
    chat_model,
    codex_home,
    codex_model,
    install_aider,
    install_npm_agents,
    opencode_env,
    wrap,
)

from workbench.engine.context.breakdown import breakdown
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.models import ToolResultPart, ToolUsePart
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.request_store import list_requests
from workbench.engine.transcript.store import Store


@pytest.fixture(scope="session")
def npm_agents() -> None:
    if not install_npm_agents():
        pytest.skip("needs node and npm to install Codex CLI and OpenCode")


def proxied_sessions(db: Path) -> list[str]:
    with Store(db) as store:
        return [s.id for s, _ in store.list_sessions() if s.source_format == "proxy"]


def test_codex_through_wrap_is_stored_and_attributed(tmp_path: Path, npm_agents: None) -> None:
    work, db = tmp_path / "work", tmp_path / "workbench.db"
    work.mkdir()
    (work / "hello.txt").write_text(f"{SECRET}\n")
    with LoopbackOpenAI(fallback=codex_model) as api:
        env = {**base_env(tmp_path), "CODEX_HOME": str(codex_home(tmp_path, api.url)), "FAKE_API_KEY": KEY}
        done = wrap(db, work, env, str(CODEX), "exec", "--skip-git-repo-check",
                    "Run: cat hello.txt and tell me what it says")
    assert "FINAL: it says secret-42" in done.stdout, done.stderr[-2000:]
    assert "model provider fake's base_url" in done.stderr, "wrap says what it did"
    assert [seen.path for seen in api.seen] == ["/v1/responses", "/v1/responses"]
    assert all(seen.headers["authorization"] == f"Bearer {KEY}" for seen in api.seen)
    [session_id] = proxied_sessions(db)
    with Store(db) as store:
        session = store.get_session(session_id)
        parts = [part for m in store.load_messages(session_id) for part in m.parts]
        budget = SessionContext.load(store, session_id).budget()
        entries = breakdown(store, session_id).entries
    assert session.title.startswith("Run: cat hello.txt")
    assert any(isinstance(p, ToolUsePart) and p.name == "exec_command" for p in parts)
    assert any(isinstance(p, ToolResultPart) and SECRET in p.text for p in parts)
    components = budget.components
    assert components["system"] > 0 and components["tools"] > 0 and components["reminders"] > 0
    assert components["unattributed"] == 0
    assert {"exec_command", "web_search"} <= {e.name for e in entries if e.component == "tools"}
    with Store(db) as store:
        for path in tmp_path.rglob("*.db"):
            assert KEY.encode() not in path.read_bytes()


def test_opencode_through_wrap_is_stored_and_attributed(tmp_path: Path, npm_agents: None) -> None:
    work, db = tmp_path / "work", tmp_path / "workbench.db"
    work.mkdir()
    (work / "hello.txt").write_text(f"{SECRET}\n")
    with LoopbackOpenAI(fallback=chat_model) as api:
        env = opencode_env(tmp_path, api.url)
        done = wrap(db, work, env, str(OPENCODE), "run", "--pure", "Run:", "cat", "hello.txt", "and", "tell", "me",
                    "what", "it", "says")
    assert "FINAL: it says secret-42" in done.stdout, done.stderr[-2000:]
    assert "provider fake's baseURL set in OPENCODE_CONFIG_CONTENT" in done.stderr
    assert [seen.path for seen in api.seen] == ["/v1/chat/completions"] * 3, "a title request and two turns"
    with Store(db) as store:
        conversations = [sid for sid in proxied_sessions(db)
                         if any(isinstance(p, ToolUsePart) for m in store.load_messages(sid) for p in m.parts)]
        assert len(conversations) == 1 and len(proxied_sessions(db)) == 2, "the title request is a session apart"
        [session_id] = conversations
        parts = [part for m in store.load_messages(session_id) for part in m.parts]
        budget = SessionContext.load(store, session_id).budget()
        entries = breakdown(store, session_id).entries
    assert any(isinstance(p, ToolUsePart) and p.name == "bash" for p in parts)
    assert any(isinstance(p, ToolResultPart) and SECRET in p.text for p in parts)
    components = budget.components
    assert components["system"] > 0 and components["tools"] > 0 and components["unattributed"] == 0
    assert {"bash", "read", "edit"} <= {e.name for e in entries if e.component == "tools"}


@pytest.fixture(scope="session")
def aider() -> Path:
    found = install_aider()
    if found is None:
        pytest.skip("needs a Python venv to install Aider")
    return found


def test_aider_through_wrap_edits_and_is_stored_and_attributed(tmp_path: Path, aider: Path) -> None:
    work, db = tmp_path / "work", tmp_path / "workbench.db"
    work.mkdir()
    (work / "hello.txt").write_text(f"{SECRET}\n")
    with LoopbackOpenAI(fallback=aider_model) as api:
        env, flags = aider_env(tmp_path, api.url)
        done = wrap(db, work, env, str(aider), *flags, "--message", "Change secret-42 to secret-43 in hello.txt",
                    "hello.txt")
    assert (work / "hello.txt").read_text() == "secret-43\n", done.stdout[-2000:]
    assert "OPENAI_API_BASE set, upstream" in done.stderr
    [seen] = api.seen
    assert seen.path == "/v1/chat/completions" and seen.headers["authorization"] == f"Bearer {KEY}"
    [session_id] = proxied_sessions(db)
    with Store(db) as store:
        messages = store.load_messages(session_id)
        budget = SessionContext.load(store, session_id).budget()
    assert messages[-1].role == "assistant" and "secret-43" in str(messages[-1].parts[0])
    assert budget.components["system"] > 0 and budget.components["unattributed"] == 0


def test_a_tool_output_pruned_in_the_workbench_is_gone_from_codexs_next_request(tmp_path: Path,
                                                                                 npm_agents: None) -> None:
    """A second ``codex exec resume`` continues the session: its first request carries the pruned output as
    the placeholder, the call and its call_id as they were."""
    work, db = tmp_path / "work", tmp_path / "workbench.db"
    work.mkdir()
    (work / "hello.txt").write_text(f"{SECRET}\n")
    with LoopbackOpenAI(fallback=codex_model) as api:
        env = {**base_env(tmp_path), "CODEX_HOME": str(codex_home(tmp_path, api.url)), "FAKE_API_KEY": KEY}
        wrap(db, work, env, str(CODEX), "exec", "--skip-git-repo-check", "Run: cat hello.txt and tell me what it says")
        [session_id] = proxied_sessions(db)
        with Store(db) as store:
            [result] = [m for m in store.load_messages(session_id)
                        if any(isinstance(p, ToolResultPart) for p in m.parts)]
            store.add_overlay_events([OverlayEvent(id="e1", session_id=session_id, plan_id="p1", action="prune",
                                                   message_id=result.id, part_index=0, reason="test")])
        first_run = len(api.seen)
        wrap(db, work, env, str(CODEX), "exec", "--skip-git-repo-check", "resume", "--last", "Say it again")
    resumed = api.seen[first_run].body["input"]
    outputs = [item for item in resumed if item.get("type") == "function_call_output"]
    assert outputs and outputs[0]["output"] == PRUNED_PLACEHOLDER and outputs[0]["call_id"] == "call_4"
    calls = [item for item in resumed if item.get("type") == "function_call"]
    assert calls[0]["call_id"] == "call_4" and json.loads(calls[0]["arguments"]) == {"cmd": "cat hello.txt"}
    assert proxied_sessions(db) == [session_id], "the resumed run continues the same session"
    with Store(db) as store:
        assert [r.edited for r in list_requests(store, session_id)][first_run:] == [True] * (len(api.seen) - first_run)


def test_a_tool_output_pruned_in_the_workbench_is_gone_from_opencodes_next_request(tmp_path: Path,
                                                                                   npm_agents: None) -> None:
    """``opencode run --continue`` goes on with the session: the pruned bash output reaches the model as the
    placeholder, its tool_call_id as it was."""
    work, db = tmp_path / "work", tmp_path / "workbench.db"
    work.mkdir()
    (work / "hello.txt").write_text(f"{SECRET}\n")
    with LoopbackOpenAI(fallback=chat_model) as api:
        env = opencode_env(tmp_path, api.url)
        wrap(db, work, env, str(OPENCODE), "run", "--pure", "Run:", "cat", "hello.txt")
        with Store(db) as store:
            [result] = [m for sid in proxied_sessions(db) for m in store.load_messages(sid)
                        if any(isinstance(p, ToolResultPart) for p in m.parts)]
            store.add_overlay_events([OverlayEvent(id="e1", session_id=result.session_id, plan_id="p1",
                                                   action="prune", message_id=result.id, part_index=0, reason="t")])
        first_run = len(api.seen)
        wrap(db, work, env, str(OPENCODE), "run", "--pure", "--continue", "Say", "it", "again")
    resumed = next(seen.body["messages"] for seen in api.seen[first_run:] if seen.body.get("tools"))
    tool = [m for m in resumed if m.get("role") == "tool"]
    assert tool and tool[0]["content"] == PRUNED_PLACEHOLDER
    calls = [c for m in resumed for c in m.get("tool_calls") or ()]
    assert calls[0]["id"] == tool[0]["tool_call_id"]
