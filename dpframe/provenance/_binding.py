"""The files a lazy source reads, bound by their content (:class:`SourceBinding`), recorded
at protect time and checked before every release.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpframe._util.polars_plan import plan_sources
from dpframe.backends import Backend
from dpframe.provenance._sources import (
    expand_paths,
    file_digest,
)

__all__ = ["SourceBinding"]


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
    one?"): before every release, the list of files, each file's metadata, and the digest of
    each file's whole content, re-read from disk. Metadata alone is not enough: a same-size
    rewrite with its modification time put back (``os.utime``) keeps it. If the engine reads
    exactly the listed files and each still has the digest taken at protect, the bytes read
    — hence the ``n`` rows — are those counted at protect. The check reads file bytes, never
    parses a row, and runs before any budget is reserved; a refusal depends only on the
    files, which the data's steward controls and sees anyway. A rewrite *during* a running
    release (after this check) is the curator's to prevent.
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
        metadata, or other content (every file's digest is recomputed: a cost of about
        0.7 ms per MB, measured in ``docs/engines.md``)."""
        if self.lister is None:
            now = _stat_all(self.patterns)
        else:
            listed = self.lister()
            if listed is None:
                return True
            now = _stat_paths(listed)
        return now != self.files or _digests(now) != self.digests


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
