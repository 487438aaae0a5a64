"""PreCompact and SessionStart hooks (spec 004): shell commands with JSON on stdin, or Python callables.

A hook may add instructions or cancel; a failing hook is reported with its stderr and the
compaction carries on; SessionStart runs after apply with ``source: "compact"``.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from compaction_helpers import compact, load, long_session, preview, run

from workbench.engine import events as ev
from workbench.engine.plans.compaction import CompactionCancelled, Compactor
from workbench.engine.plans.hooks import HookReply, HookRunner
from workbench.engine.settings.compaction import CompactionConfig, CompactionHooks, HookCommand
from workbench.engine.transcript.store import Store

PY = shlex.quote(sys.executable)


def _script(tmp_path: Path, name: str, body: str) -> str:
    """A hook command running a small Python script (portable: no shell tools needed)."""
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return f"{PY} {shlex.quote(str(path))}"


def _config(pre: Sequence[str] = (), start: Sequence[str] = (), timeout: float = 30) -> CompactionConfig:
    def commands(lines: Sequence[str]) -> list[HookCommand]:
        return [HookCommand(command=c, timeout=timeout) for c in lines]

    return CompactionConfig(hooks=CompactionHooks(pre_compact=commands(pre), session_start=commands(start)))


REPLY = """import json, sys
sys.stdin.read()
print(json.dumps({reply!r}))
"""

RECORD = """import json, pathlib, sys
payload = json.load(sys.stdin)
pathlib.Path({out!r}).write_text(json.dumps(payload))
print(json.dumps({reply!r}) if {reply!r} else "")
"""


def test_pre_compact_receives_the_event_and_adds_instructions(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "pre.json"
    hook = _script(tmp_path, "pre", RECORD.format(out=str(out), reply={"instructions": "Keep the API names."}))
    ctx = load(store, long_session().save(store))
    plan = preview(store, ctx, config=_config(pre=[hook]), focus="the parser")
    payload = json.loads(out.read_text())
    assert payload["hook_event_name"] == "PreCompact" and payload["trigger"] == "manual"
    assert payload["session_id"] == ctx.session.id and payload["custom_instructions"] == "the parser"
    assert plan.instructions == ["Keep the API names."]
    assert "- Keep the API names." in plan.prompt.split("### Focus")[1]


def test_plain_stdout_counts_as_instructions(store: Store, tmp_path: Path) -> None:
    hook = _script(tmp_path, "plain", "import sys; sys.stdin.read(); print('Mention the migration.')")
    plan = preview(store, load(store, long_session().save(store)), config=_config(pre=[hook]))
    assert plan.instructions == ["Mention the migration."]


def test_pre_compact_can_cancel(store: Store, tmp_path: Path) -> None:
    hook = _script(tmp_path, "cancel", REPLY.format(reply={"cancel": True, "reason": "release freeze"}))
    ctx = load(store, long_session().save(store))
    with pytest.raises(CompactionCancelled, match="release freeze"):
        preview(store, ctx, config=_config(pre=[hook]))
    claude_style = _script(tmp_path, "stop", REPLY.format(reply={"continue": False, "stopReason": "no"}))
    with pytest.raises(CompactionCancelled, match="no"):
        preview(store, ctx, config=_config(pre=[claude_style]))


def test_a_failing_hook_is_reported_with_its_stderr_and_the_compaction_goes_on(store: Store, tmp_path: Path) -> None:
    hook = _script(tmp_path, "fail",
                   "import sys; sys.stdin.read(); print('boom: config missing', file=sys.stderr); sys.exit(3)")
    seen: list[ev.Event] = []
    plan = preview(store, load(store, long_session().save(store)), config=_config(pre=[hook]), emit=seen.append)
    [warning] = [w for w in plan.warnings if "PreCompact" in w]
    assert "exit status 3" in warning and "boom: config missing" in warning
    assert any(isinstance(e, ev.Warning) and e.message == warning for e in seen)
    assert plan.summarized


def test_a_hook_that_hangs_is_killed_and_reported(store: Store, tmp_path: Path) -> None:
    hook = _script(tmp_path, "hang", "import time; time.sleep(30)")
    plan = preview(store, load(store, long_session().save(store)), config=_config(pre=[hook], timeout=0.5))
    assert any("timed out after 0.5 s" in w for w in plan.warnings)


def test_session_start_runs_after_apply_with_source_compact(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "start.json"
    hook = _script(tmp_path, "start", RECORD.format(out=str(out), reply={"additionalContext": "Branch: main"}))
    failing = _script(tmp_path, "bad", "import sys; sys.stdin.read(); print('oops', file=sys.stderr); sys.exit(1)")
    ctx = load(store, long_session().save(store))
    plan, result = compact(store, ctx, config=_config(start=[hook, failing]))
    payload = json.loads(out.read_text())
    assert payload["hook_event_name"] == "SessionStart" and payload["source"] == "compact"
    assert payload["plan_id"] == plan.plan_id and payload["post_tokens"] == result.after_tokens
    assert result.context == ["Branch: main"]
    assert len(result.warnings) == 1 and "oops" in result.warnings[0] and "SessionStart" in result.warnings[0]


def test_python_callables_sync_async_and_failing(store: Store) -> None:
    calls: list[dict[str, Any]] = []

    def add_instruction(payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(payload)
        return {"instructions": "From a callable."}

    async def async_reply(payload: dict[str, Any]) -> HookReply:
        return HookReply(instructions="From a coroutine.")

    def broken(payload: dict[str, Any]) -> None:
        raise RuntimeError("the hook's database is down")

    hooks = HookRunner(callables={"PreCompact": [add_instruction, async_reply, broken], "SessionStart": [broken]})
    ctx = load(store, long_session().save(store))
    compactor = Compactor(store, ctx, hooks=hooks)
    plan = run(compactor.preview())
    assert plan.instructions == ["From a callable.", "From a coroutine."]
    assert calls[0]["hook_event_name"] == "PreCompact"
    assert any("RuntimeError: the hook's database is down" in w for w in plan.warnings)
    result = run(compactor.apply(plan))
    assert any("SessionStart" in w and "database is down" in w for w in result.warnings)


def test_cancelling_callable(store: Store) -> None:
    hooks = HookRunner(callables={"PreCompact": [lambda payload: HookReply(cancel=True, reason="not today")]})
    ctx = load(store, long_session().save(store))
    with pytest.raises(CompactionCancelled, match="not today"):
        run(Compactor(store, ctx, hooks=hooks).preview())
    assert not [e for e in ctx.events if e.action == "pivot"]
