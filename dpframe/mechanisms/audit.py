r"""Privacy audits: analytic certificates and black-box statistical tests.

Two tools for anyone who wants evidence, not just a claim, that a release keeps its ε.

:func:`certify` — white box, for the Laplace family
    Laplace noise of scale ``b`` centred at the true answer ``q`` and *conditioned* on a set
    ``S`` has density ``p_q(x) = exp(-|x - q|/b) / (2b C(q))`` on ``S``, with normaliser
    ``C(q) = P(Lap(q, b) ∈ S)``. For neighbouring true answers ``q, q'`` the largest log
    density ratio over outputs ``x ∈ S`` is

        ε(q, q') = max_x |ln p_q(x) - ln p_{q'}(x)| = |q' - q|/b + |ln C(q') - ln C(q)|,   (1)

    (``(|x - q'| - |x - q|)/b`` ranges over ``[-|q' - q|/b, |q' - q|/b]`` with both ends
    attained, at ``x = q`` and ``x = q'``, which lie in ``S``; so the sign of the normaliser
    term can always be matched), and the mechanism's pure privacy loss is the maximum of (1)
    over ``q, q' ∈ S`` with ``|q - q'| ≤ Δ``. ``S`` is the feasible set for
    :class:`~dpframe.mechanisms.BoundedLaplace` (interval, half-line, union). For
    :class:`~dpframe.mechanisms.TruncatedLaplace` and :class:`~dpframe.mechanisms.Laplace` the
    noise is plain Laplace (``S = ℝ``, ``C ≡ 1``) and clamping is post-processing, so the loss is
    exactly ``Δ/b``.

    Two computations must agree. The *analytic* one is
    :func:`dpframe.mechanisms.certificate.worst_case_loss` (a 1-d maximisation over ``q`` that
    relies on the worst neighbour of ``q`` being the farthest point within ``Δ``). The
    *independent* one here does not rely on that lemma nor share code with it: it evaluates
    ``max_x |ln p_q(x) - ln p_{q'}(x)|`` by brute force over a grid of pairs ``(q, q + s)``,
    ``s ∈ [-Δ, Δ]``, and over a grid of outputs ``x`` (always containing ``q``, ``q'`` and the
    finite ends, where the maximum over ``x`` is attained), with ``C`` computed from closed-form
    Laplace tails written here (cross-checked against :mod:`scipy.stats` in the tests). A
    certificate is *consistent* when (a) the brute force finds no pair worse than the analytic
    maximum, and (b) re-evaluating the analytic worst pair by brute force reproduces its loss.
    The certified ε of a release is then ``max(loss + ln(1 - δ), 0) + epsilon_overhead`` (δ
    folded in as in Holohan et al. A.4; the overhead is the proven cost of snapping), and it
    must not exceed the claimed ε.

:func:`audit` — black box, for any sampler
    For an ``(ε, δ)``-DP mechanism ``M`` and every event ``E``,
    ``P(M(q) ∈ E) ≤ e^ε P(M(q') ∈ E) + δ``, so ``ε ≥ ln((P(M(q) ∈ E) - δ) / P(M(q') ∈ E))``.
    The audit draws a *pilot* sample from both inputs and uses it only to choose ``k`` events
    (threshold events ``{X ≤ t}``, ``{X ≥ t}`` at pilot quantiles, and point events ``{X = v}``
    for atoms such as clamped ends) and directions. It then draws *fresh* samples of size ``n``
    from each input and, for every chosen (event, direction), takes a one-sided Clopper–Pearson
    lower bound ``p̲`` on the numerator probability and upper bound ``p̄`` on the denominator
    probability, each at level ``α/(2k)``. The reported lower confidence bound is
    ``ε̲ = max_E ln((p̲_E - δ)/p̄_E)``. With probability at least ``1 - α`` (union bound over the
    ``2k`` intervals; the events are fixed before the fresh samples are drawn) every bound holds
    simultaneously, and then ``ε̲ ≤ ε_true``. A violation is flagged only when ``ε̲ > ε_claimed``,
    so a mechanism that keeps its claim is flagged with probability at most ``α``: the
    false-alarm rate is bounded by construction, not by simulation. (Exact Clopper–Pearson
    intervals are conservative, so this holds for every ``n``.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from dpframe.errors import ParameterError
from dpframe.mechanisms.certificate import worst_case_loss
from dpframe.mechanisms.domains import FeasibleSet, half_line, interval, real_line, union
from dpframe.mechanisms.laplace import BoundedLaplace, Laplace, TruncatedLaplace

__all__ = [
    "AuditResult",
    "Certification",
    "audit",
    "brute_force_loss",
    "certify",
    "clopper_pearson",
    "pair_loss",
]

#: Relative tolerance of "certified ε ≤ claimed ε" (the ledger uses the same 1e-9).
CERTIFY_RTOL = 1e-9
#: Tolerance of the agreement between the analytic and the brute-force computations.
AGREEMENT_RTOL = 1e-7

#: A mechanism (anything with ``sample(value, size=, random_state=)`` and ``epsilon``) or a
#: plain function ``sampler(value, size, rng) -> array``.
Sampler = Any
_LOG_HALF = -math.log(2.0)


# ---------------------------------------------------------------------------------------------
# certify
# ---------------------------------------------------------------------------------------------
def _log_tails(x: float, q: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """``(ln F(x), ln S(x))`` of Laplace(q, b) in closed form, finite however far ``x`` is
    from ``q`` (scipy's ``logsf`` underflows to -inf beyond ~745 scales)."""
    z = (x - q) / b
    with np.errstate(over="ignore"):
        log_f = np.where(z <= 0, _LOG_HALF + z, np.log1p(-0.5 * np.exp(-np.abs(z))))
        log_s = np.where(z >= 0, _LOG_HALF - z, np.log1p(-0.5 * np.exp(-np.abs(z))))
    return log_f, log_s


def _log_component_mass(q: np.ndarray, b: float, lo: float, hi: float) -> np.ndarray:
    """``ln P(lo ≤ Lap(q, b) ≤ hi)`` from the Laplace tails (independent of the mechanisms).

    The mass is written as a difference of the two tail probabilities on the side where they are
    small, so nothing cancels: left of the interval ``S(lo) - S(hi)``, right of it
    ``F(hi) - F(lo)``, inside ``1 - F(lo) - S(hi)``.
    """
    q = np.asarray(q, dtype=float)
    neg_inf = np.full(q.shape, -np.inf)
    zero = np.zeros(q.shape)
    log_f_lo, log_s_lo = _log_tails(lo, q, b) if math.isfinite(lo) else (neg_inf, zero)
    log_f_hi, log_s_hi = _log_tails(hi, q, b) if math.isfinite(hi) else (zero, neg_inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        left = log_s_lo + np.log1p(-np.exp(log_s_hi - log_s_lo))
        right = log_f_hi + np.log1p(-np.exp(log_f_lo - log_f_hi))
        inner = np.log1p(-(np.exp(log_f_lo) + np.exp(log_s_hi)))
    return np.where(q < lo, left, np.where(q > hi, right, inner))


def _log_c(noise_set: FeasibleSet, q: np.ndarray, b: float) -> np.ndarray:
    parts = [_log_component_mass(q, b, lo, hi) for lo, hi in noise_set.components]
    out = parts[0]
    with np.errstate(invalid="ignore"):
        for p in parts[1:]:
            out = np.logaddexp(out, p)
    return out


def _finite_window(
    noise_set: FeasibleSet, b: float, sensitivity: float
) -> list[tuple[float, float]]:
    """Components with infinite ends cut where ``C`` is 1 to double precision (60 scales out)."""
    reach = 60.0 * b + 2.0 * sensitivity
    out = []
    for lo, hi in noise_set.components:
        if not math.isfinite(lo) and not math.isfinite(hi):
            lo, hi = -2.0 * sensitivity, 2.0 * sensitivity
        elif not math.isfinite(lo):
            lo = hi - reach
        elif not math.isfinite(hi):
            hi = lo + reach
        out.append((lo, hi))
    return out


def _output_grid(noise_set: FeasibleSet, b: float, sensitivity: float, n: int = 48) -> np.ndarray:
    pts = []
    for lo, hi in _finite_window(noise_set, b, sensitivity):
        pts.append(np.linspace(lo, hi, n))
    pts.append(np.array(noise_set.finite_endpoints, dtype=float))
    return np.unique(np.concatenate(pts))


def pair_loss(
    noise_set: FeasibleSet, b: float, q: np.ndarray, q_prime: np.ndarray, x_grid: np.ndarray
) -> np.ndarray:
    """``max_x |ln p_q(x) - ln p_{q'}(x)|`` over ``x ∈ x_grid ∪ {q, q'}`` (vectorised in pairs).

    The log density ratio is ``(|x - q'| - |x - q|)/b + ln C(q') - ln C(q)``; its extremes over
    ``x`` are attained at ``x = q``, ``x = q'`` or a finite end of the set, all of which are
    evaluated, so for a given pair this is exact (no appeal to eq. (1)).
    """
    q = np.asarray(q, dtype=float)
    qp = np.asarray(q_prime, dtype=float)
    shift = _log_c(noise_set, qp, b) - _log_c(noise_set, q, b)
    x_in = x_grid[noise_set.contains(x_grid)]
    xs = np.concatenate(
        [np.broadcast_to(x_in, (q.size, x_in.size)), q[:, None], qp[:, None]], axis=1
    )
    ratio = (np.abs(xs - qp[:, None]) - np.abs(xs - q[:, None])) / b + shift[:, None]
    return np.abs(ratio).max(axis=1)


def brute_force_loss(
    noise_set: FeasibleSet,
    b: float,
    sensitivity: float,
    *,
    n_q: int = 401,
    n_shift: int = 41,
    refine: int = 6,
) -> tuple[float, float, float]:
    """Worst ``(loss, q, q')`` over a grid of pairs ``q ∈ S``, ``q' = q + s ∈ S``, ``|s| ≤ Δ``.

    ``q`` runs over each component (infinite ends cut where ``C = 1`` to double precision), plus
    every finite end and every point at distance ``Δ`` from one; ``s`` over ``2·n_shift + 1``
    evenly spaced shifts. The best pair is then refined ``refine`` times on a local 2-d grid.
    """
    window = _finite_window(noise_set, b, sensitivity)
    ends = np.array(noise_set.finite_endpoints, dtype=float)
    q_pts = [np.linspace(lo, hi, n_q) for lo, hi in window]
    q_pts += [ends, ends + sensitivity, ends - sensitivity]
    q_all = np.unique(np.concatenate(q_pts))
    q_all = q_all[noise_set.contains(q_all)]
    shifts = np.linspace(-sensitivity, sensitivity, 2 * n_shift + 1)
    x_grid = _output_grid(noise_set, b, sensitivity)

    def best_of(qs: np.ndarray, ss: np.ndarray) -> tuple[float, float, float]:
        qq = np.repeat(qs, ss.size)
        qp = qq + np.tile(ss, qs.size)
        # also the farthest feasible partner of every q (exact ends, not just grid shifts)
        keep = noise_set.contains(qp)
        qq, qp = qq[keep], qp[keep]
        if qq.size == 0:
            return -math.inf, math.nan, math.nan
        losses = pair_loss(noise_set, b, qq, qp, x_grid)
        i = int(np.argmax(losses))
        return float(losses[i]), float(qq[i]), float(qp[i])

    loss, q0, q1 = best_of(q_all, shifts)
    step_q = max((hi - lo) / (n_q - 1) for lo, hi in window)
    step_s = shifts[1] - shifts[0]
    for _ in range(refine):
        qs = np.clip(q0 + np.linspace(-step_q, step_q, 21), q_all.min(), q_all.max())
        qs = qs[noise_set.contains(qs)]
        s0 = q1 - q0
        ss = np.clip(s0 + np.linspace(-step_s, step_s, 21), -sensitivity, sensitivity)
        cand = best_of(qs, ss)
        if cand[0] > loss:
            loss, q0, q1 = cand
        step_q /= 8.0
        step_s /= 8.0
    return loss, q0, q1


@dataclass(frozen=True)
class Certification:
    """Result of :func:`certify`. Losses are in nats; ``ratio`` is certified ε / claimed ε."""

    mechanism: str
    domain: str
    noise_set: str
    epsilon: float
    delta: float
    sensitivity: float
    scale: float
    epsilon_overhead: float
    loss: float  # analytic worst-case pure loss of the continuous noise
    q: float
    q_prime: float
    brute_force_loss: float
    brute_force_q: float
    brute_force_q_prime: float
    loss_at_pair: float  # eq. (1) at (q, q') re-evaluated by brute force
    certified_epsilon: float
    ratio: float
    consistent: bool
    passed: bool
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict} {self.mechanism} on {self.domain}: certified ε={self.certified_epsilon:.9g}"
            f" vs claimed {self.epsilon:g} (ratio {self.ratio:.6f}); worst pair"
            f" ({self.q:g}, {self.q_prime:g}); brute force {self.brute_force_loss:.9g}"
            f"{'' if self.consistent else ' — INCONSISTENT'}"
        )


