"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{timestamp, type, payload}``. How they become messages:

- ``session_meta``: ids, cwd, versions go to the session's metadata. Its
  ``base_instructions`` are the system prompt the model saw, so they become one
  system message (agent-visible, kept out of the API ``wire`` like any system
  message): the budget can then attribute those tokens instead of calling them
  unattributed. ``dynamic_tools`` (and a header's ``tools``) are the tool
  definitions the model saw: kept in the metadata, they are the view's *tool
  definitions* item, one count per tool.
- ``response_item``: consecutive model output (``reasoning``, assistant
  ``message``, ``function_call``, ``custom_tool_call``, ``local_shell_call``,
  ``web_search_call``) is one assistant message, one API response; the tool
  outputs after it are one user ``tool_result`` message. ``developer``/``system``
  messages become system messages. Encrypted reasoning without a summary is a
  redacted thinking part.
- ``event_msg``: ``user_message`` is the user's prompt (some rollouts record the
  prompt only here; when a user ``response_item`` with the same text is there too,
  it is kept once). ``token_count`` gives the usage of the response before it
  (``input_tokens`` includes ``cached_input_tokens``) and the context window;
  a repeated report (same cumulative total) is ignored.
- ``turn_context`` names the model; ``compacted`` is a compaction: a pivot, then
  the ``replacement_history`` (what the model sees afterwards) or the summary alone.

The reader takes lines one at a time (:meth:`CodexReader.feed`), so a live
rollout can be followed without re-reading it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.engine.transcript.importers.reading import (
    MAX_COUNT,
    ParsedTranscript,
    SkippedLine,
    field_dict,
    field_str,
    field_text,
    iter_lines,
    load_json,
    source_digest,
)
from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    MessageKind,
    Part,
    Role,
    Session,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import Action, OverlayEvent

