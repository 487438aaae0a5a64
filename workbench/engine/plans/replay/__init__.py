"""Replaying a past session under a policy: what it would have changed, and what it would have cost."""

from workbench.engine.plans.replay.policy import POLICIES, policy_named
from workbench.engine.plans.replay.run import ASSUMPTION, Replay, Step, replay, summary_lines
from workbench.engine.plans.replay.timeline import Timeline, from_session, from_store, from_transcript
from workbench.engine.settings.policies import Policy

__all__ = ["ASSUMPTION", "POLICIES", "Policy", "Replay", "Step", "Timeline", "from_session", "from_store",
           "from_transcript", "policy_named", "replay", "summary_lines"]
