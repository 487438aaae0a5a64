"""Reading transcript files defensively: bounded lines, clear errors, the bad lines listed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from workbench.engine.errors import ImportFailed
from workbench.engine.models import Message, Session
from workbench.engine.overlay import OverlayEvent

MAX_LINE_BYTES = 32 * 1024 * 1024
"""A longer line is skipped, not loaded: one runaway line must not take all memory."""
SNIFF_BYTES = 64 * 1024


class SkippedLine(BaseModel):
    line: int
    reason: str


@dataclass
class ParsedTranscript:
    """What an importer read: ready to store, plus what it passed over."""

    session: Session
    messages: list[Message]
    events: list[OverlayEvent] = field(default_factory=list)
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    skipped_records: dict[str, int] = field(default_factory=dict)


def check_readable(path: Path) -> bytes:
    """The first bytes of ``path``; an :class:`ImportFailed` for anything that is not a text file."""
    if not path.exists():
        raise ImportFailed(f"{path}: no such file")
    if path.is_dir():
        raise ImportFailed(f"{path} is a directory, not a transcript file")
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not head.strip():
        raise ImportFailed(f"{path} is empty")
    if b"\x00" in head:
        raise ImportFailed(f"{path} looks like a binary file, not a transcript")
    return head


def iter_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, problem) for each line; text is None when the line was unusable."""
    with path.open("rb") as fh:
        number = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(MAX_LINE_BYTES)
                yield number, None, f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB"
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield number, None, "not valid UTF-8"
                continue
            if text.strip():
                yield number, text, None


def json_problem(text: str, exc: json.JSONDecodeError) -> str:
    """``truncated JSON`` when the text stops mid-value (a cut-off file), else ``malformed JSON``."""
    ended = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    return "truncated JSON" if ended else "malformed JSON"


def field_dict(record: dict[str, Any], key: str) -> dict[str, Any]:
    """``record[key]`` if it is an object, else an empty one: for reading untrusted JSON."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def field_str(record: dict[str, Any], key: str) -> str | None:
    """``record[key]`` if it is a string, else None."""
    value = record.get(key)
    return value if isinstance(value, str) else None


def field_text(record: dict[str, Any], key: str) -> str:
    """``record[key]`` if it is a string, else ``""``."""
    return field_str(record, key) or ""


def source_digest(format_name: str, path: Path) -> str:
    """Identity of an imported file: the same path imports into the same session."""
    key = f"{format_name}:{path.resolve()}"
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
