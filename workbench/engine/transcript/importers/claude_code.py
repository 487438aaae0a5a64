"""Claude Code transcripts (``~/.claude/projects/**/*.jsonl``).

One API response is spread over several ``assistant`` lines sharing
``message.id``; they are merged into one message whose usage is the last
line's (earlier lines carry partial ``output_tokens``); whether that count
is the response's whole is recorded in ``source["output"]`` (``claude_usage``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.engine.transcript.importers.claude_hooks import HookedCalls
from workbench.engine.transcript.importers.claude_restore import FilesRead
from workbench.engine.transcript.importers.claude_subagents import SubagentNotes, calls, linked
from workbench.engine.transcript.importers.claude_usage import output_state, says_final, usage_of
from workbench.engine.transcript.importers.reading import (
    MAX_COUNT,
    ParsedTranscript,
    SkippedLine,
    iter_lines,
    load_json,
    source_digest,
)
from workbench.engine.transcript.models import (
    Message,
    Part,
    Session,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import Action, Origin, OverlayEvent
from workbench.engine.transcript.persist import has_persist_tag
from workbench.engine.transcript.request_blocks import image_part, result_content

FORMAT = "claude-code"
MESSAGE_TYPES = {"user", "assistant"}
KNOWN_TYPES = MESSAGE_TYPES | {"system", "summary", "progress", "file-history-snapshot", "queue-operation", "result"}


def looks_like(record: Any) -> bool:
    if not isinstance(record, dict):
        return False
    kind = record.get("type")
    if not isinstance(kind, str):
        return False
    if kind in {"file-history-snapshot", "queue-operation", "summary"}:
        return True
    return kind in KNOWN_TYPES and ("sessionId" in record or "uuid" in record or "message" in record)


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def parse_blocks(content: Any) -> list[Part]:
    """Content blocks of a Claude message as parts; unknown block types become text."""
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    if not isinstance(content, list):
        return parts
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=str(block.get("text", ""))))
        elif kind == "thinking":
            parts.append(ThinkingPart(text=str(block.get("thinking", ""))))
        elif kind == "redacted_thinking":
            parts.append(ThinkingPart(redacted=True))
        elif kind == "tool_use":
            tool_input = block.get("input")
            parts.append(
                ToolUsePart(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    input=tool_input if isinstance(tool_input, dict) else {"value": tool_input},
                )
            )
        elif kind == "tool_result":
            text, images = result_content(block.get("content"))
            parts.append(
                ToolResultPart(
                    tool_use_id=str(block.get("tool_use_id", "")),
                    text=text,
                    images=images,
                    is_error=bool(block.get("is_error", False)),
                )
            )
        elif kind == "image":
            parts.append(image_part(block))
        else:
            parts.append(TextPart(text=json.dumps(block, ensure_ascii=False)))
    return parts


def _declared_window(record: dict[str, Any]) -> int | None:
    """The context window a record states: ``contextWindow`` on the record, or per model in a result's
    ``modelUsage`` (``{"claude-opus-4-6[1m]": {"contextWindow": 1000000, ...}}``, the largest)."""
    windows = [record.get("contextWindow")]
    per_model = record.get("modelUsage")
    if isinstance(per_model, dict):
        windows += [entry.get("contextWindow") for entry in per_model.values() if isinstance(entry, dict)]
    found = [w for w in windows if isinstance(w, int) and not isinstance(w, bool) and 0 < w <= MAX_COUNT]
    return max(found) if found else None


class Reader:
    """Reads a Claude Code transcript line by line (see :meth:`stream`); :meth:`result` is what it read."""

    def __init__(self, path: Path, agent: str | None = None) -> None:
        """``agent``: read the records of that sub-agent embedded in ``path`` (its session of its own)."""
        self.path = path
        self.agent = agent
        self.digest = source_digest(FORMAT, path) + (f":{agent}" if agent else "")
        self.session_id = "cc-" + self.digest.replace(":", "-")
        self.notes = SubagentNotes()
        self.files = FilesRead()
        self.hooks = HookedCalls()
        self.reattach: Message | None = None
        """The files Claude Code re-attaches after the latest compaction, written after its summary."""
        self.messages: list[Message] = []
        self.by_api_id: dict[tuple[str, bool], tuple[int, str]] = {}
        """(API response id, sidechain) -> the message's index and id: a sub-agent's records can repeat a
        response of the main thread under the same API id, and must not merge into it."""
        self.events: list[OverlayEvent] = []
        self.skipped: list[SkippedLine] = []
        self.skipped_records: dict[str, int] = {}
        self.titles: list[str] = []
        self.meta: dict[str, Any] = {}
        self.pin_next_response = False
        self.context_window: int | None = None
        self.offset = 0
        """How many messages :meth:`stream` has handed on already; ``messages`` holds the ones after them."""
        self.handed_on = _HandedOn()
        self.stored: Callable[[str], Message] | None = None
        """Reads back a message handed on already, for a later line of the same API response (see ``stream``)."""
        self.rewritten: dict[str, Message] = {}
        self.on_parts: Callable[[list[Part]], None] | None = None
        """Told of each record's parts as soon as they are read (an import sends them to be counted)."""
        self.marks_final = False
        """A line so far said its response had ended (:func:`.claude_usage.says_final`): this Claude Code marks
        the lines with final usage."""

    def read(self) -> ParsedTranscript:
        for _ in self.stream(None):
            pass
        return self.result()

    def stream(self, hold: int | None) -> Iterator[list[Message]]:
        """Read the file, handing on finished messages as it goes so that memory does not grow with the file:
        with ``hold``, whenever ``2 * hold`` messages are waiting, all but the last ``hold`` are yielded. A line of the same API response as a message handed
        on already (further back than ``hold`` messages, which Claude Code does not write) is merged into it as
        read back through :attr:`stored` (see :meth:`take_rewritten`). Nothing is handed on while every message is a sidechain: the file may
        be a sub-agent's own transcript (see :meth:`_own_thread`). Call :meth:`result` after."""
        for number, text, problem in iter_lines(self.path):
            if text is None:
                self.skipped.append(SkippedLine(line=number, reason=problem or "unreadable"))
                continue
            self.feed(number, text)
            if hold is not None and len(self.messages) >= 2 * max(hold, 1):
                ready = self.hand_on(hold)
                if ready:
                    yield ready

    def feed(self, number: int, text: str) -> None:
        """One line of the file: its record read, or the line listed as skipped with why."""
        record, problem = load_json(text)
        if problem is not None:
            self.skipped.append(SkippedLine(line=number, reason=problem))
            return
        if not isinstance(record, dict):
            self.skipped.append(SkippedLine(line=number, reason="not a JSON object"))
            return
        try:
            self.record(number, record)
        except (TypeError, ValueError, AttributeError) as exc:
            self.skipped.append(SkippedLine(line=number, reason=f"unexpected record shape: {exc}"))

    def hand_on(self, hold: int) -> list[Message]:
        """All but the last ``hold`` messages, taken out of ``messages``."""
        if not self.handed_on.main and not any(not m.sidechain for m in self.messages):
            return []
        count = max(0, len(self.messages) - hold)
        ready, self.messages = self.messages[:count], self.messages[count:]
        self.offset += count
        self.handed_on.note(ready)
        return ready

    def take_rewritten(self) -> list[Message]:
        """Messages handed on earlier that a later line changed: to be stored again."""
        out, self.rewritten = list(self.rewritten.values()), {}
        return out

    def count(self, name: str) -> None:
        self.skipped_records[name] = self.skipped_records.get(name, 0) + 1

    def record(self, number: int, record: dict[str, Any]) -> None:
        kind = record.get("type")
        self.notes.note(number, record)
        self.files.note(record)
        self.hooks.note(record)
        for key in ("sessionId", "cwd", "version", "gitBranch", "agentId"):
            if key in record and key not in self.meta:
                self.meta[key] = record[key]
        window = _declared_window(record)
        if window is not None:
            self.context_window = window
        if kind == "summary":
            if isinstance(record.get("summary"), str):
                self.titles.append(record["summary"])
            return
        if kind == "system":
            if record.get("subtype") == "compact_boundary":
                self.boundary(number, record)
            else:
                self.count(f"system:{record.get('subtype', 'unknown')}")
            return
        if kind not in MESSAGE_TYPES:
            self.count(str(kind) if kind in KNOWN_TYPES else f"unknown:{kind}")
            return
        message = record.get("message")
        if not isinstance(message, dict):
            self.skipped.append(SkippedLine(line=number, reason=f"{kind} record without a message"))
            return
        if kind == "assistant":
            self.assistant(number, record, message)
        else:
            self.user(number, record, message)

    def _read(self, content: Any) -> list[Part]:
        parts = parse_blocks(content)
        if self.on_parts is not None:
            self.on_parts(parts)
        return parts

    def _new(self, number: int, record: dict[str, Any], **fields: Any) -> Message:
        return Message(
            session_id=self.session_id,
            index=self.offset + len(self.messages),
            created_at=_timestamp(record.get("timestamp")),
            sidechain=bool(record.get("isSidechain", False)),
            source={"format": FORMAT, "lines": [number], "uuid": record.get("uuid")},
            **fields,
        )

    def assistant(self, number: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        api_id = message.get("id")
        model = message.get("model") if isinstance(message.get("model"), str) else None
        parts = self._read(message.get("content"))
        usage = usage_of(message.get("usage"), model)
        final = says_final(message)
        self.marks_final = self.marks_final or final
        key = (api_id, bool(record.get("isSidechain", False))) if isinstance(api_id, str) else None
        if key is not None and key in self.by_api_id:
            index, message_id = self.by_api_id[key]
            position = index - self.offset
            if position >= 0:
                self.messages[position] = _merged(self.messages[position], parts, usage, number, final)
            elif self.stored is not None:  # handed on already: merge into what was stored
                old = self.rewritten.get(message_id) or self.stored(message_id)
                self.rewritten[message_id] = _merged(old, parts, usage, number, final)
            else:
                raise ValueError(f"a later line of response {api_id} after it was handed on")
            return
        replay = key is not None and (key[0], not key[1]) in self.by_api_id
        message_id = str((not replay and api_id) or record.get("uuid") or f"line-{number}")
        msg = self._new(number, record, id=message_id, role="assistant", parts=parts, model=model, usage=usage)
        msg.source["request_id"] = record.get("requestId")
        state = output_state(None, usage, final, self.marks_final) if usage is not None else None
        if state is not None:
            msg.source["output"] = state
        if key is not None:
            self.by_api_id[key] = (self.offset + len(self.messages), message_id)
        self.messages.append(msg)
        if self.pin_next_response and not msg.sidechain:
            self.pin_next_response = False
            self.events.append(self._event("pin", msg.id, "persist-tag", "response to a [PERSIST] message"))

    def user(self, number: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        parts = self._read(message.get("content"))
        is_result = bool(parts) and all(isinstance(p, ToolResultPart) for p in parts)
        summary = bool(record.get("isCompactSummary"))
        msg = self._new(
            number, record, id=str(record.get("uuid") or f"line-{number}"), role="user", parts=parts,
            kind="summary" if summary else ("tool_result" if is_result else "message"),
        )
        if record.get("isMeta"):
            msg.source["meta"] = True
        repeats = self.hooks.repeats(parts, record.get("toolUseResult")) if not msg.sidechain else []
        if repeats:
            msg.parts.extend(repeats)
            msg.source.update(hook_repeat=True, estimated=True)
        if self.reattach is not None and not msg.sidechain and not summary:  # no summary came: before this one
            self.messages.append(self.reattach.model_copy(update={"index": msg.index}))
            msg.index += 1
            self.reattach = None
        self.messages.append(msg)
        if self.reattach is not None and not msg.sidechain:
            self.messages.append(self.reattach.model_copy(update={"index": msg.index + 1}))
            self.reattach = None
        if summary:
            self.events.append(self._event("summary", msg.id, "import", "Claude Code compaction summary"))
        first_text = next((p.text for p in parts if isinstance(p, TextPart)), "")
        if not msg.sidechain and has_persist_tag(first_text):
            self.events.append(self._event("pin", msg.id, "persist-tag", "[PERSIST] tag"))
            self.pin_next_response = True

    def boundary(self, number: int, record: dict[str, Any]) -> None:
        raw_meta = record.get("compactMetadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        pre = meta.get("preTokens")
        msg = self._new(
            number, record, id=str(record.get("uuid") or f"line-{number}"), role="system",
            kind="compact_boundary", agent_visible=False,
            parts=[TextPart(text=str(record.get("content") or "Conversation compacted"))],
        )
        self.messages.append(msg)
        parts = self.files.reattached() if not msg.sidechain else []
        if parts:
            self.reattach = self._new(
                number, record, id=f"{msg.id}:reattached", role="user", parts=parts,
            )
            self.reattach.source.update(reattached=True, estimated=True)
        self.events.append(
            self._event(
                "pivot", msg.id, "import", "Claude Code compaction boundary",
                data={"trigger": str(meta.get("trigger") or "unknown"), "pre_tokens": pre if isinstance(pre, int) else None},
                created_at=msg.created_at,  # when Claude Code compacted, not when the file was imported
            )
        )

    def _event(self, action: Action, message_id: str, origin: Origin, reason: str, data: dict[str, Any] | None = None,
               created_at: datetime | None = None) -> OverlayEvent:
        """``created_at``: when the transcript says it happened (None: when it is imported)."""
        event_id = f"{self.session_id}:import:{action}:{message_id}"
        event = OverlayEvent(
            id=event_id, session_id=self.session_id, plan_id=f"{self.session_id}:import",
            action=action, message_id=message_id, origin=origin, reason=reason, data=data or {},
        )
        if created_at is not None:
            event.created_at = created_at
        return event

    def result(self) -> ParsedTranscript:
        if self.messages and not self.handed_on.main and all(m.sidechain for m in self.messages):
            self._own_thread()
        model = next((m.model for m in reversed(self.messages) if m.model and not m.sidechain), self.handed_on.model)
        title = self.titles[-1] if self.titles else (self.handed_on.prompt or self._first_prompt(self.messages))
        session = Session(
            id=self.session_id,
            title=title,
            source_format=FORMAT,
            source_path=str(self.path.resolve()),
            source_digest=self.digest,
            model=model,
            context_window=self.context_window,
            created_at=self.handed_on.created_at or next((m.created_at for m in self.messages if m.created_at), None),
            metadata=self.meta,
        )
        return ParsedTranscript(session, self.messages, self.events, self.skipped, self.skipped_records)

    def embedded(self, agent: str) -> ParsedTranscript | None:
        """A sub-agent's session read from its messages embedded in this transcript's progress records."""
        records = self.notes.embedded.get(agent)
        if not records:
            return None
        reader = Reader(self.path, agent)
        reader.meta.update({"sidechain": True, "agentId": agent, "embedded_in": self.session_id})
        for number, record in records:
            try:
                reader.record(number, record)
            except (TypeError, ValueError, AttributeError) as exc:
                reader.skipped.append(SkippedLine(line=number, reason=f"unexpected record shape: {exc}"))
        return reader.result() if reader.messages else None

    def _own_thread(self) -> None:
        """A sub-agent's own transcript (``subagents/agent-*.jsonl``: every record a sidechain) is the
        main thread of its session: its messages are its context, its model the session's. Where they
        came from stays in ``source`` and the session's metadata."""
        self.messages = [m.model_copy(update={"sidechain": False, "source": {**m.source, "sidechain": True}})
                         for m in self.messages]
        self.meta["sidechain"] = True

    @staticmethod
    def _first_prompt(messages: list[Message]) -> str | None:
        for m in messages:
            if m.role == "user" and m.kind == "message" and not m.sidechain and not m.source.get("meta"):
                text = " ".join(m.text.split())
                if text and not text.startswith("<"):
                    return text[:80]
        return None


def _merged(old: Message, parts: list[Part], usage: Usage | None, number: int, final: bool) -> Message:
    """``old`` with a later line of the same API response: its blocks appended, the fuller usage kept, and
    whether its output count is whole (``final``: this line says the response ended)."""
    keep = usage if usage and (old.usage is None or usage.output_tokens >= old.usage.output_tokens) else old.usage
    source = {**old.source, "lines": [*old.source["lines"], number]}
    state = output_state(old, usage, final)
    if state is not None:
        source["output"] = state
    return old.model_copy(update={"parts": [*old.parts, *parts], "usage": keep, "source": source})


@dataclass
class _HandedOn:
    """What the session takes from messages already handed on: its model, start and title."""

    main: bool = False
    model: str | None = None
    created_at: datetime | None = None
    prompt: str | None = None

    def note(self, messages: list[Message]) -> None:
        self.main = self.main or any(not m.sidechain for m in messages)
        self.model = next((m.model for m in reversed(messages) if m.model and not m.sidechain), self.model)
        self.created_at = self.created_at or next((m.created_at for m in messages if m.created_at), None)
        self.prompt = self.prompt or Reader._first_prompt(messages)


def parse(path: Path) -> ParsedTranscript:
    """The transcript, and the sub-agent transcripts it started (see :mod:`.claude_subagents`)."""
    reader = Reader(path)
    parsed = reader.read()
    parsed.subtranscripts = linked(calls(parsed.messages), reader.notes, path, reader.embedded)
    return parsed

