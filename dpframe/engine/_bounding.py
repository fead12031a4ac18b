r"""Contribution bounding: keep at most ``k`` rows (and ``g`` groups) per privacy unit.

When a frame is protected with ``privacy_unit="person_id", max_rows_per_unit=k`` (and
optionally ``max_groups_per_unit=g``), every release first bounds each unit's contribution,
inside the frame's own engine, before the one aggregation pass
(:func:`dpframe.engine._aggregation.aggregate` calls the frame adapter's ``bound_contributions``).
The rule (``docs/privacy.md`` §U):

1. rows whose unit id is missing (null) are left out: they belong to no unit;
2. in a group-by, rows whose key is not declared are left out (the engine drops them anyway),
   and when ``g < k`` each unit keeps the rows of at most ``g`` of its groups: the groups with
   the smallest key ``h_s(unit, group)``;
3. each unit keeps at most ``k`` of its remaining rows: those with the smallest key
   ``h_s(unit, position of the row among the unit's rows)``.

``h_s`` is a hash keyed by a secret 64-bit seed ``s`` drawn afresh for every release
(:func:`release_seed`; seeded only when the release is, for tests). Keys never read a value
that is aggregated, so which rows are kept is independent of the values — the kept rows are a
pseudo-random sample of each unit's rows, which keeps sums and means unbiased in expectation
over the seed.

**Why this bounds sensitivity for every seed** (the property the privacy proof uses). The kept
rows of unit ``u`` are a function of ``u``'s own rows (their relative order, its id, its group
keys) and the seed only: ties between equal keys are broken by the row's position within its
unit (rows) or by the public order of the declared keys (groups), never by anything global.
Replacing every row of one unit therefore changes the bounded frame only in that unit's kept
rows — at most ``k`` rows out, at most ``k`` rows in, in at most ``g`` groups before and ``g``
after. This holds for each fixed seed, so no assumption about the hash's randomness is needed
for privacy (the hash's quality only matters for how representative the kept rows are).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpframe.query import Bounding, UnitBound

__all__ = ["Bounding", "UnitBound", "bound_pandas", "bound_polars", "release_seed"]

_MASK = (1 << 64) - 1


def release_seed(rng: np.random.Generator | None) -> int:
    """A fresh 64-bit seed for one release: from the operating system's secure source, or from
    the release's seeded generator (tests and simulations; the log says which)."""
    if rng is None:
        return secrets.randbits(64)
    return int(rng.integers(0, 2**63, dtype=np.int64)) * 2 + int(rng.integers(0, 2))


def _splitmix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, a bijection of 64-bit words (wrapping arithmetic)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _subseeds(seed: int) -> tuple[int, int]:
    """Two independent-looking 64-bit seeds (groups, rows) derived from one."""
    s = _splitmix(np.array([seed & _MASK, (seed ^ 0x5DEECE66D) & _MASK], dtype=np.uint64))
    return int(s[0]), int(s[1])


def _layout(bounding: Bounding, columns: Sequence[str], group_by: str | tuple[str, ...] | None
            ) -> tuple[list[str], list[str], int | None]:
    """(columns kept, group columns, ``g`` when it binds: fewer groups than rows per unit)."""
    cols = [] if group_by is None else [group_by] if isinstance(group_by, str) else list(group_by)
    keep = list(dict.fromkeys([*columns, *cols, bounding.unit.column]))
    g = bounding.unit.max_groups if cols and bounding.unit.max_groups < bounding.unit.max_rows \
        else None
    return keep, cols, g


def bound_pandas(native: Any, bounding: Bounding, *, columns: Sequence[str],
                 group_by: str | tuple[str, ...] | None = None,
                 keys: Sequence[Any] | None = None) -> Any:
    """A pandas ``native`` with at most ``k`` rows per unit (and, grouped, ``g`` groups per
    unit), holding ``columns`` (the ones the aggregation reads). Reads data: called through
    the frame's adapter (:meth:`dpframe.backends.Backend.bound_contributions`) after the
    budget is reserved; never raises because of a value."""
    keep, cols, g = _layout(bounding, columns, group_by)
    return _bound_pandas(native, bounding, keep, cols, keys, g)


def bound_polars(native: Any, bounding: Bounding, *, columns: Sequence[str],
                 group_by: str | tuple[str, ...] | None = None,
                 keys: Sequence[Any] | None = None) -> Any:
    """As :func:`bound_pandas`, for a Polars DataFrame or LazyFrame: a LazyFrame."""
    keep, cols, g = _layout(bounding, columns, group_by)
    return _bound_polars(native, bounding, keep, cols, keys, g)


# -- pandas: numpy over the unit column's hashes ------------------------------------------------
def _group_runs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``order`` sorting ``codes`` stably and each sorted position's rank within its run."""
    order = np.argsort(codes, kind="stable")
    return order, _rank_in_runs(codes[order])


def _rank_in_runs(sorted_codes: np.ndarray) -> np.ndarray:
    n = sorted_codes.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)


