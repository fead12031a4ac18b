"""Parquet export and import of sealed release logs.

A release table's log (:mod:`dpframe.accounting.seals`) is JSON stored in the Parquet file's
key-value
metadata:

* pandas: ``DataFrame.to_parquet`` stores ``attrs`` as JSON under ``PANDAS_ATTRS`` and, through
  pyarrow, again under ``attributes`` in the ``pandas`` metadata; a release table's
  ``attrs["dpframe_log"]`` is its sealed log;
* Polars (and pandas, explicitly): ``table.dp.write_parquet(path)`` writes it under the key
  ``dpframe.log`` (pandas tables also carry the ``pandas`` metadata with its ``attributes``).

Only sealed release logs (``"kind": "dpframe.release"`` with a ``seal``) are read as logs.
A protected frame keeps a live budget handle in ``attrs["dpframe"]``, which is never a log, and
frames derived from it with pandas operations carry no release log, so their files are
refused (:class:`~dpframe.errors.LedgerError`, "no dpframe release log").

:func:`read_log` verifies by default (:func:`verify_release`): the values stored in the file
must match the seal's table digest, the log its digest (and, with ``key=``, its HMAC
signature), and every copy of the log a reader can see must be that log, with nothing else
beside it in pandas' ``attrs``; otherwise it raises :class:`~dpframe.errors.IntegrityError`.
A file that cannot be read as Parquet (missing, a directory, unreadable, truncated, not
Parquet) raises :class:`~dpframe.errors.ReleaseFileError`; read_log raises no other kind of
exception.

:func:`read_release` verifies the same way, on the Arrow table as stored, then returns the
table as a pandas or Polars release table: with the file's log when the frame matches its
seal (a file written from that library), else (the release spec's output, whose metadata no
frame carries) with the same log sealed anew to the frame, ``derived_from`` naming the file's
seal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

from dpframe._util.forking import check_polars_usable
from dpframe.accounting._log_schema import log_frame
from dpframe.accounting.ledger import LOG_VERSION
from dpframe.accounting.seals import (
    LEGACY_SCHEMES,
    RELEASE_ATTRS_KEY,
    attach_sealed,
    check_seal,
    release_log_of,
    sealed_document,
)
from dpframe.errors import (
    IntegrityError,
    LedgerError,
    ParameterError,
    ReleaseFileError,
    ReleaseWriteError,
)

__all__ = ["LOG_KEY", "Metadata", "ReleaseFile", "check_carriers", "check_footer", "find_log",
           "pandas_metadata_of", "read_log", "read_release", "read_release_file",
           "verify_release", "write_parquet"]

LOG_KEY = b"dpframe.log"
_PANDAS_KEY = b"PANDAS_ATTRS"
_PANDAS_META = b"pandas"


def _to_arrow(frame: Any) -> Any:
    import pyarrow as pa

    mod = type(frame).__module__.split(".")[0]
    if mod == "pandas":
        return pa.Table.from_pandas(frame)
    if type(frame).__name__ == "LazyFrame":
        frame = frame.collect()
    return frame.to_arrow()


def write_parquet(frame: pd.DataFrame | pl.DataFrame, path: str | os.PathLike[str],
                  document: dict[str, Any] | None = None) -> None:
    """Write a release table (pandas or Polars) to ``path`` with its sealed log in the
    key-value metadata under ``dpframe.log`` (a pandas frame's ``pandas`` metadata keeps
    pyarrow's copy of ``attrs``, which is that same log); ``dpf.write_parquet(table, path)``.

    ``document``: the log to write (default: the table's own sealed log). A frame that is
    not a release table is refused (:class:`~dpframe.errors.ParameterError`), never written
    without a log. Polars' own ``DataFrame.write_parquet`` writes no log (Polars frames carry
    no metadata), and neither do DuckDB's ``COPY`` or a Polars/DuckDB/Spark rewrite of a
    release file; pandas ``to_parquet`` (pyarrow) keeps it. The table must still match its
    log (:func:`~dpframe.accounting.seals.check_seal`): a release edited with pandas operations is
    refused (:class:`~dpframe.errors.IntegrityError`) instead of written as a file that
    fails verification."""
    import pyarrow.parquet as pq

    if document is None:
        document = release_log_of(frame)
        if document is None:
            raise ParameterError(
                "only release tables (what a .dp release, dpf.concat_releases or the "
                "dpf.*_release post-processing functions return) are written with a log; this "
                f"{type(frame).__name__} is not one (a frame made with the library's own "
                "operations carries no log: round, rename or sort a release with "
                "dpf.round_release, dpf.rename_release or dpf.sort_release, combine releases "
                "with dpf.concat_releases)"
            )
    where = _output_path(path)
    # a pandas copy keeps the stale log in attrs: refuse it here, not when the file is read
    check_seal(document, frame, where="the table")
    table = _to_arrow(frame)
    meta = dict(table.schema.metadata or {})
    meta[LOG_KEY] = json.dumps(document, allow_nan=False).encode()
    try:
        pq.write_table(table.replace_schema_metadata(meta), where)
    except OSError as exc:  # the disk, permissions, a path changed since the check
        raise ReleaseWriteError(
            f"could not write {where!r}: {exc.strerror or type(exc).__name__}; choose a path "
            "in a folder you can write (with room for the file)"
        ) from None


def _as_path(path: Any) -> str:
    """``path`` (str, bytes or os.PathLike) as a str; ParameterError for anything else."""
    try:
        where = os.fspath(path)
    except TypeError:
        raise ParameterError(f"path must be a str or os.PathLike, got {path!r}") from None
    return os.fsdecode(where) if isinstance(where, bytes) else where


def _output_path(path: Any) -> str:
    """``path`` as a file path that can be written: not a folder, in a folder that exists
    (:class:`~dpframe.errors.ParameterError` otherwise, before anything is written)."""
    where = _as_path(path)
    if not where or os.path.isdir(where) or where.endswith((os.sep, "/")):
        raise ParameterError(
            f"{where!r} is a folder; name the file to write inside it, e.g. "
            f"{os.path.join(where or '.', 'release.parquet')!r}")
    folder = os.path.dirname(where) or "."
    if not os.path.isdir(folder):
        raise ParameterError(
            f"the folder {folder!r} of {where!r} does not exist (or is not a folder); create "
            "it first (os.makedirs) or write elsewhere")
    return where


class ReleaseFile:
    """What :func:`read_release_file` read: ``metadata`` (the schema metadata as pyarrow
    shows it: from pyarrow's serialised schema ``ARROW:schema`` when the file has one),
    ``table`` (the Arrow table, or None), ``raw_metadata`` (the Parquet footer's key-value
    metadata as every Parquet reader sees it, ``ARROW:schema`` included) and ``column_paths``
    (the Parquet schema's top-level column names, in order)."""

    def __init__(self, metadata: Metadata, table: Any,
                 raw_metadata: dict[bytes, bytes], column_paths: list[str],
                 footer: Any = None) -> None:
        self.metadata = metadata
        self.table = table
        self.raw_metadata = raw_metadata
        self.column_paths = column_paths
        self.footer = footer
        #: the footer's ``created_by`` (decoded once by :func:`read_release_file`)
        self.created_by: str | None = None


def read_release_file(path: str | os.PathLike[str], *, values: bool = True) -> ReleaseFile:
    """Read a Parquet file's footer (and with ``values=True`` its table); any failure to read
    it (missing, a directory, no permission, not Parquet, truncated, damaged) is a
    :class:`~dpframe.errors.ReleaseFileError` naming the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = os.fsdecode(os.fspath(path))
    try:
        if os.path.isdir(where):
            raise IsADirectoryError(f"{where} is a directory")
        parquet = pq.ParquetFile(where)  # the footer is read once (it holds the log)
        footer = parquet.metadata
        schema = parquet.schema_arrow
        table = parquet.read() if values else None
        paths: list[str] = []
        for i in range(footer.num_columns):
            top = footer.schema.column(i).path.split(".")[0]
            if not paths or paths[-1] != top:
                paths.append(top)
        raw = dict(footer.metadata or {})
        created_by = footer.created_by  # decoded here: a damaged one is a damaged file
    except FileNotFoundError as exc:
        raise ReleaseFileError(f"{where!r}: no such file") from exc
    except PermissionError as exc:
        raise ReleaseFileError(f"{where!r}: permission denied") from exc
    except (OSError, pa.ArrowException, ValueError, TypeError) as exc:
        raise ReleaseFileError(
            f"{where!r} could not be read as a Parquet file ({type(exc).__name__}: "
            f"{_short(exc)}); it is not a release file, or it is truncated or damaged"
        ) from exc
    out = ReleaseFile(Metadata(schema.metadata), table, raw, paths, footer)
    out.created_by = created_by
    return out


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


class Metadata(dict[bytes, bytes]):
    """A file's schema metadata that parses each JSON value once (a log can be tens of MB,
    and pandas files hold it twice)."""

    def __init__(self, raw: dict[bytes, bytes] | None = None) -> None:
        super().__init__(raw or {})
        self._parsed: dict[bytes, Any] = {}

    def json(self, key: bytes, where: str, name: str) -> Any:
        """The JSON value under ``key``, parsed once; :class:`IntegrityError` if invalid."""
        if key not in self._parsed:
            self._parsed[key] = _json(self[key], where, name)
        return self._parsed[key]


def _as_metadata(meta: dict[bytes, bytes] | None) -> Metadata:
    return meta if isinstance(meta, Metadata) else Metadata(meta)


def _carriers(meta: Metadata, where: str) -> Iterator[tuple[str, Any]]:
    """Every place of the metadata a reader can take a log (or pandas ``attrs``) from, parsed
    lazily in this order: ``("dpframe.log", doc)``, ``("PANDAS_ATTRS", attrs)``,
    ``("pandas attributes", attrs)``."""
    if LOG_KEY in meta:
        yield "dpframe.log", meta.json(LOG_KEY, where, "dpframe.log")
    if _PANDAS_KEY in meta:
        yield "PANDAS_ATTRS", meta.json(_PANDAS_KEY, where, "PANDAS_ATTRS")
    if _PANDAS_META in meta:
        pandas_meta = meta.json(_PANDAS_META, where, "pandas")
        if isinstance(pandas_meta, dict) and "attributes" in pandas_meta:
            yield "pandas attributes", pandas_meta["attributes"]


def find_log(metadata: dict[bytes, bytes] | None, where: str, *,
             created_by: str | None = None) -> dict[str, Any]:
    """The release log document in a Parquet file's key-value metadata (not verified).

    The first of the places a log can be stored: ``dpframe.log``, ``PANDAS_ATTRS``, the
    ``pandas`` metadata's ``attributes`` (that they all hold the same log is checked when the
    file is verified, :func:`check_carriers`). Raises :class:`LedgerError` if there is none
    and :class:`IntegrityError` if one of them is not valid JSON."""
    for name, value in _carriers(_as_metadata(metadata), where):
        doc = value if name == "dpframe.log" else (
            value.get(RELEASE_ATTRS_KEY) if isinstance(value, dict) else None)
        if isinstance(doc, dict) and "entries" in doc:
            return doc
    raise LedgerError(_no_log_message(where, created_by))


def _no_log_message(where: str, created_by: str | None = None) -> str:
    """Why a Parquet file has no log, and how to write one that has it."""
    writer = (created_by or "").lower()
    tool = next((t for t in ("polars", "duckdb", "spark", "fastparquet") if t in writer), None)
    head = (f"{where!r} carries no dpframe release log (no log in this file, so nothing in it "
            "can be verified)")
    if tool == "polars":
        head += (". It was written by Polars' own DataFrame.write_parquet, which writes no "
                 "log (Polars frames carry no metadata)")
    elif tool is not None:
        head += f". It was written by {tool}, which does not keep a release table's log"
    return (head + ". Write release tables with dpf.write_parquet(table, path) (pandas or "
            "Polars; also table.dp.write_parquet(path), or pandas table.to_parquet(path)); a "
            "release file rewritten by another tool has lost its log: verify the original file")


def check_carriers(metadata: dict[bytes, bytes] | None, document: dict[str, Any],
                   where: str) -> None:
    """Every copy of the log a reader can see is ``document``, and pandas' ``attrs`` (as
    ``PANDAS_ATTRS`` and as the ``pandas`` metadata's ``attributes``, which
    ``pd.read_parquet`` and pyarrow's ``to_pandas`` show as ``DataFrame.attrs``) hold
    nothing but it; otherwise :class:`IntegrityError`. The seal covers the rest of the
    metadata (:func:`dpframe.accounting.seals.table_digest`)."""
    for name, value in _carriers(_as_metadata(metadata), where):
        if name == "dpframe.log":
            if value != document:
                raise IntegrityError(f"{where!r} carries different dpframe logs; it was altered")
            continue
        if not isinstance(value, dict):
            raise IntegrityError(f"{where!r}: the pandas attrs ({name}) are not a JSON object")
        extra = sorted(str(k) for k in value if k != RELEASE_ATTRS_KEY)
        if extra:
            raise IntegrityError(
                f"{where!r}: pandas attrs ({name}) hold {extra} beside the release log; the "
                "seal does not cover them, yet pandas shows them as DataFrame.attrs. Write the "
                "release table again without other attrs"
            )
        if RELEASE_ATTRS_KEY in value and value[RELEASE_ATTRS_KEY] != document:
            raise IntegrityError(
                f"{where!r}: the copy of the log in the pandas attrs ({name}) differs from the "
                "sealed log; it was altered (pandas readers would show the altered copy)"
            )


def _check_legacy_pandas(metadata: dict[bytes, bytes], where: str) -> None:
    """For seals of dpframe-release-v1/v2, which do not cover the pandas metadata: refuse
    pandas metadata that shows a column under another name than its stored one."""
    meta = _as_metadata(metadata)
    if _PANDAS_META not in meta:
        return
    pandas_meta = meta.json(_PANDAS_META, where, "pandas")
    columns = pandas_meta.get("columns") if isinstance(pandas_meta, dict) else None
    index = pandas_meta.get("index_columns") if isinstance(pandas_meta, dict) else None
    index_fields = {c for c in (index if isinstance(index, list) else []) if isinstance(c, str)}
    for col in columns if isinstance(columns, list) else [None]:
        if not isinstance(col, dict):
            raise IntegrityError(f"{where!r}: the pandas metadata is malformed")
        field = col.get("field_name")
        if field in index_fields:
            continue
        if col.get("name") != field:
            raise IntegrityError(
                f"{where!r}: the pandas metadata shows column {field!r} as "
                f"{col.get('name')!r}; it was altered (this file's seal, an older scheme, does "
                "not cover the pandas metadata)"
            )


def check_footer(file: ReleaseFile, where: str) -> None:
    """The two copies of a file's metadata agree: the Parquet footer's key-value metadata
    (what DuckDB, fastparquet and Parquet tools show) holds exactly the keys and values
    pyarrow shows (taken from its serialised schema), and the Parquet schema's column names
    are the table's; otherwise :class:`IntegrityError`. The seal covers pyarrow's copy."""
    raw = {k: v for k, v in file.raw_metadata.items() if k != b"ARROW:schema"}
    if raw != file.metadata:
        raise IntegrityError(
            f"{where!r}: the Parquet key-value metadata (what DuckDB and other Parquet readers "
            "show) differs from pyarrow's copy of it (ARROW:schema); the file was altered"
        )
    if file.table is not None and file.column_paths != list(file.table.column_names):
        raise IntegrityError(
            f"{where!r}: the Parquet schema's column names differ from pyarrow's "
            "(ARROW:schema); the file was altered"
        )
    if file.table is not None and file.footer is not None:
        import pyarrow as pa

        try:
            _check_statistics(file.footer, file.table, where)
        except (ValueError, TypeError, pa.ArrowException) as exc:  # e.g. undecodable bytes
            raise IntegrityError(
                f"{where!r}: the Parquet statistics in the footer cannot be read "
                f"({type(exc).__name__}); the file was altered or damaged"
            ) from exc


def _check_statistics(footer: Any, table: Any, where: str) -> None:
    """Each row group's column statistics in the footer (which query engines such as DuckDB
    show and use to skip row groups) agree with the values: null count, and min/max for
    numeric, boolean and string columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.types
    start = 0
    names = list(table.column_names)
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        rows = group.num_rows
        for c in range(group.num_columns):
            chunk = group.column(c)
            top = chunk.path_in_schema.split(".")[0]
            if chunk.path_in_schema != top or top not in names:
                continue  # nested columns: not in release tables
            stats = chunk.statistics
            if stats is None:
                continue
            values = table.column(names.index(top)).slice(start, rows)
            if pa.types.is_dictionary(values.type):
                values = pc.cast(values, values.type.value_type)
            bad = stats.has_null_count and stats.null_count != values.null_count
            kind = values.type
            if (not bad and stats.has_min_max and
                    (t.is_integer(kind) or t.is_floating(kind) or t.is_boolean(kind)
                     or t.is_string(kind) or t.is_large_string(kind))):
                valid = pc.drop_null(values)
                if t.is_floating(kind):
                    valid = valid.filter(pc.invert(pc.is_nan(valid)))
                if len(valid):
                    low, high = pc.min_max(valid).values()
                    bad = stats.min != low.as_py() or stats.max != high.as_py()
            if bad:
                raise IntegrityError(
                    f"{where!r}: the Parquet statistics of column {top!r} (row group {g}) do "
                    "not match its values (query engines read them); the file was altered"
                )
        start += rows


