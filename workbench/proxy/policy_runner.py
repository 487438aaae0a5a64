"""The proxy's side of a policy (``[proxy] policy``, ``workbench proxy --policy``): plans made off the request's
path, sent with a request when they pay.

Before each request is steered, :meth:`PolicyRunner.before_steering` activates the policy's queued edits marked
ready (``policies.READY``) for this request, as the proxy activates any queued edit once the cache is cold, and
every ``plan_every`` requests asks for a new plan on the store's thread, after what is queued there already: the
request waits for neither the planning nor the store. The plan is made on what the store holds then (the requests
before this one) and reaches the next request at the earliest. No plan is asked for while a request carries queued
edits: their activation is stored with the request, and a planning before it would take them back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from workbench.engine.plans.policies import READY, run_policy
from workbench.engine.settings.config import Config
from workbench.engine.settings.policies import Policy
from workbench.engine.transcript.overlay import fold, is_pending
from workbench.engine.transcript.store import Store
from workbench.proxy.exchange import Exchange
from workbench.proxy.threads import Thread

log = logging.getLogger(__name__)
Submit = Callable[[Callable[[Store], None]], None]
"""Queue work for the store's thread, which runs it with its store."""


class PolicyRunner:
    """One policy, for every session the proxy sees."""

    def __init__(self, policy: Policy, config: Config, submit: Submit, errors: list[str]) -> None:
        self.policy = policy
        self.config = config
        self._submit = submit
        self.errors = errors
        """Where a planning that failed says why (the proxy's own list): the agent's requests go on unchanged."""

    def before_steering(self, thread: Thread, exchange: Exchange) -> None:
        """Send the ready edits with this request; plan again every ``plan_every`` requests."""
        ready = [e for e in thread.events if is_pending(e) and not e.undone and e.data.get(READY)]
        for event in ready:
            activation = {"activated_at": exchange.at.isoformat(), "activated_seq": exchange.seq}
            event.data.update(activation)
            thread.activated[event.id] = activation
        if ready:
            exchange.activated = [*exchange.activated, *(e.id for e in ready)]
            thread.overlay = fold(thread.events)
            thread.steered = {}
        if thread.created and not exchange.activated and exchange.seq % self.policy.plan_every == 0:
            session_id = thread.session_id
            self._submit(lambda store: self._plan(store, session_id))

    def _plan(self, store: Store, session_id: str) -> None:
        try:
            run_policy(store, session_id, self.policy, self.config)
        except Exception as exc:  # a policy must not stop the proxy: logged, and reported with its errors
            message = f"policy {self.policy.name} could not plan for {session_id}: {type(exc).__name__}: {exc}"
            log.warning(message, exc_info=True)
            self.errors.append(message)
