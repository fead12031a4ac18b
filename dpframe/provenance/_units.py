r"""Several rows per person: the privacy unit, its public facts, and what it does to a plan.

``dpf.protect(frame, ..., privacy_unit="person_id", max_rows_per_unit=k,
max_groups_per_unit=g)`` changes the neighbour relation from "replace one row" to **"replace
all rows of one unit"** (one person's rows, however many, by another person's rows). Each
release bounds every unit's contribution before aggregating (:mod:`dpframe.engine._bounding`: at
most ``k`` rows per unit, and in a group-by at most ``g`` groups, chosen by a secret per-release
hash, never by the values); then (``docs/privacy.md`` §U, proofs there):

* **Sizes.** The number of rows is private (a unit's row count is what it hides; bounding may
  drop rows); the number of units ``U`` with an id is public, read once at protect time, as the
  row count is without units. Every query uses the private-size formulation, with the public
  row cap ``k·U`` in place of ``n`` (count domains, fixed-point grids).
* **Sensitivity × k (Lemma U1).** Two bounded frames of neighbouring data sets differ by at most
  ``k`` single-row additions, removals or replacements (the replaced unit's ≤ k kept rows out,
  ≤ k in). Every private-size sensitivity of :mod:`dpframe.query.statistics` bounds one such change,
  so by the triangle inequality ``k·Δ`` bounds the whole: :func:`bound_plan` multiplies every
  measurement's sensitivity by ``k`` (rounded up, capped at the domain's width).
* **Groups: ε share 1/(2g') per group (Lemma U2)**, ``g' = min(g, k)``: a replaced unit reaches
  at most ``g'`` groups before and ``g'`` after, each changed by ≤ k rows; each group's release
  has ε·share with sensitivity ``k·Δ``, so the touched ones add up to at most ε. (Without units:
  ``g' = 1``, the library's ε/2 rule.)
* **Counting units** (:class:`CountUnits`, ``frame.dp.count_units``): the number of distinct
  unit ids among the bounded rows. A unit is counted once wherever it has a kept row, so a
  replacement moves it by at most 1 (per group: at most 2g' groups move by 1): Δ = 1, not k.
  On the protected frame (and derivations that keep every row) it is the public ``U``.

Nothing here reads data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.backends import Backend
from dpframe.engine import UnitBound
from dpframe.errors import ParameterError, UnsupportedInputError
from dpframe.query import Agg
from dpframe.query.statistics import (
    Measurement,
    Plan,
    PlanContext,
    Query,
    round_up,
    single_interval,
)

__all__ = ["CountUnits", "bound_plan", "count_units", "validate_unit"]

def validate_unit(privacy_unit: Any, max_rows_per_unit: Any, max_groups_per_unit: Any,
                  schema: Mapping[str, Any], backend: Backend
                  ) -> tuple[str, int, int] | None:
    """Check the privacy-unit arguments of :func:`dpframe.protect` from public facts (the
    schema, the engine, the arguments); returns ``(column, k, g)`` or None (one row per
    unit)."""
    if privacy_unit is None:
        if max_rows_per_unit is not None or max_groups_per_unit is not None:
            raise ParameterError(
                "max_rows_per_unit / max_groups_per_unit bound a privacy unit's rows: name the "
                "unit's id column too, e.g. dpf.protect(..., privacy_unit='person_id', "
                "max_rows_per_unit=5)"
            )
        return None
    if not isinstance(privacy_unit, str) or not privacy_unit:
        raise ParameterError(f"privacy_unit must be a column name, got {privacy_unit!r}")
    if privacy_unit not in schema:
        raise UnsupportedInputError(
            f"privacy_unit column {privacy_unit!r} is not in the frame; available: "
            f"{', '.join(map(repr, list(schema)[:20]))}"
        )
    k = _positive("max_rows_per_unit", max_rows_per_unit, required=True)
    g = k if max_groups_per_unit is None else _positive("max_groups_per_unit",
                                                         max_groups_per_unit, required=True)
    if not backend.bounds_units:  # (pandas and Polars: dpframe.engine._bounding)
        raise UnsupportedInputError(
            f"privacy_unit is not available on {backend.name} frames yet: bounding each unit's "
            "rows runs in pandas and Polars (DataFrame and LazyFrame). Protect a Polars "
            "LazyFrame of the same data (e.g. pl.scan_parquet(...)) or a pandas frame. Nothing "
            "was read."
        )
    dtype = str(schema[privacy_unit]).lower()
    if dtype.startswith(("float", "list", "array", "struct", "object")) and not (
            backend.object_strings and dtype == "object"):
        raise UnsupportedInputError(
            f"privacy_unit column {privacy_unit!r} has dtype {schema[privacy_unit]}; a unit id "
            "must be an integer, string, categorical or date column (floats and nested values "
            "cannot identify a person reliably): cast it first"
        )
    return privacy_unit, k, g


def _positive(name: str, value: Any, *, required: bool) -> int:
    if value is None and required:
        raise ParameterError(
            f"{name} is required with privacy_unit: a public bound declared from outside the "
            f"data (e.g. {name}=5); it is never computed from the data"
        )
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def count_distinct_units(frame: Any, backend: Backend, column: str) -> int:
    """``U``: the number of distinct non-missing ids (read once, at protect time)."""
    return backend.count_units(frame, column)


def bound_plan(plan: Plan, query: Query, unit: UnitBound, grouped: bool) -> Plan:
    """``plan`` for bounded units: every sensitivity × k (unit counts: × 1), and in a group-by
    the ε share per group divided by ``g' = min(g, k)`` (Lemmas U1, U2)."""
    factor = 1 if isinstance(query, CountUnits) else unit.max_rows
    measurements = tuple(_scaled(m, factor) for m in plan.measurements)
    share = plan.group_share
    if grouped:
        share = (plan.group_share or 0.5) / unit.touched_groups
    return replace(plan, measurements=measurements, group_share=share)


