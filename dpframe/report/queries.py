"""The queries of a release file, read back from its values and its sealed log, for the report
page and ``dpframe inspect``.

A file written by ``dpf.concat_releases`` (or ``dpframe release``) holds a whole analysis as a
long table, one row per released cell: ``query, group_by, group, statistic, value`` (an
interval's ends are cells of their own, ``count_lower``/``count_upper``; several keys share
one ``group`` string). :func:`queries_of_long` turns it back into one :class:`Query` per
query name — its key columns, and per statistic the value with its interval per key — and
ties each query to the release(s) of the log it came from, so each is described by its own
log entries (two queries may both have a statistic called ``count``: each keeps its own ε
and mechanism). A long table in the tidy form (``value``, ``lower``, ``upper`` columns and
one column per key) is read the same way.

Post-processing is undone on the *names* only: after ``dpf.rename_release`` swapped two
columns, :attr:`Stat.source` is the name the statistic was released under, so its log entry
is still found (the values are never changed here).

Which release a query came from: a tidy table's concat step records it (``"releases":
{query: [ids]}``). A long table's log records the concatenated queries in order
(``postprocessing``: ``{"op": "concat", "queries": [...]}``) and the release ids in the same
order; when there are as many releases as queries they are paired in order, otherwise each
query takes the first unused release whose log entries name its statistics.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LONG", "TIDY", "Query", "Stat", "is_long", "queries_of_long", "query_of_table"]

#: the long table's columns, as files of this and earlier versions write them
LONG = ("query", "group_by", "group", "statistic", "value")
#: the tidy long table's fixed columns (every other column is a key)
TIDY = ("query", "statistic", "value", "lower", "upper")
_SUFFIX = re.compile(r"^(?P<base>.+)_(?P<end>lower|upper)$")


@dataclass
class Stat:
    """One statistic of a query: its column name in the file, the name it was released under
    (``source``), and per row its keys, value and interval."""

    name: str
    source: str
    keys: list[tuple[str | None, ...]] = field(default_factory=list)
    values: list[float | None] = field(default_factory=list)
    lower: list[float | None] = field(default_factory=list)
    upper: list[float | None] = field(default_factory=list)
    rank_error: list[float | None] = field(default_factory=list)

    def add(self, keys: tuple[str | None, ...], value: float | None, lower: float | None,
            upper: float | None, rank: float | None = None) -> None:
        self.keys.append(keys)
        self.values.append(value)
        self.lower.append(lower)
        self.upper.append(upper)
        self.rank_error.append(rank)


@dataclass
class Query:
    """One query of the file: its name, key columns, statistics, the release ids it came
    from, their log entries, and the post-processing steps that name it."""

    name: str
    key_names: list[str]
    stats: list[Stat]
    release_ids: list[int] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def entries_of(self, stat: Stat) -> list[dict[str, Any]]:
        """The log entries of one statistic: those of the query's release named as it was
        released; all the release's (but key selection) when none is (a histogram's ``count``
        is logged as ``histogram(age)``)."""
        mine = [e for e in self.entries if e.get("query") != "key selection"]
        named = [e for e in mine if str(e.get("name")) == stat.source]
        base = stat.source.split("[", 1)[0]  # a member of a family: hours[0,10] of `hours`
        return named or [e for e in mine if str(e.get("name")) == base] or mine

    @property
    def epsilon(self) -> float:
        return sum(_num(e.get("epsilon")) or 0.0 for e in self.entries)

    @property
    def delta(self) -> float:
        return sum(_num(e.get("delta")) or 0.0 for e in self.entries)


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def is_long(columns: Mapping[str, Sequence[Any]]) -> bool:
    """Whether a table's columns are a long table's (either form)."""
    names = list(columns)
    return names == list(LONG) or (names[:len(TIDY)] == list(TIDY))


def _text(x: Any) -> str | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return str(x)


def _split_group(group: str | None, n: int) -> tuple[str | None, ...]:
    if n == 0:
        return ()
    if group is None:
        return (None,) * n
    parts = group.split(", ")
    return tuple(parts) if len(parts) == n else (group, *([None] * (n - 1)))


_Cell = tuple[str, list[str], tuple[str | None, ...], str, float | None, float | None,
              float | None]


def _cells(columns: Mapping[str, Sequence[Any]]) -> list[_Cell]:
    """Every cell as ``(query, key names, keys, statistic, value, lower, upper)``; in the
    old form an interval end is a cell of its own (lower = upper = None)."""
    n = len(columns["query"])
    out: list[_Cell] = []
    if list(columns) == list(LONG):
        for i in range(n):
            by = _text(columns["group_by"][i])
            names = by.split(",") if by else []
            out.append((str(columns["query"][i]), names,
                        _split_group(_text(columns["group"][i]), len(names)),
                        str(columns["statistic"][i]), _num(columns["value"][i]), None, None))
        return out
    key_cols = [c for c in columns if c not in TIDY]
    used: dict[str, list[str]] = {}  # a query's keys: the key columns set in any of its rows
    for c in key_cols:
        for i in range(n):
            names = used.setdefault(str(columns["query"][i]), [])
            if _text(columns[c][i]) is not None and c not in names:
                names.append(c)
    for i in range(n):
        present = used.get(str(columns["query"][i]), [])
        out.append((str(columns["query"][i]), [_key_name(c) for c in present],
                    tuple(_text(columns[c][i]) for c in present),
                    str(columns["statistic"][i]), _num(columns["value"][i]),
                    _num(columns["lower"][i]), _num(columns["upper"][i])))
    return out


def _key_name(column: str) -> str:
    """A tidy table's key column as the release table named it: a key named like a fixed column
    (``statistic`` of a ``describe``) is written ``key_<name>``."""
    bare = column[len("key_"):] if column.startswith("key_") else column
    return bare if bare in TIDY else column


def _renamed_from(name: str, steps: Sequence[Mapping[str, Any]]) -> str:
    """The name a column had at release: the recorded renames undone, last first."""
    for step in reversed(steps):
        if step.get("op") == "rename" and isinstance(step.get("mapping"), Mapping):
            inverse = {str(v): str(k) for k, v in step["mapping"].items()}
            name = inverse.get(name, name)
    return name


def _build(name: str, keys: list[str], cells: list[tuple[tuple[str | None, ...], str,
                                                          float | None, float | None,
                                                          float | None]],
           steps: list[dict[str, Any]]) -> Query:
    """One query from its cells: interval ends (``x_lower``/``x_upper`` beside ``x``; a
    quantile table's ``lower``/``upper``) and a quantile's ``rank_error`` folded into their
    statistic's rows. Ends are paired with their
    statistic by the names they were released under, so a rename (even a swap) keeps each
    interval with its value."""
    source = {s: _renamed_from(s, steps) for _, s, _, _, _ in cells}
    released = set(source.values())
    current = {v: k for k, v in source.items()}
    ends: dict[tuple[tuple[str | None, ...], str], dict[str, float | None]] = {}
    order: list[str] = []
    for k, s, v, lo, hi in cells:
        m = _SUFFIX.match(source[s])
        if m and m["base"] in released:
            ends.setdefault((k, m["base"]), {})[m["end"]] = v
        elif source[s] == "rank_error" and "quantile" in released:
            ends.setdefault((k, "quantile"), {})["rank"] = v
        elif source[s] in ("lower", "upper") and "quantile" in released:
            # a list of quantile levels: its value interval's ends are columns of their own
            ends.setdefault((k, "quantile"), {})[source[s]] = v
        else:
            if source[s] not in order:
                order.append(source[s])
            if lo is not None or hi is not None:
                ends.setdefault((k, source[s]), {}).update(lower=lo, upper=hi)
    stats = {src: Stat(current[src], src) for src in order}
    for k, s, v, _, _ in cells:
        stat = stats.get(source[s])
        if stat is not None and stat.name == s:
            e = ends.get((k, source[s]), {})
            stat.add(k, v, e.get("lower"), e.get("upper"), e.get("rank"))
    return Query(name, keys, list(stats.values()), steps=steps)


def _steps_of(name: str, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [s for s in doc.get("postprocessing") or []
            if isinstance(s, dict) and (s.get("query") == name
                                        or (s.get("op") != "concat" and "query" not in s))]


def _release_names(doc: Mapping[str, Any]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for e in doc.get("entries") or []:
        if isinstance(e, dict) and isinstance(e.get("release_id"), int):
            out.setdefault(e["release_id"], set()).add(str(e.get("name")))
    return out


def _pair_releases(queries: list[Query], doc: Mapping[str, Any]) -> None:
    """Each query's release id(s) and log entries (module docstring: in order when there are
    as many releases as queries, else by the statistics' names)."""
    ids = [i for i in doc.get("release_ids") or [] if isinstance(i, int)]
    names = _release_names(doc)
    recorded: dict[str, Any] = {}
    for s in doc.get("postprocessing") or []:
        if isinstance(s, dict) and s.get("op") == "concat" and isinstance(s.get("releases"),
                                                                          dict):
            recorded = s["releases"]
    if recorded and all(isinstance(recorded.get(q.name), list) for q in queries):
        for q in queries:
            q.release_ids = [i for i in recorded[q.name] if isinstance(i, int)]
    elif len(ids) == len(queries):
        for q, i in zip(queries, ids, strict=True):
            q.release_ids = [i]
    else:
        free = list(ids)
        for q in queries:
            wanted = {s.source for s in q.stats}
            hit = next((i for i in free if wanted <= names.get(i, set())), None)
            if hit is None and len(free) == 1:
                hit = free[0]
            if hit is not None:
                q.release_ids = [hit]
                free.remove(hit)
    for q in queries:
        q.entries = [e for e in doc.get("entries") or []
                     if isinstance(e, dict) and e.get("release_id") in q.release_ids]


def _fit(keys: tuple[str | None, ...], n: int) -> tuple[str | None, ...]:
    """A row's keys as many as its query's (a file not written by dpframe may disagree)."""
    return (*keys[:n], *([None] * (n - len(keys))))


def queries_of_long(columns: Mapping[str, Sequence[Any]], doc: Mapping[str, Any]
                    ) -> list[Query]:
    """The queries of a long table (either form), in the order the concat step lists them
    (a sorted table keeps its queries' order), else the file's; each tied to its release and
    log entries."""
    grouped: dict[str, tuple[list[str], list[Any]]] = {}
    for query, key_names, keys, stat, value, lo, hi in _cells(columns):
        slot = grouped.setdefault(query, (key_names, []))
        if len(key_names) > len(slot[0]):
            slot[0][:] = key_names
        slot[1].append((keys, stat, value, lo, hi))
    listed = [str(n) for step in doc.get("postprocessing") or [] if isinstance(step, dict)
              and step.get("op") == "concat" and isinstance(step.get("queries"), list)
              for n in step["queries"]]
    order = sorted(grouped, key=lambda n: listed.index(n) if n in listed else len(listed))
    queries = [_build(name, grouped[name][0],
                      [(_fit(k, len(grouped[name][0])), *rest) for k, *rest in grouped[name][1]],
                      _steps_of(name, doc))
               for name in order]
    _pair_releases(queries, doc)
    return queries


def _label_name(name: str, values: Sequence[Any], stats: set[str]) -> str:
    """A pandas index level's name in a file (``__index_level_1__``) as Polars names such a
    label: ``column`` when it holds the table's column names (a matrix), else ``statistic``."""
    if not name.startswith("__index_level"):
        return name
    return "column" if {str(v) for v in values} <= stats else "statistic"


def query_of_table(columns: Mapping[str, Sequence[Any]], doc: Mapping[str, Any],
                   name: str) -> Query:
    """One release table (not a long table) as a query named ``name``: its label columns
    (text columns, a pandas index, a histogram's edges, quantile levels ``q``) are its keys,
    its floating-point columns its statistics."""
    fixed = {"bin_lower", "bin_upper", "q", "statistic", "column"}
    floating = {c for c, v in columns.items() if c not in fixed
                and not c.startswith("__index_level")
                and all(x is None or (isinstance(x, float | int) and not isinstance(x, bool))
                        for x in v)}
    labels = [c for c in columns if c not in floating]
    names = [_label_name(c, columns[c], floating) for c in labels]
    n = len(next(iter(columns.values()), []))
    cells: list[tuple[tuple[str | None, ...], str, float | None, float | None,
                      float | None]] = [
        (tuple(_text(columns[c][i]) for c in labels), s, _num(columns[s][i]), None, None)
        for i in range(n) for s in columns if s in floating]
    query = _build(name, names, cells, _steps_of(name, doc))
    _pair_releases([query], doc)
    return query
