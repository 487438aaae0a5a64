"""Benchmarks: speed and accuracy targets, each measured beside a naive baseline.

Run all of them from the repository root with ``python -m tests.bench``
(``--only NAME`` for one, ``--no-fail`` to always exit 0). They are not unit
tests: pytest does not collect them, and they never touch the user's database.
"""
