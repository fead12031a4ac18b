"""End to end through ``.dp``: on neighbouring frames (one row replaced) the pre-noise
statistic handed to each mechanism moves by no more than the sensitivity the log records.

The frames layer does not expose pre-noise values, so the test wraps the mechanisms the
release code builds (``dpframe.frames.release.make_mechanism``) and records the exact value
each one is asked to perturb. Both neighbours are released with the same ``random_state``.
Covered: count, sum, mean, variance, std × pandas root (public size), pandas filter (private
size), pandas ``nulls="drop"`` (private size), Polars root, Polars filter under a Session,
Polars LazyFrame, and a group-by with public keys where the replaced row changes group.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.frames import release as release_module

LO, HI = -3.0, 7.0
N = 40
QUERIES = ["count", "sum", "mean", "variance", "std"]


@pytest.fixture
def recorder(monkeypatch):
    calls: list[dict] = []
    real = release_module.make_mechanism

    def make(name, **kw):
        mech = real(name, **kw)
        orig = mech.sample

        def sample(value, size=None, random_state=None):
            calls.append({"value": np.atleast_1d(np.asarray(value, dtype=float)).copy(),
                          "sensitivity": mech.sensitivity})
            return orig(value, size=size, random_state=random_state)

        mech.sample = sample
        return mech

    monkeypatch.setattr(release_module, "make_mechanism", make)
    return calls


def _neighbours() -> list[tuple[pd.DataFrame, pd.DataFrame, str]]:
    """(D, D', description): D' replaces one row of D."""
    rng = np.random.default_rng(0)
    out = []
    # worst case for the variance: everything at l, one row moves l -> u
    base = pd.DataFrame({"x": np.full(N, LO), "flag": np.ones(N, int), "g": ["a"] * N})
    alt = base.copy()
    alt.loc[0, ["x", "g"]] = [HI, "b"]
    out.append((base, alt, "l->u"))
    # random data; replaced row leaves the filter, jumps groups and goes out of bounds
    x = rng.uniform(LO, HI, N)
    base = pd.DataFrame({"x": x, "flag": rng.integers(0, 2, N), "g": rng.choice(["a", "b"], N)})
    base.loc[5, ["flag", "g"]] = [1, "a"]
    alt = base.copy()
    alt.loc[5, ["x", "flag", "g"]] = [HI + 100.0, 0, "b"]  # clamped to HI
    out.append((base, alt, "leaves-filter"))
    # a row joins the filter with an extreme negative value
    alt2 = base.copy()
    i = int(np.flatnonzero(base["flag"].to_numpy() == 0)[0])
    alt2.loc[i, ["x", "flag"]] = [LO, 1]
    out.append((base, alt2, "joins-filter"))
    return out


def _run(kind: str, frame_kind: str, df: pd.DataFrame, query: str, seed: int) -> list[dict]:
    bounds = {"x": (LO, HI)}
    kw: dict = {"epsilon": 0.5, "random_state": seed}
    col = () if query == "count" else ("x",)
    if frame_kind == "pandas-root":
        pf = dpf.protect(df, epsilon=5.0, bounds=bounds)
        target = pf
    elif frame_kind == "pandas-filter":
        pf = dpf.protect(df, epsilon=5.0, bounds=bounds)
        target = pf[pf["flag"] == 1]
    elif frame_kind == "pandas-nulls-drop":
        pf = dpf.protect(df, epsilon=5.0, bounds=bounds)
        target = pf
        kw["nulls"] = "drop"
    elif frame_kind == "pandas-groupby":
        pf = dpf.protect(df, epsilon=5.0, bounds=bounds, keys={"g": ["a", "b", "c"]})
        getattr(pf.dp.groupby("g"), query)(*col, **kw)
        return pf.dp.log.to_dict("records")
    else:
        pdf = pl.from_pandas(df)
        s = dpf.Session()
        if frame_kind == "polars-lazy":
            pf = dpf.protect(pdf.lazy(), epsilon=5.0, bounds=bounds, session=s)
            target = pf
        else:
            pf = dpf.protect(pdf, epsilon=5.0, bounds=bounds, session=s)
            target = pf if frame_kind == "polars-root" else pf.filter(pl.col("flag") == 1)
        kw["session"] = s
        getattr(target.dp, query)(*col, **kw)
        return s.ledger.snapshot_document()["entries"]
    getattr(target.dp, query)(*col, **kw)
    return pf.dp.log.to_dict("records")


FRAME_KINDS = ["pandas-root", "pandas-filter", "pandas-nulls-drop", "pandas-groupby",
               "polars-root", "polars-filter", "polars-lazy"]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("frame_kind", FRAME_KINDS)
def test_pre_noise_statistic_moves_at_most_the_logged_sensitivity(recorder, frame_kind, query):
    for d, d_prime, what in _neighbours():
        recorder.clear()
        log = _run("d", frame_kind, d, query, seed=42)
        first = list(recorder)
        recorder.clear()
        log_prime = _run("d'", frame_kind, d_prime, query, seed=42)
        second = list(recorder)
        assert len(first) == len(second) == len(log) == len(log_prime) >= 1
        for a, b, entry, entry_p in zip(first, second, log, log_prime, strict=True):
            # the log states the sensitivity the mechanism was calibrated to
            assert entry["sensitivity"] == a["sensitivity"] == entry_p["sensitivity"]
            moved = np.abs(a["value"] - b["value"])
            assert (moved <= a["sensitivity"]).all(), (frame_kind, query, what, entry["part"],
                                                       moved, a["sensitivity"])
            size = entry["size"]
            assert size == ("public" if frame_kind in ("pandas-root", "polars-root",
                                                       "polars-lazy") else "private")


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
