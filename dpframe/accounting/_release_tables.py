"""A whole analysis in one file: the tidy release table, and post-processing that keeps a
release table verifiable (issues 23 and 33).

**The tidy table** (:func:`concat_releases`; ``dpframe release`` writes the same table): one row
per released statistic and key, with the columns :data:`TIDY_COLUMNS` and then one column per
key name (text; null where the row's query has no such key)::

    query      the name of the release table (a mapping's key; "release <id>" for a sequence)
    statistic  the statistic's column name in the release table
    value      its value (float64)
    lower      the lower end of its interval (float64; null where none was released)
    upper      the upper end of its interval
    <key> ...  one column per label column (``region``, ``sex``, ``bin_lower``, ``q``,
               ``column``, ...), the row's label as text

An interval's ends (``count_lower``, ``count_upper`` beside ``count``) become the row's
``lower`` and ``upper``, and a matrix released with intervals (``corr(..., ci=)``: its rows
labelled ``statistic`` = estimate/lower/upper) becomes one row per cell with its interval. A
key named like a fixed column is written ``key_<name>``. The concat step of a tidy table also
records which release each query came from (``"releases": {query: [ids]}``).

**The long table** of earlier versions (``concat_releases(..., form="long")``, and files written
before): one row per cell of the release tables it combines, with the columns
:data:`LONG_COLUMNS`::

    query      the name of the release table
    group_by   the names of the row's label columns, comma-joined (null: the table has one row
               and no labels)
    group      the row's labels (str of each, joined by ", "; null where a label is missing)
    statistic  the cell's column name in the release table (interval ends on rows of their own)
    value      the cell's value (float64)

A release table's *label columns* are what names its rows: the group-by key columns its log
names, a histogram's ``bin_lower``/``bin_upper``, the levels ``q`` of a table of quantiles,
every column that is not floating-point
(value counts' key, Polars' ``statistic``/``column`` labels of ``describe``/``corr``/``cov``),
and a pandas index other than the default range (its unnamed levels are called ``column``
when they hold the table's column names, as a matrix's do, else ``statistic``: the names
Polars gives them, so a pandas and a Polars release give the same long table). Every other
column is a statistic. Rows come in the table's order, cells in its column order, tables in
the order given; ``pivot(index=["query", "group_by", "group"], columns="statistic")`` gives
the wide tables back. A long table given to :func:`concat_releases` keeps its rows.

**Post-processing** (:func:`round_release`, :func:`rename_release`, :func:`sort_release`, and
:func:`concat_releases` itself) is free under differential privacy, but any change of a
release table's values breaks its seal (``dpf.read_log`` says the values do not match). These
functions check the input's seal, apply the operation, and seal the result with the same log
plus two fields the seal's digest covers:

* ``postprocessing``: the steps applied since release, in order, e.g.
  ``[{"op": "round", "decimals": 2, "columns": ["m"]}, {"op": "sort", "by": ["m"],
  "descending": false}]`` (steps of a concatenated table also name their ``query``);
* ``derived_from``: the seals (``table`` and ``digest``) of the release tables the result was
  computed from.

What a steward can verify from the file alone: the values are the ones sealed, and the log,
the step list and ``derived_from`` are intact (with a signature: that someone holding the key
sealed them). With the original release file as well: its seal's digest is the one
``derived_from`` names, and applying the recorded steps to it again gives the same values
(the steps are deterministic: same input, same output, bit for bit), so the published numbers
are exactly the released ones post-processed as the log says.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dpframe._util.tables import ReleaseTableT, is_pandas_table, is_polars_table
from dpframe.accounting._log_entries import canonical_json
from dpframe.accounting.seals import attach_release_log, check_seal, release_log_of
from dpframe.errors import IntegrityError, ParameterError

__all__ = ["LONG_COLUMNS", "TIDY_COLUMNS", "concat_releases", "long_columns", "release_rows",
           "rename_release", "round_release", "sort_release", "tidy_rows", "tidy_table"]

#: The long table's columns (the ``dpframe release`` output file's, too).
LONG_COLUMNS = ("query", "group_by", "group", "statistic", "value")
#: The tidy long table's fixed columns (then one column per key; module docstring).
TIDY_COLUMNS = ("query", "statistic", "value", "lower", "upper")
#: a histogram's key column in the log; its table shows the bin edges instead
_HISTOGRAM_KEY = "__dpframe_bin"


def _release_doc(table: Any, where: str) -> dict[str, Any]:
    """The table's sealed log, checked against its values; ParameterError for anything that is
    not a release table."""
    if isinstance(table, float | int) or type(table).__name__ in ("Estimate",
                                                                  "QuantileEstimate"):
        raise ParameterError(
            f"{where} is a single released number, which carries no log; release it as a "
            "table (frame.dp.release({'name': dpf.mean('x')}, epsilon=...)) to export it"
        )
    if not (is_pandas_table(table) or is_polars_table(table)):
        raise ParameterError(
            f"{where} is a {type(table).__name__}; pass release tables (pandas or Polars "
            "DataFrames a .dp release returned)"
        )
    doc = release_log_of(table)
    if doc is None:
        raise ParameterError(f"{where} is not a release table (it carries no release log)")
    check_seal(doc, table, where=where)
    return doc


# -- the long table --------------------------------------------------------------------------
def _logged_labels(doc: dict[str, Any]) -> set[str]:
    """The label columns the log names for this table's releases (group-by keys, a
    histogram's edges, the levels ``q`` of several quantiles), under the names the recorded
    renames gave them."""
    ids = set(doc.get("release_ids") or [])
    names: set[str] = set()
    for e in doc.get("entries") or []:
        if not isinstance(e, dict) or e.get("release_id") not in ids:
            continue
        if e.get("query") == "quantile":
            names.add("q")  # a table of several quantiles: the public levels label its rows
        by = e.get("group_by")
        cols = by if isinstance(by, list) else str(by or "").split(",")
        for c in cols:
            if c == _HISTOGRAM_KEY:
                names.update(("bin_lower", "bin_upper"))
            elif c:
                names.add(str(c))
    for step in doc.get("postprocessing") or []:
        if isinstance(step, dict) and step.get("op") == "rename":
            mapping = step.get("mapping") or {}
            names = {mapping.get(n, n) for n in names}
    return names


def _index_labels(table: Any) -> list[tuple[str, list[Any]]]:
    """A pandas table's index as label columns (none for the default range index)."""
    import pandas as pd

    index = table.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return []
    columns = {str(c) for c in table.columns}
    out = []
    for level in range(index.nlevels):
        values = list(index.get_level_values(level))
        name = index.names[level]
        if name is None:
            name = "column" if {str(v) for v in values} <= columns else "statistic"
        out.append((str(name), values))
    return out


