"""The ``[[query]]`` tables of a release spec: each query's statistics, grouping, filter,
mechanism and budget (a share of the run's ε, or target accuracies)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dpframe.spec._columns import _key_list
from dpframe.spec._filters import filter_conditions
from dpframe.spec._model import (
    DEFAULT_LEVEL,
    MECHANISMS,
    SHARE_TOLERANCE,
    QuerySpec,
    StatisticSpec,
)
from dpframe.spec._statistics import _EXAMPLES, _statistic
from dpframe.spec._toml import Path_, _Checker

#: the keys of a statistic a query names in its own table (one statistic, named like the query)
_ONE_STATISTIC = ("kind", "column", "columns", "bins", "q", "edges", "ci_share")
_QUERY_KEYS = ("name", "share", "accuracy", "level", *_ONE_STATISTIC[1:], "kind",
               "statistics", "group_by", "keys", "filter", "mechanism", "ci", "min_rows")


def _queries(c: _Checker, raw: Any, bounds: Mapping[str, tuple[float, float]],
             keys: Mapping[str, tuple[Any, ...]], default_mech: str) -> tuple[QuerySpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise c.fail(("query",), "write the queries as [[query]] tables")
    out: list[QuerySpec] = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        out.append(_query(c, item, ("query", i), names, bounds, keys, default_mech))
    _check_shares(c, out)
    return tuple(out)


def _query(c: _Checker, item: Any, path: Path_, names: set[str],
           bounds: Mapping[str, tuple[float, float]], keys: Mapping[str, tuple[Any, ...]],
           default_mech: str) -> QuerySpec:
    """One ``[[query]]`` (its name added to ``names``, the names used so far)."""
    t = c.table(item, path, "[[query]]")
    c.known(t, path, _QUERY_KEYS, "[[query]]")
    name = c.string(c.required(t, "name", path, "[[query]]", 'name = "overall"'),
                    (*path, "name"), "query name")
    if name in names:
        raise c.fail((*path, "name"), f"query name {name!r} is used twice")
    names.add(name)
    share = _share(c, t, path, name)
    stats = _query_statistics(c, t, path, name, bounds, keys)
    group_by, qkeys = _grouping(c, t, path, stats, keys)
    flt = filter_conditions(c, t, path)
    mech = c.choice(t.get("mechanism", default_mech), (*path, "mechanism"),
                    f"mechanism of {name!r}", MECHANISMS)
    level = _budget_mode(c, t, path, name, share, stats)
    if share is None and mech == "auto":  # targets invert one mechanism; auto picks per ε
        mech = "bounded"
    ci = None
    if "ci" in t:
        ci = c.number(t["ci"], (*path, "ci"), f"ci of {name!r}")
        if not 0 < ci < 1:
            raise c.fail((*path, "ci"), f"ci of {name!r} is the intervals' level, in (0, 1), "
                         f"e.g. ci = 0.95; got {t['ci']!r}")
    min_rows = None
    if "min_rows" in t:
        raw = t["min_rows"]
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise c.fail((*path, "min_rows"), f"min_rows of {name!r} is a public lower bound "
                         f"on the rows behind a private-size mean, a whole number ≥ 1; got "
                         f"{raw!r}")
        min_rows = raw
    return QuerySpec(name, share, stats, group_by, qkeys, flt, mech, path, level, ci, min_rows,
                     single="kind" in t)


def _share(c: _Checker, t: Mapping[str, Any], path: Path_, name: str) -> float | None:
    """The query's ``share`` of the run's ε and δ (None: target accuracies set its ε)."""
    if "share" not in t:
        return None
    share = c.positive(t["share"], (*path, "share"), f"share of {name!r}")
    if share > 1:
        raise c.fail((*path, "share"), f"share of {name!r} is {share:g}; shares are "
                     "parts of the run's epsilon and add up to 1")
    return share


def _query_statistics(c: _Checker, t: Mapping[str, Any], path: Path_, name: str,
                      bounds: Mapping[str, tuple[float, float]],
                      keys: Mapping[str, tuple[Any, ...]]) -> tuple[StatisticSpec, ...]:
    """The query's statistics: one (``kind``/``column``) or a ``[query.statistics]`` table."""
    if "statistics" in t and any(k in t for k in _ONE_STATISTIC):
        raise c.fail(path, f"query {name!r}: give either kind/column (one statistic) or "
                     "[query.statistics] (several), not both")
    if "statistics" in t:
        st = c.table(t["statistics"], (*path, "statistics"), "[query.statistics]")
        if not st:
            raise c.fail((*path, "statistics"), f"query {name!r} has no statistics")
        out = tuple(_statistic(c, sname, sraw, (*path, "statistics", sname), bounds, keys)
                    for sname, sraw in st.items())
        edged = [s for s in out if s.edges is not None]
        if edged and len(out) > 1:
            raise c.fail((*edged[0].path, "edges"), f"query {name!r}: a histogram over public "
                         "edges is its own release (frame.dp.histogram(column, edges=[...])); "
                         "give it a [[query]] of its own")
        return out
    if "kind" in t:
        one = {k: t[k] for k in _ONE_STATISTIC if k in t}
        stats = (_statistic(c, name, one, path, bounds, keys),)
        if "accuracy" in t:
            target = c.positive(t["accuracy"], (*path, "accuracy"), f"accuracy of {name!r}")
            stats = (replace(stats[0], path=(*path, "accuracy"), target=target),)
        return stats
    raise c.fail(path, f'query {name!r} needs kind = "count" / "mean" / ... (with '
                 "column = ...) or a [query.statistics] table")


