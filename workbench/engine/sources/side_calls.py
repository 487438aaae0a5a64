"""What a proxied request says about the session it belongs to, beyond its messages.

Claude Code makes small requests of its own beside the conversation: the one that names a session for its
``/resume`` list (its system prompt asks for "a concise, sentence-case title … of this coding session", it
sends no tools and one user message, ``<session>…</session>``), and, in older versions, the ones that named a
topic. The proxy stores each as a conversation of its own (it extends no other); marked as a *title call*, the
session list shows it under the session it names instead of as one more "(proxied request)".

Claude Code's system prompt also names the directory it works in (`` - Primary working directory: /path`` in
2.1, ``Working directory: /path`` before), which tells sessions with the same first message apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SIDE_CALL_MESSAGES = 2
"""A side call sends one user message (two with a prefilled answer); a conversation soon sends more."""
_ASKS_FOR_TITLE = re.compile(
    r"\b(generate|write|extract|come up with|summari[sz]e)\b[^\n]{0,80}?\btitle\b", re.IGNORECASE)
_WORKING_DIRECTORY = re.compile(r"^\s*(?:-\s*)?(?:primary )?working directory:\s*(\S[^\n]*?)\s*$",
                                re.MULTILINE | re.IGNORECASE)


def system_text(body: Mapping[str, Any]) -> str:
    """The request's system prompt as one string (the API takes a string or a list of text blocks)."""
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text")) for b in system if isinstance(b, Mapping) and isinstance(b.get("text"), str))
    return ""


def is_title_call(body: Mapping[str, Any]) -> bool:
    """A small request without tools whose system prompt asks for a title: the agent naming its session."""
    messages = body.get("messages")
    if body.get("tools") or not isinstance(messages, list) or not 0 < len(messages) <= SIDE_CALL_MESSAGES:
        return False
    return _ASKS_FOR_TITLE.search(system_text(body)) is not None


def working_directory(body: Mapping[str, Any]) -> str | None:
    """The directory the agent says it works in (Claude Code's working directory line), if it says."""
    match = _WORKING_DIRECTORY.search(system_text(body))
    return match.group(1) if match else None
