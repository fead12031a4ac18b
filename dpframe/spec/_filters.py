"""The ``filter`` of a release spec's query: conditions ``column op value``, and ``any`` of
several."""

from __future__ import annotations

from typing import Any

from dpframe.spec._model import Condition
from dpframe.spec._toml import Path_, _Checker

#: Filter operators: comparisons, membership, a closed range and missing-value tests.
FILTER_OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in", "between", "is null",
              "is not null")
_ORDER_OPS = ("<", "<=", ">", ">=", "between")
_NO_VALUE_OPS = ("is null", "is not null")
_COND_KEYS = ("column", "op", "value")


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def filter_conditions(c: _Checker, t: dict[str, Any], path: Path_) -> tuple[Condition, ...]:
    """The conditions of a query's ``filter`` (one table or an array of them; none without)."""
    if "filter" not in t:
        return ()
    raw_f = t["filter"]
    if isinstance(raw_f, dict):
        raw_f = [raw_f]
    if not isinstance(raw_f, list) or not raw_f:
        raise c.fail((*path, "filter"), "filter must be an array of conditions, e.g. "
                     'filter = [{ column = "age", op = ">=", value = 18 }]')
    return tuple(_condition(c, x, (*path, "filter", j)) for j, x in enumerate(raw_f))


def _condition(c: _Checker, raw: Any, path: Path_) -> Condition:
    t = c.table(raw, path, "a filter condition")
    if "any" in t:
        return _any_of(c, t, path)
    c.known(t, path, (*_COND_KEYS, "any"), "a filter condition")
    column = c.string(c.required(t, "column", path, "a filter condition", 'column = "age"'),
                      (*path, "column"), "filter column")
    op = t.get("op")
    if op not in FILTER_OPS:
        raise c.fail((*path, "op") if "op" in t else path,
                     f"filter op must be one of {', '.join(map(repr, FILTER_OPS))}; got {op!r}")
    vpath: Path_ = (*path, "value") if "value" in t else path
    if op in _NO_VALUE_OPS:
        if "value" in t:
            raise c.fail(vpath, f"op {op!r} takes no value")
        return Condition(column, op, None, (), path)
    if "value" not in t:
        raise c.fail(path, f"op {op!r} needs a value")
    value = t["value"]
    _check_value(c, op, value, vpath)
    return Condition(column, op, value, (), path)


def _any_of(c: _Checker, t: dict[str, Any], path: Path_) -> Condition:
    """A condition ``{ any = [...] }``: the disjunction of its conditions."""
    if set(t) != {"any"}:
        raise c.fail(path, "a condition with 'any' takes nothing else")
    items = t["any"]
    if not isinstance(items, list) or not items:
        raise c.fail((*path, "any"), "'any' must be a non-empty array of conditions")
    return Condition(None, None, None, tuple(_condition(c, x, (*path, "any", i))
                                             for i, x in enumerate(items)), path)


def _check_value(c: _Checker, op: str, value: Any, vpath: Path_) -> None:
    """Refuse a value that ``op`` cannot compare with."""
    if op in ("in", "not in"):
        if not isinstance(value, list) or not value or not all(map(_is_scalar, value)):
            raise c.fail(vpath, f"op {op!r} needs a non-empty array of values, got {value!r}")
    elif op == "between":
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool)
                           for v in value) or not value[0] <= value[1]):
            raise c.fail(vpath, f"op 'between' needs [lower, upper] numbers, got {value!r}")
    elif not _is_scalar(value):
        raise c.fail(vpath, f"op {op!r} needs a single value, got {value!r}")
    elif op in _ORDER_OPS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise c.fail(vpath, f"op {op!r} compares numbers, got {value!r}")
