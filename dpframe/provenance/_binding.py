"""The files a lazy source reads, bound by their content (:class:`SourceBinding`), recorded
at protect time and checked before every release.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpframe._util.polars_plan import all_nodes, plan_sources
from dpframe.backends import Backend
from dpframe.provenance import _digests
from dpframe.provenance._digests import file_digest, ranges_digest
from dpframe.provenance._parquet_layout import ParquetLayout, read_layout
from dpframe.provenance._sources import expand_paths

__all__ = ["ContentCheck", "FileContent", "SourceBinding", "bind_file", "file_unchanged",
           "source_columns"]


@dataclass(frozen=True, eq=False)
class FileContent:
    """What binds one file's content: digests of ``algorithm`` (the
    :data:`~dpframe.provenance._digests.DIGEST` when it was bound, BLAKE3 or SHA-256; every
    later check re-hashes with this one). ``layout`` None: ``digests[None]`` is the digest of
    every byte. A Parquet file with a plain layout
    (:func:`~dpframe.provenance._parquet_layout.read_layout`): ``digests[None]`` is the digest
    of its rest (magics, footer, page indexes, bloom filters, any byte in no column chunk) and
    ``digests[c]`` that of the chunks of top-level column ``c``, every row group's, in file
    order. Either way every byte of the file is under exactly one digest."""

    layout: ParquetLayout | None
    digests: dict[str | None, bytes]
    algorithm: str


def bind_file(path: str) -> FileContent | None:
    """The :class:`FileContent` of the file at ``path`` now (None: it cannot be read), with
    the :data:`~dpframe.provenance._digests.DIGEST` chosen at import."""
    algorithm = _digests.DIGEST
    found = read_layout(path, algorithm)
    if found is None:
        whole = file_digest(path, algorithm)
        return None if whole is None else FileContent(None, {None: whole}, algorithm)
    layout, rest = found
    digests: dict[str | None, bytes] = {None: rest}
    for column, ranges in layout.columns.items():
        digest = ranges_digest(path, ranges, algorithm)
        if digest is None:
            return None
        digests[column] = digest
    return FileContent(layout, digests, algorithm)


def file_unchanged(path: str, bound: FileContent | None,
                   columns: frozenset[str] | None = None) -> bool:
    """Whether the file at ``path`` still has the content ``bound`` at protect, in the parts
    a release reading ``columns`` can read (None: all of them): a file hashed whole is
    re-hashed whole; a Parquet file's rest is re-hashed (so its footer, hence every chunk's
    byte range, is the protected one), then the chunks of each column in ``columns``, each
    with the algorithm ``bound`` records. Stops at the first part that differs."""
    if bound is None:
        return file_digest(path, _digests.DIGEST) is None
    algorithm = bound.algorithm
    if bound.layout is None:
        return file_digest(path, algorithm) == bound.digests[None]
    if ranges_digest(path, bound.layout.rest, algorithm) != bound.digests[None]:
        return False
    if columns is not None and not columns <= bound.layout.columns.keys():
        columns = None  # a column the layout does not name (e.g. a partition's): every chunk
    for column, ranges in bound.layout.columns.items():
        if columns is not None and column not in columns:
            continue
        if ranges_digest(path, ranges, algorithm) != bound.digests[column]:
            return False
    return True


@dataclass(eq=False)
class SourceBinding:
    """The files a lazy source reads, bound by their content: path → (size, mtime, device,
    inode) and path → :class:`FileContent` (BLAKE3 or SHA-256 digests covering every byte,
    :mod:`~dpframe.provenance._digests`), recorded
    at protect time and checked before every release. ``recount``: the source is not made of
    files dpframe can identify, so its row count is re-read instead. ``lister``: for engines
    that fix their file list in the plan (Spark), asks the engine for the list it will read
    now (None: it no longer can), compared with the recorded one; ``patterns`` (globs and
    folders expanded) are used otherwise. ``by_name``: the protected plan is a bare Polars
    scan of Parquet files, so a column of the protected frame is the files' column of that
    name (a release that names the columns it reads then hashes only theirs).

    What is checked, and when (``docs/engines.md``, "Is the source still the protected
    one?"): at every release, the list of files, each file's metadata, and the digests of
    the content the release can read, re-read from disk. Metadata alone is not enough: a
    same-size rewrite with its modification time put back (``os.utime``) keeps it. A file
    other than Parquet is hashed whole. A Parquet file is hashed in parts
    (:class:`FileContent`): always its rest (footer included), then the column chunks of
    every column the release can read (all of them unless the release names its columns
    and ``by_name`` holds). The engine reads a column's values from that column's chunks
    only, through the footer's byte ranges, which the rest's digest fixes; so if every file
    listed is unchanged in those parts, the bytes the release's reader can use — hence the
    ``n`` rows and the values it aggregates — are those bound at protect. A rewrite of a
    column this release does not read cannot reach its answer; the first release that
    reads that column is refused. The check reads file bytes and the footer's structure,
    never a row; a refusal depends only on the files, which the data's steward controls and
    sees anyway.

    :meth:`changed` runs the whole check at once (at protect). A release uses
    :meth:`begin_check` instead: the list and metadata are compared at once (before any
    budget is reserved), and the digests are computed in a thread *while the engine reads*;
    the release joins that thread after the read and before any noise is drawn or budget
    spent, and a changed file is then refused with its reservation cancelled and the read's
    result dropped unlooked-at (:class:`ContentCheck`). The digests read every byte they
    cover at some time after the release began, so a file rewritten before the release is
    caught exactly as by a check before the read; a rewrite *during* a running release may
    or may not be caught (as before: the curator's to prevent).
    """

    files: dict[str, tuple[int, int, int, int]]
    patterns: tuple[str, ...]
    recount: bool
    lister: Callable[[], tuple[str, ...] | None] | None = field(default=None, repr=False)
    digests: dict[str, FileContent | None] = field(default_factory=dict, repr=False)
    by_name: bool = False

    def __post_init__(self) -> None:
        if not self.digests:
            self.digests = {path: bind_file(path) if st[0] >= 0 else None
                            for path, st in self.files.items()}

    @classmethod
    def of(cls, lazy: Any) -> SourceBinding:
        paths, other = plan_sources(lazy)
        patterns = tuple(paths)
        files = _stat_all(patterns)
        # a remote or URI source (s3://, https://, file://) or a file dpframe cannot stat
        # cannot be bound by identity: its row count is re-read before every release instead
        unbound = any(not _is_local(p) for p in patterns) or any(
            st[0] < 0 for st in files.values())
        return cls(files, patterns, other or unbound, by_name=_bare_parquet_scan(lazy))

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
        metadata, or other content (every digest is recomputed, every byte read: about
        0.3 ms of CPU per MB with BLAKE3 and 0.75 with SHA-256 on the shared test machine,
        the read's copy included, measured in ``docs/engines.md``)."""
        return self.begin_check().changed()

    def begin_check(self, columns: Collection[str] | None = None) -> ContentCheck:
        """:meth:`changed`, split for a release: the file list and metadata are compared now
        (a difference is final at once, nothing hashed), and the digests are started in a
        background thread; :meth:`ContentCheck.changed` waits for them. ``columns``: the
        columns of the protected frame the release can read (None: all); used only when
        ``by_name`` holds, else every column's chunks are hashed."""
        if self.lister is None:
            now = _stat_all(self.patterns)
        else:
            listed = self.lister()
            if listed is None:
                return ContentCheck(None)
            now = _stat_paths(listed)
        if now != self.files:
            return ContentCheck(None)
        read = frozenset(columns) if columns is not None and self.by_name else None
        return ContentCheck(now, self.digests, read)


class ContentCheck:
    """The content check of a binding's files (:func:`file_unchanged` on each, restricted to
    ``columns`` if given), run in a daemon thread started at construction (the hash releases
    the GIL while it hashes each 1 MiB block, so the digests run beside an engine's read on
    another core), its result read by :meth:`changed`. ``files`` None: the list or
    metadata already differ (changed, no thread).

    Soundness of the overlap (``docs/engines.md``, "Is the source still the protected
    one?"): the thread reads each part it checks from its first byte to its last after the
    release started, so a part that differed from the protected bytes when the release
    started is seen different unless it is written back in the meantime — the same race a
    check before the read leaves open. Whatever the engine read meanwhile is dropped when
    :meth:`changed` is true: the caller raises :class:`~dpframe.errors.SourceChangedError`
    with its reservation cancelled, whatever the read returned or raised, so the outcome
    depends on whether the file's bytes changed (the steward's own action), not on any value
    in them. A thread that fails (it cannot: reading turns an ``OSError`` into a mismatch)
    counts as a change. No files (the plan of dpframe's in-memory copy): nothing to hash, so
    no thread (starting one cost a release of 1,000 rows 35 µs of CPU on an idle machine and
    several times that on a loaded one)."""

    def __init__(self, files: Mapping[str, tuple[int, int, int, int]] | None,
                 expected: Mapping[str, FileContent | None] | None = None,
                 columns: frozenset[str] | None = None) -> None:
        self._decided = files is None or expected is None
        self._same = False
        self._thread: threading.Thread | None = None
        if files is None or expected is None:  # (decided: the list or metadata differ)
            return
        if not files:
            self._same = not expected  # (the digests of no files)
            return
        self._thread = threading.Thread(target=self._digest,
                                        args=(list(files), expected, columns),
                                        name="dpframe-content-check", daemon=True)
        self._thread.start()

    def _digest(self, paths: list[str], expected: Mapping[str, FileContent | None],
                columns: frozenset[str] | None) -> None:
        try:
            self._same = all(file_unchanged(p, expected.get(p), columns) for p in paths)
        except BaseException:  # counted as a change (self._same stays False)
            self._same = False

    @property
    def decided(self) -> bool:
        """Whether the outcome is known without waiting (the list or metadata differ)."""
        return self._decided

    def changed(self) -> bool:
        """Wait for the digests; whether any file differs from the protected one."""
        if self._decided:
            return True
        if self._thread is not None:
            self._thread.join()
        return not self._same


def source_columns(data: Any, read: Collection[str]) -> frozenset[str] | None:
    """The columns of the protected scan under ``data`` (a Polars plan: the protected frame's
    scan with the verified steps compiled on it, as a release reads it) that a release reading
    the columns ``read`` of ``data`` can use — for :meth:`SourceBinding.begin_check`. Asked of
    Polars itself: the scan's projection once Polars pushes the projection of ``read`` (and a
    row count, which keeps every filter) down the plan, the projection Polars' reader then
    reads (and needs: it reads nothing else). None — every column checked — when the scan is
    not projected, when the plan holds more than one scan or one with a predicate, or when the
    plan cannot be read."""
    import polars as pl

    try:
        flags = pl.QueryOptFlags.none()
        flags.projection_pushdown = True
        rows = pl.len().alias("__dpframe_rows_" + "_".join(sorted(read)))
        nt = data.select(*[pl.col(c) for c in read], rows)._ldf.with_optimizations(
            flags._pyoptflags).visit()
        scans = []
        stack = [nt.get_node()]
        while stack:
            nt.set_node(stack.pop())
            node = nt.view_current_node()
            if type(node).__name__ == "Scan":
                scans.append(node)
            stack.extend(nt.get_inputs())
        if len(scans) != 1 or scans[0].predicate is not None:
            return None
        projected = scans[0].file_options.with_columns
    except Exception:
        return None
    return None if projected is None else frozenset(str(c) for c in projected)


def _bare_parquet_scan(lazy: Any) -> bool:
    """Whether ``lazy``'s plan is one Parquet scan and nothing else (no predicate, no other
    node): its columns are then the files' columns of the same names. Anything else (a
    derivation, a rename, a filter reading other columns, another format) is False: every
    column's chunks are hashed."""
    try:
        nodes = [node for _nt, node in all_nodes(lazy)]
    except Exception:
        return False
    if len(nodes) != 1 or type(nodes[0]).__name__ != "Scan":
        return False
    scan = nodes[0]
    try:  # a column mapping (Iceberg field ids) or deletion files: not a plain scan by name
        options = scan.file_options
        plain = options.column_mapping is None and options.deletion_files is None
    except Exception:
        return False
    return plain and scan.predicate is None and bool(scan.scan_type) and \
        str(scan.scan_type[0]) == "parquet"


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