def verify_release(document: dict[str, Any], table: Any, metadata: dict[bytes, bytes] | None,
                   *, key: bytes | str | None = None, where: str = "the file",
                   file: ReleaseFile | None = None) -> dict[str, Any]:
    """Verify a release file: :func:`check_footer` (when ``file``, what
    :func:`read_release_file` read, is given), :func:`check_carriers`, then the seal against
    the file's table (:func:`dpframe.accounting.seals.check_seal`; for the legacy schemes, which do
    not cover the pandas metadata, its column labels are checked against the stored names).
    Returns :func:`~dpframe.accounting.seals.check_seal`'s status dict; raises
    :class:`IntegrityError`."""
    if file is not None:
        check_footer(file, where)
    meta = _as_metadata(metadata)
    check_carriers(meta, document, where)
    status = check_seal(document, table, key=key, where=where,
                        pandas_metadata=pandas_metadata_of(meta, where))
    seal = document.get("seal")
    if isinstance(seal, dict) and seal.get("scheme") in LEGACY_SCHEMES:
        _check_legacy_pandas(meta, where)
    return status


def pandas_metadata_of(metadata: dict[bytes, bytes] | None, where: str) -> Any:
    """The file's ``pandas`` metadata, parsed (once, for a :class:`Metadata`), or None."""
    meta = _as_metadata(metadata)
    return meta.json(_PANDAS_META, where, "pandas") if _PANDAS_META in meta else None


