"""Release tables and their sealed logs: which log a released table carries, and how that log
is bound to the table's values (issue 11).

A release table is the frame a ``.dp`` release returns (``release()``, a group-by, ``cov``,
``describe`` ...). It carries a **sealed log**: the log document of the ledger it was drawn
from, as of its release, plus a ``seal``::

    {"version", "kind": "dpframe.release", "ledger_id", "release_ids": [...], "budget",
     "entries": [...], "chain": {...} (durable ledgers), "seal": {"scheme", "table", "digest",
     "hmac" (only when signed)}}

* ``seal.table`` is the SHA-256 of the table's canonical content (:func:`table_digest`, hashed
  column by column from whole Arrow columns, :func:`_columnar_digest`): every column's name,
  type family and values in order, as Arrow sees them when the table is written to Parquet,
  and everything else a reader of the file shows apart from the log: field metadata, other
  schema metadata keys, and the ``pandas`` metadata (labels, types, the index: as columns or
  the range it is stored as), without its ``attributes`` copy of the log;
* ``seal.digest`` is the SHA-256 of ``"dpframe-release-v3" ‖ canonical JSON of the document
  without "seal", "entries" and "keys" ‖ the entries chain ‖ the keys chain ‖ seal.table``
  (:func:`_message`; the chains of :mod:`dpframe.accounting._log_entries` bind every entry and key
  list,
  and a ledger snapshot carries them, so sealing is O(1) in the ledger's history): changing a
  value, a column name, the index, or anything in the log (an ε, a scale, an entry) changes
  it. Files sealed with ``dpframe-release-v2``/``-v1`` (the whole log hashed at each seal; the
  table digest without the pandas metadata) are still verified as they were sealed;
* ``seal.hmac`` (optional, :func:`sign_release`) is HMAC-SHA256 of the same message under a key
  the data steward holds.

**What the seal does and does not prove.** Without a key, the digest detects accidental and
naive edits (values edited in a spreadsheet, an ε divided by 10 in the metadata, a table
concatenated with another): anyone can recompute a SHA-256, so someone who deliberately edits
values *and* recomputes the digest is not detected. With a key, forging a release needs the key.

Where the log lives:

* pandas: in ``attrs`` under :data:`RELEASE_ATTRS_KEY` (``DataFrame.to_parquet`` writes
  ``attrs`` into the file's key-value metadata). The value is a :class:`SealedLog`, a dict whose
  equality with any other sealed log is True: pandas keeps ``attrs`` through ``pd.concat`` only
  when all inputs' attrs compare equal, so a concatenation of release tables keeps the *first*
  table's log, whose digest then no longer matches the values (``read_log`` raises
  :class:`~dpframe.errors.IntegrityError`) instead of silently writing a file with no log. Use
  :func:`dpframe.accounting._release_tables.concat_releases` to build a combined table with a valid
  seal, and
  the post-processing functions of :mod:`dpframe.accounting._release_tables` (round, rename, sort),
  which
  record their step in the log the seal covers.
* Polars: remembered by object identity (Polars frames carry no metadata);
  ``table.dp.write_parquet(path)`` writes it. ``pl.concat`` gives a new frame with no log, which
  ``dp.write_parquet`` refuses to write.

The pipeline calls :func:`attach_release_log` once per release table; everything that reads a
table's log goes through :func:`release_log_of`.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import hmac
import json
import math
import threading
from typing import Any

from dpframe._util.forking import check_polars_usable
from dpframe._util.identity import IdentityMap
from dpframe._util.tables import ReleaseTableT, is_pandas_table, is_polars_table
from dpframe.accounting._log_entries import canonical_json, detached, entries_digest, keys_digest
from dpframe.accounting._log_snapshot import (
    LAZY_PARTS,
    LogDocument,
    add_materializing_readers,
    resolved,
)
from dpframe.errors import IntegrityError, ParameterError

__all__ = [
    "LEGACY_SCHEMES",
    "RELEASE_ATTRS_KEY",
    "RELEASE_KIND",
    "SEAL_SCHEME",
    "SealedLog",
    "attach_release_log",
    "attach_sealed",
    "check_seal",
    "is_pandas_table",
    "release_log_of",
    "sealed_document",
    "sign_release",
    "table_digest",
]

RELEASE_ATTRS_KEY = "dpframe_log"
RELEASE_KIND = "dpframe.release"
SEAL_SCHEME = "dpframe-release-v3"
_SCHEME_V2 = "dpframe-release-v2"
_SCHEME_V1 = "dpframe-release-v1"
_SCHEMES = (SEAL_SCHEME, _SCHEME_V2, _SCHEME_V1)
#: schemes whose table digest does not cover the pandas metadata or other metadata keys
LEGACY_SCHEMES = (_SCHEME_V2, _SCHEME_V1)

_polars_logs: IdentityMap[Any] = IdentityMap()  # a sealed log, or a _PendingSeal


class SealedLog(dict[str, Any]):
    """The sealed log a pandas release table keeps in ``attrs`` (a plain dict when written).

    ``a == b`` is True for any two sealed logs, so that pandas' metadata propagation keeps a log
    through ``pd.concat`` / ``merge`` of release tables (it drops attrs that differ); the kept
    log then fails verification against the combined values. Compared with anything else it is
    an ordinary dict."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SealedLog):
            return True
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None


