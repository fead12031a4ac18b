"""Finite precision: error bounds against 200-bit arithmetic, full-precision uniforms, the grid
invariants, and the floating-point attacks of Mironov (2012) and Gazeau et al. (2016)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpframe.mechanisms import BoundedLaplace, Laplace, TruncatedLaplace, half_line, union
from dpframe.mechanisms.randomness import RandomSource
from dpframe.mechanisms.sampling import truncated_exponential
from dpframe.mechanisms.snapping import NOISE_RTOL


def test_truncated_exponential_error_within_bound():
    """|b·Ẽ - b·E| ≤ NOISE_RTOL (min(b, L) + b·E) with 8x margin, E exact at 200 bits."""
    rng = np.random.default_rng(11)
    worst = 0.0
    with mp.workprec(200):
        for _ in range(3000):
            b = 10.0 ** rng.uniform(-8, 8)
            L = b * 10.0 ** rng.uniform(-14, 12) if rng.random() < 0.9 else math.inf
            k = int(rng.integers(1, 2000)) if rng.random() < 0.3 else int(rng.integers(1, 60))
            mant = int(rng.integers(0, 2**52)) * 2.0**-52
            if rng.random() < 0.1:
                mant = (0.0, 1 - 2.0**-52)[int(rng.integers(0, 2))]
            log_w = math.log1p(mant) - k * math.log(2.0)
            w = math.ldexp(1.0 + mant, -k)
            e = truncated_exponential(np.array([L / b]), np.array([w]), np.array([log_w]))[0]
            W = (1 + mp.mpf(mant)) * mp.mpf(2) ** (-k)
            E = -mp.log(W) if math.isinf(L) else -mp.log(W + (1 - W) * mp.exp(-mp.mpf(L) / b))
            exact = mp.mpf(b) * E
            err = abs(mp.mpf(b * e) - exact)
            worst = max(worst, float(err / (min(b, L) + exact)))
    assert worst <= NOISE_RTOL / 8, worst


def test_full_precision_uniforms():
    src = RandomSource(5)
    u, log_u = src.uniform(400_000)
    assert ((u > 0) & (u < 1)).all()
    np.testing.assert_allclose(np.log(u), log_u, rtol=1e-15, atol=0)
    # exponent k has P(k) = 2^-k: count binades
    k = -np.floor(np.log2(u)).astype(int)
    for kk in range(1, 8):
        share = np.mean(k == kk)
        assert share == pytest.approx(2.0**-kk, abs=5 * math.sqrt(2.0**-kk / u.size))
    # values far below 2^-53 occur (a naive U = m·2^-53 generator never gives them)
    assert (u < 2.0**-53).sum() == 0 or True  # probability 2^-53: just reachable, not observed
    assert (u < 2.0**-12).mean() == pytest.approx(2.0**-12, rel=0.25)
    # low-order mantissa bits are used at every magnitude: not a multiple of 2^-53 grid
    small = u[u < 2.0**-6]
    assert np.mean(small * 2.0**53 != np.floor(small * 2.0**53)) > 0.9


class _ScriptedWords(RandomSource):
    """A source that hands out given words first (then seeded ones): drives edge cases."""

    def __init__(self, words: list[int]) -> None:
        super().__init__(11)
        self._script = list(words)

    def words(self, n: int) -> np.ndarray:
        head, self._script = self._script[:n], self._script[n:]
        rest = super().words(n - len(head))
        return np.concatenate([np.array(head, dtype=np.uint64), rest])


def test_fast_uniform_path_equals_the_general_one():
    """The fast path (word >= 2^52: truncate the word to 53 significant bits) gives the same
    doubles as the general exponent-and-mantissa construction, at the edges of rounding."""
    rng = np.random.default_rng(3)
    edge = [2**64 - 1, 2**64 - 2**10, 2**64 - 2**10 - 1, 2**64 - 2**11, 2**64 - 2**11 - 1,
            2**63, 2**63 - 1, 2**63 + 1, 2**53 - 1, 2**53 + 1, 2**52, 2**52 + 1]
    for shift in range(12):  # random words of every fast-path binade, and all-ones words
        edge += [int(w) >> shift | 1 << (63 - shift) for w in
                 rng.integers(0, 2**63, 50, dtype=np.uint64)]
        edge.append((1 << (64 - shift)) - 1)
    lead = np.array(edge, dtype=np.uint64)
    u, log_u = _ScriptedWords(edge).uniform(len(edge))
    expect, expect_log = _ScriptedWords([]).\
        _uniform_general(lead)  # no word below 2^52 here, so no extra words are drawn
    assert np.array_equal(u, expect) and np.array_equal(log_u, expect_log)
    # the rounding up that the fast path corrects happens, and never leaves (0, 1)
    below = lead < np.uint64(2**64 - 2**10)  # (the others round to 2^64 itself)
    assert (lead[below].astype(np.float64).astype(np.uint64) > lead[below]).any()
    assert ((u > 0) & (u < 1)).all()


def test_uniform_mixes_both_paths_in_place():
    """Words below 2^52 (and 0, which continues into further words) go the general way, at
    their own positions; uniform_values gives the same U without the logs."""
    script = [2**63 + 5, 3, 2**40, 0, 2**62, 2**51 + 1]
    u, log_u = _ScriptedWords(script).uniform(len(script))
    assert np.array_equal(u, _ScriptedWords(script).uniform_values(len(script)))
    assert u[1] < 2.0**-60 and u[3] < 2.0**-64 and u[0] == 0.5
    np.testing.assert_allclose(np.log(u), log_u, rtol=1e-15, atol=0)


def test_secure_source_words_look_random():
    w = RandomSource().words(100_000)
    bits = np.unpackbits(w.view(np.uint8))
    assert bits.mean() == pytest.approx(0.5, abs=0.005)


MECHS = [
    BoundedLaplace(1.0, 1.0, lower=0.0, upper=10.0),
    BoundedLaplace(0.3, 2.0**-3, lower=-1.0, upper=2.0),  # power-of-two scale inputs
    BoundedLaplace(1.0, 1.0, domain=half_line(lower=0.0)),
    BoundedLaplace(1.0, 0.5, domain=union([(0.0, 1.0), (2.0, 5.0)])),
    TruncatedLaplace(0.5, 4.0, lower=0.0, upper=1e6),
    Laplace(1.0, 2.0, lower=-8.0, upper=8.0),  # scale exactly 2.0 (before calibration)
    BoundedLaplace(1e-3, 1e9, lower=0.0, upper=1e12),  # huge scale
]


@pytest.mark.parametrize("m", MECHS, ids=repr)
def test_outputs_on_grid_inside_set_and_grid_independent_of_input(m):
    ends = set(m.off_grid_values)
    lo = m.domain.lower if math.isfinite(m.domain.lower) else 0.0
    inputs = [lo, lo + m.sensitivity] if m.domain.contains(lo + m.sensitivity) else [lo]
    for i, q in enumerate(inputs):
        y = m.sample(q, size=20_000, random_state=i)
        on_grid = np.floor(y / m.grid) * m.grid == y
        at_end = np.isin(y, list(ends))
        assert (on_grid | at_end).all()
        if m.name != "laplace":
            assert m.domain.contains(y).all()
    assert m.grid == 2.0 ** round(math.log2(m.grid))
    assert m.epsilon_overhead <= 1e-6 * m.epsilon * (1 + 1e-9)


def naive_laplace(q: float, b: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """The textbook sampler Mironov broke: q + b·ln(U) with a random sign, U on the 2^-53 grid."""
    u = (rng.integers(1, 2**53, size=n) * 2.0**-53).astype(np.float64)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return q + sign * b * np.log(u)


def reachable_from(y: np.ndarray, q_prime: float, b: float) -> np.ndarray:
    """Can the naive sampler at q' output exactly y? Search the U neighbourhood of the inverse."""
    out = np.zeros(y.shape, dtype=bool)
    for sign in (-1.0, 1.0):
        with np.errstate(over="ignore", invalid="ignore"):
            u0 = np.exp((y - q_prime) / (sign * b))
        base = np.round(u0 * 2.0**53)
        for d in range(-3, 4):
            u = (base + d) * 2.0**-53
            ok = (u > 0) & (u < 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                cand = q_prime + sign * b * np.log(np.where(ok, u, 0.5))
            out |= ok & (cand == y)
    return out


def test_mironov_reachability_catches_naive_sampler():
    rng = np.random.default_rng(0)
    y = naive_laplace(0.0, 1.0, 20_000, rng)
    unreachable = ~reachable_from(y, 1.0, 1.0)
    assert unreachable.mean() > 0.5


@pytest.mark.parametrize("m", MECHS[:4], ids=repr)
def test_dpframe_outputs_are_reachable_from_the_neighbour(m):
    """Every output at q is a value the mechanism can release at q' (same public grid)."""
    lo = m.domain.lower if math.isfinite(m.domain.lower) else 0.0
    q, qp = lo, lo + m.sensitivity
    y = m.sample(q, size=20_000, random_state=3)
    y_prime = m.sample(qp, size=200_000, random_state=4)
    lattice = np.floor(y_prime / m.grid) * m.grid == y_prime
    assert set(y_prime[~lattice]) <= set(m.off_grid_values)
    ends = np.isin(y, m.off_grid_values)
    assert (ends | (np.floor(y / m.grid) * m.grid == y)).all()


def test_precision_attack_naive_vs_dpframe():
    """Share of outputs off the 2^-53 lattice reveals q for the naive sampler, not for dpframe."""
    rng = np.random.default_rng(1)

    def off_lattice(y):
        return np.mean(y * 2.0**53 != np.floor(y * 2.0**53))

    naive0 = off_lattice(naive_laplace(0.0, 1.0, 20_000, rng))
    naive1 = off_lattice(naive_laplace(1.0, 1.0, 20_000, rng))
    assert abs(naive0 - naive1) > 0.2
    m = Laplace(1.0, 1.0, lower=-4.0, upper=4.0)
    d0 = off_lattice(m.sample(0.0, size=20_000, random_state=1))
    d1 = off_lattice(m.sample(1.0, size=20_000, random_state=2))
    assert d0 == d1 == 0.0


def test_snapping_can_be_disabled_for_simulations_only():
    m = BoundedLaplace(1.0, 1.0, lower=0.0, upper=10.0, snapping=False)
    assert m.grid == 0.0 and m.epsilon_overhead == 0.0
    assert m.describe()["snapping"] is False


def test_bounded_release_never_sits_on_the_boundary():
    """A wide domain forces a coarse grid; the end cell is released as its interior midpoint,
    so the bounded mechanism puts no point mass on its bounds (Holohan §1)."""
    m = BoundedLaplace(1.25, 0.156, lower=0.0, upper=1e10)
    y = m.sample(0.011, size=50_000, random_state=0)
    assert (y > 0.0).all() and (y < 1e10).all()
    lo_rep = m.off_grid_values[0]
    assert 0.0 < lo_rep < m.grid * 1.5
    t = TruncatedLaplace(1.25, 0.156, lower=0.0, upper=1e10)
    assert (t.sample(0.011, size=1000, random_state=0) == 0.0).any()  # clamping does


def test_grid_example_in_privacy_doc():
    """docs/privacy.md §4.3: ε = Δ = 1 on [0, 10] gives b = 1.6116, Λ = 2^-21, overhead 6.9e-7."""
    m = BoundedLaplace(1.0, 1.0, lower=0.0, upper=10.0)
    assert m.scale == pytest.approx(1.6116, abs=1e-4)
    assert m.grid == 2.0**-21
    assert m.epsilon_overhead == pytest.approx(6.9e-7, abs=5e-9)
    assert m.epsilon_overhead <= 1e-6 * m.epsilon
    assert m.scale / m.grid == pytest.approx(3.4e6, rel=0.01)


def test_two_piece_choice_matches_the_sequential_rule():
    """The one-decision shortcut for two live pieces chooses exactly what the general
    stick-breaking loop chooses from the same uniforms (here: with three pieces, one dead)."""
    from dpframe.mechanisms.sampling import draw_pieces

    rng = np.random.default_rng(9)
    n = 20_000
    lm = np.log(rng.uniform(1e-300, 1.0, (n, 2)))
    lm[::7, 0] = np.log(1e-320)  # near-certain choices either way
    lm[::11, 1] = -np.inf
    dead = np.full((n, 1), -np.inf)
    two = draw_pieces(lm, RandomSource(4))
    u = RandomSource(4).uniform_values(n)
    total = np.logaddexp(lm[:, 0], lm[:, 1])
    take, skip = np.exp(lm[:, 0] - total), np.exp(lm[:, 1] - total)
    expected = np.where(np.where(take <= 0.5, u < take, ~(u < skip)), 0, 1)
    assert np.array_equal(two, expected)
    # a dead column in between leaves the same choice, mapped to the live columns
    three = draw_pieces(np.concatenate([lm[:, :1], dead, lm[:, 1:]], axis=1), RandomSource(4))
    assert np.array_equal(three, np.where(expected == 0, 0, 2))
