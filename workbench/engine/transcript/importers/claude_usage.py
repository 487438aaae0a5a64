"""What a Claude Code line's usage says about its response.

Claude Code writes one line per content block as the block ends, each with the usage known then: the count
the response started with (1 to some 30 output tokens), unless the response's final usage had arrived before
the line was written. The next request carries the whole response, so the estimate needs to know which
count it has (:func:`output_state`, kept in the message's ``source["output"]``).
"""

from __future__ import annotations

from typing import Any

from workbench.engine.transcript.importers.reading import MAX_COUNT
from workbench.engine.transcript.models import Message, Usage


def usage_of(raw: Any, model: str | None) -> Usage | None:
    """A line's usage, any count that is not a plausible number taken as 0."""
    if not isinstance(raw, dict):
        return None

    def num(key: str, where: dict[str, Any] = raw) -> int:
        value = where.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else 0

    written = num("cache_creation_input_tokens")
    split = raw.get("cache_creation")
    one_hour = num("ephemeral_1h_input_tokens", split) if isinstance(split, dict) else 0
    return Usage(
        input_tokens=num("input_tokens"),
        output_tokens=num("output_tokens"),
        cache_creation_input_tokens=written,
        cache_read_input_tokens=num("cache_read_input_tokens"),
        cache_creation_1h_input_tokens=min(one_hour, written),
        model=model,
    )


FINAL_USAGE_KEYS = ("iterations", "server_tool_use")
"""Keys only the final usage of a response carries (Claude Code 2.1 writes no stop reason on its lines)."""


def says_final(message: dict[str, Any]) -> bool:
    """A line written after its response ended: it carries a stop reason, or usage only the end reports."""
    usage = message.get("usage")
    return message.get("stop_reason") is not None or (
        isinstance(usage, dict) and any(key in usage for key in FINAL_USAGE_KEYS)
    )


def output_state(old: Message | None, usage: Usage | None, final: bool, marks_final: bool = False) -> str | None:
    """``"final"`` when the response's output count is known whole: a line says it ended, or a later line's
    count rose past the one the response started with (written after the end). ``"partial"`` when it cannot
    be: every line repeats the starting count, and either the response has several lines or the transcript's
    writer marks a final line (``marks_final``), so an unmarked one was written before the end. None: nothing
    tells (one unmarked line from a writer that marks none). ``old``: the response as read so far, if this is
    a later line of it."""
    if old is None:
        return "final" if final else "partial" if marks_final else None
    said = old.source.get("output")
    if final or said == "final":
        return "final"
    if usage is None or old.usage is None:  # a line without usage repeats no count
        return str(said) if said is not None else None
    return "final" if usage.output_tokens > old.usage.output_tokens else "partial"
