"""The statistics of a release spec's query: ``"mean(income)"``, ``"cov(age, income)"`` or a
table, each with the parameters its kind takes (the words: :mod:`dpframe.spec._vocabulary`)."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from dpframe._validation import check_column, check_count, check_names
from dpframe.frames.bins import public_edges
from dpframe.mechanisms.quantiles import DEFAULT_MAX_CELLS
from dpframe.spec._columns import _key_list
from dpframe.spec._model import StatisticSpec
from dpframe.spec._toml import Path_, _Checker
from dpframe.spec._vocabulary import KINDS, OPTIONAL, PARAMETERS, SPEC_PARAMETERS, library_query

_STAT_KEYS = ("kind", "column", "columns", "bins", "keys", "q", "edges", "ci_share", "weight",
              "accuracy")
#: the keys of a statistic other than its kind, weight and accuracy
_PARAM_KEYS = ("column", "columns", "bins", "keys", "q", "edges", "ci_share")
_SHORTHAND = re.compile(
    rf"^\s*({'|'.join(map(re.escape, KINDS))})\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


def _statistic(c: _Checker, name: str, raw: Any, path: Path_,
               bounds: Mapping[str, tuple[float, float]],
               declared: Mapping[str, tuple[Any, ...]]) -> StatisticSpec:
    """One statistic: ``"mean(income)"``, ``"cov(age, income)"``, or a table
    ``{ kind = ..., column = ..., bins = ..., keys = [...], columns = [...], weight = ... }``
    (``declared``: the ``[keys]`` table, the default keys of value_counts/proportions)."""
    given: dict[str, Any] = {}
    if isinstance(raw, str):
        m = _SHORTHAND.match(raw)
        if m is None:
            kind_word = raw.split("(")[0].strip()
            close = difflib.get_close_matches(kind_word, KINDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise c.fail(path, f"unknown query kind {raw!r} for {name!r}{hint}; write "
                         '"count", "mean(income)", ... or { kind = "mean", column = "income" }')
        kind, arg = m.group(1), (m.group(2) or None)
        if arg is not None and "columns" in PARAMETERS.get(kind, ()):
            given["columns"] = [a.strip() for a in arg.split(",")]
        elif arg is not None:
            given["column"] = arg
        weight = 1.0
        target: float | None = None
    else:
        t = c.table(raw, path, f"statistic {name!r}")
        c.known(t, path, _STAT_KEYS, f"statistic {name!r}")
        kind_raw = c.required(t, "kind", path, f"statistic {name!r}", 'kind = "mean"')
        target = None
        if not isinstance(kind_raw, str) or kind_raw not in KINDS:
            close = difflib.get_close_matches(str(kind_raw), KINDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise c.fail((*path, "kind"), f"unknown query kind {kind_raw!r}{hint}; choose one "
                         f"of {', '.join(KINDS)}")
        kind = kind_raw
        given = {k: t[k] for k in _PARAM_KEYS if k in t}
        weight = c.positive(t.get("weight", 1.0), (*path, "weight"), f"weight of {name!r}")
        if "accuracy" in t:
            if "weight" in t:
                raise c.fail((*path, "weight"), f"{name!r}: give a weight (its part of the "
                             "query's share) or an accuracy (which sets its ε), not both")
            target = c.positive(t["accuracy"], (*path, "accuracy"), f"accuracy of {name!r}")
    stat = _parameters(c, StatisticSpec(name, kind, None, weight, path, target), given,
                       isinstance(raw, str), bounds, declared)
    if stat.edges is None:  # the builder's checks (edges: checked by the API's check above)
        c.library(lambda _: library_query(stat), None, path, f"statistic {name!r}")
    return stat


#: how each statistic with parameters is written, for messages
_EXAMPLES = {
    "histogram": '{ kind = "histogram", column = "age", bins = 10 }',
    "value_counts": '{ kind = "value_counts", column = "region", keys = ["a", "b"] }',
    "proportions": '{ kind = "proportions", column = "region", keys = ["a", "b"] }',
    "cov": '"cov(age, income)" or { kind = "cov", columns = ["age", "income"] }',
    "corr": '"corr(age, income)" or { kind = "corr", columns = ["age", "income"] }',
}


def _parameters(c: _Checker, stat: StatisticSpec, given: Mapping[str, Any], shorthand: bool,
                bounds: Mapping[str, tuple[float, float]],
                declared: Mapping[str, tuple[Any, ...]]) -> StatisticSpec:
    """``stat`` with the parameters its kind takes (:data:`PARAMETERS`; a column for the
    statistics of one column), each checked by the library's check: bins by
    :func:`dpframe._validation.check_count`, columns by ``check_names``/``check_column``,
    keys by :func:`dpframe.provenance._protect.check_key_list`. A column a statistic reads values of
    needs bounds; a key column needs public keys."""
    name, kind, path = stat.name, stat.kind, stat.path

    def at(*key: str | int) -> Path_:
        return path if shorthand else (*path, *key)

    allowed = SPEC_PARAMETERS[kind]
    keyed = "keys" in allowed  # a key column: public keys, no bounds
    _check_given(c, stat, given, allowed, at)
    column = None
    if "column" in given:
        column = c.string(given["column"], at("column"), f"column of {name!r}")
        if not keyed and "edges" not in given:  # (public edges bin any numeric column)
            _need_bounds(c, name, column, at("column"), bounds)
    columns = _columns(c, name, given, at, bounds)
    bins = None
    if "bins" in given:
        bins = c.library(functools.partial(check_count, "bins", minimum=1,
                                           maximum=DEFAULT_MAX_CELLS),
                         given["bins"], at("bins"), f"bins of {name!r}")
    stat = replace(stat, **_quantile_and_edges(c, name, given, at))
    keys = None
    if "keys" in given:
        assert column is not None
        keys = _key_list(c, given["keys"], at("keys"), column)
    elif keyed and column not in declared:
        raise c.fail(at("column"), f"{name!r}: {kind} of {column!r} needs public keys: "
                     f"declare them under [keys] ({column} = [...]) or give the statistic "
                     f"keys = [...], e.g. {_EXAMPLES[kind]}; keys are never read from the data")
    return replace(stat, column=column, bins=bins, keys=keys, columns=columns)


def _check_given(c: _Checker, stat: StatisticSpec, given: Mapping[str, Any],
                 allowed: tuple[str, ...], at: Callable[..., Path_]) -> None:
    """Refuse a parameter ``stat``'s kind does not take, then a missing one it needs."""
    name, kind, path = stat.name, stat.kind, stat.path
    for key in given:
        if key not in allowed:
            if key == "column" and not allowed:
                raise c.fail(at(key), f"{name!r}: {kind} counts rows and takes no column")
            takes = [k for k, ps in PARAMETERS.items() if key in ps]
            raise c.fail(at(key), f"{name!r}: {kind} takes no {key}" + (
                f" ({key} goes with {', '.join(takes)})" if takes else "")
                + (f"; it takes {', '.join(allowed)}" if allowed else ""))
    example = _EXAMPLES.get(kind, f'{{ kind = "{kind}", column = "income" }}')
    for key in allowed:
        if key not in given and key not in OPTIONAL.get(kind, ()) and not (
                key == "bins" and "edges" in given):
            raise c.fail(path, f"{name!r}: {kind} needs "
                         f"{'a column' if key == 'column' else key}" + (
                             " (or edges = [...], public bin edges)" if key == "bins" else "")
                         + f", e.g. {example}")
    if "bins" in given and "edges" in given:
        raise c.fail(at("edges"), f"{name!r}: give bins = <int> (equal bins of the bounds) or "
                     "edges = [...] (public bin edges), not both")


