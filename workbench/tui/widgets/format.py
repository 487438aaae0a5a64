"""Formatting and colours shared by the widgets, so the list, detail and budget agree."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from rich.style import Style
from rich.text import Text

ROLE_STYLES: Mapping[str, Style] = {
    "user": Style(color="#7dcfff"),
    "assistant": Style(color="#c099ff"),
    "system": Style(color="#e0af68"),
}

BADGE_STYLES: Mapping[str, Style] = {
    "PERSIST": Style(color="#1a1b26", bgcolor="#e0af68", bold=True),
    "summary": Style(color="#9ece6a", bold=True),
    "pruned": Style(color="#ff9e64"),
    "offloaded": Style(color="#7aa2f7"),
    "error": Style(color="#f7768e", bold=True),
}
EXCLUDED_STYLE = Style(color="#737aa2", italic=True)

LEVEL_STYLES: Mapping[str, Style] = {
    "ok": Style(color="#9ece6a", bold=True),
    "warn": Style(color="#e0af68", bold=True),
    "compact": Style(color="#ff9e64", bold=True),
    "block": Style(color="#f7768e", bold=True),
}
LEVEL_LABELS: Mapping[str, str] = {
    "ok": "OK",
    "warn": "WARN · nearing the compaction threshold",
    "compact": "COMPACT · compaction threshold reached",
    "block": "BLOCKED · context full, compact before sending",
}


def tokens(value: int | None) -> str:
    """Thousands separators; an em dash for 'not in context'."""
    return "—" if value is None else f"{value:,}"


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "—"


def percent(value: float | None) -> str:
    if value is None:
        return ""
    if 0 < value < 0.1:
        return "<0.1%"
    return f"{value:.1f}%"


def badge_text(badges: tuple[str, ...], excluded: str | None) -> Text:
    """Badges in engine order, then the exclusion reason, dimmed."""
    out = Text()
    for badge in badges:
        if out:
            out.append(" ")
        label = f" {badge} " if badge == "PERSIST" else badge
        out.append(label, BADGE_STYLES.get(badge, Style()))
    if excluded:
        if out:
            out.append(" ")
        out.append(excluded, EXCLUDED_STYLE)
    return out


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text: str) -> str:
    """Drop terminal escape sequences and control characters that would corrupt the screen."""
    return _CONTROL.sub("", _ANSI.sub("", text))
