"""A full disk (a small tmpfs filled to the last byte): a command that needs space says in one line that the
disk is full, reads still work, and nothing stored is lost or damaged. Needs the right to mount a tmpfs
(root on Linux); skipped with the reason otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_support import BIG_CLAUDE, in_process, integrity

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="mounts a tmpfs")]

SIZE = "8m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(folder: Path) -> Path:
    """Write a file until the disk has no byte left."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_one_line_and_reads_still_work(small_disk: Path, tmp_path: Path) -> None:
    db = small_disk / "wb.db"
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(BIG_CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)[:200]))
    imported = in_process(["import", "--db", db, transcript, "--json"])
    assert imported.returncode == 0, imported.stderr
    session_id = json.loads(imported.stdout)["session_id"]
    stored = in_process(["sessions", "--db", db, "--json"]).stdout
    more = tmp_path / "more.jsonl"
    more.write_text(BIG_CLAUDE.read_text(encoding="utf-8"))
    filler = fill(small_disk)
    assert shutil.disk_usage(small_disk).free < 4096

    listed = in_process(["sessions", "--db", db, "--json"])
    assert listed.returncode == 0, listed.stderr
    assert session_id in listed.stdout
    for args in (["import", "--db", db, more], ["pin", "--db", db, session_id, "3"]):
        result = in_process(args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode != 0 and len(lines) == 1, result.stderr
        assert "disk is full" in lines[0] or "disk may be full" in lines[0], lines[0]
        assert "internal error" not in lines[0] and "not a workbench database" not in lines[0]

    os.unlink(filler)
    assert integrity(db) == []
    assert in_process(["sessions", "--db", db, "--json"]).stdout == stored, "nothing stored was lost"
