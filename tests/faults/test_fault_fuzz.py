"""Hostile input: the three importers and the config loader, fuzzed with hypothesis.

Inputs: random bytes; real records (from the shared fixtures, strings shortened) with one to three
values anywhere in them replaced by something hostile — wrong types, ``null``, integers of up to
4,000 digits, ``1e400``/``NaN``/``Infinity``, NUL bytes, lone surrogates, nesting 100-300 deep; every
field of every template record replaced, one at a time, by each wrong type (deterministic; these
files also repeat each record's id many times, as a resumed or concatenated transcript does); raw
lines no JSON library writes (100,000 nested arrays, a 5,000-digit integer, invalid UTF-8, NUL bytes);
a 100 MB single line (memory measured with tracemalloc); TOML configs with the same hostile values in
every known setting.

The outcome is always one of: a clear error (a :class:`WorkbenchError` — one line on the command
line, exit 1), or an import with the unusable lines listed — and then the stored session loads,
projects, budgets, inspects and exports. Never another exception, never a hang (every input runs
under a SIGALRM time limit), never memory that grows with the input.
"""

from __future__ import annotations

import json
import math
import re
import signal
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fault_support import COUNTERS, FIXTURES, FULL, one_line_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.cli import main
from workbench.engine.agent.wire import build_request
from workbench.engine.context.report import inspect_report
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.settings.config import Config, load_config
from workbench.engine.sources.export import export_chunks
from workbench.engine.sources.watch import TranscriptFollower
from workbench.engine.transcript.importers import import_file, parse_file
from workbench.engine.transcript.importers.reading import MAX_LINE_BYTES
from workbench.engine.transcript.store import Store

FORMATS = ("claude-code", "codex", "opencode")
EXAMPLES = 400 if FULL else 40
LIMIT = 20.0
"""Seconds any one input may take, however hostile."""

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not FULL,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


class Hang(BaseException):
    """Raised by the alarm: not an Exception, so no ``except Exception`` in the code under test eats it."""


@contextmanager
def time_limit(seconds: float = LIMIT) -> Iterator[None]:
    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- the checks -----------------------------------------------------------------------------


def exercise(path: Path, fmt: str | None) -> str:
    """Import ``path`` and use the session every way a user can; "failed" or "imported". Any exception
    other than a WorkbenchError fails the test, as does going over the time limit."""
    COUNTERS.add(fuzz_inputs=1)
    with time_limit(), Store(":memory:") as store:
        try:
            parsed = import_file(store, path, fmt)
        except WorkbenchError as exc:
            assert str(exc) and "\n" not in str(exc), repr(exc)
            return "failed"
        for skipped in parsed.skipped_lines:
            assert skipped.line >= 1 and skipped.reason
        ctx = SessionContext.load(store, parsed.session.id, Config())
        assert len(ctx.messages) == len(parsed.messages)
        view = ctx.view()
        ctx.budget()
        json.dumps(inspect_report(ctx, parsed.skipped_lines))
        for export in ("jsonl", "markdown"):
            for projected in (False, True):
                "".join(export_chunks(ctx, export, projected=projected))  # type: ignore[arg-type]
        body = build_request(view, ctx.model or "claude-sonnet-4-5", 4096).body()
        json.dumps(body)
        SessionContext.load(store, parsed.session.id, Config(), use_checkpoint=True).view()
    return "imported"


def write_lines(path: Path, records: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


# --- templates: real records, shortened --------------------------------------------------------


def shorten(value: Any) -> Any:
    if isinstance(value, str):
        return value[:120]
    if isinstance(value, list):
        return [shorten(v) for v in value[:6]]
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    return value


def claude_template() -> list[Any]:
    lines = (FIXTURES / "claude-code__marot__spotter__short.jsonl").read_text().splitlines()
    extra = [
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "content": "Conversation compacted",
         "compactMetadata": {"trigger": "auto", "preTokens": 1000}},
        {"type": "user", "uuid": "u-sum", "isCompactSummary": True, "message": {"role": "user", "content": "summary"}},
        {"type": "user", "uuid": "u-img", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [
                {"type": "text", "text": "out"},
                {"type": "image", "source": {"media_type": "image/png", "data": "aGk="}}]}]}},
        {"type": "summary", "summary": "A title"},
    ]
    return [shorten(json.loads(line)) for line in lines] + extra


def codex_template() -> list[Any]:
    path = next(FIXTURES.glob("codex__*.jsonl"))
    chosen: dict[tuple[str, str | None], Any] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            key = (record["type"], record["payload"].get("type"))
            chosen.setdefault(key, shorten(record))
    token_count = {"timestamp": "2026-05-11T10:30:00.000Z", "type": "event_msg", "payload": {
        "type": "token_count", "info": {"total_token_usage": {"input_tokens": 900, "cached_input_tokens": 100,
                                                              "output_tokens": 40, "total_tokens": 1040},
                                        "last_token_usage": {"input_tokens": 900, "output_tokens": 40},
                                        "model_context_window": 200000}}}
    return [*chosen.values(), token_count]


