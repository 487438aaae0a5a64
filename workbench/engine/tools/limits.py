"""Tool-output limits at execution (spec 003): lines, then characters, then bytes, head and tail kept.

The ``[tool_output]`` config section; the agent applies it to every tool result before it is stored.
"""

from __future__ import annotations

from workbench.engine.settings import OutputLimits

__all__ = ["OutputLimits", "truncate"]


def truncate(text: str, limits: OutputLimits = OutputLimits()) -> str:
    original_lines = text.count("\n") + 1
    original_chars = len(text)
    lines = text.split("\n")
    cut = False
    if len(lines) > limits.max_lines:
        cut = True
        if limits.mode == "head_tail" and limits.max_lines >= 4:
            head = limits.max_lines // 2
            tail = limits.max_lines - head
            omitted = len(lines) - limits.max_lines
            lines = [*lines[:head], f"... [{omitted} lines omitted] ...", *lines[-tail:]]
        else:
            lines = lines[: limits.max_lines]
    text = "\n".join(lines)
    if len(text) > limits.max_chars:
        cut = True
        text = _head_tail(text, limits.max_chars, limits.mode)
    if len(text.encode()) > limits.max_bytes:
        cut = True
        while len(text.encode()) > limits.max_bytes:
            text = _head_tail(text, int(len(text) * limits.max_bytes / len(text.encode())) - 64, limits.mode)
    if cut:
        text += f"\n[output truncated: {original_lines} lines, {original_chars} characters in full]"
    return text


def _head_tail(text: str, keep: int, mode: str) -> str:
    keep = max(keep, 16)
    if mode != "head_tail":
        return text[:keep]
    half = keep // 2
    return text[:half] + "\n... [truncated] ...\n" + text[-(keep - half) :]
