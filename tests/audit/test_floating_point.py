"""Floating-point attacks (Mironov 2012; Gazeau et al.): reachability, precision, snapping.

*Reachability.* An adversary who sees an output ``y`` that the sampler can produce from ``q``
but not from ``q'`` learns the input with certainty. For the textbook sampler
``q + b·ln(U)`` we decide reachability exactly (binary search over the 2^53 values of ``U``).
For dpframe we go further than checking that outputs lie on a public lattice: for every output
``y`` drawn from ``q`` we *construct* the random input (piece decisions and full-precision
uniform) that makes dpframe's own sampling code produce ``y`` from ``q'``, run that code, and
check it returns ``y``. (This drives the private ``_draw`` with a scripted random source; it
relies on the order in which the sampler consumes uniforms and would need updating if that
order changed.)

*Precision.* The share of outputs that are not multiples of 2^-53 must not depend on the input.

*Snapping invariants.* Every output is a multiple of ``m.grid`` or one of the public
``m.off_grid_values``, lies in the feasible set (or the public window for plain Laplace), and
grid and off-grid values are functions of public parameters only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.mechanisms import BoundedLaplace, Laplace, TruncatedLaplace, real_line

from ._controls import DOMAINS, fixed_scale, naive_laplace, naive_reachable

LN2 = math.log(2.0)
CLASSES = [BoundedLaplace, TruncatedLaplace, Laplace]
SCALES = [1.0, 0.125, 0.7, 2.0**10, 1e6, 2.0**40, 1e15]
N_REACH = 2000


# -- the naive sampler is broken ---------------------------------------------------------------
@pytest.mark.parametrize("scale", [1.0, 0.125, 2.0**10, 1e6])
def test_naive_sampler_fails_reachability(scale):
    rng = np.random.default_rng(1)
    y = naive_laplace(scale)(0.0, N_REACH, rng)
    assert naive_reachable(y, 0.0, scale).all()  # sanity: the checker accepts true outputs
    unreachable = 1.0 - naive_reachable(y, 1.0, scale).mean()
    assert unreachable > 0.5, unreachable


def test_naive_sampler_fails_precision_test():
    rng = np.random.default_rng(2)
    s = naive_laplace(1.0)
    off0 = _off_grid_share(s(0.0, 100_000, rng))
    off1 = _off_grid_share(s(1.0, 100_000, rng))
    assert off0 > 0.15 and off1 < 0.01


def _off_grid_share(y: np.ndarray) -> float:
    z = y * 2.0**53
    return float(np.mean(z != np.floor(z)))


# -- dpframe: reachability through the real sampling code --------------------------------------
class _Scripted:
    """A stand-in random source returning prepared ``(U, log U)`` arrays in order."""

    kind = "scripted"

    def __init__(self, draws: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self._draws = list(draws)

    def uniform(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        u, log_u = self._draws.pop(0)
        assert u.size == n
        return u, log_u

    def uniform_values(self, n: int) -> np.ndarray:
        return self.uniform(n)[0]

    def uniform_pair(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As the seeded source: :meth:`uniform_values`, then :meth:`uniform`."""
        v = self.uniform_values(n)
        w, log_w = self.uniform(n)
        return v, w, log_w