def _json(raw: bytes, where: str, name: str = "dpframe log") -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise IntegrityError(f"{where!r}: the {name} metadata is not valid JSON") from exc


def _verified_log(where: str, *, checking: bool, key: bytes | str | None
                  ) -> tuple[dict[str, Any], ReleaseFile]:
    """The file read once, its log found and (``checking``) verified on the bytes as read
    (:func:`verify_release`): the log and the file, its table included when checked."""
    file = read_release_file(where, values=checking)
    doc = find_log(file.metadata, where, created_by=file.created_by)
    version = doc.get("version", 0)
    if not isinstance(version, int) or version > LOG_VERSION:
        raise LedgerError(
            f"log version {version!r} is newer than this dpframe understands "
            f"({LOG_VERSION}); upgrade dpframe"
        )
    if checking:
        verify_release(doc, file.table, file.metadata, key=key, where=where, file=file)
    return doc, file


def _check_key(key: Any) -> None:
    if key is not None and not isinstance(key, bytes | str):
        raise ParameterError("key must be the steward's key as bytes or str")


def read_log(
    path: str | os.PathLike[str],
    *,
    as_frame: str | None = None,
    verify: bool = True,
    key: bytes | str | None = None,
) -> Any:
    """The sealed release log stored in a Parquet file, verified against the file's values.

    ``verify=True`` (default): raise :class:`~dpframe.errors.IntegrityError` unless the log
    is a sealed release log whose table digest matches the values (and the metadata readers
    show) in the file, whose digest matches the log, and every copy of which in the file is
    the same (:func:`verify_release`); with ``key=`` (the steward's HMAC key) the signature
    must match too. ``verify=False`` reads the log without any check (for forensics).

    Returns the JSON document (a dict), or with ``as_frame="pandas"``/``"polars"`` its entries
    as a frame. Raises :class:`~dpframe.errors.LedgerError` if the file carries no release log
    and :class:`~dpframe.errors.ReleaseFileError` if it cannot be read as Parquet; only
    :class:`~dpframe.errors.DPFrameError` subclasses.
    """
    if as_frame not in (None, "pandas", "polars"):
        raise ParameterError(f"as_frame must be None, 'pandas' or 'polars', got {as_frame!r}")
    _check_key(key)
    where = _as_path(path)
    doc, _ = _verified_log(where, checking=verify or key is not None, key=key)
    if as_frame is None:
        return doc

    try:
        return log_frame(doc, as_frame)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise IntegrityError(
            f"{where!r}: the log's entries are malformed and cannot be shown as a frame "
            f"({type(exc).__name__})"
        ) from exc


