"""Claude Code import, checked against the real transcripts and small synthetic ones.

Facts are recomputed from the raw files here (by plain JSON parsing, not by the
importer) and compared with both the README's numbers and what the importer stored.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    COMPACT_BOUNDARY_LINE,
    COMPACT_PRE_TOKENS,
    COMPACT_SUMMARY_LINE,
    assistant_ids,
    basic_conversation,
    cc_assistant,
    cc_usage,
    cc_user,
    claude_fixture,
    last_usage_by_id,
    raw_records,
    text_block,
    tool_use_block,
    write_jsonl,
)

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.importers import import_file, parse_file
from workbench.engine.transcript.models import ThinkingPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store

FIXTURE_KEYS = list(CLAUDE_FIXTURES)

# (tool calls, tool results, results with is_error, thinking blocks) from the fixtures README.
TOOL_FACTS = {
    "short": (2, 2, 2, None),
    "subagent": (16, 16, 0, None),
    "258c7280": (186, 186, 7, None),
    "session-196820da": (65, 65, 2, 47),
}


def _table_counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {
            t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
            for t in ("sessions", "messages", "parts", "overlay_events", "usage_records")
        }
    finally:
        conn.close()


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Every Claude Code fixture imported once into its own database: key -> (db, session id)."""
    out: dict[str, tuple[Path, str]] = {}
    root = tmp_path_factory.mktemp("imported")
    for key in FIXTURE_KEYS:
        path = claude_fixture(key)
        db = root / f"{key}.db"
        with Store(db) as store:
            out[key] = (db, import_file(store, path).session.id)
    return out


# --- the real transcripts -------------------------------------------------------


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_raw_fixture_matches_documented_facts(key: str) -> None:
    fact = CLAUDE_FIXTURES[key]
    path = claude_fixture(key)
    assert path.read_bytes().count(b"\n") == fact.lines
    records = [r for _, r in raw_records(path)]
    assert len(records) == fact.lines, "every line of a fixture is a JSON object"
    kinds = Counter(r["type"] for r in records)
    assert kinds["assistant"] == fact.assistant_lines
    assert kinds["user"] == fact.user_records
    assert len(assistant_ids(path)) == fact.assistant_ids


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_assistant_lines_merge_by_message_id(key: str, imported: dict[str, tuple[Path, str]]) -> None:
    fact = CLAUDE_FIXTURES[key]
    path = claude_fixture(key)
    db, session_id = imported[key]
    with Store(db) as store:
        messages = store.load_messages(session_id)
        session = store.get_session(session_id)
    assistants = [m for m in messages if m.role == "assistant"]
    users = [m for m in messages if m.role == "user" and not m.source.get("reattached")]
    reattached = [m for m in messages if m.source.get("reattached")]
    assert [m.id for m in assistants] == assistant_ids(path)
    assert len(assistants) == fact.assistant_ids
    assert len(users) == fact.user_records
    # Each compaction: its boundary, and the files Claude Code re-attaches after it (read before it here).
    assert len(reattached) == fact.compactions
    assert len(messages) == fact.assistant_ids + fact.user_records + 2 * fact.compactions
    assert [m.index for m in messages] == list(range(len(messages)))
    assert session.model == fact.model
    assert session.source_format == "claude-code"

    blocks: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for _, record in raw_records(path):
        if record["type"] == "assistant":
            blocks[record["message"]["id"]] += len(record["message"]["content"])
            lines[record["message"]["id"]] += 1
    for m in assistants:
        assert len(m.parts) == blocks[m.id], f"every content block of {m.id} is kept"
        assert len(m.source["lines"]) == lines[m.id]


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_usage_counted_once_per_message_id_from_the_last_line(key: str, imported: dict[str, tuple[Path, str]]) -> None:
    path = claude_fixture(key)
    db, session_id = imported[key]
    last = last_usage_by_id(path)
    with Store(db) as store:
        messages = {m.id: m for m in store.load_messages(session_id) if m.role == "assistant"}
    assert set(messages) == set(last)
    for message_id, raw in last.items():
        usage = messages[message_id].usage
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (
            raw["input_tokens"],
            raw["output_tokens"],
            raw.get("cache_creation_input_tokens", 0),
            raw.get("cache_read_input_tokens", 0),
        )

    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT message_id, input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens "
        "FROM usage_records WHERE session_id = ?",
        (session_id,),
    ).fetchall()
    conn.close()
    assert len(rows) == len(last), "one usage record per API message"
    for mid, inp, out, cc, cr in rows:
        assert (inp, out, cc, cr) == (
            last[mid]["input_tokens"],
            last[mid]["output_tokens"],
            last[mid].get("cache_creation_input_tokens", 0),
            last[mid].get("cache_read_input_tokens", 0),
        )

    per_line_output = sum(r["message"]["usage"]["output_tokens"] for _, r in raw_records(path) if r["type"] == "assistant")
    stored_output = sum(m.usage.output_tokens for m in messages.values() if m.usage)
    assert stored_output == sum(u["output_tokens"] for u in last.values())
    assert stored_output < per_line_output, "summing every line would over-count"


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_tool_calls_and_results(key: str, imported: dict[str, tuple[Path, str]]) -> None:
    calls, results, errors, thinking = TOOL_FACTS[key]
    db, session_id = imported[key]
    with Store(db) as store:
        parts = [p for m in store.load_messages(session_id) for p in m.parts]
    tool_uses = [p for p in parts if isinstance(p, ToolUsePart)]
    tool_results = [p for p in parts if isinstance(p, ToolResultPart)]
    assert len(tool_uses) == calls
    assert len(tool_results) == results
    assert sum(p.is_error for p in tool_results) == errors
    assert {p.tool_use_id for p in tool_results} == {p.id for p in tool_uses}
    if thinking is not None:
        assert sum(isinstance(p, ThinkingPart) for p in parts) == thinking


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_non_message_records_are_counted_and_skipped(key: str) -> None:
    path = claude_fixture(key)
    expected: Counter[str] = Counter()
    for _, record in raw_records(path):
        kind = record["type"]
        if kind == "system":
            if record.get("subtype") != "compact_boundary":
                expected[f"system:{record.get('subtype')}"] += 1
        elif kind not in ("user", "assistant", "summary"):
            expected[kind] += 1
    parsed = parse_file(path)
    assert parsed.skipped_records == dict(expected)
    assert parsed.skipped_lines == []
    if key == "258c7280":
        assert parsed.skipped_records["progress"] == 1333
        assert parsed.skipped_records["queue-operation"] == 6
        assert parsed.skipped_records["file-history-snapshot"] == 28


