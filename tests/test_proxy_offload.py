"""Offloading a proxied agent's tool result on the wire: the proxy writes the whole result to a file in the
agent's working directory and forwards its head, tail and path instead; ``inline`` brings the original back.
The anthropic SDK is the client, the proxy a real server, and every check is on what the upstream received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
from loopback_api import Reply, text, tool_use
from proxy_support import TOOLS, proxied

from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.models import ToolResultPart
from workbench.engine.transcript.request_store import request_body
from workbench.engine.transcript.store import Store

OUTPUT = "".join(f"{n:05d} collected test_module_{n}.py::test_case PASSED\n" for n in range(1200))


def system(cwd: Path) -> list[dict[str, Any]]:
    """A system prompt with the environment block Claude Code writes."""
    return [{"type": "text", "text": "You are a careful coding agent."},
            {"type": "text", "text": f"Here is useful information about the environment you are running in:\n"
                                     f"<env>\nWorking directory: {cwd}\nIs directory a git repo: No\n</env>"}]


def turns(cwd: Path) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": [tool_use("toolu_1", "Bash", {"command": "pytest"})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": OUTPUT}]},
    ]


def body(cwd: Path, messages: list[dict[str, Any]], tools: list[dict[str, Any]] = TOOLS) -> dict[str, Any]:
    return {"model": "claude-opus-4-6", "max_tokens": 4096, "system": system(cwd), "tools": tools,
            "messages": messages}


def workbench(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_CONFIG": str(db.parent / "none.toml")}
    return subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=60, env=env, check=False)


def sent_result(sent: dict[str, Any]) -> Any:
    return sent["messages"][2]["content"][0]["content"]


def session_of(db: Path) -> tuple[str, str]:
    with Store(db) as store:
        session_id = next(s.id for s, _ in store.list_sessions() if s.source_format == "proxy")
        return session_id, store.load_messages(session_id)[2].id


def test_an_offloaded_result_goes_to_a_file_and_the_wire_carries_what_the_view_shows(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with proxied(tmp_path) as p:
        api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        p.api.queue(*(Reply([text(f"answer {n}")]) for n in range(3)))
        history = turns(work)
        api.messages.create(**body(work, history))
        p.settle()
        session_id, result_id = session_of(p.db)
        done = workbench(p.db, "apply", session_id, "--strategy", "offload")
        assert done.returncode == 0, done.stderr
        assert "applied offload: 1 change(s)" in done.stdout

        history += [{"role": "assistant", "content": [text("answer 0")]}, {"role": "user", "content": "Why?"}]
        api.messages.create(**body(work, history))
        p.settle()
        forwarded = sent_result(p.api.bodies[-1])
        assert isinstance(forwarded, str) and len(forwarded) < 2_000, "the agent no longer sends 60 KB"
        [path] = [w for w in forwarded.split() if w.startswith(str(work))]
        path = path.rstrip(":")
        assert Path(path).parent == work / ".workbench" / "offload"
        assert Path(path).read_text() == OUTPUT, "the whole result is in the file the reference names"
        assert f"{len(OUTPUT.encode()):,} bytes, 1,200 lines" in forwarded
        assert forwarded.splitlines()[1] == OUTPUT.splitlines()[0], "its head"
        assert forwarded.splitlines()[-1] == OUTPUT.splitlines()[-1], "and its tail"
        assert (work / ".workbench" / ".gitignore").read_text() == "*\n"
        assert p.api.bodies[-1]["messages"][3:] == history[3:] and p.api.bodies[-1]["messages"][:2] == history[:2]

        with Store(p.db) as store:
            ctx = SessionContext.load(store, session_id)
            item = ctx.view().item_for(result_id)
            assert item is not None
            [part] = item.parts
            assert isinstance(part, ToolResultPart) and part.text == forwarded, "the view is what the wire got"
            assert request_body(store, session_id, 2)["messages"][2]["content"][0]["content"] == forwarded

        done = workbench(p.db, "inline", session_id, result_id)
        assert done.returncode == 0, done.stderr
        history += [{"role": "assistant", "content": [text("answer 1")]}, {"role": "user", "content": "And?"}]
        api.messages.create(**body(work, history))
        assert sent_result(p.api.bodies[-1]) == OUTPUT, "inlined: the next request carries the original again"


def test_offload_is_refused_with_a_reason_when_the_agent_has_no_file_reading_tool(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with proxied(tmp_path) as p:
        p.api.queue(Reply([text("ok")]), Reply([text("ok")]))
        api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        no_read = [t for t in TOOLS if t["name"] != "Read"]
        history = turns(work)
        api.messages.create(**body(work, history, no_read))
        p.settle()
        session_id, result_id = session_of(p.db)
        for args in (("offload", session_id, result_id), ("apply", session_id, "--strategy", "offload")):
            done = workbench(p.db, *args)
            assert done.returncode != 0 and done.stdout == ""
            [line] = done.stderr.strip().splitlines()
            assert "no file-reading tool" in line and "Claude Code Read" in line, line
        planned = json.loads(workbench(p.db, "plan", session_id, "--json").stdout)
        assert "offload" not in [plan["strategy"] for plan in planned["plans"]]
        history += [{"role": "assistant", "content": [text("ok")]}, {"role": "user", "content": "more"}]
        api.messages.create(**body(work, history, no_read))
        assert p.api.bodies[-1]["messages"] == history, "nothing was changed on the wire"


def test_a_working_directory_not_on_this_machine_leaves_the_request_as_sent_and_says_why(tmp_path: Path) -> None:
    elsewhere = tmp_path / "on-another-machine"
    with proxied(tmp_path) as p:
        api = anthropic.Anthropic(base_url=p.url, api_key="k", max_retries=0)
        p.api.queue(Reply([text("ok")]), Reply([text("ok")]))
        history = turns(elsewhere)
        api.messages.create(**body(elsewhere, history))
        p.settle()
        session_id, result_id = session_of(p.db)
        assert workbench(p.db, "offload", session_id, result_id).returncode == 0
        history += [{"role": "assistant", "content": [text("ok")]}, {"role": "user", "content": "more"}]
        api.messages.create(**body(elsewhere, history))
        p.settle()
        assert p.api.bodies[-1]["messages"] == history, "fail open: the agent gets its own request"
        assert not elsewhere.exists(), "no folder is made for a directory that is not here"
        warning = p.reports[-1].warning or ""
        assert "request forwarded unchanged" in warning and "not on this machine" in warning
