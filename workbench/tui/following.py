"""Following a stored session that other processes write to (the proxy storing an agent's requests, a
steering command in another terminal, a second workbench): a cheap look at the session's revision (and,
for the proxy, at which proxied sessions exist) every interval, on the engine thread."""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engine.transcript.request_store import overlay_mark, proxied_sessions
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.view_states import revision as session_revision


@dataclass
class StoreFollow:
    """What the app last saw of the stored session it shows, to tell another writer's changes from its own."""

    session_id: str
    revision: int
    known: set[str] = field(default_factory=set)
    """Proxied sessions already there or already named."""
    proxy: bool = False
    """A proxy serves this app: name the proxied sessions that appear."""

    @classmethod
    def start(cls, store: Store, session_id: str, *, proxy: bool = False) -> StoreFollow:
        known = {sid for sid, _ in proxied_sessions(store)} if proxy else set()
        return cls(session_id, session_revision(store, session_id), known, proxy, overlay_mark(store, session_id))

    steering: tuple[int, int, int] | None = None
    """The session's overlay as last seen (events, undone ones, newest): what a steering key acts on."""

    def changed(self, store: Store) -> bool:
        """Whether another process changed the session since it was last seen here (and now it is seen)."""
        revision = session_revision(store, self.session_id)
        moved, self.revision = revision != self.revision, revision
        return moved

    def steered(self, store: Store) -> bool:
        """Whether another process changed the session's overlay (pinned, pruned, undid…) since last seen."""
        mark = overlay_mark(store, self.session_id)
        moved, self.steering = self.steering is not None and mark != self.steering, mark
        return moved

    def seen(self, store: Store) -> None:
        """What the session is now is known here (after a command of this app changed it)."""
        self.revision = session_revision(store, self.session_id)
        self.steering = overlay_mark(store, self.session_id)

    def look(self, store: Store) -> tuple[bool, list[tuple[str, str | None]]]:
        """(whether the session changed since last seen, proxied sessions that appeared, oldest first)."""
        changed = self.changed(store)
        if changed:
            self.steering = overlay_mark(store, self.session_id)  # the reload that follows shows it
        if not self.proxy:
            return changed, []
        new = [(sid, title) for sid, title in reversed(proxied_sessions(store)) if sid not in self.known]
        self.known.update(sid for sid, _ in new)
        return changed, new
