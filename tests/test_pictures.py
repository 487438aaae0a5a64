"""The TUI's picture of a long session: what it stores, and what it shows while the session loads.

A picture must show exactly what the loaded session shows (rows, budget, timeline, the detail of a
message) for every real transcript, and must never be used once the session, the settings or the
picture itself changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    UNSUPPORTED_FIXTURES,
    cc_assistant,
    cc_usage,
    cc_user,
    fixture_path,
    short_message,
    store_short_session,
    text_block,
    write_jsonl,
)

from workbench.cli import demo_path, main, resolve
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.measure import apply
from workbench.engine.plans.plan import undo
from workbench.engine.settings.config import Config
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import Message, Session, ToolResultPart, ToolUsePart
from workbench.engine.transcript.pictures import load_picture, save_picture, session_revision
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter
from workbench.tui import picture as pictures
from workbench.tui.picture import CALL_LOOKBACK, CHUNK_ROWS, PICTURE_MIN_MESSAGES, PREVIEW_CHARS, Picture, picture_key
from workbench.tui.screen_state import ScreenState
from workbench.tui.steering import plan_for_key
from workbench.tui.widgets.rows import Row

FIXTURE_FILES = [c.filename for c in CLAUDE_FIXTURES.values()] + list(UNSUPPORTED_FIXTURES.values())
WIDTHS = (0, 1, 13, 80, PREVIEW_CHARS)


def _steer(store: Store, ctx: SessionContext, action: str, message_id: str) -> None:
    plan = plan_for_key(ctx, action, message_id, ctx.config.strategies)  # type: ignore[arg-type]
    assert plan.items, f"{action} of {message_id} changes nothing"
    apply(store, ctx, plan)


def _steered_demo(store: Store) -> SessionContext:
    """The bundled transcript with a message pinned, a tool result pruned, one offloaded and one archived."""
    session_id = import_file(store, demo_path()).session.id
    ctx = SessionContext.load(store, session_id)
    results = [m for m in ctx.messages if any(isinstance(p, ToolResultPart) and len(p.text) > 400 for p in m.parts)]
    user = next(m for m in ctx.messages if m.role == "user" and m.index > 5 and not m.tool_results())
    _steer(store, ctx, "pin", user.id)
    _steer(store, ctx, "prune", results[0].id)
    _steer(store, ctx, "offload", results[1].id)
    _steer(store, ctx, "archive", results[-1].id)
    return ctx


def _assert_shows_the_same(picture: Picture, snapshot: ScreenState) -> None:
    assert picture.budget == snapshot.budget
    assert picture.timeline == snapshot.timeline
    assert (picture.undoable, picture.redoable) == (snapshot.undoable, snapshot.redoable)
    assert dict(picture.subagents) == snapshot.subagents
    assert len(picture.rows) == len(snapshot.rows)
    assert picture.rows.in_context == snapshot.rows.in_context
    for index in range(len(snapshot.rows)):
        real, shown = snapshot.rows.row(index), picture.rows.row(index)
        for name in ("position", "message_id", "role", "tokens", "share", "badges", "excluded", "exclusion_label",
                     "pinned", "archived"):
            assert getattr(shown, name) == getattr(real, name), (index, name)
        for width in WIDTHS:
            assert shown.preview(width) == real.preview(width), (index, width)
        assert picture.rows.message_id(index) == real.message_id
        assert picture.rows.tokens(index) == snapshot.rows.tokens(index)
        assert picture.rows.badges(index) == snapshot.rows.badges(index)
    assert picture.matches(snapshot)


# --- the TUI's picture: what it shows ---------------------------------------------------------------------


@pytest.mark.parametrize("filename", FIXTURE_FILES)
def test_a_picture_shows_what_the_loaded_session_shows_for_every_real_transcript(store: Store, filename: str) -> None:
    session_id = import_file(store, fixture_path(filename)).session.id
    ctx = SessionContext.load(store, session_id)
    snapshot = ScreenState.compute(ctx)
    revision = session_revision(store, session_id)
    assert pictures.save(store, snapshot, revision, ctx.config)
    picture = pictures.load(store, ctx.session, ctx.config)
    assert picture is not None and picture.revision == revision
    _assert_shows_the_same(picture, snapshot)


def test_a_picture_shows_pinned_pruned_offloaded_and_archived_rows(store: Store) -> None:
    ctx = _steered_demo(store)
    snapshot = ScreenState.compute(ctx, subagents={ctx.messages[3].id: ("child-a", "child-b")})
    assert pictures.save(store, snapshot, session_revision(store, ctx.session.id), ctx.config)
    picture = pictures.load(store, ctx.session, ctx.config)
    assert picture is not None
    badges = {badge for i in range(len(picture.rows)) for badge in picture.rows.badges(i)}
    assert {"PERSIST", "pruned", "offloaded"} <= badges
    assert any(picture.rows.row(i).archived for i in range(len(picture.rows)))
    assert picture.undoable == snapshot.undoable >= 4
    _assert_shows_the_same(picture, snapshot)


def test_rows_across_many_chunks(store: Store) -> None:
    count = 2 * CHUNK_ROWS + 7
    session = store_short_session(store, count=count)
    ctx = SessionContext.load(store, session.id)
    snapshot = ScreenState.compute(ctx)
    assert pictures.save(store, snapshot, session_revision(store, session.id), ctx.config)
    picture = pictures.load(store, ctx.session, ctx.config)
    assert picture is not None
    _assert_shows_the_same(picture, snapshot)
    assert picture.rows.index_of(f"m{count - 1}") == count - 1 and picture.rows.index_of("nowhere") is None


def test_a_picture_of_other_settings_or_another_title_is_not_used(store: Store) -> None:
    session = store_short_session(store)
    ctx = SessionContext.load(store, session.id)
    assert pictures.save(store, ScreenState.compute(ctx), session_revision(store, session.id), ctx.config)
    assert pictures.load(store, session, Config()) is not None
    warn_earlier = Config.model_validate({"budget": {"warn": 0.5}})
    limits = {"context_window": 500_000, "max_output": 8_192}
    bigger_model = Config.model_validate({"models": {"claude-sonnet-4-5": limits}})
    for config in (warn_earlier, bigger_model):
        assert picture_key(session, config) != picture_key(session, Config())
        assert pictures.load(store, session, config) is None
    retitled = session.model_copy(update={"title": "renamed"})
    assert pictures.load(store, retitled, Config()) is None


def test_a_damaged_picture_is_not_used(store: Store) -> None:
    session = store_short_session(store)
    ctx = SessionContext.load(store, session.id)
    revision = session_revision(store, session.id)
    key = picture_key(session, ctx.config)
    good = pictures.save(store, ScreenState.compute(ctx), revision, ctx.config)
    assert good and pictures.load(store, session, ctx.config) is not None
    header = load_picture(store, session.id, key).header  # type: ignore[union-attr]
    for damaged_header, chunks in ((header[:-5], [b"x"]), (b"\x00garbage", [b"x"]), (header, [b"not zlib"]),
                                   (header, [])):
        assert save_picture(store, session.id, revision, key, damaged_header, iter(chunks))
        assert pictures.load(store, session, ctx.config) is None


# --- the detail of a message while the session loads, and whether a context is what is stored ---------------


def test_peek_reads_a_message_as_the_loaded_session_shows_it(store: Store) -> None:
    ctx = _steered_demo(store)
    snapshot = ScreenState.compute(ctx)
    assert pictures.save(store, snapshot, session_revision(store, ctx.session.id), ctx.config)
    picture = pictures.load(store, ctx.session, ctx.config)
    assert picture is not None
    checked = 0
    for index in range(len(snapshot.rows)):
        real = snapshot.rows.row(index)
        first = max(0, index - CALL_LOOKBACK)
        ids = [picture.rows.message_id(i) for i in range(first, index + 1)]
        found = pictures.peek(store, ctx.session.id, picture.rows.row(index), ids)
        assert found is not None
        row, calls = found
        assert isinstance(row, Row) and row.message == real.message
        shown = (row.tokens, row.share, row.badges, row.excluded)
        assert shown == (real.tokens, real.share, real.badges, real.excluded)
        assert (row.item.parts if row.item else None) == (real.item.parts if real.item else None)
        for part in real.message.tool_results():
            call = snapshot.rows.tool_calls.get(part.tool_use_id)
            if call is not None and call.position > first:
                assert calls[part.tool_use_id] == call
                checked += 1
    assert checked > 5


def test_a_context_agrees_with_the_store_until_another_program_writes(store: Store) -> None:
    session = store_short_session(store)
    ctx = SessionContext.load(store, session.id)
    assert pictures.agrees(store, ctx)
    _steer(store, ctx, "pin", "m1")
    assert pictures.agrees(store, ctx)
    with Store(store.path) as other:
        elsewhere = SessionContext.load(other, session.id)
        undo(other, elsewhere)
    assert not pictures.agrees(store, ctx)  # the same counts, but another plan undone
    fresh = SessionContext.load(store, session.id)
    assert pictures.agrees(store, fresh)
    with Store(store.path) as other:
        other.save_messages([short_message(session.id, 7)], TokenCounter())
    assert not pictures.agrees(store, fresh)


def test_tool_calls_are_found_for_results_of_the_messages_just_before(store: Store) -> None:
    session = Session(id="calls", title="calls", source_format="engine", model="claude-sonnet-4-5")
    store.save_session(session)
    messages = [
        Message(id="a", session_id="calls", index=0, role="assistant",
                parts=[ToolUsePart(id="t1", name="read_file", input={"path": "x.py"})]),
        Message(id="b", session_id="calls", index=1, role="user", parts=[ToolResultPart(tool_use_id="t1", text="x")]),
    ]
    store.save_messages(messages, TokenCounter())
    ctx = SessionContext.load(store, "calls")
    assert pictures.save(store, ScreenState.compute(ctx), session_revision(store, "calls"), ctx.config)
    picture = pictures.load(store, session, ctx.config)
    assert picture is not None
    found = pictures.peek(store, "calls", picture.rows.row(1), ["a", "b"])
    assert found is not None and found[1]["t1"].name == "read_file" and found[1]["t1"].position == 1


def test_workbench_import_leaves_the_picture_to_the_first_opening(tmp_path: Path) -> None:
    """Importing does not load the session again to draw it (that doubled an import's time and memory);
    the first opening stores the picture, which then shows the same as the loaded session."""
    records: list[dict[str, object]] = []
    for n in range(PICTURE_MIN_MESSAGES // 2 + 1):
        records.append(cc_user(f"u{n}", f"question {n}", parent=f"a{n - 1}" if n else None))
        records.append(cc_assistant(f"a{n}", f"msg_{n}", [text_block(f"answer {n}")], cc_usage(100 + 20 * n, 9),
                                    parent=f"u{n}"))
    long_one = write_jsonl(tmp_path / "long.jsonl", records)
    short_one = write_jsonl(tmp_path / "short.jsonl", records[:10])
    db = tmp_path / "wb.db"
    assert main(["import", str(long_one), "--db", str(db)]) == 0
    assert main(["import", str(short_one), "--db", str(db)]) == 0
    with Store(db) as store:
        (long_session, long_count), (short_session, _) = sorted(store.list_sessions(), key=lambda s: -s[1])
        assert long_count >= PICTURE_MIN_MESSAGES
        assert pictures.load(store, long_session, Config()) is None
        assert pictures.refresh(store, long_session.id, Config())  # what the app does after its first load
        picture = pictures.load(store, long_session, Config())
        assert picture is not None
        _assert_shows_the_same(picture, ScreenState.compute(SessionContext.load(store, long_session.id)))
        assert pictures.load(store, short_session, Config()) is None  # short: it loads about as fast


def test_opening_an_unchanged_transcript_file_again_reuses_its_session_and_picture(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [cc_user("u0", "first question")]
    records.append(cc_assistant("a0", "msg_0", [text_block("first answer")], cc_usage(100, 9), parent="u0"))
    path = write_jsonl(tmp_path / "session.jsonl", records)
    with Store(tmp_path / "wb.db") as store:
        session_id, skipped = resolve(store, str(path), None)
        assert skipped == []
        revision = session_revision(store, session_id)
        assert resolve(store, str(path), None) == (session_id, [])
        assert session_revision(store, session_id) == revision  # nothing was written again

        with path.open("a", encoding="utf-8") as fh:  # the agent goes on: the file grows
            fh.write(json.dumps(cc_user("u1", "second question", parent="a0")) + "\n")
        assert resolve(store, str(path), None)[0] == session_id
        assert session_revision(store, session_id) > revision
        assert [m.text for m in store.load_messages(session_id)][-1] == "second question"

        revision = session_revision(store, session_id)
        with store.transaction():
            store.db.execute("UPDATE sessions SET metadata = json_set(metadata, '$.source_file.version', 'older')")
        resolve(store, str(path), None)  # imported by another version of the workbench: read again
        assert session_revision(store, session_id) > revision
