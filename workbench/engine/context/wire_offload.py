"""Offloading a proxied agent's tool result to a file the agent reads back with its own tools.

An agent behind the proxy has no ``read_result`` tool, but it can read a file. An offloaded result of a
proxied session is written, whole, to ``<the agent's working directory>/.workbench/offload/<hash>.txt`` (by the
proxy, from the bytes the agent sent, before the request that refers to it goes upstream), and the block on
the wire becomes :func:`file_reference`: its head and tail, the path, and how many bytes and lines it holds.
The projection shows the same text, so the view is what the agent gets.

It is offered only when the session's requests carry a file-reading tool the agent can use on that path
(:data:`READ_TOOLS`) and name the agent's working directory (Claude Code writes `` - Primary working directory: …`` into its
system prompt's environment section, OpenCode ``Working directory: …`` into its ``<env>`` block); otherwise :func:`refusal` says why in one line.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from workbench.engine.transcript.models import Session
from workbench.engine.transcript.overlay import Offload

READ_TOOLS: dict[str, str] = {"Read": "Claude Code", "read": "OpenCode"}
"""File-reading tools by the name an agent gives them in its requests, and the agent that has each."""
OFFLOAD_DIR = ".workbench/offload"
"""Where, under the agent's working directory, offloaded results are written."""
CWD_KEY, READ_TOOL_KEY = "agent_cwd", "read_tool"
"""Session metadata the proxy keeps from the latest request: the agent's working directory, its reading tool."""
HEAD_LINES, HEAD_CHARS, TAIL_LINES, TAIL_CHARS = 8, 600, 4, 300
"""How much of the result stays on the wire, at its start and at its end."""
_CWD = re.compile(r"^[ \t]*(?:[-*][ \t]+)?(?:Primary )?[Ww]orking directory:[ \t]*(/[^\n]*?)[ \t]*$", re.MULTILINE)
WIRE_ACTIONS = frozenset({"offload", "archive"})
"""Actions that leave content a proxied agent must read back from a file: an offloaded result, the messages behind
an archive's digest (``context.wire_archive``)."""
WIRE_DIRS = frozenset({"offload", "archive"})
"""The folders under ``.workbench`` the proxy writes those files to, and nowhere else."""


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for block in value:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                yield block["text"]


def agent_cwd(body: Mapping[str, Any]) -> str | None:
    """The working directory an agent's request names: in its system prompt, else in its first message."""
    messages = body.get("messages")
    first = messages[0].get("content") if isinstance(messages, list) and messages and isinstance(
        messages[0], Mapping) else None
    for source in (body.get("system"), first):
        for text in _texts(source):
            found = _CWD.search(text)
            if found:
                return found.group(1)
    return None


def read_tool(tools: Any) -> str | None:
    """The first file-reading tool among a request's tools (:data:`READ_TOOLS`), by name."""
    if not isinstance(tools, list):
        return None
    names = [t.get("name") for t in tools if isinstance(t, Mapping)]
    return next((name for name in names if isinstance(name, str) and name in READ_TOOLS), None)


@dataclass(frozen=True)
class Reader:
    """How a proxied agent reads an offloaded result back: its working directory and its reading tool."""

    cwd: str
    tool: str


def reader_of(session: Session) -> Reader | None:
    cwd, tool = session.metadata.get(CWD_KEY), session.metadata.get(READ_TOOL_KEY)
    return Reader(cwd, tool) if isinstance(cwd, str) and cwd and isinstance(tool, str) and tool else None


def refusal(session: Session, action: str) -> str | None:
    """Why ``action`` (offload, archive) is not offered for this session, in one line; None when it is."""
    if action not in WIRE_ACTIONS or session.source_format != "proxy":
        return None
    if reader_of(session) is not None:
        return None
    if not session.metadata.get(READ_TOOL_KEY):
        return (f"{action} is not offered for this proxied session: its requests carry no file-reading tool "
                f"({', '.join(f'{agent} {name}' for name, agent in READ_TOOLS.items())}) to read the content back; "
                "prune instead")
    return (f"{action} is not offered for this proxied session: its requests do not name the agent's working "
            "directory, where the content would be written for it to read back; prune instead")


def offload_path(cwd: str, text: str) -> str:
    """The file an offloaded result is written to: named by its content, so the same output shares one file."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    return str(PurePosixPath(cwd) / OFFLOAD_DIR / f"{digest}.txt")


def is_offload_path(path: str) -> bool:
    """Whether ``path`` is one :func:`offload_path` (or ``wire_archive.archive_path``) makes: the proxy writes
    nowhere else."""
    pure = PurePosixPath(path)
    return pure.is_absolute() and pure.parent.name in WIRE_DIRS and pure.parent.parent.name == ".workbench" \
        and pure.suffix == ".txt" and ".." not in pure.parts


def line_count(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def head_tail(text: str) -> tuple[str, str]:
    """The start and the end of ``text`` kept on the wire (the tail is empty when the head holds it all). Only
    the ends of ``text`` are read: a result can be megabytes, and every projection shows its reference."""
    body = text.rstrip("\n")
    head = "\n".join(body[:HEAD_CHARS].split("\n")[:HEAD_LINES])
    rest = body[len(head):]
    if not rest.strip():
        return head, ""
    tail = "\n".join(rest[-TAIL_CHARS:].split("\n")[-TAIL_LINES:]).lstrip("\n")
    return head, tail


def file_reference(offload: Offload, original: str) -> str:
    """What the agent reads instead of an offloaded result: the path, its size, its head and tail (it starts as
    the engine's own reference does, ``[Tool result stored``)."""
    size = offload.byte_size or len(original.encode())
    head, tail = head_tail(original)
    skipped = max(0, offload.lines - head.count("\n") - tail.count("\n") - 2)
    middle = f"\n… ({skipped:,} lines not shown) …\n{tail}" if tail else ""
    return (f'[Tool result stored in a file by the workbench: {size:,} bytes, {offload.lines:,} lines from '
            f'"{offload.tool_name or "tool"}". The whole output is in {offload.path}: read it with your '
            "file-reading tool (an offset and a limit read part of it).]\n"
            f"{head}{middle}")