def _quantile_and_edges(c: _Checker, name: str, given: Mapping[str, Any],
                        at: Callable[..., Path_]) -> dict[str, Any]:
    """A quantile's ``q`` (a level, or an array of them) and ``ci_share``, and a histogram's
    ``edges`` (:func:`dpframe.frames.bins.public_edges`, the API's check); the levels and the
    share are checked by the quantile builder (:func:`library_query`)."""
    out: dict[str, Any] = {}
    if "q" in given:
        raw = given["q"]
        if isinstance(raw, list):
            if not raw:
                raise c.fail(at("q"), f"{name!r}: q must be a level or a non-empty array of "
                             "levels in [0, 1], e.g. q = [0.25, 0.5, 0.75]")
            out["q"] = tuple(c.number(x, at("q", i), f"q of {name!r}")
                             for i, x in enumerate(raw))
        else:
            out["q"] = c.number(raw, at("q"), f"q of {name!r}")
    if "ci_share" in given:
        out["ci_share"] = c.number(given["ci_share"], at("ci_share"), f"ci_share of {name!r}")
    if "edges" in given:
        out["edges"] = tuple(c.library(public_edges, given["edges"], at("edges"),
                                       f"edges of {name!r}"))
    return out


def _columns(c: _Checker, name: str, given: Mapping[str, Any], at: Callable[..., Path_],
             bounds: Mapping[str, tuple[float, float]]) -> tuple[str, ...]:
    """The ``columns`` of a statistic of several columns (cov, corr), each with bounds."""
    if "columns" not in given:
        return ()
    names = c.library(functools.partial(check_names, "columns"), given["columns"],
                      at("columns"), f"columns of {name!r}")
    for i, col in enumerate(names):
        c.library(functools.partial(check_column, name="columns"), col, at("columns", i),
                  f"columns of {name!r}")
        _need_bounds(c, name, col, at("columns", i), bounds)
    return tuple(names)


def _need_bounds(c: _Checker, name: str, column: str, path: Path_,
                 bounds: Mapping[str, tuple[float, float]]) -> None:
    if column not in bounds:
        raise c.fail(path, f"{name!r}: column {column!r} has no bounds; declare public "
                     f"bounds for it under [bounds] ({column} = [lower, upper]); bounds are "
                     "never read from the data")
