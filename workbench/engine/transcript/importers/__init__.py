"""Importing transcripts recorded by other agents; the format is detected from the content."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from importlib import import_module
from pathlib import Path
from types import ModuleType

from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.importers import claude_code
from workbench.engine.transcript.importers.claude_subagents import LINK_KEYS, calls, linked
from workbench.engine.transcript.importers.reading import (
    ParsedTranscript,
    SkippedLine,
    Subtranscript,
    check_readable,
    load_json,
)
from workbench.engine.transcript.importers.writing import MessageWriter, Progress, repeat_of
from workbench.engine.transcript.models import Message, Session, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.token_process import TokenProcess
from workbench.engine.version import program_version

SUPPORTED = ("claude-code", "codex", "opencode")
RECOGNISED = ("claude-code", "codex", "opencode")
CLAUDE_HEAD = re.compile(
    r'\{\s*("(parentUuid|isSidechain|leafUuid|sessionId|userType)"\s*:|"type"\s*:\s*"(user|assistant|system|summary)")')
CODEX_HEAD = re.compile(r'\{\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"type"\s*:\s*"(session_meta|response_item|event_msg|turn_context)"')

__all__ = ["ParsedTranscript", "Progress", "SkippedLine", "detect_format", "import_file", "parse_file", "unchanged_import"]

PARSERS = {"claude-code": "claude_code", "codex": "codex", "opencode": "opencode"}
"""Each format's module in this package, imported when a file of that format is read (:func:`parser`): a
Claude Code import loads neither of the others."""
SAVE_BATCH = 2_000
"""Messages stored per step of an import; a Claude Code import holds about twice this many at a time."""


def parser(format_name: str) -> ModuleType:
    """The module that reads ``format_name`` (a key of :data:`PARSERS`)."""
    return import_module(f"{__name__}.{PARSERS[format_name]}")


def detect_format(path: Path) -> str:
    """``claude-code``, ``codex`` or ``opencode``; :class:`ImportFailed` for anything else."""
    head = check_readable(path)
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    first_line = stripped.splitlines()[0] if stripped else ""
    record, _ = load_json(first_line)
    if record is None and CODEX_HEAD.match(first_line):
        return "codex"  # a first line longer than the sniffed bytes (the system prompt is in it)
    if record is None and "\n" not in text and CLAUDE_HEAD.match(first_line):
        return "claude-code"  # a first line longer than the sniffed bytes (a long paste, or a runaway line)
    if isinstance(record, dict):
        if {"timestamp", "type", "payload"} <= record.keys():
            return "codex"
        if claude_code.looks_like(record):
            return "claude-code"
    if stripped.startswith("{") and '"messages"' in text and '"info"' in text:
        return "opencode"
    from workbench.engine.transcript.importers.opencode_files import looks_like_storage_session

    if looks_like_storage_session(path, stripped):
        return "opencode"
    for line in stripped.splitlines()[1:20]:
        if claude_code.looks_like(load_json(line)[0]):
            return "claude-code"
    raise ImportFailed(f"{path}: not a transcript format the workbench knows (Claude Code, Codex, OpenCode)")


def parse_file(path: Path, format_name: str | None = None) -> ParsedTranscript:
    fmt = _format(path, format_name)
    parsed = drop_repeats(parser(fmt).parse(path))
    if not parsed.messages:
        raise _nothing_read(path, fmt, parsed.skipped_lines)
    return parsed


def _format(path: Path, format_name: str | None) -> str:
    """The format to read ``path`` in (detected unless named), or :class:`ImportFailed` for one it cannot."""
    fmt = format_name or detect_format(path)
    if format_name is not None:
        check_readable(path)
    if fmt not in RECOGNISED:
        raise ImportFailed(f"unknown format {fmt!r}; known: {', '.join(RECOGNISED)}")
    if fmt not in SUPPORTED:
        raise ImportFailed(f"{path}: {fmt} transcripts are recognised but cannot be imported yet")
    return fmt


def _nothing_read(path: Path, fmt: str, skipped: list[SkippedLine]) -> ImportFailed:
    reasons = f" ({len(skipped)} unreadable lines; line {skipped[0].line}: {skipped[0].reason})" if skipped else ""
    return ImportFailed(f"{path}: no {fmt} messages could be read{reasons}")


def drop_repeats(parsed: ParsedTranscript) -> ParsedTranscript:
    """Keep the first of messages sharing an id (a record repeated in the file) and list the others as
    skipped: a session holds each message once."""
    seen: set[str] = set()
    kept: list[Message] = []
    for message in parsed.messages:
        if message.id not in seen:
            seen.add(message.id)
            message.index = len(kept)
            kept.append(message)
            continue
        parsed.skipped_lines.append(repeat_of(message))
    if len(kept) < len(parsed.messages):
        parsed.messages = kept
        parsed.skipped_lines.sort(key=lambda s: s.line)
    return parsed


def file_stamp(path: Path) -> dict[str, int | str]:
    """What tells that a transcript file changed since it was imported: its size, its modification time,
    and the version of the workbench that read it (another version may read it differently)."""
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "version": program_version()}


def unchanged_import(store: Store, path: Path, format_name: str | None = None) -> Session | None:
    """The session ``path`` was imported into, if the file has not changed since: importing it again would
    change nothing (and take as long as the first time, for a long transcript). None otherwise."""
    fmt = format_name or detect_format(path)
    if fmt not in PARSERS:
        return None
    session = store.find_session(parser(fmt).source_digest(fmt, path))
    if session is None or session.metadata.get("source_file") != file_stamp(path):
        return None
    return session


def import_file(store: Store, path: Path, format_name: str | None = None, progress: Progress | None = None, *,
                keep_messages: bool = True, process: TokenProcess | None = None) -> ParsedTranscript:
    """Parse and store ``path``, and the sub-agent transcripts it started (linked to it), in one transaction:
    an import stopped part-way leaves nothing of it. Importing the same file again updates the same sessions.

    A Claude Code transcript is stored as it is read, so memory does not grow with the file; with
    ``keep_messages`` False the result holds no messages (``stored`` counts them), as ``workbench import``
    asks. ``progress`` hears of each step (see :class:`Progress`); ``process`` counts the parts' tokens
    while the file is read (see :mod:`..token_process`).
    """
    stamp = file_stamp(path) if path.is_file() else None  # before reading: one that grows meanwhile looks changed
    fmt = _format(path, format_name)  # (and what is not a readable file is its error to report)
    if progress is not None:
        progress("read", 0, 0)
    module = parser(fmt)
    digest = module.source_digest(fmt, path)
    first: _Subagent | None = None
    with store.transaction():
        existing = store.find_session(digest)
        if fmt == "claude-code":
            parsed, writer, store_last = _stream_claude_code(store, path, digest, existing, keep_messages, progress,
                                                             process)
            if parsed.subtranscripts:  # read while the last parts are counted: its parts are counted next
                first = _read_subagent(store, parsed.session.id, parsed.subtranscripts[0], process)
            store_last()
        else:
            parsed = module.parse(path)
            writer = MessageWriter(store, parsed.session.id, keep=keep_messages, progress=progress, process=process)
            store.save_session(parsed.session)
            for start in range(0, len(parsed.messages), SAVE_BATCH):
                writer.add(parsed.messages[start:start + SAVE_BATCH], len(parsed.messages))
        parsed.skipped_lines = sorted([*parsed.skipped_lines, *writer.repeats], key=lambda s: s.line)
        parsed.warnings += writer.estimates
        if writer.count == 0:
            raise _nothing_read(path, fmt, parsed.skipped_lines)
        parsed.messages = writer.kept or []
        parsed.stored = writer.count
        _finish(store, parsed, existing, stamp)
        _store_subagents(store, parsed, process, first)
    return parsed


_Subagent = Callable[[], Session | None] | ImportFailed
"""A sub-agent's transcript read, waiting to be stored (see :func:`_read_subagent`), or why it cannot be."""


