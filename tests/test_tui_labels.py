"""Labels the message list shows in its badge column fit it whole (a cut "undone sum…" said nothing)."""

from __future__ import annotations

import pytest

from workbench.tui.widgets import format as fmt
from workbench.tui.widgets.message_list import BADGES_WIDTH
from workbench.tui.widgets.rows import EXCLUSION_LABELS

BADGES = ("PERSIST", "summary", "pruned", "offloaded", "error")


@pytest.mark.parametrize("label", sorted(EXCLUSION_LABELS.values()))
def test_every_exclusion_label_fits_the_badge_column(label: str) -> None:
    assert fmt.badge_text((), label).cell_len <= BADGES_WIDTH


@pytest.mark.parametrize("badge", BADGES)
def test_every_badge_alone_fits_the_badge_column(badge: str) -> None:
    assert fmt.badge_text((badge,), None).cell_len <= BADGES_WIDTH
