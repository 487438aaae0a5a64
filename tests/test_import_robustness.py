"""Importing what is not a plain transcript file: a named pipe or a device is refused at once (opening a
pipe used to wait forever for a writer), and a UTF-8 byte-order mark is read past in every format."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from helpers import fixture_path

from workbench.cli import main
from workbench.engine.errors import ImportFailed
from workbench.engine.transcript.importers import detect_format, parse_file

FIXTURES = {
    "claude-code": "claude-code__marot__spotter__short.jsonl",
    "codex": "codex__codemie-ai__codemie-code__rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
    "opencode": "opencode__victoryforphil__dark-factory__session__hidden-moon__ses_39b583141ffe5xDtTd3Mc1wh0o.json",
}


def finishes(action: object, seconds: float = 5.0) -> BaseException | None:
    """Run ``action()`` in a thread; fail the test if it is still running after ``seconds``."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            action()  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (blocked opening the file?)"
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("fmt", [None, "claude-code", "codex", "opencode"])
def test_a_named_pipe_is_refused_at_once(tmp_path: Path, fmt: str | None) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    error = finishes(lambda: parse_file(fifo, fmt))
    assert isinstance(error, ImportFailed)
    assert str(error) == f"{fifo} is a named pipe (FIFO), not a transcript file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_the_import_command_refuses_a_pipe_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    codes: list[int] = []
    assert finishes(lambda: codes.append(main(["import", "--db", str(tmp_path / "wb.db"), str(fifo)]))) is None
    err = capsys.readouterr().err
    assert codes == [1] and err.strip().splitlines() == [(f"workbench: error: {fifo} is a named pipe (FIFO), "
                                                         "not a transcript file")]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_is_refused_without_reading_it() -> None:
    error = finishes(lambda: parse_file(Path("/dev/zero"), "claude-code"))
    assert isinstance(error, ImportFailed) and "is a character device, not a transcript file" in str(error)


@pytest.mark.parametrize("fmt", sorted(FIXTURES))
def test_a_byte_order_mark_is_read_past(fmt: str, tmp_path: Path) -> None:
    plain = fixture_path(FIXTURES[fmt])
    marked = tmp_path / plain.name
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert detect_format(marked) == fmt
    before, after = parse_file(plain), parse_file(marked)
    assert [m.model_dump(exclude={"session_id"}) for m in after.messages] == \
        [m.model_dump(exclude={"session_id"}) for m in before.messages]  # the first record is not lost
    assert after.skipped_lines == before.skipped_lines



def test_a_tool_schema_with_an_integer_beyond_64_bits_is_counted_not_fatal() -> None:
    """Found by the fuzzer on a Codex header's tool list: orjson refuses such integers; the count goes on."""
    from workbench.engine.context.attribution import tools_item
    from workbench.engine.transcript.tokens import TokenCounter

    tool = {"name": "lookup", "input_schema": {"type": "integer", "maximum": 2**70}}
    item = tools_item(TokenCounter(), [tool])
    assert item is not None and item.components["tools"] > 0
