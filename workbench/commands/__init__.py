"""Subcommands of ``workbench``: each module here defines ``register(add)``.

:data:`COMMANDS` says which module registers each command, so a command line that names one loads that module
alone: loading every module and building every command's parser took 40-55 ms of each start. A test checks the
table against what the modules register.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

COMMANDS: dict[str, str] = {
    "open": "app", "demo": "app",
    "compact": "compact", "compactions": "compact",
    "components": "sent",
    "db": "db",
    "discover": "discover",
    "export": "export",
    "fork": "fork",
    "proxy": "proxy", "wrap": "proxy", "requests": "proxy",
    "replay": "replay",
    "run": "run",
    **dict.fromkeys(("pin", "unpin", "prune", "restore", "offload", "inline", "archive", "unarchive", "plan", "apply",
                     "undo", "redo", "history", "queued"), "steer"),
    "import": "transcripts", "inspect": "transcripts", "sessions": "transcripts",
    "watch": "watch",
}


def command_modules(commands: list[str] | None = None) -> list[ModuleType]:
    """The modules registering ``commands``, or every module (``None``)."""
    if commands is not None:
        names = sorted({COMMANDS[command] for command in commands})
    else:
        # The folder's listing, not pkgutil.iter_modules: that imports inspect (5 ms of every start-up).
        folder = os.path.dirname(__file__)
        names = sorted(entry.name.removesuffix(".py") for entry in os.scandir(folder)
                       if entry.name.endswith(".py") and not entry.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
