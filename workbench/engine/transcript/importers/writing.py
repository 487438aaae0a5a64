"""Storing what an importer reads, batch by batch, so that an import's memory does not grow with the file."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from workbench.engine.transcript.importers.reading import SkippedLine
from workbench.engine.transcript.models import Message
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.token_process import EXACT_CHARS, TokenProcess, estimated
from workbench.engine.transcript.tokens import TokenCounter


class Progress(Protocol):
    """Told what an import is doing: ``("read", 0, 0)`` first, then ``("store", messages stored, total)``,
    the total 0 while it is not known yet (a file read as it is stored)."""

    def __call__(self, step: str, done: int, total: int) -> None: ...


def repeat_of(message: Message) -> SkippedLine:
    """The skipped line for a message whose id an earlier one has."""
    lines = message.source.get("lines")
    line = lines[0] if isinstance(lines, list) and lines else int(message.source.get("index") or 0) + 1
    return SkippedLine(line=line, reason=f"repeats message {message.id}")


class MessageWriter:
    """Stores a session's messages as they come, in the caller's transaction: each id once (a repeated record
    is listed as skipped), numbered in order, with its parts counted and its usage recorded.

    ``keep``: also hold every stored message, for callers that want them back; otherwise only their ids are
    held. ``process``: count the parts there (see :mod:`..token_process`); the reader may hand them to
    ``counter.prefetch`` as it reads them, and each batch is sent before it is stored.
    """

    def __init__(self, store: Store, session_id: str, *, keep: bool, progress: Progress | None = None,
                 process: TokenProcess | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.counter = TokenCounter(store.token_cache(session_id), process)
        self.seen: set[str] = set()
        self.kept: list[Message] | None = [] if keep else None
        self.repeats: list[SkippedLine] = []
        self.estimates: list[str] = []
        """One line for each part whose count is estimated from its head (a text over ``EXACT_CHARS``)."""
        self.count = 0
        self.progress = progress

    def add(self, messages: Iterable[Message], total: int = 0) -> None:
        """Store the new messages among ``messages``; ``total``: how many the whole session has, if known."""
        fresh: list[Message] = []
        for message in messages:
            if message.id in self.seen:
                self.repeats.append(repeat_of(message))
                continue
            self.seen.add(message.id)
            message.index = self.count
            self.count += 1
            fresh.append(message)
        self._save(fresh)
        if self.kept is not None:
            self.kept += fresh
        if self.progress is not None:
            self.progress("store", self.count, total)

    def replace(self, messages: list[Message]) -> None:
        """Store again messages stored earlier (a later line changed them), keeping their places."""
        self._save(messages)
        if self.kept is not None:
            for message in messages:
                self.kept[message.index] = message

    def _save(self, messages: list[Message]) -> None:
        if not messages:
            return
        self.counter.prefetch(part for message in messages for part in message.parts)
        for message in messages:
            for part in message.parts:
                text = getattr(part, "text", "")
                if isinstance(text, str) and estimated(text):
                    self.estimates.append(
                        f"message {message.index + 1}: a text of {len(text):,} characters; its token count is "
                        f"estimated from its first {EXACT_CHARS:,}")
        self.store.save_messages(messages, self.counter)
        self.store.record_usages(self.session_id, ((m.id, m.usage, None) for m in messages
                                                   if m.usage is not None and not m.sidechain))
