"""OpenCode sessions: ``opencode export`` JSON (``{info, messages: [{info, parts}]}``).

Also reads a session straight from OpenCode's older file storage
(``~/.local/share/opencode/storage/session/<project>/<ses_…>.json`` with its
``message/`` and ``part/`` directories), assembled into the export shape.

Mapping (see ``tests/fixtures/README.md`` for the format):

- ``text`` / ``reasoning`` parts become text / thinking parts; ``ignored`` text is
  left out, as OpenCode leaves it out of the request.
- A ``tool`` part becomes a tool_use part in the assistant message and a result in
  the user tool_result message that follows it. A set ``state.time.compacted``
  (OpenCode pruned the output) becomes an import ``prune`` overlay event dated at
  that time; the output itself stays in the transcript.
- ``file`` parts: images become image parts, other binary attachments a short text
  line; ``text/plain`` and directory mentions are not sent to the model by OpenCode
  (their content arrives as synthetic text parts) and are only counted.
- A ``compaction`` part starts a new context (a pivot, shown to the model as
  "What did we do so far?"); the ``summary: true`` assistant reply is the summary.
- ``info.tokens`` is the reported usage (``input`` excludes cache reads; reasoning
  is part of ``output``); all-zero tokens (an aborted request) mean no usage.
  ``step-finish`` parts repeat those tokens and are only counted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.engine.transcript.importers.opencode_files import load_document, looks_like_storage_session
from workbench.engine.transcript.importers.reading import (
    MAX_COUNT,
    ParsedTranscript,
    SkippedLine,
    field_dict,
    field_str,
    field_text,
    source_digest,
    too_deep,
    without_lone_surrogates,
)
from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Part,
    Session,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import Action, OverlayEvent

__all__ = ["FORMAT", "looks_like_storage_session", "ms_time", "parse"]

FORMAT = "opencode"
COMPACTION_PROMPT = "What did we do so far?"
INTERRUPTED = "[Tool execution was interrupted]"
COUNTED_PARTS = {"step-start", "step-finish", "patch", "snapshot", "agent", "retry", "subtask"}


def ms_time(value: Any) -> datetime | None:
    """OpenCode times are milliseconds since the epoch."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


# --- turning messages into the workbench's model -------------------------------