# -- canonical content -------------------------------------------------------------------------
def _value(v: Any) -> Any:
    """A JSON-safe, type-tagged form of one cell (floats exactly, via their hex form)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return ["b", v]
    if isinstance(v, int):
        return ["i", str(v)]
    if isinstance(v, float):
        return ["f", v.hex() if math.isfinite(v) else repr(v)]
    if isinstance(v, str):
        return ["s", v]
    if isinstance(v, bytes):
        return ["x", v.hex()]
    if isinstance(v, dict):
        return ["d", [[str(k), _value(x)] for k, x in v.items()]]
    if isinstance(v, list | tuple):
        return ["l", [_value(x) for x in v]]
    return [type(v).__name__, str(v)]


def _arrow_of(frame: Any) -> Any:
    """The Arrow table that writing ``frame`` to Parquet stores (pandas: index as pandas'
    ``to_parquet`` stores it)."""
    import pyarrow as pa

    if isinstance(frame, pa.Table):
        return frame
    if is_pandas_table(frame):
        if frame.attrs:  # pyarrow would serialise attrs (a whole log) into its metadata
            frame = frame.copy(deep=False)
            frame.attrs = {}
        return pa.Table.from_pandas(frame)
    check_polars_usable()  # a Polars table: its export would hang in a fork child
    if type(frame).__name__ == "LazyFrame":
        frame = frame.collect()
    return frame.to_arrow()


def table_digest(frame: Any, scheme: str | None = None, *,
                 pandas_metadata: Any = None) -> str:
    """SHA-256 (hex) of a table's canonical content, equal for a table in memory and the same
    table read back from its Parquet file (``pyarrow.parquet.read_table``). ``scheme``: the
    seal scheme whose canonical form to use (default: the current one, :data:`SEAL_SCHEME`);
    files sealed with an older scheme are checked with the form they were sealed with.

    ``dpframe-release-v3`` covers everything a reader of the file shows apart from the log
    itself (:func:`_columnar_digest`): column names, types (by family) and values in order,
    each field's Arrow metadata, every schema metadata key other than the log's carriers, and
    the ``pandas`` metadata that pandas and pyarrow use to label and type columns and to
    rebuild the index (all of it but ``attributes``, ``creator`` and ``pandas_version``; the
    ``attributes`` copy of the log is checked against the log by :func:`check_carriers`).
    ``dpframe-release-v2`` covered names, values and the pandas ``index_columns`` only;
    ``dpframe-release-v1`` the same, value by value. ``pandas_metadata``: the table's
    ``pandas`` metadata already parsed (by a caller that parsed it for other checks: it can
    hold a whole log in ``attributes``); None parses it here."""
    table = _arrow_of(frame)
    meta = table.schema.metadata or {}
    pandas_meta = _pandas_metadata(meta) if pandas_metadata is None else pandas_metadata
    if pandas_meta is not None and not isinstance(pandas_meta, dict):
        raise IntegrityError("the file's pandas metadata is not a JSON object")
    if scheme in (_SCHEME_V1, _SCHEME_V2):
        index = None if pandas_meta is None else pandas_meta.get("index_columns")
        if scheme == _SCHEME_V1:
            body = {
                "columns": [[name, [_value(v) for v in table.column(i).to_pylist()]]
                            for i, name in enumerate(table.column_names)],
                "index": index,
            }
            return hashlib.sha256(_canon(body)).hexdigest()
        return _columnar_digest(table, {"index": index}, version=2)
    if scheme not in (None, SEAL_SCHEME):
        raise IntegrityError(f"unknown seal scheme {scheme!r}")
    pandas_view = None if pandas_meta is None else {
        k: v for k, v in pandas_meta.items() if k not in _PANDAS_VOLATILE}
    others = sorted([k.hex(), v.hex()] for k, v in meta.items() if k not in _UNSEALED_KEYS)
    fields = [None if f.metadata is None else sorted([k.hex(), v.hex()]
                                                     for k, v in f.metadata.items())
              for f in table.schema]
    return _columnar_digest(table, {"pandas": pandas_view, "metadata": others,
                                    "field_metadata": fields}, version=3)


#: schema metadata keys a v3 table digest does not cover: the log's carriers (checked against
#: the sealed log itself), the ``pandas`` metadata (covered in part, ``_PANDAS_VOLATILE``) and
#: pyarrow's serialised schema (what it holds is what the digest reads: types, field metadata)
_UNSEALED_KEYS = frozenset({b"dpframe.log", b"PANDAS_ATTRS", b"pandas", b"ARROW:schema"})
#: parts of the ``pandas`` metadata that say which software wrote the file, and the attrs copy
_PANDAS_VOLATILE = frozenset({"attributes", "creator", "pandas_version"})


def _pandas_metadata(meta: dict[bytes, bytes]) -> dict[str, Any] | None:
    """The ``pandas`` schema metadata as a dict, None when absent; IntegrityError when it is
    not a JSON object."""
    raw = meta.get(b"pandas")
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise IntegrityError("the file's pandas metadata is not valid JSON") from exc
    if not isinstance(value, dict):
        raise IntegrityError("the file's pandas metadata is not a JSON object")
    return value


def _columnar_digest(table: Any, extra: dict[str, Any], version: int) -> str:
    """The ``dpframe-release-v2``/``-v3`` canonical content, hashed column by column.

    The hash input is ``"dpframe-table-v<version>\0"``, the canonical JSON header ``{"rows",
    "columns": [[name, tag], ...], **extra}`` (v2: ``extra`` = ``{"index": pandas
    index_columns}``; v3: ``{"pandas": the pandas metadata without attributes, creator and
    pandas_version, "metadata": [[key hex, value hex], ...] of every other schema metadata key
    but the log carriers and ARROW:schema, sorted, "field_metadata": per field the same pairs
    or null}``), then for every column its parts, each preceded by
    its length in bytes (8 bytes, little-endian). A column's parts depend on its tag, which
    comes from the Arrow type of its values (dictionary columns are decoded first):

    * ``"f"`` (floats): validity (one byte per row, 1 = present), then the values as float64,
      little-endian, with null slots 0.0 and every NaN the one quiet NaN ``0x7ff8…0``;
      ``-0.0`` and ``0.0`` stay distinct (bit-exact);
    * ``"i"`` (signed integers, and unsigned up to 32 bits): validity, then int64 values
      (null slots 0);
    * ``"b"`` (booleans): validity, then one byte per row (null slots 0);
    * ``"s"`` (strings): validity, the UTF-8 length of each row as int64 (null slots 0),
      then the concatenated UTF-8 bytes;
    * ``"v"`` (any other type): the canonical JSON of the type-tagged values of
      ``dpframe-release-v1`` (one Python value at a time: slow, but rare in release tables).

    A table and its Parquet copy have the same values and types, so the same digest; the
    parts are read from whole columns with numpy and Arrow compute (no per-value Python)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = []
    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if pa.types.is_dictionary(col.type):
            col = pc.cast(col, col.type.value_type)
        cols.append((name, col, _tag(col.type)))
    header = {**extra, "rows": int(table.num_rows),
              "columns": [[name, tag] for name, _, tag in cols]}
    h = hashlib.sha256(b"dpframe-table-v%d\0" % version)
    h.update(_part(_canon(header)))
    for _, col, tag in cols:
        if tag == "v":
            h.update(_part(_canon([_value(v) for v in col.to_pylist()])))
            continue
        valid = np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=np.uint8)
        h.update(_part(valid.tobytes()))
        if tag == "s":
            text = pc.fill_null(col.cast(pa.large_string()), "").combine_chunks()
            offsets = np.frombuffer(text.buffers()[1], dtype="<i8")[
                text.offset : text.offset + len(text) + 1]
            data = text.buffers()[2]
            h.update(_part(np.diff(offsets).astype("<i8").tobytes()))
            h.update(_part(b"" if data is None else
                           data.to_pybytes()[int(offsets[0]) : int(offsets[-1])]))
            continue
        fill = {"f": 0.0, "i": 0, "b": False}[tag]
        values = pc.fill_null(col, fill).to_numpy(zero_copy_only=False)
        if tag == "f":
            values = values.astype("<f8")
            values[np.isnan(values)] = np.nan  # one canonical NaN
        else:
            values = values.astype("<i8" if tag == "i" else np.uint8)
        h.update(_part(values.tobytes()))
    return h.hexdigest()


