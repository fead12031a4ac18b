"""One noisy count per public cell (histogram bins, a column's keys): the plan shared by
:class:`~dpframe.query._histogram.Histogram` and
:class:`~dpframe.query._value_counts.ValueCounts`, and the cells' public labels."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.errors import ParameterError, UnsupportedInputError
from dpframe.mechanisms.quantiles import DEFAULT_MAX_CELLS
from dpframe.query._aggregates import Agg
from dpframe.query._plans import (
    Measurement,
    Plan,
    PlanContext,
    single_interval,
)

__all__ = ["bin_labels", "cell_counts", "key_labels", "public_keys", "refuse_units"]


def refuse_units(ctx: PlanContext, what: str) -> None:
    """Per-cell counts in a release are calibrated for one row per person: refused on a frame
    with a privacy unit (a person's rows can reach several cells of a group)."""
    if ctx.unit is not None:
        raise UnsupportedInputError(
            f"dpf.{what} in a release is not available on a frame protected with "
            f"privacy_unit={ctx.unit.column!r} (one person's rows can fall in several cells); "
            f"use frame.dp.{what}(...) or frame.dp.groupby(...).{what}(...), which bound the "
            "cells each person reaches")


def cell_counts(kind: str, column: str | None, agg: Agg, labels: tuple[str, ...],
                 ctx: PlanContext, cells: str) -> Plan:
    """One noisy count per cell of ``agg`` (a ``(groups, cells)`` aggregate): Δ = 1 on
    ``[0, n]``, ε/2 per cell (ungrouped ``cell_share`` ½; grouped the group share ½: a replaced
    row changes at most two cells), rounded to non-negative integers. Under add/remove
    neighbours an added or removed row changes one cell by 1: every cell gets the whole ε, on
    ``[0, max_rows]`` (``[0, 2³¹]`` when none is declared)."""
    if max(ctx.n_groups, 1) * len(labels) > DEFAULT_MAX_CELLS:
        raise ParameterError(f"{ctx.n_groups:,} groups × {len(labels):,} cells exceed "
                             f"{DEFAULT_MAX_CELLS:,}; use fewer cells or groups")
    upper = float(ctx.count_cap)
    m = Measurement(kind, lambda a: np.asarray(a[agg], dtype=np.float64), 1.0, 0.0, upper,
                    1.0, (agg,), float(ctx.n))
    why = ("ε per cell (parallel composition: an added or removed row is in one cell)"
           if ctx.add_remove else
           "ε/2 per cell (parallel composition: a replaced row moves between two cells)")
    return Plan(
        kind, column, (m,), lambda v: np.clip(np.rint(v[kind]), 0.0, upper),
        f"noisy count per cell of {cells}, {why}, rounded to integers", labels=labels,
        cell_share=None if ctx.grouped or ctx.add_remove else 0.5,
        interval=single_interval(kind, 0.0, upper, integer=True))


def public_keys(column: str, keys: Sequence[Any]) -> list[Any]:
    """Distinct, non-missing, hashable keys (the same rule as ``groupby(keys=...)``)."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence | set | frozenset):
        raise ParameterError(f"keys for {column!r} must be a list of public values, e.g. "
                             "keys=['north', 'south']")
    out = list(keys)
    if not out:
        raise ParameterError(f"keys for {column!r} is empty; declare at least one public key")
    if any(k is None or (isinstance(k, float) and k != k) for k in out):
        raise ParameterError(f"keys for {column!r} must not contain None/NaN")
    try:
        distinct = len(set(out)) == len(out)
    except TypeError:
        raise ParameterError(f"keys for {column!r} must be hashable values") from None
    if not distinct:
        raise ParameterError(f"keys for {column!r} contain duplicates")
    return out


def key_labels(keys: Sequence[Any]) -> tuple[str, ...]:
    """Output labels of keys: ``str`` where distinct, else ``repr``."""
    for show in (str, repr):
        labels = tuple(show(k) for k in keys)
        if len(set(labels)) == len(labels):
            return labels
    return tuple(str(j) for j in range(len(keys)))  # pragma: no cover - repr is distinct


def bin_labels(lower: float, upper: float, count: int) -> tuple[str, ...]:
    """Output labels of equal bins: ``<lower edge>,<upper edge>`` (``g`` format where that
    keeps them distinct, else each edge's full ``repr``); refused when two edges round to
    the same double (bins narrower than the doubles there)."""
    lo, width = Fraction(lower), Fraction(upper) - Fraction(lower)
    edges = [float(lo + width * j / count) + 0.0 for j in range(count + 1)]
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise ParameterError(f"bins={count}: equal bins of [{lower!r}, {upper!r}] would be "
                             "narrower than the spacing of floating-point numbers there; use "
                             "fewer bins")
    for fmt in ("{:g}", "{!r}"):
        labels = tuple(f"{fmt.format(a)},{fmt.format(b)}"
                       for a, b in itertools.pairwise(edges))
        if len(set(labels)) == len(labels):
            return labels
    return tuple(str(j) for j in range(count))  # pragma: no cover - repr is distinct
