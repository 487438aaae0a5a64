"""The fault suite's own fixtures, and the summary line it prints at the end of a run:

    fault suite: 20 kills survived, 12 API faults survived, 400 fuzz inputs tried, 14 artefacts scanned
    for secrets; 0 lost messages, 0 integrity failures

``WORKBENCH_FAULT_FULL=1`` runs the full suite (see ``fault_support.py``).
"""

from __future__ import annotations

import pytest
from fault_support import COUNTERS, FULL


@pytest.fixture(autouse=True)
def _counted() -> None:
    COUNTERS.ran = True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not COUNTERS.ran:
        return
    scope = "full" if FULL else "subset; WORKBENCH_FAULT_FULL=1 for all"
    terminalreporter.write_sep("-", f"fault suite ({scope})")
    if COUNTERS.outcomes:
        landed = ", ".join(f"{n} {what}" for what, n in sorted(COUNTERS.outcomes.items()))
        terminalreporter.write_line(f"kills landed: {landed}")
    terminalreporter.write_line(COUNTERS.line())
