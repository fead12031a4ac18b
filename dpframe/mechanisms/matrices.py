r"""Analyses built on the bounded and truncated Laplace mechanisms (Liu 2019, §4; Holohan 2019).

Pure functions over *already aggregated, exact* statistics: nothing here reads a frame or a
ledger. The frames layer computes the aggregates, calls these functions and spends the budget
they report (one :class:`ReleaseRecord` per released number).

Naming (see ``docs/privacy.md`` §1): Liu's "truncated" Laplace is our ``"bounded"`` mechanism
(Laplace conditioned on the interval, Holohan's scale ``b*``); Liu's "BIT" is our
``"truncated"`` mechanism (clamp to the interval, scale ``Δ/ε``).

Neighbours: replacement of one row, public row count ``n`` (``docs/audit.md``).

Proportions (Liu §4.2)
----------------------
``p_j = c_j / n`` for categories ``j = 1..K`` (``c_j`` the count of category ``j``).
Replacing one row moves one unit of count from one category to another, so *two* proportions
change, each by exactly ``1/n``: the per-proportion (ℓ∞) sensitivity is ``1/n`` and the ℓ1
sensitivity of the whole vector is ``2/n`` (Liu uses ``1/n``, which is the add/remove answer
with a changing denominator ignored; his own footnote says ``2/n`` applies "with doubled ε").

Each proportion is released by an independent mechanism ``M_j`` on ``[0, 1]`` that is
``ε_j``-DP for inputs at distance ``≤ 1/n``. The joint density is a product, so the privacy
loss of the vector is the sum of the per-coordinate losses; a coordinate whose input did not
change contributes 0. At most two coordinates change, hence the vector is ``(ε_a + ε_b)``-DP
and ``ε_j = ε/2`` suffices — *independently of K* (splitting ε/K, as sequential composition
over K releases would, wastes budget for K > 2). With δ: ``δ_j = δ/2``. For Laplace noise
this is the familiar ``Lap(2/(nε))`` per cell. If only ``m < 2`` coordinates are released
(``all_but_one`` with ``K = 2``) the one released proportion gets the whole ε.

The noisy ``q*_j ∈ [0, 1]`` are then made to sum to 1 (post-processing, no privacy cost):

* ``method="rescale"`` (Liu's re-scaling and normalization): ``p*_j = q*_j / Σ_k q*_k``; if
  every ``q*_j`` is 0 (possible with the truncated mechanism) the uniform vector ``1/K`` is
  returned.
* ``method="all_but_one"``: release every proportion but one (the ``remainder`` category,
  default the last), and set ``p*_rem = 1 − Σ q*_j``. Liu leaves ``p*_rem`` negative when
  ``Σ q*_j > 1``; to keep every proportion in ``[0, 1]`` we then rescale the released ones to sum
  to 1 and set ``p*_rem = 0`` (identical to Liu whenever ``Σ q*_j ≤ 1``).

Liu reports (Fig. 2 and 4) small bias for ε ∈ {0.5, 1} and a positive bias for small
proportions / negative for large ones at ε = 0.1 and small n, larger bias for his
"truncated" (our bounded) than for BIT, and 95% Wald-interval coverage dropping from ≈95% at
ε = 1 to 50–80% at ε = 0.1 because the interval ignores the sanitisation noise.
``examples/liu_proportions.py`` reproduces these numbers; ``docs/papers.md`` compares them.

Covariance (Liu §4.1, Table 1)
------------------------------
Columns ``X_1..X_p`` with declared bounds ``[l_j, u_j]``, widths ``w_j = u_j − l_j``, sample
covariance with ``ddof = 1``.

* Variance ``S_jj`` lies in ``[0, n w_j² / (4(n−1))]`` (Shiffler & Harsha bound) and has
  sensitivity ``w_j²/n``. Derivation: with ``y`` the other ``n−1`` rows (mean ``m``),
  ``Σ(x_i − x̄)² = SS_y + (n−1)/n · (a − m)²`` where ``a`` is the replaced row, so replacing
  ``a`` by ``a'`` changes it by ``(n−1)/n · [(a'−m)² − (a−m)²] ≤ (n−1)/n · w²``; divide by
  ``n−1``.
* Covariance ``S_jk`` has sensitivity ``w_j w_k / n``: the same decomposition gives a change of
  ``(n−1)/n · [(a'−m_x)(b'−m_y) − (a−m_x)(b−m_y)]``; with ``α, β`` the positions of ``m_x, m_y``
  in their intervals the range of ``(a−m_x)(b−m_y)`` is at most ``w_j w_k`` times
  ``max(αβ, ᾱβ̄) + max(αβ̄, ᾱβ) ≤ 1``.
* Budget: the ``p`` variances and ``p(p−1)/2`` covariances are ``m = p(p+1)/2`` releases on the
  same data; each gets ``ε/m`` (and ``δ/m``), Liu's equal split (for p = 2: ε/3 each).
* The variances are released first on their domains. Each covariance is then released on
  ``[−√(S*_jj S*_kk), √(S*_jj S*_kk)]`` built from the *released* variances (public, so free);
  the true ``S_jk`` is clamped into that interval first (a 1-Lipschitz map of the data, so the
  sensitivity is unchanged, and capped at the interval's width). If a released variance is
  0 the interval is the single point 0 and 0 is released without noise.
* The assembled matrix can fail to be positive semi-definite for ``p ≥ 3`` (pairwise bounds
  do not imply PSD; for ``p = 2`` they do). :func:`nearest_psd` projects it onto the PSD
  matrices *with the released variances on the diagonal* (Higham 2002's alternating
  projections with Dykstra's correction) — post-processing, no privacy cost.
* Correlations are ``S_jk / √(S_jj S_kk)`` of the projected matrix, hence in ``[−1, 1]``; a
  column released with variance 0 is reported as uncorrelated with the others (1 on the
  diagonal) so that the correlation matrix stays PSD.

Floating point: the true statistics arrive as doubles. Each is within half an ulp of the exact
rational value, so two neighbours' doubles can differ by ``Δ + 2⁻⁵²·M`` for a statistic bounded
by ``M``; that slack is added to every sensitivity (Casacuberta et al. 2022).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpframe.errors import ParameterError
from dpframe.mechanisms import BoundedLaplace, TruncatedLaplace
from dpframe.mechanisms.randomness import RandomState

__all__ = [
    "BoundedMechanismName",
    "CovarianceRelease",
    "ProportionsRelease",
    "ReleaseRecord",
    "correlation_from_covariance",
    "covariance_sensitivity",
    "nearest_psd",
    "project_psd",
    "proportion_epsilon_share",
    "release_covariance",
    "release_proportions",
    "sum_to_one",
    "variance_domain_upper",
    "variance_sensitivity",
]

BoundedMechanismName = Literal["bounded", "truncated"]
ProportionMethod = Literal["rescale", "all_but_one"]

_MECHANISMS: dict[str, type[BoundedLaplace] | type[TruncatedLaplace]] = {
    "bounded": BoundedLaplace,
    "truncated": TruncatedLaplace,
}
#: Relative floating-point slack added to sensitivities (2⁻⁵² times the statistic's bound).
_FP_SLACK = 2.0**-52


# -- shared helpers -------------------------------------------------------------------------
@dataclass(frozen=True)
class ReleaseRecord:
    """Public description of one released number (one accounting-log entry).

    Holds nothing data-dependent except ``domain`` for covariances, whose ends are functions of
    already released variances (public).
    """

    statistic: str
    columns: tuple[str, ...]
    epsilon: float
    delta: float
    mechanism: str
    sensitivity: float
    scale: float
    domain: tuple[float, float]
    epsilon_overhead: float = 0.0
    noise: bool = True
    notes: str = ""
    grid: float = 0.0  # snapping grid Λ of the mechanism (0: not snapped)


def _mechanism_class(name: str) -> type[BoundedLaplace] | type[TruncatedLaplace]:
    try:
        return _MECHANISMS[name]
    except (KeyError, TypeError):
        raise ParameterError(
            f"mechanism must be 'bounded' (Laplace conditioned on the domain; Liu's 'truncated')"
            f" or 'truncated' (clamped; Liu's 'BIT'), got {name!r}"
        ) from None


def _check_budget(epsilon: float, delta: float, mechanism: str) -> tuple[float, float]:
    eps = float(epsilon)
    dlt = float(delta)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not (0.0 <= dlt < 1.0):
        raise ParameterError(f"delta must lie in [0, 1), got {delta!r}")
    if dlt > 0 and mechanism != "bounded":
        raise ParameterError("the truncated mechanism is pure ε-DP; pass delta=0")
    return eps, dlt


def _check_n(n: int, minimum: int = 1) -> int:
    if isinstance(n, bool) or int(n) != n or int(n) < minimum:
        raise ParameterError(f"n (the public row count) must be an integer ≥ {minimum}, got {n!r}")
    return int(n)


def _generator(random_state: RandomState) -> np.random.Generator | None:
    """One generator for a whole analysis, so seeded runs never reuse a stream."""
    if random_state is None:
        return None
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.default_rng(int(random_state))
    raise ParameterError(
        "random_state must be None (secure), an int seed or a numpy Generator;"
        f" got {type(random_state).__name__}"
    )


def _record(
    mech: BoundedLaplace | TruncatedLaplace,
    statistic: str,
    columns: tuple[str, ...],
    notes: str = "",
) -> ReleaseRecord:
    return ReleaseRecord(
        statistic=statistic,
        columns=columns,
        epsilon=mech.epsilon,
        delta=mech.delta,
        mechanism=mech.name,
        sensitivity=mech.sensitivity,
        scale=mech.scale,
        domain=(mech.domain.lower, mech.domain.upper),
        epsilon_overhead=mech.epsilon_overhead,
        notes=notes,
        grid=float(mech.grid),
    )


# -- PSD projection (Higham 2002) -----------------------------------------------------------
def project_psd(a: np.ndarray) -> np.ndarray:
    r"""Frobenius-nearest symmetric PSD matrix: ``P_S(A) = Q diag(max(λ, 0)) Qᵀ``.

    ``A`` is first symmetrised, ``(A + Aᵀ)/2`` (the nearest symmetric matrix); its
    eigendecomposition ``Q Λ Qᵀ`` with negative eigenvalues set to 0 is the nearest PSD matrix
    in the Frobenius norm (Higham 1988; Higham 2002, Thm 3.2 with ``W = I``).
    """
    m = np.asarray(a, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ParameterError(f"expected a square matrix, got shape {m.shape}")
    if not np.isfinite(m).all():
        raise ParameterError("the matrix has NaN or infinite entries")
    sym = 0.5 * (m + m.T)
    vals, vecs = np.linalg.eigh(sym)
    out = (vecs * np.clip(vals, 0.0, None)) @ vecs.T
    return 0.5 * (out + out.T)


def nearest_psd(
    a: np.ndarray,
    diagonal: Sequence[float] | np.ndarray | None = None,
    *,
    tol: float = 1e-12,
    max_iter: int = 2_000,
) -> np.ndarray:
    r"""Nearest PSD matrix to ``A`` (Frobenius norm), optionally with a prescribed diagonal.

    * ``diagonal=None``: the spectral projection :func:`project_psd` (one step is exact).
    * ``diagonal=d`` (``d ≥ 0``): the nearest matrix in ``S ∩ U_d`` where ``S`` is the PSD cone
      and ``U_d = {X = Xᵀ : diag(X) = d}``, by Higham (2002, Alg. 3.3, ``W = I``): alternating
      projections with Dykstra's correction ``ΔS``::

          Y₀ = A, ΔS₀ = 0
          R_k = Y_{k−1} − ΔS_{k−1};  X_k = P_S(R_k);  ΔS_k = X_k − R_k;  Y_k = P_U(X_k)

      until ``‖Y_k − X_k‖_F ≤ tol · max(1, ‖Y_k‖_F)`` and successive iterates stop moving.
      Dykstra's correction makes the limit the *nearest* point of the intersection, not just
      some point of it. ``d = 1`` gives Higham's nearest correlation matrix.

      The last iterate ``X_k`` is PSD but its diagonal is only within ``tol`` of ``d``; we return
      the congruence ``D X_k D`` with ``D = diag(√(d_i / X_k,ii))`` — PSD exactly (congruence
      preserves the inertia) with diagonal exactly ``d``. Where ``d_i = 0`` the whole row and
      column must vanish in a PSD matrix, so those are set to 0 and the rest solved on its own.

    A PSD input with diagonal ``d`` is returned unchanged (idempotence), up to rounding.
    """
    m = np.asarray(a, dtype=float)
    x = project_psd(m)
    if diagonal is None:
        return x
    d = np.asarray(diagonal, dtype=float)
    if d.shape != (m.shape[0],):
        raise ParameterError(f"diagonal must have length {m.shape[0]}, got shape {d.shape}")
    if not (np.isfinite(d).all() and (d >= 0).all()):
        raise ParameterError("the prescribed diagonal must be finite and ≥ 0")
    sym = 0.5 * (m + m.T)
    zero = d == 0
    if zero.any():
        # A PSD matrix with X_ii = 0 has row and column i equal to 0; the remaining block is
        # an independent problem (the Frobenius distance splits), with a positive diagonal.
        out = np.zeros_like(sym)
        keep = ~zero
        if keep.any():
            out[np.ix_(keep, keep)] = nearest_psd(sym[np.ix_(keep, keep)], d[keep], tol=tol,
                                                  max_iter=max_iter)
        return out
    y = sym.copy()
    np.fill_diagonal(y, d)
    if np.linalg.eigvalsh(y).min() >= -tol * max(1.0, float(np.abs(d).max(initial=0.0))):
        x = y  # already in S ∩ U_d: P_U(A) is the answer
    else:
        ds = np.zeros_like(sym)
        y = sym
        for _ in range(max_iter):
            r = y - ds
            x = project_psd(r)
            ds = x - r
            y_new = x.copy()
            np.fill_diagonal(y_new, d)
            scale = max(1.0, float(np.linalg.norm(y_new)))
            moved = float(np.linalg.norm(y_new - y))
            y = y_new
            if float(np.linalg.norm(y - x)) <= tol * scale and moved <= tol * scale:
                break
    xd = np.clip(np.diag(x), 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(xd > 0, np.sqrt(d / np.where(xd > 0, xd, 1.0)), 0.0)
    out = x * np.outer(factor, factor)
    out = 0.5 * (out + out.T)
    np.fill_diagonal(out, d)
    return out


# -- proportions (Liu §4.2) -----------------------------------------------------------------
def proportion_epsilon_share(released: int) -> float:
    """Fraction of ε (and δ) each released proportion gets: ``1/min(2, m)`` for ``m`` released
    coordinates (a replacement changes at most two of them by ``1/n``; see module docstring)."""
    if released < 1:
        raise ParameterError("at least one proportion must be released")
    return 1.0 / min(2, released)


def sum_to_one(raw: np.ndarray, method: ProportionMethod, remainder: int = -1) -> np.ndarray:
    """Post-processing of noisy proportions ``raw`` (last axis: categories) to Σ = 1, each in
    [0, 1]: ``"rescale"`` divides by the sum (uniform if the sum is 0); ``"all_but_one"``
    ignores ``raw[..., remainder]`` and sets it to ``1 − Σ others`` (the others rescaled to sum
    to 1 and the remainder 0 if ``Σ others > 1``). See the module docstring."""
    q = np.clip(np.asarray(raw, dtype=float), 0.0, None)
    k = q.shape[-1]
    if k == 0:  # no category (e.g. no key passed a private key selection): nothing to scale
        return q
    if method == "rescale":
        total = q.sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(total > 0, q / np.where(total > 0, total, 1.0), 1.0 / k)
        return np.clip(out, 0.0, 1.0)
    if method != "all_but_one":
        raise ParameterError(f"method must be 'rescale' or 'all_but_one', got {method!r}")
    rem = remainder % k
    idx = [j for j in range(k) if j != rem]
    rel = q[..., idx]
    total = rel.sum(axis=-1, keepdims=True)
    over = total > 1.0
    out = np.empty_like(q)
    out[..., idx] = np.where(over, rel / np.where(over, total, 1.0), rel)
    out[..., rem] = np.where(over[..., 0], 0.0, 1.0 - total[..., 0])
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class ProportionsRelease:
    """Released proportions (``values``: shape ``(..., K)``, rows sum to 1, entries in [0, 1])
    and one :class:`ReleaseRecord` per released proportion."""

    values: np.ndarray
    keys: tuple[Any, ...]
    method: str
    records: tuple[ReleaseRecord, ...]
    raw: np.ndarray  # the noisy q*_j before the sum-to-one step (NaN for the remainder)

    def to_series(self, name: str = "proportion") -> pd.Series:
        """The (single) released vector as a pandas Series indexed by the keys."""
        if self.values.ndim != 1:
            raise ParameterError("to_series needs a single release, not a batch")
        return pd.Series(self.values, index=pd.Index(list(self.keys)), name=name)


def release_proportions(
    counts: Sequence[int] | np.ndarray,
    n: int,
    epsilon: float,
    *,
    keys: Sequence[Any] | None = None,
    mechanism: BoundedMechanismName = "bounded",
    method: ProportionMethod = "rescale",
    remainder: int = -1,
    delta: float = 0.0,
    column: str = "",
    random_state: RandomState = None,
) -> ProportionsRelease:
    r"""Release the proportions ``c_j / n`` with Σ = 1 and each in [0, 1] (Liu §4.2).

    ``counts``: exact category counts, shape ``(K,)`` or a batch ``(R, K)`` (simulations);
    ``n``: the public row count (may exceed ``Σ c_j`` when rows fall outside ``keys``; the
    released shares are then among the declared keys for ``rescale``, while the remainder of
    ``all_but_one`` absorbs the undeclared rows). Each released ``q*_j`` comes from ``mechanism``
    on ``[0, 1]`` with sensitivity ``1/n`` (plus float slack) and ``ε·share`` where
    ``share = 1/min(2, m)`` (:func:`proportion_epsilon_share`); see the module docstring for
    the derivation and the two sum-to-one methods. Total cost: ``(ε, δ)``.
    """
    eps, dlt = _check_budget(epsilon, delta, mechanism)
    cls = _mechanism_class(mechanism)
    n_rows = _check_n(n)
    c = np.asarray(counts, dtype=float)
    if c.ndim not in (1, 2) or c.shape[-1] < 1:
        raise ParameterError(f"counts must have shape (K,) or (R, K), got {c.shape}")
    if not np.isfinite(c).all() or (c < 0).any() or (c.sum(axis=-1) > n_rows).any():
        raise ParameterError("counts must be finite, ≥ 0 and sum to at most n")
    k = c.shape[-1]
    key_t = tuple(keys) if keys is not None else tuple(range(k))
    if len(key_t) != k:
        raise ParameterError(f"{len(key_t)} keys for {k} counts")
    if method not in ("rescale", "all_but_one"):
        raise ParameterError(f"method must be 'rescale' or 'all_but_one', got {method!r}")
    if k == 1:
        raise ParameterError("a single category has proportion 1; nothing to release")
    rem = remainder % k if method == "all_but_one" else -1
    released_idx = [j for j in range(k) if j != rem]
    share = proportion_epsilon_share(len(released_idx))
    sens = math.nextafter(1.0 / n_rows + _FP_SLACK, math.inf)
    mech = cls(eps * share, sens, lower=0.0, upper=1.0, delta=dlt * share)
    rng = _generator(random_state)
    q = np.clip(c / n_rows, 0.0, 1.0)
    raw = np.full(c.shape, np.nan)
    raw[..., released_idx] = np.asarray(
        mech.sample(q[..., released_idx], random_state=rng), dtype=float
    ).reshape(q[..., released_idx].shape)
    out = sum_to_one(raw, method, rem)
    cols = (column,) if column else ()
    records = tuple(
        _record(mech, f"proportion[{key_t[j]!r}]", cols,
                notes=f"method={method}; ε share {share:g} (replacement moves two cells)")
        for j in released_idx
    )
    return ProportionsRelease(out, key_t, method, records, raw)


# -- covariance and correlation (Liu §4.1, Table 1) -----------------------------------------
def variance_sensitivity(n: int, width: float) -> float:
    """``w²/n`` for the ddof=1 variance under replacement (derivation in the module doc)."""
    return width * width / _check_n(n, 2)


def variance_domain_upper(n: int, width: float) -> float:
    """``n w² / (4(n−1))``: the largest ddof=1 variance of n values in an interval of width w."""
    n = _check_n(n, 2)
    return n * width * width / (4.0 * (n - 1))


def covariance_sensitivity(n: int, width_j: float, width_k: float) -> float:
    """``w_j w_k / n`` for the ddof=1 covariance under replacement (module doc)."""
    return width_j * width_k / _check_n(n, 2)


@dataclass(frozen=True)
class CovarianceRelease:
    """Released covariance (PSD, released variances on the diagonal), its correlation matrix,
    the raw element-wise release before projection, and one record per released element."""

    cov: np.ndarray
    corr: np.ndarray
    raw: np.ndarray
    columns: tuple[str, ...]
    records: tuple[ReleaseRecord, ...]

    def cov_frame(self) -> pd.DataFrame:
        """The covariance matrix as a labelled pandas frame."""
        return pd.DataFrame(self.cov, index=list(self.columns), columns=list(self.columns))

    def corr_frame(self) -> pd.DataFrame:
        """The correlation matrix as a labelled pandas frame."""
        return pd.DataFrame(self.corr, index=list(self.columns), columns=list(self.columns))


def correlation_from_covariance(cov: np.ndarray) -> np.ndarray:
    """``S_jk/√(S_jj S_kk)`` clipped to [−1, 1]; rows/columns of zero variance get 0 off the
    diagonal and 1 on it (a PSD ``S`` gives a PSD correlation matrix)."""
    s = np.asarray(cov, dtype=float)
    sd = np.sqrt(np.clip(np.diag(s), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(sd > 0, 1.0 / np.where(sd > 0, sd, 1.0), 0.0)
    r = np.clip(s * np.outer(inv, inv), -1.0, 1.0)
    np.fill_diagonal(r, 1.0)
    return r


def release_covariance(
    cov: np.ndarray,
    n: int,
    bounds: Sequence[tuple[float, float]],
    epsilon: float,
    *,
    columns: Sequence[str] | None = None,
    mechanism: BoundedMechanismName = "bounded",
    delta: float = 0.0,
    project: bool = True,
    random_state: RandomState = None,
) -> CovarianceRelease:
    r"""Release a ``p × p`` sample covariance matrix (ddof=1) element-wise (Liu §4.1, Table 1).

    ``cov``: the exact covariance of the data *clamped to* ``bounds`` (one ``(l, u)`` per
    column); ``n ≥ 2`` public. Budget ``ε/m`` (``δ/m``) for each of the ``m = p(p+1)/2``
    elements; variances on ``[0, n w²/(4(n−1))]`` with ``Δ = w²/n``, then each covariance on
    ``[−√(S*_jj S*_kk), √(S*_jj S*_kk)]`` with ``Δ = w_j w_k/n``; finally (``project=True``) the
    nearest PSD matrix with the released variances on its diagonal (:func:`nearest_psd`).
    Total cost: ``(ε, δ)``.
    """
    eps, dlt = _check_budget(epsilon, delta, mechanism)
    cls = _mechanism_class(mechanism)
    n_rows = _check_n(n, 2)
    s = np.asarray(cov, dtype=float)
    p = len(bounds)
    if s.shape != (p, p):
        raise ParameterError(f"cov has shape {s.shape} but {p} bounds were given")
    if not np.isfinite(s).all():
        raise ParameterError("the covariance matrix has NaN or infinite entries")
    cols = tuple(columns) if columns is not None else tuple(f"x{j}" for j in range(p))
    if len(cols) != p:
        raise ParameterError(f"{len(cols)} column names for {p} columns")
    widths = []
    for lo, hi in bounds:
        lo_f, hi_f = float(lo), float(hi)
        if not (math.isfinite(lo_f) and math.isfinite(hi_f) and lo_f < hi_f):
            raise ParameterError(f"bounds must be finite with lower < upper, got {(lo, hi)!r}")
        widths.append(hi_f - lo_f)
    m = p * (p + 1) // 2
    eps_each, dlt_each = eps / m, dlt / m
    rng = _generator(random_state)
    records: list[ReleaseRecord] = []
    out = np.zeros((p, p))
    for j in range(p):
        upper = variance_domain_upper(n_rows, widths[j])
        sens = min(variance_sensitivity(n_rows, widths[j]) + _FP_SLACK * upper, upper)
        mech = cls(eps_each, sens, lower=0.0, upper=upper, delta=dlt_each)
        out[j, j] = float(mech.sample(float(np.clip(s[j, j], 0.0, upper)), random_state=rng))
        records.append(_record(mech, "variance", (cols[j],), notes=f"ε/{m} (Liu Table 1)"))
    for j in range(p):
        for k in range(j + 1, p):
            c = math.sqrt(out[j, j] * out[k, k])
            if not c > 0:
                out[j, k] = out[k, j] = 0.0
                records.append(ReleaseRecord(
                    "covariance", (cols[j], cols[k]), eps_each, dlt_each, mechanism,
                    covariance_sensitivity(n_rows, widths[j], widths[k]), 0.0, (0.0, 0.0),
                    noise=False,
                    notes="a released variance is 0, so the domain is {0}; 0 released",
                ))
                continue
            sens = covariance_sensitivity(n_rows, widths[j], widths[k]) + _FP_SLACK * c
            sens = min(sens, 2.0 * c)
            mech = cls(eps_each, sens, lower=-c, upper=c, delta=dlt_each)
            val = float(mech.sample(float(np.clip(s[j, k], -c, c)), random_state=rng))
            out[j, k] = out[k, j] = val
            records.append(_record(
                mech, "covariance", (cols[j], cols[k]),
                notes=f"ε/{m}; domain ±√(S*_jj S*_kk) from the released variances",
            ))
    raw = out.copy()
    final = nearest_psd(out, diagonal=np.diag(out)) if project else out
    return CovarianceRelease(final, correlation_from_covariance(final), raw, cols,
                             tuple(records))
