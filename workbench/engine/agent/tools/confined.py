"""Reading and writing workspace files so that what was checked is what is used.

:meth:`ToolContext.resolve` checks a path by name; between that check and an ``open`` by the same name
a directory on the way could be swapped for a symbolic link leading out. So the file is opened by walking
down from the workspace one component at a time, each opened relative to the last with ``O_NOFOLLOW``: a
link swapped in anywhere on the way makes the open fail instead of following it. The opened file must be
a regular file with a single hard link: a second link may be a name outside the workspace for the same
file (``ln outside/secret.txt ws/notes.txt``), and the path check cannot see it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workbench.engine.agent.tools.base import ToolContext, ToolError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
"""A pipe swapped in is opened without waiting for its other end, then refused."""


def _parts(ctx: ToolContext, path: str) -> tuple[str, tuple[str, ...]]:
    full = ctx.resolve(path)
    root = ctx.workspace.resolve()
    parts = full.relative_to(root).parts
    if not parts:
        raise ToolError(f"{path} is the workspace itself, a directory")
    return str(root), parts


@contextmanager
def _parent(root: str, parts: tuple[str, ...], path: str, *, create: bool) -> Iterator[int]:
    """A descriptor of the directory holding ``parts[-1]``, reached without following any link."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for name in parts[:-1]:
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                following = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                raise _refusal(exc, path) from exc
            os.close(fd)
            fd = following
        yield fd
    finally:
        os.close(fd)


def _refusal(exc: OSError, path: str) -> ToolError | OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return ToolError(f"{path}: a symbolic link on the way changed after the path was checked; not followed")
    if exc.errno == errno.ENOENT:
        return ToolError(f"{path}: no such file or directory")
    if exc.errno == errno.ENXIO:  # a pipe with no reader, opened for writing
        return ToolError(f"{path}: not a regular file")
    return exc


def check_single(st: os.stat_result, path: str) -> None:
    """A ToolError unless ``st`` is a regular file with one hard link."""
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory; use list_files")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path}: not a regular file")
    if st.st_nlink > 1:
        raise ToolError(f"{path}: the file has {st.st_nlink} hard links, and another may be outside the workspace; "
                        "the file tools do not read or write it (copy it to a new file to use it)")


def read_bytes(ctx: ToolContext, path: str, limit: int, too_large: str) -> bytes:
    """The content of workspace file ``path``; a ToolError (``too_large`` among them) if it cannot be used."""
    root, parts = _parts(ctx, path)
    with _parent(root, parts, path, create=False) as parent:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=parent)
        except OSError as exc:
            raise _refusal(exc, path) from exc
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        check_single(st, path)
        if st.st_size > limit:
            raise ToolError(too_large)
        return fh.read(limit + 1)


def write_bytes(ctx: ToolContext, path: str, data: bytes) -> None:
    """Create or replace workspace file ``path`` (and the folders on the way) with ``data``."""
    root, parts = _parts(ctx, path)
    with _parent(root, parts, path, create=True) as parent:
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC, 0o666, dir_fd=parent)
        except IsADirectoryError as exc:
            raise ToolError(f"{path} is a directory") from exc
        except OSError as exc:
            raise _refusal(exc, path) from exc
    with os.fdopen(fd, "wb") as fh:
        check_single(os.fstat(fd), path)  # before anything is changed: truncating would write through the link
        os.set_blocking(fd, True)
        fh.truncate(0)
        fh.write(data)


def read_text_under(root: Path, path: str, max_bytes: int) -> tuple[str | None, str | None]:
    """A file the workbench reads into a prompt itself (a memory file, a memory, a skill), by the same rules as
    the file tools, under ``root`` (the workspace, or the folder the config names): (text, None); (None, None)
    when there is no such file; (None, why it was refused): a link leading out of ``root``, a loop, a second
    hard link, a file too large or not UTF-8."""
    tool_ctx = ToolContext(workspace=root)
    try:
        full = tool_ctx.resolve(path)
        if not full.exists():
            return None, None
        if full.is_dir():
            return None, f"{path} is a directory, not a file"
        data = read_bytes(tool_ctx, path, max_bytes, f"{path} is larger than {max_bytes:,} bytes")
    except ToolError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"cannot read {path} ({exc.strerror or type(exc).__name__})"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, f"{path} is not UTF-8 text"
