"""Exporting a session as JSONL or Markdown: the whole transcript, or only what the model sees.

``projected=True`` renders ``ctx.view()``: the items of the next request in
order, placeholders substituted (a pruned result reads
``[Old tool result content cleared]``), with their token counts. Otherwise every
message of the transcript is written with its overlay state.

Secrets are redacted by default: API keys and tokens of the common providers,
``Bearer`` headers, ``api_key=…``/``token: …`` style assignments and PEM
private keys (:func:`workbench.engine.transcript.redaction.redact`). Redaction is textual and best effort: it is a
guard against pasting a key into an issue, not a guarantee.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.engine.context.projection import ContextItem
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.formats import EXPORT_FORMATS, ExportFormat
from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from workbench.engine.transcript.redaction import redact, redact_value

__all__ = ["EXPORT_FORMATS", "ExportFormat", "export_chunks", "redact", "redact_value"]


def _part_json(part: Part, clean: Callable[[Any], Any]) -> dict[str, Any]:
    data: dict[str, Any] = part.model_dump(mode="json")
    return {k: clean(v) if k in ("text", "input", "name") else v for k, v in data.items()}


def _identity(value: Any) -> Any:
    return value


def _session_header(ctx: SessionContext, projected: bool, redacted: bool) -> dict[str, Any]:
    s = ctx.session
    return {
        "type": "session",
        "id": s.id,
        "title": redact(s.title) if redacted and s.title else s.title,
        "format": s.source_format,
        "source_path": s.source_path,
        "model": ctx.model,
        "context_window": s.context_window,
        "created_at": s.created_at.isoformat() if s.created_at else None,
        "exported_at": datetime.now(UTC).isoformat(),
        "projected": projected,
        "redacted": redacted,
        "messages": len(ctx.messages),
    }


def _overlay_of(ctx: SessionContext, message: Message) -> dict[str, Any]:
    ov = ctx.overlay
    positions = range(len(message.parts))
    state: dict[str, Any] = {}
    if message.id in ov.pinned:
        state["pinned"] = True
    if message.id in ov.archived:
        state["archived"] = True
    if message.id in ov.summaries:
        state["summary"] = True
    pruned = [i for i in positions if ov.is_pruned(message.id, i)]
    if pruned:
        state["pruned_parts"] = pruned
    offloaded = [i for i in positions if (message.id, i) in ov.offloaded]
    if offloaded:
        state["offloaded_parts"] = offloaded
    return state


def jsonl_lines(ctx: SessionContext, *, projected: bool = False, redacted: bool = True) -> Iterator[str]:
    """One JSON object per line: a ``session`` header, then messages (or context items)."""
    clean = redact_value if redacted else _identity
    yield json.dumps(_session_header(ctx, projected, redacted), ensure_ascii=False)
    if projected:
        view = ctx.view()
        for item in view.items:
            yield json.dumps(_item_json(item, clean), ensure_ascii=False)
        return
    in_view = {item.message_id for item in ctx.view().items if item.message_id}
    for m in ctx.messages:
        record: dict[str, Any] = {
            "type": "message",
            "id": m.id,
            "index": m.index,
            "role": m.role,
            "kind": m.kind,
            "created_at": m.created_at.isoformat() if m.created_at else None,
            "model": m.model,
            "usage": m.usage.model_dump(mode="json") if m.usage else None,
            "in_context": m.id in in_view,
            "parts": [_part_json(p, clean) for p in m.parts],
        }
        if m.sidechain:
            record["sidechain"] = True
        if not m.agent_visible:
            record["agent_visible"] = False
        overlay = _overlay_of(ctx, m)
        if overlay:
            record["overlay"] = overlay
        yield json.dumps(record, ensure_ascii=False)


def _item_json(item: ContextItem, clean: Callable[[Any], Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"type": item.kind, "tokens": item.tokens, "components": dict(item.components)}
    if item.message_id is not None:
        record.update(message_id=item.message_id, index=item.index, role=item.role)
    if item.badges:
        record["badges"] = list(item.badges)
    if item.parts:
        record["parts"] = [_part_json(p, clean) for p in item.parts]
    if item.tools:
        record["tools"] = clean([dict(t) for t in item.tools])
    return record


# --- Markdown -----------------------------------------------------------------


def _fence(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _part_markdown(part: Part, clean: Callable[[Any], Any]) -> str:
    match part:
        case TextPart(text=text):
            return str(clean(text))
        case ThinkingPart(redacted=True):
            return "> *(thinking, redacted)*"
        case ThinkingPart(text=text):
            quoted = "\n".join("> " + line for line in str(clean(text)).splitlines())
            return f"> *thinking*\n{quoted}" if quoted else "> *(thinking)*"
        case ToolUsePart(id=tool_id, name=name, input=tool_input):
            body = json.dumps(clean(tool_input), indent=2, ensure_ascii=False)
            return f"**Tool call** `{name}` ({tool_id})\n\n{_fence(body, 'json')}"
        case ToolResultPart(tool_use_id=tool_id, text=text, images=images, is_error=is_error):
            label = "**Tool error**" if is_error else "**Tool result**"
            extra = "".join(f"\n\n[image: {i.media_type} {i.name or ''}]" for i in images)
            return f"{label} ({tool_id})\n\n{_fence(str(clean(text)))}{extra}"
        case ImagePart(media_type=media, name=name, byte_size=size):
            return f"[image: {media} {name or ''} {size:,} bytes]".replace("  ", " ")
    return ""


def _heading(number: int, role: str, kind: str, when: datetime | None, badges: list[str], tokens: int | None) -> str:
    bits = [f"## {number} · {role}"]
    if kind not in ("message", ""):
        bits.append(kind)
    if when is not None:
        bits.append(when.strftime("%Y-%m-%d %H:%M:%S"))
    if tokens is not None:
        bits.append(f"{tokens:,} tokens")
    if badges:
        bits.append(" ".join(f"[{b}]" for b in badges))
    return " · ".join(bits)


def markdown_chunks(ctx: SessionContext, *, projected: bool = False, redacted: bool = True) -> Iterator[str]:
    """The session as readable Markdown, one chunk per message."""
    clean = redact_value if redacted else _identity
    s = ctx.session
    what = "what the model sees now (projected context)" if projected else "the full transcript"
    yield (
        f"# {clean(s.title or s.id)}\n\n"
        f"- Session `{s.id}` · {s.source_format} · model {ctx.model or 'unknown'} · {len(ctx.messages)} messages\n"
        f"- Exported {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}: {what}"
        f"{'; secrets redacted' if redacted else ''}\n"
    )
    if projected:
        view = ctx.view()
        yield f"\nContext: {view.total:,} tokens ({view.estimate_source}).\n"
        for number, item in enumerate(view.items, start=1):
            if item.kind == "message":
                head = _heading(number, item.role or "", "", None, list(item.badges), item.tokens)
            else:
                head = f"## {number} · {item.kind} · {item.tokens:,} tokens"
            body = "\n\n".join(_part_markdown(p, clean) for p in item.parts)
            if item.tools:
                body = _fence(json.dumps(clean([dict(t) for t in item.tools]), indent=2, ensure_ascii=False), "json")
            yield f"\n{head}\n\n{body}\n" if body else f"\n{head}\n"
        return
    for m in ctx.messages:
        badges = [k for k, v in _overlay_of(ctx, m).items() if v]
        if m.sidechain:
            badges.append("sidechain")
        head = _heading(m.index + 1, m.role, m.kind, m.created_at, badges, None)
        body = "\n\n".join(chunk for chunk in (_part_markdown(p, clean) for p in m.parts) if chunk)
        yield f"\n{head}\n\n{body}\n" if body else f"\n{head}\n"


def export_chunks(ctx: SessionContext, fmt: ExportFormat, *, projected: bool = False,
                  redacted: bool = True) -> Iterator[str]:
    """The export as text chunks, each ending with a newline."""
    if fmt == "jsonl":
        for line in jsonl_lines(ctx, projected=projected, redacted=redacted):
            yield line + "\n"
    else:
        yield from markdown_chunks(ctx, projected=projected, redacted=redacted)


def write_export(ctx: SessionContext, fmt: ExportFormat, target: Path, *, projected: bool = False,
                 redacted: bool = True) -> Path:
    """Write the export to ``target`` through a ``.partial`` file beside it, so a failed write leaves no half
    file under the name; :class:`WorkbenchError` saying what failed."""
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh:
            for chunk in export_chunks(ctx, fmt, projected=projected, redacted=redacted):
                fh.write(chunk)
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise WorkbenchError(f"cannot write {target}: {exc.strerror or exc}") from exc
    return target


def free_name(folder: Path, session_id: str, fmt: ExportFormat) -> Path:
    """A file in ``folder`` for the session's export that does not exist yet (``ID.md``, ``ID-2.md``, ...)."""
    suffix = ".jsonl" if fmt == "jsonl" else ".md"
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id) or "session"
    candidate, number = folder / f"{stem}{suffix}", 1
    while candidate.exists() or candidate.with_name(candidate.name + ".partial").exists():
        number += 1
        candidate = folder / f"{stem}-{number}{suffix}"
    return candidate