def _store_subagents(store: Store, parsed: ParsedTranscript, process: TokenProcess | None,
                     first: _Subagent | None) -> None:
    """Store the sub-agents' transcripts ``parsed`` started, each file read (and its parts sent to be counted)
    before the previous one is stored: the counting never waits for a file to be read, and no more than two
    are held at a time. ``first``: the first one, read already."""
    subs = parsed.subtranscripts
    ahead = first if first is not None or not subs else _read_subagent(store, parsed.session.id, subs[0], process)
    for index in range(len(subs)):
        current = ahead
        ahead = _read_subagent(store, parsed.session.id, subs[index + 1], process) if index + 1 < len(subs) else None
        try:
            if isinstance(current, ImportFailed):
                raise current
            if current is not None:
                current()
        except ImportFailed as exc:  # the session itself is stored; the sub-agent's file is what failed
            parsed.warnings.append(f"sub-agent transcript not imported: {exc}")


def _stream_claude_code(
    store: Store, path: Path, digest: str, existing: Session | None, keep: bool, progress: Progress | None,
    process: TokenProcess | None,
) -> tuple[ParsedTranscript, MessageWriter, Callable[[], None]]:
    """Read and store a Claude Code file batch by batch; the calls that started sub-agents are gathered on
    the way (they are all :func:`linked` needs of the messages), and each line's parts go to be counted as
    soon as they are read. The last batch is only sent to be counted: the function returned stores it."""
    reader = claude_code.Reader(path)
    writer = MessageWriter(store, reader.session_id, keep=keep, progress=progress, process=process)
    reader.on_parts = writer.counter.prefetch if process is not None else None
    store.save_session(Session(id=reader.session_id, source_format=claude_code.FORMAT, source_digest=digest,
                               created_at=existing.created_at if existing else None))
    reader.stored = lambda message_id: store.load_messages(reader.session_id, [message_id])[0]
    started: dict[str, tuple[str, ToolUsePart]] = {}

    def store_batch(batch: list[Message]) -> None:
        rewritten = reader.take_rewritten()
        started.update(calls([*batch, *rewritten]))
        writer.add(batch)
        writer.replace(rewritten)

    for batch in reader.stream(SAVE_BATCH):
        store_batch(batch)
    parsed = reader.result()
    last, rewritten = parsed.messages, reader.take_rewritten()
    started.update(calls([*last, *rewritten]))
    parsed.subtranscripts = linked(started, reader.notes, path, reader.embedded)
    writer.counter.prefetch(part for message in (*last, *rewritten) for part in message.parts)

    def store_last() -> None:
        writer.add(last)
        writer.replace(rewritten)

    return parsed, writer, store_last