def read_release(path: str | os.PathLike[str], *, as_frame: str = "pandas",
                 key: bytes | str | None = None) -> Any:
    """A release file read back as a **release table**: verified like :func:`read_log` (on the
    Arrow table as stored: the bytes in the file), then returned as a pandas
    (``as_frame="pandas"``) or Polars (``"polars"``) DataFrame that carries a sealed log, so
    the ``dpf.*_release`` post-processing functions, ``dpf.concat_releases`` and
    ``dpf.write_parquet`` take it like the table the release returned (and an edit of it
    after reading fails verification). A steward replays a post-processed file's recorded
    steps on the original files this way (docs/ledger.md).

    * A file written from a frame (``dpf.write_parquet``, pandas ``to_parquet``) is read as
      the library that wrote it and carries the file's log unchanged (its seal matches the
      frame in memory: a pandas file's seal covers the pandas metadata); the other library is
      refused (:class:`~dpframe.errors.IntegrityError`, naming the one to use).
    * A file whose table matches neither library's frame (``dpframe release`` writes an
      Arrow table with the spec's text beside the log, metadata no frame carries): the frame
      read back is sealed anew (:func:`_resealed`) with the same log, and its
      ``derived_from`` names the file's seal. A signed file needs ``key=`` here, which
      verifies the file's signature and re-signs the frame (a signature is never silently
      dropped; :class:`~dpframe.errors.ParameterError` without it).

    Otherwise raises what :func:`read_log` raises (and, for a Polars frame in a child forked
    after Polars ran, :class:`~dpframe.errors.UnsupportedProcessError`)."""

    if as_frame not in ("pandas", "polars"):
        raise ParameterError(f"as_frame must be 'pandas' or 'polars', got {as_frame!r}")
    _check_key(key)
    where = _as_path(path)
    doc, file = _verified_log(where, checking=True, key=key)
    frame = _frame_of(file.table, as_frame)
    if not _seal_matches(doc, frame):
        other = "polars" if as_frame == "pandas" else "pandas"
        if _seal_matches(doc, _frame_of(file.table, other)):
            raise IntegrityError(
                f"{where!r} does not read back as a {as_frame} release table with the same "
                f"sealed content (it was written from another library); read it with "
                f"as_frame={other!r}"
            )
        doc = _resealed(doc, frame, key, where)
    attach_sealed(frame, doc)
    return frame


