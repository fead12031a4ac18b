"""The files a lazy source reads, bound by their content (:class:`SourceBinding`), recorded
at protect time and checked before every release.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpframe._util.polars_plan import plan_sources
from dpframe.backends import Backend
from dpframe.provenance._sources import (
    expand_paths,
    file_digest,
)

__all__ = ["ContentCheck", "SourceBinding"]


@dataclass(eq=False)
class SourceBinding:
    """The files a lazy source reads, bound by their content: path → (size, mtime, device,
    inode) and path → SHA-256 of every byte (:func:`dpframe.provenance._sources.file_digest`),
    recorded
    at protect time and checked before every release. ``recount``: the source is not made of
    files dpframe can identify, so its row count is re-read instead. ``lister``: for engines
    that fix their file list in the plan (Spark), asks the engine for the list it will read
    now (None: it no longer can), compared with the recorded one; ``patterns`` (globs and
    folders expanded) are used otherwise.

    What is checked, and when (``docs/engines.md``, "Is the source still the protected
    one?"): at every release, the list of files, each file's metadata, and the digest of
    each file's whole content, re-read from disk. Metadata alone is not enough: a same-size
    rewrite with its modification time put back (``os.utime``) keeps it. If the engine reads
    exactly the listed files and each still has the digest taken at protect, the bytes read
    — hence the ``n`` rows — are those counted at protect. The check reads file bytes, never
    parses a row; a refusal depends only on the files, which the data's steward controls and
    sees anyway.

    :meth:`changed` runs the whole check at once (at protect). A release uses
    :meth:`begin_check` instead: the list and metadata are compared at once (before any
    budget is reserved), and the digests are computed in a thread *while the engine reads*;
    the release joins that thread after the read and before any noise is drawn or budget
    spent, and a changed file is then refused with its reservation cancelled and the read's
    result dropped unlooked-at (:class:`ContentCheck`). The digests read every byte at some
    time after the release began, so a file rewritten before the release is caught exactly as
    by a check before the read; a rewrite *during* a running release may or may not be caught
    (as before: the curator's to prevent).
    """

    files: dict[str, tuple[int, int, int, int]]
    patterns: tuple[str, ...]
    recount: bool
    lister: Callable[[], tuple[str, ...] | None] | None = field(default=None, repr=False)
    digests: dict[str, bytes | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.digests:
            self.digests = _digests(self.files)

    @classmethod
    def of(cls, lazy: Any) -> SourceBinding:
        paths, other = plan_sources(lazy)
        patterns = tuple(paths)
        files = _stat_all(patterns)
        # a remote or URI source (s3://, https://, file://) or a file dpframe cannot stat
        # cannot be bound by identity: its row count is re-read before every release instead
        unbound = any(not _is_local(p) for p in patterns) or any(
            st[0] < 0 for st in files.values())
        return cls(files, patterns, other or unbound)

    @classmethod
    def of_engine(cls, frame: Any, backend: Backend) -> SourceBinding:
        """The binding of an engine frame whose plan dpframe cannot read: the engine's own
        fixed file list where it gives one (no re-count needed), else the files it names, if
        any, plus a re-count before each release."""
        listed = backend.bound_files(frame)
        if listed is not None:
            files = _stat_paths(listed)
            if all(st[0] >= 0 for st in files.values()):
                return cls(files, listed, recount=False,
                           lister=lambda: backend.bound_files(frame))
        patterns = tuple(backend.source_paths(frame))
        return cls(_stat_all(patterns), patterns, recount=True)

    def changed(self) -> bool:
        """Whether the files differ from those bound at protect: another list, other
        metadata, or other content (every file's digest is recomputed: about 1–2 ms per MB
        on the shared test machine, measured in ``docs/engines.md``)."""
        if self.lister is None:
            now = _stat_all(self.patterns)
        else:
            listed = self.lister()
            if listed is None:
                return True
            now = _stat_paths(listed)
        return now != self.files or _digests(now) != self.digests

    def begin_check(self) -> ContentCheck:
        """:meth:`changed`, split for a release: the file list and metadata are compared now
        (a difference is final at once, nothing hashed), and the digest of every file is
        started in a background thread; :meth:`ContentCheck.changed` waits for it."""
        if self.lister is None:
            now = _stat_all(self.patterns)
        else:
            listed = self.lister()
            if listed is None:
                return ContentCheck(None)
            now = _stat_paths(listed)
        if now != self.files:
            return ContentCheck(None)
        return ContentCheck(now, self.digests)


class ContentCheck:
    """The content digests of a binding's files, computed in a daemon thread started at
    construction (``hashlib`` releases the GIL while it hashes each 1 MiB chunk, so the digest
    runs beside an engine's read on another core), compared with ``expected`` by
    :meth:`changed`. ``files`` None: the list or metadata already differ (changed, no thread).

    Soundness of the overlap (``docs/engines.md``, "Is the source still the protected
    one?"): the thread reads each file from its first byte to its last after the release
    started, so a file that differed from the protected bytes when the release started is
    seen different unless it is written back in the meantime — the same race a check before
    the read leaves open. Whatever the engine read meanwhile is dropped when :meth:`changed`
    is true: the caller raises :class:`~dpframe.errors.SourceChangedError` with its
    reservation cancelled, whatever the read returned or raised, so the outcome depends on
    whether the file's bytes changed (the steward's own action), not on any value in them. A
    thread that fails (it cannot: :func:`~dpframe.provenance._sources.file_digest` turns an
    ``OSError`` into None) counts as a change. No files (the plan of dpframe's in-memory copy):
    nothing to hash, so no thread (starting one cost a release of 1,000 rows 35 µs of CPU on
    an idle machine and several times that on a loaded one)."""

    def __init__(self, files: Mapping[str, tuple[int, int, int, int]] | None,
                 expected: Mapping[str, bytes | None] | None = None) -> None:
        self._expected = expected
        self._differs = files is None
        self._found: dict[str, bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if files is not None and not files:
            self._found = {}  # (the digests of no files)
        elif files is not None:
            self._thread = threading.Thread(target=self._digest, args=(files,),
                                            name="dpframe-content-check", daemon=True)
            self._thread.start()

    def _digest(self, files: Mapping[str, tuple[int, int, int, int]]) -> None:
        try:
            self._found = _digests(files)
        except BaseException:  # counted as a change (self._found stays None)
            self._found = None

    @property
    def decided(self) -> bool:
        """Whether the outcome is known without waiting (the list or metadata differ)."""
        return self._differs

    def changed(self) -> bool:
        """Wait for the digests; whether any file differs from the protected one."""
        if self._differs:
            return True
        if self._thread is not None:
            self._thread.join()
        return self._found is None or self._found != self._expected


def _digests(files: Mapping[str, tuple[int, int, int, int]]) -> dict[str, bytes | None]:
    """Path → digest of its content (None for a file that cannot be read)."""
    return {path: file_digest(path) if st[0] >= 0 else None for path, st in files.items()}


def _is_local(path: str) -> bool:
    return "://" not in path


def _stat_all(patterns: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
    """Path → (size, mtime, device, inode) of every file the patterns name (globs and
    folders expanded: :func:`dpframe.provenance._sources.expand_paths`)."""
    return _stat_paths(expand_paths(patterns))


def _stat_paths(paths: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
    """Path → (size, mtime, device, inode) of each path as given; (-1, -1, -1, -1) if it
    cannot be read."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out[path] = (-1, -1, -1, -1)
            continue
        out[path] = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)
    return out
