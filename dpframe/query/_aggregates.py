"""What the engine computes, as data: the exact aggregates a measurement asks for.

:class:`Agg` names one per-group integer aggregate (a row count, a fixed-point sum Σk, Σk²,
Σk·k₂, a distinct-unit count, or per-bin counts); :class:`FixedPoint` is the public grid
``x = c + k·q`` that makes sums exact in doubles (every partial sum below 2⁵³);
:class:`Bins` the public equal bins of a histogram or quantile; :class:`UnitBound` and
:class:`Bounding` the public facts of a privacy unit and what one release bounds contributions
with. Nothing here reads data: the query layer builds these requests and every engine path
answers them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, NamedTuple

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.errors import UnsupportedInputError

__all__ = ["ADDITIVE_KINDS", "DROP", "Agg", "Bins", "Bounding", "FixedPoint", "ReadWindows",
           "UnitBound", "merged_reads"]

_EXACT = 2**53 - 1
DROP = "drop"
#: Aggregate kinds that are sums over rows (so per-partition results add up) and that
#: :mod:`dpframe.backends.spark._sql` writes as SQL; other kinds take the narwhals path on engines.
ADDITIVE_KINDS = ("rows", "sum", "sum_sq", "sum_prod")


@dataclass(frozen=True)
class FixedPoint:
    """Public fixed-point grid ``x = center + k·q`` with ``k ∈ [k_lo, k_hi]``."""

    center: float
    q: float
    k_lo: int
    k_hi: int

    @classmethod
    @functools.lru_cache(maxsize=256)
    def choose(
        cls, lower: float, upper: float, center: float, row_cap: int, squares: bool
    ) -> FixedPoint:
        """Finest power-of-two quantum keeping ``|Σk|`` (and ``Σk²``) below 2⁵³ for
        ``row_cap`` rows."""
        lo, hi, c = Fraction(lower), Fraction(upper), Fraction(center)
        half = max(abs(hi - c), abs(lo - c))
        # |k| ≤ 2^50 also keeps the engine's round-to-integer trick exact (see _rounded)
        limit = min(_EXACT // max(int(row_cap), 1), 2**50)
        if squares:
            limit = math.isqrt(limit)
        if limit < 2:
            raise UnsupportedInputError(
                f"cannot aggregate {row_cap} rows exactly in 53-bit fixed point; "
                "protect smaller frames or split the data"
            )
        if half == 0:
            return cls(float(center), 1.0, 0, 0)
        # smallest e with half / 2**e <= limit
        e = math.frexp(float(half / limit))[1]
        while half / Fraction(2) ** (e - 1) <= limit:
            e -= 1
        while half / Fraction(2) ** e > limit:
            e += 1
        # a normal double (bounds narrower than ~1e-292 would ask for a subnormal quantum,
        # whose reciprocal overflows): a coarser grid then, still exact
        e = max(e, -1022)
        q = Fraction(2) ** e
        k_lo = math.ceil((lo - c) / q)
        k_hi = math.floor((hi - c) / q)
        return cls(float(center), float(q), k_lo, k_hi)


class Draw(NamedTuple):
    """The public parameters of one draw of the quantile run sampler on a bins aggregate:
    level ``q``, target ``offset``, ``padding`` and coefficient ``λ``
    (:func:`dpframe.mechanisms.quantiles.fine_blocks_read`)."""

    q: float
    offset: Fraction
    padding: int
    coefficient: float


class ReadWindows:
    """The draws the mechanisms of one quantile plan will make on its bin counts, recorded
    as each mechanism is built — before the read, from public parameters only (levels, ε,
    the ``ci=`` brackets' padding and offsets).

    With them an engine may count fine bins only where those draws read
    (:func:`dpframe.mechanisms.quantiles.fine_blocks_read`: the 1,024-bin block totals, the two
    end bins and the blocks of each draw's window, found from the totals) and fill every
    other block with a count vector that has the same block totals (``dpframe.engine._bins``).
    Equal only to itself (identity): two plans never share a record, so a bins aggregate
    deduplicated by the engine always carries the draws of every mechanism that reads it;
    bins aggregates that differ only in their records are read once, with their
    :meth:`union` (:func:`merged_reads`). :meth:`draws` is None — count every bin — when
    nothing was recorded, or when more than :data:`MAX_DRAWS` distinct draws were (e.g. a
    planner building many mechanisms): a dense count answers every read."""

    MAX_DRAWS = 64

    def __init__(self) -> None:
        self._draws: dict[Draw, None] = {}
        self._overflow = False
        self._parts: tuple[ReadWindows, ...] = ()

    def __repr__(self) -> str:
        if self._parts:
            return f"ReadWindows(union of {len(self._parts)})"
        return f"ReadWindows({len(self._draws)} draws)"

    @classmethod
    def union(cls, parts: Sequence[ReadWindows]) -> ReadWindows:
        """The record of every draw of ``parts``, read when the engine asks (so a draw
        recorded on a part later is in it too). Counts that are exact wherever one of its
        draws reads are exact wherever each part's draws read: each draw's window is found
        from the block totals (exact in every count the engine gives) and its own public
        parameters alone, so every part's mechanisms read the same counts from the union's
        read as from their own (``fine_blocks_read``)."""
        joined = cls()
        joined._parts = tuple(parts)
        return joined

    def record(self, mechanism: Any) -> None:
        """Record every level of a quantile ``mechanism``
        (:class:`dpframe.mechanisms.quantiles.QuantileMechanism` or a bracketing one)."""
        for i, (q, lam) in enumerate(zip(mechanism.levels, mechanism.coefficients,
                                         strict=True)):
            draw = Draw(float(q), Fraction(mechanism.target_offset(i)),
                        int(mechanism.padding), float(lam))
            if len(self._draws) >= self.MAX_DRAWS and draw not in self._draws:
                self._overflow = True
            else:
                self._draws[draw] = None

    def draws(self) -> tuple[Draw, ...] | None:
        """The recorded draws, or None: count every bin (see the class docstring). A
        :meth:`union`'s: every part's, None when a part's is None or there are more than
        :data:`MAX_DRAWS` distinct ones."""
        if self._parts:
            found: dict[Draw, None] = {}
            for part in self._parts:
                draws = part.draws()
                if draws is None:
                    return None
                found.update(dict.fromkeys(draws))
            return tuple(found) if len(found) <= self.MAX_DRAWS else None
        if self._overflow or not self._draws:
            return None
        return tuple(self._draws)


@dataclass(frozen=True)
class Bins:
    """``count`` equal public bins of ``[lower, upper]``.

    The bin of a value is ``j = ⌊t·B⌋`` limited to ``B − 1``, with
    ``t = (x/2 − l/2) / (u/2 − l/2)`` for ``x`` clamped to ``[l, u]``: halving first keeps every
    intermediate finite for any finite bounds (``u − l`` may overflow, ``B/(u − l)`` too), and
    ``0 ≤ t ≤ 1`` because IEEE rounding is monotone, so no value can produce NaN or an index out
    of range. A per-row map (neighbours stay neighbours) that every engine evaluates with the
    same IEEE operations (the constants ``l/2`` and ``u/2 − l/2`` computed once here), so all
    paths agree bit for bit. Bins are half-open, the last one closed; values outside ``[l, u]``
    go to the end bins (clamping). Needs ``u/2 − l/2 > 0`` (checked when planning).

    ``window``: a quantile's :class:`ReadWindows` (None for a histogram): an engine may then
    answer with counts that are exact only where the quantile's draws read them, and keep
    every 1,024-bin block's total exact elsewhere (the sampler's law is unchanged:
    :func:`dpframe.mechanisms.quantiles.fine_blocks_read`); engines that count every bin
    ignore it.
    """

    lower: float
    upper: float
    count: int
    window: ReadWindows | None = None

    @property
    def half_lower(self) -> float:
        return self.lower * 0.5

    @property
    def half_width(self) -> float:
        return self.upper * 0.5 - self.lower * 0.5

    def index(self, values: np.ndarray) -> np.ndarray:
        """Bin of each (non-missing) value, as int64 (the numpy twin of :meth:`expression`):
        the same IEEE operations in the same order, in place on one float copy (one
        temporary per block instead of six)."""
        x = np.clip(values.astype(np.float64, copy=False), self.lower, self.upper)
        x *= 0.5
        x -= self.half_lower
        x /= self.half_width
        x *= self.count
        np.floor(x, out=x)
        np.minimum(x, self.count - 1, out=x)
        return x.astype(np.int64)

    def expression(self, x: Any) -> Any:
        """Bin of each row of the narwhals Float64 expression ``x`` (no missing values)."""
        t = (x.clip(self.lower, self.upper) * 0.5 - self.half_lower) / self.half_width
        return (t * self.count).floor().clip(0, self.count - 1).cast(nw.Int64)


@dataclass(frozen=True)
class Agg:
    """One exact aggregate a measurement needs, per group.

    ``kind``: ``"rows"`` (row count; with ``column``, the rows where that column is present
    under the ``"drop"`` policy), ``"sum"`` (Σk of ``column`` in fixed point ``fp``),
    ``"sum_sq"`` (Σk²), ``"sum_prod"`` (Σk·k₂ of ``column`` and ``column2``), ``"units"``
    (the number of distinct values of ``column``, the privacy-unit id, after bounding) or
    ``"bins"`` (rows of ``column`` per bin of ``bins``: a ``(groups, B)`` array instead of one
    number per group; rows missing the column follow its policy, dropped or counted at the fill
    value) or ``"keys"`` (rows per public key of ``column`` among ``keys``: a ``(groups, K)``
    array; rows with another or a missing value are in no cell).
    """

    kind: str
    column: str | None = None
    fp: FixedPoint | None = None
    column2: str | None = None
    fp2: FixedPoint | None = None
    bins: Bins | None = None
    keys: tuple[Any, ...] | None = None

    @property
    def scale(self) -> float:
        """The factor turning the integer aggregate into the statistic (q, q² or q·q₂)."""
        if self.kind in ("rows", "units", "keys") or self.fp is None:
            return 1.0
        if self.kind == "sum":
            return self.fp.q
        if self.kind == "sum_sq":
            return self.fp.q * self.fp.q
        assert self.fp2 is not None
        return self.fp.q * self.fp2.q

    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in (self.column, self.column2) if c is not None)


def merged_reads(aggs: Iterable[Agg]) -> dict[Agg, Agg]:
    """Which aggregate the engine counts for each of ``aggs`` that it need not count apart:
    ``{agg: read}`` for every bins aggregate that differs from another only in its
    :class:`ReadWindows` (several quantile queries on one column and grid in one release),
    ``read`` being one shared aggregate whose window is the :meth:`ReadWindows.union` of
    theirs, or the one without a window (every bin counted) where one of them has none (a
    histogram of the same bins). Empty when nothing is shared (every aggregate is then read
    as it is).

    The column is binned once instead of once per query, and each query's draws read the
    same counts as from its own aggregate (:meth:`ReadWindows.union`). Public: the grouping
    uses the aggregates' public fields and identities only, the union the draws the
    mechanisms recorded from public parameters."""
    aggs = [agg for agg in aggs if agg.bins is not None]
    if len(aggs) < 2:  # (one bins aggregate, as a lone quantile: nothing to share)
        return {}
    groups: dict[Agg, list[Agg]] = {}
    for agg in aggs:
        bins = agg.bins
        if bins is None:
            continue
        dense = agg if bins.window is None else replace(agg, bins=replace(bins, window=None))
        members = groups.setdefault(dense, [])
        if agg not in members:
            members.append(agg)
    merged: dict[Agg, Agg] = {}
    for dense, members in groups.items():
        if len(members) < 2:
            continue
        windows = [m.bins.window for m in members if m.bins is not None]
        read = dense
        if None not in windows and dense.bins is not None:
            read = replace(dense, bins=replace(dense.bins, window=ReadWindows.union(
                [w for w in windows if w is not None])))
        merged.update(dict.fromkeys(members, read))
    return merged


@dataclass(frozen=True)
class UnitBound:
    """Public facts of a frame protected with a privacy unit.

    ``column``: the unit-id column (its name in this frame: a rename follows it);
    ``max_rows``: ``k``, rows kept per unit; ``max_groups``: ``g``, groups kept per unit in a
    group-by; ``n_units``: the number of units with an id in the protected frame, public like
    the row count of a frame without units (read once by :func:`dpframe.protect`).
    """

    column: str
    max_rows: int
    max_groups: int
    n_units: int

    @property
    def row_cap(self) -> int:
        """Public upper bound on the rows any bounded frame can have: ``k·U``."""
        return self.max_rows * self.n_units

    @property
    def touched_groups(self) -> int:
        """Groups one unit can reach after bounding: ``min(g, k)`` (k rows reach ≤ k groups)."""
        return min(self.max_groups, self.max_rows)

    def renamed(self, column: str) -> UnitBound:
        return replace(self, column=column)


@dataclass(frozen=True)
class Bounding:
    """What one release bounds with: the unit facts and the release's secret seed."""

    unit: UnitBound
    seed: int
