"""Continuing a session (imported or not) as a new engine session.

The new session starts from the old one's projection: each message item of
``ctx.view()`` becomes a message with the parts the model sees (pruned
results stay as their placeholder, offloaded ones as their reference), so
nothing the model had forgotten comes back. Pins on copied messages are kept;
``metadata.forked_from`` says where it came from.

A few changes make the copy a valid request for the engine's provider:

- system messages (another agent's system prompt, e.g. Codex base instructions)
  are left out: the engine sends its own;
- thinking without an API signature (every imported transcript's) cannot be sent
  back to Anthropic and is left out;
- a summary becomes a user message, as the engine's own summaries are;
- a tool call without a result gets an error result saying none was recorded, and
  a result whose call is not in the context becomes plain text;
- reported usage is dropped (it described the other agent's requests) and the
  session's model is the one given, or the old one only if the engine can run it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.transcript.models import (
    Message,
    Part,
    Session,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

NO_RESULT = "[No result was recorded for this tool call in the original session]"


@dataclass
class ForkResult:
    session: Session
    messages: list[Message]
    events: list[OverlayEvent]
    changes: dict[str, int] = field(default_factory=dict)
    """What was adapted, by kind (``system_messages``, ``thinking``, ``missing_results``, ``orphan_results``)."""


def _runnable(model: str | None) -> bool:
    return bool(model) and str(model).startswith("claude")


class _Builder:
    def __init__(self, session_id: str, source_id: str) -> None:
        self.session_id = session_id
        self.source_id = source_id
        self.messages: list[Message] = []
        self.changes: dict[str, int] = {}
        self.calls: set[str] = set()
        self.answered: set[str] = set()

    def note(self, name: str, n: int = 1) -> None:
        self.changes[name] = self.changes.get(name, 0) + n

    def add(self, original: Message, parts: list[Part]) -> None:
        out: list[Part] = []
        for part in parts:
            if isinstance(part, ThinkingPart) and (part.redacted or not part.signature):
                self.note("thinking")
                continue
            if isinstance(part, ToolResultPart):
                if part.tool_use_id not in self.calls:
                    self.note("orphan_results")
                    out.append(TextPart(text=f"[Result of an earlier tool call]\n{part.text}"))
                    continue
                self.answered.add(part.tool_use_id)
            if isinstance(part, ToolUsePart):
                self.calls.add(part.id)
            out.append(part)
        if not out:
            self.note("empty_messages")
            return
        self._close_calls(before=original)
        role = "user" if original.kind == "summary" else original.role
        kind = original.kind if original.kind != "tool_result" or all(isinstance(p, ToolResultPart) for p in out) else "message"
        self.messages.append(
            Message(
                id=original.id, session_id=self.session_id, index=len(self.messages), role=role, kind=kind,
                parts=out, created_at=original.created_at,
                source={"forked_from": {"session": self.source_id, "message": original.id},
                        "original_model": original.model},
            )
        )

    def _close_calls(self, before: Message | None) -> None:
        """Answer calls of the last assistant message that the next message does not answer."""
        if not self.messages or self.messages[-1].role != "assistant":
            return
        pending = [p.id for p in self.messages[-1].tool_uses() if p.id not in self.answered]
        if not pending:
            return
        if before is not None and before.role == "user":
            results = {p.tool_use_id for p in before.tool_results()}
            pending = [p for p in pending if p not in results]
            if not pending:
                return
        self.note("missing_results", len(pending))
        self.answered.update(pending)
        self.messages.append(
            Message(
                id=f"{self.messages[-1].id}:no-result", session_id=self.session_id, index=len(self.messages),
                role="user", kind="tool_result",
                parts=[ToolResultPart(tool_use_id=i, text=NO_RESULT, is_error=True) for i in pending],
                source={"forked_from": {"session": self.source_id, "synthetic": True}},
            )
        )


def plan_fork(ctx: SessionContext, *, model: str | None = None, title: str | None = None) -> ForkResult:
    """The new session, its messages and pin events, built from ``ctx``'s view; nothing is stored."""
    new_id = f"s-{uuid.uuid4().hex[:12]}"
    source = ctx.session
    builder = _Builder(new_id, source.id)
    by_id = {m.id: m for m in ctx.messages}
    kept: list[str] = []
    for item in ctx.view().items:
        if item.kind != "message" or item.message_id is None or item.message_id not in by_id:
            continue
        original = by_id[item.message_id]
        if original.role == "system":
            builder.note("system_messages")
            continue
        builder.add(original, list(item.parts))
        kept.append(original.id)
    builder._close_calls(before=None)
    copied = {m.id for m in builder.messages}
    events = [
        OverlayEvent(
            id=f"{new_id}:fork:pin:{message_id}", session_id=new_id, plan_id=f"{new_id}:fork", action="pin",
            message_id=message_id, origin="import", reason=f"pinned in {source.id}",
        )
        for message_id in kept
        if message_id in ctx.overlay.pinned and message_id in copied
    ]
    forked_from: dict[str, Any] = {
        "session": source.id,
        "format": source.source_format,
        "source_path": source.source_path,
        "model": ctx.model,
        "messages_in_view": len(kept),
        "changes": builder.changes,
    }
    directory = source.metadata.get("cwd") or next(
        (v.get("directory") for v in source.metadata.values() if isinstance(v, dict) and v.get("directory")), None
    )
    if directory:
        forked_from["directory"] = directory
    session = Session(
        id=new_id,
        title=title or (f"Fork of {source.title}" if source.title else f"Fork of {source.id}"),
        source_format="engine",
        model=model or (ctx.model if _runnable(ctx.model) else None),
        metadata={"forked_from": forked_from},
    )
    return ForkResult(session, builder.messages, events, builder.changes)


def fork_session(store: Store, session_id: str, config: Config | None = None, *, model: str | None = None,
                 title: str | None = None) -> ForkResult:
    """Fork a stored session into a new engine session, stored in one transaction."""
    ctx = SessionContext.load(store, session_id, config)
    result = plan_fork(ctx, model=model, title=title)
    counter = TokenCounter(store.token_cache(session_id))
    with store.transaction():
        store.save_session(result.session)
        store.save_messages(result.messages, counter)
        store.add_overlay_events(result.events)
    return result
