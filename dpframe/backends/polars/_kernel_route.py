"""A LazyFrame over dpframe's own in-memory copy, aggregated by the numpy kernel.

A LazyFrame whose plan reads an in-memory frame was collected at protect into dpframe's byte
copy (:meth:`PolarsLazyBackend.snapshot`, :func:`._memory.own_polars`), and releases read that
copy's ``.lazy()`` plan or a verified derivation of it. When such a plan is one scan of an
in-memory frame plus row-wise steps only (projections, filters, new columns), its additive
aggregates are the eager Polars frame's: the columns the release needs are taken from the
scanned frame as they are (a bare scan: no copy at all) or collected by Polars (a derived plan),
and the same exact fixed-point sums run in :mod:`dpframe.engine._kernel`'s numpy kernel instead
of as Polars expressions. Every partial sum is an integer-valued double below 2⁵³
(Casacuberta et al. 2022, §4; :mod:`dpframe.engine._aggregation`), exact in any order, so the
results are bit for bit the expressions' ones.

The route is chosen from the plan's structure and the protected data set's public size only:
never from a value, a derived frame's row count, or anything the plan computes. The fast path
reads exactly the plan the expression path would collect, hence only dpframe's copy (DESIGN §2,
rule 1).
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

__all__ = ["kernel_sums"]

#: Plan nodes that keep or drop rows of their input or compute per-row columns.
_ROWWISE_NODES = frozenset({"DataFrameScan", "SimpleProjection", "Select", "HStack", "Filter"})


@dataclass(frozen=True)
class _Route:
    """How a plan's columns reach the kernel: ``scanned`` is the scanned frame itself when the
    plan is that bare scan (else the needed columns are collected); ``rows``: the scanned
    frame's rows (the protected data set's public size)."""

    rows: int
    scanned: Any


#: :func:`_route`'s answers by plan identity (a protected plan is immutable); False: no route.
_ROUTES: IdentityMap[_Route | bool] = IdentityMap()


def _route(lazy: Any) -> _Route | None:
    """The kernel route of ``lazy``'s plan, or None when it is not one in-memory scan plus
    row-wise steps (remembered per plan)."""
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
    kinds = [type(node).__name__ for node in nodes]
    scans = [node for node, kind in zip(nodes, kinds, strict=True) if kind == "DataFrameScan"]
    if len(scans) != 1 or not set(kinds) <= _ROWWISE_NODES:
        return None
    scan = scans[0]
    bare = len(nodes) == 1 and scan.projection is None and scan.selection is None
    scanned = private(pl.DataFrame._from_pydf(scan.df)) if bare else None
    return _Route(int(scan.df.height()), scanned)


def kernel_sums(lazy: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                keys: Sequence[Any] | None, eager: Any) -> dict[Agg, np.ndarray] | None:
    """The additive aggregates of ``lazy`` by the numpy kernel (``eager``: the eager Polars
    adapter; called inside :func:`dpframe.engine.aggregate`'s pass, as its engine path), or
    None where the kernel does not apply: a plan that is not one in-memory scan plus row-wise
    steps, several group columns, products of columns, units, a column the kernel cannot read
    (by dtype), or a group-by with fewer than one declared key per
    :data:`~dpframe.engine.POLARS_ROWS_PER_KEY` scanned rows (Polars' parallel group-by is
    faster; decided on the scan's public size, never a derived frame's)."""
    if isinstance(group_by, tuple) or any(a.kind in ("sum_prod", "units") for a in aggs):
        return None
    route = _route(lazy)
    if route is None:
        return None
    if group_by is not None and len(keys or ()) * engine.POLARS_ROWS_PER_KEY < route.rows:
        return None
    frame = route.scanned
    if frame is None:
        needed = sorted({c for a in aggs for c in a.columns()}
                        | ({group_by} if group_by is not None else set()))
        if not needed:  # (a selection of no column has no rows: the expressions count them)
            return None
        frame = lazy.select(needed).collect(engine="in-memory")
    return engine.forced_numpy_sums(frame, eager, aggs, columns, missing, group_by, keys)
