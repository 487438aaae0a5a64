"""A call a ``PreToolUse`` hook blocked: Claude Code sends the hook's message twice, and records it once.

A hook that exits with code 2 blocks the call and its stderr is fed back to the model (Claude Code's hooks
documentation). The transcript records that as the call's error result (``toolUseResult`` "Error: " and the
message); the request after it carries the message a second time, as a hook-error reminder the transcript
does not record: on the fixtures, each of the eight blocked calls' next request reported 1.1 to 1.3 times the
message's raw count more than the result alone accounts for. So the importer adds the repeat to the result's
message as an estimated part (``source["hook_repeat"]``), counted as a system reminder.

A blocked call is told apart from a call that ran and failed by what its error says: the tools' own errors start
with ``Exit code`` (Bash) or ``<tool_use_error>``, and a rejection by the user is "User rejected tool use".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.engine.transcript.models import TextPart, ToolResultPart

BLOCKED_PREFIX = "Error: "
TOOL_ERRORS = ("Exit code", "<tool_use_error>")


class HookedCalls:
    """The tool calls a ``PreToolUse`` hook ran for, noted from the transcript's ``hook_progress`` records."""

    def __init__(self) -> None:
        self._hooked: set[str] = set()

    def note(self, record: Mapping[str, Any]) -> None:
        data = record.get("data")
        if record.get("type") == "progress" and isinstance(data, dict) and data.get("hookEvent") == "PreToolUse":
            call = record.get("toolUseID")
            if isinstance(call, str):
                self._hooked.add(call)

    def repeats(self, parts: list[Any], result: Any) -> list[TextPart]:
        """The hook messages sent again for the blocked calls among ``parts`` (a user record's parts)."""
        repeated: list[TextPart] = []
        for part in parts:
            if not isinstance(part, ToolResultPart):
                continue
            hooked = part.tool_use_id in self._hooked
            self._hooked.discard(part.tool_use_id)
            if hooked and part.is_error and _blocked(part.text, result):
                repeated.append(TextPart(text=f"<system-reminder>\nPreToolUse hook blocking error: {part.text}\n"
                                              "</system-reminder>"))
        return repeated


def _blocked(text: str, result: Any) -> bool:
    return (isinstance(result, str) and result.startswith(BLOCKED_PREFIX) and bool(text)
            and not text.lstrip().startswith(TOOL_ERRORS))
