"""The program's version, stored with what another version would make differently (imports, view states)."""

from __future__ import annotations

from functools import cache


@cache
def program_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # deferred: 10 ms that only --version and imports need

    try:
        return version("context-workbench")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
