"""Tests of the synthetic census generator (dpframe.datasets)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpframe.datasets import (
    CENSUS_BOUNDS,
    CENSUS_COLUMNS,
    CENSUS_KEYS,
    CHUNK_ROWS,
    census,
    iter_census,
)

N = 20_000


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return census(N, seed=7)


def test_columns_and_pandas_dtypes(df: pd.DataFrame) -> None:
    assert tuple(df.columns) == CENSUS_COLUMNS
    assert len(df) == N
    assert df["age"].dtype == np.int64
    assert df["hours_worked"].dtype == np.int64
    assert df["income"].dtype == np.float64
    for col, keys in CENSUS_KEYS.items():
        assert isinstance(df[col].dtype, pd.CategoricalDtype)
        assert list(df[col].cat.categories) == keys
        assert df[col].cat.ordered == (col == "education")
    assert not df.isna().any().any()


def test_polars_dtypes_and_equal_values(df: pd.DataFrame) -> None:
    pf = census(N, seed=7, backend="polars")
    assert isinstance(pf, pl.DataFrame)
    assert tuple(pf.columns) == CENSUS_COLUMNS
    assert pf.schema["age"] == pl.Int64
    assert pf.schema["hours_worked"] == pl.Int64
    assert pf.schema["income"] == pl.Float64
    assert pf.schema["sex"] == pl.Categorical
    assert pf.schema["region"] == pl.Categorical
    assert pf.schema["education"] == pl.Enum(CENSUS_KEYS["education"])
    assert pf.null_count().sum_horizontal().item() == 0
    for col in CENSUS_COLUMNS:
        pd_values = df[col].astype(str if col in CENSUS_KEYS else df[col].dtype).to_numpy()
        pl_values = pf[col].cast(pl.String).to_numpy() if col in CENSUS_KEYS else pf[col].to_numpy()
        np.testing.assert_array_equal(pd_values, pl_values, err_msg=col)


def test_deterministic(df: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(df, census(N, seed=7))
    other = census(N, seed=8)
    assert not df["income"].equals(other["income"])


def test_pinned_values() -> None:
    """The data is part of the project's reproducibility: pin a few values of seed 0."""
    head = census(5, seed=0)
    assert head["age"].tolist() == [51, 78, 45, 64, 63]
    assert head["sex"].astype(str).tolist() == ["female", "male", "male", "female", "female"]
    assert head["income"].tolist() == [37697.57, 5634.06, 26993.95, 11978.02, 31991.8]


def _assert_prefix(big: pl.DataFrame, small: pl.DataFrame) -> None:
    assert big.head(len(small)).equals(small)


def test_prefix_property_across_chunks() -> None:
    n = CHUNK_ROWS + 1_000
    big = census(n, seed=3, backend="polars")
    _assert_prefix(big, census(CHUNK_ROWS + 10, seed=3, backend="polars"))
    _assert_prefix(big, census(100, seed=3, backend="polars"))


def test_iter_census_concatenates_to_census() -> None:
    n = CHUNK_ROWS + 123
    chunks = list(iter_census(n, seed=1, backend="polars"))
    assert [len(c) for c in chunks] == [CHUNK_ROWS, 123]
    whole = census(n, seed=1, backend="polars")
    assert pl.concat(chunks).equals(whole)


def test_values_mostly_within_declared_bounds(df: pd.DataFrame) -> None:
    for col, (lower, upper) in CENSUS_BOUNDS.items():
        values = df[col]
        assert values.min() >= lower, col  # lower bounds hold exactly
        outside = ((values < lower) | (values > upper)).mean()
        assert outside < 0.02, (col, outside)
    # ...but bounds are declared, not data-derived: some rows exceed them (clamping is real).
    assert (df["income"] > CENSUS_BOUNDS["income"][1]).any()
    assert (df["age"] > CENSUS_BOUNDS["age"][1]).any()


