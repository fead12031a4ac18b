"""File access of a durable ledger (:mod:`dpframe.accounting.durable`): the identity of an
open file, opening an existing ledger or head file, and syncing a folder."""

from __future__ import annotations

import os
from pathlib import Path

from dpframe.errors import LedgerError


def _ino(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _open_existing(path: Path, flags: int, ledger: Path) -> int:
    """``os.open`` of an existing ledger or head file; a file this process may not open
    (no permission, a read-only file system) is a :class:`LedgerError` naming the fix.
    ``FileNotFoundError`` passes through (the callers tell what a missing file means)."""
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise LedgerError(
            f"cannot open {path} of the ledger {ledger} for reading and writing "
            f"({exc.strerror or type(exc).__name__}): dpframe appends every release to the "
            "ledger and its head file. Give this user read and write permission on both (and "
            "a writable file system), or name another ledger path; nothing was read or spent"
        ) from None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
