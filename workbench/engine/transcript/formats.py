"""The names of formats the workbench reads and writes, for code that offers them (the command line's
choices) without loading the modules that read or write them."""

from __future__ import annotations

from typing import Literal

FOLLOWABLE = ("claude-code", "codex")
"""Transcript formats that can be followed while their agent still writes them."""
ExportFormat = Literal["jsonl", "markdown"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("jsonl", "markdown")
