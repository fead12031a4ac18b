"""The size-free cov/corr interval under add/remove neighbours (``_covariance_size_free``):
each part's exact interval at level ``1 − α/m`` (Bonferroni over the ``m`` parts a cell uses),
propagated through the formula by interval arithmetic and met with the reachable range, covers
the data's sample statistic with probability ``≥ level`` for every data set; checked here by
sampling the parts' own mechanisms on three data shapes (with a binomial tolerance), and that
the interval is narrower than the reachable range it replaced."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.release._pipeline import exact_measurements, plan

LEVEL, REPS = 0.9, 100


def _shapes() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 10, 400)
    extremes = np.tile([0.0, 10.0], 20)  # half the rows on each bound: the largest variance
    return {
        "correlated": pd.DataFrame({"x": x, "y": np.clip(x + rng.normal(0, 2, 400), 0, 10)}),
        "extremes": pd.DataFrame({"x": extremes, "y": np.roll(extremes, 1)}),
        "narrow": pd.DataFrame({"x": 5 + rng.normal(0, 0.3, 400).clip(-1, 1),
                                "y": rng.uniform(4, 6, 400)}),
    }


def _coverage(df: pd.DataFrame, kind: str, epsilon: float, seed: int
              ) -> tuple[float, float, float]:
    """(share of draws whose every cell covers the truth, mean off-diagonal width, reach)."""
    pf = dpf.protect(df, epsilon=10, bounds={c: (0, 10) for c in df},
                     neighbours="add_remove", max_rows=1000, missing={c: 0.0 for c in df})
    built = getattr(dpf, kind)(list(df.columns))  # released as its upper-triangle entries
    query = {"c": built}
    planned = plan(pf, query, epsilon=epsilon, mechanism="auto")[0]
    mechs = dict(zip((m.name for m in planned.plan.measurements), planned.mechanisms,
                     strict=True))
    exact = {part: values for (_, part), (values, _) in exact_measurements(pf, query).items()}
    matrix = np.corrcoef(df.to_numpy().T) if kind == "corr" else np.cov(df.to_numpy().T)
    truth = np.array([[matrix[j, k] for j, k in built.entries]])
    first = built.entries.index((0, 1))
    rng = np.random.default_rng(seed)
    covered, widths = 0, []
    for _ in range(REPS):
        noisy = {name: np.atleast_1d(mech.sample(exact[name], random_state=rng))
                 for name, mech in mechs.items()}
        lo, hi = planned.plan.interval(mechs, noisy, LEVEL)
        covered += bool(np.all((lo <= truth + 1e-9) & (truth <= hi + 1e-9)))
        widths.append(float(hi[0, first] - lo[0, first]))
    reach = 2.0 if kind == "corr" else 100.0  # [−1, 1]; ±2·5·5
    return covered / REPS, float(np.mean(widths)), reach


@pytest.mark.parametrize(("kind", "epsilon"), [("corr", 1.0), ("cov", 0.5)])
def test_every_cell_covers_at_the_level_on_every_shape(kind, epsilon):
    # every cell at once is a stronger event than each cell at its level; a 3σ tolerance
    floor = LEVEL - 3 * np.sqrt(LEVEL * (1 - LEVEL) / REPS)
    for i, (name, df) in enumerate(_shapes().items()):
        share, width, reach = _coverage(df, kind, epsilon, seed=i)
        assert share >= floor, (name, share)
        if name == "correlated":  # (few rows or little spread: wide, still valid)
            assert width < reach / 2, (name, width)