def test_compaction_pivot(imported: dict[str, tuple[Path, str]]) -> None:
    path = claude_fixture("258c7280")
    db, session_id = imported["258c7280"]
    records = dict(raw_records(path))
    boundary_uuid = records[COMPACT_BOUNDARY_LINE]["uuid"]
    summary_uuid = records[COMPACT_SUMMARY_LINE]["uuid"]
    assert records[COMPACT_SUMMARY_LINE]["isCompactSummary"] is True

    with Store(db) as store:
        ctx = SessionContext.load(store, session_id)
    view = ctx.view()
    assert len(view.compactions) == 1
    compaction = view.compactions[0]
    assert compaction.message_id == boundary_uuid
    assert compaction.trigger == "auto"
    assert compaction.reported_pre_tokens == COMPACT_PRE_TOKENS
    assert compaction.estimated_pre_tokens > 0

    in_view = {item.message_id for item in view.items if item.kind == "message"}
    before = [m for m in ctx.messages if m.source["lines"][0] < COMPACT_BOUNDARY_LINE]
    after = [m for m in ctx.messages if m.source["lines"][0] > COMPACT_BOUNDARY_LINE]
    assert before and after
    assert not in_view & {m.id for m in before}, "nothing before the boundary is in the view"
    assert all(view.excluded[m.id] == "before-compaction" for m in before)
    assert boundary_uuid not in in_view
    reattached = [m.id for m in ctx.messages if m.source.get("reattached")]
    assert len(reattached) == 1, "the files Claude Code re-attaches after the boundary"
    assert in_view == {m.id for m in after} | set(reattached), "everything after the boundary is in the view"

    summary = view.item_for(summary_uuid)
    assert summary is not None and "summary" in summary.badges
    first = next(item for item in view.items if item.kind == "message")
    assert first.message_id == summary_uuid, "the summary opens the compacted context"
    assert sum(1 for item in view.items if "summary" in item.badges) == 1