def _split(table: Any, doc: dict[str, Any]) -> tuple[list[tuple[str, list[Any]]],
                                                      list[tuple[str, np.ndarray]]]:
    """The table's label columns (name, Python values) and statistic columns (name, float64
    values), in column order (a pandas index first)."""
    logged = _logged_labels(doc)
    labels = _index_labels(table) if is_pandas_table(table) else []
    stats = []
    for name in table.columns:
        col = table[name]
        floating = (col.dtype.kind == "f") if is_pandas_table(table) else col.dtype.is_float()
        if str(name) in logged or not floating:
            labels.append((str(name), col.to_list()))
        else:
            stats.append((str(name), np.asarray(
                col.to_numpy(dtype=np.float64, na_value=np.nan) if is_pandas_table(table)
                else col.to_numpy(), dtype=np.float64)))
    return labels, stats


def _label_text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:  # pragma: no cover - pandas is a dependency of the tests only
        pass
    if isinstance(value, float | np.floating):
        return repr(float(value))
    if isinstance(value, np.integer):
        return str(int(value))
    if isinstance(value, np.bool_):
        return str(bool(value))
    return str(value)


def _is_long(table: Any) -> bool:
    return [str(c) for c in table.columns] == list(LONG_COLUMNS)


def _is_tidy(table: Any) -> bool:
    return [str(c) for c in table.columns][:len(TIDY_COLUMNS)] == list(TIDY_COLUMNS)


def _end_of(name: str, names: Sequence[str]) -> tuple[str, str]:
    """``(statistic, slot)``: ``x_lower`` beside ``x`` is ``(x, "lower")``; else the value."""
    for end in ("lower", "upper"):
        base = name[:-len(end) - 1]
        if name.endswith("_" + end) and base in names:
            return base, end
    return name, "value"


