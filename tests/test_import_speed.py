"""How an import reports, what it refuses and how it holds memory: progress only on a terminal, a runaway
line named with the limit, batched writes storing exactly what one-row-at-a-time writes stored, and a Claude
Code transcript stored as it is read (bounded memory) storing exactly what a whole parse reads."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cc_assistant, cc_usage, cc_user, claude_fixture, run_cli, sqlite_db, text_block, write_jsonl

from workbench.engine.transcript import importers
from workbench.engine.transcript.importers import SAVE_BATCH, claude_code, import_file, parse_file
from workbench.engine.transcript.importers.reading import MAX_LINE_BYTES
from workbench.engine.transcript.models import Message, TextPart, Usage
from workbench.engine.transcript.store import Store


def _long_transcript(path: Path, turns: int) -> Path:
    records: list[dict[str, object]] = []
    for n in range(turns):
        records.append(cc_user(f"u{n}", f"question {n}", parent=f"a{n - 1}" if n else None))
        records.append(cc_assistant(f"a{n}", f"msg_{n}", [text_block(f"answer {n}")], cc_usage(100 + n, 9),
                                    parent=f"u{n}"))
    return write_jsonl(path, records)


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``python -m workbench ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=terminal, env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"})
    os.close(terminal)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=60)
    os.close(controller)
    return code, out, seen.decode(errors="replace")


def test_an_import_on_a_terminal_shows_progress_and_json_or_a_pipe_shows_none(tmp_path: Path) -> None:
    path = _long_transcript(tmp_path / "long.jsonl", SAVE_BATCH)  # two batches to store
    code, out, terminal = _on_a_terminal(["import", str(path), "--db", str(tmp_path / "a.db")], tmp_path)
    assert code == 0 and out.startswith(f"imported {2 * SAVE_BATCH:,} messages · ") and " · session cc-" in out
    assert "long.jsonl" in terminal  # the bar names the file it follows

    code, out, terminal = _on_a_terminal(["import", str(path), "--json", "--db", str(tmp_path / "b.db")], tmp_path)
    assert code == 0 and terminal == ""
    report = json.loads(out)
    assert set(report) == {"session_id", "messages", "tokens", "skipped_lines", "subagents", "warnings"}
    assert report["messages"] == 2 * SAVE_BATCH

    piped = run_cli(["import", path, "--db", tmp_path / "c.db"], cwd=tmp_path)
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout.split()[-1] == report["session_id"]


def test_a_single_line_over_the_limit_is_refused_naming_the_line_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "one-line.jsonl"
    record = cc_user("u1", "x" * (MAX_LINE_BYTES + 1024))
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = run_cli(["import", path, "--db", tmp_path / "wb.db"], cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "line 1" in lines[0] and f"longer than {MAX_LINE_BYTES // 2**20} MiB" in lines[0]


def test_batched_writes_store_each_message_part_and_usage_once(tmp_path: Path) -> None:
    path = claude_fixture("session-196820da")
    with Store(tmp_path / "wb.db") as store:
        first = import_file(store, path)
        again = import_file(store, path)  # a second import replaces, never duplicates
        sid = first.session.id
        assert again.session.id == sid
        stored = store.load_messages(sid)
        assert [m.id for m in stored] == [m.id for m in first.messages]
        assert [[p.model_dump() for p in m.parts] for m in stored] == [[p.model_dump() for p in m.parts]
                                                                       for m in first.messages]
        parts = sqlite_db(store).execute("SELECT COUNT(*) FROM parts WHERE session_id = ?", [sid]).fetchone()[0]
        assert parts == sum(len(m.parts) for m in first.messages)
        usage = dict(sqlite_db(store).execute(
            "SELECT message_id, output_tokens FROM usage_records WHERE session_id = ?", [sid]).fetchall())
        expected = {m.id: m.usage.output_tokens for m in first.messages if m.usage and not m.sidechain}
        assert usage == expected and expected

        store.record_usages(sid, [(first.messages[1].id, Usage(input_tokens=1, output_tokens=77), 5)])
        row = sqlite_db(store).execute("SELECT output_tokens, estimated_input FROM usage_records WHERE message_id = ?",
                               [first.messages[1].id]).fetchone()
        assert tuple(row) == (77, 5)


def _comparable(messages: list[Message]) -> list[tuple[object, ...]]:
    return [(m.id, m.index, m.role, m.kind, m.sidechain, m.model, m.usage, m.source.get("lines"),
             [p.model_dump() for p in m.parts]) for m in messages]


def _streamed_records() -> list[dict[str, object]]:
    """Thirty turns; the first response's last line comes at the very end (further back than any hold)."""
    records: list[dict[str, object]] = [cc_user("u0", "first question")]
    records.append(cc_assistant("a0", "msg_0", [text_block("part one")], cc_usage(100, 3), parent="u0"))
    for n in range(1, 30):
        records.append(cc_user(f"u{n}", f"question {n}", parent=f"a{n - 1}"))
        records.append(cc_assistant(f"a{n}", f"msg_{n}", [text_block(f"answer {n}")], cc_usage(100 + n, 9),
                                    parent=f"u{n}"))
    records.append(cc_user("u5", "a repeated record"))  # the same uuid again: listed as skipped
    records.append(cc_assistant("a0b", "msg_0", [text_block("part two")], cc_usage(100, 40), parent="a0"))
    return records


