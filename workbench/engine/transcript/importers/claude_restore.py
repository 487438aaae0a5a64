"""The files Claude Code re-attaches after a compaction, as the transcript last showed them.

After compacting, Claude Code sends the summary together with the files the model read or wrote most
recently before it (its post-compact file restore): at most ``MAX_FILES`` of them, each up to
``MAX_FILE_TOKENS``, ``TOTAL_TOKENS`` in all. These are its ``POST_COMPACT_MAX_FILES_TO_RESTORE``,
``POST_COMPACT_MAX_TOKENS_PER_FILE`` and ``POST_COMPACT_TOKEN_BUDGET`` as published by those who read its
bundle (the compact-guard skill on skills.sh, "Key Constants (from Claude Code source)"; "Harness Engineering
from Claude Code", chapter 10, "Post-Compaction File State Preservation"). Memory files (``CLAUDE.md``) come
back with the system context instead; a file over the cap is taken to be named, not attached. Its transcript
(2.1.x) does not record these attachments, though the first request after the boundary carries them: on the
fixtures' two compactions that request reported 4,250 and 12,853 tokens more than the summary and the
session's overhead account for.

So the importer writes them as one user message after the summary, marked ``source["reattached"]`` and
``source["estimated"]``: the budget shows them (as system reminders, the way Claude Code sends them) instead
of an unexplained gap. Each file's text is what the transcript last held of it: a ``Read``'s content, a
``Write``'s, or an ``Edit`` applied to the file it reports (``toolUseResult.originalFile``); a file read only in
part is counted as far as it was read.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from workbench.engine.transcript.models import TextPart

MAX_FILES = 5
MAX_FILE_TOKENS = 5_000
TOTAL_TOKENS = 50_000
CHARS_PER_TOKEN = 4
"""Claude Code measures the caps with its rough count, four characters a token."""
FILE_TOOLS = frozenset({"Read", "Edit", "MultiEdit", "Write"})
MEMORY_FILES = frozenset({"CLAUDE.md", "CLAUDE.local.md"})


def numbered(content: str) -> str:
    """The file as Claude Code's Read tool shows it: each line after its number and an arrow."""
    return "".join(f"{n:>6}\u2192{line}\n" for n, line in enumerate(content.split("\n"), start=1))


class FilesRead:
    """The files a transcript read or wrote, most recent last, noted record by record."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}
        """``tool_use`` id -> (tool, file path) of a file call not answered yet."""
        self._files: OrderedDict[str, str] = OrderedDict()
        """Path -> its text as last seen; only the latest ``MAX_FILES`` are kept."""

    def note(self, record: Mapping[str, Any]) -> None:
        if record.get("isSidechain"):
            return
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return
        if record.get("type") == "assistant":
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in FILE_TOOLS:
                    tool_input = block.get("input")
                    path = tool_input.get("file_path") if isinstance(tool_input, dict) else None
                    if isinstance(path, str) and isinstance(block.get("id"), str):
                        self._calls[block["id"]] = (str(block["name"]), path)
        elif record.get("type") == "user":
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call = self._calls.pop(str(block.get("tool_use_id")), None)
                    if call is not None and not block.get("is_error"):
                        self._seen(call[0], call[1], record.get("toolUseResult"))

    def _seen(self, tool: str, path: str, result: Any) -> None:
        text = _text_after(tool, result, self._files.get(path))
        if text is None:
            return
        self._files[path] = text
        self._files.move_to_end(path)
        while len(self._files) > MAX_FILES:
            self._files.popitem(last=False)

    def reattached(self) -> list[TextPart]:
        """One part per file Claude Code re-attaches after a compaction now, most recent first."""
        parts: list[TextPart] = []
        budget = TOTAL_TOKENS * CHARS_PER_TOKEN
        for path, content in reversed(self._files.items()):
            if PurePath(path).name in MEMORY_FILES:
                continue
            shown = numbered(content)
            if len(shown) > min(MAX_FILE_TOKENS * CHARS_PER_TOKEN, budget):
                body = f"{path} was read before the conversation was summarised; it is too large to include."
            else:
                budget -= len(shown)
                body = f"Called the Read tool with the following input: {json.dumps({'file_path': path})}\n{shown}"
            parts.append(TextPart(text=f"<system-reminder>\n{body}\n</system-reminder>"))
        return parts


def _text_after(tool: str, result: Any, before: str | None) -> str | None:
    """The file's text after a successful call, as far as its ``toolUseResult`` tells."""
    if not isinstance(result, dict):
        return before
    if tool == "Read":
        file = result.get("file")
        content = file.get("content") if isinstance(file, dict) else None
        return content if isinstance(content, str) else before
    if tool == "Write":
        content = result.get("content")
        return content if isinstance(content, str) else before
    original = result.get("originalFile")
    text = original if isinstance(original, str) else before
    if text is None:
        return None
    edits = result.get("edits") if tool == "MultiEdit" else [result]
    for edit in edits if isinstance(edits, list) else []:
        old, new = (edit.get("oldString", edit.get("old_string")), edit.get("newString", edit.get("new_string"))) \
            if isinstance(edit, dict) else (None, None)
        if isinstance(old, str) and isinstance(new, str) and old:
            replace_all = bool(edit.get("replaceAll", edit.get("replace_all")))
            text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return text
