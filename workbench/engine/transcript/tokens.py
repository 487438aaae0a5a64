"""Raw token counts with tiktoken's ``cl100k_base``, one count per part, cached by content.

Claude's tokenizer is not public; these raw counts are the input to
calibration (``calibration.py``), never shown to users uncalibrated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, MutableMapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from workbench.engine.transcript.token_process import TokenProcess, count_with, load_encoding

if TYPE_CHECKING:
    import tiktoken

MESSAGE_OVERHEAD = 4
"""Role and separators the API wraps around every message."""
BLOCK_OVERHEAD = 3
"""Type tags around every content block."""
IMAGE_FALLBACK_TOKENS = 1600
"""Anthropic's ceiling for one image (about 1.15 megapixels); used when the size is unknown."""
IMAGE_MAX_EDGE = 1568
REDACTED_THINKING_TOKENS = 64


_INPUT_JSON = json.JSONEncoder(ensure_ascii=False)
"""One encoder for every call's input: ``json.dumps`` with an argument makes a new encoder per call, which costs more
than encoding a small input (planners encode hundreds per planning)."""


def input_json(tool_input: dict[str, Any]) -> str:
    """A call's input as its count reads it (``json.dumps(tool_input, ensure_ascii=False)``)."""
    return _INPUT_JSON.encode(tool_input)


def image_tokens(width: int | None, height: int | None) -> int:
    """Anthropic's documented estimate: width × height / 750, after resizing to the edge limit."""
    if not width or not height or width <= 0 or height <= 0:
        return IMAGE_FALLBACK_TOKENS
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height))
    w, h = width * scale, height * scale
    return min(IMAGE_FALLBACK_TOKENS, max(1, math.ceil(w * h / 750)))


class TokenCounter:
    """Counts parts with tiktoken; the cache maps a part's content key to its count.

    Pass a persistent mapping (the store's) as ``cache`` so a count is made once
    per distinct content, ever. With a ``process`` (see :mod:`.token_process`), parts announced with
    :meth:`prefetch` are counted there while the caller reads on, and this process never loads the
    vocabulary unless that one fails.
    """

    def __init__(self, cache: MutableMapping[str, int] | None = None, process: TokenProcess | None = None) -> None:
        self.cache: MutableMapping[str, int] = cache if cache is not None else {}
        self.process = process
        self._pending: dict[int, tuple[Part, int, int, int]] = {}
        """``id(part)`` -> (the part, kept alive so its id stays its own; its first ticket; how many texts;
        what it adds without counting)."""

    @cached_property
    def encoding(self) -> tiktoken.Encoding:
        return load_encoding()

    def count_text(self, text: str) -> int:
        return count_with(self.encoding, text) if text else 0

    def prefetch(self, parts: Iterable[Part]) -> None:
        """Send ``parts`` to the counting process now, so that :meth:`count_part` finds their counts made.

        Parts read back from the store need no count: :meth:`count_part` takes theirs and drops the request
        (looking for it here would cost every fresh part a failed attribute lookup)."""
        process = self.process
        if process is None or process.failed:
            return
        pending = self._pending
        texts: list[str] = []
        first = process.asked
        for part in parts:
            if id(part) in pending:
                continue
            pieces, fixed = _pieces(part)
            start = len(texts)
            texts += [text for text in pieces if text]
            pending[id(part)] = (part, first + start, len(texts) - start, fixed)
        process.ask(texts)

    def count_part(self, part: Part) -> int:
        stored = part.stored_tokens()
        if stored is not None:
            if self._pending:
                self._pending.pop(id(part), None)
            return stored  # counted when it was stored
        key = part.content_key()
        cached = self.cache.get(key)
        if cached is not None:
            self._pending.pop(id(part), None)
            return cached
        tokens = self._count_uncached(part)
        self.cache[key] = tokens
        return tokens

    def count_message(self, message: Message) -> list[int]:
        """Raw count of each part, in order."""
        return [self.count_part(p) for p in message.parts]

    def _count_uncached(self, part: Part) -> int:
        if self.process is not None and id(part) not in self._pending:
            self.prefetch([part])
        pending = self._pending.pop(id(part), None)
        if pending is not None and self.process is not None:
            _, first, n, fixed = pending
            counts = self.process.counts(first, n)
            if counts is not None:
                return sum(counts) + fixed
        texts, fixed = _pieces(part)
        return sum(self.count_text(t) for t in texts) + fixed


def _pieces(part: Part) -> tuple[list[str], int]:
    """The texts a part's count is made of, and what it adds besides them (images, redacted thinking)."""
    match part:
        case TextPart(text=text):
            return [text], 0
        case ThinkingPart(redacted=True):
            return [], REDACTED_THINKING_TOKENS
        case ThinkingPart(text=text):
            return [text], 0
        case ToolUsePart(name=name, input=tool_input):
            return [name, input_json(tool_input)], 0
        case ToolResultPart(text=text, images=images):
            return [text], sum(image_tokens(i.width, i.height) for i in images)
        case ImagePart(width=w, height=h):
            return [], image_tokens(w, h)
    raise TypeError(f"unknown part type: {type(part).__name__}")