def test_realistic_structure(df: pd.DataFrame) -> None:
    assert df["age"].between(16, 100).all()
    assert df["hours_worked"].between(0, 99).all()
    zero_income = (df["income"] == 0).mean()
    assert 0.05 < zero_income < 0.35
    not_working = (df["hours_worked"] == 0).mean()
    assert 0.2 < not_working < 0.5
    # Long right tail: mean well above median, max far above the mean.
    income = df["income"]
    assert income.mean() > 1.2 * income.median()
    assert income.max() > 10 * income.mean()
    # Income rises with education; degrees need age.
    med = df.groupby("education", observed=True)["income"].median()
    assert med["doctorate"] > med["bachelor"] > med["upper_secondary"]
    assert (df.loc[df["age"] < 23, "education"].astype(str) != "master").all()
    assert (df.loc[df["age"] < 18, "education"].cat.codes <= 1).all()
    # All public keys occur.
    for col, keys in CENSUS_KEYS.items():
        assert set(df[col].astype(str).unique()) == set(keys)
    # Income is in cents.
    np.testing.assert_allclose(income * 100, np.round(income * 100), atol=1e-6)


@pytest.mark.backends("pandas", "polars")  # census builds eager frames
def test_sizes(constructor) -> None:
    for n in (0, 1, 17):
        frame = census(n, backend=constructor.name)
        assert len(frame) == n
        assert tuple(frame.columns) == CENSUS_COLUMNS


@pytest.mark.skip_backends("duckdb", "spark", "dask",
                           reason="the census generator builds pandas or Polars frames")
def test_census_protects_with_its_public_metadata(constructor) -> None:
    """The published bounds and keys are what dpf.protect needs, on every backend."""
    import dpframe as dpf

    frame = census(500, seed=2, backend=constructor.family)
    if constructor.lazy:
        frame = frame.lazy()
    pf = dpf.protect(frame, epsilon=1.0, bounds=CENSUS_BOUNDS, keys=CENSUS_KEYS)
    assert pf.dp.size == 500
    t = pf.dp.groupby("region").mean("age", epsilon=0.5, random_state=0)
    assert [str(k) for k in constructor.column(t, "region")] == CENSUS_KEYS["region"]
    lo, hi = CENSUS_BOUNDS["age"]
    assert all(lo <= v <= hi for v in constructor.values(t, "mean"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_rows": -1}, "n_rows"),
        ({"n_rows": 1.5}, "n_rows"),
        ({"n_rows": 10, "seed": -3}, "seed"),
        ({"n_rows": 10, "backend": "spark"}, "backend"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        census(**kwargs)


def test_public_metadata_consistent() -> None:
    assert set(CENSUS_BOUNDS) | set(CENSUS_KEYS) == set(CENSUS_COLUMNS)
    for lower, upper in CENSUS_BOUNDS.values():
        assert lower < upper


def test_visits_has_several_rows_per_patient_and_is_deterministic() -> None:
    from dpframe.datasets import VISITS_BOUNDS, VISITS_COLUMNS, VISITS_KEYS, visits

    df = visits(2_000, seed=3)
    assert tuple(df.columns) == VISITS_COLUMNS
    per_patient = df.groupby("patient_id").size()
    assert len(per_patient) == 2_000 and per_patient.min() >= 1 and per_patient.max() > 5
    assert 2.5 < per_patient.mean() < 4.5
    assert (df.groupby("patient_id")[["age", "region"]].nunique(dropna=False) == 1).all().all()
    for col, keys in VISITS_KEYS.items():
        assert list(df[col].cat.categories) == keys
    assert df.cost.between(0, VISITS_BOUNDS["cost"][1]).mean() > 0.99
    pd.testing.assert_frame_equal(df, visits(2_000, seed=3))
    assert visits(2_000, seed=3, backend="polars").to_pandas()["cost"].tolist() == df.cost.tolist()
