"""Following a stored session that another process writes to, such as the proxy storing an agent's
requests: a cheap look at the session's revision (and, for the proxy, at which proxied sessions exist)
every interval, on the engine thread."""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engine.pictures import session_revision
from workbench.engine.request_store import proxied_sessions
from workbench.engine.store import Store


@dataclass
class StoreFollow:
    session_id: str
    revision: int
    known: set[str] = field(default_factory=set)
    """Proxied sessions already there or already named."""

    @classmethod
    def start(cls, store: Store, session_id: str) -> StoreFollow:
        return cls(session_id, session_revision(store, session_id), {sid for sid, _ in proxied_sessions(store)})

    def seen(self, store: Store) -> None:
        """What the session is now is known here (after a command of this app changed it)."""
        self.revision = session_revision(store, self.session_id)

    def look(self, store: Store) -> tuple[bool, list[tuple[str, str | None]]]:
        """(whether the session changed since last seen, proxied sessions that appeared, oldest first)."""
        revision = session_revision(store, self.session_id)
        changed = revision != self.revision
        self.revision = revision
        new = [(sid, title) for sid, title in reversed(proxied_sessions(store)) if sid not in self.known]
        self.known.update(sid for sid, _ in new)
        return changed, new
