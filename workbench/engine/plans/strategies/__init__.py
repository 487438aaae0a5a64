"""Context strategies as plans: DCP, tool-output pruning, offloading, archiving, and manual changes.

Every strategy is a planner, ``(SessionContext, StrategiesConfig) -> Plan``:
what it would change, why, and the tokens before and after, without changing
anything. ``measure.apply`` commits a plan in one transaction and
``plans.undo`` reverts it. The transcript is never modified. ``registry`` names
them and runs the automatic ones; ``settings`` holds their configuration.
"""