def _grouping(c: _Checker, t: Mapping[str, Any], path: Path_, stats: tuple[StatisticSpec, ...],
              keys: Mapping[str, tuple[Any, ...]]
              ) -> tuple[str | tuple[str, ...] | None, tuple[Any, ...] | None]:
    """The query's ``group_by`` column and its public keys (the query's, else ``[keys]``), or
    its columns (an array) and their key tuples (the query's, else every combination of their
    ``[keys]``)."""
    group_by = t.get("group_by")
    if isinstance(group_by, list):
        return _multi_grouping(c, t, path, stats, keys)
    if group_by is None:
        if "keys" in t:
            raise c.fail((*path, "keys"), "keys without group_by (a query's keys are its "
                         "group_by's; the keys of a value_counts or proportions statistic go "
                         "under [keys] or in its own table, e.g. "
                         f"{_EXAMPLES['value_counts']})")
        return None, None
    group_by = c.string(group_by, (*path, "group_by"), "group_by")
    if "keys" in t:
        qkeys = _key_list(c, t["keys"], (*path, "keys"), group_by)
    elif group_by in keys:
        qkeys = keys[group_by]
    else:
        raise c.fail((*path, "group_by"), f"group_by {group_by!r} has no public keys: "
                     f"declare them under [keys] ({group_by} = [...]) or in the query "
                     "(keys = [...]); keys are never read from the data")
    if any(s.name == group_by for s in stats):
        raise c.fail((*path, "group_by"), f"a statistic is named like the group_by "
                     f"column {group_by!r}; rename it")
    return group_by, qkeys