def test_a_streamed_import_stores_what_a_whole_parse_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _streamed_records())
    whole = parse_file(path)
    monkeypatch.setattr(importers, "SAVE_BATCH", 4)  # many batches, and a merge into a stored message
    with Store(tmp_path / "wb.db") as store:
        streamed = import_file(store, path)
        assert streamed.stored == len(whole.messages) == len(streamed.messages)
        assert _comparable(streamed.messages) == _comparable(whole.messages)
        assert _comparable(store.load_messages(streamed.session.id)) == _comparable(whole.messages)
        first = store.load_messages(streamed.session.id, ["msg_0"])[0]
        assert [p.text for p in first.parts if isinstance(p, TextPart)] == ["part one", "part two"]
        assert first.usage is not None and first.usage.output_tokens == 40
        usage = sqlite_db(store).execute("SELECT output_tokens FROM usage_records WHERE message_id = 'msg_0'").fetchone()
        assert usage[0] == 40
        stored = store.get_session(streamed.session.id)
        assert (stored.title, stored.model, stored.created_at) == (whole.session.title, whole.session.model,
                                                                   whole.session.created_at)
        assert [s.model_dump() for s in streamed.skipped_lines] == [s.model_dump() for s in whole.skipped_lines]
        assert [s.line for s in whole.skipped_lines] == [len(_streamed_records()) - 1]


def test_a_sub_agents_own_transcript_streamed_is_still_its_own_thread(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    records = [cc_user(f"u{n}", f"step {n}", sidechain=True) for n in range(20)]
    path = write_jsonl(tmp_path / "agent-x.jsonl", records)
    monkeypatch.setattr(importers, "SAVE_BATCH", 3)
    with Store(tmp_path / "wb.db") as store:
        streamed = import_file(store, path)
    assert _comparable(streamed.messages) == _comparable(parse_file(path).messages)
    assert not any(m.sidechain for m in streamed.messages) and streamed.session.metadata.get("sidechain") is True


def test_reading_holds_a_bounded_number_of_messages(tmp_path: Path) -> None:
    path = _long_transcript(tmp_path / "long.jsonl", 200)
    reader = claude_code.Reader(path)
    handed: list[Message] = []
    for batch in reader.stream(10):
        assert len(reader.messages) <= 10
        handed += batch
    assert len(handed) >= 380 and len(handed) + len(reader.result().messages) == 400


def test_workbench_import_keeps_no_messages_but_counts_them(tmp_path: Path) -> None:
    path = _long_transcript(tmp_path / "long.jsonl", 30)
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, path, keep_messages=False)
        assert parsed.messages == [] and parsed.stored == 60 == store.message_count(parsed.session.id)


def test_a_claude_code_file_whose_first_line_is_longer_than_the_sniffed_head_is_detected(tmp_path: Path) -> None:
    records = [cc_user("u0", "pasted " * 40_000), cc_assistant("a0", "msg_0", [text_block("ok")], cc_usage(9, 1))]
    path = write_jsonl(tmp_path / "long-first-line.jsonl", records)
    assert len(path.read_text().splitlines()[0]) > 64 * 1024
    assert importers.detect_format(path) == "claude-code"
