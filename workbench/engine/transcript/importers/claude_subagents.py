"""Which Claude Code sub-agent transcript each Task / Agent call started.

Claude Code runs a sub-agent in a transcript of its own, ``<session>/subagents/agent-<id>.jsonl`` beside the
main ``<session>.jsonl`` (2.1.x; older versions wrote ``agent-<id>.jsonl`` into the project folder itself),
every record ``isSidechain: true``. Its records do not name the call that started it, so the link comes from
the main transcript, which states the sub-agent's id in two places:

* the ``user`` record holding the call's ``tool_result`` has ``toolUseResult.agentId`` (the call finished);
* each ``progress`` record with ``data.type: "agent_progress"`` has ``data.agentId`` and, as
  ``parentToolUseID``, the call's ``tool_use`` id (the call is running or was interrupted). These records also
  embed the sub-agent's messages one by one (``data.message``, assistant messages with their own ``usage``):
  without the sub-agent's file, they are its transcript.

A compaction run (``agent-acompact-*.jsonl``) is started by no call: it belongs to the compaction boundary
whose ``logicalParentUuid`` (the last record before compaction) is a ``parentUuid`` in its file.

The sub-agent's session carries the same metadata as one the engine's ``task`` tool starts
(:mod:`workbench.engine.agent.subagents`): ``parent_session``, ``parent_message`` (the message holding the call),
``parent_tool_use_id`` and ``subagent: true``; the app opens it from the calling message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.engine.transcript.importers.reading import ParsedTranscript, Subtranscript
from workbench.engine.transcript.models import Message, ToolUsePart

SUBAGENT_TOOLS = frozenset({"Agent", "Task"})
"""Claude Code's tools that start a sub-agent with ``input.prompt`` (the proxy links by them too)."""
LINK_KEYS = ("parent_session", "parent_message", "parent_tool_use_id", "subagent", "agent")
"""Session metadata that ties a sub-agent's session to its parent's; kept when the sub-agent's file is
imported again on its own."""
COMPACTION_PREFIX = "acompact-"


@dataclass
class SubagentNotes:
    """What a main transcript says about its sub-agents, noted record by record while it is read."""

    agent_of_call: dict[str, str] = field(default_factory=dict)
    """``tool_use`` id -> sub-agent id."""
    embedded: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    """Sub-agent id -> (line, record) of its messages embedded in ``agent_progress`` records, in order."""
    boundaries: dict[str, str] = field(default_factory=dict)
    """``logicalParentUuid`` of a compaction boundary -> the boundary's message id."""

    def note(self, number: int, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "progress":
            data = record.get("data")
            if isinstance(data, dict) and data.get("type") == "agent_progress":
                self._progress(number, record, data)
        elif kind == "user":
            result = record.get("toolUseResult")
            agent = result.get("agentId") if isinstance(result, dict) else None
            if isinstance(agent, str) and agent:
                for call in _result_ids(record):
                    self.agent_of_call[call] = agent
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            parent, own = record.get("logicalParentUuid"), record.get("uuid")
            if isinstance(parent, str) and isinstance(own, str):
                self.boundaries[parent] = own

    def _progress(self, number: int, record: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        agent, call = data.get("agentId"), record.get("parentToolUseID")
        if not isinstance(agent, str) or not agent:
            return
        if isinstance(call, str) and call:
            self.agent_of_call.setdefault(call, agent)
        message = data.get("message")
        if isinstance(message, dict) and message.get("type") in {"user", "assistant"}:
            self.embedded.setdefault(agent, []).append((number, message))


def _result_ids(record: Mapping[str, Any]) -> list[str]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [b["tool_use_id"] for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)]


def agent_file(main: Path, agent_id: str) -> Path | None:
    """The sub-agent's own transcript, where Claude Code writes it; None when it is not there."""
    name = f"agent-{agent_id}.jsonl"
    for candidate in (main.parent / main.stem / "subagents" / name, main.parent / name):
        if candidate.is_file():
            return candidate
    return None


def calls(messages: Sequence[Message]) -> dict[str, tuple[str, ToolUsePart]]:
    """``tool_use`` id -> (id of the message holding it, the call), for the calls that start a sub-agent."""
    return {part.id: (m.id, part) for m in messages if m.role == "assistant" and not m.sidechain
            for part in m.parts if isinstance(part, ToolUsePart) and part.name in SUBAGENT_TOOLS}


def linked(started: Mapping[str, tuple[str, ToolUsePart]], notes: SubagentNotes, main: Path,
           embedded: Callable[[str], ParsedTranscript | None]) -> list[Subtranscript]:
    """The sub-agents a main transcript started (``started``: its :func:`calls`, gathered as it was read),
    each with its link: its own file when there is one, else its messages embedded in the main transcript
    (``embedded(agent id)`` reads them)."""
    found: list[Subtranscript] = []
    seen: set[str] = set()
    for call_id, (message_id, call) in started.items():
        agent = notes.agent_of_call.get(call_id)
        if agent is None or agent in seen:
            continue
        seen.add(agent)
        link: dict[str, str | None] = {"parent_message": message_id, "parent_tool_use_id": call_id, "agent": str(call.input.get(
            "subagent_type") or call.name), "agent_id": agent}
        path = agent_file(main, agent)
        inline = embedded(agent) if path is None else None
        if path is not None or inline is not None:
            found.append(Subtranscript(link, path=path, parsed=inline))
    found += _others(main, notes, seen)
    return found


def _others(main: Path, notes: SubagentNotes, seen: set[str]) -> list[Subtranscript]:
    """The rest of the session's sub-agents folder: compaction runs, each tied to its boundary when it is
    found, and sub-agents no call names (a call cut off before its result), tied to the session only."""
    folder = main.parent / main.stem / "subagents"
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("agent-*.jsonl")):
        agent = path.stem.removeprefix("agent-")
        if agent in seen:
            continue
        compaction = agent.startswith(COMPACTION_PREFIX)
        boundary = next((notes.boundaries[p] for p in _parent_uuids(path) if p in notes.boundaries), None
                        ) if compaction else None
        found.append(Subtranscript({"parent_message": boundary, "parent_tool_use_id": None,
                                    "agent": "compaction" if compaction else None, "agent_id": agent}, path=path))
    return found


def _parent_uuids(path: Path) -> list[str]:
    """The ``parentUuid``s of a compaction run's records (a few dozen lines: read whole). A file that cannot
    be read gives none: its import, next, says what is wrong with it."""
    found = []
    try:
        with path.open("rb") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("parentUuid"), str):
                    found.append(record["parentUuid"])
    except OSError:
        return []
    return found
