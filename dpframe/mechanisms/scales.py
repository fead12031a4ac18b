"""Noise scales that make Laplace noise conditioned on a feasible set ε-DP (or (ε, δ)-DP).

* Interval ``[l, u]`` (Holohan et al., Thm 3.5 and §4). With ``W = u - l`` and the normaliser
  ``C_q = 1 - ½(e^{-(q-l)/b} + e^{-(u-q)/b})`` (Lemma 3.2), the worst pair is ``(l, l + Δ)``
  (Lemma 3.3), ``ΔC(b) = C_{l+Δ}/C_l`` with ``C_l = -½ expm1(-W/b)``, and the mechanism is
  (ε, δ)-DP whenever ``b ≥ f(b) = Δ / (ε - ln ΔC(b) - ln(1 - δ))`` (eq. 3.1). ``f`` is
  non-increasing (Lemma 4.3) and ``f(b0) ≥ b0`` for ``b0 = Δ/(ε - ln(1 - δ))`` (Lemma 4.2), so the
  unique fixed point ``b*`` lies in ``[b0, f(b0)]`` (Thm 4.4). We bisect that bracket
  (Alg. 1) until its relative width is below ``SCALE_RTOL`` and return the *upper* end, which
  satisfies (3.1) *as evaluated in double precision*. ``f`` itself carries rounding error (at
  small ε the normalisers are differences of nearly equal numbers), so the result can lie below
  the exact ``b*``: by at most 8.6e-13 relative against a 60-digit solution over the grid of
  ``tests/mechanisms/test_scales.py`` (ε ≥ 0.01), which raises the exact loss by the same relative
  amount of ε. When ``Δ = W``, ``b* = b0`` exactly (Cor. 4.5) and no search runs.
* Half-line ``[l, ∞)`` (or ``(-∞, u]``): ``C_q = 1 - ½ e^{-(q-l)/b}``; the worst pair is again
  ``(l, l + Δ)`` (the ``u → ∞`` limit of Lemma 3.3), where the loss is
  ``Δ/b + ln(2 - e^{-Δ/b})``. Setting ``x = e^{Δ/b}`` the condition ``ln(2x - 1) ≤ ε - ln(1-δ)``
  gives the closed form ``b = Δ / ln((e^ε/(1-δ) + 1)/2)``, which is also the ``u → ∞`` limit of
  Holohan's fixed point.
* Finite unions (one uniform scale, as in Croft et al. §4.2–4.3): no closed form. We bisect on
  ``log b`` for the smallest ``b`` whose certified worst-case loss (:mod:`.certificate`, the
  maximum of eq. (1) over true answers ``|q - q'| ≤ Δ``) is at most ``ε - ln(1 - δ)``, returning
  the upper end: the minimal uniform scale for *standard* (ε, δ)-DP.

  This is **not** Croft's scale. Croft et al. (§3.4, Lemma 7, Thm 3, Cor. 1) demand the bound
  ``e^{ε|q - q'|/Δ}`` at *every* distance ``|q - q'|``, not only ``e^ε`` up to distance ``Δ``. At a
  finite outer end of ``D`` the log-normaliser ``ln C`` has slope exactly ``1/b``, so the loss
  grows like ``2|q - q'|/b`` there and their criterion forces ``b ≥ 2Δ/ε`` on every set with a
  finite outer end (intervals, half-lines, unions bounded on one side); with both outer ends
  infinite it gives a value in ``(Δ/ε, 2Δ/ε)`` (their Lemma 10). dpframe's scale is smaller
  (``1.41 Δ/ε`` on ``[0, 1] ∪ [2, 5] ∪ [7, 8]`` at ``ε = Δ = 1``) and violates Croft's criterion
  at short distances, while satisfying ε-DP (certified). Croft's Lemmas 8–9 (a larger scale
  never breaks the guarantee) are about their criterion; for ours that monotonicity, which
  makes the bisection's answer the smallest, is checked numerically
  (``tests/project/test_paper_claims.py``). Privacy does not depend on it: the returned ``b`` itself
  passes the certificate.
* The real line: the plain Laplace scale ``Δ/ε``.

All scales are cached per ``(ε, δ, Δ, domain)``.
"""

from __future__ import annotations

import math
from functools import lru_cache

from dpframe.mechanisms.certificate import worst_case_loss
from dpframe.mechanisms.domains import FeasibleSet

__all__ = ["SCALE_RTOL", "bounded_scale", "half_line_scale", "holohan_scale", "union_scale"]

SCALE_RTOL = 1e-13
_MAX_BISECTIONS = 200