def _full_precision_uniform(log_target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(U, log U)`` as dpframe's source represents ``U = (1 + m·2^-52)·2^-k`` (k ≥ 1, m a
    52-bit integer), with ``log U`` as close to ``log_target`` (≤ 0) as that grid allows."""
    t = np.minimum(log_target, -1e-300)
    k = np.floor(-t / LN2) + 1.0
    mant = np.clip(np.round(np.expm1(t + k * LN2) * 2.0**52), 0, 2.0**52 - 1) * 2.0**-52
    log_u = np.log1p(mant) - k * LN2
    return np.ldexp(1.0 + mant, -k.astype(np.int64)), log_u


def _pieces(noise_set, qp: float, b: float):
    """Pieces of the noise set cut at ``qp`` (down pieces, then up pieces), as in the paper
    construction: anchor, direction, length, log-mass (computed here, independently)."""
    out = []
    for direction in (-1, 1):
        for lo, hi in noise_set.components:
            anchor = min(hi, qp) if direction < 0 else max(lo, qp)
            length = anchor - lo if direction < 0 else hi - anchor
            if length > 0:
                dist = abs(anchor - qp)
                tail = 0.0 if math.isinf(length) else math.log(-math.expm1(-length / b))
                out.append((anchor, direction, length, -LN2 - dist / b + tail, lo, hi))
    return out


def _reachable_by_dpframe(mech, y: np.ndarray, qp: float) -> np.ndarray:
    """Construct randomness that makes ``mech`` output ``y`` from ``qp``; True where it does."""
    noise_set = mech.domain if isinstance(mech, BoundedLaplace) else real_line()
    b = mech.scale
    pieces = _pieces(noise_set, qp, b)
    lm = np.array([p[3] for p in pieces])
    # target pre-rounding values: y itself, then points a quarter cell either side
    ok = np.zeros(y.shape, dtype=bool)
    for nudge in (0.0, 0.25, -0.25):
        v = y + nudge * mech.grid
        todo = ~ok
        piece = np.full(y.shape, -1)
        for i, (anchor, direction, length, _, lo, hi) in enumerate(pieces):
            end = anchor + direction * length
            inside = (v - anchor) * direction >= 0
            inside &= (end - v) * direction >= 0 if math.isfinite(end) else True
            inside &= (v >= lo) & (v <= hi)
            piece = np.where((piece < 0) & inside, i, piece)
        todo &= piece >= 0
        if not todo.any():
            continue
        pc = np.where(piece < 0, 0, piece)
        draws = []
        for j in range(len(pieces) - 1):
            suffix = np.logaddexp.reduce(lm[j:])
            take = math.exp(lm[j] - suffix)
            skip = math.exp(np.logaddexp.reduce(lm[j + 1 :]) - suffix)
            yes = take / 2 if take <= 0.5 else (1 + skip) / 2
            no = (1 + take) / 2 if take <= 0.5 else skip / 2
            u = np.where(pc == j, yes, no)
            draws.append((u, np.log(u)))
        anchors = np.array([p[0] for p in pieces])[pc]
        lengths = np.array([p[2] for p in pieces])[pc]
        e_star = np.abs(v - anchors) / b
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # W + (1 - W) e^{-L/b} = e^{-E}  ⇒  ln W = -E + ln(1 - e^{E - L/b}) - ln(1 - e^{-L/b})
            fin = np.isfinite(lengths)
            lw = -e_star + np.where(
                fin,
                np.log1p(-np.exp(e_star - lengths / b)) - np.log1p(-np.exp(-lengths / b)),
                0.0,
            )
        lw = np.where(np.isfinite(lw), lw, -e_star)
        draws.append(_full_precision_uniform(lw))
        out = mech._draw(np.full(y.size, float(qp)), _Scripted(draws))
        ok |= todo & (out == y)
    return ok


MECH_CASES = [
    (cls, domain)
    for cls in (BoundedLaplace, TruncatedLaplace, Laplace)
    for domain in ("interval", "half-line-lower", "union")
]


@pytest.mark.parametrize(("cls", "domain"), MECH_CASES, ids=lambda x: getattr(x, "__name__", x))
def test_dpframe_outputs_are_reachable_from_the_neighbour(cls, domain):
    """Every output drawn from q is produced by dpframe's sampler from q' for some randomness."""
    mech = cls(1.0, 1.0, domain=DOMAINS[domain])
    for q, qp in ((0.0, 1.0), (1.0, 0.0), (2.0, 2.5)):
        y = np.asarray(mech.sample(q, size=N_REACH, random_state=3))
        assert _reachable_by_dpframe(mech, y, q).all()  # the inversion itself works
        assert _reachable_by_dpframe(mech, y, qp).all(), (cls.__name__, domain, q, qp)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_dpframe_reachability_at_many_scales(cls, scale):
    """Powers of two, awkward and huge scales: nothing output from q is unreachable from q'."""
    lower, upper = 0.0, max(10.0, 20.0 * scale)
    mech = fixed_scale(cls, scale)(1.0, 1.0, lower=lower, upper=upper)
    assert mech.scale == scale
    y = np.asarray(mech.sample(0.0, size=N_REACH, random_state=4))
    assert _reachable_by_dpframe(mech, y, 1.0).all()


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_dpframe_precision_test(cls, scale):
    """Share of outputs off the 2^-53 grid is the same for q = 0 and q = 1 (it is 0: the
    snapping grid is coarser)."""
    mech = fixed_scale(cls, scale)(1.0, 1.0, lower=0.0, upper=max(10.0, 20.0 * scale))
    off0 = _off_grid_share(np.asarray(mech.sample(0.0, size=50_000, random_state=5)))
    off1 = _off_grid_share(np.asarray(mech.sample(1.0, size=50_000, random_state=6)))
    assert off0 == off1 == 0.0


