"""Archiving a proxied agent's tool calls behind a digest that points at a file the agent reads back.

An archive takes old calls and their results out of the agent's requests and leaves one digest (the ``archive``
strategy). An agent behind the proxy cannot call ``read_result``, but it can read a file: the archived messages,
as text (:func:`archive_text`: each call with its input, each result whole), are written once to
``<the agent's working directory>/.workbench/archive/<hash>.txt`` by the proxy, before the first request that
carries the digest goes upstream, and the digest ends with :func:`file_line`: the path, its bytes and lines, and
how to read it. The digest is stored with that line, so the projection shows what the agent gets.

Offered where offload is (``wire_offload.refusal``): a file-reading tool and the agent's working directory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import PurePosixPath

from workbench.engine.context.wire_offload import line_count
from workbench.engine.transcript.models import Message, TextPart, ToolResultPart, ToolUsePart

ARCHIVE_DIR = ".workbench/archive"
"""Where, under the agent's working directory, archived messages are written."""
FILE_KEY, IDS_KEY = "archive_file", "archived_ids"
"""The digest message's source: the file it names, and the messages that file holds (in transcript order)."""
FILE_LINE = "[The archived calls and their results, whole, are in a file written by the workbench: "
"""How the digest's last line starts (an archive that replaces earlier digests drops theirs: its file holds
their messages too)."""


def archive_text(messages: Iterable[Message]) -> str:
    """The archived messages as the agent reads them back: what it said, each call with its input, each result
    whole, oldest first (the same text from the same messages, so its size is known before it is written)."""
    calls: dict[str, str] = {}
    sections: list[str] = []
    for message in sorted(messages, key=lambda m: m.index):
        for part in message.parts:
            if isinstance(part, ToolUsePart):
                calls[part.id] = part.name
                sections.append(f"## call {part.name} (id {part.id})\n"
                                f"{json.dumps(part.input, ensure_ascii=False, indent=1, default=str)}")
            elif isinstance(part, ToolResultPart):
                status = ", an error" if part.is_error else ""
                sections.append(f"## result of {calls.get(part.tool_use_id, 'a tool')} (id {part.tool_use_id}"
                                f"{status})\n{part.text}")
            elif isinstance(part, TextPart) and part.text.strip():
                sections.append(f"## {message.role}\n{part.text}")
    return "\n\n".join(sections) + "\n"


def archive_path(cwd: str, text: str) -> str:
    """The file an archive is written to: named by its content, so it is written once."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    return str(PurePosixPath(cwd) / ARCHIVE_DIR / f"{digest}.txt")


def file_line(path: str, text: str) -> str:
    """The digest's last line: where the archived messages are, how big, and how to read them."""
    return (f"{FILE_LINE}{path} ({len(text.encode()):,} bytes, {line_count(text):,} lines): read it with your "
            "file-reading tool (an offset and a limit read part of it).]")


def without_file_line(body: str) -> str:
    """An earlier digest's body as a new digest carries it: the new digest's file holds its messages."""
    return "\n".join(line for line in body.split("\n") if not line.startswith(FILE_LINE))
