"""The ``[bounds]``, ``[keys]`` and ``[missing]`` tables of a release spec, each checked by the
library's own check (:mod:`dpframe.provenance._protect`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from dpframe.accounting.neighbours import NEIGHBOURS, Neighbours, check_neighbours
from dpframe.provenance import check_key_list, validate_bounds, validate_missing
from dpframe.spec._toml import Path_, _Checker


def _bounds(c: _Checker, raw: Any) -> dict[str, tuple[float, float]]:
    """``[bounds]``, each checked by :func:`dpframe.provenance._protect.validate_bounds`."""
    t = c.table(raw, ("bounds",), "[bounds]")
    if not t:
        raise c.fail(("bounds",), "[bounds] is empty; declare public bounds, e.g. age = [0, 120]")
    return {col: c.library(functools.partial(_one, validate_bounds, col), pair,
                           ("bounds", col), f"bounds.{col}") for col, pair in t.items()}




def neighbour_definition(c: _Checker, priv: Mapping[str, Any]
                         ) -> tuple[Neighbours | None, int | None]:
    """``privacy.neighbours`` (protect's words, :data:`dpframe.accounting.neighbours.NEIGHBOURS`:
    ``"replace"``, one row replaced, n public; ``"add_remove"``, one row added or removed, n
    private) and ``privacy.max_rows`` (a public bound on the rows, a whole number ≥ 1), passed
    to protect as ``neighbours=`` and ``max_rows=`` (protect checks their combination:
    ``max_rows`` belongs to add/remove)."""
    neighbours: Neighbours | None = None
    if "neighbours" in priv:
        chosen = c.choice(priv["neighbours"], ("privacy", "neighbours"),
                          "privacy.neighbours", NEIGHBOURS)
        neighbours = check_neighbours(chosen)  # (the Literal type of the checked word)
    max_rows = None
    if "max_rows" in priv:
        raw = priv["max_rows"]
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise c.fail(("privacy", "max_rows"), "privacy.max_rows is a public bound on the "
                         f"number of rows, a whole number ≥ 1; got {raw!r}")
        max_rows = raw
    return neighbours, max_rows


def _one(check: Callable[..., Mapping[str, Any]], column: str, value: Any,
         extra: tuple[Any, ...] = ()) -> Any:
    """``check({column: value}, *extra)[column]``: a library check of one column's entry."""
    return check({column: value}, *extra)[column]


def _key_list(c: _Checker, raw: Any, path: Path_, column: str) -> tuple[Any, ...]:
    """Public keys: :func:`dpframe.provenance._protect.check_key_list`, and TOML values of one
    kind."""
    raw = c.library(functools.partial(check_key_list, column), raw, path, f"keys of {column!r}")
    for i, k in enumerate(raw):
        if not isinstance(k, str | int | float | bool) or (isinstance(k, float)
                                                          and not math.isfinite(k)):
            raise c.fail((*path, i), f"key {k!r} of {column!r} must be a string or a finite "
                         "number")
    kinds = {str if isinstance(k, str) else bool if isinstance(k, bool) else float for k in raw}
    if len(kinds) > 1:
        raise c.fail(path, f"keys of {column!r} mix types: {raw!r}")
    return tuple(raw)


def _keys(c: _Checker, raw: Any, path: Path_) -> dict[str, tuple[Any, ...]]:
    t = c.table(raw, path, "[keys]")
    return {col: _key_list(c, keys, (*path, col), col) for col, keys in t.items()}


def _missing(c: _Checker, raw: Any, bounds: Mapping[str, tuple[float, float]]
             ) -> dict[str, str | float] | str:
    """``[missing]``, each rule checked by :func:`dpframe.provenance._protect.validate_missing`
    (``"drop"``, a fill word ``"lower"``/``"upper"``/``"midpoint"`` or a number within the
    bounds); or ``missing = "midpoint"`` (a fill word): one rule for every bounded column, as
    ``protect(missing="midpoint")``."""
    if isinstance(raw, str):
        c.library(functools.partial(validate_missing, bounds=bounds), raw, ("missing",),
                  "missing")
        return raw
    t = c.table(raw, ("missing",), "[missing]")
    return {col: c.library(functools.partial(_one, validate_missing, col, extra=(bounds,)), rule,
                           ("missing", col), f"missing.{col}") for col, rule in t.items()}
