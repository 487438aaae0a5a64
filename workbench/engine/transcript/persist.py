"""The [PERSIST] tag (spec 000 §1): a user message that must survive compaction."""

from __future__ import annotations

import re

_TAG = re.compile(r"^\s*\[PERSIST\]\s*")


def has_persist_tag(text: str) -> bool:
    return bool(_TAG.match(text))


def strip_persist_tag(text: str) -> str:
    return _TAG.sub("", text, count=1)
