"""Reading an OpenCode session as one document: an export, a damaged export, or file storage.

An export is parsed in memory (refused above ``MAX_FILE_BYTES``). When it is not
valid JSON, the complete message objects are still read one by one
(``raw_decode``), and each one that is not is listed as a skipped line naming the
message. A session file of OpenCode's older file storage is assembled with its
``message/`` and ``part/`` files into the export's shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.importers.reading import (
    BOM,
    MAX_JSON_DEPTH,
    SkippedLine,
    json_problem,
    open_regular,
    too_deep,
)

MAX_FILE_BYTES = 512 * 1024 * 1024
"""A bigger export is refused: it is parsed in memory as one JSON document."""
_MESSAGE_START = re.compile(r'\{\s*"info"\s*:')

Document = dict[str, Any]
"""``{"info": {...}, "messages": [(index, line or None, raw message), ...]}``."""


def looks_like_storage_session(path: Path, head: str) -> bool:
    """A session file of OpenCode's file storage (``storage/session/<project>/ses_….json``)."""
    return (
        path.suffix == ".json"
        and path.name.startswith("ses_")
        and path.parent.parent.name == "session"
        and head.lstrip().startswith("{")
        and '"id"' in head
    )


# --- reading the document -------------------------------------------------------


class _Lines:
    """Line numbers of increasing offsets, counting each stretch of text once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _salvage(text: str, error: json.JSONDecodeError) -> tuple[dict[str, Any], list[SkippedLine]]:
    """Whatever complete message objects a damaged export still holds, and where it broke."""
    decoder = json.JSONDecoder()
    doc: dict[str, Any] = {"messages": []}
    skipped: list[SkippedLine] = []
    lines = _Lines(text)
    info = re.search(r'"info"\s*:\s*', text)
    messages_at = text.find('"messages"')
    if info is not None and (messages_at < 0 or info.start() < messages_at):
        try:
            doc["info"], _ = decoder.raw_decode(text, info.end())
        except (ValueError, RecursionError):  # JSONDecodeError, or a value Python cannot hold
            skipped.append(SkippedLine(line=lines.at(info.start()), reason="session info is not valid JSON"))
    start = re.search(r'"messages"\s*:\s*\[', text)
    if start is None:
        if error.msg == "Extra data":
            raise ImportFailed("one JSON object per line (JSON Lines), not an OpenCode export; "
                               "leave out --format to detect the format")
        raise ImportFailed(f"not an OpenCode export: invalid JSON ({error.msg} at line {error.lineno}) "
                           "and no 'messages' list")
    pos = start.end()
    index = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        begin = pos
        try:
            message, end = decoder.raw_decode(text, pos)
            if too_deep(message):
                raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
            pos = end
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, or a value Python cannot hold
            following = _MESSAGE_START.search(text, pos + 1)
            truncated = isinstance(exc, json.JSONDecodeError) and json_problem(text, exc) == "truncated JSON"
            reason = (
                f"message {index}: truncated JSON (the file ends inside it)"
                if truncated
                else f"message {index}: malformed JSON"
            )
            skipped.append(SkippedLine(line=lines.at(pos), reason=reason))
            if following is None:
                break
            pos = following.start()
            index += 1
            continue
        doc["messages"].append((index, lines.at(begin), message))
        index += 1
    return doc, skipped


def load_document(path: Path) -> tuple[dict[str, Any], list[SkippedLine]]:
    """The export as a dict; a damaged file gives the messages that could be read, plus what was not."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    if size > MAX_FILE_BYTES:
        raise ImportFailed(
            f"{path}: {size / 2**20:,.0f} MiB is more than the {MAX_FILE_BYTES // 2**20} MiB an OpenCode export may have"
        )
    try:
        with open_regular(path) as fh:
            text = fh.read().removeprefix(BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFailed(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        doc = json.loads(text)
    except RecursionError as exc:
        raise ImportFailed(f"{path}: JSON nested too deeply to read") from exc
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert: read message by message
        error = exc if isinstance(exc, json.JSONDecodeError) else json.JSONDecodeError(str(exc).split(":")[0], text, 0)
        try:
            return _salvage(text, error)
        except ImportFailed as failed:
            raise ImportFailed(f"{path}: {failed}") from exc
    if not isinstance(doc, dict):
        raise ImportFailed(f"{path}: an OpenCode export is a JSON object, this is a JSON {type(doc).__name__}")
    if "messages" not in doc and looks_like_storage_session(path, text[:200]):
        return assemble_storage(path, doc), []
    messages = doc.get("messages")
    if not isinstance(messages, list):
        raise ImportFailed(f"{path}: no 'messages' list; not an OpenCode export (`opencode export <session>`)")
    doc["messages"] = [(i, None, m) for i, m in enumerate(messages)]
    return doc, []


def _read_json_dir(folder: Path) -> list[Any]:
    out: list[Any] = []
    if not folder.is_dir():
        return out
    for item in sorted(folder.glob("*.json")):
        if not item.is_file():  # a pipe or device named like a part: reading it could wait forever
            out.append({"unreadable": str(item)})
            continue
        try:
            out.append(json.loads(item.read_text(encoding="utf-8-sig")))
        except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8 or JSON, too deep, too long a number
            out.append({"unreadable": str(item)})
    return out


def assemble_storage(path: Path, info: dict[str, Any]) -> dict[str, Any]:
    """The export shape from file storage: ``storage/{message/<ses>,part/<msg>}/*.json``."""
    storage = path.parent.parent.parent
    session_id = str(info.get("id", path.stem))
    messages: list[tuple[int, int | None, Any]] = []
    infos = [m for m in _read_json_dir(storage / "message" / session_id) if isinstance(m, dict)]
    infos.sort(key=lambda m: (str(m.get("id", "")), str(m.get("unreadable", ""))))
    for index, message in enumerate(infos):
        parts = _read_json_dir(storage / "part" / str(message.get("id", ""))) if "id" in message else []
        messages.append((index, None, {"info": message, "parts": parts}))
    return {"info": info, "messages": messages}
