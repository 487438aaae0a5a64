"""Shared helpers for the engine and CLI tests: where things are, what the fixtures hold,
and small builders for synthetic Claude Code transcripts.

The fixture facts below are copied from ``tests/fixtures/README.md``; tests also
recompute them from the raw files, so a wrong number here fails loudly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from workbench.engine.transcript.models import Message, Session, TextPart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"


def sqlite_db(store: Store) -> sqlite_utils.Database:
    """sqlite-utils over a store's own connection, for tests that look at the tables themselves."""
    return sqlite_utils.Database(store.connection)


@dataclass(frozen=True)
class ClaudeFixture:
    """Documented facts of one real Claude Code transcript."""

    key: str
    filename: str
    lines: int
    assistant_lines: int
    assistant_ids: int
    user_records: int
    model: str
    compactions: int = 0


CLAUDE_FIXTURES: dict[str, ClaudeFixture] = {
    f.key: f
    for f in (
        ClaudeFixture("short", "claude-code__marot__spotter__short.jsonl", 15, 5, 1, 4, "claude-opus-4-6"),
        ClaudeFixture("subagent", "claude-code__marot__spotter__subagent.jsonl", 96, 28, 12, 20, "claude-opus-4-6"),
        ClaudeFixture(
            "258c7280",
            "claude-code__marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl",
            1863,
            299,
            152,
            192,
            "claude-opus-4-6",
            compactions=1,
        ),
        ClaudeFixture(
            "session-196820da",
            "claude-code__codemie-ai__codemie-code__session-196820da.jsonl",
            233,
            133,
            47,
            81,
            "claude-sonnet-4-5-20250929",
        ),
    )
}

COMPACTABLE = sorted(set(CLAUDE_FIXTURES) - {"short"})
"""The fixtures a compaction makes smaller: the short one's five messages all fit in the kept tail, and
compacting it would only add a summary, which is refused (spec 001 §6)."""

UNSUPPORTED_FIXTURES: dict[str, str] = {
    "codex": "codex__codemie-ai__codemie-code__rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
    "opencode-hidden-moon": "opencode__victoryforphil__dark-factory__session__hidden-moon__ses_39b583141ffe5xDtTd3Mc1wh0o.json",
    "opencode-nimble-pixel": "opencode__victoryforphil__dark-factory__session__nimble-pixel__ses_39b4c1891ffezxPVc5OPmcqF33.json",
}

# The 258c7280 compaction, as documented.
COMPACT_BOUNDARY_LINE = 1256
COMPACT_SUMMARY_LINE = 1257
COMPACT_PRE_TOKENS = 167094


def fixture_path(filename: str) -> Path:
    """A real transcript from ``tests/fixtures``; a missing one fails the test, it is never skipped."""
    path = FIXTURES_DIR / filename
    assert path.is_file(), f"fixture {filename} is missing from {FIXTURES_DIR}"
    return path


def claude_fixture(key: str) -> Path:
    return fixture_path(CLAUDE_FIXTURES[key].filename)


# --- reading raw Claude Code files, independently of the importer ---------------


def raw_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(1-based line number, record) for every parseable JSON-object line."""
    out: list[tuple[int, dict[str, Any]]] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append((number, record))
    return out


def assistant_ids(path: Path, *, include_sidechain: bool = False) -> list[str]:
    """Distinct ``message.id`` of assistant lines, in order of first appearance."""
    seen: dict[str, None] = {}
    for _, record in raw_records(path):
        if record.get("type") != "assistant":
            continue
        if record.get("isSidechain") and not include_sidechain:
            continue
        seen.setdefault(record["message"]["id"], None)
    return list(seen)


def last_usage_by_id(path: Path) -> dict[str, dict[str, Any]]:
    """The ``usage`` of the last assistant line of each ``message.id``."""
    out: dict[str, dict[str, Any]] = {}
    for _, record in raw_records(path):
        if record.get("type") == "assistant" and isinstance(record["message"].get("usage"), dict):
            out[record["message"]["id"]] = record["message"]["usage"]
    return out


def usage_input_total(usage: dict[str, Any]) -> int:
    return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))


# --- synthetic Claude Code transcripts ------------------------------------------


def cc_usage(input_tokens: int, output_tokens: int, cache_creation: int = 0, cache_read: int = 0) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
    }


def cc_user(
    uuid: str,
    content: str | list[dict[str, Any]],
    *,
    sidechain: bool = False,
    parent: str | None = None,
    timestamp: str = "2025-06-01T10:00:00.000Z",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": sidechain,
        "sessionId": "synthetic-session",
        "timestamp": timestamp,
        "message": {"role": "user", "content": content},
        **extra,
    }


def cc_assistant(
    uuid: str,
    message_id: str,
    blocks: list[dict[str, Any]],
    usage: dict[str, int] | None,
    *,
    model: str = "claude-sonnet-4-5-20250929",
    sidechain: bool = False,
    parent: str | None = None,
    timestamp: str = "2025-06-01T10:00:01.000Z",
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
    }
    if usage is not None:
        message["usage"] = usage
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": sidechain,
        "sessionId": "synthetic-session",
        "requestId": f"req_{message_id}",
        "timestamp": timestamp,
        "message": message,
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def tool_result_block(tool_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": is_error}


def write_jsonl(path: Path, records: Iterable[dict[str, Any] | str]) -> Path:
    """One line per record; a ``str`` is written verbatim (for garbage lines)."""
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(record if isinstance(record, str) else json.dumps(record))
            fh.write("\n")
    return path


def basic_conversation() -> list[dict[str, Any]]:
    """A small, valid main-line conversation: prompt, tool loop, answer (2 API requests)."""
    return [
        cc_user("u1", "List the files in the project, please."),
        cc_assistant("a1", "msg_01", [text_block("Let me look.")], cc_usage(10, 2, 3000, 0)),
        cc_assistant("a2", "msg_01", [tool_use_block("toolu_1", "Bash", {"command": "ls"})], cc_usage(10, 40, 3000, 0)),
        cc_user("u2", [tool_result_block("toolu_1", "README.md\nsrc\ntests\n")], parent="a2"),
        cc_assistant("a3", "msg_02", [text_block("There are three entries: README.md, src and tests.")], cc_usage(5, 30, 60, 3000)),
    ]


# --- small sessions stored directly -----------------------------------------------


def short_message(session_id: str, index: int, text: str = "hello") -> Message:
    """``m{index}``: a user message at even indices, an assistant one at odd ones."""
    return Message(id=f"m{index}", session_id=session_id, index=index, role="user" if index % 2 == 0 else "assistant",
                   parts=[TextPart(text=f"{text} {index}")])


def store_short_session(store: Store, session_id: str = "s1", count: int = 3) -> Session:
    """An engine session of ``count`` short messages, saved as the engine saves them."""
    session = Session(id=session_id, title="a session", source_format="engine", model="claude-sonnet-4-5")
    store.save_session(session)
    store.save_messages([short_message(session_id, i) for i in range(count)], TokenCounter())
    return session


# --- running the real CLI -------------------------------------------------------


def run_cli(args: Sequence[str | os.PathLike[str]], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m workbench ARGS`` in a subprocess, with the test's environment (see conftest)."""
    return subprocess.run(
        [sys.executable, "-m", "workbench", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]