def _tag(arrow_type: Any) -> str:
    import pyarrow as pa

    t = pa.types
    if t.is_floating(arrow_type):
        return "f"
    if t.is_signed_integer(arrow_type) or (
            t.is_unsigned_integer(arrow_type) and arrow_type.bit_width <= 32):
        return "i"
    if t.is_boolean(arrow_type):
        return "b"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or (
            hasattr(t, "is_string_view") and t.is_string_view(arrow_type)):
        return "s"
    return "v"


def _part(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data


def _canon(obj: Any) -> bytes:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"))`` as UTF-8; a log's committed
    entries come from their cached text (:func:`dpframe.accounting._log_entries.canonical_json`)."""
    return canonical_json(obj).encode("utf-8")


def _message(document: dict[str, Any], table_hash: str, scheme: str = SEAL_SCHEME) -> bytes:
    """What the seal's digest and HMAC are computed over.

    ``dpframe-release-v3``: ``scheme ‖ 0 ‖ canonical JSON of the document without "seal",
    "entries" and "keys" ‖ 0 ‖ entries chain ‖ 0 ‖ keys chain ‖ 0 ‖ table digest``, the chains
    of :mod:`dpframe.accounting._log_entries`: the log's entries and key lists are covered by
    reference,
    so sealing costs O(1) in the history when the document comes from a ledger snapshot
    (which carries both chains) and O(entries) otherwise (a verifier recomputes them).
    Older schemes: ``scheme ‖ 0 ‖ canonical JSON of the document without "seal" ‖ 0 ‖ table
    digest``."""
    if scheme != SEAL_SCHEME:
        body = {k: v for k, v in document.items() if k != "seal"}
        return scheme.encode() + b"\0" + _canon(body) + b"\0" + table_hash.encode()
    entries = document.get("entries", [])
    keys = document.get("keys", {})
    if not isinstance(entries, list) or not isinstance(keys, dict):
        raise IntegrityError("the log's entries must be a list and its keys an object")
    body = {k: v for k, v in document.items() if k not in ("seal", "entries", "keys")}
    # an absent list is not an empty one: adding "keys": {} to a log changes its digest
    entries_part = entries_digest(entries) if "entries" in document else "absent"
    keys_part = keys_digest(keys) if "keys" in document else "absent"
    return b"\0".join([scheme.encode(), _canon(body), entries_part.encode(),
                       keys_part.encode(), table_hash.encode()])


def _key_bytes(key: bytes | str) -> bytes:
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes) or not key:
        raise ParameterError("a signing key must be non-empty bytes or str")
    return key


def _seal(document: dict[str, Any], table_hash: str, key: bytes | str | None) -> dict[str, Any]:
    msg = _message(document, table_hash)
    seal = {"scheme": SEAL_SCHEME, "table": table_hash,
            "digest": hashlib.sha256(msg).hexdigest()}
    if key is not None:
        seal["hmac"] = hmac.new(_key_bytes(key), msg, hashlib.sha256).hexdigest()
    return seal


def check_seal(document: dict[str, Any], table: Any, *, key: bytes | str | None = None,
               where: str = "the table", pandas_metadata: Any = None) -> dict[str, Any]:
    """Verify a sealed log against a table's values (a frame or an Arrow table).

    Returns ``{"values_match", "log_intact", "signed", "signature"}`` where ``signature`` is
    ``"valid"``, ``"unsigned"`` or ``"not checked"`` (signed, no key given). Raises
    :class:`IntegrityError` when the document is not a sealed release log, when values or log
    were altered, or when ``key`` is given and the signature is missing or wrong."""
    seal = document.get("seal") if isinstance(document, dict) else None
    if not isinstance(seal, dict) or document.get("kind") != RELEASE_KIND:
        raise IntegrityError(
            f"{where} carries a dpframe log that is not a sealed release log (written by an "
            "older dpframe, or not a release): its values cannot be checked against it. "
            "Read it anyway with verify=False"
        )
    scheme = seal.get("scheme")
    if scheme not in _SCHEMES:
        raise IntegrityError(f"{where}: unknown seal scheme {scheme!r}")
    actual = table_digest(table, scheme, pandas_metadata=pandas_metadata)
    msg = _message(document, actual, scheme)
    values_match = _same(seal.get("table"), actual)
    intact = _same(seal.get("digest"), hashlib.sha256(msg).hexdigest())
    if not values_match:
        raise IntegrityError(
            f"{where}: the values do not match the release log (the table — its values, "
            "column labels, index, types or the metadata readers show with them — was edited, "
            "concatenated with another, or derived after release); the log does not vouch for "
            "these numbers. Round, rename or sort a release with dpf.round_release, "
            "dpf.rename_release or dpf.sort_release, and combine releases with "
            "dpf.concat_releases: they record the step in the seal"
        )
    if not intact:
        raise IntegrityError(
            f"{where}: the release log was altered after release (its digest does not match); "
            "do not trust its ε, δ or mechanisms"
        )
    signed = "hmac" in seal
    status = "unsigned" if not signed else "not checked"
    if key is not None:
        if not signed:
            raise IntegrityError(f"{where} is not signed, but a key was given")
        good = hmac.new(_key_bytes(key), msg, hashlib.sha256).hexdigest()
        if not _same(seal["hmac"], good):
            raise IntegrityError(
                f"{where}: the signature does not match this key (wrong key, or the release "
                "was re-sealed by someone without the key)"
            )
        status = "valid"
    return {"values_match": True, "log_intact": True, "signed": signed, "signature": status}


def _same(recorded: Any, computed: str) -> bool:
    """A recorded digest (whatever the file holds) equals a computed one, in constant time."""
    if not isinstance(recorded, str):
        return False
    return hmac.compare_digest(recorded.encode("utf-8", "surrogatepass"),
                               computed.encode("ascii"))


# -- attaching -------------------------------------------------------------------------------
def attach_release_log(table: Any, document: dict[str, Any], *,
                       release_id: int | list[int] | None = None,
                       key: bytes | str | None = None) -> None:
    """Seal ``document`` (a ledger snapshot that includes this release) to ``table``'s current
    values and make it the table's log. ``release_id``: the id(s) :meth:`Ledger.commit`
    returned for the release(s) in the table; ``key``: sign with HMAC-SHA256 as well.

    The seal is computed when it is first needed (the log is read, copied, compared with
    another dict, written to a file), not at release: :class:`_PendingSeal` keeps the log
    without its seal and a snapshot of the table *as released* (a copy-on-write copy: a
    later edit of ``table`` does not reach it), so the seal is the one sealing at release
    would have given, and a table edited after release still fails verification. Call it on
    the final table."""
    doc, ids = _unsealed(document, release_id)
    snapshot = _snapshot(table)
    if snapshot is None:  # no copy-on-write snapshot for this kind of table: seal now
        _store(table, _sealed(doc, ids, table_digest(table), key))
        return
    _store_pending(table, _PendingSeal(doc, ids, snapshot, key))


def attach_release_log_of_blocks(table: Any, document: dict[str, Any],
                                 blocks: list[tuple[Any, Any]], index: Any, columns: Any, *,
                                 release_id: int | list[int] | None = None) -> None:
    """:func:`attach_release_log` (unsigned) of a pandas table just made from ``blocks``
    (``(values, positions)``) and the labels ``index`` and ``columns``, which it holds
    unchanged: its snapshot is :meth:`_PandasParts.of_blocks` of them, the parts
    :meth:`_PandasParts.of` would read back. Otherwise (or pandas 2) as that function."""
    parts = _PandasParts.of_blocks(blocks, index, columns) if _pandas_3() else None
    if parts is None:
        attach_release_log(table, document, release_id=release_id)
        return
    doc, ids = _unsealed(document, release_id)
    log = _LazySealedLog(_PendingSeal(doc, ids, parts, None))
    attrs = table.attrs  # (a new table's own empty dict: filled in place, as the setter would)
    if attrs:
        table.attrs = {RELEASE_ATTRS_KEY: log}
    else:
        attrs[RELEASE_ATTRS_KEY] = log


def sealed_document(table: Any, document: dict[str, Any], *,
                    release_id: int | list[int] | None = None,
                    key: bytes | str | None = None) -> dict[str, Any]:
    """The sealed log :func:`attach_release_log` attaches, without attaching it (for a table
    written directly, e.g. an Arrow table with extra schema metadata, which the seal then
    covers). Costs O(1) in the ledger's history for a ledger snapshot's document."""
    doc, ids = _unsealed(document, release_id)
    return _sealed(doc, ids, table_digest(table), key)


def _unsealed(document: dict[str, Any], release_id: int | list[int] | None
              ) -> tuple[dict[str, Any], list[int]]:
    """The table's own copy of ``document`` without ``seal``/``kind``/``release_ids`` (no
    later change of the ledger reaches it; a snapshot's entries and keys are immutable
    containers that are shared, O(1): a :class:`LogDocument`'s are kept as its lazy parts,
    the prefixes of the ledger's append-only lists it holds, copied out when the log is
    read), and the release ids as a list."""
    if type(document) is LogDocument:  # a ledger snapshot: its entries stay unread
        doc = document.fields()  # (a new dict)
        for k in ("seal", "kind", "release_ids"):
            doc.pop(k, None)
        for k, v in doc.items():
            if type(v) not in _SCALAR_TYPES and not isinstance(v, LAZY_PARTS):
                doc[k] = _detached(v)
    else:
        doc = {k: _detached(v) for k, v in document.items()
               if k not in ("seal", "kind", "release_ids")}
    ids = [] if release_id is None else (
        [int(release_id)] if isinstance(release_id, int) else [int(r) for r in release_id])
    return doc, ids


#: The JSON scalars, by exact type (no subclass: a str or float subclass is detached).
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _detached(value: Any) -> Any:
    """:func:`~dpframe.accounting._log_entries.detached` of one field of a log document,
    without its call per value for the two shapes every release log has: a JSON scalar (as
    it is) and a plain dict of scalars, the budget (a new dict of the same values); anything
    else goes to it."""
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return value
    if kind is dict and all(type(v) in _SCALAR_TYPES for v in value.values()):
        return dict(value)
    return detached(value)


def _sealed(doc: dict[str, Any], ids: list[int], table_hash: str,
            key: bytes | str | None) -> dict[str, Any]:
    """``doc`` (from :func:`_unsealed`) completed: kind, release ids, and the seal over them
    and ``table_hash``. Every field a release log carries is in ``doc`` before this (the
    entries and key table of a ledger snapshot are copied out here: the log is being read)."""
    resolved(doc)
    doc["kind"] = RELEASE_KIND
    doc["release_ids"] = ids
    doc["seal"] = _seal(doc, table_hash, key)
    return doc


def _snapshot(table: Any) -> Any:
    """A copy of ``table`` that no later in-place edit of ``table`` reaches, made without
    copying its values where the library allows it: a small pandas table of numbers under
    copy-on-write its parts (:class:`_PandasParts`: copies of its few values, no frame), a
    pandas frame under copy-on-write (pandas 3, or the option set) a shallow copy, otherwise
    a deep one; a Polars frame a clone (its columns are shared and copied on write); an
    Arrow table itself (immutable). None for anything else (sealed at once)."""
    if is_pandas_table(table):
        import pandas as pd

        cow = _pandas_3() or bool(pd.get_option("mode.copy_on_write") is True)
        parts = _PandasParts.of(table) if cow else None
        if parts is not None:
            return parts
        snap = table.copy(deep=not cow)
        snap.attrs = {}
        # the labels' own objects: a name set on the table's index or columns later (an
        # in-place change no copy-on-write sees) does not reach the snapshot. A view is a new
        # label object over the same immutable values (what ``copy()`` gives, without its
        # checks of the names): its name and the table's are set apart
        snap.index = snap.index.view()
        snap.columns = snap.columns.view()
        return snap
    if is_polars_table(table):
        return table.clone()
    import pyarrow as pa

    return table if isinstance(table, pa.Table) else None


class _PandasParts:
    """A small pandas table of numbers as released, kept as its parts: a copy of each block's
    values (numpy numbers: signed, unsigned, float, bool) with the block's column positions,
    and its index and column labels as released (:func:`_labels_as_released`: a name set
    later on the table's labels does not reach them). :meth:`frame` rebuilds the
    same frame from them (the same values, dtypes, labels and index, as Arrow reads it), so
    its seal is the table's seal at release; no later edit of the table reaches the copies.

    Copying a few numbers costs less than a shallow copy of the frame (pandas' copy-on-write
    bookkeeping); a table of more than :data:`PARTS_MAX_CELLS` cells, or with any other
    block (strings, dates, nullable columns), is snapshotted as a frame instead."""

    __slots__ = ("_blocks", "_columns", "_index")

    def __init__(self, blocks: list[tuple[Any, Any]], index: tuple[Any, Any, bool],
                 columns: tuple[Any, Any, bool]) -> None:
        self._blocks, self._index, self._columns = blocks, index, columns

    @classmethod
    def of(cls, table: Any) -> _PandasParts | None:
        """The parts of ``table`` (its blocks read back, :meth:`of_blocks`), or None when it
        is not a small table of numpy numbers or pandas cannot rebuild it from blocks."""
        blocks = getattr(getattr(table, "_mgr", None), "blocks", None)
        if blocks is None or len(table.index) * len(table.columns) > PARTS_MAX_CELLS:
            return None
        return cls.of_blocks([(getattr(block, "values", None),
                               getattr(getattr(block, "mgr_locs", None), "as_array", None))
                              for block in blocks], table.index, table.columns)

    @classmethod
    def of_blocks(cls, blocks: list[tuple[Any, Any]], index: Any, columns: Any
                  ) -> _PandasParts | None:
        """The parts of a table of ``blocks`` (``(values, positions)``) and the labels
        ``index`` and ``columns``: a copy of each block's values, the labels as released.
        None when a block is not a two-dimensional numpy array of numbers with numpy
        positions (also a pandas whose blocks read otherwise: a frame snapshot), the blocks
        hold more than :data:`PARTS_MAX_CELLS` cells, or pandas cannot rebuild a frame
        from blocks."""
        import numpy as np

        if _from_blocks() is None:
            return None
        kept, cells = [], 0
        for values, places in blocks:
            if not (type(values) is np.ndarray and values.ndim == 2
                    and values.dtype.kind in "iufb" and isinstance(places, np.ndarray)):
                return None
            cells += values.size
            if cells > PARTS_MAX_CELLS:
                return None
            kept.append((values.copy(), places))  # (positions: immutable)
        return cls(kept, _labels_as_released(index), _labels_as_released(columns))

    def frame(self) -> Any:
        """The table as released, rebuilt from its parts (for its digest only)."""
        build = _from_blocks()
        assert build is not None
        return build(self._blocks, index=_labels_back(self._index),
                     columns=_labels_back(self._columns))


def _labels_as_released(labels: Any) -> tuple[Any, Any, bool]:
    """A table's index or column labels as released, for :func:`_labels_back`: a
    ``RangeIndex`` or plain ``Index`` as the object itself and its name (their values cannot
    be changed; the name is the one thing that can be set on the object: recording it costs
    less than a new object), any other kind as a new object (a view)."""
    if type(labels) in _plain_label_types():
        return labels, labels.name, True
    return labels.view(), None, False


def _labels_back(kept: tuple[Any, Any, bool]) -> Any:
    """The labels :func:`_labels_as_released` kept: a view with the recorded name, or the
    view it made."""
    labels, name, plain = kept
    if not plain:
        return labels
    out = labels.view()
    out.name = name
    return out


@functools.cache
def _plain_label_types() -> tuple[type, ...]:
    import pandas as pd

    return (pd.RangeIndex, pd.Index)


#: The most cells (rows × columns) of a pandas table kept as :class:`_PandasParts`.
PARTS_MAX_CELLS = 65_536


@functools.cache
def _pandas_3() -> bool:
    """pandas 3 or later (always copy-on-write)."""
    import pandas as pd

    return int(pd.__version__.split(".")[0]) >= 3


@functools.cache
def _from_blocks() -> Any:
    """pandas' ``create_dataframe_from_blocks`` (pandas 3), or None."""
    try:
        from pandas.api.internals import create_dataframe_from_blocks
    except ImportError:  # pragma: no cover - pandas 2
        return None
    return create_dataframe_from_blocks


class _PendingSeal:
    """A release log whose seal is not computed yet: the unsealed log, the release ids, the
    table as released (:func:`_snapshot`) and the signing key. :meth:`seal` computes the
    seal once (the same bytes sealing at release gives) and drops the snapshot."""

    __slots__ = ("_doc", "_ids", "_key", "_lock", "_sealed", "_snapshot")

    def __init__(self, doc: dict[str, Any], ids: list[int], snapshot: Any,
                 key: bytes | str | None) -> None:
        self._doc, self._ids, self._snapshot, self._key = doc, ids, snapshot, key
        self._sealed: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def unsealed(self) -> dict[str, Any]:
        """The log without its seal (shared: not to be changed)."""
        return self._doc

    def seal(self) -> dict[str, Any]:
        """The sealed log (computed at the first call; later calls return the same dict)."""
        with self._lock:
            if self._sealed is None:
                doc = dict(self._doc)
                snapshot = self._snapshot
                if isinstance(snapshot, _PandasParts):
                    snapshot = snapshot.frame()
                self._sealed = _sealed(doc, list(self._ids), table_digest(snapshot),
                                       self._key)
                self._snapshot = None
            return self._sealed


@add_materializing_readers
class _LazySealedLog(SealedLog):
    """A pandas release table's sealed log whose seal is computed at its first use: every
    way of reading it (items, keys, lookup, iteration, length, JSON, copies, pickling,
    comparing with a dict) seals it first (:class:`_PendingSeal`). Until then its dict
    storage holds the unsealed log (never empty: the JSON encoder skips empty dicts without
    asking). Compared with another sealed log it is equal without sealing (pandas' attrs
    propagation)."""

    __slots__ = ("_pending",)

    def __init__(self, pending: _PendingSeal) -> None:
        super().__init__(pending.unsealed)
        self._pending: _PendingSeal | None = pending

    def materialize(self) -> None:
        """Seal now (once); afterwards this is the plain sealed log."""
        pending = self._pending
        if pending is not None:
            dict.update(self, pending.seal())
            self._pending = None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SealedLog):
            return True
        self.materialize()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None

    def __copy__(self) -> SealedLog:
        self.materialize()
        return SealedLog(dict.copy(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> SealedLog:
        self.materialize()
        return SealedLog(copy.deepcopy(dict.copy(self), memo))

    def __reduce_ex__(self, protocol: Any) -> Any:
        self.materialize()
        return (SealedLog, (dict.copy(self),))


def attach_sealed(table: Any, document: dict[str, Any]) -> None:
    """Make an already sealed log (read from a file and verified against ``table``) the
    table's log, unchanged (:func:`dpframe.accounting._parquet.read_release`)."""
    _store(table, document)


def _store(table: Any, doc: dict[str, Any]) -> None:
    if is_pandas_table(table):
        table.attrs = {RELEASE_ATTRS_KEY: SealedLog(doc)}
        return
    _polars_logs.set(table, doc)


def _store_pending(table: Any, pending: _PendingSeal) -> None:
    if is_pandas_table(table):
        table.attrs = {RELEASE_ATTRS_KEY: _LazySealedLog(pending)}
        return
    _polars_logs.set(table, pending)


def release_log_of(frame: Any) -> dict[str, Any] | None:
    """The sealed log attached to a release table, or None for any other frame (a seal not
    computed yet is computed here)."""
    if is_pandas_table(frame):
        doc = frame.attrs.get(RELEASE_ATTRS_KEY)
        if isinstance(doc, _LazySealedLog):
            doc.materialize()
        return doc if isinstance(doc, dict) and doc.get("kind") == RELEASE_KIND else None
    found = _polars_logs.get(frame)
    if isinstance(found, _PendingSeal):
        sealed = found.seal()
        _polars_logs.set(frame, sealed)
        return sealed
    return found


def sign_release(table: ReleaseTableT, key: bytes | str) -> ReleaseTableT:
    """Add an HMAC-SHA256 signature (``key``: the data steward's secret) to a release table's
    seal, after checking that its values still match its log. Returns ``table``."""
    if key is None:
        raise ParameterError(
            "sign_release needs the steward's key (non-empty bytes or str); got None, which "
            "would leave the release unsigned"
        )
    _key_bytes(key)
    doc = release_log_of(table)
    if doc is None:
        raise ParameterError("only release tables (what a .dp release returns) can be signed")
    check_seal(doc, table)
    signed = dict(doc)
    signed["seal"] = _seal(doc, table_digest(table), key)
    _store(table, signed)
    return table
