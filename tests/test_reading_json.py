"""A transcript line reads as the standard library reads it: the same values of the same types (an integer
beyond 64 bits stays an integer, NaN and lone surrogates as before), and the same reason for a bad line."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.transcript.importers.reading import json_problem, load_json, without_lone_surrogates


def _typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type (1, 1.0 and True differ), floats by their repr (NaN
    equals itself)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, repr(value) if isinstance(value, float) else value)


def _as_the_standard_library_reads(text: str) -> Any:
    value = json.loads(text)
    return without_lone_surrogates(value) if "\\ud" in text or "\\uD" in text else value


scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(values, st.booleans())
def test_any_value_reads_back_as_the_standard_library_reads_it(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    read, problem = load_json(text)
    assert problem is None
    assert _typed(read) == _typed(_as_the_standard_library_reads(text))


@pytest.mark.parametrize("text", [
    '{"tokens": 123456789012345678901234567890}',  # wider than 64 bits: an integer, not a float
    '{"n": -9223372036854775809, "m": 18446744073709551615}',
    '[1e400, -1e400, NaN, 5e-324, 0.1, -0, -0.0]',
    '{"a": 1, "a": 2}',
    '{"cut": "\\ud83d here", "pair": "\\ud83d\\ude00"}',
    '"\\u0000 \\/ \u2028 \x7f"',
])
def test_the_edge_cases_read_as_the_standard_library_reads_them(text: str) -> None:
    read, problem = load_json(text)
    assert problem is None
    assert _typed(read) == _typed(_as_the_standard_library_reads(text))


@pytest.mark.parametrize("text", ['{"a": 1}x', '{"a": ', '[1,]', "{'a': 1}", '"tab\there"', "\ufeff{}", "01"])
def test_a_bad_line_has_the_reason_the_standard_library_gives(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(text)
    assert load_json(text) == (None, json_problem(text, caught.value))


def test_nesting_beyond_the_limit_is_refused_with_its_reason() -> None:
    assert load_json("[" * 200 + "]" * 200) == (None, "JSON nested more than 128 levels deep")
    assert load_json("[" * 100_000 + "]" * 100_000)[1] in {"JSON nested too deeply",
                                                           "JSON nested more than 128 levels deep"}
