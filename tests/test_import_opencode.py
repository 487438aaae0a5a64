"""OpenCode export import, checked against the two real exports and small synthetic ones.

Facts are recomputed from the raw JSON here (plain ``json``, not the importer) and
compared with the fixtures README and with what the importer stored.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import UNSUPPORTED_FIXTURES, fixture_path, sqlite_db

from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.report import inspect_report
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ImportFailed
from workbench.engine.settings.limits import lookup
from workbench.engine.transcript.importers import detect_format, import_file, opencode_files, parse_file
from workbench.engine.transcript.importers import opencode as oc
from workbench.engine.transcript.models import ImagePart, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store

# (messages, user, assistant, tool parts, tool errors, compacted tool parts, reasoning parts, aborted) per README
FACTS = {
    "opencode-hidden-moon": (114, 6, 108, 146, 3, 31, 94, 2),
    "opencode-nimble-pixel": (8, 2, 6, 4, 0, 0, 6, 1),
}
KEYS = list(FACTS)


def raw(key: str) -> dict[str, Any]:
    return json.loads(fixture_path(UNSUPPORTED_FIXTURES[key]).read_text(encoding="utf-8"))


def raw_parts(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for m in doc["messages"] for p in m["parts"] if p["type"] == kind]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("opencode")
    out: dict[str, tuple[Path, str]] = {}
    for key in KEYS:
        db = root / f"{key}.db"
        with Store(db) as store:
            out[key] = (db, import_file(store, fixture_path(UNSUPPORTED_FIXTURES[key])).session.id)
    return out


def load(imported: dict[str, tuple[Path, str]], key: str) -> SessionContext:
    db, session_id = imported[key]
    with Store(db) as store:
        return SessionContext.load(store, session_id)


# --- the real exports -------------------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_raw_export_matches_documented_facts(key: str) -> None:
    doc = raw(key)
    messages, users, assistants, tools, errors, compacted, reasoning, aborted = FACTS[key]
    roles = Counter(m["info"]["role"] for m in doc["messages"])
    assert len(doc["messages"]) == messages
    assert (roles["user"], roles["assistant"]) == (users, assistants)
    tool_parts = raw_parts(doc, "tool")
    assert len(tool_parts) == tools
    assert sum(p["state"]["status"] == "error" for p in tool_parts) == errors
    assert sum("compacted" in p["state"]["time"] for p in tool_parts) == compacted
    assert len(raw_parts(doc, "reasoning")) == reasoning
    assert sum(1 for m in doc["messages"] if m["info"].get("error")) == aborted


@pytest.mark.parametrize("key", KEYS)
def test_messages_tools_and_results(key: str, imported: dict[str, tuple[Path, str]]) -> None:
    doc = raw(key)
    ctx = load(imported, key)
    _, users, assistants, tools, errors, _, reasoning, _ = FACTS[key]
    with_tools = sum(1 for m in doc["messages"] if any(p["type"] == "tool" for p in m["parts"]))
    kinds = Counter((m.role, m.kind) for m in ctx.messages)
    assert kinds == {("user", "message"): users, ("assistant", "message"): assistants, ("user", "tool_result"): with_tools}
    assert [m.index for m in ctx.messages] == list(range(len(ctx.messages)))
    assert [m.id for m in ctx.messages if m.role == "assistant"] == [
        m["info"]["id"] for m in doc["messages"] if m["info"]["role"] == "assistant"
    ]
    uses = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolUsePart)]
    results = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert len(uses) == len(results) == tools
    assert [u.id for u in uses] == [r.tool_use_id for r in results]
    assert [u.id for u in uses] == [p["callID"] for p in raw_parts(doc, "tool")]
    assert sum(r.is_error for r in results) == errors
    assert sum(isinstance(p, ThinkingPart) for m in ctx.messages for p in m.parts) == reasoning
    # Each tool_result message answers exactly the assistant message before it.
    for m in ctx.messages:
        if m.kind == "tool_result":
            before = ctx.messages[m.index - 1]
            assert m.source["results_of"] == before.id
            assert [p.tool_use_id for p in m.tool_results()] == [p.id for p in before.tool_uses()]
    assert ctx.session.title == doc["info"]["title"]
    assert ctx.session.created_at == datetime.fromtimestamp(doc["info"]["time"]["created"] / 1000, tz=UTC)
    assert ctx.messages[0].created_at == datetime.fromtimestamp(doc["messages"][0]["info"]["time"]["created"] / 1000, tz=UTC)


@pytest.mark.parametrize("key", KEYS)
def test_skipped_part_types_are_counted(key: str) -> None:
    doc = raw(key)
    parsed = parse_file(fixture_path(UNSUPPORTED_FIXTURES[key]))
    assert parsed.skipped_lines == []
    for kind in ("step-start", "step-finish", "patch"):
        assert parsed.skipped_records.get(f"part:{kind}", 0) == len(raw_parts(doc, kind))
    plain_files = [p for p in raw_parts(doc, "file") if p["mime"] in ("text/plain", "application/x-directory")]
    assert sum(v for k, v in parsed.skipped_records.items() if k.startswith("part:file:")) == len(plain_files)
    assert not any(k.startswith("unknown-part:") for k in parsed.skipped_records)


@pytest.mark.parametrize("key", KEYS)
def test_usage_is_info_tokens_counted_once(key: str, imported: dict[str, tuple[Path, str]]) -> None:
    doc = raw(key)
    ctx = load(imported, key)
    expected: Counter[str] = Counter()
    for m in doc["messages"]:
        tokens = m["info"].get("tokens")
        if tokens:
            expected.update(input=tokens["input"], output=tokens["output"], read=tokens["cache"]["read"],
                            write=tokens["cache"]["write"])
    usages = [m.usage for m in ctx.messages if m.usage is not None]
    got = Counter(
        input=sum(u.input_tokens for u in usages), output=sum(u.output_tokens for u in usages),
        read=sum(u.cache_read_input_tokens for u in usages), write=sum(u.cache_creation_input_tokens for u in usages),
    )
    assert +got == +expected
    if key == "opencode-hidden-moon":
        assert (got["input"], got["output"], got["read"]) == (511_913, 27_646, 8_426_752)
    # Aborted requests (all-zero tokens) have no usage; every other assistant message has it.
    _, _, assistants, _, _, _, _, aborted = FACTS[key]
    assert len(usages) == assistants - aborted
    for m in ctx.messages:
        if m.source.get("error") == "MessageAbortedError":
            assert m.usage is None
    db, session_id = imported[key]
    with Store(db) as store:
        stored = sqlite_db(store).execute("SELECT COUNT(*) FROM usage_records WHERE session_id = ?", [session_id]).fetchone()[0]
    assert stored == len(usages)


@pytest.mark.parametrize("key", KEYS)
def test_inspect_lists_one_request_per_reported_usage(key: str, imported: dict[str, tuple[Path, str]]) -> None:
    doc = raw(key)
    ctx = load(imported, key)
    report = inspect_report(ctx)
    assert report["format"] == "opencode"
    assert report["model"] == "gpt-5.3-codex" and report["known_model"] is True
    expected = [
        (m["info"]["id"], t["input"] + t["cache"]["read"] + t["cache"]["write"])
        for m in doc["messages"]
        if (t := m["info"].get("tokens")) and (t["input"] or t["output"])
    ]
    assert [(r["message_id"], r["reported_input_tokens"]) for r in report["requests"]] == expected
    assert report["budget"]["source"] in ("reported", "calibrated")  # nimble-pixel ends on an aborted request


def test_gpt5_codex_models_have_a_window() -> None:
    limits, known = lookup("gpt-5.3-codex")
    assert known and limits.context_window == 400_000


def test_compacted_tool_outputs_become_import_prunes(imported: dict[str, tuple[Path, str]]) -> None:
    doc = raw("opencode-hidden-moon")
    ctx = load(imported, "opencode-hidden-moon")
    compacted = [p for p in raw_parts(doc, "tool") if "compacted" in p["state"]["time"]]
    prunes = [e for e in ctx.events if e.action == "prune"]
    assert len(prunes) == len(compacted) == 31
    assert all(e.origin == "import" and e.part_index is not None for e in prunes)
    # Dated at OpenCode's compaction time, so the estimator knows which requests saw the placeholder.
    expected_times = sorted(datetime.fromtimestamp(p["state"]["time"]["compacted"] / 1000, tz=UTC) for p in compacted)
    assert sorted(e.created_at for e in prunes if e.created_at) == expected_times
    by_id = {m.id: m for m in ctx.messages}
    originals = {p["callID"]: p["state"]["output"] for p in compacted}
    for e in prunes:
        part = by_id[e.message_id].parts[e.part_index or 0]
        assert isinstance(part, ToolResultPart)
        assert part.text == originals[part.tool_use_id], "the transcript keeps the original output"
        shown = ctx.view().item_for(e.message_id)
        assert shown is not None and "pruned" in shown.badges
        assert shown.parts[e.part_index or 0].text == PRUNED_PLACEHOLDER  # type: ignore[union-attr]
    placeholders = sum(
        1 for item in ctx.view().items for p in item.parts if isinstance(p, ToolResultPart) and p.text == PRUNED_PLACEHOLDER
    )
    assert placeholders == 31


def test_reimport_is_idempotent(tmp_path: Path) -> None:
    path = fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"])
    with Store(tmp_path / "wb.db") as store:
        first = import_file(store, path).session.id
        second = import_file(store, path).session.id
        assert first == second and first.startswith("oc-")
        assert store.message_count(first) == 12
        assert len(store.list_sessions()) == 1


# --- synthetic exports --------------------------------------------------------------


def _info(mid: str, role: str, created: int, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"id": mid, "role": role, "sessionID": "ses_x", "time": {"created": created}}
    if role == "assistant":
        info |= {"modelID": "gpt-5.3-codex", "providerID": "openai", "mode": "build",
                 "tokens": {"input": 100, "output": 10, "reasoning": 0, "cache": {"read": 900, "write": 0}}}
    return info | extra


def _export(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"info": {"id": "ses_x", "title": "Synthetic", "time": {"created": 1_700_000_000_000}}, "messages": messages}


def _write(tmp_path: Path, doc: dict[str, Any] | str, name: str = "export.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2), encoding="utf-8")
    return path


def _tool(call: str, status: str = "completed", **state: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"status": status, "input": {"filePath": "a.py"}, "time": {"start": 1, "end": 2}}
    if status == "completed":
        base["output"] = "file contents"
    return {"type": "tool", "callID": call, "tool": "read", "state": base | state}


def _conversation() -> list[dict[str, Any]]:
    return [
        {"info": _info("m1", "user", 1_700_000_000_000), "parts": [{"type": "text", "text": "Read a.py"}]},
        {"info": _info("m2", "assistant", 1_700_000_001_000), "parts": [
            {"type": "step-start"}, {"type": "reasoning", "text": "Reading."}, _tool("c1"), {"type": "step-finish"},
        ]},
        {"info": _info("m3", "assistant", 1_700_000_002_000), "parts": [{"type": "text", "text": "Done."}]},
    ]


def test_compaction_part_and_summary_message_make_a_pivot(tmp_path: Path) -> None:
    messages = _conversation() + [
        {"info": _info("m4", "user", 1_700_000_003_000), "parts": [{"type": "compaction", "auto": True}]},
        {"info": _info("m5", "assistant", 1_700_000_004_000, summary=True, mode="compaction"),
         "parts": [{"type": "text", "text": "We read a.py."}]},
        {"info": _info("m6", "user", 1_700_000_005_000), "parts": [{"type": "text", "text": "Next?"}]},
    ]
    parsed = parse_file(_write(tmp_path, _export(messages)))
    by_id = {m.id: m for m in parsed.messages}
    pivot = next(e for e in parsed.events if e.action == "pivot")
    assert pivot.message_id == "m4" and pivot.data["trigger"] == "auto" and pivot.data["summary_id"] == "m5"
    assert pivot.data["pre_tokens"] == 1010
    assert [e.message_id for e in parsed.events if e.action == "summary"] == ["m5"]
    assert by_id["m5"].kind == "summary"
    assert by_id["m4"].text == oc.COMPACTION_PROMPT
    ctx = SessionContext(parsed.session, parsed.messages, parsed.events)
    view = ctx.view()
    assert {i.message_id for i in view.items if i.kind == "message"} == {"m4", "m5", "m6"}
    assert view.excluded["m1"] == "before-compaction"
    assert len(view.compactions) == 1 and view.compactions[0].trigger == "auto"


def test_summary_without_compaction_part_pivots_on_itself(tmp_path: Path) -> None:
    messages = _conversation() + [
        {"info": _info("m5", "assistant", 1_700_000_004_000, summary=True), "parts": [{"type": "text", "text": "S"}]},
    ]
    parsed = parse_file(_write(tmp_path, _export(messages)))
    assert [(e.action, e.message_id) for e in parsed.events] == [("summary", "m5"), ("pivot", "m5")]


def test_user_summary_object_is_not_a_compaction(tmp_path: Path) -> None:
    messages = _conversation()
    messages[0]["info"]["summary"] = {"title": "t", "diffs": []}
    parsed = parse_file(_write(tmp_path, _export(messages)))
    assert parsed.events == [] and all(m.kind != "summary" for m in parsed.messages)


def test_files_errors_interrupted_tools_and_unknown_parts(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [
        {"info": _info("m1", "user", 1_700_000_000_000), "parts": [
            {"type": "text", "text": "Look at these"},
            {"type": "text", "text": "hidden from the model", "ignored": True},
            {"type": "file", "mime": "image/png", "filename": "shot.png", "url": "data:image/png;base64,AAAABBBB"},
            {"type": "file", "mime": "application/pdf", "filename": "spec.pdf", "url": "file:///spec.pdf"},
            {"type": "file", "mime": "text/plain", "filename": "a.py", "url": "file:///a.py"},
            {"type": "hologram", "text": "?"},
            "not a part",
        ]},
        {"info": _info("m2", "assistant", 1_700_000_001_000), "parts": [
            _tool("c1", "error", error="Error: File not found"),
            _tool("c2", "running"),
            {"type": "tool", "callID": "c3", "tool": "bash", "state": "garbage"},
        ]},
    ]
    parsed = parse_file(_write(tmp_path, _export(messages)))
    user, assistant, results = parsed.messages
    assert [type(p).__name__ for p in user.parts] == ["TextPart", "ImagePart", "TextPart"]
    image = user.parts[1]
    assert isinstance(image, ImagePart) and image.name == "shot.png" and image.byte_size == 6
    assert user.parts[2] == TextPart(text="[Attached application/pdf: spec.pdf]")
    assert "hidden from the model" not in user.text
    assert parsed.skipped_records["unknown-part:hologram"] == 1
    assert parsed.skipped_records["part:text-ignored"] == 1
    assert parsed.skipped_records["part:not-an-object"] == 1
    assert parsed.skipped_records["part:file:text/plain"] == 1
    assert [p.name for p in assistant.tool_uses()] == ["read", "read", "bash"]
    texts = [(p.text, p.is_error) for p in results.tool_results()]
    assert texts == [("Error: File not found", True), (oc.INTERRUPTED, True), (oc.INTERRUPTED, True)]


def test_truncated_export_keeps_the_complete_messages(tmp_path: Path) -> None:
    source = fixture_path(UNSUPPORTED_FIXTURES["opencode-hidden-moon"]).read_bytes()
    cut = _write(tmp_path, source[: len(source) // 2].decode("utf-8", errors="ignore"), "cut.json")
    assert detect_format(cut) == "opencode"
    parsed = parse_file(cut)
    doc = raw("opencode-hidden-moon")
    assert len(parsed.skipped_lines) == 1
    skipped = parsed.skipped_lines[0]
    assert "truncated" in skipped.reason
    complete = int(skipped.reason.split()[1].rstrip(":"))
    assert 0 < complete < len(doc["messages"])
    assistants = [m for m in parsed.messages if m.role == "assistant"]
    assert [m.id for m in assistants] == [m["info"]["id"] for m in doc["messages"][:complete] if m["info"]["role"] == "assistant"]
    assert source.decode()[: 10**9].splitlines()[skipped.line - 1].strip() == "{", "the line where the message starts"
    assert parsed.session.title == doc["info"]["title"]


def test_one_malformed_message_is_skipped_and_named(tmp_path: Path) -> None:
    text = json.dumps(_export(_conversation()), indent=2)
    broken = text.replace('"text": "Done."', '"text": "Done." oops', 1)
    parsed = parse_file(_write(tmp_path, broken))
    assert [m.id for m in parsed.messages if m.role != "user" or m.kind == "message"] == ["m1", "m2"]
    assert len(parsed.skipped_lines) == 1
    assert parsed.skipped_lines[0].reason == "message 2: malformed JSON"
    assert broken.splitlines()[parsed.skipped_lines[0].line - 1].strip() == "{"


def test_messages_of_the_wrong_shape_are_skipped(tmp_path: Path) -> None:
    odd: list[Any] = [5, {"parts": []}, {"info": {"role": "tool"}, "parts": []}]
    doc = _export(_conversation() + odd)
    parsed = parse_file(_write(tmp_path, doc))
    assert len(parsed.messages) == 4
    assert [s.reason for s in parsed.skipped_lines] == ["message 3: no 'info' object", "message 4: no 'info' object"]
    assert parsed.skipped_records["role:tool"] == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2, 3]", "is a JSON object"),
        ('{"info": {}, "messages": 5}', "no 'messages' list"),
        ('{"info": {"title": "x"}, "messages": []}', "no opencode messages"),
    ],
)
def test_unusable_exports_fail_clearly(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(ImportFailed, match=message):
        parse_file(_write(tmp_path, content), "opencode")


def test_forcing_opencode_on_jsonl_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text('{"type": "user"}\n{"type": "assistant"}\n', encoding="utf-8")
    with pytest.raises(ImportFailed, match="JSON Lines"):
        parse_file(path, "opencode")


def test_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opencode_files, "MAX_FILE_BYTES", 100)
    with pytest.raises(ImportFailed, match="MiB"):
        parse_file(_write(tmp_path, _export(_conversation())))


def test_file_storage_session_is_assembled(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    session_file = storage / "session" / "proj1" / "ses_x.json"
    session_file.parent.mkdir(parents=True)
    session_file.write_text(json.dumps({"id": "ses_x", "title": "From storage", "time": {"created": 1}}), encoding="utf-8")
    for message in _conversation():
        mid = message["info"]["id"]
        (storage / "message" / "ses_x").mkdir(parents=True, exist_ok=True)
        (storage / "message" / "ses_x" / f"{mid}.json").write_text(json.dumps(message["info"]), encoding="utf-8")
        for n, part in enumerate(message["parts"]):
            (storage / "part" / mid).mkdir(parents=True, exist_ok=True)
            (storage / "part" / mid / f"prt_{n:03d}.json").write_text(json.dumps(part), encoding="utf-8")
    assert detect_format(session_file) == "opencode"
    parsed = parse_file(session_file)
    assert parsed.session.title == "From storage"
    assert [m.id for m in parsed.messages] == ["m1", "m2", "m2:results", "m3"]
    assert parsed.messages[2].tool_results()[0].text == "file contents"
