"""End to end through ``.dp``: on neighbouring frames (one row replaced) the pre-noise
statistic handed to each mechanism moves by no more than the sensitivity the log records.

The frames layer does not expose pre-noise values, so the test instruments the mechanisms
themselves (``sample`` of the Laplace family, at class level, so every release path is seen:
``run_queries``, group-by, proportions, describe, cov/corr) and records the exact value each
one is asked to perturb. Both neighbours are released with the same ``random_state``.

cov/corr are adaptive (Liu §4.1): each covariance is released on ``±√(S*_jj S*_kk)`` built from
the *released* variances, so the statement is about the same released domain: with ``c`` fixed,
``clip(s_jk, −c, c)`` moves by at most the logged sensitivity. The test records the exact
covariance matrices and checks exactly that.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import frame_analyses
from dpframe.mechanisms import laplace as laplace_module

LO, HI = -3.0, 7.0
YLO, YHI = -1.0, 1.0
N = 40
KEYS = ["a", "b", "c"]
QUERIES = ["count", "sum", "mean", "variance", "std", "proportions", "cov", "corr", "describe",
           "release"]
BATCH = {"n": dpf.count(), "s": dpf.sum("x"), "m": dpf.mean("x"), "v": dpf.variance("x"),
         "sd": dpf.std("y")}
ROOT_ONLY = {"cov", "corr"}  # need the public n: refused on derived frames (PrivateSizeError)


class _Calls(list):
    """Recorded mechanism calls, plus the exact covariance matrices (``exact_cov``)."""

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
    exact_cov: list[np.ndarray] = []
    real_cov = frame_analyses._exact_covariance

    def cov(*args, **kwargs):
        out = real_cov(*args, **kwargs)
        exact_cov.append(out.copy())
        return out

    monkeypatch.setattr(frame_analyses, "_exact_covariance", cov)
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


def _run(frame_kind: str, df: pd.DataFrame, query: str, seed: int) -> list[dict]:
    bounds = {"x": (LO, HI), "y": (YLO, YHI)}
    kw: dict = {"epsilon": 0.5, "random_state": seed}
    if frame_kind.startswith("pandas"):
        pf = dpf.protect(df, epsilon=5.0, bounds=bounds, keys={"g": KEYS})
        if frame_kind == "pandas-root":
            target = pf
        elif frame_kind == "pandas-filter":
            target = pf[pf["flag"] == 1]
        elif frame_kind == "pandas-nulls-drop":
            target = pf
            kw["nulls"] = "drop"
        else:  # pandas-groupby
            gb = pf.dp.groupby("g")
            if query == "count":
                gb.count(**kw)
            elif query == "release":
                gb.release(BATCH, **kw)
            else:
                getattr(gb, query)("x", **kw)
            return pf.dp.log.to_dict("records")
        _ask(target.dp, query, **kw)
        return pf.dp.log.to_dict("records")
    pdf = pl.from_pandas(df)
    s = dpf.Session()
    if frame_kind == "polars-lazy":
        target = dpf.protect(pdf.lazy(), epsilon=5.0, bounds=bounds, session=s)
    else:
        pf = dpf.protect(pdf, epsilon=5.0, bounds=bounds, session=s)
        target = pf if frame_kind == "polars-root" else pf.filter(pl.col("flag") == 1)
    kw["session"] = s
    _ask(target.dp, query, **kw)
    return s.ledger.snapshot_document()["entries"]


FRAME_KINDS = ["pandas-root", "pandas-filter", "pandas-nulls-drop", "pandas-groupby",
               "polars-root", "polars-filter", "polars-lazy"]
PUBLIC = {"pandas-root", "polars-root", "polars-lazy"}


def _cases():
    for fk in FRAME_KINDS:
        for q in QUERIES:
            if q in ROOT_ONLY and fk not in PUBLIC:
                continue
            if fk == "pandas-groupby" and q in ("proportions", "describe", "cov", "corr"):
                continue
            yield fk, q


@pytest.mark.parametrize(("frame_kind", "query"), list(_cases()))
def test_pre_noise_statistic_moves_at_most_the_logged_sensitivity(recorder, frame_kind, query):
    for d, d_prime, what in _neighbours():
        recorder.clear()
        recorder.exact_cov.clear()
        log = [e for e in _run(frame_kind, d, query, seed=42) if e.get("grid") is not None]
        first, cov_first = list(recorder), list(recorder.exact_cov)
        recorder.clear()
        recorder.exact_cov.clear()
        log_p = [e for e in _run(frame_kind, d_prime, query, seed=42) if e.get("grid") is not None]
        second, cov_second = list(recorder), list(recorder.exact_cov)
        assert len(first) == len(log) >= 1 and len(second) == len(log_p)
        if query in ROOT_ONLY:
            _check_covariance(first, second, cov_first[0], cov_second[0], log, what)
            continue
        assert len(first) == len(second)
        for a, b, entry in zip(first, second, log, strict=True):
            # the log states the sensitivity the mechanism was calibrated to
            assert entry["sensitivity"] == a["sensitivity"] == b["sensitivity"]
            moved = np.abs(a["value"] - b["value"])
            assert (moved <= a["sensitivity"]).all(), (frame_kind, query, what, entry["part"],
                                                       moved, a["sensitivity"])
            expected = "public" if frame_kind in PUBLIC else "private"
            assert entry["size"] == expected


def _check_covariance(first, second, s, s_prime, log, what) -> None:
    """Variances: plain check. Covariance: same released domain ±c for both neighbours."""
    p = s.shape[0]
    pairs = [(j, j) for j in range(p)] + [(j, k) for j in range(p) for k in range(j + 1, p)]
    assert len(first) == len(pairs)
    for (j, k), call, entry in zip(pairs, first, log, strict=True):
        assert entry["sensitivity"] == call["sensitivity"]
        lo, hi = call["domain"]
        moved = abs(np.clip(s[j, k], lo, hi) - np.clip(s_prime[j, k], lo, hi))
        assert moved <= call["sensitivity"], (what, (j, k), moved, call["sensitivity"])
        assert math.isclose(call["value"][0], float(np.clip(s[j, k], lo, hi)), rel_tol=1e-12,
                            abs_tol=1e-15)


def test_recorded_values_are_the_exact_statistics(recorder):
    """Sanity check of the instrumentation: the recorded pre-noise values are the statistics."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.uniform(LO - 1, HI + 1, N)})
    pf = dpf.protect(df, epsilon=5.0, bounds={"x": (LO, HI)})
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
        getattr(pf.dp, query)(*col, epsilon=0.1, random_state=1)
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


@pytest.mark.parametrize("n", [2, 3, 5])
def test_random_small_neighbours(recorder, n):
    """Random tiny data sets with values at the bounds, the centre or anywhere (the extremes
    make the sensitivity bounds tight), random replacements; root and filtered pandas frames."""
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
        for frame_kind in ("pandas-root", "pandas-filter"):
            for query in SWEEP_QUERIES:
                recorder.clear()
                _run(frame_kind, d, query, seed=trial)
                first = list(recorder)
                recorder.clear()
                _run(frame_kind, d2, query, seed=trial)
                second = list(recorder)
                assert len(first) == len(second)
                for a, b in zip(first, second, strict=True):
                    moved = np.abs(a["value"] - b["value"])
                    assert (moved <= a["sensitivity"]).all(), (n, trial, frame_kind, query,
                                                               moved, a["sensitivity"])