def _noise_set_of(mechanism: Any) -> FeasibleSet:
    if isinstance(mechanism, BoundedLaplace):
        return mechanism.domain
    if isinstance(mechanism, (TruncatedLaplace, Laplace)):
        return real_line()
    raise ParameterError(
        f"certify() knows the Laplace family; for a {type(mechanism).__name__} pass"
        " conditioned_on=<the FeasibleSet its Laplace noise is conditioned on>"
    )


def _display_pair(domain: FeasibleSet, sensitivity: float) -> tuple[float, float]:
    """A pair at distance Δ (or as far as possible) inside the mechanism's own domain."""
    if math.isfinite(domain.lower):
        q = domain.lower
    elif math.isfinite(domain.upper):
        q = domain.upper - sensitivity
    else:
        q = 0.0
    qp = float(domain.farthest_within(np.array([q]), sensitivity, +1)[0])
    return float(q), qp


def certify(mechanism: Any, *, conditioned_on: FeasibleSet | None = None) -> Certification:
    """Certify the worst-case privacy loss of a Laplace-family mechanism (see module docstring).

    Reads the public attributes ``scale``, ``sensitivity``, ``epsilon``, ``delta``,
    ``epsilon_overhead`` and ``domain``. ``conditioned_on`` overrides the set the noise is
    conditioned on (default: the feasible set for bounded Laplace, ℝ for truncated and plain
    Laplace). Returns a :class:`Certification`; ``passed`` is true when the two computations
    agree and the certified ε is at most the claimed ε (relative tolerance 1e-9).
    """
    noise_set = conditioned_on if conditioned_on is not None else _noise_set_of(mechanism)
    b = float(mechanism.scale)
    sens = float(mechanism.sensitivity)
    eps = float(mechanism.epsilon)
    delta = float(getattr(mechanism, "delta", 0.0))
    overhead = float(getattr(mechanism, "epsilon_overhead", 0.0))
    domain = getattr(mechanism, "domain", noise_set)
    notes: list[str] = []

    analytic = worst_case_loss(noise_set, b, sens)
    loss, q, qp = analytic.loss, analytic.q, analytic.q_prime
    if noise_set.kind == "real-line":
        # plain Laplace noise: every pair at distance Δ is worst; show one inside the domain
        q, qp = _display_pair(domain, sens)
        notes.append("loss of the underlying plain Laplace noise (Δ/b); clamping is"
                     " post-processing")
    bf_loss, bf_q, bf_qp = brute_force_loss(noise_set, b, sens)
    x_grid = _output_grid(noise_set, b, sens)
    if noise_set.kind == "real-line":
        at_pair = float(pair_loss(noise_set, b, np.array([0.0]), np.array([sens]), x_grid)[0])
    else:
        at_pair = float(pair_loss(noise_set, b, np.array([q]), np.array([qp]), x_grid)[0])

    scale_ref = max(1.0, abs(loss))
    missed = bf_loss > loss + AGREEMENT_RTOL * scale_ref
    mismatch = abs(at_pair - loss) > AGREEMENT_RTOL * scale_ref
    if missed:
        notes.append(
            f"brute force found a worse pair ({bf_q:g}, {bf_qp:g}) with loss {bf_loss:.12g}"
            f" > analytic {loss:.12g}"
        )
    if mismatch:
        notes.append(f"analytic loss {loss:.12g} at its own pair re-evaluates to {at_pair:.12g}")
    consistent = not (missed or mismatch)
    worst = max(loss, bf_loss)
    certified = max(worst + math.log1p(-delta), 0.0) + overhead
    ratio = certified / eps
    passed = consistent and certified <= eps * (1.0 + CERTIFY_RTOL)
    return Certification(
        mechanism=type(mechanism).__name__,
        domain=str(domain),
        noise_set=str(noise_set),
        epsilon=eps,
        delta=delta,
        sensitivity=sens,
        scale=b,
        epsilon_overhead=overhead,
        loss=float(loss),
        q=float(q),
        q_prime=float(qp),
        brute_force_loss=float(bf_loss),
        brute_force_q=float(bf_q),
        brute_force_q_prime=float(bf_qp),
        loss_at_pair=at_pair,
        certified_epsilon=certified,
        ratio=ratio,
        consistent=consistent,
        passed=passed,
        notes=notes,
    )


