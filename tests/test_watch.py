"""Following a transcript while it is written: complete lines only, incremental, and a fresh
start (with a notice) when the file is truncated or replaced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import UNSUPPORTED_FIXTURES, basic_conversation, claude_fixture, fixture_path

from workbench.cli import main
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ImportFailed
from workbench.engine.sources.watch import LiveSession, TranscriptFollower
from workbench.engine.transcript.importers import parse_file


def line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record) + "\n").encode()


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


def test_chunks_with_a_half_written_line(tmp_path: Path) -> None:
    records = basic_conversation()  # u1, a1+a2 (one API message), u2 (tool result), a3
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"")
    follower = TranscriptFollower(path)
    assert follower.poll().empty

    append(path, line(records[0]) + line(records[1]))
    first = follower.poll()
    assert [m.id for m in first.new] == ["u1", "msg_01"] and first.changed == []
    assert first.session is not None and first.session.source_format == "claude-code"

    # The second line of msg_01 arrives in two halves: nothing until it is complete.
    second_line = line(records[2])
    append(path, second_line[:25])
    waiting = follower.poll()
    assert waiting.empty and waiting.skipped == []
    assert follower.offset == len(line(records[0]) + line(records[1]))
    append(path, second_line[25:])
    grown = follower.poll()
    assert grown.new == [] and [m.id for m in grown.changed] == ["msg_01"]
    assert len(grown.changed[0].parts) == 2, "the tool call joined the same API message"

    append(path, line(records[3]) + line(records[4])[:-1])  # last line without its newline yet
    third = follower.poll()
    assert [m.id for m in third.new] == ["u2"]
    append(path, b"\n")
    fourth = follower.poll()
    assert [m.id for m in fourth.new] == ["msg_02"]
    assert follower.poll().empty

    # What was followed is exactly what an import of the finished file gives.
    full = parse_file(path)
    assert [m.model_dump() for m in follower.messages] == [m.model_dump() for m in full.messages]


def test_final_poll_takes_a_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(line(basic_conversation()[0])[:-1])
    follower = TranscriptFollower(path)
    assert follower.poll().empty
    assert [m.id for m in follower.poll(final=True).new] == ["u1"]


def test_bad_lines_are_reported_once_not_raised(tmp_path: Path) -> None:
    records = basic_conversation()
    path = tmp_path / "live.jsonl"
    path.write_bytes(line(records[0]) + b"{broken\n" + b"\xff\xfe\n" + line(records[1]))
    update = TranscriptFollower(path).poll()
    assert [m.id for m in update.new] == ["u1", "msg_01"]
    assert [(s.line, s.reason) for s in update.skipped] == [(2, "malformed JSON"), (3, "not valid UTF-8")]


def test_truncation_rereads_from_the_start(tmp_path: Path) -> None:
    records = basic_conversation()
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(line(r) for r in records))
    follower = TranscriptFollower(path)
    assert len(follower.poll().new) == 4
    with path.open("r+b") as fh:  # same file, cut short (e.g. an editor rewrote it)
        fh.truncate(len(line(records[0])))
    update = follower.poll()
    assert update.reset and any("truncated" in n for n in update.notices)
    assert [m.id for m in update.new] == ["u1"]
    assert [m.id for m in follower.messages] == ["u1"]


def test_replaced_file_rereads_from_the_start(tmp_path: Path) -> None:
    records = basic_conversation()
    path = tmp_path / "live.jsonl"
    path.write_bytes(line(records[0]))
    follower = TranscriptFollower(path)
    follower.poll()
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(b"".join(line(r) for r in records))  # longer, but another file
    os.replace(replacement, path)
    update = follower.poll()
    assert update.reset and any("replaced" in n for n in update.notices)
    assert [m.id for m in update.new] == ["u1", "msg_01", "u2", "msg_02"]


def test_missing_file_is_a_notice_until_it_appears(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    follower = TranscriptFollower(path)
    update = follower.poll()
    assert update.new == [] and "does not exist" in update.notices[0]
    path.write_bytes(line(basic_conversation()[0]))
    assert [m.id for m in follower.poll().new] == ["u1"]


def test_real_transcript_in_chunks_matches_the_import(tmp_path: Path) -> None:
    source = claude_fixture("258c7280").read_bytes()
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"")
    live = LiveSession(path)
    seen: dict[str, int] = {}
    step = len(source) // 9 + 7  # cuts fall mid-line
    for end in range(step, len(source) + step, step):
        path.write_bytes(source[:end])  # same inode, growing
        update = live.poll()
        assert not update.follow.reset and update.follow.skipped == []
        for m in update.follow.new:
            assert m.id not in seen
            seen[m.id] = 1
        for m in update.follow.changed:
            assert m.id in seen
    full = parse_file(path)
    assert list(seen) == [m.id for m in full.messages]
    expected = SessionContext(full.session, full.messages, full.events).budget()
    assert live.ctx is not None and live.ctx.budget().used == expected.used
    assert len(live.ctx.view().compactions) == 1


def test_codex_rollout_is_followed_with_usage(tmp_path: Path) -> None:
    source = fixture_path(UNSUPPORTED_FIXTURES["codex"]).read_bytes().splitlines(keepends=True)
    path = tmp_path / "rollout-live.jsonl"
    path.write_bytes(b"".join(source[:3]))
    follower = TranscriptFollower(path)
    first = follower.poll()
    assert [m.role for m in first.new] == ["system", "user", "assistant"]
    append(path, b"".join(source[3:]))
    follower.poll()
    assert [m.model_dump() for m in follower.messages] == [m.model_dump() for m in parse_file(path).messages]
    token = {"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count", "info": {
        "last_token_usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 5, "total_tokens": 905},
        "total_token_usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 5, "total_tokens": 905},
        "model_context_window": 272000}}}
    append(path, line(token))
    update = follower.poll()
    assert len(update.changed) == 1 and update.changed[0].usage is not None
    assert update.session is not None and update.session.context_window == 272000


def test_opencode_export_cannot_be_followed(tmp_path: Path) -> None:
    follower = TranscriptFollower(fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"]))
    with pytest.raises(ImportFailed, match="only JSONL transcripts"):
        follower.poll()


def test_watch_once_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(line(r) for r in basic_conversation()) + b'{"type": "user", "mess')
    code = main(["watch", str(path), "--once", "--json", "--db", str(tmp_path / "wb.db")])
    out, err = capsys.readouterr()
    assert code == 0, err
    (payload,) = [json.loads(x) for x in out.splitlines()]
    assert payload["new"] == ["u1", "msg_01", "u2", "msg_02"] and payload["skipped_lines"] == []
    assert payload["budget"]["used"] > 0 and payload["session_id"].startswith("cc-")


def test_watch_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["watch", str(tmp_path / "nope.jsonl"), "--once", "--db", str(tmp_path / "wb.db")])
    _, err = capsys.readouterr()
    assert code == 1 and err.startswith("workbench: error:") and len(err.strip().splitlines()) == 1
    export = fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"])
    code = main(["watch", str(export), "--once", "--db", str(tmp_path / "wb.db")])
    _, err = capsys.readouterr()
    assert code == 1 and "only JSONL transcripts" in err and "Traceback" not in err


def test_watch_on_a_terminal_opens_the_view_unless_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """On a terminal ``watch`` opens the workbench view; ``--plain`` keeps printing (a real pseudo-terminal)."""
    import pty

    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8")
    monkeypatch.setattr("sys.stdout", terminal)
    try:
        # The view needs a file that exists (the error says how to wait for one instead): it was chosen.
        code = main(["watch", str(tmp_path / "nope.jsonl"), "--db", str(tmp_path / "wb.db")])
        _, err = capsys.readouterr()
        assert code == 1 and "add --plain" in err

        path = tmp_path / "live.jsonl"
        path.write_bytes(b"".join(line(r) for r in basic_conversation()))
        code = main(["watch", str(path), "--plain", "--once", "--db", str(tmp_path / "wb.db")])
        terminal.flush()
        printed = os.read(master, 65536).decode()
        assert code == 0 and "+4 new" in printed
    finally:
        terminal.close()
        os.close(master)
