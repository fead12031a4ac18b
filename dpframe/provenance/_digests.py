"""The digests that bind a protected file's content: every byte a release can read is hashed
again at each release (:mod:`dpframe.provenance._binding`), so this hash's speed is the content
check's cost.

**Which hash.** BLAKE3 when the optional ``blake3`` package can be imported (the extra
``dpframe[fast-content-check]``, which the ``test`` and ``bench`` extras include), else SHA-256
from ``hashlib``. The choice is made once, when this module is imported (:data:`DIGEST`), and
recorded on every binding (``algorithm`` of :class:`~dpframe.provenance._binding.FileContent`):
a binding is always re-hashed with its own algorithm, so two digests of different algorithms
are never compared. Both are collision resistant (no one knows how to find two contents with
one digest), so a changed file is refused with either; only the speed differs. Digests live in
memory only, for the process's lifetime: none is stored, so no stored format needs a version
and the algorithm can change between releases of dpframe.

**Speed** (``python -m benchmarks.file_hash_speed``, the shared 2-core test machine, 75 MB in
memory): SHA-256 about 1.1 GB/s on one core (SHA extensions; 65-69 ms), BLAKE3 about 5 GB/s
(15 ms of CPU; 4.2-4.9x SHA-256's speed per round in six runs). BLAKE3 runs on **one thread**
(``max_threads=1``): the check runs beside the engine's read, which already uses every core.
On every core (``max_threads=AUTO``, the same digest) it used slightly more CPU (54-58 against
52-55 ms for 256 MiB; a 10 M-row ``scan_parquet`` mean 1.34-1.38x native in CPU time against
1.31-1.34x) and its effect on the release's wall time was not consistent on the loaded test
machine (1.14-1.18x against 1.22-1.31x in two runs, 1.33-1.69x against 1.26-1.31x in four).

**Reads, not memory maps.** Bytes are read into a 1 MiB buffer (``os.preadv``) and hashed from
it. Hashing a memory map (``blake3``'s ``update_mmap``, or ``mmap``) would save the copy but is
not safe: a file truncated while it is mapped kills the process with SIGBUS when the hash
touches a page past the new end (measured with ``update_mmap`` on a 512 MiB file truncated
20 ms in). A read of a truncated file is short instead, which :func:`ranges_digest` turns into
None (a changed file); the digest functions never raise on a file's content.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["DIGEST", "file_digest", "new_hasher", "ranges_digest"]


class Hasher(Protocol):
    """What a digest needs of a hash object (``hashlib``'s and ``blake3``'s both have it)."""

    def update(self, data: Any, /) -> Any: ...

    def digest(self) -> bytes: ...


def fastest_available() -> str:
    """``"blake3"`` when the ``blake3`` package imports, else ``"sha256"``."""
    try:
        importlib.import_module("blake3")
    except ImportError:
        return "sha256"
    return "blake3"


#: The algorithm new bindings use, chosen once at import (:func:`fastest_available`): BLAKE3
#: (about 4.5x SHA-256's speed on the test machine: 15 against 65-69 ms of CPU for the 75 MB
#: column a 10 M-row ``scan_parquet`` mean reads) when ``blake3`` is installed, else SHA-256
#: (``hashlib``; about 1.1 GB/s on one core with SHA extensions, faster than BLAKE2b's 0.8 and
#: SHA-512's 0.6 GB/s). Each binding records the algorithm it was made with.
DIGEST = fastest_available()
#: Read size: 1 MiB stays in the core's cache between the read and the hash; 8 and 16 MiB
#: reads measured no faster with SHA-256, nor 4 MiB blocks with BLAKE3.
_CHUNK = 1 << 20


def new_hasher(algorithm: str) -> Hasher:
    """An empty hash object of ``algorithm`` (``"blake3"``, one thread; otherwise a
    ``hashlib`` name). Both release the GIL while they hash a 1 MiB block, so the check runs
    beside an engine's read on another core."""
    if algorithm == "blake3":
        blake3: Any = importlib.import_module("blake3")
        hasher: Hasher = blake3.blake3(max_threads=1)
        return hasher
    import hashlib

    return hashlib.new(algorithm)


def file_digest(path: str, algorithm: str) -> bytes | None:
    """The ``algorithm`` digest of every byte of the file at ``path`` (read in 1 MiB chunks),
    or None when it cannot be read. Reads file bytes only, never parses them: whether it is
    None depends on the file system, not on the values."""
    try:
        with open(path, "rb", buffering=0) as f:
            digest = new_hasher(algorithm)
            view = memoryview(bytearray(_CHUNK))
            while True:
                read = f.readinto(view)
                if not read:
                    break
                digest.update(view[:read])
            return digest.digest()
    except OSError:
        return None


def ranges_digest(path: str, ranges: Sequence[tuple[int, int]], algorithm: str
                  ) -> bytes | None:
    """The ``algorithm`` digest of the bytes of ``path`` in ``ranges`` (``(start, end)``, end
    exclusive), in order, as :func:`file_digest` reads them; None when it cannot be read or a
    range reaches past the file's end (a file truncated meanwhile)."""
    import os

    try:
        with open(path, "rb", buffering=0) as f:
            digest = new_hasher(algorithm)
            view = memoryview(bytearray(_CHUNK))
            fd = f.fileno()
            for start, end in ranges:
                at = start
                while at < end:
                    read = os.preadv(fd, [view[:min(_CHUNK, end - at)]], at)
                    if not read:
                        return None
                    digest.update(view[:read])
                    at += read
            return digest.digest()
    except OSError:
        return None
