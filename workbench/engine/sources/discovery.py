"""Finding other agents' sessions on this machine, cheaply: paths, sizes, dates and a title.

Looked for under ``$HOME`` (so tests can point it elsewhere):

- Claude Code: ``~/.claude/projects/<project>/*.jsonl`` (subagent transcripts, under
  ``<session>/subagents/`` or, from older versions, ``agent-*.jsonl`` beside the sessions, are left out:
  they are not conversations of their own, and come with the session that started them);
- Codex: ``~/.codex/sessions/**/rollout-*.jsonl`` (``$CODEX_HOME`` if set);
- OpenCode: the file storage ``~/.local/share/opencode/storage/session/*/ses_*.json``
  (``$XDG_DATA_HOME`` if set), which ``workbench open`` can read directly, and the
  newer ``opencode.db``, whose sessions are listed but must be exported first
  (``opencode export <id> > file.json``); extra directories given by the caller
  are searched for any transcript file (exports included).

Only the first few kilobytes of each file are read, for the title.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.importers import detect_format

HEAD_BYTES = 16 * 1024
HEAD_LINES = 40
HEAD_LINE_BYTES = 1024 * 1024
TITLE_CHARS = 80
_TITLE = re.compile(r'"title"\s*:\s*')
MAX_FILES_PER_ROOT = 5_000
"""More than this under one root and the oldest are left out (with a notice)."""


@dataclass(frozen=True)
class Discovered:
    """One session found on disk."""

    format: str
    path: str
    size: int
    modified: datetime
    title: str | None = None
    openable: bool = True
    """False for sessions that must be exported before the workbench can read them."""
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["modified"] = self.modified.isoformat()
        return data


@dataclass
class Discovery:
    sessions: list[Discovered] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    """What could not be looked at, and why."""


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _mtime(stat: os.stat_result) -> datetime:
    return datetime.fromtimestamp(stat.st_mtime, tz=UTC)


def _head(path: Path) -> str:
    with path.open("rb") as fh:
        return fh.read(HEAD_BYTES).decode("utf-8", errors="replace")


def _head_lines(path: Path) -> str:
    """The first complete lines, up to ``HEAD_LINES`` of them or ``HEAD_LINE_BYTES`` in all.

    A Codex rollout's first line carries the whole system prompt (tens of KB), so a
    fixed number of bytes would often miss the first prompt; lines are skipped whole.
    """
    kept: list[bytes] = []
    budget = HEAD_LINE_BYTES
    with path.open("rb") as fh:
        for _ in range(HEAD_LINES):
            line = fh.readline(budget + 1)
            if not line:
                break
            budget -= len(line)
            if budget < 0:
                break
            kept.append(line)
    return b"".join(kept).decode("utf-8", errors="replace")


def _clean(text: str) -> str | None:
    text = " ".join(text.split())
    return text[:TITLE_CHARS] if text and not text.startswith("<") else None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") in ("text", "input_text"))
    return ""


def _records(head: str) -> Iterator[dict[str, Any]]:
    """Complete JSON lines at the start of a file (the last one may be cut off: skipped)."""
    for line in head.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            yield record


def claude_title(head: str) -> str | None:
    for record in _records(head):
        if record.get("type") == "summary" and isinstance(record.get("summary"), str):
            return _clean(record["summary"])
        message = record.get("message")
        if record.get("type") == "user" and isinstance(message, dict) and not record.get("isMeta"):
            title = _clean(_text_of(message.get("content")))
            if title:
                return title
    return None


def codex_title(head: str) -> str | None:
    for record in _records(head):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        text = ""
        if payload.get("type") == "user_message":
            text = str(payload.get("message") or "")
        elif payload.get("type") == "message" and payload.get("role") == "user":
            text = _text_of(payload.get("content"))
        if "## My request for Codex:" in text:
            text = text.split("## My request for Codex:", 1)[1]
        title = _clean(text)
        if title:
            return title
    return None


def _walk(root: Path, pattern: str, discovery: Discovery) -> list[tuple[Path, os.stat_result]]:
    found: list[tuple[Path, os.stat_result]] = []
    if not root.is_dir():
        return found
    try:
        for path in root.glob(pattern):
            try:
                stat = path.stat()
            except OSError as exc:
                discovery.notices.append(f"cannot read {path}: {exc.strerror or exc}")
                continue
            if path.is_file():
                found.append((path, stat))
    except OSError as exc:
        discovery.notices.append(f"cannot list {root}: {exc.strerror or exc}")
    if len(found) > MAX_FILES_PER_ROOT:
        discovery.notices.append(f"{root}: {len(found):,} files; only the newest {MAX_FILES_PER_ROOT:,} are listed")
        found.sort(key=lambda item: item[1].st_mtime, reverse=True)
        found = found[:MAX_FILES_PER_ROOT]
    return found


def _add_files(discovery: Discovery, fmt: str, files: Iterable[tuple[Path, os.stat_result]]) -> None:
    titles = {"claude-code": claude_title, "codex": codex_title}
    for path, stat in files:
        title: str | None = None
        try:
            title = titles[fmt](_head_lines(path)) if fmt in titles else opencode_title(_head(path))
        except OSError as exc:
            discovery.notices.append(f"cannot read {path}: {exc.strerror or exc}")
        discovery.sessions.append(Discovered(fmt, str(path), stat.st_size, _mtime(stat), title))


def opencode_title(head: str) -> str | None:
    """The session title: the first ``"title"`` of a storage session file or an export's ``info``."""
    match = _TITLE.search(head)
    if match is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(head, match.end())
    except json.JSONDecodeError:
        return None
    return _clean(value) if isinstance(value, str) else None


