"""Issue 34: the added-noise kind's two clamps (into the mechanism's domain, then into the
measurement's magnitude bound) as one clamp into their intersection where they meet give the
same doubles as the two clamps, over signed zeros, NaN, ±inf and subnormals."""

from __future__ import annotations

import numpy as np

from dpframe.mechanisms.snapping import CLIP
from dpframe.query._measurement_kinds import clamp_twice

_TINY = np.nextafter(0.0, 1.0)
_VALUES = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, _TINY, -_TINY, 2.0**-1070, 1.0, -1.0,
                    3.5, -3.5, 7.0, -7.0, np.finfo(float).max, -np.finfo(float).max])
_ENDS = [-np.inf, -7.0, -3.5, -1.0, -_TINY, -0.0, 0.0, _TINY, 1.0, 3.5, np.inf]
_MAGNITUDES = [None, 0.0, -0.0, _TINY, 1.0, 3.5, 5.0, np.inf]


def test_one_clamp_is_the_two_clamps() -> None:
    for lower in _ENDS:
        for upper in _ENDS:
            if not lower <= upper:
                continue
            for magnitude in _MAGNITUDES:
                x = _VALUES.copy()
                want = CLIP(x, lower, upper)
                if magnitude is not None:
                    want = CLIP(want, -magnitude, magnitude)
                got = clamp_twice(x, lower, upper, magnitude)
                assert got.view(np.uint64).tobytes() == want.view(np.uint64).tobytes(), (
                    lower, upper, magnitude)
                assert x.tobytes() == _VALUES.tobytes()  # (a new array: the input kept)
