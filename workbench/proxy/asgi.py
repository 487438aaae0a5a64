"""Reading a client's request over bare ASGI, shared by the Messages and the OpenAI routes."""

from __future__ import annotations

from starlette.types import Receive


class ClientGone(Exception):
    """The client went away before its request's body was whole."""


async def read_body(receive: Receive) -> bytes:
    """The request's whole body; :class:`ClientGone` when the client left first (a cut body is not a request:
    nothing of it goes upstream)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (or its response is complete)."""
    while (await receive())["type"] != "http.disconnect":
        pass
