"""The program's version, stored with what another version would make differently (imports, view states)."""

from __future__ import annotations

__version__ = "0.1.0"
"""The one place it is written: the package's metadata reads it from here (``[tool.hatch.version]``)."""


def program_version() -> str:
    """This program's version. Not read from the installed package's metadata: ``importlib.metadata`` and the
    email parser it loads cost every open of a stored session 60 ms (a view state's key holds the version)."""
    return __version__
