"""Token counting: cl100k counts per part, cached by content hash, persisted with the parts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import claude_fixture

from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import ImagePart, Part, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import (
    IMAGE_FALLBACK_TOKENS,
    IMAGE_MAX_EDGE,
    REDACTED_THINKING_TOKENS,
    TokenCounter,
    image_tokens,
)


class CountingCounter(TokenCounter):
    """A real counter that records every call that reaches the encoder."""

    def __init__(self, cache: dict[str, int] | None = None) -> None:
        super().__init__(cache)
        self.encoded: list[str] = []

    def count_text(self, text: str) -> int:
        self.encoded.append(text)
        return super().count_text(text)


def test_counts_with_cl100k() -> None:
    counter = TokenCounter()
    assert counter.count_text("") == 0
    assert counter.count_text("hello world") == 2  # cl100k: "hello", " world"
    assert counter.count_text("<|endoftext|>") > 1, "special tokens are counted as text, not rejected"
    assert counter.count_text("naïve café 日本語") > 3


def test_tool_use_counts_name_plus_json_input() -> None:
    counter = TokenCounter()
    tool_input = {"command": "grep -rn 'def main' src/", "timeout": 120, "nested": {"ünïcode": ["a", 1]}}
    part = ToolUsePart(id="toolu_1", name="Bash", input=tool_input)
    expected = counter.count_text("Bash") + counter.count_text(json.dumps(tool_input, ensure_ascii=False))
    assert counter.count_part(part) == expected
    bigger = ToolUsePart(id="toolu_1", name="Bash", input={**tool_input, "description": "search for main " * 10})
    assert counter.count_part(bigger) > counter.count_part(part)
    assert counter.count_part(ToolUsePart(id="x", name="Bash")) == counter.count_text("Bash") + counter.count_text("{}")


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [
        (1000, 1000, 1334),  # 1,000,000 / 750 = 1333.3 -> 1334
        (200, 200, 54),  # 40,000 / 750 = 53.3 -> 54
        (1568, 700, 1464),  # at the edge limit, no resize: 1,097,600 / 750 = 1463.5
        (3136, 200, 210),  # resized to 1568 x 100: 156,800 / 750 = 209.1 -> 210
        (2000, 2000, 1600),  # resized to 1568 x 1568 = 3278 -> capped at 1600
        (1, 1, 1),
    ],
)
def test_image_estimate(width: int, height: int, expected: int) -> None:
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height))
    formula = min(IMAGE_FALLBACK_TOKENS, max(1, math.ceil(width * scale * height * scale / 750)))
    assert image_tokens(width, height) == formula == expected


@pytest.mark.parametrize(("width", "height"), [(None, None), (None, 500), (800, None), (0, 600), (-5, 10)])
def test_image_estimate_falls_back_when_size_unknown(width: int | None, height: int | None) -> None:
    assert image_tokens(width, height) == IMAGE_FALLBACK_TOKENS == 1600


def test_part_counts() -> None:
    counter = TokenCounter()
    assert counter.count_part(TextPart(text="hello world")) == 2
    assert counter.count_part(ThinkingPart(text="hello world")) == 2
    assert counter.count_part(ThinkingPart(redacted=True)) == REDACTED_THINKING_TOKENS
    assert counter.count_part(ImagePart(width=1000, height=1000)) == 1334
    assert counter.count_part(ImagePart()) == IMAGE_FALLBACK_TOKENS
    result = ToolResultPart(tool_use_id="t", text="hello world", images=(ImagePart(width=200, height=200), ImagePart()))
    assert counter.count_part(result) == 2 + 54 + IMAGE_FALLBACK_TOKENS


def test_content_key_distinguishes_kind_and_content() -> None:
    keys = {
        TextPart(text="x").content_key(),
        ThinkingPart(text="x").content_key(),
        TextPart(text="y").content_key(),
        ToolResultPart(tool_use_id="a", text="x").content_key(),
        ToolResultPart(tool_use_id="a", text="x", is_error=True).content_key(),
    }
    assert len(keys) == 5
    assert TextPart(text="same").content_key() == TextPart(text="same").content_key()


def test_equal_content_is_encoded_once() -> None:
    counter = CountingCounter()
    parts: list[Part] = [TextPart(text="repeated text"), TextPart(text="repeated text"), TextPart(text="other")]
    counts = [counter.count_part(p) for p in parts]
    assert counts[0] == counts[1]
    assert counter.encoded == ["repeated text", "other"]
    assert len(counter.cache) == 2


@pytest.mark.parametrize("key", ["subagent", "session-196820da"])
def test_counts_persist_with_the_import(tmp_path: Path, key: str) -> None:
    path = claude_fixture(key)
    with Store(tmp_path / "wb.db") as store:
        parsed = import_file(store, path)
        cache = store.token_cache(parsed.session.id)
        distinct = {p.content_key() for m in parsed.messages for p in m.parts}
        assert set(cache) == distinct, "one stored count per distinct part"
        assert len(cache) == len(distinct)

        seeded = CountingCounter(dict(cache))
        for message in store.load_messages(parsed.session.id):
            for part in message.parts:
                assert seeded.count_part(part) == cache[part.content_key()]
        assert seeded.encoded == [], "a counter seeded from the store never calls the encoder"

        fresh = CountingCounter()
        recount = {p.content_key(): fresh.count_part(p) for m in parsed.messages for p in m.parts}
        assert recount == cache, "stored counts are the real counts"
        assert len(fresh.encoded) >= len(distinct)


def test_a_huge_unbroken_string_is_counted_from_its_head_and_labelled_estimated(store: Store, tmp_path: Path) -> None:
    from helpers import cc_user, write_jsonl

    from workbench.engine.transcript.token_process import EXACT_CHARS, count_with, load_encoding

    block = "".join(chr(ord("a") + (i * 7919) % 26) for i in range(EXACT_CHARS))  # no space: one long "word"
    huge = block * 3
    path = write_jsonl(tmp_path / "huge.jsonl", [cc_user("u1", huge)])
    parsed = import_file(store, path)
    label = f"message 1: a text of {len(huge):,} characters; its token count is estimated from its first {EXACT_CHARS:,}"
    assert parsed.warnings == [label]
    head = count_with(load_encoding(), block)
    assert count_with(load_encoding(), huge) == 3 * head, "the head's rate, applied to the whole text"
    [message] = store.load_messages(parsed.session.id)
    assert message.parts[0].stored_tokens() == 3 * head
