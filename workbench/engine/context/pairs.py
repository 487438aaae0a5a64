"""Which messages a compaction keeps before its pivot: the pinned ones, with the other half of their tool calls.

One rule for the view (``projector``) and the wire (``sources.request_steering``), so that what the workbench
shows after a compaction is what the proxy forwards: a pinned call without its result (or a result without
its call) would be a request the API refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Calls = tuple[bool, bool]
"""(holds a ``tool_use``, holds a ``tool_result``) of one message."""


def with_partners(calls: Callable[[int], Calls], keep: Sequence[bool]) -> list[bool]:
    """``keep`` grown by the message after each kept call and the message before each kept result, until
    nothing more is added (the messages in view order; ``calls(i)``: what message ``i`` holds, asked only of
    kept messages and their neighbours)."""
    out = list(keep)
    pending = [i for i, kept in enumerate(out) if kept]
    while pending:
        i = pending.pop()
        uses, results = calls(i)
        if uses and i + 1 < len(out) and not out[i + 1] and calls(i + 1)[1]:
            out[i + 1] = True
            pending.append(i + 1)
        if results and i and not out[i - 1] and calls(i - 1)[0]:
            out[i - 1] = True
            pending.append(i - 1)
    return out