def _frame_of(table: Any, as_frame: str) -> Any:
    """The Arrow table as a pandas or Polars DataFrame (Polars only where it can run:
    :class:`~dpframe.errors.UnsupportedProcessError` in a child forked after Polars ran,
    where it would hang)."""
    if as_frame == "pandas":
        return table.to_pandas()
    check_polars_usable()
    import polars as pl

    return pl.from_arrow(table)


def _seal_matches(document: dict[str, Any], frame: Any) -> bool:
    """The (verified) log's seal matches ``frame`` as it is in memory."""
    try:
        check_seal(document, frame)
    except IntegrityError:
        return False
    return True


def _resealed(document: dict[str, Any], frame: Any, key: bytes | str | None,
              where: str) -> dict[str, Any]:
    """``document`` (verified against the file) sealed anew to ``frame``, the file's table
    converted to a frame: the same log, release ids and signing state
    (:func:`~dpframe.accounting.seals.sealed_document`), with ``derived_from`` naming the
    file's seal (``table`` and ``digest``) unless the log already names the releases it was
    derived from, so post-processing the frame records the file it came from. A signed file
    is re-signed with ``key``; without one it is refused
    (:class:`~dpframe.errors.ParameterError`) rather than returned unsigned."""
    seal = document["seal"]
    if "hmac" in seal and key is None:
        raise ParameterError(
            f"{where!r} is signed, and the table read back cannot carry the file's seal (the "
            "file holds metadata the frame does not), so it is sealed anew: pass key= (the "
            "steward's key) to verify the signature and sign the table read back (without it "
            "the signature would be dropped)"
        )
    base = dict(document)
    if not isinstance(base.get("derived_from"), list):
        base["derived_from"] = [{"table": seal.get("table"), "digest": seal.get("digest")}]
    return sealed_document(frame, base, release_id=list(document.get("release_ids") or []),
                           key=key)
