"""Issue 34: the real-line sampler's uniforms in one batch, and snapping's integer parts in
float64.

* :meth:`RandomSource.uniform_pair`: seeded, exactly :meth:`uniform_values` then
  :meth:`uniform` (same words, same order: seeded releases stay bit-identical); secure, one
  batch of ``2n`` uniforms split in two, with the logs of the second half, also where a word
  takes the general path; the secure uniforms are uniform and independent (Kolmogorov-Smirnov
  on each half, chi-square on pairs within and across the halves);
* :func:`snap_to_cells` on extreme anchors and offsets releases what the exact integer
  arithmetic of the one-value twin releases.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms import randomness
from dpframe.mechanisms.domains import real_line
from dpframe.mechanisms.randomness import RandomSource
from dpframe.mechanisms.scalar import _snap
from dpframe.mechanisms.snapping import SnapPlan, plan_snapping, snap_to_cells


@pytest.mark.parametrize("n", [1, 10, 40])
def test_seeded_pair_is_the_two_calls(n: int) -> None:
    pair_src, calls_src = RandomSource(34), RandomSource(34)
    v, w, log_w = pair_src.uniform_pair(n)
    v2 = calls_src.uniform_values(n)
    w2, log_w2 = calls_src.uniform(n)
    for x, y in ((v, v2), (w, w2), (log_w, log_w2)):
        assert x.tobytes() == y.tobytes()
    assert pair_src.words(3).tobytes() == calls_src.words(3).tobytes()  # same words used


def _replayed_urandom(monkeypatch: pytest.MonkeyPatch, words: np.ndarray) -> None:
    stream = words.tobytes()
    position = [0]

    def urandom(n: int) -> bytes:
        out = stream[position[0]:position[0] + n]
        assert len(out) == n
        position[0] += n
        return out

    monkeypatch.setattr(randomness.os, "urandom", urandom)


@pytest.mark.parametrize("n", [3, 40])  # 2n words: numpy's conversion, the signed route
def test_secure_pair_splits_one_batch(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    rng = np.random.default_rng(n)
    lead = rng.integers(0, 2**64, 2 * n, dtype=np.uint64, endpoint=False)
    lead[[0, n, 2 * n - 1]] = [2**40, 5, 0]  # short words in both halves (general path)
    tail = rng.integers(1, 2**64, 20, dtype=np.uint64, endpoint=False)
    words = np.concatenate([lead, tail])
    _replayed_urandom(monkeypatch, words)
    v, w, log_w = RandomSource().uniform_pair(n)
    _replayed_urandom(monkeypatch, words)
    u, log_u = RandomSource().uniform(2 * n)
    assert v.tobytes() == u[:n].tobytes() and w.tobytes() == u[n:].tobytes()
    assert log_w.tobytes() == log_u[n:].tobytes()
    assert np.all((v > 0) & (v < 1) & (w > 0) & (w < 1))


def test_secure_pair_is_uniform_and_independent() -> None:
    source = RandomSource()
    assert source.kind == "secure"
    draws = [source.uniform_pair(n) for n in (10,) * 300 + (100,) * 30]
    v = np.concatenate([d[0] for d in draws])
    w = np.concatenate([d[1] for d in draws])
    assert np.array_equal(np.concatenate([d[2] for d in draws]), np.log(w))
    alpha = 1e-4  # a false alarm once in 10,000 runs per check
    for sample in (v, w):
        assert stats.kstest(sample, "uniform").pvalue > alpha
    # independence: a 4 x 4 chi-square on (V_i, W_i) (the same draw's two uniforms, from
    # words n apart) and on (V_i, V_i+1) (neighbouring words)
    for x, y in ((v, w), (v[:-1], v[1:])):
        table = np.histogram2d(x, y, bins=4, range=[[0, 1], [0, 1]])[0]
        assert stats.chi2_contingency(table).pvalue > alpha


def _extreme_cases(lower: float, upper: float, scale: float
                   ) -> tuple[np.ndarray, np.ndarray, SnapPlan]:
    plan = plan_snapping(scale, 1.0, real_line(), (lower, upper))
    g = plan.grid
    anchors = np.array([lower, upper, (lower + upper) / 2, lower + g / 2, upper - g / 3])
    offsets = np.array([0.0, -0.0, g / 2, -g / 2, 2.0**52 * g, -(2.0**52) * g,
                        (2.0**52 + 0.5) * g, -(2.0**52 + 0.5) * g, (2.0**52 - 2.0**50) * g,
                        -(2.0**52 - 2.0**50) * g, 2.0**60 * g, -(2.0**61) * g, 1e308, -1e308,
                        np.inf, -np.inf, (upper - lower) * 1.5, -(upper - lower) * 0.75])
    a, o = np.meshgrid(anchors, offsets)
    return a.ravel(), o.ravel(), plan


@pytest.mark.parametrize(("lower", "upper", "scale"), [
    (0.0, 1000.0, 2.0), (-1e300, 1e300, 1e290), (-3.5, 2.0**-40, 1e-9), (1e15, 1e16, 5.0)])
def test_snapping_in_float64_is_exact_integer_snapping(lower: float, upper: float,
                                                       scale: float) -> None:
    a, o, plan = _extreme_cases(lower, upper, scale)
    with np.errstate(over="ignore"):
        for lo, hi in ((-np.inf, np.inf), (lower, upper)):
            ends = lo != -np.inf
            fast = snap_to_cells(a, o, plan.grid, np.full(a.size, lo) if ends else None,
                                 np.full(a.size, hi) if ends else None, plan.window)
            exact = [_snap(x, y, plan, lo, hi) for x, y in zip(a.tolist(), o.tolist(),
                                                               strict=True)]
            assert fast.tobytes() == np.array(exact).tobytes()