def opencode_template() -> dict[str, Any]:
    path = next(FIXTURES.glob("opencode__*nimble-pixel*.json"))
    return shorten(json.loads(path.read_text(encoding="utf-8")))  # type: ignore[no-any-return]


# --- hostile values and where they go ------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**4000, -(10**300), 2**63, 2**64, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308]),
    st.text(max_size=40),
    st.sampled_from(["\x00", "a\x00b", "\ud800", "\udfff lone", "💥" * 3, "", " ", "../../etc/passwd",
                     "' OR 1=1 --"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.integers(100, 300).map(nested),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += paths(item, (*prefix, index))
    return out


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: replaced(v, rest, new) if k == head else v for k, v in value.items()}
    return [replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


@st.composite
def mutated(draw: st.DrawFn, template: Any) -> Any:
    value = template
    for _ in range(draw(st.integers(1, 3))):
        choices = paths(value)
        value = replaced(value, draw(st.sampled_from(choices)), draw(HOSTILE))
    return value


def dump(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


# --- the importers -------------------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=2048), fmt=st.sampled_from([None, *FORMATS]))
def test_random_bytes(data: bytes, fmt: str | None, tmp_path: Path) -> None:
    path = tmp_path / "random.jsonl"
    path.write_bytes(data)
    exercise(path, fmt)


@FUZZ
@given(data=st.data())
def test_claude_code_records_with_hostile_values(data: st.DataObject, tmp_path: Path) -> None:
    records = claude_template()
    line = data.draw(st.integers(0, len(records) - 1))
    records[line] = data.draw(mutated(records[line]))
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(dump(r) for r in records) + "\n", encoding="utf-8", errors="surrogatepass")
    exercise(path, data.draw(st.sampled_from([None, "claude-code"])))


@FUZZ
@given(data=st.data())
def test_codex_records_with_hostile_values(data: st.DataObject, tmp_path: Path) -> None:
    records = codex_template()
    line = data.draw(st.integers(0, len(records) - 1))
    records[line] = data.draw(mutated(records[line]))
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(dump(r) for r in records) + "\n", encoding="utf-8", errors="surrogatepass")
    exercise(path, data.draw(st.sampled_from([None, "codex"])))


@FUZZ
@given(data=st.data())
def test_opencode_exports_with_hostile_values(data: st.DataObject, tmp_path: Path) -> None:
    doc = data.draw(mutated(opencode_template()))
    path = tmp_path / "export.json"
    text = dump(doc)
    if data.draw(st.booleans()):  # sometimes cut short, as a damaged export is
        text = text[: data.draw(st.integers(0, len(text)))]
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    exercise(path, data.draw(st.sampled_from([None, "opencode"])))


WRONG_TYPES: dict[str, Any] = {
    "null": None, "true": True, "list": [1, "x"], "object": {"k": "v"}, "string": "x\x00y", "negative": -1,
    "huge-int": 10**30, "4000-digits": 10**3999, "infinity": math.inf, "nan": math.nan, "deep": nested(200),
    "surrogate": "\ud800",
}


KINDS = list(WRONG_TYPES) if FULL else ["null", "list", "4000-digits", "deep"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_field_with_every_wrong_type(fmt: str, kind: str, tmp_path: Path) -> None:
    """Each field of each template record (and each record as a whole) replaced by ``kind``: one record
    per mutation, all in one file (for OpenCode: every mutated message in one export, and the session
    info mutated field by field in small exports of their own). Each mutated record counts as an input."""
    value = WRONG_TYPES[kind]
    if fmt == "opencode":
        doc = opencode_template()
        messages = [replaced(m, path, value) for m in doc["messages"] for path in paths(m)]
        files = [{**doc, "messages": messages}]
        files += [{"info": replaced(doc["info"], path, value), "messages": doc["messages"][:2]}
                  for path in paths(doc["info"])]
        for n, exported in enumerate(files):
            path = tmp_path / f"export{n}.json"
            path.write_text(dump(exported), encoding="utf-8")
            exercise(path, fmt)
        COUNTERS.add(fuzz_inputs=len(messages) + len(files) - 2)
        return
    records = claude_template() if fmt == "claude-code" else codex_template()
    lines = [dump(replaced(record, path, value)) for record in records for path in paths(record)]
    path = write_lines(tmp_path / "every-field.jsonl", lines)
    for chosen in (None, fmt):
        exercise(path, chosen)
    COUNTERS.add(fuzz_inputs=2 * len(lines) - 2)


RAW_LINES = {
    "100k nested arrays": "[" * 100_000 + "]" * 100_000,
    "100k nested, unclosed": '{"type": "user", "message": ' + "[" * 100_000,
    "5000-digit integer": '{"type": "user", "uuid": "u", "message": {"role": "user", "content": "x"}, "n": '
                          + "7" * 5000 + "}",
    "1e400": '{"type": "user", "uuid": "u", "message": {"role": "user", "content": [{"type": "tool_use", '
             '"id": "t", "name": "x", "input": {"n": 1e400, "m": -1e400}}]}}',
    "NaN and Infinity": '{"type": "assistant", "uuid": "a", "message": {"id": "m", "role": "assistant", '
                        '"content": [{"type": "text", "text": "t"}], "usage": {"input_tokens": NaN, '
                        '"output_tokens": Infinity}}}',
    "NUL inside a string": '{"type": "user", "uuid": "u", "message": {"role": "user", "content": "a\\u0000b"}}',
    "lone surrogate": '{"type": "user", "uuid": "u\\ud800", "message": {"role": "user", "content": "\\udfff"}}',
    "deep tool input": '{"type": "assistant", "uuid": "a", "message": {"id": "m", "role": "assistant", "content": '
                       '[{"type": "tool_use", "id": "t", "name": "x", "input": {"a": '
                       + "[" * 300 + "]" * 300 + "}}]}}",
    "huge usage": '{"type": "assistant", "uuid": "a", "message": {"id": "m", "role": "assistant", "content": '
                  '[{"type": "text", "text": "t"}], "usage": {"input_tokens": ' + "9" * 40 + "}}}",
    "codex huge numbers": '{"timestamp": "2026-05-11T10:30:00Z", "type": "event_msg", "payload": {"type": '
                          '"token_count", "info": {"total_token_usage": {"input_tokens": ' + "9" * 40 + "}, "
                          '"model_context_window": ' + "9" * 40 + "}}}",
    "codex deep arguments": '{"timestamp": "2026-05-11T10:30:00Z", "type": "response_item", "payload": {"type": '
                            '"function_call", "name": "shell", "call_id": "c", "arguments": "'
                            + "[" * 5000 + '"}}',
}


@pytest.mark.parametrize("fmt", [None, "claude-code", "codex"])
@pytest.mark.parametrize("name", list(RAW_LINES))
def test_raw_hostile_lines_among_good_ones(name: str, fmt: str | None, tmp_path: Path) -> None:
    good = claude_template() if fmt != "codex" else codex_template()
    lines = [dump(good[0]), RAW_LINES[name], *(dump(r) for r in good[1:])]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    assert exercise(path, fmt) in ("imported", "failed")
    alone = tmp_path / "alone.jsonl"
    alone.write_text(RAW_LINES[name] + "\n", encoding="utf-8", errors="surrogatepass")
    exercise(alone, fmt)


@pytest.mark.parametrize("raw", [b"\xff\xfe\x00garbage\n", b'{"type": "user"}\xc3\x28\n', b"\x00" * 100,
                                 b"\xef\xbb\xbf" + b'{"type": "summary", "summary": "bom"}\n',
                                 b"\r\n" * 50, b'{"type":"user","message":{"content":"a\x00b"}}\n'],
                         ids=["bad-utf8", "bad-utf8-in-json", "nul-bytes", "bom", "blank-crlf", "raw-nul"])
def test_invalid_utf8_and_nul_bytes(raw: bytes, tmp_path: Path) -> None:
    for fmt in (None, *FORMATS):
        path = tmp_path / "bytes.jsonl"
        good = dump(claude_template()[0]).encode() + b"\n"
        path.write_bytes(good + raw + good)
        exercise(path, fmt)


# --- a 100 MB line -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def huge_line_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good record, a 100 MB line (one JSON string), and another good record."""
    path = tmp_path_factory.mktemp("huge") / "huge.jsonl"
    records = claude_template()
    with path.open("w", encoding="utf-8") as fh:
        fh.write(dump(records[0]) + "\n")
        fh.write('{"type": "user", "uuid": "big", "message": {"role": "user", "content": "')
        chunk = "x" * (1024 * 1024)
        for _ in range(100):
            fh.write(chunk)
        fh.write('"}}\n')
        for record in records[1:]:
            fh.write(dump(record) + "\n")
    return path


PEAK_LIMIT = MAX_LINE_BYTES * 2 + 16 * 1024 * 1024
"""What reading may allocate at most: two line buffers and change; far less than the 100 MB line."""


@pytest.mark.parametrize("how", ["detect+import", "claude-code", "watch"])
def test_a_100_mb_line_is_skipped_in_bounded_memory(how: str, huge_line_file: Path) -> None:
    tracemalloc.start()
    try:
        with time_limit(60):
            if how == "watch":
                follower = TranscriptFollower(huge_line_file)
                skipped = []
                for _ in range(20):
                    update = follower.poll()
                    skipped += update.skipped
                    if not update.more:
                        break
                messages = follower.messages
            else:
                parsed = parse_file(huge_line_file, None if how == "detect+import" else "claude-code")
                skipped, messages = parsed.skipped_lines, parsed.messages
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    COUNTERS.add(fuzz_inputs=1)
    assert [s.line for s in skipped] == [2], skipped
    assert f"longer than {MAX_LINE_BYTES // 2**20} MiB" in skipped[0].reason
    assert len(messages) >= 2
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB while reading a 100 MB line"


def test_a_100_mb_line_through_the_cli_is_a_partial_import(huge_line_file: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with time_limit(60):
        code = main(["import", "--db", str(tmp_path / "wb.db"), str(huge_line_file), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert [s["line"] for s in report["skipped_lines"]] == [2]
    COUNTERS.add(fuzz_inputs=1)


# --- the command line: one line, exit 1 ------------------------------------------------------------


@pytest.mark.parametrize("name", ["100k nested arrays", "5000-digit integer", "lone surrogate"])
def test_hostile_files_on_the_command_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hostile.jsonl"
    path.write_text(RAW_LINES[name] + "\n", encoding="utf-8", errors="surrogatepass")
    for command in (["import", str(path)], ["inspect", str(path)], ["export", str(path)]):
        with time_limit():
            code = main([*command, "--db", str(tmp_path / "wb.db")])
        _out, err = capsys.readouterr()
        COUNTERS.add(fuzz_inputs=1)
        if code == 0:  # imported what could be read (a lone surrogate becomes U+FFFD), no traceback
            assert "Traceback" not in err and "internal error" not in err
        else:
            one_line_error(code, err)


# --- the config loader ---------------------------------------------------------------------------


def section_keys() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, field in Config.model_fields.items():
        model = field.annotation
        fields = getattr(model, "model_fields", None)
        out[name] = list(fields) if fields else ["claude-sonnet-4-5"]
    return out


BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string, escapes and all (a lone surrogate is refused)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return '""'  # None has no TOML form: an empty string in its place


def toml_key(key: str) -> str:
    return key if BARE.match(key) else json.dumps(key)


@st.composite
def configs(draw: st.DrawFn) -> str:
    sections = section_keys()
    chosen: dict[str, dict[str, Any]] = {}
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sorted(sections)))
        key = draw(st.one_of(st.sampled_from(sections[section]), st.text(min_size=1, max_size=8)))
        chosen.setdefault(section, {})[key] = draw(HOSTILE)
    return "".join(f"[{toml_key(s)}]\n" + "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in keys.items())
                   for s, keys in chosen.items())


@FUZZ
@given(text=configs())
def test_configs_with_hostile_values(text: str, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    check_config(path, tmp_path)


@FUZZ
@given(data=st.binary(max_size=1024))
def test_config_of_random_bytes(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(data)
    check_config(path, tmp_path)


@pytest.mark.parametrize("text", [
    "a = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "[budget]\nwarn = " + "[" * 3000 + "]" * 3000 + "\n",
    "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
    "[budget]\noutput_reserve = " + "1" * 5000 + "\n",
    "[budget]\ncontext_window = " + "9" * 400 + "\n",
    "[budget]\nwarn = nan\n",
    "[budget]\nwarn = 1e400\n",
    '[models."claude-sonnet-4-5"]\ncontext_window = ' + "9" * 4000 + "\nmax_output = -1\n",
    "[budget]\nwarn = 0.5\x00\n",
    "[[[budget]]]\n",
], ids=["100k-nested", "deep-value", "deep-inline-table", "5000-digits", "400-digits", "nan", "1e400",
        "4000-digit-window", "nul", "bad-table"])
def test_hostile_configs(text: str, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    check_config(path, tmp_path)


def check_config(path: Path, tmp_path: Path) -> None:
    """A ConfigError with one line, or a config the budget and an inspect report can use."""
    COUNTERS.add(fuzz_inputs=1)
    with time_limit():
        try:
            config = load_config(path)
        except WorkbenchError as exc:
            assert str(exc) and "\n" not in str(exc).strip(), repr(exc)
            return
        session = sample_session(tmp_path)
        with Store(":memory:") as store:
            parsed = import_file(store, session)
            ctx = SessionContext.load(store, parsed.session.id, config)
            json.dumps(inspect_report(ctx))
            ctx.budget()


def sample_session(tmp_path: Path) -> Path:
    path = tmp_path / "sample.jsonl"
    if not path.exists():
        write_lines(path, claude_template())
    return path