# ---------------------------------------------------------------------------------------------
# audit
# ---------------------------------------------------------------------------------------------
def clopper_pearson(k: np.ndarray, n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided exact binomial bounds: ``(lower, upper)`` each holding with prob ≥ ``1 - level``.

    ``lower = Beta⁻¹(level; k, n - k + 1)`` (0 when k = 0) and
    ``upper = Beta⁻¹(1 - level; k + 1, n - k)`` (1 when k = n).
    """
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(level, np.maximum(k, 1), n - k + 1), 0.0)
        upper = np.where(k < n, stats.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1)), 1.0)
    return lower, upper


@dataclass(frozen=True)
class AuditResult:
    """Result of :func:`audit`.

    ``epsilon_lower_bound`` holds with confidence ``1 - alpha`` (simultaneously over the tested
    events); ``violation`` is ``epsilon_lower_bound > epsilon``.
    """

    epsilon: float
    delta: float
    epsilon_lower_bound: float
    epsilon_estimate: float  # plug-in estimate for the event that gave the bound
    event: str
    n: int
    n_pilot: int
    alpha: float
    events_tested: int
    violation: bool
    counts: tuple[int, int]

    @property
    def passed(self) -> bool:
        return not self.violation

    def __str__(self) -> str:
        verdict = "VIOLATION" if self.violation else "pass"
        return (
            f"{verdict}: ε lower bound {self.epsilon_lower_bound:.4f} (estimate"
            f" {self.epsilon_estimate:.4f}) vs claimed {self.epsilon:g} on {self.event};"
            f" n={self.n}, α={self.alpha:g}, {self.events_tested} events"
        )


def _draw(sampler: Sampler, value: float, size: int, rng: np.random.Generator) -> np.ndarray:
    if hasattr(sampler, "sample"):
        out = sampler.sample(value, size=size, random_state=rng)
    else:
        out = sampler(value, size, rng)
    return np.asarray(out, dtype=float).ravel()


def _event_counts(x_sorted: np.ndarray, kinds: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Counts of ``{X ≤ t}`` (kind 0), ``{X ≥ t}`` (kind 1) and ``{X = t}`` (kind 2)."""
    le = np.searchsorted(x_sorted, ts, side="right")
    lt = np.searchsorted(x_sorted, ts, side="left")
    return np.where(kinds == 0, le, np.where(kinds == 1, x_sorted.size - lt, le - lt))


def _log_ratio_bound(
    k_num: np.ndarray, k_den: np.ndarray, n: int, level: float, delta: float
) -> np.ndarray:
    lo, _ = clopper_pearson(k_num, n, level)
    _, hi = clopper_pearson(k_den, n, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lo - delta > 0, np.log(np.maximum(lo - delta, 1e-300) / hi), -np.inf)


def audit(
    sampler: Sampler,
    q: float,
    q_prime: float,
    epsilon: float | None = None,
    *,
    delta: float | None = None,
    n: int = 200_000,
    n_pilot: int | None = None,
    alpha: float = 0.01,
    n_events: int = 8,
    n_thresholds: int = 64,
    random_state: int | np.random.Generator | None = None,
) -> AuditResult:
    """Black-box test of ``P(M(q) ∈ E) ≤ e^ε P(M(q') ∈ E) + δ`` (see the module docstring).

    ``sampler`` is a mechanism with ``sample(value, size=, random_state=)`` or a callable
    ``sampler(value, size, rng) -> array``. ``epsilon``/``delta`` default to the sampler's own.
    ``n`` fresh draws per input (plus ``n_pilot``, default ``n // 4``, for choosing events);
    ``n_events`` (event, direction) pairs are tested, each bound at level ``alpha / (2 n_events)``,
    so the probability of flagging a mechanism that keeps its claim is at most ``alpha``.
    """
    if epsilon is None:
        epsilon = float(sampler.epsilon)
    if delta is None:
        delta = float(getattr(sampler, "delta", 0.0)) if hasattr(sampler, "sample") else 0.0
    if not (0 < alpha < 1):
        raise ParameterError(f"alpha must lie in (0, 1), got {alpha!r}")
    n_pilot = n // 4 if n_pilot is None else n_pilot
    rng = np.random.default_rng(random_state)
    seeds = rng.spawn(4)

    # -- pilot: choose events ------------------------------------------------------------------
    pa = np.sort(_draw(sampler, q, n_pilot, seeds[0]))
    pb = np.sort(_draw(sampler, q_prime, n_pilot, seeds[1]))
    pooled = np.concatenate([pa, pb])
    ts = np.quantile(pooled, np.linspace(0.0, 1.0, n_thresholds + 1))
    values, freq = np.unique(pooled, return_counts=True)
    atoms = values[freq >= 0.005 * pooled.size]
    cand_t = np.concatenate([ts, ts, atoms])
    cand_k = np.concatenate(
        [np.zeros(ts.size, int), np.ones(ts.size, int), np.full(atoms.size, 2)]
    )
    ca, cb = _event_counts(pa, cand_k, cand_t), _event_counts(pb, cand_k, cand_t)
    # score each (event, direction) by a pilot lower bound at the level the final test will use
    level = alpha / (2 * n_events)
    score_ab = _log_ratio_bound(ca, cb, n_pilot, level, delta)
    score_ba = _log_ratio_bound(cb, ca, n_pilot, level, delta)
    scores = np.concatenate([score_ab, score_ba])
    direction = np.concatenate([np.zeros(cand_t.size, int), np.ones(cand_t.size, int)])
    idx = np.concatenate([np.arange(cand_t.size)] * 2)
    order = np.argsort(-np.nan_to_num(scores, neginf=-1e300), kind="stable")[:n_events]

    # -- fresh samples: bounds ----------------------------------------------------------------
    fa = np.sort(_draw(sampler, q, n, seeds[2]))
    fb = np.sort(_draw(sampler, q_prime, n, seeds[3]))
    sel_t, sel_k, sel_d = cand_t[idx[order]], cand_k[idx[order]], direction[order]
    ka, kb = _event_counts(fa, sel_k, sel_t), _event_counts(fb, sel_k, sel_t)
    k_num = np.where(sel_d == 0, ka, kb)
    k_den = np.where(sel_d == 0, kb, ka)
    bounds = _log_ratio_bound(k_num, k_den, n, level, delta)
    j = int(np.argmax(bounds))
    with np.errstate(divide="ignore", invalid="ignore"):
        est = math.log(max(k_num[j] / n - delta, 1e-300) / max(k_den[j] / n, 1e-300))
    kind = ("X ≤ {t:.6g}", "X ≥ {t:.6g}", "X = {t:.6g}")[int(sel_k[j])].format(t=sel_t[j])
    num, den = (q, q_prime) if sel_d[j] == 0 else (q_prime, q)
    event = f"P({kind} | {num:g}) vs P({kind} | {den:g})"
    lb = float(bounds[j])
    return AuditResult(
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_lower_bound=lb,
        epsilon_estimate=float(est),
        event=event,
        n=n,
        n_pilot=n_pilot,
        alpha=alpha,
        events_tested=int(order.size),
        violation=lb > epsilon,
        counts=(int(k_num[j]), int(k_den[j])),
    )


# ---------------------------------------------------------------------------------------------
# a one-command report
# ---------------------------------------------------------------------------------------------
def report(n: int = 200_000, alpha: float = 0.01, random_state: int = 0) -> str:
    """Certify and audit every mechanism on an interval, a half-line and a union
    (ε = 1, Δ = 1) at the boundary pair; a Markdown table. ``python -m
    dpframe.mechanisms.audit``."""

    domains = {
        "[0, 10]": (interval(0.0, 10.0), (0.0, 1.0)),
        "[0, ∞)": (half_line(lower=0.0), (0.0, 1.0)),
        "[0, 3] ∪ [5, 10]": (union([(0.0, 3.0), (5.0, 10.0)]), (9.0, 10.0)),
    }
    rows = [
        "| mechanism | domain | scale b | certified ε | brute force | worst pair |"
        " audit pair | ε lower bound (1−α) | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cls in (BoundedLaplace, TruncatedLaplace, Laplace):
        for label, (dom, pair) in domains.items():
            mech = cls(1.0, 1.0, domain=dom)
            cert = certify(mech)
            res = audit(mech, *pair, n=n, alpha=alpha, random_state=random_state)
            ok = cert.passed and not res.violation
            rows.append(
                f"| {cls.__name__} | {label} | {mech.scale:.6f} | {cert.certified_epsilon:.12f} |"
                f" {cert.brute_force_loss + cert.epsilon_overhead:.12f} |"
                f" ({cert.q:g}, {cert.q_prime:g}) | {pair} | {res.epsilon_lower_bound:.4f} |"
                f" {'pass' if ok else 'FAIL'} |"
            )
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    print(report())
