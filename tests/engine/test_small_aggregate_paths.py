"""The cheaper checks of a small group-by (issue 34) answer what the checks they replace
answer: the temporal-column test per dtype class, and the integer check of a few values."""

from __future__ import annotations

import narwhals.stable.v2 as nw
import numpy as np

from dpframe.engine._aggregation import _integral, _is_temporal


def test_temporal_test_is_narwhals_comparison() -> None:
    dtypes = [nw.Int64(), nw.Float64(), nw.String(), nw.Date(), nw.Datetime("us"),
              nw.Datetime("ns", "UTC"), nw.Boolean(), nw.Categorical(), nw.Duration(),
              nw.List(nw.Int64()), nw.Int32, nw.Date, nw.Datetime, nw.Enum(["a"]),
              nw.Decimal(), nw.Object(), nw.Unknown(), nw.Struct({"a": nw.Date()})]
    for _ in range(2):  # (the second time from what the first one kept)
        for dtype in dtypes:
            assert _is_temporal(dtype) == bool(dtype == nw.Date or dtype == nw.Datetime), dtype


def test_integer_check_of_few_values() -> None:
    tiny = np.nextafter(0.0, 1.0)
    for values in ([0.0, 1.0, -0.0, 2.0**60], [1.0, 0.5], [1.0, np.nan], [np.inf, 1.0],
                   [-np.inf], [tiny, 0.0], [3.0] * 64, [3.0] * 63 + [np.nan], [[1.0, 2.0]]):
        a = np.array(values, dtype=np.float64)
        want = bool(np.isfinite(a).all() and (np.trunc(a) == a).all())
        assert _integral(a) == want, values