def _scaled(m: Measurement, factor: int) -> Measurement:
    if factor == 1:
        return m
    after = m.sensitivity_after
    scaled_after: Callable[[float, float], float] | None = None
    if after is not None:
        def scaled_after(lo: float, hi: float) -> float:
            return _times(after(lo, hi), factor, lo, hi)
    return replace(m, sensitivity=_times(m.sensitivity, factor, m.lower, m.upper),
                   sensitivity_after=scaled_after)


def _times(sensitivity: float, factor: int, lower: float, upper: float) -> float:
    """``factor·Δ`` rounded up to a float, capped at the domain's width (no two outputs differ
    by more)."""
    s = round_up(Fraction(sensitivity) * factor)
    if math.isfinite(lower) and math.isfinite(upper):
        s = min(s, upper - lower)
    return s


class CountUnits(Query):
    r"""Number of distinct privacy units (persons), as opposed to
    :class:`~dpframe.query.statistics.Count` (rows after bounding).

    ``C = |{unit ids among the bounded rows}|``. *Sensitivity.* Replacing all rows of unit ``a``
    by rows of ``a*``: every other unit keeps exactly its kept rows (bounding is unit-local,
    :mod:`dpframe.engine._bounding`), so only ``a``'s and ``a*``'s membership can change: ``|ΔC| ≤
    1`` (one out, one in). Per group: ``a`` is counted in each of its ≤ g' kept groups and ``a*`` in
    its own, so at most 2g' groups change, each by 1 — the group rule of :func:`bound_plan`
    applies with Δ = 1. Domain ``[0, U]`` (U public). On a frame holding every protected row
    (the root, ``with_columns``, ``select``) ungrouped, ``C = U`` is public: released exactly
    and free whatever ε is asked, like the public row count without units.
    """

    kind = "count_units"
    needs_column = False

    def plan(self, ctx: PlanContext) -> Plan:
        if ctx.unit is None:
            raise ParameterError(
                "count_units() needs a privacy unit, and this data was protected without one "
                "(privacy_unit=... is part of the protection, fixed for the life of the "
                "budget): every row is a unit, and dp.count() counts them"
            )
        total = float(ctx.unit.n_units)
        if ctx.units_public and not ctx.grouped:
            def exact(_: Mapping[str, np.ndarray]) -> np.ndarray:
                return np.array([total])

            return Plan("count_units", None, (), exact,
                        "public number of units U, released exactly (no noise, no ε)",
                        public_size=True,
                        interval=lambda _m, _v, _l: (np.array([total]), np.array([total])))
        agg = Agg("units", ctx.unit.column)
        m = Measurement("count_units", lambda a: np.asarray(a[agg], dtype=np.float64), 1.0,
                        0.0, total, 1.0, (agg,), total)
        return Plan("count_units", None, (m,),
                    lambda v: np.clip(np.rint(v["count_units"]), 0.0, total),
                    "noisy number of distinct units, rounded to an integer",
                    interval=single_interval("count_units", 0.0, total, integer=True))

    def columns_read(self) -> tuple[str, ...]:
        return ()


def count_units() -> CountUnits:
    """Query builder: number of distinct privacy units (persons); see :class:`CountUnits`."""
    return CountUnits()


def describe(unit: UnitBound | None, grouped: bool, neighbours: str = "replace"
             ) -> dict[str, Any]:
    """The log fields of a release's privacy unit, bounding and neighbour definition (the
    log writes ``neighbours`` only when it is ``"add_remove"``)."""
    if unit is None:
        return {"privacy_unit": "row", "max_rows_per_unit": None, "max_groups_per_unit": None,
                "bounding": "none (one row per unit)" if neighbours == "replace" else
                "none (one row per unit; neighbours add or remove one row, the row count is "
                "private)", "neighbours": neighbours}
    groups = (f", then at most {unit.max_groups} groups per unit" if grouped and
              unit.max_groups < unit.max_rows else "")
    return {
        "privacy_unit": unit.column,
        "max_rows_per_unit": unit.max_rows,
        "max_groups_per_unit": unit.max_groups if grouped else None,
        "bounding": (f"rows without a unit id left out{groups}; at most {unit.max_rows} rows per "
                     "unit kept, chosen by a hash with a secret seed drawn for this release (not "
                     f"from the values); sensitivities × {unit.max_rows} (unit counts × 1); "
                     f"{unit.n_units} units (public)"),
    }