def _effective_epsilon(epsilon: float, delta: float) -> float:
    """``ε - ln(1 - δ)``: the pure loss Holohan's condition (A.4) allows."""
    return epsilon - math.log1p(-delta)


def holohan_f(b: float, eps_eff: float, sensitivity: float, width: float) -> float:
    """Holohan's fixed-point operator f(b) (eq. 4.1), with ``eps_eff = ε - ln(1-δ)``."""
    # ln(C_shift / C_l) with C_l = (1 - e^{-w/b})/2 and C_shift = 1 - (e^{-Δ/b} + e^{-(w-Δ)/b})/2.
    # Their difference is exactly (1 - e^{-Δ/b})(1 - e^{-(w-Δ)/b})/2, so the log is
    # log1p(that / C_l): every factor keeps full relative precision even when b is far larger
    # than the width (tiny ε), where subtracting the exponentials would cancel.
    c_l = -0.5 * math.expm1(-width / b)
    excess = 0.5 * math.expm1(-sensitivity / b) * math.expm1(-(width - sensitivity) / b)
    if not c_l > 0.0:
        return math.inf  # b beyond floating point's reach: no usable fixed point
    denom = eps_eff - math.log1p(excess / c_l)
    return math.inf if denom <= 0 else sensitivity / denom


#: Relative margin added to the bisection's answer. ``f`` is evaluated in double precision with
#: an error of a few hundred ulps, so the bracket's upper end can lie up to ~1e-12 (measured
#: 8.6e-13) *below* the exact fixed point; 1e-11 covers that ten times over, so the returned
#: scale is never below b* and the exact privacy loss never exceeds ε (the loss falls as b
#: grows). It costs 1e-11 of the noise scale.
SCALE_MARGIN = 1e-11


@lru_cache(maxsize=4096)
def holohan_scale(epsilon: float, delta: float, sensitivity: float, width: float) -> float:
    """b* for the interval mechanism by bisection on ``[b0, f(b0)]`` (Holohan Alg. 1), plus a
    relative margin of :data:`SCALE_MARGIN` so that rounding in ``f`` can never return a scale
    below the exact fixed point."""
    eps_eff = _effective_epsilon(epsilon, delta)
    b0 = sensitivity / eps_eff
    if sensitivity >= width:
        return b0 * (1.0 + SCALE_MARGIN)  # Cor. 4.5 (b0 itself is rounded too)
    left, right = b0, holohan_f(b0, eps_eff, sensitivity, width)
    for _ in range(_MAX_BISECTIONS):
        if right - left <= SCALE_RTOL * right:
            break
        mid = 0.5 * (left + right)
        if holohan_f(mid, eps_eff, sensitivity, width) >= mid:
            left = mid
        else:
            right = mid
    return right * (1.0 + SCALE_MARGIN)


@lru_cache(maxsize=4096)
def half_line_scale(epsilon: float, delta: float, sensitivity: float) -> float:
    """Closed form ``Δ / ln((e^{ε'} + 1)/2)`` with ``ε' = ε - ln(1 - δ)``."""
    eps_eff = _effective_epsilon(epsilon, delta)
    # ln((e^x + 1)/2) = x + log1p(e^-x) - ln 2, stable for large x
    denom = eps_eff + math.log1p(math.exp(-eps_eff)) - math.log(2.0)
    return sensitivity / denom


@lru_cache(maxsize=1024)
def union_scale(epsilon: float, delta: float, sensitivity: float, domain: FeasibleSet) -> float:
    """Smallest uniform scale whose certified worst-case loss is ≤ ``ε - ln(1 - δ)``."""
    eps_eff = _effective_epsilon(epsilon, delta)
    lo = sensitivity / eps_eff

    def ok(b: float) -> bool:
        return worst_case_loss(domain, b, sensitivity).loss <= eps_eff

    if ok(lo):
        return lo
    hi = 2.0 * lo
    while not ok(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            raise ArithmeticError("no finite scale satisfies the privacy condition")
    for _ in range(_MAX_BISECTIONS):
        if hi - lo <= 1e-10 * hi:
            break
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def bounded_scale(epsilon: float, delta: float, sensitivity: float, domain: FeasibleSet) -> float:
    """Dispatch to the scale rule for the kind of feasible set."""
    kind = domain.kind
    if kind == "interval":
        return holohan_scale(epsilon, delta, sensitivity, domain.upper - domain.lower)
    if kind == "half-line":
        return half_line_scale(epsilon, delta, sensitivity)
    if kind == "real-line":
        return sensitivity / _effective_epsilon(epsilon, delta)
    return union_scale(epsilon, delta, sensitivity, domain)
