"""Black-box audit of whole releases through ``.dp`` (frames layer + mechanisms together).

On every backend (the ``constructor`` fixture), one group-by release with K public keys, where
every group holds the same rows, yields K independent draws of the per-group release. Frame D
and its neighbour D' differ, in every group, by one row replaced (for the count: a row moves
from an undeclared filler key into the group, so the public n is the same). The per-group claim
is ε/2 (a replacement can touch two groups; the log records ``mechanism_epsilon`` per
measurement). ``audit`` then tests the released numbers exactly as a user would see them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.mechanisms.audit import audit
from dpframe.release import _mechanisms as release_module

#: statistical: every audit draws N = 50,000 releases per neighbour (still run by CI)
pytestmark = [pytest.mark.slow,
              # CI time: DuckDB adds 35 s (e2e) / 14 s (black box) here; --all-backends runs it
              pytest.mark.default_backends("pandas", "pandas-nullable", "pandas-pyarrow",
                                           "polars", "polars-lazy")]

EPS = 2.0
N = 50_000
ROWS = 3


def frames_sampler(query: str, mechanism: str = "bounded", constructor=pd.DataFrame):
    def sampler(value: float, size: int, rng: np.random.Generator) -> np.ndarray:
        keys = list(range(size))
        if query == "count":
            per = int(value)  # D: empty groups; D': one row each, taken from the filler
            g = np.repeat(keys, per)
            x = np.zeros(g.size)
            filler = size * (1 - per) + 5
        else:  # D: ROWS rows at the lower bound; D': one of them at the upper bound
            g = np.repeat(keys, ROWS)
            x = np.zeros(g.size)
            if value == 1:
                x[::ROWS] = 10.0
            filler = 5
        df = constructor({"g": np.r_[g, np.full(filler, -1)],
                          "x": np.r_[x, np.zeros(filler)]})
        pf = dpf.protect(df, epsilon=EPS, bounds={"x": (0, 10)})
        gb = pf.dp.groupby("g", keys=keys)
        args = () if query == "count" else ("x",)
        out = getattr(gb, query)(*args, epsilon=EPS, mechanism=mechanism,
                                 random_state=int(rng.integers(2**63)))
        return np.asarray(out[query].to_numpy(), dtype=float)

    return sampler


@pytest.mark.parametrize(("query", "mechanism"), [
    ("count", "bounded"), ("count", "truncated"), ("sum", "bounded"), ("mean", "bounded"),
    ("variance", "bounded"),
])
def test_group_releases_keep_their_epsilon(query, mechanism, constructor):
    res = audit(frames_sampler(query, mechanism, constructor), 0, 1, EPS / 2, n=N, alpha=0.01,
                random_state=21)
    assert not res.violation, str(res)


@pytest.mark.backends("pandas")
def test_a_frames_layer_with_understated_sensitivity_is_caught(monkeypatch, constructor):
    """Negative control: the same release with every mechanism's sensitivity divided by 1.5."""
    real = release_module.make_mechanism

    def understated(name, **kw):
        kw["sensitivity"] = kw["sensitivity"] / 1.5
        return real(name, **kw)

    monkeypatch.setattr(release_module, "make_mechanism", understated)
    res = audit(frames_sampler("count", "truncated", constructor), 0, 1, EPS / 2, n=N,
                alpha=0.01, random_state=22)
    assert res.violation, str(res)
