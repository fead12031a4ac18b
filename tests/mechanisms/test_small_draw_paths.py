"""The cheaper steps of a small vector draw (issue 34: a histogram's ten cells) compute what
the steps they replace computed, bit for bit, and refuse what those refused.

* :data:`dpframe.mechanisms.snapping.CLIP`, numpy's clip ufunc called directly, is
  ``np.clip`` over signed zeros, NaN, ±inf and subnormals (as values and as bounds), and on
  int64 with the window's integer bounds moved into int64's range (``np.clip`` drops a
  bound beyond it);
* the truncated mechanism's clamp on an interval is ``FeasibleSet.project``;
* the two-reduction membership check accepts exactly the values the four checks accept.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpframe.errors import ParameterError
from dpframe.mechanisms.domains import FeasibleSet
from dpframe.mechanisms.laplace import TruncatedLaplace, make_mechanism
from dpframe.mechanisms.snapping import CLIP, _int_bounds

_TINY = np.nextafter(0.0, 1.0)  # the smallest subnormal
_SPECIAL = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, _TINY, -_TINY, 2.0**-1070,
                     -(2.0**-1030), 1.0, -1.0, np.finfo(float).max, -np.finfo(float).max,
                     np.finfo(float).tiny, 3.5, -2.25])
_BOUNDS = [0.0, -0.0, np.inf, -np.inf, _TINY, -_TINY, 1.0, -1.0, np.nan, 2.0**-1070]


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)


def test_clip_ufunc_is_np_clip_on_special_doubles() -> None:
    for lo in _BOUNDS:
        for hi in _BOUNDS:
            want = np.clip(_SPECIAL, lo, hi)
            got = CLIP(_SPECIAL.copy(), lo, hi)
            in_place = _SPECIAL.copy()
            CLIP(in_place, lo, hi, out=in_place)
            assert np.array_equal(_bits(got), _bits(want)), (lo, hi)
            assert np.array_equal(_bits(in_place), _bits(want)), (lo, hi)


def test_clip_ufunc_is_np_clip_on_int64_window_indices() -> None:
    j = np.array([np.iinfo(np.int64).min, -(2**62), -5, 0, 7, 2**40, np.iinfo(np.int64).max])
    windows = [(0.0, 1000.0, 2.0**-15), (-3.0, 3.0, 0.5), (-(2.0**70), 2.0**70, 1.0),
               (-(2.0**63), 2.0**63, 1.0)]
    for w_lo, w_hi, grid in windows:
        lo, hi = int(np.floor(w_lo / grid)), int(np.ceil(w_hi / grid))
        want = np.clip(j, lo, hi)
        got = CLIP(j.copy(), *_int_bounds(w_lo, w_hi, grid))
        assert got.dtype == want.dtype == np.int64
        assert np.array_equal(got, want)


def test_interval_clamp_is_project() -> None:
    x = np.concatenate([_SPECIAL, [10.0, 10.5, -0.5]])
    for lower in (0.0, -0.0, -3.5):
        mech = TruncatedLaplace(1.0, 1.0, domain=FeasibleSet(((lower, 10.0),)))
        want = mech.domain.project(x.copy())
        got = mech._post_process(x.copy())
        assert np.array_equal(_bits(got), _bits(want)), lower


@pytest.mark.parametrize("lower, upper", [(0.0, 100.0), (-np.inf, np.inf), (0.0, np.inf)])
def test_reduction_check_accepts_what_the_four_checks_accept(lower: float, upper: float
                                                             ) -> None:
    mech = make_mechanism("laplace", epsilon=1.0, sensitivity=1.0, lower=lower, upper=upper,
                          magnitude=1e6)
    cases = [np.array([0.0, 50.0, 100.0]), np.array([-0.0, 3.0]), np.array([np.nan, 1.0]),
             np.array([1.0, np.inf]), np.array([-np.inf]), np.array([-1.0, 5.0]),
             np.array([101.0]), np.array([2e6, 1.0]), np.array([-2e6]), np.array([]),
             np.array([[1.0, 2.0], [3.0, 99.0]]), np.array([1e6, -1e6])]
    for true in cases:
        fast = mech._all_inside(true)
        try:
            checked = np.isnan(true).any() or not np.isfinite(true).all() or not (
                mech.domain.contains(true).all()) or (np.abs(true) > mech.magnitude).any()
        except ParameterError:  # pragma: no cover - the plain checks do not raise
            checked = True
        assert not (fast and checked), true  # never accepts a value the checks refuse
        if true.size and not checked and len(mech.domain.components) == 1:
            assert fast, true
        if checked:
            with pytest.raises(ParameterError):
                mech._validate_values(true)
        else:
            assert np.array_equal(mech._validate_values(true), true)
