r"""The analyses of :mod:`dpframe.analyses` on protected frames: ``frame.dp.proportions``,
``frame.dp.cov``, ``frame.dp.corr`` and ``frame.dp.describe``.

Budget is spent through the frame's ledger, one log entry per noisy measurement, and a failed
query spends nothing (validation and aggregation happen before the ledger commits).

* **proportions** — a group-by on the categorical column with public keys. On the protected
  frame (public ``n``) each cell releases ``c_j/n`` on ``[0, 1]`` with ``Δ = 1/n`` at ``ε/2``
  (the group-by's parallel composition: a replaced row moves between two cells — the same
  derivation as :func:`dpframe.analyses.release_proportions`), then the vector is made to sum
  to 1 (:func:`dpframe.analyses.sum_to_one`). ``all_but_one`` releases every cell and discards
  the remainder's noisy value (same cost: each cell is charged ε/2 either way). On a derived
  frame (private size) each cell's count is released (Δ = 1) and the counts are rescaled;
  ``all_but_one`` needs the public ``n`` and is refused there.
* **cov / corr** — Liu §4.1 through :func:`dpframe.analyses.release_covariance`, on the
  protected frame only (the variance/covariance bounds of Table 1 need the public ``n``).
  The exact covariance is computed from the clamped data in fixed point with integer sums
  (``Σk_j``, ``Σk_j k_l``), as :mod:`dpframe.engine` does for one column, so the sensitivity
  holds exactly; only these aggregates are collected (a Polars ``LazyFrame`` stays lazy).
* **describe** — one :func:`dpframe.frames.release.run_queries` release of ``mean`` and
  ``std`` per column (ε split evenly), plus a noisy ``count`` when the size is private; on the
  protected frame ``count`` is the public ``n``. Rows: count, mean, std, lower, upper.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from dpframe import analyses, engine
from dpframe.errors import BoundsError, ParameterError, PrivateSizeError, UnsupportedInputError
from dpframe.frames.context import backend_of, resolve
from dpframe.frames.release import run_queries
from dpframe.queries import (
    FP_SLACK,
    Measurement,
    Plan,
    PlanContext,
    Query,
    round_up,
    rows_statistic,
)

__all__ = ["Proportions", "covariance", "describe", "proportions"]

_ANALYSIS_MECHANISMS = ("bounded", "truncated")


def _check_mechanism(mechanism: Any) -> str:
    if mechanism not in _ANALYSIS_MECHANISMS:
        raise ParameterError(
            f"mechanism must be 'bounded' (default) or 'truncated' for this analysis, got "
            f"{mechanism!r}: its outputs must stay in their domains"
        )
    return str(mechanism)


# -- proportions ----------------------------------------------------------------------------
class Proportions(Query):
    r"""Proportions of the declared keys of the group-by column (Liu §4.2).

    *Public size.* Per cell ``c_j/n`` on ``[0, 1]``, ``Δ = 1/n`` (plus ``2⁻⁵²`` float slack);
    the group-by charges each cell ε/2 (one replacement changes two cells by ``1/n`` each).
    *Private size.* Per cell the count ``c_j`` on ``[0, cap]``, ``Δ = 1``. Post-processing:
    :func:`dpframe.analyses.sum_to_one`.
    """

    kind = "proportions"
    needs_column = False

    def __init__(self, method: str = "rescale", remainder: int = -1) -> None:
        super().__init__(None)
        if method not in ("rescale", "all_but_one"):
            raise ParameterError(f"method must be 'rescale' or 'all_but_one', got {method!r}")
        self.method = method
        self.remainder = int(remainder)

    def plan(self, ctx: PlanContext) -> Plan:
        method, rem = self.method, self.remainder
        if ctx.size_public and ctx.n:
            n = int(ctx.n)
            sens = round_up(Fraction(1, n) + Fraction(FP_SLACK))
            # rows/n in IEEE division is the correctly rounded exact quotient (both < 2^53),
            # so this equals float(Fraction(rows, n)); vectorised over the keys
            m = Measurement("proportion", lambda a: np.asarray(a.rows, np.float64) / n, sens, 0.0,
                            1.0, 1.0, vectorised=True)
            return Plan("proportions", None, (m,),
                        lambda v: analyses.sum_to_one(v["proportion"], method, rem),  # type: ignore[arg-type]
                        f"per-cell proportion c/n on [0, 1] (public n), then {method}",
                        needs_values=False, public_size=True)
        if method == "all_but_one":
            raise PrivateSizeError(
                "method='all_but_one' needs the public row count of the protected frame; on a "
                "derived frame use method='rescale' (noisy counts, normalised)"
            )
        upper = float(ctx.count_cap) if ctx.count_cap > 0 else math.inf
        m = Measurement("count", rows_statistic, 1.0, 0.0, upper, 1.0, vectorised=True)
        return Plan("proportions", None, (m,),
                    lambda v: analyses.sum_to_one(v["count"], "rescale"),
                    "per-cell noisy count (private size), then rescale", needs_values=False)


def proportions(
    ns: Any,
    column: str,
    *,
    epsilon: float,
    keys: Sequence[Any] | None = None,
    method: str = "rescale",
    remainder: Any = None,
    mechanism: str = "bounded",
    **kw: Any,
) -> Any:
    """``frame.dp.proportions(column, epsilon=, keys=, method=, mechanism=, remainder=)``.

    Returns a frame with the key column and ``proportion`` (one row per declared key, Σ = 1).
    ``remainder`` (``all_but_one`` only): the key computed as 1 − Σ others (default: the last).
    """
    mech = _check_mechanism(mechanism)
    pos = -1
    if method == "all_but_one" and remainder is not None:
        declared = list(keys) if keys is not None else \
            ns._dataset(kw.get("session")).keys.get(column)
        if declared is None or remainder not in declared:
            raise ParameterError(f"remainder={remainder!r} is not one of the keys {declared!r}")
        pos = declared.index(remainder)
    query = Proportions(method, pos)
    return ns.groupby(column, keys=keys).release({"proportion": query}, epsilon=epsilon,
                                                  mechanism=mech, **kw)


# -- covariance / correlation ---------------------------------------------------------------
def _exact_covariance(
    frame: Any, columns: list[str], bounds: dict[str, tuple[float, float]], n: int, row_cap: int
) -> np.ndarray:
    """Exact ddof=1 covariance of the clamped, fixed-point data, from integer sums."""
    fps = []
    exprs = []
    bad = []
    for j, col in enumerate(columns):
        lo, hi = bounds[col]
        fp = engine.FixedPoint.choose(lo, hi, (lo + hi) / 2.0, row_cap, True)
        fps.append(fp)
        dtype = engine.validate_column(frame, col)
        x = nw.col(col).cast(nw.Float64)
        if engine._is_float(dtype):
            good = nw.col(col).is_finite().fill_null(False)
        else:
            good = ~nw.col(col).is_null()
        xs = nw.when(good).then(x).otherwise(nw.lit(fp.center))
        k = ((xs.clip(lower_bound=float(lo), upper_bound=float(hi)) - fp.center) / fp.q)
        exprs.append(k.round(0).clip(fp.k_lo, fp.k_hi).cast(nw.Int64).alias(f"__dp_k{j}"))
        bad.append((1 - good.cast(nw.Int64)).alias(f"__dp_bad{j}"))
    lf = nw.from_native(frame).with_columns(*exprs, *bad)
    p = len(columns)
    aggs = [nw.len().alias("__dp_rows")]
    aggs += [nw.col(f"__dp_bad{j}").sum().alias(f"__dp_nbad{j}") for j in range(p)]
    aggs += [nw.col(f"__dp_k{j}").sum().alias(f"__dp_s{j}") for j in range(p)]
    aggs += [(nw.col(f"__dp_k{j}") * nw.col(f"__dp_k{k}")).sum().alias(f"__dp_p{j}_{k}")
             for j in range(p) for k in range(j, p)]
    res = lf.select(*aggs)
    if isinstance(res, nw.LazyFrame):
        res = res.collect()
    row = dict(zip(res.columns, res.row(0), strict=True))
    if int(row["__dp_rows"]) != n:
        raise UnsupportedInputError("the protected frame no longer has its public row count")
    nbad = [c for j, c in enumerate(columns) if int(row[f"__dp_nbad{j}"] or 0)]
    if nbad:
        raise UnsupportedInputError(
            f"columns {nbad} contain null, NaN or infinite values; clean them first (dropping "
            "rows would make the size private, and cov/corr need the public n). Nothing was spent."
        )
    s = [int(row[f"__dp_s{j}"] or 0) for j in range(p)]
    out = np.zeros((p, p))
    for j in range(p):
        for k in range(j, p):
            pjk = int(row[f"__dp_p{j}_{k}"] or 0)
            qq = Fraction(fps[j].q) * Fraction(fps[k].q)
            val = float(qq * (n * pjk - s[j] * s[k]) / (n * (n - 1)))
            out[j, k] = out[k, j] = val
    return out


def covariance(
    ns: Any,
    columns: Sequence[str],
    *,
    epsilon: float,
    kind: str = "cov",
    delta: float = 0.0,
    mechanism: str = "bounded",
    random_state: Any = None,
    session: Any = None,
    project: bool = True,
) -> Any:
    """``frame.dp.cov(columns, epsilon=)`` / ``frame.dp.corr(...)``: a labelled matrix frame
    (pandas: index and columns are the column names; Polars: a leading ``column`` column)."""
    frame = ns._frame
    mech = _check_mechanism(mechanism)
    cols = [columns] if isinstance(columns, str) else list(columns)
    if len(cols) < 2 or len(set(cols)) != len(cols):
        raise ParameterError(f"{kind} needs at least two distinct columns, got {cols!r}")
    dataset, is_root = resolve(frame, session)
    if not is_root:
        raise PrivateSizeError(
            f"dp.{kind} uses the public row count (Liu's variance and covariance bounds) and "
            "runs on the protected frame itself; a derived frame's size is private"
        )
    for col in cols:
        engine.validate_column(frame, col)
        if col not in dataset.bounds:
            raise BoundsError(
                f"no bounds declared for column {col!r}: declare them with "
                f"dpf.protect(frame, ..., bounds={{{col!r}: (lower, upper)}})"
            )
    n = int(dataset.n)
    if n < 2:
        raise UnsupportedInputError(f"{kind} needs at least 2 rows")
    eps, dlt = analyses._check_budget(epsilon, delta, mech)
    rng = analyses._generator(random_state)
    ledger = dataset.ledger
    ledger.check(eps, dlt)
    exact = _exact_covariance(frame, cols, dataset.bounds, n, dataset.row_cap)
    reservation = ledger.reserve(eps, dlt)
    try:
        rel = analyses.release_covariance(
            exact, n, [dataset.bounds[c] for c in cols], eps, columns=cols, mechanism=mech,
            delta=dlt, project=project, random_state=rng,
        )
        release_id = 0  # assigned by the ledger at commit
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")
        source = "seeded" if random_state is not None else "secure"
        eng = engine.engine_name(frame)
        entries = [_entry(r, release_id, now, kind, source, eng, dataset.bounds)
                   for r in rel.records]
    except BaseException:
        ledger.cancel(reservation)
        raise
    ledger.commit(reservation, entries)
    matrix = rel.cov if kind == "cov" else rel.corr
    table = _matrix_frame(matrix, cols, backend_of(frame))
    from dpframe.integrity import attach_release_log as _remember_release_log

    _remember_release_log(table, ledger.snapshot_document())
    return table


def _matrix_frame(matrix: np.ndarray, cols: list[str], backend: str) -> Any:
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame(matrix, index=pd.Index(cols), columns=cols)
    import polars as pl

    data: dict[str, Any] = {"column": cols}
    for j, c in enumerate(cols):
        data[c] = [float(v) for v in matrix[:, j]]
    return pl.DataFrame(data)


def _entry(
    rec: analyses.ReleaseRecord,
    release_id: int,
    time: str,
    kind: str,
    source: str,
    eng: str,
    bounds: dict[str, tuple[float, float]],
) -> dict[str, Any]:
    clamp = "; ".join(f"{c} clamped to [{bounds[c][0]:g}, {bounds[c][1]:g}]" for c in rec.columns)
    return {
        "release_id": release_id,
        "time": time,
        "name": kind,
        "query": kind,
        "part": rec.statistic,
        "columns": ",".join(rec.columns),
        "group_by": None,
        "group_keys": None,
        "epsilon": float(rec.epsilon),
        "delta": float(rec.delta),
        "mechanism_epsilon": float(rec.epsilon),
        "epsilon_overhead": float(rec.epsilon_overhead),
        "sensitivity": float(rec.sensitivity),
        "mechanism": rec.mechanism,
        "scale": float(rec.scale),
        "grid": float(rec.grid) if rec.noise else None,
        "domain_lower": float(rec.domain[0]),
        "domain_upper": float(rec.domain[1]),
        "clamping": clamp + " in the engine; how many were clamped is not released",
        "nulls": "raise",
        "random_source": source,
        "engine": eng,
        "size": "public",
        "formulation": "Liu §4.1 element-wise: variances, then covariances on "
                       "±√(S*jj S*kk); nearest PSD (Higham) post-processing. " + rec.notes,
        "composition": "sequential",
        "fixed_point_quantum": None,
    }


# -- describe -------------------------------------------------------------------------------
def describe(
    ns: Any,
    *,
    epsilon: float,
    columns: Sequence[str] | None = None,
    **kw: Any,
) -> Any:
    """``frame.dp.describe(epsilon=, columns=None)``: count, mean, std and the declared bounds
    of each bounded column, in one release (ε split evenly over the released statistics)."""
    from dpframe import queries as q_

    frame = ns._frame
    dataset, is_root = resolve(frame, kw.get("session"))
    cols = list(dataset.bounds) if columns is None else (
        [columns] if isinstance(columns, str) else list(columns))
    if not cols:
        raise ParameterError("describe needs at least one column with declared bounds")
    for col in cols:
        if col not in dataset.bounds:
            raise BoundsError(
                f"no bounds declared for column {col!r}; describe covers bounded columns only: "
                f"declare them with dpf.protect(frame, ..., bounds={{{col!r}: (lower, upper)}}) "
                "or leave the column out of columns="
            )
    size_public = is_root and kw.get("nulls", "raise") == "raise"
    queries: dict[str, q_.Query] = {}
    if not size_public:
        queries["count"] = q_.count()
    for col in cols:
        queries[f"mean[{col}]"] = q_.mean(col)
        queries[f"std[{col}]"] = q_.std(col)
    out = run_queries(frame, queries, epsilon=epsilon, **kw)
    count = float(dataset.n) if size_public else float(out.values["count"][0])
    rows = ["count", "mean", "std", "lower", "upper"]
    data = {
        col: [count, float(out.values[f"mean[{col}]"][0]), float(out.values[f"std[{col}]"][0]),
              float(dataset.bounds[col][0]), float(dataset.bounds[col][1])]
        for col in cols
    }
    backend = backend_of(frame)
    if backend == "pandas":
        import pandas as pd

        table = pd.DataFrame(data, index=rows)
    else:
        import polars as pl

        table = pl.DataFrame({"statistic": rows, **data})
    from dpframe.integrity import attach_release_log as _remember_release_log

    _remember_release_log(table, out.document)
    return table