def _fold_label(labels: list[tuple[str, list[Any]]]) -> int | None:
    """The position of a matrix's ``statistic`` label holding estimate/lower/upper (a
    ``corr``/``cov`` released with intervals), folded into the rows' value and interval."""
    for i, (name, values) in enumerate(labels):
        texts = {str(v) for v in values}
        if name == "statistic" and "estimate" in texts and texts <= {"estimate", "lower",
                                                                     "upper"}:
            return i
    return None


def tidy_rows(query: str, table: Any, doc: dict[str, Any] | None = None
              ) -> list[dict[str, Any]]:
    """The tidy table's rows (module docstring) for one release table named ``query`` (a
    tidy table keeps its rows); each a dict of the fixed columns and its keys."""
    if _is_tidy(table):
        names = [str(c) for c in table.columns]
        cols = {c: table[c].to_list() for c in names}
        return [{c: (_number(cols[c][i]) if c in ("value", "lower", "upper")
                     else _label_text(cols[c][i])) for c in names}
                for i in range(len(table))]
    doc = release_log_of(table) if doc is None else doc
    labels, stats = _split(table, doc or {})
    released = _released_names([n for n, _ in stats], doc or {})
    current = {v: k for k, v in released.items()}
    names = list(released.values())
    fold = _fold_label(labels)
    keys = [(n if n not in TIDY_COLUMNS else f"key_{n}", vals)
            for i, (n, vals) in enumerate(labels) if i != fold]
    rows: dict[tuple[tuple[str | None, ...], str], dict[str, Any]] = {}
    for r in range(len(table)):
        texts = tuple(_label_text(vals[r]) for _, vals in keys)
        part = None if fold is None else str(labels[fold][1][r])
        for name, values in stats:
            source, slot = _end_of(released[name], names)
            stat = current.get(source, source)
            if part is not None:
                slot = "value" if part == "estimate" else part
            row = rows.setdefault((texts, stat), {
                "query": query, "statistic": stat, "value": None, "lower": None,
                "upper": None, **{k: t for (k, _), t in zip(keys, texts, strict=True)}})
            row[slot] = float(values[r])
    return list(rows.values())


def _released_names(names: Sequence[str], doc: dict[str, Any]) -> dict[str, str]:
    """Each column's name at release: the recorded renames undone, last first (so after a
    swap of two names an interval's ends still pair with the value they belong to)."""
    out = {}
    steps = [s for s in doc.get("postprocessing") or []
             if isinstance(s, dict) and s.get("op") == "rename"
             and isinstance(s.get("mapping"), dict)]
    for name in names:
        original = name
        for step in reversed(steps):
            original = {str(v): str(k) for k, v in step["mapping"].items()}.get(original,
                                                                               original)
        out[name] = original
    return out


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if v != v else v


def tidy_table(rows: list[dict[str, Any]]) -> Any:
    """The tidy table of ``rows`` (:func:`tidy_rows`) as a pyarrow Table: the fixed columns,
    then one text column per key in order of first appearance."""
    import pyarrow as pa

    keys = list(dict.fromkeys(k for r in rows for k in r if k not in TIDY_COLUMNS))
    fields = [(c, pa.float64() if c in ("value", "lower", "upper") else pa.string())
              for c in (*TIDY_COLUMNS, *keys)]
    arrays = [pa.array([r.get(c) for r in rows], type=t) for c, t in fields]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def long_columns(query: str, table: Any, doc: dict[str, Any] | None = None
                 ) -> dict[str, list[Any] | np.ndarray]:
    """The long table's columns (:data:`LONG_COLUMNS`) for one release table named ``query``
    (not checked or sealed: :func:`concat_releases` does that). A long table keeps its rows."""
    doc = release_log_of(table) if doc is None else doc
    if _is_long(table):
        return {c: (table[c].to_numpy().astype(np.float64) if c == "value" else
                    [_label_text(v) for v in table[c].to_list()])
                for c in LONG_COLUMNS}
    labels, stats = _split(table, doc or {})
    rows = len(table)
    names = [n for n, _ in stats]
    if labels:
        group_by: str | None = ",".join(n for n, _ in labels)
        groups = [", ".join("" if t is None else t for t in texts) if len(texts) > 1
                  else texts[0]
                  for texts in zip(*[[_label_text(v) for v in vals] for _, vals in labels],
                                   strict=True)]
    else:
        group_by, groups = None, [None] * rows
    k = len(names)
    values = (np.column_stack([v for _, v in stats]).ravel() if k and rows
              else np.zeros(0, dtype=np.float64))
    return {"query": [query] * (rows * k), "group_by": [group_by] * (rows * k),
            "group": [g for g in groups for _ in range(k)],
            "statistic": names * rows, "value": values}