def test_reimport_returns_same_session_without_duplicates(tmp_path: Path) -> None:
    path = claude_fixture("258c7280")
    db = tmp_path / "wb.db"
    with Store(db) as store:
        first = import_file(store, path)
    counts = _table_counts(db)
    with Store(db) as store:
        second = import_file(store, path)
    assert second.session.id == first.session.id
    assert _table_counts(db) == counts
    fact = CLAUDE_FIXTURES["258c7280"]
    subagents = sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))
    assert counts["sessions"] == 1 + len(subagents) == 3  # its sub-agents' transcripts come with it
    side_ids = sum(len(assistant_ids(p, include_sidechain=True)) for p in subagents)
    side_users = sum(1 for p in subagents for _, r in raw_records(p) if r.get("type") == "user")
    assert counts["messages"] == fact.assistant_ids + fact.user_records + 2 * fact.compactions + side_ids + side_users
    assert counts["usage_records"] == fact.assistant_ids + side_ids
    assert counts["overlay_events"] == len(first.events) == 2  # the pivot and the summary mark


def test_reimport_of_a_grown_file_adds_only_the_new_messages(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    shutil.copyfile(claude_fixture("short"), path)
    db = tmp_path / "wb.db"
    with Store(db) as store:
        first = import_file(store, path)
        n_before = store.message_count(first.session.id)
    with path.open("a", encoding="utf-8") as fh:
        for record in basic_conversation():
            fh.write(json.dumps(record) + "\n")
    with Store(db) as store:
        second = import_file(store, path)
        assert second.session.id == first.session.id
        assert store.message_count(second.session.id) == n_before + 4  # 2 user records, 2 API messages
        ids = [m.id for m in store.load_messages(second.session.id)]
    assert len(ids) == len(set(ids))
    assert ids[-1] == "msg_02"


# --- synthetic transcripts --------------------------------------------------------


def test_sidechain_records_are_stored_but_not_in_the_view(tmp_path: Path) -> None:
    records = [
        *basic_conversation(),
        cc_user("s-u1", "Sub-agent: search the code for TODO", sidechain=True),
        cc_assistant("s-a1", "msg_side_1", [text_block("Found 3 TODOs " * 50)], cc_usage(7, 80, 2000, 0),
                     model="claude-haiku-4-5-20251001", sidechain=True),
        cc_user("u3", "Thanks. Now summarise."),
        cc_assistant("a4", "msg_03", [text_block("Summary: done.")], cc_usage(3, 10, 100, 3100)),
    ]
    path = write_jsonl(tmp_path / "side.jsonl", records)
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, path)
        stored = {m.id: m for m in store.load_messages(parsed.session.id)}
        ctx = SessionContext.load(store, parsed.session.id)
    assert stored["s-u1"].sidechain and stored["msg_side_1"].sidechain
    assert not stored["u3"].sidechain
    view = ctx.view()
    assert view.item_for("s-u1") is None and view.item_for("msg_side_1") is None
    assert view.excluded["s-u1"] == view.excluded["msg_side_1"] == "sidechain"
    assert [r.message_id for r in view.requests] == ["msg_01", "msg_02", "msg_03"]
    assert ctx.model == "claude-sonnet-4-5-20250929", "a sidechain's model does not become the session's"
    assert parsed.session.model == "claude-sonnet-4-5-20250929"
    main_ids = [m.id for m in ctx.messages if not m.sidechain]
    assert [i.message_id for i in view.items if i.kind == "message"] == main_ids


def test_summary_line_becomes_the_title(tmp_path: Path) -> None:
    records = [
        {"type": "summary", "summary": "Listing project files", "leafUuid": "a3"},
        *basic_conversation(),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "titled.jsonl", records))
    assert parsed.session.title == "Listing project files"
    assert len(parsed.messages) == 4, "a summary line is not a message"
    untitled = parse_file(write_jsonl(tmp_path / "untitled.jsonl", basic_conversation()))
    assert untitled.session.title == "List the files in the project, please."


