"""What a proxy's policy last did to a session, read from its overlay: one reading for the app's budget panel
and ``workbench history --json`` (its ``policy`` field), so both say the same.

A policy's plan is stored as any plan is, with origin ``policy`` and ``strategy`` ``policy NAME``; the request
it reached is its ``activated_seq`` (see ``policy_runner``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from workbench.engine.transcript.overlay import EntryState, OverlayEvent, entry_state

PREFIX = "policy "
DONE = {"prune": "pruned", "offload": "offloaded", "archive": "archived", "summary": "summarised"}
"""The past tense of a policy's actions, for its line; another action is named as it is."""


class PolicyActivity(BaseModel):
    """A policy's newest plan on one session."""

    model_config = ConfigDict(defer_build=True)
    policy: str
    """The policy's name (``default``, or one of the config's ``[policies]``)."""
    plan_id: str
    state: EntryState
    request: int | None
    """The number of the proxied request that carried it (None while it waits)."""
    changes: dict[str, int]
    """Action -> how many parts it changed."""
    tokens_saved: int
    plans: int
    """Every plan the policy made on the session, this one included."""

    def line(self) -> str:
        """``policy default · last: pruned 3 at request 6 (−1,234 tokens)``: what the app shows."""
        counts = ", ".join(f"{DONE.get(action, action)} {n}" for action, n in self.changes.items())
        if self.state == "queued":
            return f"policy {self.policy} · waiting: {counts} (−{self.tokens_saved:,} tokens) for a cold cache"
        where = f" at request {self.request}" if self.request is not None else ""
        how = {"applied": "", "undone": ", undone", "cancelled": ", cancelled"}[self.state]
        return f"policy {self.policy} · last: {counts}{where} (−{self.tokens_saved:,} tokens{how})"


def policy_line(activity: PolicyActivity | None, running: str | None = None) -> str:
    """What to say of a proxied session's policy: what it last did, else that ``running`` (the policy the proxy
    runs, when known) is on and has changed nothing yet; empty when neither."""
    if activity is not None:
        return activity.line()
    return f"policy {running} on · nothing changed yet" if running else ""


def policy_activity(events: Sequence[OverlayEvent]) -> PolicyActivity | None:
    """The newest policy plan among ``events`` (a session's overlay, oldest first), or None if no policy acted."""
    plans: list[str] = []
    for event in events:
        if event.origin == "policy" and event.plan_id not in plans:
            plans.append(event.plan_id)
    if not plans:
        return None
    newest = [e for e in events if e.plan_id == plans[-1]]
    first = newest[0]
    changes: dict[str, int] = {}
    for event in newest:
        changes[event.action] = changes.get(event.action, 0) + 1
    strategy = str(first.data.get("strategy", PREFIX + "unnamed"))
    seq = first.data.get("activated_seq")
    return PolicyActivity(
        policy=strategy.removeprefix(PREFIX), plan_id=first.plan_id, state=entry_state(first),
        request=seq if isinstance(seq, int) else None, changes=changes,
        tokens_saved=sum(e.tokens_saved for e in newest), plans=len(plans))