# -- snapping invariants ----------------------------------------------------------------------
SNAP_DOMAINS = ["interval", "half-line-lower", "half-line-upper", "union"]


@pytest.mark.parametrize("domain", SNAP_DOMAINS)
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("eps", [0.05, 1.0, 8.0])
def test_snapping_invariants(cls, domain, eps):
    """Outputs are multiples of ``m.grid`` or one of ``m.off_grid_values`` (public: the window
    ends, the clamped mechanism's finite ends, the bounded mechanism's end-cell midpoints);
    they lie in the feasible set (plain Laplace: in the public window); the bounded mechanism
    never puts mass exactly on a finite end; nothing here depends on the true value."""
    dom = DOMAINS[domain]
    mech = cls(eps, 1.0, domain=dom)
    plan_before, extra_before = mech.plan, list(mech.off_grid_values)
    twin = cls(eps, 1.0, domain=dom)
    assert twin.grid == mech.grid and twin.plan == mech.plan
    assert twin.off_grid_values == extra_before
    assert math.frexp(mech.grid)[0] == 0.5  # a power of two
    extra = np.array(extra_before, dtype=float)
    ends = list(dom.finite_endpoints)
    if cls is BoundedLaplace:
        inside = extra[np.isin(extra, list(mech.plan.window), invert=True)]
        assert dom.contains(inside).all() and not np.isin(inside, ends).any()

    def allowed(y: np.ndarray) -> np.ndarray:
        return ((y / mech.grid) == np.floor(y / mech.grid)) | np.isin(y, extra)

    # many true values at once, including finite ends
    qs = np.array([*ends, *(e + 0.5 if dom.contains(e + 0.5) else e - 0.5 for e in ends)])
    qs = np.repeat(qs, 5000)
    y = np.asarray(mech.sample(qs, random_state=7))
    assert allowed(y).all()
    if cls is Laplace:
        lo, hi = mech.plan.window
        assert ((y >= lo) & (y <= hi)).all()
    else:
        assert dom.contains(y).all()
    if cls is BoundedLaplace:
        assert not np.isin(y, ends).any()
    # the plan (grid, window, off-grid values) does not move with the data
    assert mech.plan == plan_before and mech.off_grid_values == extra_before
    # each true value alone draws from the same public set of values
    for q in np.unique(qs):
        assert allowed(np.asarray(mech.sample(q, size=2000, random_state=8))).all()


def test_reachability_check_is_not_vacuous():
    """Values off the public lattice are reported unreachable (the check can say no)."""
    mech = BoundedLaplace(1.0, 1.0, domain=DOMAINS["union"])
    y = np.asarray(mech.sample(0.0, size=500, random_state=9))
    inner = y[(y != 0.0) & (y != 3.0) & (y != 5.0) & (y != 10.0)]
    assert not _reachable_by_dpframe(mech, inner + mech.grid / 3, 1.0).any()
