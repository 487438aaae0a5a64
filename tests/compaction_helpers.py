"""Builders and checks shared by the compaction tests: small sessions written straight to a store."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from loopback_api import check_wire_messages

from workbench.engine.context.projection import ContextView
from workbench.engine.context.session import SessionContext
from workbench.engine.plans.compaction import CompactionPreview, CompactionResult, Compactor
from workbench.engine.settings.config import Config
from workbench.engine.transcript.importers import import_file
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
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

T = TypeVar("T")
MODEL = "claude-sonnet-4-5"
START = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def filler(label: str, words: int) -> str:
    return f"{label}: " + " ".join(f"{label.lower()}{i} value{i * 7}" for i in range(words))


@dataclass
class SessionBuilder:
    """Messages in order; ``pin`` marks [PERSIST]-style pins (the message and, for users, the reply)."""

    session_id: str = field(default_factory=lambda: f"s-{uuid.uuid4().hex[:8]}")
    model: str = MODEL
    context_window: int | None = None
    workspace: Path | None = None
    messages: list[Message] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)
    events: list[OverlayEvent] = field(default_factory=list)
    _tool: int = 0

    def _add(self, role: str, parts: list[Part], **fields: Any) -> str:
        index = len(self.messages)
        message = Message(id=f"m{index:04d}", session_id=self.session_id, index=index, role=role,  # type: ignore[arg-type]
                          parts=parts, created_at=START + timedelta(seconds=index), **fields)
        self.messages.append(message)
        return message.id

    def user(self, text: str, *, pin: bool = False, images: tuple[ImagePart, ...] = ()) -> str:
        message_id = self._add("user", [TextPart(text=text), *images])
        if pin:
            self.pins.append(message_id)
        return message_id

    def assistant(self, text: str | None = None, *, pin: bool = False, thinking: str | None = None,
                  tools: Sequence[tuple[str, dict[str, Any], str, bool]] = (), usage: int | None = None) -> str:
        """``tools``: (name, input, result text, is_error) — the results follow in one tool_result message."""
        parts: list[Part] = []
        if thinking:
            parts.append(ThinkingPart(text=thinking, signature="sig"))
        if text:
            parts.append(TextPart(text=text))
        ids = []
        for name, tool_input, _, _ in tools:
            self._tool += 1
            ids.append(f"toolu_{self._tool:04d}")
            parts.append(ToolUsePart(id=ids[-1], name=name, input=tool_input))
        reported = Usage(input_tokens=usage, output_tokens=50, model=self.model) if usage else None
        message_id = self._add("assistant", parts, model=self.model, usage=reported)
        if pin:
            self.pins.append(message_id)
        if tools:
            results: list[Part] = [ToolResultPart(tool_use_id=i, text=out, is_error=err)
                                   for i, (_, _, out, err) in zip(ids, tools, strict=True)]
            self._add("user", results, kind="tool_result")
        return message_id

    def session(self) -> Session:
        metadata = {"workspace": str(self.workspace)} if self.workspace else {}
        return Session(id=self.session_id, title="built", model=self.model, context_window=self.context_window,
                       metadata=metadata)

    def pin_events(self) -> list[OverlayEvent]:
        return [OverlayEvent(id=f"{self.session_id}:pin:{m}", session_id=self.session_id, plan_id=f"pin-{m}",
                             action="pin", message_id=m, origin="persist-tag", reason="[PERSIST] tag")
                for m in self.pins]

    def save(self, store: Store) -> str:
        store.save_session(self.session())
        store.save_messages(self.messages, TokenCounter())
        store.add_overlay_events([*self.pin_events(), *self.events])
        return self.session_id


def long_session(
    turns: int = 12, words: int = 400, *, pins: tuple[int, ...] = (), tools_every: int = 3
) -> SessionBuilder:
    """``turns`` user/assistant exchanges of ``words`` words, a read_file loop every ``tools_every`` turns."""
    b = SessionBuilder()
    for turn in range(turns):
        b.user(filler(f"Request{turn}", words), pin=turn in pins)
        if turn % tools_every == 1:
            b.assistant(f"Reading for turn {turn}.", pin=turn in pins,
                        tools=[("read_file", {"path": f"src/mod{turn}.py"}, filler(f"Source{turn}", words), False)])
            b.assistant(filler(f"Answer{turn}", words // 2))
        else:
            b.assistant(filler(f"Answer{turn}", words), pin=turn in pins)
    return b


def load(store: Store, session_id: str, config: Config | None = None, *, use_checkpoint: bool = False) -> SessionContext:
    return SessionContext.load(store, session_id, config or Config(), use_checkpoint=use_checkpoint)


def import_fixture(store: Store, path: Path, config: Config | None = None) -> SessionContext:
    parsed = import_file(store, path)
    return load(store, parsed.session.id, config)


COMPACTOR_ARGS = ("config", "provider", "model", "workspace", "hooks", "emit")


def _compactor(store: Store, ctx: SessionContext, kwargs: dict[str, Any]) -> tuple[Compactor, dict[str, Any]]:
    """A Compactor from the keyword arguments it takes; the rest are for ``preview``."""
    made = Compactor(store, ctx, **{k: v for k, v in kwargs.items() if k in COMPACTOR_ARGS})
    return made, {k: v for k, v in kwargs.items() if k not in COMPACTOR_ARGS}


def preview(store: Store, ctx: SessionContext, **kwargs: Any) -> CompactionPreview:
    compactor, rest = _compactor(store, ctx, kwargs)
    return run(compactor.preview(**rest))


def compact(store: Store, ctx: SessionContext, **kwargs: Any) -> tuple[CompactionPreview, CompactionResult]:
    compactor, rest = _compactor(store, ctx, kwargs)
    plan = run(compactor.preview(**rest))
    return plan, run(compactor.apply(plan))


def fingerprint(view: ContextView) -> tuple[str, list[tuple[str | None, str, int, tuple[str, ...]]]]:
    """The request's messages as bytes, and each item's id, kind, tokens and badges."""
    wire = json.dumps(list(view.wire), sort_keys=True, ensure_ascii=False)
    return wire, [(i.message_id, i.kind, i.tokens, i.badges) for i in view.items]


def message_ids(view: ContextView) -> list[str]:
    return [i.message_id for i in view.items if i.kind == "message" and i.message_id]


def assert_valid_request(view: ContextView) -> None:
    """The view renders to a request the Messages API accepts (given the next user message)."""
    wire = [dict(m) for m in view.wire]
    if wire and wire[-1]["role"] == "assistant":
        wire.append({"role": "user", "content": [{"type": "text", "text": "next"}]})
    check_wire_messages(wire)
