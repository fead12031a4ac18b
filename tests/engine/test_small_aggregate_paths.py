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


def test_plain_key_counts_match_the_general_pass() -> None:
    """Rows per declared key taken before the general pass (:func:`_plain_key_counts`) are
    the general pass's counts: pandas plain and nullable integer keys, Polars keys with
    nulls, keys permuted and gapped; None for keys that are not a small range or a count of
    a column's rows (the general pass then)."""
    import pandas as pd
    import polars as pl

    from dpframe.backends import backend_of
    from dpframe.engine import _aggregation as agg
    from dpframe.engine._schema import frame_columns
    from dpframe.query import Agg, checked_keys

    values = [3, 1, None, 4, 1, 5, 9, 2, 6, 5, 3, 5, 0, -7]
    frames = [pd.DataFrame({"k": pd.array(values, dtype="Int64")}),
              pd.DataFrame({"k": [0 if v is None else v for v in values]}),
              pl.DataFrame({"k": values})]
    rows, present = Agg("rows"), Agg("rows", "k")
    for frame in frames:
        backend = backend_of(frame)
        columns = frame_columns(frame)
        for keys in ([0, 1, 2, 3, 4, 5, 6], [5, 3, 1, 9], [0, 10**12]):
            declared = checked_keys(keys)
            fast = agg._plain_key_counts(frame, backend, [rows], "k", declared, columns)
            assert agg._plain_key_counts(frame, backend, [rows, present], "k", declared,
                                         columns) is None
            if keys[-1] == 10**12:
                assert fast is None
                continue
            general = agg._numpy_sums(frame, backend, [rows], columns, {}, "k", declared,
                                      "numpy")
            assert general is not None
            assert fast is not None and set(fast) == {rows}
            assert fast[rows].dtype == general[rows].dtype
            assert fast[rows].tobytes() == general[rows].tobytes()
            via = agg.aggregate(frame, [rows], backend=backend, missing={}, group_by="k",
                                keys=declared, columns=columns)
            assert via[rows].tobytes() == general[rows].tobytes()