def _opencode_db(db: Path, discovery: Discovery) -> None:
    try:
        stat = db.stat()
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    except (OSError, sqlite3.Error) as exc:
        discovery.notices.append(f"cannot open the OpenCode database {db}: {exc}")
        return
    try:
        rows = conn.execute("SELECT id, title, time_updated FROM session ORDER BY time_updated DESC").fetchall()
    except sqlite3.Error as exc:
        discovery.notices.append(f"the OpenCode database {db} has no session table the workbench knows ({exc})")
        return
    finally:
        conn.close()
    for session_id, title, updated in rows:
        when = datetime.fromtimestamp(updated / 1000, tz=UTC) if isinstance(updated, int | float) else _mtime(stat)
        discovery.sessions.append(
            Discovered("opencode", f"{db}#{session_id}", 0, when, _clean(str(title or "")), openable=False,
                       hint=f"opencode export {session_id} > {session_id}.json, then open that file")
        )


def discover(extra_dirs: Iterable[Path] = (), home: Path | None = None) -> Discovery:
    """Every session file found, newest first."""
    home = home or _home()
    discovery = Discovery()
    _add_files(discovery, "claude-code", [
        (p, s) for p, s in _walk(home / ".claude" / "projects", "*/*.jsonl", discovery) if not p.name.startswith("agent-")
    ])
    codex_home = Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else home / ".codex"
    _add_files(discovery, "codex", _walk(codex_home / "sessions", "**/rollout-*.jsonl", discovery))
    xdg = os.environ.get("XDG_DATA_HOME")
    opencode_dir = (Path(xdg) if xdg else home / ".local" / "share") / "opencode"
    _add_files(discovery, "opencode", _walk(opencode_dir / "storage" / "session", "*/ses_*.json", discovery))
    if (opencode_dir / "opencode.db").is_file():
        _opencode_db(opencode_dir / "opencode.db", discovery)
    for folder in extra_dirs:
        _scan_dir(Path(folder).expanduser(), discovery)
    discovery.sessions.sort(key=lambda d: d.modified, reverse=True)
    return discovery


def _scan_dir(folder: Path, discovery: Discovery) -> None:
    """Any ``.json``/``.jsonl`` transcript in ``folder`` (not recursive), the format detected."""
    if not folder.is_dir():
        discovery.notices.append(f"{folder} is not a directory")
        return
    known = {d.path for d in discovery.sessions}
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".json", ".jsonl") or not path.is_file() or str(path) in known:
            continue
        try:
            fmt = detect_format(path)
        except ImportFailed:
            continue
        _add_files(discovery, fmt, [(path, path.stat())])
