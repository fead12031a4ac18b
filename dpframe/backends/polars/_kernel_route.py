"""A LazyFrame over dpframe's own in-memory copy, aggregated by the numpy kernel.

A LazyFrame whose plan reads an in-memory frame was collected at protect into dpframe's byte
copy (:meth:`PolarsLazyBackend.snapshot`, :func:`._memory.own_polars`), and releases read that
copy's ``.lazy()`` plan. When a release's plan is that bare scan, its additive aggregates are
the eager Polars frame's: the scanned frame is handed to :mod:`dpframe.engine._kernel`'s numpy
kernel as it is (nothing is collected or copied), and the same exact fixed-point sums run there
instead of as Polars expressions. Every partial sum is an integer-valued double below 2⁵³
(Casacuberta et al. 2022; :mod:`dpframe.engine._aggregation`), exact in any order, so the
results are bit for bit the expressions' ones. A derived plan (filters, new columns) keeps the
expressions: collecting its rows would materialise whole columns, and on a LazyFrame only
aggregates are collected (DESIGN §1).

The route is chosen from the plan's structure and the protected data set's public size only,
never from a value. The snapshot of an in-memory LazyFrame is made as that bare scan
(:func:`bare_scan`), so its route is known when it is made and its first release walks no
plan. It reads the frame the expression path would scan, dpframe's copy and
nothing else (DESIGN §2, rule 1).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe import engine
from dpframe._util.identity import IdentityMap
from dpframe._util.polars_plan import all_nodes
from dpframe.backends._private import private
from dpframe.errors import DPFrameError
from dpframe.query import Agg

__all__ = ["bare_scan", "in_memory_scan", "kernel_sums"]


@dataclass(frozen=True)
class _Route:
    """A bare scan's frame (``scanned``, registered as dpframe's private frame: its column
    views are read once) and its rows (the protected data set's public size)."""

    rows: int
    scanned: Any


#: :func:`_route`'s answers by plan identity (a protected plan is immutable); False: no route.
_ROUTES: IdentityMap[_Route | bool] = IdentityMap()


def bare_scan(frame: Any) -> Any:
    """``frame.lazy()`` (``frame``: an eager Polars frame of dpframe's own, never written),
    with its route remembered: the plan of ``DataFrame.lazy()`` is one bare scan of
    ``frame``, so the route is the one :func:`_plan_route` would read from it (tested)."""
    lazy = frame.lazy()
    _ROUTES.set(lazy, _Route(int(frame.height), private(frame)))
    return lazy


def in_memory_scan(lazy: Any) -> bool:
    """Whether ``lazy``'s plan is one bare scan of an in-memory frame (the kernel's route;
    remembered per plan, so a snapshot made by :func:`bare_scan` answers at once)."""
    return _route(lazy) is not None


def _route(lazy: Any) -> _Route | None:
    """The kernel route of ``lazy``'s plan, or None when it is not one bare scan of an
    in-memory frame (remembered per plan)."""
    known = _ROUTES.get(lazy)
    if known is None:
        known = _plan_route(lazy) or False
        with contextlib.suppress(TypeError):  # not weakly referable: decided again next time
            _ROUTES.set(lazy, known)
    return known if isinstance(known, _Route) else None


def _plan_route(lazy: Any) -> _Route | None:
    import polars as pl

    try:
        nodes = [node for _nt, node in all_nodes(lazy)]
    except DPFrameError:  # a plan Polars does not show in full: the expressions decide
        return None
    if len(nodes) != 1 or type(nodes[0]).__name__ != "DataFrameScan":
        return None
    scan = nodes[0]
    if scan.projection is not None or scan.selection is not None:
        return None
    return _Route(int(scan.df.height()), private(pl.DataFrame._from_pydf(scan.df)))


def kernel_sums(lazy: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                keys: Sequence[Any] | None, eager: Any) -> dict[Agg, np.ndarray] | None:
    """The additive aggregates of ``lazy`` by the numpy kernel (``eager``: the eager Polars
    adapter; called inside :func:`dpframe.engine.aggregate`'s pass, as its engine path), or
    None where the kernel does not apply: a plan that is not a bare in-memory scan, several
    group columns, products of columns, units, a column the kernel cannot read
    (by dtype), or a group-by with fewer than one declared key per
    :data:`~dpframe.engine.POLARS_ROWS_PER_KEY` scanned rows (Polars' parallel group-by is
    faster; decided on the scan's public size)."""
    if isinstance(group_by, tuple) or any(a.kind in ("sum_prod", "units") for a in aggs):
        return None
    route = _route(lazy)
    if route is None:
        return None
    if group_by is not None and len(keys or ()) * engine.POLARS_ROWS_PER_KEY < route.rows:
        return None
    return engine.forced_numpy_sums(route.scanned, eager, aggs, columns, missing, group_by, keys)
