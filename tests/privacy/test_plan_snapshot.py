"""Which protected LazyFrames stay lazy (DESIGN §2 rule 1, issue 30): only a plan whose
structure shows that it reads nothing but local files dpframe binds by content, and holds no
Python object; every other plan is collected once at protect into dpframe's own copy. And the
memory such a plan holds (Series literals, in-memory pyarrow datasets, what a Python scan hands
back) counts as protected memory: a second protect over it is refused."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import dpframe as dpf
from dpframe._util.polars_plan import held_memory, reads_only_files
from dpframe.backends.polars._adapter import PolarsLazyBackend
from dpframe.errors import LedgerError, UnsupportedInputError

N = 200
K = 3
SEED = {"epsilon": 0.1, "random_state": 1}


def _values() -> np.ndarray:
    return np.random.default_rng(31).uniform(0.0, 100.0, N)


def _protect(frame: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(frame, epsilon=100.0, delta=1e-5, bounds={"x": (0.0, 100.0)},
                           missing={"x": 0.0})


@pytest.fixture
def parquet(tmp_path: Any) -> str:
    path = tmp_path / "x.parquet"
    pl.DataFrame({"x": _values(), "g": ["a", "b"] * (N // 2)}).write_parquet(path)
    return str(path)


_LAZY: dict[str, Callable[[pl.LazyFrame], pl.LazyFrame]] = {
    "scan": lambda s: s,
    "filter": lambda s: s.filter(pl.col("x") > 1.0),
    "scalars": lambda s: s.with_columns(y=pl.col("x") * 2 + pl.lit(1.5), z=pl.lit("s"),
                                        d=pl.lit(np.float64(2.0))),
    "when": lambda s: s.with_columns(y=pl.when(pl.col("g") == "a").then(1).otherwise(0)),
    "select": lambda s: s.select("x", pl.col("g").str.to_uppercase()),
    "rename": lambda s: s.rename({"g": "h"}),
    "group_by": lambda s: s.group_by("g").agg(pl.col("x").sum()),
    "window": lambda s: s.with_columns(y=pl.col("x").sum().over("g")),
    "sort_head": lambda s: s.sort("x").head(50),
    "join": lambda s: s.join(s.select("g").unique(), on="g"),
    "concat": lambda s: pl.concat([s, s]),
    "cast": lambda s: s.with_columns(pl.col("x").cast(pl.Float32, strict=False)),
}


@pytest.mark.parametrize("route", list(_LAZY))
def test_a_plan_over_files_with_plain_structure_stays_lazy(parquet: str, route: str) -> None:
    lazy = _LAZY[route](pl.scan_parquet(parquet))
    assert reads_only_files(lazy)
    assert PolarsLazyBackend().snapshot(lazy) is lazy
    assert list(held_memory(lazy)) == []


def test_a_csv_scan_with_declared_types_stays_lazy(tmp_path: Any) -> None:
    path = tmp_path / "x.csv"
    pl.DataFrame({"x": _values()}).write_csv(path)
    lazy = pl.scan_csv(path, schema={"x": pl.Float64})
    assert PolarsLazyBackend().snapshot(lazy) is lazy


_HOLDING: dict[str, Callable[[pl.LazyFrame, np.ndarray], pl.LazyFrame]] = {
    "map_batches": lambda s, x: s.with_columns(
        pl.col("x").map_batches(lambda _s: pl.Series("x", x), return_dtype=pl.Float64)),
    "map_elements": lambda s, x: s.with_columns(
        pl.col("x").map_elements(lambda v: v, return_dtype=pl.Float64)),
    "lit Series": lambda s, x: s.with_columns(y=pl.lit(pl.Series(x))),
    "Series": lambda s, x: s.with_columns(pl.Series("y", x)),
    "is_in Series": lambda s, x: s.filter(pl.col("x").is_in(pl.Series(x).implode())),
    "is_in list": lambda s, x: s.filter(pl.col("x").is_in([1.0, 2.0])),
    "replace_strict": lambda s, x: s.with_columns(
        y=pl.col("x").replace_strict(pl.Series(x), pl.Series(x), default=0.0)),
    "lit list": lambda s, x: s.with_columns(y=pl.lit([1, 2])),
    "in-memory join": lambda s, x: s.join(pl.LazyFrame({"g": ["a"], "w": [1.0]}), on="g",
                                            maintain_order="left"),
}


@pytest.mark.parametrize("route", list(_HOLDING))
def test_a_plan_over_files_holding_python_objects_is_collected(parquet: str,
                                                                route: str) -> None:
    x = _values()
    lazy = _HOLDING[route](pl.scan_parquet(parquet), x)
    assert not reads_only_files(lazy)
    snapshot = PolarsLazyBackend().snapshot(lazy)
    assert snapshot is not lazy
    assert reads_only_files(snapshot.select(pl.all())) is False  # an in-memory frame now
    assert snapshot.collect().equals(lazy.collect())


def test_a_lazyframe_python_map_is_refused_by_dpframe_at_protect(parquet: str) -> None:
    lazy = pl.scan_parquet(parquet).map_batches(lambda frame: frame)
    with pytest.raises(UnsupportedInputError, match="does not show to dpframe"):
        _protect(lazy)


def test_a_python_map_over_a_protected_plan_spends_nothing(parquet: str) -> None:
    pf = _protect(pl.scan_parquet(parquet))
    with pytest.raises(dpf.errors.DPFrameError):
        _protect(pf.map_batches(lambda frame: frame))
    assert pf.dp.budget.epsilon_spent == 0.0


def test_a_scan_of_in_memory_bytes_is_refused_with_the_fix() -> None:
    buffer = io.BytesIO()
    pl.DataFrame({"x": _values()}).write_parquet(buffer)
    buffer.seek(0)
    with pytest.raises(UnsupportedInputError, match="Write the bytes to a file"):
        _protect(pl.scan_parquet(buffer))


def test_a_collected_plan_gives_the_seeded_release_of_its_eager_twin(parquet: str) -> None:
    x = _values()
    lazy = _HOLDING["lit Series"](pl.scan_parquet(parquet), x).select(pl.col("y").alias("x"))
    pf = _protect(lazy)
    twin = _protect(pl.DataFrame({"x": _values()}))
    x[:] = x[K]
    assert pf.dp.mean("x", **SEED) == twin.dp.mean("x", **SEED)


# -- the memory registry sees what these plans hold (the first protected frame is held) --------
def _pyarrow_dataset(x: np.ndarray) -> pl.LazyFrame:
    import pyarrow.dataset as ds

    return pl.scan_pyarrow_dataset(ds.dataset(pa.table({"x": pa.array(x)})))


def _deferred(x: np.ndarray) -> pl.LazyFrame:
    return pl.defer(lambda: pl.from_numpy(x, schema=["x"]), schema={"x": pl.Float64})


_FIRST: dict[str, Callable[[np.ndarray], Any]] = {
    "pyarrow dataset": _pyarrow_dataset,
    "eager": lambda x: pl.from_numpy(x, schema=["x"]),
    "lit Series": lambda x: pl.LazyFrame({"r": np.zeros(len(x))}).with_columns(
        x=pl.lit(pl.Series(x))),
}
_SECOND: dict[str, Callable[[np.ndarray], Any]] = {
    **_FIRST,
    "defer": _deferred,
}


@pytest.mark.parametrize(("first", "second"), [
    ("pyarrow dataset", "pyarrow dataset"), ("pyarrow dataset", "eager"),
    ("pyarrow dataset", "defer"), ("eager", "defer"), ("eager", "lit Series"),
    ("lit Series", "eager"), ("lit Series", "pyarrow dataset")])
def test_a_second_protect_over_memory_a_live_protected_plan_holds_is_refused(
        first: str, second: str) -> None:
    x = _values()
    held = _protect(_FIRST[first](x))  # (held: a dropped frame's budget is gone with it)
    with pytest.raises(LedgerError, match="already carries a privacy budget"):
        _protect(_SECOND[second](x))
    assert held.dp.budget.epsilon_spent == 0.0


def test_a_deferred_frame_over_other_memory_is_protected() -> None:
    held = _protect(pl.from_numpy(_values(), schema=["x"]))
    pf = _protect(_deferred(_values()))  # equal values, other memory: no refusal
    assert isinstance(pf.dp.mean("x", **SEED), float)
    assert held.dp.budget.epsilon_spent == 0.0
