"""Decoding a compressed answer for the tee: the client gets the upstream's bytes as they were sent, and
the proxy reads its own decoded copy of them. Every encoding an agent may accept (``gzip``, ``deflate``,
``br``, ``zstd``, and a chain of them); one it does not know leaves the answer unreadable to the proxy,
never to the client."""

from __future__ import annotations

import sys
import zlib
from typing import Protocol

import brotli  # type: ignore[import-untyped]  # no type information shipped

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdDecompressor, ZstdError
else:
    from backports.zstd import ZstdDecompressor, ZstdError


class _Step(Protocol):
    def decode(self, data: bytes) -> bytes: ...


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self.inner = zlib.decompressobj(wbits)
        self.started = wbits != zlib.MAX_WBITS

    def decode(self, data: bytes) -> bytes:
        if self.started:
            return self.inner.decompress(data)
        self.started = True
        try:  # ``deflate`` is meant to be zlib-wrapped; some servers send it raw
            return self.inner.decompress(data)
        except zlib.error:
            self.inner = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.inner.decompress(data)


class _Brotli:
    def __init__(self) -> None:
        self.inner = brotli.Decompressor()

    def decode(self, data: bytes) -> bytes:
        return bytes(self.inner.process(data))


class _Zstd:
    def __init__(self) -> None:
        self.inner = ZstdDecompressor()

    def decode(self, data: bytes) -> bytes:
        out = bytearray()
        while data:
            out += self.inner.decompress(data)
            data, self.inner = (self.inner.unused_data, ZstdDecompressor()) if self.inner.eof else (b"", self.inner)
        return bytes(out)


def _step(name: str) -> _Step | None:
    match name:
        case "gzip" | "x-gzip":
            return _Zlib(zlib.MAX_WBITS | 16)
        case "deflate":
            return _Zlib(zlib.MAX_WBITS)
        case "br":
            return _Brotli()
        case "zstd":
            return _Zstd()
    return None


DECODE_ERRORS = (zlib.error, brotli.error, ZstdError)


class Decoder:
    """Undoes a ``content-encoding`` chunk by chunk (raises one of :data:`DECODE_ERRORS` on bad data)."""

    def __init__(self, encoding: str) -> None:
        names = [name.strip().lower() for name in encoding.split(",") if name.strip().lower() not in ("", "identity")]
        steps = [_step(name) for name in reversed(names)]
        self.unknown = next((name for name, step in zip(reversed(names), steps, strict=True) if step is None), None)
        """The first encoding this cannot undo (None: it can undo them all)."""
        self.steps = [step for step in steps if step is not None]

    def decode(self, data: bytes) -> bytes:
        for step in self.steps:
            data = step.decode(data)
        return data