def test_other_record_types_are_counted_and_skipped(tmp_path: Path) -> None:
    base = {"sessionId": "synthetic-session", "uuid": "x", "timestamp": "2025-06-01T10:00:00Z"}
    records = [
        *basic_conversation()[:1],
        {**base, "uuid": "p1", "type": "progress", "data": {"type": "hook_progress"}},
        {**base, "uuid": "p2", "type": "progress", "data": {"type": "bash_progress"}},
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
        {"type": "queue-operation", "operation": "enqueue", "content": "later"},
        {**base, "uuid": "sys1", "type": "system", "subtype": "turn_duration"},
        {**base, "uuid": "w1", "type": "brand-new-record", "message": {"role": "user", "content": "hidden"}},
        *basic_conversation()[1:],
    ]
    parsed = parse_file(write_jsonl(tmp_path / "mixed.jsonl", records))
    assert parsed.skipped_records == {
        "progress": 2,
        "file-history-snapshot": 1,
        "queue-operation": 1,
        "system:turn_duration": 1,
        "unknown:brand-new-record": 1,
    }
    assert parsed.skipped_lines == []
    assert [m.id for m in parsed.messages] == ["u1", "msg_01", "u2", "msg_02"]


def test_malformed_and_truncated_lines_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    good = basic_conversation()
    truncated = json.dumps(cc_user("u9", "this record was cut off mid-write"))[:40]
    path = tmp_path / "damaged.jsonl"
    with path.open("wb") as fh:
        fh.write(b"{this is not json\n")  # line 1
        fh.write(json.dumps(good[0]).encode() + b"\n")  # line 2
        fh.write(b"[1, 2, 3]\n")  # line 3
        fh.write(json.dumps(good[1]).encode() + b"\n")  # line 4
        fh.write(b"\xff\xfe not utf-8 \xc3\x28\n")  # line 5
        fh.write(b"\n")  # line 6: blank, ignored
        for record in good[2:]:  # lines 7-9
            fh.write(json.dumps(record).encode() + b"\n")
        fh.write(truncated.encode())  # line 10, no newline: a file still being written
    parsed = parse_file(path)
    assert [s.line for s in parsed.skipped_lines] == [1, 3, 5, 10]
    assert all(s.reason for s in parsed.skipped_lines)
    assert [m.id for m in parsed.messages] == ["u1", "msg_01", "u2", "msg_02"]
    assert parsed.messages[1].usage is not None and parsed.messages[1].usage.output_tokens == 40

    with Store(tmp_path / "wb.db") as store:
        imported = import_file(store, path)
        assert store.message_count(imported.session.id) == 4
        stored = store.get_session(imported.session.id).metadata["skipped_lines"]
    assert [s["line"] for s in stored] == [1, 3, 5, 10]


def test_record_of_the_wrong_shape_is_skipped_not_fatal(tmp_path: Path) -> None:
    records = [
        *basic_conversation()[:2],
        {"type": "assistant", "uuid": "bad1", "sessionId": "synthetic-session", "message": "not an object"},
        {"type": "user", "uuid": "bad2", "sessionId": "synthetic-session"},
        *basic_conversation()[2:],
    ]
    parsed = parse_file(write_jsonl(tmp_path / "shapes.jsonl", records))
    assert [s.line for s in parsed.skipped_lines] == [3, 4]
    assert len(parsed.messages) == 4


def test_file_without_any_message_fails(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "nothing.jsonl",
        [{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}, "{garbage", "{more garbage"],
    )
    with pytest.raises(ImportFailed, match="no claude-code messages"):
        parse_file(path)


def test_persist_tag_pins_the_message_and_its_response(tmp_path: Path) -> None:
    records = [
        cc_user("u1", "[PERSIST] Always use tabs for indentation."),
        cc_assistant("a1", "msg_01", [text_block("Understood: tabs.")], cc_usage(10, 5, 500, 0)),
        cc_user("u2", "Now write the file."),
        cc_assistant("a2", "msg_02", [text_block("Done.")], cc_usage(10, 3, 0, 520)),
    ]
    path = write_jsonl(tmp_path / "persist.jsonl", records)
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, path)
        ctx = SessionContext.load(store, parsed.session.id)
    assert ctx.overlay.pinned == {"u1", "msg_01"}
    view = ctx.view()
    assert "PERSIST" in view.item_for("u1").badges  # type: ignore[union-attr]
    assert "PERSIST" in view.item_for("msg_01").badges  # type: ignore[union-attr]
    assert "PERSIST" not in view.item_for("u2").badges  # type: ignore[union-attr]


