"""The price line of a change to a proxied agent's context, as the steering and compaction commands print it."""

from __future__ import annotations

from workbench.engine.plans.edit_price import EditPrice


def print_price(price: EditPrice) -> None:
    """What the change does to the agent's prompt cache, and what that figure assumes."""
    print(f"cache: {price.describe()}")
    print(f"       ({price.assumption})")