def _tokens(raw: Any, model: str | None) -> Usage | None:
    if not isinstance(raw, dict):
        return None

    def num(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_COUNT else 0

    cache = field_dict(raw, "cache")
    usage = Usage(
        input_tokens=num(raw.get("input")),
        output_tokens=num(raw.get("output")),
        cache_read_input_tokens=num(cache.get("read")),
        cache_creation_input_tokens=num(cache.get("write")),
        model=model,
    )
    return usage if usage.total_input or usage.output_tokens else None


def _file_part(part: dict[str, Any]) -> Part | None:
    mime = str(part.get("mime") or "application/octet-stream")
    name = field_str(part, "filename")
    url = field_text(part, "url")
    if mime.startswith("image/"):
        size = 0
        if url.startswith("data:") and "," in url:
            size = len(url.split(",", 1)[1]) * 3 // 4
        return ImagePart(media_type=mime, name=name, byte_size=size)
    if mime in ("text/plain", "application/x-directory"):
        return None
    return TextPart(text=f"[Attached {mime}: {name or url or 'file'}]")


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.session_id = "oc-" + source_digest(FORMAT, path)
        self.messages: list[Message] = []
        self.events: list[OverlayEvent] = []
        self.skipped: list[SkippedLine] = []
        self.skipped_records: dict[str, int] = {}
        self.last_usage: Usage | None = None
        self.pending_pivot: str | None = None

    def count(self, name: str) -> None:
        self.skipped_records[name] = self.skipped_records.get(name, 0) + 1

    def read(self) -> ParsedTranscript:
        doc, self.skipped = load_document(self.path)
        for index, line, raw in doc["messages"]:
            where = line if line is not None else index + 1
            if not isinstance(raw, dict) or not isinstance(raw.get("info"), dict):
                self.skipped.append(SkippedLine(line=where, reason=f"message {index}: no 'info' object"))
                continue
            if too_deep(raw):
                self.skipped.append(SkippedLine(line=where, reason=f"message {index}: nested too deeply"))
                continue
            raw = without_lone_surrogates(raw)
            try:
                self.message(index, raw["info"], raw.get("parts"))
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                self.skipped.append(SkippedLine(line=where, reason=f"message {index}: unexpected shape: {exc}"))
        info = field_dict(doc, "info")
        return self.result({} if too_deep(info) else without_lone_surrogates(info))

    def _event(self, action: Action, message_id: str, reason: str, part_index: int | None = None,
               data: dict[str, Any] | None = None, at: datetime | None = None) -> OverlayEvent:
        suffix = f":{part_index}" if part_index is not None else ""
        return OverlayEvent(
            id=f"{self.session_id}:import:{action}:{message_id}{suffix}", session_id=self.session_id,
            plan_id=f"{self.session_id}:import", action=action, message_id=message_id, part_index=part_index,
            origin="import", reason=reason, data=data or {}, created_at=at,
        )

    def _append(self, **fields: Any) -> Message:
        msg = Message(session_id=self.session_id, index=len(self.messages), **fields)
        self.messages.append(msg)
        return msg

    def message(self, index: int, info: dict[str, Any], raw_parts: Any) -> None:
        role = info.get("role")
        if role not in ("user", "assistant"):
            self.count(f"role:{role}")
            return
        parts_in = raw_parts if isinstance(raw_parts, list) else []
        message_id = str(info.get("id") or f"message-{index}")
        times = field_dict(info, "time")
        source: dict[str, Any] = {"format": FORMAT, "index": index, "id": info.get("id")}
        for key in ("agent", "mode", "variant", "finish", "providerID"):
            if isinstance(info.get(key), str):
                source[key] = info[key]
        error = info.get("error")
        if isinstance(error, dict):
            source["error"] = str(error.get("name") or "error")
        if role == "user":
            self.user(message_id, info, parts_in, times, source)
        else:
            self.assistant(message_id, info, parts_in, times, source)

    def user(self, message_id: str, info: dict[str, Any], raw: list[Any], times: dict[str, Any],
             source: dict[str, Any]) -> None:
        parts: list[Part] = []
        compaction: dict[str, Any] | None = None
        for part in raw:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "compaction":
                compaction = part
                parts.append(TextPart(text=COMPACTION_PROMPT))
            else:
                parts.extend(self.common_part(part))
        model_info = field_dict(info, "model")
        msg = self._append(
            id=message_id, role="user", parts=parts, created_at=ms_time(times.get("created")),
            model=field_str(model_info, "modelID"), source=source,
        )
        if compaction is not None:
            pre = self.last_usage.total_input + self.last_usage.output_tokens if self.last_usage else None
            self.pending_pivot = msg.id
            self.events.append(
                self._event("pivot", msg.id, "OpenCode compaction",
                            data={"trigger": "auto" if compaction.get("auto") else "manual", "pre_tokens": pre})
            )

    def common_part(self, part: Any) -> list[Part]:
        """Text, reasoning and file parts, the same in user and assistant messages."""
        if not isinstance(part, dict):
            self.count("part:not-an-object")
            return []
        kind = part.get("type")
        if kind == "text":
            if part.get("ignored"):
                self.count("part:text-ignored")
                return []
            text = part.get("text")
            return [TextPart(text=text)] if isinstance(text, str) and text else []
        if kind == "reasoning":
            text = field_text(part, "text")
            return [ThinkingPart(text=text, redacted=not text)]
        if kind == "file":
            file_part = _file_part(part)
            if file_part is None:
                self.count(f"part:file:{part.get('mime')}")
                return []
            return [file_part]
        self.count(f"part:{kind}" if kind in COUNTED_PARTS else f"unknown-part:{kind}")
        return []

    def assistant(self, message_id: str, info: dict[str, Any], raw: list[Any], times: dict[str, Any],
                  source: dict[str, Any]) -> None:
        model = field_str(info, "modelID")
        parts: list[Part] = []
        results: list[tuple[ToolResultPart, datetime | None, datetime | None]] = []
        step_tokens: Any = None
        for part in raw:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "tool":
                use, result, compacted, ended = self.tool(part)
                parts.append(use)
                results.append((result, compacted, ended))
            else:
                if kind == "step-finish":
                    step_tokens = part.get("tokens")
                parts.extend(self.common_part(part))
        usage = _tokens(info.get("tokens"), model) if "tokens" in info else _tokens(step_tokens, model)
        summary = info.get("summary") is True
        msg = self._append(
            id=message_id, role="assistant", parts=parts, model=model, usage=usage,
            created_at=ms_time(times.get("created")), kind="summary" if summary else "message", source=source,
        )
        if usage is not None:
            self.last_usage = usage
        if summary:
            self.summary(msg)
        if results:
            self.tool_results(msg, results, ms_time(times.get("completed")))

    def summary(self, msg: Message) -> None:
        self.events.append(self._event("summary", msg.id, "OpenCode compaction summary"))
        if self.pending_pivot is None:
            # An older OpenCode wrote the summary without a compaction part: the context starts here.
            self.events.append(self._event("pivot", msg.id, "OpenCode compaction",
                                           data={"trigger": "auto", "pre_tokens": None}))
            return
        # The summary answers the compaction request, whose usage describes the old context:
        # tell the estimator to start afresh once the summary is in.
        pivot = next(e for e in self.events if e.action == "pivot" and e.message_id == self.pending_pivot)
        pivot.data["summary_id"] = msg.id
        self.pending_pivot = None

    def tool(self, part: dict[str, Any]) -> tuple[ToolUsePart, ToolResultPart, datetime | None, datetime | None]:
        state = field_dict(part, "state")
        call_id = str(part.get("callID") or part.get("id") or "")
        tool_input = state.get("input")
        use = ToolUsePart(
            id=call_id, name=str(part.get("tool") or "tool"),
            input=tool_input if isinstance(tool_input, dict) else ({} if tool_input is None else {"value": tool_input}),
        )
        status = state.get("status")
        images: list[ImagePart] = []
        for attachment in state.get("attachments") or []:
            if isinstance(attachment, dict) and (image := _file_part(attachment)) is not None and isinstance(image, ImagePart):
                images.append(image)
        if status == "completed":
            output = state.get("output")
            result = ToolResultPart(tool_use_id=call_id, text=output if isinstance(output, str) else json.dumps(output),
                                    images=tuple(images))
        elif status == "error":
            result = ToolResultPart(tool_use_id=call_id, text=str(state.get("error") or "error"), is_error=True)
        else:
            self.count(f"tool:{status}")
            result = ToolResultPart(tool_use_id=call_id, text=INTERRUPTED, is_error=True)
        times = field_dict(state, "time")
        return use, result, ms_time(times.get("compacted")), ms_time(times.get("end"))

    def tool_results(self, assistant: Message,
                     results: list[tuple[ToolResultPart, datetime | None, datetime | None]],
                     completed: datetime | None) -> None:
        ends = [end for _, _, end in results if end is not None]
        msg = self._append(
            id=f"{assistant.id}:results", role="user", kind="tool_result", parts=[r for r, _, _ in results],
            created_at=max(ends) if ends else (completed or assistant.created_at),
            source={"format": FORMAT, "index": assistant.source.get("index"), "results_of": assistant.id},
        )
        for position, (_, compacted, _) in enumerate(results):
            if compacted is not None:
                self.events.append(
                    self._event("prune", msg.id, "pruned by OpenCode (state.time.compacted)", part_index=position,
                                at=compacted)
                )

    def result(self, info: dict[str, Any]) -> ParsedTranscript:
        model = next((m.model for m in reversed(self.messages) if m.role == "assistant" and m.model), None)
        times = field_dict(info, "time")
        title = info.get("title") if isinstance(info.get("title"), str) and info.get("title") else None
        if title is None:
            first = next((m.text for m in self.messages if m.role == "user" and m.kind == "message" and m.text), "")
            title = " ".join(first.split())[:80] or None
        meta = {k: info[k] for k in ("id", "slug", "projectID", "directory", "version", "parentID") if k in info}
        session = Session(
            id=self.session_id,
            title=title,
            source_format=FORMAT,
            source_path=str(self.path.resolve()),
            source_digest=source_digest(FORMAT, self.path),
            model=model,
            created_at=ms_time(times.get("created")) or next((m.created_at for m in self.messages if m.created_at), None),
            metadata={"opencode": meta},
        )
        return ParsedTranscript(session, self.messages, self.events, self.skipped, self.skipped_records)


def parse(path: Path) -> ParsedTranscript:
    return _Reader(path).read()
