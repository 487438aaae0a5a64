"""The sub-agents a session started, found from the parent's side, and how large their context grew.

A sub-agent's session (the engine's ``task`` tool, a proxied Agent call, an imported Claude Code
``agent-*.jsonl``) names its parent in ``metadata.parent_session`` / ``parent_message``. How large its
context grew is the largest input any of its requests reported: what the calling message's row shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from workbench.engine.transcript.store import Store


def find_subagents(store: Store, session_id: str) -> dict[str, tuple[str, ...]]:
    """Parent message id -> the stored sub-agent sessions started from it."""
    found: dict[str, list[str]] = {}
    for session in store.sessions_mentioning(session_id):
        meta = session.metadata
        if meta.get("parent_session") == session_id and isinstance(meta.get("parent_message"), str):
            found.setdefault(meta["parent_message"], []).append(session.id)
    return {k: tuple(v) for k, v in found.items()}


def peak_inputs(store: Store, session_ids: Iterable[str]) -> dict[str, int]:
    """Session id -> the largest input (uncached + cache written + cache read) one of its requests reported;
    sessions with no reported usage are left out. Synthetic (estimated) records do not count."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    rows = store.connection.execute(
        "SELECT session_id, MAX(input_tokens + cache_creation_input_tokens + cache_read_input_tokens) "
        f"FROM usage_records WHERE synthetic = 0 AND session_id IN ({marks}) GROUP BY session_id", ids,
    ).fetchall()
    return {str(sid): int(peak) for sid, peak in rows if peak}


def message_peaks(store: Store, subagents: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Parent message id -> the peak input of the sub-agents it started (the largest, when it started several)."""
    peaks = peak_inputs(store, (sid for ids in subagents.values() for sid in ids))
    found = {message: max((peaks[sid] for sid in ids if sid in peaks), default=0)
             for message, ids in subagents.items()}
    return {message: peak for message, peak in found.items() if peak}