def _declared_positions(native: Any, cols: list[str], keys: Sequence[Any]) -> np.ndarray:
    """Each row's position among the declared keys (a public order), -1 if undeclared."""
    import pandas as pd

    tuples = [k if len(cols) > 1 else (k,) for k in keys]
    lookup = {t: i for i, t in enumerate(tuples)}
    try:
        if len(cols) == 1:
            return np.asarray(pd.Index([t[0] for t in tuples]).get_indexer(native[cols[0]]),
                              dtype=np.int64)
        index = pd.MultiIndex.from_tuples(tuples)
        rows = pd.MultiIndex.from_arrays([native[c] for c in cols])
        return np.asarray(index.get_indexer(rows), dtype=np.int64)
    except (TypeError, ValueError):  # pragma: no cover - unusual key columns: slow, exact
        values = zip(*(native[c].tolist() for c in cols), strict=True)
        return np.array([lookup.get(tuple(v), -1) for v in values], dtype=np.int64)


def _bound_pandas(native: Any, bounding: Bounding, keep: list[str], cols: list[str],
                  keys: Sequence[Any] | None, g: int | None) -> Any:
    import pandas as pd

    seed_groups, seed_rows = _subseeds(bounding.seed)
    ids = native[bounding.unit.column]
    mask = np.array(ids.notna().to_numpy(), dtype=bool)  # a writable copy
    group = None
    if cols:
        group = _declared_positions(native, cols, list(keys or []))
        mask &= group >= 0
    rows = np.flatnonzero(mask)
    with np.errstate(over="ignore"):
        hashed = pd.util.hash_pandas_object(ids.iloc[rows], index=False).to_numpy(np.uint64)
        # grouping by the ids themselves (never by their hashes, which could collide); the codes'
        # values (order of first appearance) are used for grouping only, never for choosing
        unit_codes = pd.factorize(ids.iloc[rows])[0].astype(np.int64)
        if g is not None and group is not None:
            rows, hashed, unit_codes = _keep_groups(rows, hashed, unit_codes, group[rows],
                                                    len(keys or []), g, seed_groups)
        order, position = _group_runs(unit_codes)
        pos = np.empty_like(position)
        pos[order] = position  # the row's position among its unit's rows (frame order)
        key = _splitmix(np.uint64(seed_rows) ^ hashed ^ _splitmix(pos.astype(np.uint64)))
    ranked = np.lexsort((pos, key, unit_codes))
    rank = _rank_in_runs(unit_codes[ranked])
    kept = np.sort(rows[ranked[rank < bounding.unit.max_rows]])
    return native[keep].iloc[kept]


def _keep_groups(rows: np.ndarray, hashed: np.ndarray, unit_codes: np.ndarray,
                 group: np.ndarray, n_keys: int, g: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep the rows of each unit's ``g`` groups with the smallest ``h(seed, unit, group)``;
    ties by the group's position among the declared keys (public)."""
    pair = unit_codes * n_keys + group
    pairs, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    pair_unit = pairs // n_keys
    pair_group = pairs % n_keys
    key = _splitmix(np.uint64(seed) ^ hashed[first] ^ _splitmix(pair_group.astype(np.uint64)))
    ranked = np.lexsort((pair_group, key, pair_unit))
    rank = np.empty(pairs.size, dtype=np.int64)
    rank[ranked] = _rank_in_runs(pair_unit[ranked])
    ok = (rank < g)[np.asarray(inverse).reshape(-1)]
    return rows[ok], hashed[ok], unit_codes[ok]


# -- Polars: the same rule as lazy expressions (eager frames run through their lazy plan) ----------
_POS, _KEY, _RANK = "__dpframe_pos", "__dpframe_key", "__dpframe_rank"


def _bound_polars(native: Any, bounding: Bounding, keep: list[str], cols: list[str],
                  keys: Sequence[Any] | None, g: int | None) -> Any:
    import polars as pl

    seed_groups, seed_rows = _subseeds(bounding.seed)
    unit = bounding.unit.column
    lf = native.lazy().select(keep).filter(pl.col(unit).is_not_null())
    if cols:
        schema = lf.collect_schema()
        tuples = [k if len(cols) > 1 else (k,) for k in keys or []]
        for i, col in enumerate(cols):  # as the engine does: rows of undeclared keys go
            declared = list(dict.fromkeys(t[i] for t in tuples))
            if schema[col].is_float():
                declared = [float(v) for v in declared]
            lf = lf.filter(pl.col(col).is_in(declared))
    # position of each row among its unit's rows, in frame order (before any reordering)
    lf = lf.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(unit).alias(_POS))
    if g is not None:
        pairs = (lf.select(unit, *cols).unique()
                 .with_columns(pl.struct(unit, *cols).hash(seed_groups).alias(_KEY))
                 .sort([_KEY, *cols], nulls_last=True)
                 .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(unit).alias(_RANK))
                 .filter(pl.col(_RANK) < g)
                 .select(unit, *cols))
        lf = lf.join(pairs, on=[unit, *cols], how="semi", nulls_equal=False)
    lf = (lf.with_columns(pl.struct(unit, _POS).hash(seed_rows).alias(_KEY))
          .sort([_KEY, _POS])
          .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(unit).alias(_RANK))
          .filter(pl.col(_RANK) < bounding.unit.max_rows)
          .select(keep))
    return lf