def _finish(
    store: Store, parsed: ParsedTranscript, existing: Session | None, stamp: dict[str, int | str] | None
) -> None:
    """The session's record, once its messages are stored: what was skipped, the file it was read from, and
    the link to a parent session made when the parent was imported (it stays)."""
    if existing is not None:
        parsed.session.created_at = existing.created_at
        for key in LINK_KEYS:
            if key in existing.metadata and key not in parsed.session.metadata:
                parsed.session.metadata[key] = existing.metadata[key]
    parsed.session.metadata["skipped_lines"] = [s.model_dump() for s in parsed.skipped_lines]
    parsed.session.metadata["skipped_records"] = parsed.skipped_records
    parsed.session.metadata["source_file"] = stamp
    store.save_session(parsed.session)
    store.add_overlay_events(parsed.events, ignore_existing=True)


def _read_subagent(store: Store, parent_id: str, sub: Subtranscript, process: TokenProcess | None) -> _Subagent:
    """A sub-agent's transcript (its file only if it changed since it was imported) as a session linked to its
    parent's (``parent_session`` / ``parent_message``: what the app opens it from), in two steps: the file is
    read and its parts sent to be counted now, and the function returned stores it; or why it cannot be read."""
    link = {"parent_session": parent_id, "parent_message": sub.link.get("parent_message"),
            "parent_tool_use_id": sub.link.get("parent_tool_use_id"), "subagent": True,
            "agent": sub.link.get("agent")}
    if sub.path is not None:
        known = unchanged_import(store, sub.path, claude_code.FORMAT)
        if known is not None:
            return lambda: _relinked(store, known, link)
        stamp = file_stamp(sub.path)
        try:
            child = parse_file(sub.path, claude_code.FORMAT)
        except ImportFailed as exc:
            return exc
    elif sub.parsed is not None:
        child, stamp = drop_repeats(sub.parsed), None
    else:
        return lambda: None
    child.session.metadata.update(link)
    writer = MessageWriter(store, child.session.id, keep=False, process=process)
    writer.counter.prefetch(part for message in child.messages for part in message.parts)

    def store_child() -> Session:  # inside the parent's transaction (see import_file)
        existing = store.find_session(child.session.source_digest or "")
        store.save_session(child.session)
        writer.add(child.messages, len(child.messages))
        _finish(store, child, existing, stamp)
        return child.session

    return store_child


def _relinked(store: Store, known: Session, link: Mapping[str, object]) -> Session:
    """A sub-agent's session imported before from an unchanged file, linked to this parent."""
    if any(known.metadata.get(key) != value for key, value in link.items()):
        known.metadata.update(link)
        store.save_session(known)
    return known


def imported_target(store: Store, path: Path, fmt: str | None) -> tuple[str, list[SkippedLine]]:
    """The session of the transcript at ``path`` and the lines it could not read: imported now, unless the
    file has not changed since it was (then its stored session is it). See ``targets.resolve_target``."""
    known = unchanged_import(store, path, fmt)
    if known is not None:
        stored = known.metadata.get("skipped_lines", [])
        return known.id, [SkippedLine.model_validate(line) for line in stored]
    parsed = import_file(store, path, fmt, keep_messages=False)
    return parsed.session.id, parsed.skipped_lines
