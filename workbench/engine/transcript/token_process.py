"""Counting tokens in a process of its own, beside an import's reading and storing.

tiktoken's vocabulary takes about 0.12 s to load, and holds the interpreter lock all the while (its
Python decoding of 100,000 entries and its Rust constructor both do): loaded on a thread it delays the
import's own work by as much as it would on the main one. A second process loads it on another core while
this one loads the models and reads the file, then counts the texts it is sent, in order. Only the counting
moves: what is counted, how and what is stored stay with :class:`~.tokens.TokenCounter`, which counts
in-process whenever this process is not there (one core, a failed start, a vocabulary already loaded).

On the pipes, a request is a number of texts, then each text as its UTF-8 length and bytes (lone
surrogates passed through, as Python holds them); the reply is one count per text, in the order asked.
This module imports only the standard library: the worker starts without loading the models.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

    import tiktoken

VOCABULARY = "cl100k_base.tiktoken"
"""``cl100k_base``'s vocabulary, shipped in ``workbench/data`` byte for byte as OpenAI publishes it (so
counting needs no network): its SHA-256 is the one tiktoken itself expects of the download."""
VOCABULARY_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
"""``cl100k_base``'s split pattern and special tokens, as ``tiktoken_ext.openai_public`` defines them."""
SPECIAL_TOKENS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                  "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
WORD = 4
"""Bytes of each length and count on the pipes (little-endian, unsigned)."""
FRAME_TEXTS = 2_000
"""Texts sent in one request at most, so that a long import's first counts come back while it reads on."""
SEND_CHARS = 64_000
"""Characters of text gathered before they are handed to the sending thread."""
REPLY_COUNTS = 16
"""Counts sent back together at most: the import can store what is counted while the rest is counted."""
NUMBERED_IN_ORDER = frozenset({"223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"})
"""The SHA-256 of vocabularies whose ranks are their line numbers from 0 (``cl100k_base``'s): the hash pins
every byte, so their ranks need not be read one by one (a third of reading the vocabulary)."""


def vocabulary_path() -> str:
    """Where the shipped vocabulary is (inside the installed package)."""
    from importlib.resources import files

    return str(files("workbench.data") / VOCABULARY)


