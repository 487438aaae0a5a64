"""Tool-output limits at execution (spec 003): an output too large is spilled to a file; the rest is cut to
lines, then characters, then bytes, head and tail kept.

The ``[tool_output]`` config section; the agent applies it to every tool result before it is stored.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from workbench.engine.errors import WorkbenchError
from workbench.engine.settings.sections import OutputLimits

__all__ = ["OutputLimits", "limit", "spill", "truncate"]


def spill(text: str, limits: OutputLimits, directory: Path) -> str:
    """Write ``text`` to ``directory/<sha256>.txt`` (owner-only) and return the notice the context gets."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    path = directory / f"{digest}.txt"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if directory.is_symlink() or (hasattr(os, "getuid") and directory.stat().st_uid != os.getuid()):
            raise WorkbenchError(f"{directory} is not this user's directory; spilled outputs are not written there")
        if not path.exists():  # the same output again: the same file
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
    except OSError as exc:
        raise WorkbenchError(f"cannot save a large tool output to {path} ({exc.strerror or exc})") from exc
    return (f"[Output too large for the context: {len(text):,} characters, {text.count(chr(10)) + 1:,} lines. "
            f"The whole output is saved in {path} (sha256 {digest}); its head and tail follow.]\n"
            + _head_tail(text, limits.spill_preview, "head_tail"))


def truncate(text: str, limits: OutputLimits | None = None) -> str:
    limits = limits or OutputLimits()
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


def limit(text: str, limits: OutputLimits, spill_dir: Path) -> tuple[str, str | None]:
    """What the context gets of one tool output: spilled past ``spill_threshold`` (spec 003), else truncated;
    and a warning when the spill could not be written (the output is then truncated)."""
    if not limits.spill_threshold or len(text) <= limits.spill_threshold:
        return truncate(text, limits), None
    try:
        return spill(text, limits, spill_dir), None
    except WorkbenchError as exc:
        return truncate(text, limits), f"{exc}; the output was truncated instead"
