"""Subcommands of ``workbench``: each module here defines ``register(add)`` and is found automatically."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def command_modules() -> list[ModuleType]:
    # The folder's listing, not pkgutil.iter_modules: that imports inspect (5 ms of every start-up).
    folder = os.path.dirname(__file__)
    names = sorted(entry.name.removesuffix(".py") for entry in os.scandir(folder)
                   if entry.name.endswith(".py") and not entry.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
