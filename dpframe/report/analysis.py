"""A whole analysis drawn query by query (the report page of a ``dpf.concat_releases`` file).

Each query (:mod:`dpframe.report.queries`) gets a card: its name, a legend from its own log
entries (what statistic, ε and δ of its release, mechanism, declared bounds, interval level,
post-processing applied to it, a renamed column's released name), and the chart it is best
read as (:mod:`dpframe.report.plots`):

============================  ==================================================
histogram (bins on edges)      bars over the public edges on the column's axis
counts by one key              horizontal bars with interval whiskers
a statistic by two keys        heatmap, value and interval in each cell
correlation / covariance       matrix, value and interval in each cell
quantiles                      marks on the column's axis at its declared bounds
other statistics               dots with interval whiskers, one panel per statistic
============================  ==================================================

At most :data:`MAX_DRAWN` rows of a statistic are drawn (the values table below the charts and
``dpframe inspect --json`` have them all).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from dpframe import accounting as logview
from dpframe.report import plots
from dpframe.report.plots import Bar
from dpframe.report.queries import Query, Stat
from dpframe.report.svg import el, esc, fmt

__all__ = ["MAX_DRAWN", "STYLE", "analysis_html", "query_card"]

MAX_DRAWN = 40

STYLE = """
.dpf-cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(660px,1fr));gap:16px;
 align-items:start;margin:8px 0 16px}
.dpf-card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;
 min-width:0;overflow-x:auto}
