"""HTML views of dpframe's results, built from public facts only: released values and
intervals, the sealed log, the budget, the planner's table. No data is read here.

* :func:`release_html` — one section per released statistic: what it is (in the user's
  words, :mod:`dpframe.accounting._log_view`), ε, δ, mechanism, declared bounds, and an
  :func:`~dpframe.report.svg.interval_chart` of its values (the axis at the bounds for a
  statistic that lives inside them: mean, median, quantiles; a value on a bound in red); a
  whole analysis in one long table (``dpf.concat_releases``) one card per query, each drawn
  as it is read (:mod:`dpframe.report.analysis`);
* :func:`budget_html` — ε and δ spent of the budget, ε per release and per column;
* :func:`accuracy_html` — the planner's table with each query's half-width;
* :func:`estimate_html` — one ``dpf.Estimate`` with its interval.

Every fragment is wrapped in ``<div class="dpf-view">`` with its own small style sheet;
all text is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dpframe import accounting as logview
from dpframe.accounting.steward import spending
from dpframe.report.analysis import analysis_html
from dpframe.report.queries import is_long, queries_of_long, query_of_table
from dpframe.report.svg import IntervalRow, bar_chart, el, esc, fmt, interval_chart

__all__ = ["MAX_ROWS", "STYLE", "accuracy_html", "budget_html", "estimate_html",
           "log_html", "measurements_html", "release_html", "release_names", "wrap"]

#: rows drawn per statistic (a release can have 100,000 groups; the table has them all)
MAX_ROWS = 60
#: statistics whose values lie within the column's declared bounds: the axis is the bounds
_WITHIN_BOUNDS = frozenset({"mean", "median", "quantile"})

STYLE = """
.dpf-view{font-family:system-ui,sans-serif;font-size:13px;color:#222;max-width:760px}
.dpf-view h3{font-size:15px;margin:14px 0 2px}
.dpf-view .dpf-meta{color:#555;margin:0 0 4px}
.dpf-view table{border-collapse:collapse;margin:4px 0}
.dpf-view td,.dpf-view th{border-bottom:1px solid #ddd;padding:2px 8px;text-align:left}
.dpf-view .dpf-num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.dpf-view .dpf-note{color:#777}
"""


def wrap(*parts: str) -> str:
    """Fragments as one self-contained block (its style sheet inside)."""
    return f'<div class="dpf-view"><style>{STYLE}</style>{"".join(parts)}</div>'


def _float(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _entries(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entries of the releases the table holds (all entries when it does not say)."""
    entries = [e for e in document.get("entries") or [] if isinstance(e, dict)]
    ids = document.get("release_ids")
    if isinstance(ids, list) and ids:
        mine = [e for e in entries if e.get("release_id") in ids]
        return mine or entries
    return entries


def _group_columns(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for e in entries:
        g = e.get("group_by")
        for c in (g if isinstance(g, list | tuple) else str(g or "").split(",")):
            if c and c not in out:
                out.append(str(c))
    return out


def _labels(columns: Mapping[str, list[Any]], keys: Sequence[str], n: int) -> list[str]:
    if "bin_lower" in columns and "bin_upper" in columns:
        last = n - 1
        return [f"[{fmt(_float(a))}, {fmt(_float(b))}{']' if i == last else ')'}"
                for i, (a, b) in enumerate(zip(columns["bin_lower"], columns["bin_upper"],
                                               strict=True))]
    present = [k for k in keys if k in columns]
    if not present:
        return [""] * n if n == 1 else [str(i) for i in range(n)]
    return [", ".join(str(columns[k][i]) for k in present) for i in range(n)]


def _value_columns(columns: Mapping[str, list[Any]], skip: set[str]) -> list[str]:
    names = [c for c in columns if c not in skip and not c.startswith("__index_level")]
    return [c for c in names
            if not (re.search(r"_(lower|upper)$", c) and c.rsplit("_", 1)[0] in names)
            and not c.endswith("_rank_error")]  # a quantile's public rank interval


def _is_matrix(columns: Mapping[str, list[Any]]) -> bool:
    """A table labelled by rows (describe, cov, corr: a pandas index or a Polars
    ``statistic``/``column`` column), drawn as a table rather than as charts."""
    return any(c.startswith("__index_level") or c in ("statistic", "column") for c in columns)


def _plain_table(columns: Mapping[str, list[Any]], index: Sequence[Any] | None) -> str:
    names = [c for c in columns if not c.startswith("__index_level")]
    labels = index if index is not None else next(
        (columns[c] for c in columns if c.startswith("__index_level")), None)
    head = el("tr", None, *(el("th", None, esc(h)) for h in
                            ([""] if labels is not None else []) + names))
    n = len(next(iter(columns.values()), []))
    rows = [el("tr", None,
               *([el("th", None, esc(labels[i]))] if labels is not None else []),
               *(el("td", {"class": "dpf-num"},
                    esc(fmt(v) if isinstance(v, float) else v))
                 for v in (columns[c][i] for c in names)))
            for i in range(n)]
    return el("table", {"class": "dpf-values"}, head, *rows)


def _owner(column: str, by_name: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The log entries of the query a table column holds (``m``, ``q[0.25]``; a histogram's
    or value counts' ``count`` column is its one query)."""
    if column in by_name:
        return by_name[column]
    base = column.split("[", 1)[0]
    if base in by_name:
        return by_name[base]
    return next(iter(by_name.values())) if len(by_name) == 1 else []


def _level(entries: Sequence[Mapping[str, Any]]) -> str:
    for e in entries:
        m = re.match(r"^([0-9.]+) confidence interval", str(e.get("interval") or ""))
        if m:
            return f"{float(m[1]):.0%} intervals"
    return "no intervals released"


def _stat_section(column: str, columns: Mapping[str, list[Any]], labels: Sequence[str],
                  entries: Sequence[Mapping[str, Any]]) -> str:
    values = [_float(v) for v in columns[column]]
    lows = columns.get(f"{column}_lower")
    highs = columns.get(f"{column}_upper")
    rows = [IntervalRow(labels[i], v,
                        None if lows is None else _float(lows[i]),
                        None if highs is None else _float(highs[i]))
            for i, v in enumerate(values[:MAX_ROWS]) if v is not None]
    first = entries[0] if entries else {}
    bounds = logview.declared_bounds(first)
    axis = (next(iter(bounds.values())) if len(bounds) == 1
            and str(first.get("query")) in _WITHIN_BOUNDS else None)
    eps = sum(_float(e.get("epsilon")) or 0.0 for e in entries)
    dlt = sum(_float(e.get("delta")) or 0.0 for e in entries)
    mechanisms = sorted({str(e.get("mechanism")) for e in entries})
    meta = [logview.statistic(first) if first else "not in the log",
            f"ε = {fmt(eps)}" + (f", δ = {fmt(dlt)}" if dlt else ""),
            "mechanism: " + (", ".join(mechanisms) or "-"),
            *(f"{c} declared in [{fmt(lo)}, {fmt(hi)}]" for c, (lo, hi) in bounds.items()),
            _level(entries)]
    on_bound = 0 if axis is None else sum(v in axis for v in values if v is not None)
    if on_bound:
        meta.append(f"{on_bound} of {len(values)} on a bound")
    more = (f'<p class="dpf-note">first {MAX_ROWS} of {len(values)} rows drawn</p>'
            if len(values) > MAX_ROWS else "")
    chart = interval_chart(rows, bounds=axis, label=f"{column}: released values")
    return el("section", {"class": "dpf-stat", "data-column": column},
              el("h3", None, esc(column)),
              el("p", {"class": "dpf-meta"}, esc(" · ".join(meta))), chart, more)


def release_html(columns: Mapping[str, list[Any]], document: Mapping[str, Any], *,
                 index: Sequence[Any] | None = None) -> str:
    """The sections of a release table (``columns``: name → values, as released; ``index``:
    a pandas table's row labels where they carry meaning) and the log it carries. A table
    labelled by rows (describe, cov, corr) is shown as a table, with its statistics' ε and
    mechanisms; a long table (either form) as one card per query
    (:func:`dpframe.report.analysis.analysis_html`)."""
    entries = _entries(document)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("query") != "key selection":
            by_name.setdefault(str(e.get("name")), []).append(e)
    keys = _group_columns(entries)
    n = len(next(iter(columns.values()), []))
    labels = _labels(columns, keys, n)
    stats = _value_columns(columns, {*keys, "bin_lower", "bin_upper"})
    ids = document.get("release_ids")
    if is_long(columns):
        queries = queries_of_long(columns, document)
        return el("p", {"class": "dpf-meta"}, esc(
            f"{len(queries)} quer{'ies' if len(queries) != 1 else 'y'} in one file, "
            f"{n} released cells")) + analysis_html(queries)
    head = el("p", {"class": "dpf-meta"}, esc(
        f"{n} row{'s' if n != 1 else ''}; "
        + (f"release {', '.join(map(str, ids))} of ledger {document.get('ledger_id')}"
           if isinstance(ids, list) and ids else "release log attached")))
    if index is None and _is_matrix(columns):  # a matrix or describe file: as a card
        name = ("release " + ", ".join(map(str, ids)) if isinstance(ids, list) and ids
                else "table")
        return head + analysis_html([query_of_table(columns, document, name)])
    if index is not None or _is_matrix(columns):
        return head + _plain_table(columns, index) + el("p", {"class": "dpf-meta"}, esc(
            "; ".join(f"{name}: {logview.statistic(es[0])}, ε = "
                      f"{fmt(sum(_float(e.get('epsilon')) or 0.0 for e in es))}"
                      for name, es in by_name.items())))
    return head + "".join(_stat_section(c, columns, labels, _owner(c, by_name)) for c in stats)


def release_names(columns: Mapping[str, list[Any]], document: Mapping[str, Any]
                  ) -> dict[int, str]:
    """Release id → the names of the file's queries it holds (a long table's; empty for a
    single release table)."""
    if not is_long(columns):
        return {}
    out: dict[int, list[str]] = {}
    for q in queries_of_long(columns, document):
        for i in q.release_ids:
            out.setdefault(i, []).append(q.name)
    return {i: ", ".join(names) for i, names in out.items()}


def budget_html(document: Mapping[str, Any], *, last: int = 30, heading: str = "h3",
                names: Mapping[int, str] | None = None) -> str:
    """ε and δ spent of the budget, ε per release (the ``last`` ones; labelled by ``names``,
    the query each release is in the file as, where given) and per column."""

    summary = spending(document.get("entries"))
    raw = document.get("budget")
    budget: dict[str, Any] = raw if isinstance(raw, dict) else {}
    total = _float(budget.get("epsilon"))
    spent = _float(budget.get("epsilon_spent"))
    line = (f"ε spent {fmt(spent)} of {fmt(total)}; δ spent "
            f"{fmt(_float(budget.get('delta_spent')))} of {fmt(_float(budget.get('delta')))}"
            if budget else f"ε in this log: {fmt(summary['epsilon_in_log'])} (no budget recorded)")
    releases = summary["releases"][-last:]
    names = names or {}
    per_release = [(names.get(r["release_id"]) or f"release {r['release_id']}"
                    + ("" if not names else " (not in this file)"), float(r["epsilon"]))
                   for r in releases]
    per_column = [(c, float(a["epsilon"])) for c, a in summary["by_column"].items()]
    return (el(heading, None, "Budget") + el("p", {"class": "dpf-meta budget"}, esc(line))
            + el("div", {"class": "dpf-budget"},
                 el("div", None,
                    el("p", {"class": "dpf-meta"}, "ε by query" if names else "ε by release"),
                    bar_chart(per_release, total=total, label="ε spent per release",
                              label_width=170 if names else 120)),
                 el("div", None,
                    el("p", {"class": "dpf-meta"}, "ε by column (a row count is under (rows))"),
                    bar_chart(per_column, total=total, label="ε spent per column"))))


def measurements_html(measurements: Sequence[Mapping[str, Any]],
                      names: Mapping[int, str] | None = None) -> str:
    """One row per measurement (``inspect``'s summaries:
    :func:`dpframe.accounting.steward.spending`): release (and the query of the file it is,
    from ``names``), name, statistic, part, mechanism, ε, δ, scale, domain in the statistic's
    units."""
    head = ["release", "name", "statistic", "part", "mechanism", "ε", "δ", "scale",
            "domain (statistic's units)"]
    rows = []
    for m in measurements:
        rid = m.get("release_id")
        query = (names or {}).get(rid) if isinstance(rid, int) else None
        cells = [f"{rid} ({query})" if query else rid, m.get("name"), m.get("statistic"),
                 m.get("part"),
                 m.get("mechanism"), fmt(_float(m.get("epsilon"))),
                 fmt(_float(m.get("delta"))), fmt(_float(m.get("scale"))),
                 m.get("domain_text")]
        rows.append(el("tr", None, *(
            el("td", {"class": "dpf-num" if j in (5, 6, 7) else None},
               esc("-" if c is None else c)) for j, c in enumerate(cells))))
    return el("table", {"class": "dpf-measurements"},
              el("tr", None, *(el("th", {"class": "dpf-num" if j in (5, 6, 7) else None},
                                  esc(h)) for j, h in enumerate(head))), *rows)


def log_html(columns: Mapping[str, list[Any]], *, last: int = 200) -> str:
    """A log frame (``frame.dp.log``, ``dpf.read_log(..., as_frame=...)``) as the readable
    columns: its ``last`` measurements, then its ε by release and by column."""

    n = len(next(iter(columns.values()), []))
    entries = [{c: _plain(columns[c][i]) for c in columns} for i in range(n)]
    summary = spending(entries)
    shown = summary["measurements"][-last:]
    note = (f"last {len(shown)} of {n} measurements" if n > len(shown)
            else f"{n} measurement{'s' if n != 1 else ''}")
    return (el("h3", None, "Accounting log") + el("p", {"class": "dpf-meta"}, esc(note))
            + measurements_html(shown)
            + el("p", {"class": "dpf-meta"}, "ε by release")
            + bar_chart([(f"release {r['release_id']}", float(r["epsilon"]))
                         for r in summary["releases"][-30:]], total=None,
                        label="ε spent per release")
            + el("p", {"class": "dpf-meta"}, "ε by column (a row count is under (rows))")
            + bar_chart([(c, float(a["epsilon"])) for c, a in summary["by_column"].items()],
                        total=None, label="ε spent per column"))


def _plain(value: Any) -> Any:
    """A frame cell as the JSON value a stored entry holds (NaN and NA as None, NumPy
    scalars as Python numbers)."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, list | tuple | str):
        try:
            value = value.item()
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def accuracy_html(columns: Mapping[str, list[Any]]) -> str:
    """The planner's table: each query's half-width at 1 − α, before anything is spent."""
    head = ["name", "statistic", "ε", "± half-width", "probability", "mechanisms", "note"]
    rows = []
    for i, name in enumerate(columns.get("name", [])):
        alpha = _float(columns["alpha"][i]) if "alpha" in columns else None
        cells = [name, columns["query"][i], fmt(_float(columns["epsilon"][i])),
                 "± " + fmt(_float(columns["half_width"][i])),
                 "-" if alpha is None else f"{1 - alpha:.3g}",
                 columns.get("mechanisms", [""] * (i + 1))[i],
                 columns.get("note", [""] * (i + 1))[i]]
        rows.append(el("tr", None, *(
            el("td", {"class": "dpf-num" if j in (2, 3, 4) else None}, esc(c))
            for j, c in enumerate(cells))))
    table = el("table", {"class": "dpf-accuracy"},
               el("tr", None, *(el("th", None, esc(h)) for h in head)), *rows)
    return (el("h3", None, "Planned accuracy (nothing spent)")
            + el("p", {"class": "dpf-meta"}, esc(
                "each answer lies within ± half-width of the exact statistic with the "
                "probability shown, whatever the data"))
            + table)


def estimate_html(estimate: Any) -> str:
    """One estimate: ``value ± half-width``, its interval as a bar, and the level."""
    v, lo, hi = float(estimate.value), float(estimate.lower), float(estimate.upper)
    pad = max((hi - lo) * 0.25, abs(v) * 1e-6, 1e-9)
    chart = interval_chart([IntervalRow("", v, lo, hi)], bounds=(lo - pad, hi + pad),
                           label=f"{estimate} ({estimate.level:.0%} interval)", width=360,
                           label_width=20)
    return wrap(el("p", {"class": "dpf-estimate"}, el("b", None, esc(str(estimate))), esc(
        f"  ({estimate.level:.0%} interval [{fmt(lo)}, {fmt(hi)}])")), chart)
