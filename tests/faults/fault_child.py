"""``python fault_child.py ARGS`` is ``workbench ARGS``, optionally slowed so that kills land mid-write.

The fault suite runs the real command line in this child and SIGKILLs it. Two variables widen the
windows a kill can hit, without changing what is written:

* ``FAULT_PAUSE`` (seconds): sleep after ``BEGIN IMMEDIATE`` and before ``COMMIT`` of every store
  transaction, so kills land inside transactions, not only between them (each outer transaction
  also writes ``fault-trace: begin`` / ``fault-trace: commit`` on stderr);
* ``FAULT_CHUNK_DELAY`` (seconds): the scripted provider streams its text in chunks this far apart,
  so kills land mid-stream.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _slow_transactions(pause: float) -> None:
    from workbench.engine.transcript.store import Store

    original = Store.transaction

    @contextmanager
    def slowed(self: Store) -> Iterator[None]:
        outer = not self._conn.in_transaction
        with original(self):
            if outer:
                _trace("begin")
                time.sleep(pause)
            yield
            if outer:
                time.sleep(pause)
        if outer:
            _trace("commit")

    Store.transaction = slowed  # type: ignore[method-assign]


def _trace(what: str) -> None:
    """A line on stderr the parent reads after a kill, to tell whether it landed inside a transaction."""
    sys.stderr.write(f"fault-trace: {what}\n")
    sys.stderr.flush()


def _slow_stream(delay: float) -> None:
    from workbench.engine.providers import scripted

    original = scripted.ScriptedProvider.__init__

    def init(self: scripted.ScriptedProvider, script: scripted.Script, counter: object = None,
             chunk_delay: float = 0.0) -> None:
        original(self, script, counter, max(chunk_delay, delay))  # type: ignore[arg-type]

    scripted.ScriptedProvider.__init__ = init  # type: ignore[method-assign]


def main() -> int:
    if float(os.environ.get("FAULT_PAUSE") or 0):
        _slow_transactions(float(os.environ["FAULT_PAUSE"]))
    if float(os.environ.get("FAULT_CHUNK_DELAY") or 0):
        _slow_stream(float(os.environ["FAULT_CHUNK_DELAY"]))
    from workbench.cli import main as workbench

    return workbench(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