FORMAT = "codex"
CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
REQUEST_MARKER = "## My request for Codex:"


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _num(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_COUNT else 0


def codex_usage(raw: Any, model: str | None) -> Usage | None:
    """One request's usage; Codex counts cached input inside ``input_tokens``."""
    if not isinstance(raw, dict):
        return None
    total_input = _num(raw, "input_tokens")
    cached = min(_num(raw, "cached_input_tokens"), total_input)
    usage = Usage(
        input_tokens=total_input - cached,
        cache_read_input_tokens=cached,
        output_tokens=_num(raw, "output_tokens"),
        model=model,
    )
    return usage if usage.total_input or usage.output_tokens else None


def _content(content: Any) -> tuple[list[str], list[ImagePart]]:
    texts: list[str] = []
    images: list[ImagePart] = []
    if isinstance(content, str):
        return [content], images
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "input_image":
            url = field_text(block, "image_url")
            media = url[5:].split(";", 1)[0] if url.startswith("data:") else "image/png"
            size = len(url.split(",", 1)[1]) * 3 // 4 if url.startswith("data:") and "," in url else 0
            images.append(ImagePart(media_type=media or "image/png", byte_size=size))
    return texts, images


def _text_key(text: str) -> bytes:
    """Two prompts with the same key are the same text but for whitespace (a digest: a long session's prompts
    are not kept twice)."""
    return hashlib.blake2b(" ".join(text.split()).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class CodexReader:
    """Reads a rollout line by line; :meth:`result` can be called at any point."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.session_id = "cx-" + source_digest(FORMAT, path)
        self.messages: list[Message] = []
        self.events: list[OverlayEvent] = []
        self.skipped: list[SkippedLine] = []
        self.skipped_records: dict[str, int] = {}
        self.meta: dict[str, Any] = {}
        self.model: str | None = None
        self.context_window: int | None = None
        self.tools: list[dict[str, Any]] = []
        """The tool definitions of the session header, for the view's tools item (``context.recorded_items``)."""
        self.open_assistant: int | None = None
        self.open_results: int | None = None
        self.last_total: int | None = None
        self.turn_user_texts: dict[bytes, list[int]] = {}
        """User prompts since the last compaction, from either record, to keep one of a pair: the positions of
        the messages by :func:`_text_key`, oldest first (looked up by key, so a long session stays linear)."""
        self._line_uses: dict[int, int] = {}

    # --- input ------------------------------------------------------------------

    def read(self) -> ParsedTranscript:
        for number, text, problem in iter_lines(self.path):
            if text is None:
                self.skipped.append(SkippedLine(line=number, reason=problem or "unreadable"))
            else:
                self.feed(number, text)
        return self.result()

    def feed(self, number: int, text: str) -> None:
        """One line of the rollout; a bad line is listed in ``skipped``, never raised."""
        if not text.strip():
            return
        record, problem = load_json(text)
        if problem is not None:
            self.skipped.append(SkippedLine(line=number, reason=problem))
            return
        if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
            self.skipped.append(SkippedLine(line=number, reason="not a Codex rollout record ({timestamp, type, payload})"))
            return
        try:
            self.record(number, record)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            self.skipped.append(SkippedLine(line=number, reason=f"unexpected record shape: {exc}"))

    def count(self, name: str) -> None:
        self.skipped_records[name] = self.skipped_records.get(name, 0) + 1

    def record(self, number: int, record: dict[str, Any]) -> None:
        kind = record.get("type")
        payload: dict[str, Any] = record["payload"]
        at = _timestamp(record.get("timestamp"))
        if kind == "session_meta":
            self.session_meta(number, payload, at)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str):
                self.model = payload["model"]
            self.count("turn_context")
        elif kind == "response_item":
            self.response_item(number, payload, at, replayed=False)
        elif kind == "event_msg":
            self.event_msg(number, payload, at)
        elif kind == "compacted":
            self.compacted(number, payload, at)
        else:
            self.count(f"unknown:{kind}")

    # --- records ----------------------------------------------------------------

    def session_meta(self, number: int, payload: dict[str, Any], at: datetime | None) -> None:
        for key in ("id", "cwd", "originator", "cli_version", "source", "model_provider", "git"):
            if key in payload and key not in self.meta:
                self.meta[key] = payload[key]
        tools = [t for key in ("dynamic_tools", "tools") if isinstance(payload.get(key), list)
                 for t in payload[key] if isinstance(t, dict)]
        if isinstance(payload.get("dynamic_tools"), list):
            self.meta["dynamic_tools"] = len(payload["dynamic_tools"])
        if tools and not self.tools:
            self.tools = tools
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if not isinstance(text, str):
            text = field_str(payload, "instructions")
        if text and not any(m.source.get("codex") == "base_instructions" for m in self.messages):
            self._append(number, at, role="system", parts=[TextPart(text=text)], extra={"codex": "base_instructions"})

    def response_item(self, number: int, item: dict[str, Any], at: datetime | None, *, replayed: bool) -> None:
        kind = item.get("type")
        extra = {"replayed": True} if replayed else {}
        if kind == "message":
            role = item.get("role")
            texts, images = _content(item.get("content"))
            parts: list[Part] = [TextPart(text=t) for t in texts if t]
            parts.extend(images)
            if role == "assistant":
                phase = {"phase": item["phase"]} if isinstance(item.get("phase"), str) else {}
                self._assistant_parts(number, at, parts, {**extra, **phase})
            elif role == "user":
                self._user_prompt(number, at, "\n".join(texts), parts, extra, from_event=False)
            else:
                self._close()
                self._append(number, at, role="system", parts=parts, extra={**extra, "codex_role": role})
        elif kind == "reasoning":
            summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
            content = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
            text = "\n\n".join(t for t in summary or content if isinstance(t, str) and t)
            self._assistant_parts(number, at, [ThinkingPart(text=text, redacted=not text)], extra)
        elif kind in CALLS:
            self._assistant_parts(number, at, [self._call(item)], extra)
        elif kind == "web_search_call":
            action = field_dict(item, "action")
            query = action.get("query") or action.get("url") or ""
            self._assistant_parts(number, at, [TextPart(text=f"[web search: {query}]" if query else "[web search]")], extra)
        elif kind in OUTPUTS:
            self._tool_output(number, at, item, extra)
        else:
            self.count(f"response_item:{kind}")

    def _call(self, item: dict[str, Any]) -> ToolUsePart:
        call_id = str(item.get("call_id") or item.get("id") or "")
        name = str(item.get("name") or item.get("type") or "tool")
        if item.get("type") == "local_shell_call":
            action = item.get("action")
            return ToolUsePart(id=call_id, name="local_shell", input=action if isinstance(action, dict) else {})
        raw = item.get("arguments") if "arguments" in item else item.get("input")
        if isinstance(raw, str) and item.get("type") == "function_call":
            parsed, _ = load_json(raw)
            tool_input = parsed if isinstance(parsed, dict) else {"arguments": raw}
        else:
            tool_input = raw if isinstance(raw, dict) else {"input": raw}
        return ToolUsePart(id=call_id, name=name, input=tool_input)

    def _tool_output(self, number: int, at: datetime | None, item: dict[str, Any], extra: dict[str, Any]) -> None:
        output = item.get("output")
        is_error = False
        if isinstance(output, dict):
            is_error = output.get("success") is False
            output = output.get("content", output.get("output", ""))
        texts, images = _content(output) if not isinstance(output, str) else ([output], [])
        part = ToolResultPart(tool_use_id=str(item.get("call_id") or ""), text="\n".join(texts), images=tuple(images),
                              is_error=is_error)
        self.open_assistant = None
        if self.open_results is not None:
            self._extend(self.open_results, [part], number)
            return
        msg = self._append(number, at, role="user", kind="tool_result", parts=[part], extra=extra)
        self.open_results = msg.index

    def event_msg(self, number: int, payload: dict[str, Any], at: datetime | None) -> None:
        kind = payload.get("type")
        if kind == "user_message":
            message = field_text(payload, "message")
            images = [ImagePart(name=str(p)) for p in payload.get("local_images") or []]
            parts: list[Part] = [TextPart(text=message)] if message else []
            self._user_prompt(number, at, message, [*parts, *images], {}, from_event=True)
        elif kind == "token_count":
            self.token_count(payload)
        elif kind == "task_started":
            window = payload.get("model_context_window")
            if isinstance(window, int) and 0 < window <= MAX_COUNT:
                self.context_window = window
            self.count("event_msg:task_started")
        else:
            self.count(f"event_msg:{kind}")

    def token_count(self, payload: dict[str, Any]) -> None:
        info = payload.get("info")
        if not isinstance(info, dict):
            self.count("event_msg:token_count(no info)")
            return
        window = info.get("model_context_window")
        if isinstance(window, int) and 0 < window <= MAX_COUNT:
            self.context_window = window
        total = info.get("total_token_usage")
        total_tokens = _num(total, "total_tokens") if isinstance(total, dict) else None
        if total_tokens is not None and total_tokens == self.last_total:
            self.count("event_msg:token_count(repeat)")
            return
        self.last_total = total_tokens
        usage = codex_usage(info.get("last_token_usage"), self.model)
        target = next(
            (m for m in reversed(self.messages) if m.role == "assistant" and not m.source.get("replayed")), None
        )
        if usage is None or target is None or target.usage is not None:
            self.count("event_msg:token_count(unmatched)")
            return
        self.messages[target.index] = target.model_copy(update={"usage": usage, "model": target.model or self.model})
        self.open_assistant = None  # the response is complete; what follows is a new request

    def compacted(self, number: int, payload: dict[str, Any], at: datetime | None) -> None:
        self._close()
        self.turn_user_texts = {}
        pre = None
        last = next((m.usage for m in reversed(self.messages) if m.usage is not None), None)
        if last is not None:
            pre = last.total_input + last.output_tokens
        marker = self._append(number, at, role="system", kind="compact_boundary",
                              parts=[TextPart(text="Conversation compacted")], extra={})
        marker = self.messages[marker.index] = marker.model_copy(update={"agent_visible": False})
        self.events.append(self._event("pivot", marker.id, "Codex compaction", {"trigger": "auto", "pre_tokens": pre}))
        summary_text = field_text(payload, "message")
        history = payload.get("replacement_history")
        summary: Message | None = None
        if isinstance(history, list):
            for item in history:
                if isinstance(item, dict):
                    self.response_item(number, item, at, replayed=True)
            self._close()
            candidates = [m for m in self.messages[marker.index + 1:] if m.role == "user" and m.kind == "message"]
            summary = next((m for m in reversed(candidates) if summary_text and summary_text.strip() in m.text), None)
        if summary is None and summary_text:
            summary = self._append(number, at, role="user", parts=[TextPart(text=summary_text)], extra={})
        if summary is not None:
            self.messages[summary.index] = summary.model_copy(update={"kind": "summary"})
            self.events.append(self._event("summary", summary.id, "Codex compaction summary"))
        self.turn_user_texts = {}

    # --- building messages ------------------------------------------------------

    def _append(self, number: int, at: datetime | None, *, role: Role, parts: list[Part], extra: dict[str, Any],
                kind: MessageKind = "message") -> Message:
        index = len(self.messages)
        uses = self._line_uses.get(number, 0)
        self._line_uses[number] = uses + 1
        msg = Message(
            id=f"line-{number}" if uses == 0 else f"line-{number}.{uses}",
            session_id=self.session_id, index=index, role=role, kind=kind, parts=parts, created_at=at,
            model=self.model if role == "assistant" else None, source={"format": FORMAT, "lines": [number], **extra},
        )
        self.messages.append(msg)
        return msg

    def _extend(self, index: int, parts: list[Part], number: int) -> None:
        """Add parts to a message: a new object, so a follower can tell it changed."""
        old = self.messages[index]
        lines = old.source.get("lines", [])
        source = {**old.source, "lines": lines if number in lines else [*lines, number]}
        self.messages[index] = old.model_copy(update={"parts": [*old.parts, *parts], "source": source})

    def _assistant_parts(self, number: int, at: datetime | None, parts: list[Part], extra: dict[str, Any]) -> None:
        self.open_results = None
        if self.open_assistant is not None:
            self._extend(self.open_assistant, parts, number)
            return
        msg = self._append(number, at, role="assistant", parts=parts, extra=extra)
        self.open_assistant = msg.index

    def _close(self) -> None:
        self.open_assistant = None
        self.open_results = None

    def _user_prompt(self, number: int, at: datetime | None, text: str, parts: list[Part], extra: dict[str, Any],
                     *, from_event: bool) -> None:
        key = _text_key(text) if text and not extra.get("replayed") else None
        if key is not None:
            twins = self.turn_user_texts.get(key)
            if twins:
                twin = twins.pop(0)
                old = self.messages[twin]
                if from_event:
                    self.count("event_msg:user_message(also a response_item)")
                else:  # the model saw the response_item: keep that one's parts, in the same place
                    self.messages[twin] = old.model_copy(update={"parts": parts})
                    self.count("response_item:message(user, also an event)")
                return
        self._close()
        msg = self._append(number, at, role="user", parts=parts, extra={**extra, "from_event": from_event})
        if key is not None:
            self.turn_user_texts.setdefault(key, []).append(msg.index)

    def _event(self, action: Action, message_id: str, reason: str, data: dict[str, Any] | None = None) -> OverlayEvent:
        return OverlayEvent(
            id=f"{self.session_id}:import:{action}:{message_id}", session_id=self.session_id,
            plan_id=f"{self.session_id}:import", action=action, message_id=message_id, origin="import",
            reason=reason, data=data or {},
        )

    # --- output -----------------------------------------------------------------

    def title(self) -> str | None:
        for m in self.messages:
            if m.role != "user" or m.kind != "message" or m.source.get("replayed"):
                continue
            text = m.text
            if REQUEST_MARKER in text:
                text = text.split(REQUEST_MARKER, 1)[1]
            text = " ".join(text.split())
            if text and not text.startswith("<"):
                return text[:80]
        return None

    def result(self) -> ParsedTranscript:
        meta = {**self.meta}
        if "cwd" in meta:
            meta["directory"] = meta["cwd"]
        session = Session(
            id=self.session_id,
            title=self.title(),
            source_format=FORMAT,
            source_path=str(self.path.resolve()),
            source_digest=source_digest(FORMAT, self.path),
            model=self.model or next((m.model for m in reversed(self.messages) if m.model), None),
            context_window=self.context_window,
            created_at=next((m.created_at for m in self.messages if m.created_at), None),
            metadata={"codex": meta, **({"tool_definitions": self.tools} if self.tools else {})},
        )
        return ParsedTranscript(session, list(self.messages), list(self.events), list(self.skipped),
                                dict(self.skipped_records))


def parse(path: Path) -> ParsedTranscript:
    return CodexReader(path).read()
