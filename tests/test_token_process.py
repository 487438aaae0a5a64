"""Counting in a process of its own: the counts are the ones this process makes, in the order asked, for any
text (special tokens, lone surrogates, long texts, more replies than a pipe holds); an import through it
stores exactly what an import counting here stores; a process that dies leaves the counting here."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from helpers import claude_fixture

from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.models import TextPart, ToolResultPart, ToolUsePart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.token_process import (
    FRAME_TEXTS,
    SEND_CHARS,
    TokenProcess,
    count_with,
    load_encoding,
    read_ranks,
    vocabulary_path,
)
from workbench.engine.transcript.tokens import TokenCounter

TEXTS = ["hello world", "", "<|endoftext|> is text here", "naïve café 日本語", "cut emoji \ud83d here",
         "word " * 30_000, '{"command": "grep -rn x"}']


def _counted(process: TokenProcess, texts: list[str], seconds: float = 60) -> list[int] | None:
    """Ask for every text, then read every count (a hang fails the test instead of stopping the run)."""
    result: list[list[int] | None] = []
    firsts = [process.ask([text]) for text in texts]
    reader = threading.Thread(target=lambda: result.append(process.counts(firsts[0], len(texts))), daemon=True)
    reader.start()
    reader.join(seconds)
    assert result, "the counts never came back"
    return result[0]


def test_the_process_counts_each_text_as_this_one_does_in_the_order_asked() -> None:
    encoding = load_encoding()
    # More texts than one request takes, more characters than one hand-over, and more replies than a
    # pipe holds (64 KB of 4-byte counts) before any is read.
    many = [f"item {n} " * (n % 7) for n in range(max(FRAME_TEXTS * 3, 20_000))]
    texts = TEXTS + many
    assert sum(map(len, texts)) > SEND_CHARS
    process = TokenProcess.launch()
    try:
        counts = _counted(process, texts)
    finally:
        process.close()
    assert counts == [count_with(encoding, text) for text in texts]
    assert counts[:2] == [2, 0]


def test_an_import_counting_in_the_process_stores_what_one_counting_here_stores(tmp_path: Path) -> None:
    path = claude_fixture("subagent")  # its sub-agents are imported too, through the same process
    process = TokenProcess.launch()
    try:
        with Store(tmp_path / "there.db") as store:
            import_file(store, path, keep_messages=False, process=process)
    finally:
        process.close()
    with Store(tmp_path / "here.db") as store:
        import_file(store, path, keep_messages=False)
    query = "SELECT session_id, message_id, position, content_hash, tokens FROM parts ORDER BY 1, 2, 3"
    there, here = (sqlite3.connect(tmp_path / name).execute(query).fetchall() for name in ("there.db", "here.db"))
    assert len({row[0] for row in here}) > 1  # the sub-agents' sessions are in the comparison
    assert there == here and sum(row[4] for row in here) > 0


def test_a_process_that_dies_leaves_the_counting_here() -> None:
    parts = [TextPart(text="hello world"), ToolUsePart(id="t1", name="Bash", input={"command": "ls -la"}),
             ToolResultPart(tool_use_id="t1", text="total 0\n" * 50)]
    expected = [TokenCounter().count_part(p) for p in parts]
    process = TokenProcess.launch()
    counter = TokenCounter(process=process)
    counter.prefetch(parts[:2])
    process._proc.kill()  # as if it were killed from outside, or could not load the vocabulary
    try:
        assert [counter.count_part(p) for p in parts] == expected
        assert process.failed
    finally:
        process.close()
    assert process._proc.returncode is not None  # ended and waited for: no process left behind


def test_the_shipped_vocabulary_is_cl100k_base_as_tiktoken_defines_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken's own definition of ``cl100k_base``, its loader reading the shipped file in place of the
    download (checked against the hash tiktoken expects of it), is the encoding the workbench counts with."""
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext import openai_public

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # its loader's copy of the file stays in the test
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe",
                        lambda _url, expected_hash: load_tiktoken_bpe(vocabulary_path(), expected_hash=expected_hash))
    theirs = openai_public.cl100k_base()
    ours = load_encoding()
    assert theirs == {"name": ours.name, "pat_str": ours._pat_str, "mergeable_ranks": ours._mergeable_ranks,
                      "special_tokens": ours._special_tokens}
    assert len(ours._mergeable_ranks) > 100_000
    with pytest.raises(ValueError, match="hash"):
        read_ranks(vocabulary_path(), "0" * 64)


def test_ranks_are_read_from_the_file_unless_its_hash_pins_them_to_the_line_numbers(tmp_path: Path) -> None:
    """Only a vocabulary whose hash is known to number its lines in order skips reading the ranks: any other
    file's ranks are the ones written in it."""
    import hashlib

    from workbench.engine.transcript.token_process import NUMBERED_IN_ORDER

    path = tmp_path / "out-of-order.tiktoken"
    path.write_bytes(b"YQ== 5\nYmM= 2\n")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest not in NUMBERED_IN_ORDER
    assert read_ranks(str(path), digest) == read_ranks(str(path)) == {b"a": 5, b"bc": 2}


def test_a_stopped_process_leaves_further_counting_here() -> None:
    process = TokenProcess.launch()
    counter = TokenCounter(process=process)
    process.stop()
    try:
        assert counter.count_part(TextPart(text="hello world")) == 2
        assert process.failed
    finally:
        process.close()
    assert process._proc.returncode is not None