def release_rows(query: str, table: Any) -> list[dict[str, Any]]:
    """The long table's rows for one release table, as dicts (what ``dpframe release``
    collects while it runs)."""
    cols = long_columns(query, table)
    return [dict(zip(LONG_COLUMNS, (q, b, g, s, float(v)), strict=True))
            for q, b, g, s, v in zip(*(cols[c] for c in LONG_COLUMNS), strict=True)]


def _arrow_long(parts: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    schema = pa.schema([(c, pa.float64() if c == "value" else pa.string())
                        for c in LONG_COLUMNS])
    arrays = []
    for c in LONG_COLUMNS:
        if c == "value":
            arrays.append(pa.array(np.concatenate([np.asarray(p[c], dtype=np.float64)
                                                   for p in parts]), type=pa.float64()))
        else:
            arrays.append(pa.array([v for p in parts for v in p[c]], type=pa.string()))
    return pa.Table.from_arrays(arrays, schema=schema)


def _named(tables: Any) -> list[tuple[str | None, Any]]:
    if isinstance(tables, Mapping):
        for name in tables:
            if not isinstance(name, str) or not name:
                raise ParameterError("name the release tables with non-empty strings")
        return list(tables.items())
    if is_pandas_table(tables) or is_polars_table(tables):
        return [(None, tables)]
    if isinstance(tables, str | bytes) or not isinstance(tables, Iterable):
        raise ParameterError(
            "concat_releases takes release tables: one table, a list of them, or a dict "
            "{name: table}"
        )
    return [(None, t) for t in tables]


def _combined_document(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[int]]:
    """The log of a table combining these (verified) logs of one ledger: the most recent
    (logs of one ledger are prefixes of one another) and the union of their release ids."""
    if len({json.dumps(d.get("ledger_id")) for d in docs}) != 1:
        raise ParameterError(
            "concat_releases joins releases of one ledger only; keep releases of different "
            "ledgers in separate files"
        )

    latest = max(docs, key=lambda d: len(d.get("entries") or []))
    history = list(latest.get("entries") or [])
    for d in docs:
        mine = list(d.get("entries") or [])
        if canonical_json(mine) != canonical_json(history[:len(mine)]):
            raise IntegrityError(
                "these release logs of one ledger disagree about its history; they cannot be "
                "combined"
            )
    ids: list[int] = []
    for d in docs:
        ids.extend(int(i) for i in d.get("release_ids") or [] if int(i) not in ids)
    return latest, ids


def _origins(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The seals of the releases a (verified) table was computed from: its own, or for a
    post-processed table the ones its log names."""
    if isinstance(doc.get("derived_from"), list):
        return [dict(s) for s in doc["derived_from"]]
    seal = doc.get("seal") or {}
    return [{"table": seal.get("table"), "digest": seal.get("digest")}]


def _derived_document(base: dict[str, Any], sources: list[dict[str, Any]],
                      steps: list[dict[str, Any]]) -> dict[str, Any]:
    doc = {k: v for k, v in base.items() if k not in ("postprocessing", "derived_from")}
    doc["postprocessing"] = steps
    doc["derived_from"] = [s for d in sources for s in _origins(d)]
    return doc


def _signing_key(docs: list[dict[str, Any]], tables: list[Any], key: bytes | str | None,
                 what: str) -> None:
    """A signed input is re-signed only with its key: without one the signature would be
    silently dropped."""
    for i, (d, t) in enumerate(zip(docs, tables, strict=True)):
        if "hmac" in (d.get("seal") or {}):
            if key is None:
                raise ParameterError(
                    f"{what}: release table {i} is signed; pass key= (the steward's key) to "
                    "sign the result too (without it the signature would be dropped)"
                )
            check_seal(d, t, key=key, where=f"table {i}")


def concat_releases(tables: ReleaseTableT | Sequence[ReleaseTableT]
                    | Mapping[str, ReleaseTableT], *, key: bytes | str | None = None,
                    form: str = "tidy") -> ReleaseTableT:
    """One sealed table (the tidy form, module docstring: :data:`TIDY_COLUMNS` and one column
    per key, the format of ``dpframe release``'s output file) holding every cell of ``tables``:
    one release table, a list of them (queries named ``"release <id>"``) or a dict
    ``{name: table}``, of one ledger, in any mix of kinds — ``release``, group-by results,
    ``describe``, ``corr``/``cov`` matrices, ``histogram``, ``value_counts``, post-processed
    tables and earlier tidy tables.

    Every table must still match its own log (edited tables are refused: use the
    post-processing functions of this module). The result is a frame of the first table's
    library, sealed with the most recent of the logs, naming all their release ids, with
    ``postprocessing`` = the inputs' recorded steps (each with its query's name) then a
    ``concat`` step, and the seals of the releases they came from in ``derived_from``.
    Write it with ``dpf.write_parquet`` (or pandas ``to_parquet``) and ``dpf.read_log``
    verifies it. ``key``: sign it (required when an input is signed). ``form="long"``: the
    long table of earlier versions instead (:data:`LONG_COLUMNS`: interval ends on rows of their
    own, keys joined in one text column), which takes release tables and long tables; the tidy
    form takes release tables and tidy tables."""
    if form not in ("long", "tidy"):
        raise ParameterError('concat_releases: form must be "long" or "tidy"')
    named = _named(tables)
    if not named:
        raise ParameterError("concat_releases needs at least one release table")
    docs = [_release_doc(t, f"table {name if name is not None else i!s}")
            for i, (name, t) in enumerate(named)]
    _signing_key(docs, [t for _, t in named], key, "concat_releases")
    latest, ids = _combined_document(docs)
    parts: list[Any] = []
    queries: list[str] = []
    steps: list[dict[str, Any]] = []
    releases: dict[str, list[int]] = {}
    for (name, table), doc in zip(named, docs, strict=True):
        query = name if name is not None else "release " + ",".join(
            str(i) for i in doc.get("release_ids") or [])
        if form == "tidy" and _is_long(table):
            raise ParameterError(
                "concat_releases takes release tables and tidy tables; a long table (written "
                "by an earlier dpframe) joins concat_releases(..., form='long') only (its keys "
                "share one text column)"
            )
        if form == "long" and _is_tidy(table):
            raise ParameterError("a tidy table joins concat_releases(...) in its default "
                                 "form='tidy' only")
        part = (tidy_rows(query, table, doc) if form == "tidy"
                else long_columns(query, table, doc))
        if _is_long(table) or _is_tidy(table):
            names = [str(q) for q in dict.fromkeys(table["query"].to_list())]
            steps.extend(s for s in doc.get("postprocessing") or [])
            for s in doc.get("postprocessing") or []:
                if s.get("op") == "concat" and isinstance(s.get("releases"), dict):
                    releases.update(s["releases"])
        else:
            names = [query]
            steps.extend({**s, "query": query} for s in doc.get("postprocessing") or [])
            releases[query] = [int(i) for i in doc.get("release_ids") or []]
        clash = set(names) & set(queries)
        if clash:
            raise ParameterError(
                f"the query name(s) {sorted(clash)} appear twice; pass a dict {{name: table}} "
                "with distinct names (a table given twice is one release: give it once)"
            )
        queries.extend(names)
        parts.append(part)
    if form == "tidy":
        steps.append({"op": "concat", "queries": queries, "form": "tidy",
                      "releases": {q: releases.get(q, []) for q in queries}})
        arrow = tidy_table([r for p in parts for r in p])
    else:
        steps.append({"op": "concat", "queries": queries})
        arrow = _arrow_long(parts)
    first = named[0][1]
    if is_pandas_table(first):
        combined = arrow.to_pandas()
    else:
        import polars as pl

        combined = pl.from_arrow(arrow)
    attach_release_log(combined, _derived_document(latest, docs, steps), release_id=ids,
                       key=key)
    return combined


# -- post-processing -------------------------------------------------------------------------
def _derive(table: Any, step: dict[str, Any], apply: Callable[[Any], Any],
            key: bytes | str | None) -> Any:
    doc = _release_doc(table, "the table")
    _signing_key([doc], [table], key, step["op"] + "_release")
    out = apply(table)
    steps = [*(doc.get("postprocessing") or []), step]
    attach_release_log(out, _derived_document(doc, [doc], steps),
                       release_id=list(doc.get("release_ids") or []), key=key)
    return out


def _columns(table: Any) -> list[str]:
    return [str(c) for c in table.columns]


def round_release(table: ReleaseTableT, decimals: int | Mapping[str, int], *,
                  key: bytes | str | None = None) -> ReleaseTableT:
    """The release table with its statistic columns rounded (``numpy.round``: half to even)
    to ``decimals`` places (an int, for every statistic column, or ``{column: places}``),
    sealed with the step recorded (module docstring). Label columns (keys, bin edges, the
    index) are never rounded. ``key``: sign the result (required when ``table`` is signed)."""
    doc = _release_doc(table, "the table")
    _, stats = _split(table, doc)
    stat_names = [n for n, _ in stats]
    if isinstance(decimals, Mapping):
        places = dict(decimals)
        unknown = sorted(str(c) for c in places if c not in stat_names)
        if unknown:
            raise ParameterError(
                f"round_release rounds statistic columns only; {unknown} is not one of "
                f"{stat_names}"
            )
    else:
        places = dict.fromkeys(stat_names, decimals)
    for c, d in places.items():
        if isinstance(d, bool) or not isinstance(d, int | np.integer):
            raise ParameterError(f"decimals for {c!r} must be an int, got {d!r}")
    places = {c: int(d) for c, d in places.items()}

    def apply(t: Any) -> Any:
        new = {c: np.round(t[c].to_numpy().astype(np.float64), d) for c, d in places.items()}
        if is_pandas_table(t):
            out = t.copy()
            for c, v in new.items():
                out[c] = v
            return out
        import polars as pl

        return t.with_columns([pl.Series(c, v, dtype=pl.Float64) for c, v in new.items()])

    step = {"op": "round", "decimals": places}
    return _derive(table, step, apply, key)


def rename_release(table: ReleaseTableT, mapping: Mapping[str, str], *,
                   key: bytes | str | None = None) -> ReleaseTableT:
    """The release table with columns renamed (``{old: new}``), sealed with the step
    recorded (module docstring). ``key``: sign the result (required when ``table`` is
    signed)."""
    if not isinstance(mapping, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()):
        raise ParameterError("rename_release takes a dict {old column name: new name}")
    cols = _columns(table) if (is_pandas_table(table) or is_polars_table(table)) else []
    unknown = sorted(c for c in mapping if c not in cols)
    if unknown and cols:
        raise ParameterError(f"rename_release: no column {unknown} in {cols}")
    renamed = [mapping.get(c, c) for c in cols]
    if len(set(renamed)) != len(renamed):
        raise ParameterError("rename_release: two columns would get the same name")

    def apply(t: Any) -> Any:
        return t.rename(columns=dict(mapping)) if is_pandas_table(t) else t.rename(dict(mapping))

    return _derive(table, {"op": "rename", "mapping": dict(mapping)}, apply, key)


def sort_release(table: ReleaseTableT, by: str | Sequence[str], *, descending: bool = False,
                 key: bytes | str | None = None) -> ReleaseTableT:
    """The release table with its rows sorted by the columns ``by`` (stable; missing values
    last), sealed with the step recorded (module docstring). A pandas table with the default
    range index gets a fresh one; a labelled index moves with its rows. ``key``: sign the
    result (required when ``table`` is signed)."""
    names = [by] if isinstance(by, str) else list(by)
    cols = _columns(table) if (is_pandas_table(table) or is_polars_table(table)) else []
    if not names or not all(isinstance(c, str) for c in names):
        raise ParameterError("sort_release takes a column name or a list of column names")
    unknown = sorted(c for c in names if c not in cols)
    if unknown and cols:
        raise ParameterError(f"sort_release: no column {unknown} in {cols}")
    if not isinstance(descending, bool):
        raise ParameterError("descending must be True or False")

    def apply(t: Any) -> Any:
        if is_polars_table(t):
            return t.sort(names, descending=descending, nulls_last=True, maintain_order=True)
        import pandas as pd

        out = t.sort_values(names, ascending=not descending, kind="stable",
                            na_position="last")
        if isinstance(t.index, pd.RangeIndex):
            out = out.reset_index(drop=True)
        return out

    return _derive(table, {"op": "sort", "by": names, "descending": descending}, apply, key)
