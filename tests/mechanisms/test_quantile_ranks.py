"""The two forms of a group's cumulative counts (``dpframe/mechanisms/quantile_ranks.py``):
:class:`NonzeroCounts` (from the bins with rows) answers every question the run sampler asks
-- the total, ``numpy.searchsorted`` on the cumulative counts at thresholds around and beyond
the total, ``Σ_{i < j} c_i`` and a window's bins with rows -- exactly as
:class:`CumulativeCounts` (block totals) does, on int64 and integer-valued double counts.
That the sampler's draws are the same with either is pinned in
``test_quantile_sampler_reference.py``."""

from __future__ import annotations

import numpy as np

from dpframe.mechanisms.quantile_ranks import CumulativeCounts, NonzeroCounts


def _cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(34)
    k = CumulativeCounts.BLOCK
    sparse = np.zeros(2 * k + 11, np.int64)
    sparse[rng.choice(sparse.size, 90, replace=False)] = rng.integers(1, 4, 90)
    one = np.zeros(300, np.int64)
    one[150] = 9
    ends = np.zeros(300, np.int64)
    ends[0], ends[-1] = 40, 40
    return [("one bin", np.array([7])), ("one empty bin", np.array([0])),
            ("no rows", np.zeros(300, np.int64)), ("one interior bin", one),
            ("rows at the ends", ends), ("sparse, short last block", sparse),
            ("dense", rng.poisson(2.0, 3000))]


def test_nonzero_counts_answer_as_the_block_form() -> None:
    for name, counts in _cases():
        block, nonzero = CumulativeCounts(counts), NonzeroCounts(counts.astype(float))
        assert block.total == nonzero.total, name
        for x in (-3, -1, 0, 1, 2, 5, block.total - 1, block.total, block.total + 1):
            for side in ("left", "right"):
                want = int(np.searchsorted(np.cumsum(counts), x, side=side))
                assert block.searchsorted(np.int64(x), side) == want, (name, x, side)
                assert nonzero.searchsorted(np.int64(x), side) == want, (name, x, side)
        for first, last in ((0, counts.size), (1, max(1, counts.size - 1)),
                            (counts.size // 3, counts.size // 2)):
            assert nonzero.before(first) == block.before(first)
            for a, b in zip(nonzero.window(first, last), block.window(first, last),
                            strict=True):
                assert np.array_equal(a, b), (name, first, last)
