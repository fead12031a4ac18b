"""Rewrites of a protected file that keep everything but its content: for the content check's
tests (a rewrite the file's size, inode and modification time do not show)."""

from __future__ import annotations

import os
import struct
from pathlib import Path


def rewrite_double(path: Path, old: float, new: float) -> None:
    """Replace the one stored copy of the double ``old`` by ``new`` (little-endian, as
    Parquet's plain encoding stores it): same size, same inode, modification time put back."""
    before = os.stat(path)
    data = path.read_bytes()
    at = data.find(struct.pack("<d", old))
    assert at > 0 and data.count(struct.pack("<d", old)) == 1
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(struct.pack("<d", new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
