"""Telling sessions apart: what a proxied request says of its session (a title call, the working directory),
how the session list groups sessions, and the text and JSON of ``sessions``, ``import`` and ``inspect``."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import claude_fixture
from test_tui_snapshots_sessions import SESSIONS, conversation, record_claude_code, title_call

from workbench.cli import main
from workbench.engine.sources.session_list import grouped
from workbench.engine.sources.side_calls import is_title_call, working_directory
from workbench.engine.transcript.models import Session
from workbench.engine.transcript.sessions import NO_TOOLS
from workbench.proxy.threads import tools_signature

DATE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$")


def _run(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _cells(lines: list[str], right: set[str]) -> list[dict[str, str]]:
    """Rows cut into cells (two spaces or more part them); each cell starts where its header starts, or, in the
    ``right`` columns, ends where its header ends: the columns are aligned."""
    def spans(line: str) -> list[tuple[int, int, str]]:
        return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]

    header = spans(lines[0])
    rows = []
    for line in lines[1:]:
        cells = spans(line)
        assert len(cells) == len(header), line
        for (start, end, name), (cell_start, cell_end, _) in zip(header, cells, strict=True):
            assert (cell_end == end) if name in right else (cell_start == start), f"{name} misaligned in {line!r}"
        rows.append({name: cell for (_, _, name), (_, _, cell) in zip(header, cells, strict=True)})
    return rows


# --- what a request says ------------------------------------------------------------------------------


def test_a_title_call_is_a_small_request_without_tools_that_asks_for_a_title() -> None:
    session = SESSIONS["/home/ada/shop"]
    assert is_title_call(title_call(session))
    assert not is_title_call(conversation("/home/ada/shop", session)), "it sends tools"
    assert not is_title_call({**title_call(session), "system": "You answer questions about files."})
    assert not is_title_call({**title_call(session), "messages": title_call(session)["messages"] * 3})
    assert working_directory(conversation("/home/ada/shop", session)) == "/home/ada/shop"
    assert working_directory(title_call(session)) is None
    assert working_directory({"system": "<env>\nWorking directory: /srv/app\nIs directory a git repo: No\n</env>"}) \
        == "/srv/app", "as Claude Code 1.x and 2.0 said it"
    assert tools_signature(title_call(session)) == NO_TOOLS


def test_sub_agents_and_side_calls_recorded_before_they_were_marked_group_under_their_session() -> None:
    """A sub-agent names its parent; an unmarked call without tools goes under its agent session's
    conversation used last; one of no agent session stays on its own."""
    agent = {"agent_session": "3f2a9c1e-5b7d-4e21-9a0c-1d2e3f4a5b6c"}
    main_session = Session(id="main", source_format="proxy", metadata={**agent, "cwd": "/home/ada/shop",
                                                                     "tools_signature": "abc"})
    side = Session(id="side", title="(proxied request)", source_format="proxy",
                   metadata={**agent, "tools_signature": NO_TOOLS})
    sub = Session(id="sub", source_format="proxy", metadata={**agent, "parent_session": "main", "tools_signature": "abc"})
    alone = Session(id="alone", source_format="proxy", metadata={"tools_signature": NO_TOOLS})
    subsub = Session(id="subsub", source_format="engine", metadata={"parent_session": "sub"})
    rows = grouped([(side, 2), (alone, 2), (subsub, 4), (sub, 6), (main_session, 10)])
    assert [(r.session.id, r.role, r.parent, r.directory, r.branch) for r in rows] == [
        ("alone", "session", None, None, ""),
        ("main", "session", None, "/home/ada/shop", ""),
        ("side", "side call", "main", "/home/ada/shop", "└ "),
        ("sub", "sub-agent", "main", "/home/ada/shop", "└ "),
        ("subsub", "sub-agent", "sub", "/home/ada/shop", "  └ "),
    ]


# --- workbench sessions ---------------------------------------------------------------------------------


@pytest.fixture
def listed_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, str]]:
    """Two proxied Claude Code sessions with their title calls, and an imported transcript with a sub-agent."""
    db = tmp_path / "wb.db"
    ids = record_claude_code(db, tmp_path)
    code, out, err = _run(capsys, "import", claude_fixture("subagent"), "--json", "--db", db)
    assert code == 0, err
    payload = json.loads(out)
    ids["imported"], ids["sub-agent"] = payload["session_id"], payload["subagents"][0]["session_id"]
    return db, ids


def test_sessions_prints_aligned_columns_with_use_context_and_cost(listed_db: tuple[Path, dict[str, str]],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db, ids = listed_db
    code, out, err = _run(capsys, "sessions", "--db", db)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["id", "last", "used", "messages", "context", "cost", "format", "agent", "session",
                                "directory", "title"]
    rows = _cells(lines, right={"messages", "context", "cost"})
    by_id = {row["id"]: row for row in rows}
    assert set(by_id) == set(ids.values())
    shop, title = by_id[ids["shop"]], by_id[ids["shop title"]]
    assert DATE.match(shop["last used"]) and DATE.match(title["last used"])
    assert (shop["messages"], shop["context"], shop["cost"]) == ("2", "9,000", "$0.027")
    assert (shop["format"], shop["agent session"], shop["directory"], shop["title"]) == (
        "proxy", SESSIONS["/home/ada/shop"], "/home/ada/shop", "read the readme")
    assert (title["title"], title["agent session"], title["context"]) == ("└ title call", SESSIONS["/home/ada/shop"], "120")
    order = [row["id"] for row in rows]
    for child, parent in (("shop title", "shop"), ("blog title", "blog"), ("sub-agent", "imported")):
        assert order.index(ids[child]) == order.index(ids[parent]) + 1, f"{child} right under {parent}"
    imported = by_id[ids["imported"]]
    assert imported["directory"] != "—" and imported["agent session"] != "—" and imported["cost"].startswith("$")
    assert by_id[ids["sub-agent"]]["title"].startswith("└ ")


def test_sessions_json_carries_the_same_fields(listed_db: tuple[Path, dict[str, str]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    db, ids = listed_db
    code, out, _ = _run(capsys, "sessions", "--json", "--db", db)
    assert code == 0
    rows = {row["session_id"]: row for row in json.loads(out)}
    assert set(rows[ids["shop"]]) == {"session_id", "title", "format", "role", "parent", "directory", "agent_session",
                                      "messages", "context_tokens", "cost_usd", "updated_at"}
    shop, title = rows[ids["shop"]], rows[ids["shop title"]]
    assert (shop["role"], shop["directory"], shop["agent_session"], shop["messages"], shop["context_tokens"]) == (
        "session", "/home/ada/shop", SESSIONS["/home/ada/shop"], 2, 9_000)
    assert shop["cost_usd"] == pytest.approx(9_000 * 3e-6 + 20 * 15e-6)
    assert (title["role"], title["parent"], title["directory"]) == ("title call", ids["shop"], "/home/ada/shop")
    assert (rows[ids["sub-agent"]]["role"], rows[ids["sub-agent"]]["parent"]) == ("sub-agent", ids["imported"])
    code, out, _ = _run(capsys, "inspect", ids["imported"], "--json", "--db", db)
    report = json.loads(out)
    assert rows[ids["imported"]]["cost_usd"] == pytest.approx(report["cost"]["usd"]), "the cost the session's view adds up"
    assert rows[ids["imported"]]["context_tokens"] == report["requests"][-1]["reported_input_tokens"]


def test_deleting_a_session_takes_its_title_call_with_it(listed_db: tuple[Path, dict[str, str]],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    db, ids = listed_db
    code, out, err = _run(capsys, "sessions", "--delete", ids["shop"], "--json", "--db", db)
    assert code == 0, err
    assert json.loads(out) == {"deleted": ids["shop"], "messages": 4, "subagent_sessions": [],
                               "side_calls": [ids["shop title"]], "warnings": []}
    code, out, _ = _run(capsys, "sessions", "--json", "--db", db)
    assert {row["session_id"] for row in json.loads(out)} == {ids["blog"], ids["blog title"], ids["imported"],
                                                              ids["sub-agent"]}
    code, out, _ = _run(capsys, "sessions", "--delete", ids["blog"], "--db", db)
    assert out == f"deleted {ids['blog']} (read the readme): 4 messages and 1 title or side call\n"


# --- workbench import, inspect -----------------------------------------------------------------------------


def test_import_prints_one_line_that_agrees_with_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    code, out, err = _run(capsys, "import", claude_fixture("subagent"), "--db", db)
    assert code == 0
    code, again, _ = _run(capsys, "import", claude_fixture("subagent"), "--json", "--db", db)
    payload = json.loads(again)
    assert out == (f"imported {payload['messages']:,} messages · {payload['tokens']:,} tokens · 0 skipped lines · "
                   f"session {payload['session_id']}\n")
    assert "sub-agent" in err, "the sub-agents it found are told on stderr"


def test_inspect_names_the_tool_and_first_words_of_each_heavy_message(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wb.db"
    code, out, _ = _run(capsys, "inspect", claude_fixture("subagent"), "--json", "--db", db)
    assert code == 0
    heaviest = json.loads(out)["heaviest"]
    assert len(heaviest) == 10 and [h["tokens"] for h in heaviest] == sorted((h["tokens"] for h in heaviest), reverse=True)
    assert any(h["tools"] for h in heaviest) and all(h["preview"] for h in heaviest)
    code, text, _ = _run(capsys, "inspect", claude_fixture("subagent"), "--db", db)
    table = text[text.index("Heaviest messages in context"):].splitlines()
    assert [c.strip() for c in table[2].strip("┃").split("┃")] == ["#", "role", "tool", "tokens", "preview"]
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in table[4:4 + len(heaviest)]]
    for row, heavy in zip(rows, heaviest, strict=True):
        assert row[:4] == [f"{heavy['position']:,}", heavy["role"], ", ".join(heavy["tools"]) or "—",
                           f"{heavy['tokens']:,}"]
        assert heavy["preview"].startswith(row[4].rstrip("…"))
        assert heavy["message_id"] not in " ".join(row)