def test_usage_kept_is_the_largest_output_even_if_lines_repeat(tmp_path: Path) -> None:
    """Three lines of one message: the stored usage is the last (complete) one, counted once."""
    records = [
        cc_user("u1", "hi"),
        cc_assistant("a1", "msg_01", [{"type": "thinking", "thinking": "hmm", "signature": "sig"}], cc_usage(4, 1, 900, 0)),
        cc_assistant("a2", "msg_01", [text_block("Hello!")], cc_usage(4, 2, 900, 0)),
        cc_assistant("a3", "msg_01", [tool_use_block("t1", "Read", {"file_path": "/tmp/a"})], cc_usage(4, 57, 900, 0)),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "lines.jsonl", records))
    (assistant,) = [m for m in parsed.messages if m.role == "assistant"]
    assert assistant.usage is not None
    assert (assistant.usage.output_tokens, assistant.usage.total_input) == (57, 904)
    assert [p.kind for p in assistant.parts] == ["thinking", "text", "tool_use"]
    assert assistant.source["lines"] == [2, 3, 4]


def test_a_sidechain_only_transcript_is_a_session_of_its_own(tmp_path: Path) -> None:
    """A sub-agent's ``agent-*.jsonl``: its model, its requests, and a budget anchored on its last report."""
    side = {"sidechain": True}
    records = [
        cc_user("s-u1", "Search the code for TODO", agentId="a1b2", **side),
        cc_assistant("s-a1", "msg_s1", [text_block("Searching.")], cc_usage(3, 40, 9_000, 0),
                     model="claude-haiku-4-5-20251001", **side),
        cc_user("s-u2", "and the tests", agentId="a1b2", **side),
        cc_assistant("s-a2", "msg_s2", [text_block("Found 3.")], cc_usage(5, 60, 800, 9_040),
                     model="claude-haiku-4-5-20251001", **side),
    ]
    path = write_jsonl(tmp_path / "agent-a1b2.jsonl", records)
    with Store(tmp_path / "wb.db") as store:
        ctx = SessionContext.load(store, import_file(store, path).session.id)
    assert ctx.model == ctx.session.model == "claude-haiku-4-5-20251001"
    assert ctx.session.metadata["sidechain"] is True and ctx.session.metadata["agentId"] == "a1b2"
    assert [r.message_id for r in ctx.view().requests] == ["msg_s1", "msg_s2"]
    assert all(m.source["sidechain"] for m in ctx.messages)
    budget = ctx.budget()
    last_input = 5 + 800 + 9_040
    assert budget.source == "reported"
    assert last_input <= budget.used <= last_input + 60  # the last request, plus its answer
    assert ctx.cost().usd > 0


def test_a_sidechain_replay_of_a_parent_response_is_not_merged_into_it(tmp_path: Path) -> None:
    """A sub-agent's records can repeat a response of the main thread (same API id, ``isSidechain``): the
    main message keeps its own blocks and usage, and the replay is a sidechain message of its own."""
    records = [
        cc_user("u1", "hi"),
        cc_assistant("a1", "msg_01", [text_block("Hello!")], cc_usage(30, 5, 0, 0)),
        cc_user("s-u1", "Sub-agent: look around", sidechain=True),
        cc_assistant("s-a1", "msg_01", [text_block("Hello!")], cc_usage(50_010, 5, 0, 0), sidechain=True),
        cc_assistant("s-a2", "msg_01", [text_block("and more")], cc_usage(50_010, 9, 0, 0), sidechain=True),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "replay.jsonl", records))
    main = [m for m in parsed.messages if m.role == "assistant" and not m.sidechain]
    side = [m for m in parsed.messages if m.role == "assistant" and m.sidechain]
    assert [(m.id, m.usage.total_input if m.usage else None, len(m.parts)) for m in main] == [("msg_01", 30, 1)]
    assert len(side) == 1 and side[0].id != "msg_01", "the replay is one message of its own"
    assert [p.kind for p in side[0].parts] == ["text", "text"] and side[0].usage is not None
    assert side[0].usage.output_tokens == 9
    assert len({m.id for m in parsed.messages}) == len(parsed.messages)
