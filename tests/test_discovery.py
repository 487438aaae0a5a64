"""Discovery: other agents' session files under $HOME, with size, date and a cheap title."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from helpers import UNSUPPORTED_FIXTURES, basic_conversation, claude_fixture, fixture_path, write_jsonl

from workbench.cli import main
from workbench.engine.sources.discovery import discover
from workbench.engine.transcript.importers import parse_file


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CODEX_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def _touch(path: Path, when: int) -> None:
    os.utime(path, (when, when))


def populate(home: Path) -> dict[str, Path]:
    project = home / ".claude" / "projects" / "-work-app"
    project.mkdir(parents=True)
    claude = write_jsonl(project / "5f1c.jsonl", basic_conversation())
    subagents = project / "5f1c" / "subagents"
    subagents.mkdir(parents=True)
    write_jsonl(subagents / "agent-1.jsonl", basic_conversation())  # not a session of its own
    write_jsonl(project / "agent-a2.jsonl", basic_conversation())  # nor in older versions' layout
    day = home / ".codex" / "sessions" / "2026" / "05" / "11"
    day.mkdir(parents=True)
    codex = day / "rollout-2026-05-11T13-28-45-x.jsonl"
    codex.write_bytes(fixture_path(UNSUPPORTED_FIXTURES["codex"]).read_bytes())
    (day / "notes.txt").write_text("not a rollout", encoding="utf-8")
    storage = home / ".local" / "share" / "opencode" / "storage"
    session = storage / "session" / "proj1" / "ses_abc.json"
    session.parent.mkdir(parents=True)
    session.write_text(json.dumps({"id": "ses_abc", "title": "Storage session", "time": {"created": 1}}), "utf-8")
    (storage / "message" / "ses_abc").mkdir(parents=True)
    (storage / "message" / "ses_abc" / "msg_1.json").write_text(
        json.dumps({"id": "msg_1", "role": "user", "time": {"created": 1}}), "utf-8")
    (storage / "part" / "msg_1").mkdir(parents=True)
    (storage / "part" / "msg_1" / "prt_1.json").write_text(json.dumps({"type": "text", "text": "hello"}), "utf-8")
    _touch(claude, 1_700_000_300)
    _touch(codex, 1_700_000_200)
    _touch(session, 1_700_000_100)
    return {"claude": claude, "codex": codex, "opencode": session}


def test_finds_each_agents_sessions_newest_first(home: Path) -> None:
    paths = populate(home)
    found = discover()
    assert found.notices == []
    assert [(d.format, Path(d.path)) for d in found.sessions] == [
        ("claude-code", paths["claude"]), ("codex", paths["codex"]), ("opencode", paths["opencode"]),
    ]
    claude, codex, opencode = found.sessions
    assert claude.title == "List the files in the project, please."
    assert codex.title is not None and codex.title.startswith("analyze trascript and summarzie action items")
    assert opencode.title == "Storage session"
    assert codex.size == paths["codex"].stat().st_size
    assert claude.modified.timestamp() == 1_700_000_300
    assert all(d.openable for d in found.sessions)
    # Every one of them opens.
    for d in found.sessions:
        assert parse_file(Path(d.path)).session.source_format == d.format


def test_nothing_there_is_an_empty_list(home: Path) -> None:
    assert discover().sessions == []


def test_env_overrides_for_codex_and_xdg(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codex_home = tmp_path / "elsewhere"
    (codex_home / "sessions").mkdir(parents=True)
    write_jsonl(codex_home / "sessions" / "rollout-1.jsonl",
                [{"timestamp": "t", "type": "event_msg", "payload": {"type": "user_message", "message": "Hi codex"}}])
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    [found] = discover().sessions
    assert found.format == "codex" and found.title == "Hi codex"


def test_opencode_database_sessions_are_listed_with_a_hint(home: Path) -> None:
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE session (id TEXT, title TEXT, time_updated INTEGER)")
    conn.execute("INSERT INTO session VALUES ('ses_db1', 'From the database', 1700000000000)")
    conn.commit()
    conn.close()
    [found] = discover().sessions
    assert (found.format, found.title, found.openable) == ("opencode", "From the database", False)
    assert found.hint is not None and "opencode export ses_db1" in found.hint


def test_unknown_opencode_database_is_a_notice(home: Path) -> None:
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    sqlite3.connect(db).close()
    found = discover()
    assert found.sessions == [] and "no session table" in found.notices[0]


def test_extra_directory_finds_exports(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "nimble.json").write_bytes(fixture_path(UNSUPPORTED_FIXTURES["opencode-nimble-pixel"]).read_bytes())
    (folder / "short.jsonl").write_bytes(claude_fixture("short").read_bytes())
    (folder / "junk.json").write_text("[1, 2]", encoding="utf-8")
    found = discover([folder])
    assert sorted((d.format, Path(d.path).name) for d in found.sessions) == [
        ("claude-code", "short.jsonl"), ("opencode", "nimble.json"),
    ]
    titles = {Path(d.path).name: d.title for d in found.sessions}
    assert titles["nimble.json"] == "Re-enable protobuf transport, logging.ts review"
    assert discover([tmp_path / "missing"]).notices == [f"{tmp_path / 'missing'} is not a directory"]


def test_cli_discover_json_and_text(home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    populate(home)
    assert main(["discover", "--json", "--db", str(tmp_path / "wb.db")]) == 0
    out, _ = capsys.readouterr()
    payload = json.loads(out)
    assert payload["total"] == 3 and [s["format"] for s in payload["sessions"]] == ["claude-code", "codex", "opencode"]
    assert main(["discover", "--limit", "1", "--db", str(tmp_path / "wb.db")]) == 0
    out, err = capsys.readouterr()
    assert "List the files in the project" in out and "2 more" in err and "workbench open PATH" in err
