"""The steering commands: pin / unpin / prune / restore / offload / inline / archive / unarchive, plan, apply,
undo, redo, history; and, on every real fixture, savings that ``plan`` reports are exactly what ``apply`` frees."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    basic_conversation,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    text_block,
    tool_result_block,
    tool_use_block,
    write_jsonl,
)

from workbench.cli import main
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.strategies.registry import STRATEGIES
from workbench.engine.transcript.store import Store

ITEM_KEYS = {"message_id", "action", "reason", "tokens_saved"}
PLAN_KEYS = {"strategy", "tokens_before", "tokens_after", "items", "skipped"}


def _run(capsys: pytest.CaptureFixture[str], db: Path, *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main(["--db", str(db), *(str(a) for a in args)])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], db: Path, *args: str | os.PathLike[str]) -> dict[str, Any]:
    code, out, err = _run(capsys, db, *args, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def _big(label: str) -> str:
    return "\n".join(f"{label} line {n}: some output of the tool" for n in range(300))


def _transcript(tmp_path: Path) -> Path:
    """Two turns; a file read twice (a duplicate), a large output (offloadable)."""
    records: list[dict[str, Any]] = [cc_user("u1", "Read the module twice, please.")]
    for n in range(3):
        tool_id = f"toolu_{n}"
        records.append(cc_assistant(f"a{n}", f"msg_{n}", [text_block("Reading."),
                                    tool_use_block(tool_id, "Read", {"file_path": "/repo/a.py"})],
                                    cc_usage(3, 20, cache_read=2_000 + 3_000 * n)))
        records.append(cc_user(f"r{n}", [tool_result_block(tool_id, _big(f"read {n}"))]))
    records.append(cc_user("u2", "Thanks."))
    records.append(cc_assistant("a9", "msg_9", [text_block("Done.")], cc_usage(3, 5, cache_read=11_000)))
    return write_jsonl(tmp_path / "session.jsonl", records)


def _session_id(db: Path, path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = _run(capsys, db, "import", path)
    assert code == 0
    return out.split()[-1]  # the one line ends with the session id


def _used(db: Path, session_id: str) -> int:
    with Store(db) as store:
        return SessionContext.load(store, session_id).budget().used


def _messages(db: Path, session_id: str) -> list[Any]:
    with Store(db) as store:
        return store.load_messages(session_id)


def test_plan_json_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    data = _json(capsys, db, "plan", _transcript(tmp_path))
    assert set(data) == {"plans", "pinned"}  # pinned: each pinned message and why strategies pass over it
    assert all(set(p) == {"message_id", "position", "reason"} for p in data["pinned"])
    assert [p["strategy"] for p in data["plans"]] == list(STRATEGIES)
    for plan in data["plans"]:
        assert set(plan) == PLAN_KEYS
        assert all(isinstance(plan[k], int) for k in ("tokens_before", "tokens_after"))
        for item in plan["items"]:
            assert set(item) == ITEM_KEYS and isinstance(item["tokens_saved"], int)
        assert plan["tokens_before"] - plan["tokens_after"] == sum(i["tokens_saved"] for i in plan["items"])
    offload = next(p for p in data["plans"] if p["strategy"] == "offload")
    assert len(offload["items"]) == 3 and all(i["action"] == "offload" for i in offload["items"])


def test_plan_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    path = _transcript(tmp_path)
    session_id = _session_id(db, path, capsys)
    before = (_used(db, session_id), _messages(db, session_id))
    code, out, _ = _run(capsys, db, "plan", session_id)
    assert code == 0 and "offload: 3 change(s)" in out and "dedup: nothing to do" in out
    assert (_used(db, session_id), _messages(db, session_id)) == before
    code, out, _ = _run(capsys, db, "history", session_id)
    assert out.strip() == "no changes yet"


def test_plan_one_strategy_and_an_unknown_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    path = _transcript(tmp_path)
    data = _json(capsys, db, "plan", path, "--strategy", "supersede-writes")
    assert [p["strategy"] for p in data["plans"]] == ["supersede_writes"]
    code, out, err = _run(capsys, db, "plan", path, "--strategy", "tidy")
    assert code == 1 and out == "" and err.count("\n") == 1 and "unknown strategy 'tidy'" in err


def test_apply_undo_redo_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    session_id = _session_id(db, _transcript(tmp_path), capsys)
    transcript = _messages(db, session_id)
    before = _used(db, session_id)
    plan = _json(capsys, db, "apply", session_id, "--strategy", "offload")["plans"][0]
    after = _used(db, session_id)
    assert plan["tokens_before"] == before and plan["tokens_after"] == after < before
    assert _messages(db, session_id) == transcript

    code, out, _ = _run(capsys, db, "undo", session_id)
    assert code == 0 and out.startswith("undid offload") and _used(db, session_id) == before
    code, out, _ = _run(capsys, db, "redo", session_id)
    assert code == 0 and out.startswith("redid offload") and _used(db, session_id) == after
    history = _json(capsys, db, "history", session_id)["history"]
    assert [(h["strategy"], h["origin"], h["undone"], h["items"]) for h in history] == [("offload", "strategy", False, 3)]
    assert history[0]["tokens_saved"] == before - after and history[0]["created_at"]
    code, out, _ = _run(capsys, db, "history", session_id)
    assert "offload" in out and "applied" in out

    code, out, err = _run(capsys, db, "redo", session_id)
    assert code == 1 and "nothing to redo" in err


def test_nothing_to_undo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    path = write_jsonl(tmp_path / "basic.jsonl", basic_conversation())
    code, out, err = _run(capsys, db, "undo", path)
    assert code == 1 and out == "" and err.strip() == "workbench: error: nothing to undo"


def test_pin_unpin_by_position(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    session_id = _session_id(db, _transcript(tmp_path), capsys)
    first = _messages(db, session_id)[0].id
    plan = _json(capsys, db, "pin", session_id, "1")["plans"][0]
    assert plan["items"] == [{"message_id": first, "action": "pin", "reason": plan["items"][0]["reason"],
                              "tokens_saved": 0}]
    code, out, _ = _run(capsys, db, "pin", session_id, first)
    assert code == 0 and out.startswith("pin: nothing to do")
    with Store(db) as store:
        assert SessionContext.load(store, session_id).overlay.pinned == {first}
    code, out, _ = _run(capsys, db, "unpin", session_id, first)
    assert code == 0 and "applied unpin" in out
    history = _json(capsys, db, "history", session_id)["history"]
    assert [(h["strategy"], h["origin"]) for h in history] == [("pin", "user"), ("unpin", "user")]


def test_prune_restore_offload_inline_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    session_id = _session_id(db, _transcript(tmp_path), capsys)
    messages = _messages(db, session_id)
    result = next(m for m in messages if m.kind == "tool_result")
    position = str(messages.index(result) + 1)
    before = _used(db, session_id)

    plan = _json(capsys, db, "prune", session_id, position)["plans"][0]
    assert [i["action"] for i in plan["items"]] == ["prune"] and plan["items"][0]["message_id"] == result.id
    assert before - _used(db, session_id) == plan["tokens_before"] - plan["tokens_after"] > 0
    code, out, _ = _run(capsys, db, "restore", session_id, result.id)
    assert code == 0 and _used(db, session_id) == before

    code, out, _ = _run(capsys, db, "offload", session_id, position)
    assert code == 0 and "applied offload" in out and _used(db, session_id) < before
    code, out, _ = _run(capsys, db, "inline", session_id, position)
    assert code == 0 and _used(db, session_id) == before
    assert _messages(db, session_id) == messages

    code, out, err = _run(capsys, db, "prune", session_id, "999")
    assert code == 1 and "no message '999'" in err


def test_archive_a_tool_call_archives_its_result_and_the_reverse(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``workbench archive`` keeps a tool pair whole, from either half; ``unarchive`` brings both back."""
    db = tmp_path / "wb.db"
    session_id = _session_id(db, _transcript(tmp_path), capsys)
    messages = _messages(db, session_id)
    results = [m for m in messages if m.kind == "tool_result"]
    callers = [m for m in messages if m.role == "assistant" and m.tool_uses()]
    before = _used(db, session_id)

    plan = _json(capsys, db, "archive", session_id, callers[0].id)["plans"][0]
    assert plan["strategy"] == "archive"
    assert [(i["message_id"], i["action"]) for i in plan["items"]] == [(callers[0].id, "archive"),
                                                                       (results[0].id, "archive")]
    assert before - _used(db, session_id) == plan["tokens_before"] - plan["tokens_after"] > 0

    position = str(messages.index(results[1]) + 1)  # the result, by its position: its call goes with it
    code, out, _ = _run(capsys, db, "archive", session_id, position)
    assert code == 0 and "applied archive: 2 change(s)" in out
    with Store(db) as store:
        ctx = SessionContext.load(store, session_id)
    assert ctx.overlay.archived == {callers[0].id, results[0].id, callers[1].id, results[1].id}
    assert ctx.view().excluded[callers[1].id] == "archived"

    code, out, _ = _run(capsys, db, "archive", session_id, results[1].id)
    assert code == 0 and out.startswith("archive: nothing to do")
    unarchive = _json(capsys, db, "unarchive", session_id, results[0].id)["plans"][0]
    assert {i["message_id"] for i in unarchive["items"]} == {callers[0].id, results[0].id}
    history = _json(capsys, db, "history", session_id)["history"]
    assert [(h["strategy"], h["origin"]) for h in history] == [("archive", "user")] * 2 + [("unarchive", "user")]
    assert _messages(db, session_id) == messages  # the transcript itself is never changed

    code, out, err = _run(capsys, db, "archive", session_id, "999")
    assert code == 1 and "no message '999'" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_app_archives_with_the_engine_planner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The app's ``a`` key plans through the engine's archive planner, the one ``workbench archive`` uses."""
    from workbench.engine.plans.strategies.archive import plan_archive_message
    from workbench.tui.steering import plan_for_key

    db = tmp_path / "wb.db"
    session_id = _session_id(db, _transcript(tmp_path), capsys)
    with Store(db) as store:
        ctx = SessionContext.load(store, session_id)
    result = next(m for m in ctx.messages if m.kind == "tool_result")
    keyed = plan_for_key(ctx, "archive", result.id, ctx.config.strategies)
    planned = plan_archive_message(ctx, result)
    assert [(i.message_id, i.action, i.reason) for i in keyed.items] == \
        [(i.message_id, i.action, i.reason) for i in planned.items]
    assert len(keyed.items) == 2 and keyed.tokens_saved > 0


def _same_digest_id(plan: dict[str, Any]) -> dict[str, Any]:
    items = [{**i, "message_id": "digest"} if i["action"] == "summary" else i for i in plan["items"]]
    return {**plan, "items": items}


@pytest.mark.parametrize("key", list(CLAUDE_FIXTURES))
def test_fixture_plans_match_the_budget_after_apply(key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plan`` on a real transcript, then each non-empty strategy applied: the budget moves by what was planned."""
    db = tmp_path / "wb.db"
    path = claude_fixture(key)
    session_id = _session_id(db, path, capsys)
    transcript = _messages(db, session_id)
    plans = _json(capsys, db, "plan", path)["plans"]
    assert [p["strategy"] for p in plans] == list(STRATEGIES)
    start = _used(db, session_id)
    assert all(p["tokens_before"] == start for p in plans)
    for plan in plans:
        if not plan["items"]:
            continue
        before = _used(db, session_id)
        applied = _json(capsys, db, "apply", path, "--strategy", plan["strategy"])["plans"][0]
        after = _used(db, session_id)
        assert _same_digest_id(applied) == _same_digest_id(plan)  # a digest's id comes from its plan's
        assert plan["tokens_before"] - plan["tokens_after"] == before - after
        assert _messages(db, session_id)[: len(transcript)] == transcript
        code, _, err = _run(capsys, db, "undo", session_id)
        assert code == 0, err
        assert _used(db, session_id) == before
