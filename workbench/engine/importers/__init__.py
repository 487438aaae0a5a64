"""Importing transcripts recorded by other agents; the format is detected from the content."""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench.engine.errors import ImportFailed
from workbench.engine.importers import claude_code, codex, opencode
from workbench.engine.importers.reading import ParsedTranscript, SkippedLine, check_readable
from workbench.engine.store import Store
from workbench.engine.tokens import TokenCounter

SUPPORTED = ("claude-code", "codex", "opencode")
RECOGNISED = ("claude-code", "codex", "opencode")
CODEX_HEAD = re.compile(r'\{\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"type"\s*:\s*"(session_meta|response_item|event_msg|turn_context)"')

__all__ = ["ParsedTranscript", "SkippedLine", "detect_format", "import_file", "parse_file"]


def detect_format(path: Path) -> str:
    """``claude-code``, ``codex`` or ``opencode``; :class:`ImportFailed` for anything else."""
    head = check_readable(path)
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    first_line = stripped.splitlines()[0] if stripped else ""
    try:
        record = json.loads(first_line)
    except json.JSONDecodeError:
        record = None
    if record is None and CODEX_HEAD.match(first_line):
        return "codex"  # a first line longer than the sniffed bytes (the system prompt is in it)
    if isinstance(record, dict):
        if {"timestamp", "type", "payload"} <= record.keys():
            return "codex"
        if claude_code.looks_like(record):
            return "claude-code"
    if stripped.startswith("{") and '"messages"' in text and '"info"' in text:
        return "opencode"
    if opencode.looks_like_storage_session(path, stripped):
        return "opencode"
    for line in stripped.splitlines()[1:20]:
        try:
            if claude_code.looks_like(json.loads(line)):
                return "claude-code"
        except json.JSONDecodeError:
            continue
    raise ImportFailed(f"{path}: not a transcript format the workbench knows (Claude Code, Codex, OpenCode)")


def parse_file(path: Path, format_name: str | None = None) -> ParsedTranscript:
    fmt = format_name or detect_format(path)
    if format_name is not None:
        check_readable(path)
    if fmt not in RECOGNISED:
        raise ImportFailed(f"unknown format {fmt!r}; known: {', '.join(RECOGNISED)}")
    if fmt not in SUPPORTED:
        raise ImportFailed(f"{path}: {fmt} transcripts are recognised but cannot be imported yet")
    parsers = {"claude-code": claude_code.parse, "codex": codex.parse, "opencode": opencode.parse}
    parsed = parsers[fmt](path)
    if not parsed.messages:
        reasons = f" ({len(parsed.skipped_lines)} unreadable lines)" if parsed.skipped_lines else ""
        raise ImportFailed(f"{path}: no {fmt} messages could be read{reasons}")
    return parsed


def import_file(store: Store, path: Path, format_name: str | None = None) -> ParsedTranscript:
    """Parse and store ``path``; importing the same file again updates the same session."""
    parsed = parse_file(path, format_name)
    counter = TokenCounter(store.token_cache(parsed.session.id))
    with store.transaction():
        existing = store.find_session(parsed.session.source_digest or "")
        if existing is not None:
            parsed.session.created_at = existing.created_at
        parsed.session.metadata["skipped_lines"] = [s.model_dump() for s in parsed.skipped_lines]
        parsed.session.metadata["skipped_records"] = parsed.skipped_records
        store.save_session(parsed.session)
        store.save_messages(parsed.messages, counter)
        store.add_overlay_events(parsed.events, ignore_existing=True)
        for message in parsed.messages:
            if message.usage is not None and not message.sidechain:
                store.record_usage(parsed.session.id, message.id, message.usage, None)
    return parsed
