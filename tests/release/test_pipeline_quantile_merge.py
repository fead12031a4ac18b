"""Several quantile queries on one column in one release bin the column once
(:func:`dpframe.query.merged_reads`): their Bins aggregates differ only in their read windows
and are read as one with the union of the windows; each query's draws read the same counts,
so the seeded outputs are those of one count per query. Grouped and ungrouped, with ``ci=``
brackets; on neighbouring data sets the same outcome class, and the audit's exact counts
(:func:`exact_measurements`) move by at most the logged sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.engine import _aggregation, _bins
from dpframe.mechanisms.quantiles import QuantileMechanism
from dpframe.query import Agg, Bins, merged_reads
from dpframe.query._aggregates import ReadWindows
from dpframe.release import _pipeline
from dpframe.release._pipeline import exact_measurements, plan

B = 1 << 16  # (≥ 2¹⁵ bins and ≥ 2¹⁴ rows: the two-pass count applies)
QUERIES = {"median": dpf.median("x", bins=B), "p90": dpf.quantile("x", 0.9, bins=B),
           "p10": dpf.quantile("x", 0.1, bins=B),
           "quartiles": dpf.quantile("x", [0.25, 0.75], bins=B)}


def _frame(replaced: float | None = None) -> object:
    rng = np.random.default_rng(7)
    n = 20_000
    x = rng.normal(50.0, 8.0, n)
    x[1] = np.nan
    if replaced is not None:  # a neighbouring data set: one row replaced
        x[0] = replaced
    return dpf.protect(pd.DataFrame({"x": x, "g": rng.choice(["a", "b"], n)}), epsilon=1e6,
                       bounds={"x": (0.0, 100.0)}, missing={"x": 0.0},
                       keys={"g": ["a", "b", "c"]})


def _release(frame: object, grouped: bool, seed: int) -> pd.DataFrame:
    owner = frame.dp.groupby("g") if grouped else frame.dp  # type: ignore[attr-defined]
    return owner.release(QUERIES, epsilon=40.0, ci=0.9, random_state=seed)


def _counted(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Agg], list[bool]]:
    """Every bins aggregate the engine counts, and whether each took the two-pass count."""
    binned: list[Agg] = []
    two_pass: list[bool] = []
    count, ungrouped, grouped = (_aggregation._bin_counts, _bins.two_pass_counts,
                                 _bins.grouped_two_pass_counts)

    def bin_counts(*args: object) -> object:
        binned.append(args[2])  # type: ignore[arg-type]
        return count(*args)  # type: ignore[arg-type]

    def spied(fn: object) -> object:
        def run(*args: object) -> object:
            out = fn(*args)  # type: ignore[operator]
            two_pass.append(out is not None)
            return out
        return run

    monkeypatch.setattr(_aggregation, "_bin_counts", bin_counts)
    monkeypatch.setattr(_bins, "two_pass_counts", spied(ungrouped))
    monkeypatch.setattr(_bins, "grouped_two_pass_counts", spied(grouped))
    return binned, two_pass


@pytest.mark.parametrize("grouped", [False, True])
def test_a_batch_of_quantiles_bins_the_column_once_and_releases_the_same(monkeypatch, grouped):
    frame = _frame()
    binned, two_pass = _counted(monkeypatch)
    merged = _release(frame, grouped, 3)
    assert len(binned) == 1 and two_pass == [True]  # one two-pass count for all queries
    draws = binned[0].bins.window.draws()
    assert draws is not None and len(draws) == 3 * 5  # 5 levels × (point + 2 brackets)
    binned.clear()
    two_pass.clear()
    monkeypatch.setattr(_pipeline, "merged_reads", lambda aggs: {})  # one count per query
    separate = _release(frame, grouped, 3)
    assert len(binned) == len(QUERIES) and two_pass == [True] * len(QUERIES)
    pd.testing.assert_frame_equal(merged, separate)


def test_neighbouring_data_sets_same_outcome_class_and_public_windows():
    """Neighbours (one row replaced, at the top bound): the batch releases the same columns,
    shape and dtypes, within the bounds; the merged read's draws come from the plan alone
    (equal on both); the audit's exact counts, every bin counted, differ by at most the
    logged rank sensitivity in every cumulative count."""
    frames = [_frame(), _frame(replaced=100.0)]
    outs = [_release(f, False, 5) for f in frames]
    assert list(outs[0].columns) == list(outs[1].columns)
    assert outs[0].shape == outs[1].shape and (outs[0].dtypes == outs[1].dtypes).all()
    for out in outs:
        values = out[["median", "p90", "p10", "quartiles[0.25]", "quartiles[0.75]"]
                     ].to_numpy(dtype=float)
        assert values.size == 5 and ((values >= 0.0) & (values <= 100.0)).all()

    def union_draws(frame: object) -> object:
        aggs = [a for p in plan(frame, QUERIES, epsilon=40.0, ci=0.9)
                for a in p.plan.aggregates]
        (read,) = set(merged_reads(aggs).values())
        return read.bins.window.draws()

    assert union_draws(frames[0]) == union_draws(frames[1]) is not None
    exact = [exact_measurements(f, QUERIES) for f in frames]
    assert exact[0].keys() == exact[1].keys()
    for key, (counts, sensitivity) in exact[0].items():
        other = exact[1][key][0]
        assert counts.shape == other.shape == (1, B)
        gap = np.abs(np.cumsum(counts, axis=1) - np.cumsum(other, axis=1)).max()
        assert 0 < gap <= sensitivity


def test_merged_reads_groups_only_aggregates_that_differ_in_their_windows():
    def windows(q: float) -> ReadWindows:
        w = ReadWindows()
        w.record(QuantileMechanism(1.0, 0.0, 1.0, q, bins=B))
        return w

    a, b, c = (Agg("bins", "x", bins=Bins(0.0, 1.0, B, windows(q))) for q in (0.1, 0.5, 0.9))
    other_grid = Agg("bins", "x", bins=Bins(0.0, 1.0, B // 2, windows(0.5)))
    other_column = Agg("bins", "y", bins=Bins(0.0, 1.0, B, windows(0.5)))
    assert merged_reads([a, other_grid, other_column, Agg("rows")]) == {}
    merged = merged_reads([a, b, a, other_grid])
    assert merged.keys() == {a, b} and merged[a] is merged[b]
    assert merged[a].bins.window.draws() == (*a.bins.window.draws(), *b.bins.window.draws())
    histogram = Agg("bins", "x", bins=Bins(0.0, 1.0, B))  # every bin counted: answers all
    assert set(merged_reads([a, histogram, c]).values()) == {histogram}
    assert ReadWindows.union([a.bins.window, ReadWindows()]).draws() is None
