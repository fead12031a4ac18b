"""The accounting log's entry, as one typed record.

Every release writes one entry per measurement (plus one for a key selection, or one for a
failure) to its ledger; the ledger stamps ``ledger_id`` and ``release_id`` when it commits
them, and the entries travel as JSON with the frame and its Parquet file (docs/audit.md). The
columns of the log frame, the JSON of an entry and the reader of a stored entry all derive from
:class:`LogRecord`: a column is added in one place, and a test compares the three.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, fields
from typing import Any

from dpframe.accounting.neighbours import FIELD, REPLACE

__all__ = ["FLOAT_COLUMNS", "INT_COLUMNS", "LOG_COLUMNS", "OPTIONAL_COLUMNS", "LogRecord",
           "log_frame"]


@dataclass(frozen=True, kw_only=True)
class LogRecord:
    """One log entry. The fields, in the order of the log frame's columns:

    * ``ledger_id``, ``release_id``: stamped by the ledger at commit (None before);
    * ``time`` (UTC, ISO 8601), ``name`` (the query's name), ``query`` (its kind), ``part``
      (the measurement), ``columns`` read, ``group_by`` (a column, a list of columns, or None)
      and ``group_keys`` (the ledger's reference to the key list);
    * the budget charged — ``epsilon``, ``delta`` — and the mechanism run:
      ``mechanism_epsilon``, ``epsilon_overhead`` (snapping), ``sensitivity``, ``mechanism``,
      ``scale``, ``grid`` (snapping grid), ``domain_lower``/``domain_upper`` (None where
      unbounded);
    * how the data was read: ``clamping``, ``missing``, ``random_source``, ``engine``,
      ``size`` ("public" or "private"), ``formulation``, ``composition``,
      ``fixed_point_quantum`` (a number, several joined by commas, or None), ``derivation``,
      ``verification``, ``mechanism_choice``, ``interval``;
    * the privacy unit: ``privacy_unit``, ``max_rows_per_unit``, ``max_groups_per_unit``,
      ``bounding``;
    * ``neighbours``: the ledger's neighbour definition (:mod:`dpframe.accounting.neighbours`),
      written only when it is ``"add_remove"``: an entry without it (every replace-one entry,
      and every entry written before the choice existed) reads as ``"replace"`` and keeps its
      digest. The log frame has the column only for an add/remove ledger
      (:data:`OPTIONAL_COLUMNS`).
    """

    ledger_id: str | None = None
    release_id: int | None = None
    time: str
    name: str
    query: str
    part: str
    columns: str
    group_by: str | list[str] | tuple[str, ...] | None
    group_keys: str | None
    epsilon: float
    delta: float
    mechanism_epsilon: float
    epsilon_overhead: float
    sensitivity: float
    mechanism: str
    scale: float
    grid: float | None
    domain_lower: float | None
    domain_upper: float | None
    clamping: str
    missing: str
    random_source: str
    engine: str
    size: str
    formulation: str
    composition: str
    fixed_point_quantum: float | str | None
    derivation: str
    verification: str
    mechanism_choice: str
    interval: str | None
    privacy_unit: str
    max_rows_per_unit: int | None
    max_groups_per_unit: int | None
    bounding: str
    neighbours: str = REPLACE

    def to_dict(self) -> dict[str, Any]:
        """The entry as the ledger stores it (JSON values); the ledger's stamps only once
        set."""
        out = {name: getattr(self, name) for name in LOG_COLUMNS}  # flat: no deep copy
        if isinstance(self.group_by, list):
            out["group_by"] = list(self.group_by)
        for stamp in _STAMPS:
            if out[stamp] is None:
                del out[stamp]
        if self.neighbours != REPLACE:
            out[FIELD] = self.neighbours
        return out

    @classmethod
    def from_dict(cls, entry: typing.Mapping[str, Any]) -> LogRecord:
        """A stored entry read back; a missing or unknown column is a ``TypeError``."""
        return cls(**dict(entry))

    @staticmethod
    def entry_dict(fields: typing.Mapping[str, Any]) -> dict[str, Any]:
        """``LogRecord.from_dict(fields).to_dict()`` for a new entry (no ledger stamps yet),
        without building the record (a release writes one per measurement): every column but
        the stamps, in the log frame's order; a missing or unknown column is a
        ``TypeError``, as from the record."""
        try:
            out = {name: fields[name] for name in _ENTRY_COLUMNS}
        except KeyError as exc:
            raise TypeError(f"log entry without the column {exc.args[0]!r}") from None
        optional = [c for c in OPTIONAL_COLUMNS if c in fields]
        if len(fields) != len(_ENTRY_COLUMNS) + len(optional):
            unknown = sorted(set(fields) - set(_ENTRY_COLUMNS) - set(OPTIONAL_COLUMNS))
            raise TypeError(f"log entry with unknown columns {unknown}")
        if isinstance(out["group_by"], list):
            out["group_by"] = list(out["group_by"])
        if fields.get(FIELD, REPLACE) != REPLACE:  # only an add/remove entry names it
            out[FIELD] = fields[FIELD]
        return out


_STAMPS = ("ledger_id", "release_id")

#: Columns only an add/remove ledger's log frame has (at the end).
OPTIONAL_COLUMNS: tuple[str, ...] = (FIELD,)
#: The log frame's columns, in order.
LOG_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(LogRecord)
                                     if f.name not in OPTIONAL_COLUMNS)
#: The columns of an entry before the ledger stamps it (:meth:`LogRecord.entry_dict`).
_ENTRY_COLUMNS: tuple[str, ...] = tuple(c for c in LOG_COLUMNS if c not in _STAMPS)


def _kinds(annotation: Any) -> set[Any]:
    hints = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (
        annotation,)
    return {h for h in hints if h is not type(None)}


_HINTS = typing.get_type_hints(LogRecord)
#: Columns held as floats, and as integers, in a Polars log frame (the rest are text).
FLOAT_COLUMNS = frozenset(c for c in LOG_COLUMNS if float in _kinds(_HINTS[c])
                          and str not in _kinds(_HINTS[c]))
INT_COLUMNS = frozenset(c for c in LOG_COLUMNS if _kinds(_HINTS[c]) == {int})


def log_frame(document: dict[str, Any], library: str) -> Any:
    """The log's entries as a frame of ``library`` ("pandas" or "polars"), columns in
    :data:`LOG_COLUMNS`; ``group_keys`` shows the JSON list of keys (the document stores it
    once, in ``keys``)."""
    columns = LOG_COLUMNS + (OPTIONAL_COLUMNS if FIELD in document else ())
    rows = [{c: e.get(c) for c in columns} for e in document.get("entries", [])]
    keys = document.get("keys") or {}
    for row in rows:  # group keys are stored once per ledger: show the JSON list itself
        ref = row["group_keys"]
        if isinstance(ref, str) and ref in keys:
            row["group_keys"] = keys[ref]
    if library == "pandas":
        import pandas as pd

        return pd.DataFrame(rows, columns=list(columns))
    import polars as pl

    schema: dict[str, Any] = {c: pl.Float64 if c in FLOAT_COLUMNS else pl.String
                              for c in columns}
    schema.update(dict.fromkeys(INT_COLUMNS, pl.Int64))
    fixed = [{c: (str(v) if v is not None and schema[c] == pl.String else v)
              for c, v in r.items()} for r in rows]
    return pl.DataFrame(fixed, schema=schema) if fixed else pl.DataFrame(schema=schema)
