"""End to end through ``.dp``: on neighbouring frames (one row replaced) the pre-noise
statistic handed to each mechanism moves by no more than the sensitivity the log records.

The frames layer does not expose pre-noise values, so the test instruments the mechanisms
themselves (``sample`` of the Laplace family, at class level, so every release is seen: single
statistics, batch release, group-by, proportions, describe, cov/corr — all one pipeline) and
records the exact value each one is asked to perturb. Both neighbours are released with the
same ``random_state``. Every backend (the ``constructor`` fixture) and every view of the data:
the protected root with a public fill value (public size), the root under the default
``"drop"`` policy (private size for the float columns), a verified filter, and a group-by.
The neighbours include a row that goes missing (NaN): a replacement by the fill value, or a
removal under ``"drop"``.

cov/corr are adaptive (Liu §4.1): each covariance is released on ``±√(S*_jj S*_kk)`` built from
the *released* variances, so the statement is about the same released domain: with ``c`` fixed,
``clip(s_jk, −c, c)`` moves by at most the logged sensitivity. The test records the exact
(unclipped) covariances the plan computes and checks exactly that.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import narwhals as nw
import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.mechanisms import laplace as laplace_module
from dpframe.query import _covariance as queries_module

# CI time: DuckDB adds 35 s (e2e) / 14 s (black box) here; --all-backends runs it
pytestmark = pytest.mark.default_backends("pandas", "pandas-nullable", "pandas-pyarrow",
                                          "polars", "polars-lazy")

LO, HI = -3.0, 7.0
YLO, YHI = -1.0, 1.0
N = 40
KEYS = ["a", "b", "c"]
QUERIES = ["count", "sum", "mean", "variance", "std", "proportions", "cov", "corr", "describe",
           "release"]
BATCH = {"n": dpf.count(), "s": dpf.sum("x"), "m": dpf.mean("x"), "v": dpf.variance("x"),
         "sd": dpf.std("y")}
ROOT_ONLY = {"cov", "corr"}  # need the public n: refused elsewhere (PrivateSizeError)
BOUNDS = {"x": (LO, HI), "y": (YLO, YHI)}
FILL = {"x": 0.0, "y": 0.0}
VIEWS = ["root", "root-drop", "filter", "groupby"]


class _Calls(list):
    """Recorded mechanism calls, plus the exact (co)variances (``exact_cov``)."""

    exact_cov: list


@pytest.fixture
def recorder(monkeypatch):
    calls = _Calls()
    real = laplace_module._LaplaceFamily.sample

    def sample(self, value, size=None, random_state=None):
        calls.append({"value": np.atleast_1d(np.asarray(value, dtype=float)).copy(),
                      "sensitivity": self.sensitivity,
                      "domain": (self.domain.lower, self.domain.upper)})
        return real(self, value, size=size, random_state=random_state)

    monkeypatch.setattr(laplace_module._LaplaceFamily, "sample", sample)
    exact_cov: list[dict] = []
    real_stat = queries_module._covariance_statistic

    def covariance_statistic(sum_a, sum_b, prod, n):
        stat = real_stat(sum_a, sum_b, prod, n)

        def recorded(aggs):
            out = stat(aggs)
            if not exact_cov or (sum_a.column, sum_b.column) in exact_cov[-1]:
                exact_cov.append({})
            exact_cov[-1][(sum_a.column, sum_b.column)] = float(out[0])
            return out

        return recorded

    monkeypatch.setattr(queries_module, "_covariance_statistic", covariance_statistic)
    calls.exact_cov = exact_cov
    return calls


def _neighbours() -> list[tuple[pd.DataFrame, pd.DataFrame, str]]:
    """(D, D', description): D' replaces one row of D."""
    rng = np.random.default_rng(0)
    out = []
    # worst case for the variance: everything at l, one row moves l -> u (and changes group)
    base = pd.DataFrame({"x": np.full(N, LO), "y": np.full(N, YLO), "flag": np.ones(N, int),
                         "g": ["a"] * N})
    alt = base.copy()
    alt.loc[0, ["x", "y", "g"]] = [HI, YHI, "b"]
    out.append((base, alt, "l->u"))
    # random data; the replaced row leaves the filter, jumps groups and goes out of bounds
    base = pd.DataFrame({"x": rng.uniform(LO, HI, N), "y": rng.uniform(YLO, YHI, N),
                         "flag": rng.integers(0, 2, N), "g": rng.choice(KEYS, N)})
    base.loc[5, ["flag", "g"]] = [1, "a"]
    alt = base.copy()
    alt.loc[5, ["x", "y", "flag", "g"]] = [HI + 100.0, YLO - 5.0, 0, "c"]  # clamped
    out.append((base, alt, "leaves-filter"))
    # a row joins the filter with extreme values
    alt2 = base.copy()
    i = int(np.flatnonzero(base["flag"].to_numpy() == 0)[0])
    alt2.loc[i, ["x", "y", "flag"]] = [LO, YHI, 1]
    out.append((base, alt2, "joins-filter"))
    # a row's values go missing (filled, or dropped from the column's statistics)
    alt3 = base.copy()
    alt3.loc[5, ["x", "y"]] = [np.nan, np.nan]
    out.append((base, alt3, "goes-missing"))
    return out


def _ask(ns, query: str, **kw) -> None:
    if query == "count":
        ns.count(**kw)
    elif query in ("sum", "mean", "variance", "std"):
        getattr(ns, query)("x", **kw)
    elif query == "proportions":
        ns.proportions("g", keys=KEYS, **kw)
    elif query in ("cov", "corr"):
        getattr(ns, query)(["x", "y"], **kw)
    elif query == "release":
        ns.release(BATCH, **kw)
    else:
        ns.describe(columns=["x", "y"], **kw)


def _run(constructor, view: str, df: pd.DataFrame, query: str, seed: int) -> list[dict]:
    kw: dict = {"epsilon": 0.5, "random_state": seed}
    s = dpf.Session()
    pf = dpf.protect(constructor(df), epsilon=5.0, bounds=BOUNDS, keys={"g": KEYS},
                     missing="drop" if view == "root-drop" else FILL, session=s)
    if view == "groupby":
        gb = pf.dp.groupby("g")
        if query == "count":
            gb.count(**kw)
        elif query == "release":
            gb.release(BATCH, **kw)
        else:
            getattr(gb, query)("x", **kw)
    else:
        target = pf.dp.filter(nw.col("flag") == 1) if view == "filter" else pf
        _ask(target.dp, query, **kw)
    # (a public size's count is released exactly, with no mechanism: nothing to record)
    return [e for e in s.ledger.entries
            if e["mechanism"] not in ("none (single-point domain)", "none (public size)")]


def _expected_size(view: str, entry: dict) -> str:
    """Public only for the protected rows, and only for queries whose columns keep every row
    (the fill policy, or no column read)."""
    if view == "root" or (view == "root-drop" and entry["columns"] == ""):
        return "public"
    return "private"


def _cases():
    for view in VIEWS:
        for q in QUERIES:
            if q in ROOT_ONLY and view != "root":
                continue
            if view == "groupby" and q in ("proportions", "describe", "cov", "corr"):
                continue
            yield pytest.param(view, q, id=f"{view}-{q}")


@pytest.mark.parametrize(("view", "query"), list(_cases()))
def test_pre_noise_statistic_moves_at_most_the_logged_sensitivity(recorder, constructor, view,
                                                                  query):
    for d, d_prime, what in _neighbours():
        recorder.clear()
        recorder.exact_cov.clear()
        log = _run(constructor, view, d, query, seed=42)
        first, cov_first = list(recorder), list(recorder.exact_cov)
        recorder.clear()
        recorder.exact_cov.clear()
        log_p = _run(constructor, view, d_prime, query, seed=42)
        second, cov_second = list(recorder), list(recorder.exact_cov)
        public_count = query == "count" and view in ("root", "root-drop")  # exact, free
        assert len(first) == len(log) >= (0 if public_count else 1)
        assert len(second) == len(log_p)
        for entry in log:
            assert entry["size"] == _expected_size(view, entry), (view, query, entry["part"])
        if query in ROOT_ONLY:
            _check_covariance(first, cov_first[0], cov_second[0], log, what)
            continue
        assert len(first) == len(second)
        for a, b, entry in zip(first, second, log, strict=True):
            # the log states the sensitivity the mechanism was calibrated to
            assert entry["sensitivity"] == a["sensitivity"] == b["sensitivity"]
            moved = np.abs(a["value"] - b["value"])
            assert (moved <= a["sensitivity"]).all(), (constructor, view, query, what,
                                                       entry["part"], moved, a["sensitivity"])


def _check_covariance(first, s, s_prime, log, what) -> None:
    """Variances: plain check. Covariance: same released domain ±c for both neighbours."""
    pairs = list(s)  # (x, x), (y, y), (x, y): the plan's measurement order
    assert pairs == [("x", "x"), ("y", "y"), ("x", "y")]
    assert len(first) == len(pairs)
    for pair, call, entry in zip(pairs, first, log, strict=True):
        assert entry["sensitivity"] == call["sensitivity"]
        lo, hi = call["domain"]
        moved = abs(np.clip(s[pair], lo, hi) - np.clip(s_prime[pair], lo, hi))
        assert moved <= call["sensitivity"], (what, pair, moved, call["sensitivity"])
        assert math.isclose(call["value"][0], float(np.clip(s[pair], lo, hi)), rel_tol=1e-12,
                            abs_tol=1e-15)


def test_recorded_values_are_the_exact_statistics(recorder):
    """Sanity check of the instrumentation: the recorded pre-noise values are the statistics."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.uniform(LO - 1, HI + 1, N)})
    pf = dpf.protect(df, epsilon=5.0, bounds={"x": (LO, HI)}, missing=0.0)
    clipped = df["x"].clip(LO, HI)
    expected: dict[str, Callable[[], float]] = {
        "count": lambda: N,
        "sum": lambda: float((clipped - LO).sum()),
        "mean": lambda: float((clipped - LO).mean()),
        "variance": lambda: float(clipped.var(ddof=1)),
    }
    for query, value in expected.items():
        recorder.clear()
        col = () if query == "count" else ("x",)
        # (the count of the protected frame is its public n, released without noise: count
        # the rows of a filter every row passes instead, a private size)
        frame = pf.dp.filter(nw.col("x") > LO - 2) if query == "count" else pf
        getattr(frame.dp, query)(*col, epsilon=0.1, random_state=1)
        # the engine rounds each value to a fixed-point grid of quantum q (coarser when it
        # needs Σx², to keep Σk² inside int64); allow that rounding: |Δstat| ≤ 2·w·q
        q = pf.dp.log["fixed_point_quantum"].iloc[-1]
        tol = 2 * (HI - LO) * (q if q is not None and q == q else 0.0) + 1e-12
        assert math.isclose(recorder[0]["value"][0], value(), rel_tol=0, abs_tol=tol)


def test_proportions_log_size_field():
    """Regression (found by this suite, fixed in c061543): the log said size='private' for
    proportions on the protected frame although the formulation uses the public n."""
    df = pd.DataFrame({"g": ["a", "b"] * 10})
    pf = dpf.protect(df, epsilon=1.0, bounds={}, keys={"g": ["a", "b"]})
    pf.dp.proportions("g", epsilon=0.5, random_state=1)
    entry = pf.dp.log.iloc[-1]
    assert "(public n)" in entry["formulation"]
    assert entry["size"] == "public"


SWEEP_QUERIES = ["count", "sum", "mean", "variance", "proportions", "describe"]


@pytest.mark.backends("pandas")
@pytest.mark.parametrize("n", [2, 3, 5])
def test_random_small_neighbours(recorder, constructor, n):
    """Random tiny data sets with values at the bounds, the centre or anywhere (the extremes
    make the sensitivity bounds tight), random replacements; root (fill and drop) and filtered
    pandas frames."""
    rng = np.random.default_rng(100 + n)
    xs = np.array([LO, HI, (LO + HI) / 2])
    for trial in range(4):
        def draw(size: int) -> np.ndarray:
            pick = rng.integers(0, 4, size)
            return np.where(pick < 3, xs[np.minimum(pick, 2)], rng.uniform(LO, HI, size))

        d = pd.DataFrame({"x": draw(n), "y": rng.uniform(YLO, YHI, n),
                          "flag": rng.integers(0, 2, n), "g": rng.choice(KEYS, n)})
        d2 = d.copy()
        i = int(rng.integers(n))
        d2.loc[i, ["x", "flag", "g"]] = [float(draw(1)[0]), int(rng.integers(0, 2)),
                                         str(rng.choice(KEYS))]
        for view in ("root", "root-drop", "filter"):
            for query in SWEEP_QUERIES:
                recorder.clear()
                _run(constructor, view, d, query, seed=trial)
                first = list(recorder)
                recorder.clear()
                _run(constructor, view, d2, query, seed=trial)
                second = list(recorder)
                assert len(first) == len(second)
                for a, b in zip(first, second, strict=True):
                    moved = np.abs(a["value"] - b["value"])
                    assert (moved <= a["sensitivity"]).all(), (n, trial, view, query,
                                                               moved, a["sensitivity"])