def _multi_grouping(c: _Checker, t: Mapping[str, Any], path: Path_,
                    stats: tuple[StatisticSpec, ...], keys: Mapping[str, tuple[Any, ...]]
                    ) -> tuple[tuple[str, ...], tuple[Any, ...] | None]:
    """``group_by = ["region", "sex"]`` (as ``frame.dp.groupby([...], keys=[...])``): key tuples
    given as ``keys = [["North", "F"], ...]``, else every combination of the columns' ``[keys]``
    (the library's default)."""
    raw = t["group_by"]
    where = (*path, "group_by")
    columns = tuple(c.string(x, (*where, i), "group_by column") for i, x in enumerate(raw))
    if len(columns) < 2 or len(set(columns)) != len(columns):
        raise c.fail(where, "group_by as an array names two or more distinct columns, e.g. "
                     'group_by = ["region", "sex"]; one column: group_by = "region"')
    qkeys = None
    if "keys" in t:
        rows = t["keys"]
        if not isinstance(rows, list) or not rows or not all(
                isinstance(r, list) and len(r) == len(columns) for r in rows):
            raise c.fail((*path, "keys"), f"keys of group_by {list(columns)} are key tuples, "
                         f"one value per column, e.g. keys = [[\"North\", \"F\"], ...]")
        for j, col in enumerate(columns):
            _key_list(c, list(dict.fromkeys(r[j] for r in rows)), (*path, "keys"), col)
        qkeys = tuple(tuple(r) for r in rows)
        if len(set(qkeys)) != len(qkeys):
            raise c.fail((*path, "keys"), f"keys of group_by {list(columns)} repeat a tuple")
    else:
        undeclared = [col for col in columns if col not in keys]
        if undeclared:
            raise c.fail(where, f"group_by {undeclared[0]!r} has no public keys: declare them "
                         f"under [keys] ({undeclared[0]} = [...]) or give the key tuples "
                         "(keys = [[...], ...]); keys are never read from the data")
    clash = [s.name for s in stats if s.name in columns]
    if clash:
        raise c.fail(where, f"a statistic is named like the group_by column {clash[0]!r}; "
                     "rename it")
    return columns, qkeys


def _check_shares(c: _Checker, out: list[QuerySpec]) -> None:
    """The shares of the queries that have one must add up to 1."""
    shared = [(i, q) for i, q in enumerate(out) if q.share is not None]
    total = math.fsum(q.share for _, q in shared if q.share is not None)
    if shared and abs(total - 1.0) > SHARE_TOLERANCE:
        listing = ", ".join(f"{q.name} {q.share:g}" for _, q in shared)
        rest = " after the queries with target accuracies" if len(shared) < len(out) else ""
        raise c.fail(("query", shared[-1][0], "share"),
                     f"the queries' shares add up to {total:.12g}, not 1 ({listing}); shares "
                     f"split the run's epsilon (privacy.run_epsilon){rest} and must add up "
                     "to 1")


def _budget_mode(c: _Checker, t: Mapping[str, Any], path: Path_, name: str,
                 share: float | None, stats: tuple[StatisticSpec, ...]) -> float:
    """Check that a query has a share or target accuracies (not both, not neither); return
    its level (the probability of being within the targets)."""
    targets = [s.target is not None for s in stats]
    if share is not None:
        if any(targets) or "accuracy" in t:
            where = (*path, "accuracy") if "accuracy" in t else next(
                s.path for s in stats if s.target is not None)
            raise c.fail(where, f"query {name!r}: give a share of the run's epsilon or target "
                         "accuracies (which set the epsilon they need), not both")
        if "level" in t:
            raise c.fail((*path, "level"), f"query {name!r}: level goes with accuracy targets")
        return DEFAULT_LEVEL
    if "accuracy" in t and "statistics" in t:
        raise c.fail((*path, "accuracy"), f"query {name!r} has several statistics: give each "
                     'its own target, e.g. mean_income = { kind = "mean", column = "income", '
                     "accuracy = 500 }")
    if not any(targets):
        raise c.fail(path, f"query {name!r} needs share = 0.25 (its part of the run's "
                     "epsilon) or accuracy = ... (a target half-width that sets its epsilon)")
    if not all(targets):
        missing = next(s for s in stats if s.target is None)
        raise c.fail(missing.path, f"query {name!r} has target accuracies, so every statistic "
                     f"needs one; {missing.name!r} has none")
    level = c.number(t.get("level", DEFAULT_LEVEL), (*path, "level"), f"level of {name!r}")
    if not 0 < level < 1:
        raise c.fail((*path, "level"), f"level of {name!r} must be in (0, 1), e.g. 0.95; got "
                     f"{t.get('level')!r}")
    return level