def cl100k_base(ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """``cl100k_base`` over ``ranks`` read from the shipped vocabulary."""
    import tiktoken

    return tiktoken.Encoding(name="cl100k_base", pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens=SPECIAL_TOKENS)


@lru_cache(maxsize=1)
def load_encoding() -> tiktoken.Encoding:
    """``cl100k_base`` from the shipped vocabulary, checked against its hash; loaded once per process.

    :func:`read_ranks` reads the file, not tiktoken's ``load_tiktoken_bpe``: that one decodes the 100,000
    lines one Python call per line (the largest part of the worker's start-up after the Rust constructor)
    and first copies a local file into its download cache under the temporary folder, on every new path."""
    return cl100k_base(read_ranks(vocabulary_path(), VOCABULARY_SHA256))


def read_ranks(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """A ``.tiktoken`` vocabulary (a base64 token and its rank per line) as tiktoken reads it, checked against
    ``expected_hash`` as tiktoken checks it."""
    import hashlib
    from binascii import a2b_base64

    with open(path, "rb") as fh:
        data = fh.read()
    digest = hashlib.sha256(data).hexdigest() if expected_hash is not None else None
    if digest != expected_hash:
        raise ValueError(f"{path}: the vocabulary's hash is not the expected one")
    fields = data.split()
    if len(fields) % 2:
        raise ValueError(f"{path}: a line without its rank")
    tokens = map(a2b_base64, fields[0::2])
    if digest in NUMBERED_IN_ORDER:
        return dict(zip(tokens, range(len(fields) // 2)))
    return dict(zip(tokens, map(int, fields[1::2]), strict=True))


EXACT_CHARS = 1 << 20
"""Texts longer than this are counted from their first ``EXACT_CHARS`` characters and the rest estimated at the
same rate: tiktoken's work grows faster than the text on a long unbroken string (one of 100 MB took 70 s and
5 GB), and a count is an estimate of Claude's anyway. :func:`estimated` says which counts these are."""


def estimated(text: str) -> bool:
    """Whether ``text``'s count is estimated from its head (see :data:`EXACT_CHARS`)."""
    return len(text) > EXACT_CHARS


def count_with(encoding: tiktoken.Encoding, text: str) -> int:
    """The raw count of ``text`` (special-token text counted as text): the one rule both processes follow. A text
    over :data:`EXACT_CHARS` is counted from its head and the rest estimated, in bounded time and memory."""
    if not text:
        return 0
    if not estimated(text):
        return len(encoding.encode(text, disallowed_special=()))
    head = len(encoding.encode(text[:EXACT_CHARS], disallowed_special=()))
    return -(-head * len(text) // EXACT_CHARS)


def loaded_here() -> bool:
    """Whether this process holds the vocabulary already (a test run, the app): counting here is then cheaper."""
    return load_encoding.cache_info().currsize > 0


class TokenProcess:
    """The counting process: :meth:`ask` sends texts and returns the first one's ticket, :meth:`counts`
    waits for the counts of tickets asked. None from :meth:`counts` means the process is gone (it could
    not load the vocabulary, or was killed): the caller counts here, and meets the error itself if any."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._replies = proc.stdout
        self._outbox: queue.SimpleQueue[Sequence[str] | None] = queue.SimpleQueue()
        self._unsent: list[str] = []
        self._unsent_chars = 0
        self._asked = 0
        self._sent = 0
        self._received = 0
        self._counts: dict[int, int] = {}
        self.failed = False
        # The writer sends while this thread reads the file: a request never waits for the counting (a pipe
        # holds 64 KB), and the worker never waits for this thread to take its replies before reading on.
        self._writer = threading.Thread(target=self._send, args=(proc.stdin,), name="token-process-writer",
                                        daemon=True)
        self._writer.start()

    @classmethod
    def start(cls) -> TokenProcess | None:
        """The process, started; None where it would not help (one core, the vocabulary loaded here) or
        could not start."""
        if (os.cpu_count() or 1) < 2 or loaded_here():
            return None
        try:
            return cls.launch()
        except OSError:
            return None

    @classmethod
    def launch(cls) -> TokenProcess:
        """The process, started whatever the machine (:meth:`start` decides whether it helps)."""
        import subprocess  # here: the worker itself, which runs this module, has no use for it

        # -P: the working directory is not searched first (a folder named like a module there is not run).
        proc = subprocess.Popen([sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return cls(proc)

    @property
    def asked(self) -> int:
        """The ticket the next text asked will have."""
        return self._asked

    def ask(self, texts: Sequence[str]) -> int:
        """Send ``texts`` to be counted; the ticket of the first (the others follow it). They leave in
        requests of :data:`SEND_CHARS` characters or more (and when a count is wanted): one hand-over per
        text would wake the sending thread, and the worker, hundreds of times."""
        first = self._asked
        self._asked += len(texts)
        self._unsent += texts
        self._unsent_chars += sum(map(len, texts))
        if self._unsent_chars >= SEND_CHARS:
            self._hand_over()
        return first

    def _hand_over(self) -> None:
        if self._unsent and not self.failed:
            self._outbox.put(self._unsent)
        self._sent += len(self._unsent)
        self._unsent, self._unsent_chars = [], 0

    def counts(self, first: int, n: int) -> list[int] | None:
        """The counts of the ``n`` texts asked from ticket ``first`` on, once the process has sent them."""
        if self.failed:
            return None
        if first + n > self._sent:
            self._hand_over()
        while self._received < first + n:
            wanted = first + n - self._received
            data = self._replies.read(WORD * wanted)
            got = len(data) // WORD
            for i in range(got):
                self._counts[self._received + i] = int.from_bytes(data[i * WORD:(i + 1) * WORD], "little")
            self._received += got
            if got < wanted:  # the process ended early
                self.failed = True
                self._counts.clear()
                return None
        return [self._counts.pop(ticket) for ticket in range(first, first + n)]

    def stop(self) -> None:
        """Stop the process once no more counts are wanted, without waiting for it to be gone (the system
        frees its memory meanwhile, on another core); :meth:`close` waits. Further counts are made here."""
        self.failed = True
        self._proc.kill()

    def close(self) -> None:
        """End the process. Killed, not asked: it holds nothing to keep, and letting it end by itself means
        waiting for its interpreter to tear the vocabulary down (a tenth of a second, polled)."""
        self._outbox.put(None)
        self.stop()
        self._proc.wait()
        self._writer.join()  # its last write, if any, failed with the process gone
        self._replies.close()

    def _send(self, pipe: IO[bytes]) -> None:
        try:
            while (texts := self._outbox.get()) is not None:
                batch = list(texts)
                while len(batch) < FRAME_TEXTS:  # what queued up meanwhile goes in the same request
                    try:
                        more = self._outbox.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        self._outbox.put(None)
                        break
                    batch += more
                pipe.write(_request(batch))
                pipe.flush()
        except OSError:  # the process is gone; counts() says so to the reader
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass


@contextmanager
def counting_process() -> Iterator[TokenProcess | None]:
    """A counting process for the length of the block (None where it would not help); ended after it."""
    process = TokenProcess.start()
    try:
        yield process
    finally:
        if process is not None:
            process.close()


def _request(texts: Sequence[str]) -> bytes:
    chunks = [len(texts).to_bytes(WORD, "little")]
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        chunks += (len(data).to_bytes(WORD, "little"), data)
    return b"".join(chunks)


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The worker: count each request's texts and reply, until the requests end.

    One thread counts. Sharing a request with a second one (tiktoken lets go of the interpreter lock while
    it encodes) paid only while the import sat idle with a backlog queued: in the import itself, which
    stores parts as their counts come, the second thread took turns with it, and the import took longer
    (median 253 ms against 240 ms on the 2.7 MB fixture, and 25 ms more CPU)."""
    encoding = load_encoding()

    def count(text: str) -> bytes:
        return count_with(encoding, text).to_bytes(WORD, "little")

    while len(head := requests.read(WORD)) == WORD:
        texts = []
        for _ in range(int.from_bytes(head, "little")):
            size = int.from_bytes(requests.read(WORD), "little")
            texts.append(requests.read(size).decode("utf-8", "surrogatepass"))
        done: list[bytes] = []
        for text in texts:  # sent as they come: the import stores the first parts while the rest count
            done.append(count(text))
            if len(done) == REPLY_COUNTS:
                replies.write(b"".join(done))
                replies.flush()
                done = []
        replies.write(b"".join(done))
        replies.flush()

if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
