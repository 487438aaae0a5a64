"""Reading transcript files defensively: bounded lines, clear errors, the bad lines listed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from pydantic import BaseModel

from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.models import Message, Session
from workbench.engine.transcript.overlay import OverlayEvent

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark some editors (and Windows tools) put at the start of a file: not content."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""A longer line is skipped, not loaded: one runaway line must not take all memory (a line is held three
or four times over while it is parsed and stored). The API takes at most 32 MB per request, a
conversation's whole history; one message line of a transcript stays far below this."""
SNIFF_BYTES = 64 * 1024
DISCARD_BYTES = 1024 * 1024
MAX_COUNT = 2**53
"""No token count or context window is larger; a bigger number in a transcript is read as missing
(it would not fit SQLite's 64-bit integers either)."""


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
    subtranscripts: list[Subtranscript] = field(default_factory=list)
    """Transcripts this one started (Claude Code sub-agents), to store beside it, linked."""
    warnings: list[str] = field(default_factory=list)
    """What went wrong beside the transcript itself (a sub-agent's file that could not be read)."""
    stored: int = 0
    """How many messages an import stored (its ``messages`` may be left empty to save memory)."""


@dataclass
class Subtranscript:
    """A sub-agent's transcript: its own file (``path``), or its records embedded in its parent's
    (``parsed``); ``link`` is what ties it to the parent (message and tool call ids, agent)."""

    link: dict[str, str | None]
    path: Path | None = None
    parsed: ParsedTranscript | None = None


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words: ``a named pipe (FIFO)``, ``a character device``…"""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: Path) -> None:
    """:class:`ImportFailed` unless ``path`` is a regular file. Checked with ``stat`` before any open:
    opening a named pipe waits for a writer that may never come, and a device can be read forever."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ImportFailed(f"{path}: no such file") from None
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(mode):
        raise ImportFailed(f"{path} is {file_kind(mode)}, not a transcript file")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading in binary, refusing anything but a regular file: checked before the open
    and again on the open file (a pipe swapped in meanwhile is opened without blocking, then refused)."""
    check_regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ImportFailed(f"{path} is {file_kind(mode)}, not a transcript file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def check_readable(path: Path) -> bytes:
    """The first bytes of ``path`` (after a byte-order mark, if any); an :class:`ImportFailed` for anything
    that is not a text file."""
    try:
        with open_regular(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    head = head.removeprefix(BOM)
    if not head.strip():
        raise ImportFailed(f"{path} is empty")
    if b"\x00" in head:
        raise ImportFailed(f"{path} looks like a binary file, not a transcript")
    return head


def iter_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, problem) for each line; text is None when the line was unusable."""
    with open_regular(path) as fh:
        number = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if number == 1:
                raw = raw.removeprefix(BOM)
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                del raw  # the rest of the line is read and dropped in small pieces
                while (rest := fh.readline(DISCARD_BYTES)) and not rest.endswith(b"\n"):
                    pass
                yield number, None, f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB"
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield number, None, "not valid UTF-8"
                continue
            if text.strip():
                yield number, text, None


MAX_JSON_DEPTH = 128
"""A record nested deeper is skipped: no transcript nests this deep, and a deeper value would exhaust
the recursion of the JSON encoder, pydantic's serializer and ``str()`` later on."""


_DIGITS = bytes(b"0"[0] if b"0"[0] <= i <= b"9"[0] else b" "[0] for i in range(256))
"""Every ASCII digit as ``0``, any other byte as a space: what :data:`_LONG_DIGITS` is looked for in."""
_LONG_DIGITS = b"0" * 19
"""A run of digits no 64-bit integer needs (2**63 has 19 digits; every 18-digit number fits)."""
_UNREAD = object()


def load_json(text: str) -> tuple[Any, str | None]:
    """``json.loads`` for untrusted text: ``(value, None)``, or ``(None, why it cannot be used)``.

    Never raises for bad input: malformed or truncated JSON, nesting too deep to parse or to keep,
    and integers too long to convert (``sys.get_int_max_str_digits``) each come back as a reason.

    orjson reads a line in a sixth of the standard library's time, and gives the same value for all it
    accepts but integers wider than 64 bits (it makes them floats): a line with a run of 19 digits, and any
    line orjson refuses (NaN, a lone surrogate escape, an error to explain), is read by ``json.loads``.
    The checks look at the line's UTF-8 bytes, where an ASCII character is one byte of its own.
    """
    data = text.encode("utf-8", "surrogatepass")
    value: Any = _UNREAD
    if _LONG_DIGITS not in data.translate(_DIGITS):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    lone_surrogates = False  # orjson refuses them: only a line json.loads read may hold one
    if value is _UNREAD:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, json_problem(text, exc)
        except RecursionError:
            return None, "JSON nested too deeply"
        except ValueError as exc:  # an integer with more digits than Python converts
            return None, f"unreadable JSON value ({str(exc).split(':')[0]})"
        lone_surrogates = b"\\ud" in data or b"\\uD" in data  # (a lowered copy of every line cost more)
    if could_be_deep(data) and too_deep(value):
        return None, f"JSON nested more than {MAX_JSON_DEPTH} levels deep"
    return without_lone_surrogates(value) if lone_surrogates else value, None


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with each lone UTF-16 surrogate (a ``\\ud83d`` escape cut from its pair, as JavaScript
    writes a string truncated mid-emoji) replaced by U+FFFD: such a string cannot be stored as UTF-8.
    Call it on values no deeper than :data:`MAX_JSON_DEPTH`."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value


def could_be_deep(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the UTF-8 ``data`` has enough brackets to nest more than ``limit`` levels: counting them is a C
    loop, walking the parsed value is a Python one, and almost every line has far fewer."""
    return data.count(b"{") + data.count(b"[") > limit


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists and objects in ``value`` nest more than ``limit`` levels (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


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