.dpf-card h3{margin:0 0 2px;font-size:15px}
.dpf-card .dpf-what{margin:0 0 4px;color:#333}
.dpf-card ul.dpf-legend{margin:2px 0 6px;padding-left:16px;color:#555;font-size:12px}
.dpf-card .dpf-panel{margin:6px 0 0;font-size:12px;color:#333;font-weight:600}
.dpf-card .dpf-renamed{color:#8e2219}
"""


def _level(entries: Sequence[dict[str, Any]]) -> str:
    for e in entries:
        text = str(e.get("interval") or "")
        head = text.split(" ", 1)[0]
        try:
            level = float(head)
        except ValueError:
            continue
        # a quantile logged before issue 33 released a rank interval only; since, a value
        # interval too (its note names "value interval")
        kind = ("rank interval" if "rank" in text and "value interval" not in text
                else "intervals")
        return f"{level:.0%} {kind}"
    return "no intervals released"


def _label(keys: tuple[str | None, ...]) -> str:
    return ", ".join("-" if k is None else k for k in keys) or "(all rows)"


def _bars(stat: Stat) -> list[Bar]:
    return [Bar(_label(k), v, lo, hi) for k, v, lo, hi in
            zip(stat.keys, stat.values, stat.lower, stat.upper, strict=True)][:MAX_DRAWN]


def _bounds(entries: Sequence[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for e in entries:
        out.update(logview.declared_bounds(e))
    return out


def _float_key(x: str | None) -> float:
    try:
        return float(x) if x is not None else math.nan
    except ValueError:
        return math.nan


def _is_matrix(q: Query) -> bool:
    return "column" in q.key_names and set(q.key_names) <= {"statistic", "column"} and any(
        e.get("query") in ("corr", "cov") for e in q.entries)


def _is_count(q: Query, stat: Stat) -> bool:
    return all(e.get("query") == "count" for e in q.entries_of(stat)) and bool(q.entries)


def _groups(q: Query, stat: Stat, inner: Sequence[str]) -> dict[str, list[int]]:
    """The rows of ``stat`` by their keys other than ``inner`` (a histogram's bins, a
    quantile's level): one panel per group; a single group is labelled ""."""
    outer = [i for i, name in enumerate(q.key_names) if name not in inner]
    out: dict[str, list[int]] = {}
    for row, k in enumerate(stat.keys):
        out.setdefault(", ".join("-" if k[i] is None else str(k[i]) for i in outer
                                 if i < len(k)), []).append(row)
    return out


def _caption(text: str) -> str:
    return el("p", {"class": "dpf-panel"}, esc(text)) if text else ""


def _histogram(q: Query, stat: Stat) -> str:
    """Bars over the bins' edges; a histogram per group (``groupby(...).histogram``) is one
    panel per group, on the same count axis."""
    i, j = q.key_names.index("bin_lower"), q.key_names.index("bin_upper")
    column = next(iter(logview.columns_of(e) for e in q.entries_of(stat)), []) or [
        "bins (the log names no column)"]
    groups = list(_groups(q, stat, ("bin_lower", "bin_upper")).items())
    finite = [x for v in (stat.values, stat.lower, stat.upper) for x in v
              if x is not None and math.isfinite(x)]
    top = max([0.0, *finite]) or None
    panels = []
    for name, rows in groups[:12]:
        bins = [(_float_key(stat.keys[r][i]), _float_key(stat.keys[r][j]),
                 Bar(f"{name + ': ' if name else ''}[{stat.keys[r][i]}, {stat.keys[r][j]})",
                     stat.values[r], stat.lower[r], stat.upper[r]))
                for r in rows[:MAX_DRAWN * 2]]
        panels.append(_caption(name) + plots.edge_bars(
            bins, label=f"{q.name}: histogram{' of ' + name if name else ''}",
            column=column[0], height=230 if len(groups) == 1 else 170, top=top))
    return "".join(panels)


def _quantile_panels(q: Query) -> str:
    """Quantiles on the column's axis at its declared bounds; one axis per group, its marks
    the levels (a ``q`` key, or the ``quantile[0.25]`` columns of a group-by)."""
    marks: dict[str, list[Bar]] = {}
    bounds: dict[str, tuple[float, float]] = {}
    for s in q.stats:
        bounds.update(_bounds(q.entries_of(s)))
        level = s.source[len("quantile["):-1] if s.source.startswith("quantile[") else None
        for name, rows in _groups(q, s, ("q",)).items():
            for r in rows:
                at = q.key_names.index("q") if "q" in q.key_names else None
                text = (s.keys[r][at] if at is not None and at < len(s.keys[r]) else level)
                marks.setdefault(name, []).append(
                    Bar(f"q={text}" if text is not None else s.name, s.values[r], s.lower[r],
                        s.upper[r]))
    column = next(iter(bounds), "value")
    return "".join(_caption(name) + plots.axis_marks(
        bars[:MAX_DRAWN], label=f"{q.name}: quantiles of {column}{' for ' + name if name else ''}",
        column=column, bounds=bounds.get(column)) for name, bars in list(marks.items())[:12])


def _is_quantiles(q: Query) -> bool:
    return bool(q.entries) and all(e.get("query") == "quantile" for e in q.entries
                                   if e.get("query") != "key selection")


def _table(q: Query) -> str:
    """A table labelled by rows (``describe``: count, mean, std, ... by column), written out:
    its numbers are of different kinds and share no axis."""
    rows = list(dict.fromkeys(_label(k) for s in q.stats for k in s.keys))
    cell = {(_label(k), s.name): v for s in q.stats for k, v in zip(s.keys, s.values,
                                                                    strict=True)}
    head = el("tr", None, el("th", None, ""), *(el("th", {"class": "dpf-num"}, esc(s.name))
                                                 for s in q.stats))
    body = [el("tr", None, el("th", None, esc(r)), *(
        el("td", {"class": "dpf-num"}, esc(plots.short(cell.get((r, s.name)))))
        for s in q.stats)) for r in rows[:MAX_DRAWN]]
    return el("table", {"class": "dpf-values"}, head, *body)


def _matrix(q: Query, stat_names: Sequence[Stat]) -> str:
    """A corr/cov matrix: rows keyed by ``column`` (and ``statistic`` = estimate/lower/upper
    when intervals were released), one statistic per matrix column."""
    has_part = "statistic" in q.key_names
    part_at = q.key_names.index("statistic") if has_part else -1
    col_at = q.key_names.index("column")
    names = [s.name for s in stat_names]
    found: dict[tuple[str, str], dict[str, float | None]] = {}
    for s in stat_names:
        for k, v, lo, hi in zip(s.keys, s.values, s.lower, s.upper, strict=True):
            cell = found.setdefault((str(k[col_at]), s.name), {})
            if has_part:  # the long form: estimate, lower and upper are rows of their own
                cell[str(k[part_at])] = v
            else:  # the tidy form (or no interval): each cell carries its interval
                cell.update(estimate=v, lower=lo, upper=hi)
    cells = {key: Bar(f"{key[0]} × {key[1]}", d.get("estimate"), d.get("lower"), d.get("upper"))
             for key, d in found.items()}
    rows = [r for r in names if any((r, c) in cells for c in names)] or names
    if any(e.get("query") == "corr" for e in q.entries):
        return plots.matrix(rows, names, cells, label=f"{q.name}: correlation matrix")
    return plots.heatmap(rows, names, cells, label=f"{q.name}: matrix")


def _quantiles(q: Query, stat: Stat) -> str:
    entries = q.entries_of(stat)
    bounds = _bounds(entries)
    column = next(iter(bounds), "value")
    level_at = q.key_names.index("q") if "q" in q.key_names else None
    marks = [Bar(f"q={k[level_at]}" if level_at is not None else "q", v, lo, hi)
             for k, v, lo, hi in zip(stat.keys, stat.values, stat.lower, stat.upper,
                                     strict=True)]
    return plots.axis_marks(marks[:MAX_DRAWN], label=f"{q.name}: quantiles of {column}",
                            column=column, bounds=bounds.get(column))


def _two_keys(q: Query, stat: Stat) -> str:
    rows = list(dict.fromkeys(_label(k[:1]) for k in stat.keys))
    cols = list(dict.fromkeys(_label(k[1:2]) for k in stat.keys))
    cells = {(_label(k[:1]), _label(k[1:2])): Bar(_label(k), v, lo, hi)
             for k, v, lo, hi in zip(stat.keys, stat.values, stat.lower, stat.upper,
                                     strict=True)}
    return plots.heatmap(rows[:MAX_DRAWN], cols[:12], cells, label=f"{q.name}: {stat.name}")


def _chart(q: Query, stat: Stat) -> str:
    """The chart of one statistic of a query (module docstring's table)."""
    if "bin_lower" in q.key_names and "bin_upper" in q.key_names:
        return _histogram(q, stat)
    if not q.key_names and len(stat.values) == 1:  # one number: the statistic names the row
        bars = [Bar(stat.name, stat.values[0], stat.lower[0], stat.upper[0])]
        width = min(160, 14 + 7 * max(len(s.name[:24]) for s in q.stats))
        return plots.dot_chart(bars, label=f"{q.name}: {stat.name}", label_width=width)
    count = _is_count(q, stat)
    if count and len(q.key_names) == 2 and len(stat.values) > 1:
        return _two_keys(q, stat)
    if count and q.key_names:
        return plots.count_bars(_bars(stat), label=f"{q.name}: {stat.name}")
    axis = _bounds(q.entries_of(stat))
    bounds = next(iter(axis.values())) if len(axis) == 1 else None
    return plots.dot_chart(_bars(stat), label=f"{q.name}: {stat.name}", bounds=bounds)


_MEMBER = re.compile(r"^(?P<base>.+)\[(?P<label>[^\]]*)\]$")


def _families(q: Query) -> list[tuple[str, list[Stat]]]:
    """The query's statistics with the members of a family (``hours[0,10]``,
    ``hours[10,20]``: one statistic released as several columns, as a release spec's
    histogram and proportions are) together, in the order of their first column."""
    out: dict[str, list[Stat]] = {}
    for s in q.stats:
        m = _MEMBER.match(s.source)
        out.setdefault(m["base"] if m else "\0" + s.name, []).append(s)
    return [(k.lstrip("\0"), v) for k, v in out.items()]


def _edges(label: str) -> tuple[float, float] | None:
    parts = label.strip("[]()").split(",")
    if len(parts) != 2:
        return None
    lo, hi = _float_key(parts[0]), _float_key(parts[1])
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and hi > lo else None


def _family(q: Query, base: str, members: Sequence[Stat]) -> str:
    """A family drawn as one statistic: members whose labels are bins (``[0,10]``) as bars
    over their edges; by one key, counts and proportions as a heatmap (key × member), other
    statistics one dot panel per member; without keys, one bar or dot per member."""
    labels = [_MEMBER.match(s.source)["label"] for s in members]  # type: ignore[index]
    kinds = {str(e.get("query")) for s in members for e in q.entries_of(s)}
    counting = kinds <= {"count", "histogram", "proportions", "value_counts"}
    if not q.key_names:
        bars = [Bar(lab, s.values[0], s.lower[0], s.upper[0])
                for lab, s in zip(labels, members, strict=True) if s.values]
        edges = [_edges(lab) for lab in labels]
        if all(edges) and "histogram" in kinds:
            column = next(iter(logview.columns_of(e) for e in q.entries_of(members[0])),
                          []) or [base]
            return plots.edge_bars([(*e, b) for e, b in zip(edges, bars, strict=True)
                                    if e is not None], label=f"{q.name}: {base}",
                                   column=column[0])
        chart = plots.count_bars if counting else plots.dot_chart
        return chart(bars[:MAX_DRAWN], label=f"{q.name}: {base}")
    if counting and len(q.key_names) == 1:
        rows = list(dict.fromkeys(_label(k) for s in members for k in s.keys))
        cells = {(_label(k), lab): Bar(f"{_label(k)}, {lab}", v, lo, hi)
                 for lab, s in zip(labels, members, strict=True)
                 for k, v, lo, hi in zip(s.keys, s.values, s.lower, s.upper, strict=True)}
        return plots.heatmap(rows[:MAX_DRAWN], labels[:12], cells, label=f"{q.name}: {base}")
    return "".join(_caption(s.name) + _chart(q, s) for s in members)


def _legend(q: Query) -> str:
    """What the query is, from its own log entries: statistic, ε, δ, mechanisms, bounds,
    intervals, post-processing, renames."""
    items = []
    if not q.entries:
        items.append("no release of the log matches this query: its ε is not shown")
    else:
        ids = ", ".join(map(str, q.release_ids))
        items.append(f"release {ids}: ε = {fmt(q.epsilon)}"
                     + (f", δ = {fmt(q.delta)}" if q.delta else ""))
        mechanisms = sorted({str(e.get("mechanism")) for e in q.entries
                             if e.get("mechanism")})
        items.append("mechanism: " + ", ".join(mechanisms))
        items.extend(f"{c} declared in [{fmt(lo)}, {fmt(hi)}]"
                     for c, (lo, hi) in _bounds(q.entries).items())
        items.append(_level(q.entries))
    ranks = [r for s in q.stats for r in s.rank_error if r is not None]
    if ranks:
        values = any(lo is not None for s in q.stats for lo in s.lower)
        items.append(f"rank error ± {fmt(max(ranks))} ranks" + (
            " (the point's rank interval; the whiskers are the interval in the column's units)"
            if values else " (an interval in ranks, not in the column's units)"))
    steps = [s for s in q.steps if s.get("op") != "concat"]
    if steps:
        items.append("post-processing: " + "; ".join(_step_text(s) for s in steps))
    lis = [el("li", None, esc(t)) for t in items]
    lis += [el("li", {"class": "dpf-renamed"}, esc(
        f"column {s.name} holds {s.source} as released (renamed)"))
            for s in q.stats if s.source != s.name]
    return el("ul", {"class": "dpf-legend"}, *lis)


def _step_text(step: dict[str, Any]) -> str:
    op = str(step.get("op"))
    if op == "rename":
        mapping = step.get("mapping") or {}
        pairs = mapping.items() if isinstance(mapping, dict) else []
        return "renamed " + ", ".join(f"{k} → {v}" for k, v in pairs)
    if op == "round":
        places = step.get("decimals")
        texts = sorted({str(p) for p in (places.values() if isinstance(places, dict)
                                         else [places])})
        return "rounded to " + "/".join(texts) + " decimals"
    if op == "sort":
        by = step.get("by")
        return f"sorted by {', '.join(map(str, by if isinstance(by, list) else [by]))}"
    return op


def _what(q: Query) -> str:
    """The query's statistics as a reader names them, from its log entries (every entry of
    its release: a ``describe`` logs a count, means and deviations)."""
    seen: list[str] = []
    for e in q.entries:
        text = logview.statistic(e)
        if e.get("query") != "key selection" and text not in seen:
            seen.append(text)
    return "; ".join(seen) or "; ".join(s.name for s in q.stats) or "-"


def query_card(q: Query) -> str:
    """One query as a card: name, what it is, legend, charts."""
    panels: list[str] = []
    if _is_matrix(q):
        panels.append(_matrix(q, q.stats))
    elif _is_quantiles(q):
        panels.append(_quantile_panels(q))
    elif "statistic" in q.key_names:
        panels.append(_table(q))
    else:
        for base, members in _families(q):
            if len(members) > 1:
                entries = q.entries_of(members[0])
                panels.append(_caption(f"{base}: " + (logview.statistic(entries[0])
                                                      if entries else base)))
                panels.append(_family(q, base, members))
                continue
            s = members[0]
            entries = q.entries_of(s)
            title = s.name + (f": {logview.statistic(entries[0])}" if entries else "") + (
                "" if s.source == s.name else f" (released as {s.source})")
            shown = "" if len(s.values) <= MAX_DRAWN else f" (first {MAX_DRAWN} of {len(s.values)})"
            if (len(q.stats) > 1 and q.key_names) or shown:
                panels.append(el("p", {"class": "dpf-panel"}, esc(title + shown)))
            panels.append(_chart(q, s))
    return el("section", {"class": "dpf-card", "data-query": q.name},
              el("h3", None, esc(q.name)), el("p", {"class": "dpf-what"}, esc(_what(q))),
              _legend(q), *panels)


def analysis_html(queries: Sequence[Query]) -> str:
    """Every query's card, in a grid that fills the page's width."""
    return (f"<style>{STYLE}</style>"
            + el("div", {"class": "dpf-cards"}, *(query_card(q) for q in queries)))
