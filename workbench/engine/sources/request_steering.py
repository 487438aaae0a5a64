"""The overlay applied to a request an agent is about to send: what the user steered, on the wire.

Only the blocks the overlay changes are rewritten, through the same ``effective_parts`` the projection
uses, so the request forwarded equals what the workbench shows. Everything else (ids, the pairing of
``tool_use`` and ``tool_result``, cache marks, unknown fields) is passed as it came. Pinned messages are
never touched. A result offloaded to a file (``context.wire_offload``) is written to it, from what the agent
sent, before the request that points the agent at it goes upstream.

A compaction the user applied reshapes the request as the projector reshapes the view: from each pivot on,
the messages before it are left out but the pinned ones (with the other half of their tool calls,
``context.pairs``), and its summary goes first as a user message; consecutive messages of one role are then
joined, as the view's wire joins them (``transcript.blocks.append_wire``). Messages the user (or a strategy)
archived leave the request the same way, and an archive's digest goes where the transcript has it; messages the
agent itself stopped sending are its own business. The file an archive's digest names (``context.wire_archive``)
is written, from the archived messages, before the first request that carries the digest goes upstream.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from workbench.engine.context.effective import effective_parts
from workbench.engine.context.pairs import Calls, with_partners
from workbench.engine.context.wire_archive import FILE_KEY, IDS_KEY, archive_text
from workbench.engine.context.wire_offload import is_offload_path
from workbench.engine.errors import WorkbenchError
from workbench.engine.transcript.blocks import blocks_of, part_block
from workbench.engine.transcript.models import Message, ToolResultPart
from workbench.engine.transcript.overlay import OverlayState
from workbench.engine.transcript.request_blocks import RawMessage, transcript_message
from workbench.engine.transcript.store import Store

Summaries = Mapping[str, tuple[dict[str, Any], ...]]
"""A compaction summary's content blocks, by the summary message's id."""


@dataclass
class Steering:
    """What the overlay makes of one request."""

    replaced: dict[int, dict[str, Any]]
    """The client's messages the overlay changes, by their position in the client's list."""
    messages: list[Any] | None = None
    """The whole list sent, when a compaction reshaped it (None: the client's list with ``replaced``)."""
    ids: list[str | None] = field(default_factory=list)
    """With ``messages``: the transcript id of each message sent (None: a summary, or messages joined)."""
    changed: set[tuple[int, int]] = field(default_factory=set)
    """(message, block) positions in what is sent where a block was replaced."""


def touched_messages(overlay: OverlayState) -> set[str]:
    """Messages with a part the overlay replaces (pinned ones excepted)."""
    return ({message_id for message_id, _ in overlay.pruned} | {message_id for message_id, _ in overlay.offloaded}) \
        - overlay.pinned


def write_offload(path: str, text: str) -> None:
    """The whole result (or an archive's messages), where its reference says it is (once: the name is the
    content's hash). The folder gets a ``.gitignore`` so the agent's repository does not pick the files up."""
    if not is_offload_path(path):
        raise WorkbenchError(f"refusing to write outside a .workbench/offload or .workbench/archive folder: {path}")
    target = Path(path)
    if target.exists():
        return
    if not target.parent.parent.parent.is_dir():
        raise WorkbenchError(f"the agent's working directory {target.parent.parent.parent} is not on this machine")
    target.parent.mkdir(parents=True, exist_ok=True)
    ignore = target.parent.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_bytes(b"*\n")
    written = target.with_suffix(f".{os.getpid()}.part")
    written.write_bytes(text.encode())
    written.replace(target)


def steer_message(raw: RawMessage, message_id: str, overlay: OverlayState) -> dict[str, Any] | None:
    """``raw`` with the overlay's replacements, or None when it changes nothing."""
    content = raw.get("content")
    if not isinstance(content, list):
        return None
    message = transcript_message("", 0, "", raw, 0).model_copy(update={"id": message_id})
    effective = effective_parts(overlay, message)
    out: list[Any] | None = None
    for position, (part, shown) in enumerate(zip(message.parts, effective, strict=True)):
        if shown is part:
            continue
        block = part_block(shown)
        if block is None:
            continue
        offload = overlay.offloaded.get((message_id, position))
        if offload is not None and offload.path and isinstance(part, ToolResultPart) \
                and not overlay.is_pruned(message_id, position):
            write_offload(offload.path, part.text)
        original = content[position]
        if isinstance(original, Mapping) and "cache_control" in original:
            block["cache_control"] = original["cache_control"]
        out = out if out is not None else list(content)
        out[position] = block
    return None if out is None else {**raw, "content": out}


Memo = dict[str, tuple[Any, dict[str, Any] | None]]
"""What :func:`steer_message` made of each message under one overlay, by id: (the client's message it was made
from, the result). An agent sends its history again with every request, and the proxy reads a history it has
read before into the same objects; a message whose cache mark moved is a new object, and is steered again."""


def steer_messages(messages: Sequence[Any], ids: Sequence[str], overlay: OverlayState,
                   memo: Memo | None = None) -> dict[int, dict[str, Any]]:
    """The messages the overlay changes, by position, with its replacements applied (``ids``: the transcript
    id of each message); empty when it changes nothing, so the client's bytes can go upstream as they are.
    ``memo``: kept by the caller while the overlay stays the same."""
    touched = touched_messages(overlay)
    steered: dict[int, dict[str, Any]] = {}
    if not touched:
        return steered
    memo = memo if memo is not None else {}
    for index, message_id in enumerate(ids[:len(messages)]):
        if message_id in touched and isinstance(messages[index], Mapping):
            raw = messages[index]
            made = memo.get(message_id)
            if made is None or made[0] is not raw:
                made = memo[message_id] = (raw, steer_message(raw, message_id, overlay))
            changed = made[1]
            if changed is not None:
                steered[index] = changed
    return steered


def changed_blocks(messages: Sequence[Any], steered: Mapping[int, Mapping[str, Any]]) -> set[tuple[int, int]]:
    """(message, block) positions where :func:`steer_messages` replaced a block."""
    out: set[tuple[int, int]] = set()
    for i, after in steered.items():
        for j, (a, b) in enumerate(zip(messages[i].get("content") or (), after.get("content") or (), strict=False)):
            if a is not b:
                out.add((i, j))
    return out


def steer_request(messages: Sequence[Any], ids: Sequence[str], overlay: OverlayState,
                  summaries: Summaries, memo: Memo | None = None, digests: Digests | None = None) -> Steering | None:
    """The request as the overlay makes it, or None when it changes nothing (the client's bytes go as they are).
    ``summaries``: the content of the compaction summaries the overlay's pivots name; ``memo``: see
    :func:`steer_messages`; ``digests``: the archive digests the session holds (:func:`read_digests`)."""
    replaced = steer_messages(messages, ids, overlay, memo)
    sent = ids[:len(messages)]
    pivots = _pivots(sent, overlay, summaries, digests or {})
    removed = overlay.archived - overlay.dropped
    placed = _placed(sent, overlay, digests or {})
    for digest_id in (i for ids_ in placed.values() for i in ids_):
        file = (digests or {})[digest_id].file
        if file is not None:
            write_offload(*file)
    reshaping = pivots.keys() | removed
    if not placed and not (reshaping and any(message_id in reshaping for message_id in sent)):
        return Steering(replaced, changed=changed_blocks(messages, replaced)) if replaced else None
    added = {**summaries, **{digest_id: digest.blocks for digest_id, digest in (digests or {}).items()
                             if not digest.marker}}
    return _reshaped(messages, sent, overlay, added, pivots, placed, replaced)


@dataclass(frozen=True)
class Digest:
    """An archive's digest, as a proxied agent's requests carry it: in the transcript's order, so before the first
    message sent that came after it."""

    blocks: tuple[dict[str, Any], ...]
    index: int
    """Its position in the transcript."""
    before: frozenset[str]
    """The messages before it in the transcript."""
    file: tuple[str, str] | None = None
    """The file it names and what that file holds: the archived messages, for the agent to read back."""
    marker: bool = False
    """Not a digest: a compaction's boundary marker (no blocks), where a compaction that summarised everything the
    agent had sent puts its pivot; it is placed as a digest is, so the pivot falls on the next message sent."""


Digests = Mapping[str, Digest]
"""The archive digests of a session, by message id."""


def is_digest(message: Message) -> bool:
    return message.kind == "tool_summary" and bool(message.source.get("archive_plan"))


def read_digests(store: Store, session_id: str, overlay: OverlayState, known: Digests) -> dict[str, Digest]:
    """The digests of the archives in force (``known``: those read before, which never change)."""
    compactions = {p.summary_id for p in overlay.pivots}
    markers = {p.message_id for p in overlay.pivots}
    wanted = [i for i in (overlay.summaries - compactions) | markers if i not in known]
    out = {i: digest for i, digest in known.items() if i in overlay.summaries or i in markers}
    for message in store.load_messages(session_id, wanted) if wanted else ():
        marker = message.kind == "compact_boundary"
        if marker or (is_digest(message) and message.agent_visible):
            before = store.connection.execute("SELECT id FROM messages WHERE session_id = ? AND idx < ?",
                                              [session_id, message.index]).fetchall()
            out[message.id] = Digest(() if marker else blocks_of(message.parts), message.index,
                                     frozenset(row[0] for row in before),
                                     None if marker else _file(store, session_id, message), marker)
    return out


def _pivots(sent: Sequence[str], overlay: OverlayState, summaries: Summaries, digests: Digests) -> dict[str, str | None]:
    """Each compaction's pivot, by the message sent it falls on: its kept tail's first message, or (when it summarised
    everything) the first message sent after its boundary marker, when one sent came before it."""
    out: dict[str, str | None] = {}
    for pivot in overlay.pivots:
        if pivot.summary_id not in summaries:
            continue
        marker = digests.get(pivot.message_id)
        if marker is None or not marker.marker:
            out[pivot.message_id] = pivot.summary_id
            continue
        at = next((i for i, message_id in enumerate(sent) if message_id not in marker.before), None)
        if at:
            out[sent[at]] = pivot.summary_id
    return out


def _file(store: Store, session_id: str, digest: Message) -> tuple[str, str] | None:
    """The file a digest names and its content, made from the archived messages as the digest's plan made it."""
    path, ids = digest.source.get(FILE_KEY), digest.source.get(IDS_KEY)
    if not isinstance(path, str) or not isinstance(ids, list) or not ids:
        return None
    return path, archive_text(store.load_messages(session_id, [str(i) for i in ids]))


def _placed(sent: Sequence[str], overlay: OverlayState, digests: Digests) -> dict[int, list[str]]:
    """Where each digest in force goes: before the first message sent that came after it in the transcript, when
    one sent came before it (otherwise the agent compacted past it, and it is not sent). A digest a later archive
    replaced is archived itself, and not sent."""
    out: dict[int, list[str]] = {}
    for digest_id, digest in sorted(digests.items(), key=lambda item: item[1].index):
        if digest.marker or digest_id not in overlay.summaries or digest_id in overlay.archived:
            continue
        at = next((i for i, message_id in enumerate(sent) if message_id not in digest.before), None)
        if at:
            out.setdefault(at, []).append(digest_id)
    return out


Entry = tuple[int, str]
"""One message of the reshaped request: (position in the client's list, its id), or (-1, a summary's or a digest's
id)."""


def _calls(message: Any) -> Calls:
    content = message.get("content") if isinstance(message, Mapping) else None
    kinds = {b.get("type") for b in content if isinstance(b, Mapping)} if isinstance(content, list) else set()
    return "tool_use" in kinds, "tool_result" in kinds


def _entry_calls(messages: Sequence[Any], entries: Sequence[Entry], n: int) -> Calls:
    index = entries[n][0]
    return _calls(messages[index]) if index >= 0 else (False, False)


def _entries(messages: Sequence[Any], sent: Sequence[str], overlay: OverlayState, pivots: Mapping[str, str | None],
             placed: Mapping[int, list[str]]) -> list[Entry]:
    """The projector's walk over the client's messages: archived ones are left out, digests go where the
    transcript has them, and at each pivot the pinned messages (and their tool partners) stay, the summary goes
    first, and the rest before it is left out."""
    entries: list[Entry] = []
    removed = overlay.archived - overlay.dropped
    for index, message_id in enumerate(sent):
        entries.extend((-1, digest_id) for digest_id in placed.get(index, ()))
        summary_id = pivots.get(message_id)
        if summary_id is not None:
            keep = with_partners(partial(_entry_calls, messages, entries), [mid in overlay.pinned for _, mid in entries])
            entries = [(-1, summary_id), *(entry for entry, kept in zip(entries, keep, strict=True) if kept)]
        if message_id not in removed:
            entries.append((index, message_id))
    return entries


def _reshaped(messages: Sequence[Any], sent: Sequence[str], overlay: OverlayState, added: Summaries,
              pivots: Mapping[str, str | None], placed: Mapping[int, list[str]],
              replaced: Mapping[int, dict[str, Any]]) -> Steering:
    """The whole list sent when messages leave it or are added to it; consecutive messages of one role joined."""
    out: list[Any] = []
    sent_ids: list[str | None] = []
    changed: set[tuple[int, int]] = set()
    for index, message_id in _entries(messages, sent, overlay, pivots, placed):
        if index < 0:
            message: Any = {"role": "user", "content": list(added[message_id])}
        else:
            message = replaced.get(index, messages[index])
        role = message.get("role")
        if out and out[-1].get("role") == role:
            out[-1] = {**out[-1], "content": [*_blocks(out[-1]), *_blocks(message)]}
            sent_ids[-1] = None
            continue
        if index in replaced:
            changed.update((len(out), j) for _, j in changed_blocks(messages, {index: replaced[index]}))
        out.append(message)
        sent_ids.append(message_id if index >= 0 else None)
    return Steering(dict(replaced), out, sent_ids, changed)


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or ())
