"""The workbench's own credentials (the provider's key): read from the environment once, then kept out of it.

Once a client holds the key, it is taken out of ``os.environ`` and held here, so nothing started later
inherits it, and :func:`child_environment` leaves it (and any variable carrying the same value) out of
what a shell command or hook is given. :func:`known` lists the values, so that the agent can redact them
from anything it stores or sends (a command can still read the process's *initial* environment from
``/proc/<pid>/environ``; what it prints is redacted before it is stored).
"""

from __future__ import annotations

import os

CREDENTIAL_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Variables that hold the workbench's own credentials."""

_held: dict[str, str] = {}
_given: set[str] = set()


def get(name: str) -> str | None:
    """The credential in environment variable ``name``, from the environment or, once taken, from here."""
    return os.environ.get(name) or _held.get(name)


def take_from_environment() -> None:
    """Move every credential variable out of ``os.environ`` into this module: call once a client holds it."""
    for name in CREDENTIAL_ENV:
        value = os.environ.pop(name, None)
        if value:
            _held[name] = value


def remember(value: str | None) -> None:
    """A credential given another way (an argument, a config file): redacted like the others."""
    if value:
        _given.add(value)


def known() -> tuple[str, ...]:
    """Every credential value the workbench holds or can see in its environment."""
    values = {*_held.values(), *_given, *(os.environ.get(name) for name in CREDENTIAL_ENV)}
    return tuple(sorted((v for v in values if v), key=len, reverse=True))


def forget() -> None:
    """Drop every held credential (tests, which set and clear keys in one process)."""
    _held.clear()
    _given.clear()


def child_environment() -> dict[str, str]:
    """``os.environ`` for a child process: without the credential variables, nor any variable whose value
    is a held credential (``export MY_KEY=$ANTHROPIC_API_KEY`` before starting the workbench)."""
    secrets = set(known())
    return {k: v for k, v in os.environ.items() if k not in CREDENTIAL_ENV and v not in secrets}
