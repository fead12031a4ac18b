"""File roots are bound by their content (``dpframe.provenance._protect.SourceBinding``): a file
rewritten in place with the same size, with its modification time put back with ``os.utime``,
keeps every metadata field the binding used to compare (size, mtime, device, inode) — it is
refused before anything is spent, for Parquet and CSV roots of every engine."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpframe as dpf

N = 300


def _values() -> np.ndarray:
    return np.random.default_rng(31).uniform(10.0, 99.0, N).round(6)


def _write(path: Path, x: np.ndarray) -> None:
    """A file whose size depends on the number of values only (uncompressed Parquet without
    dictionary or statistics; CSV with fixed-width numbers)."""
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"x": x}), path, compression="none", use_dictionary=False,
                       write_statistics=False)
    else:
        path.write_text("x\n" + "".join(f"{v:09.6f}\n" for v in x))


def rewrite_in_place(path: Path, x: np.ndarray) -> None:
    """Rewrite ``path`` with ``x``: same size, same inode, modification time put back."""
    before = os.stat(path)
    other = path.with_name("other" + path.suffix)
    _write(other, x)
    data = other.read_bytes()
    other.unlink()
    assert len(data) == before.st_size
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino, after.st_dev) == (
        before.st_size, before.st_mtime_ns, before.st_ino, before.st_dev)


def _readers() -> dict[str, Callable[[Path], Any]]:
    def polars(path: Path) -> Any:
        import polars as pl

        return pl.scan_parquet(path) if path.suffix == ".parquet" else pl.scan_csv(
            path, schema={"x": pl.Float64})

    def duckdb(path: Path) -> Any:
        duck = pytest.importorskip("duckdb")
        return duck.read_parquet(str(path)) if path.suffix == ".parquet" else duck.read_csv(
            str(path), dtype={"x": "DOUBLE"})

    def dask(path: Path) -> Any:
        dd = pytest.importorskip("dask.dataframe")
        return dd.read_parquet(str(path)) if path.suffix == ".parquet" else dd.read_csv(
            str(path), dtype={"x": "float64"})

    def spark(path: Path) -> Any:
        from conftest import spark_session

        session = spark_session()
        return session.read.parquet(str(path)) if path.suffix == ".parquet" else \
            session.read.csv(str(path), schema="x DOUBLE", header=True)

    return {"polars": polars, "duckdb": duckdb, "dask": dask, "spark": spark}


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
@pytest.mark.parametrize("engine", list(_readers()))
def test_same_size_rewrite_with_mtime_restored_is_refused_before_spending(tmp_path, engine,
                                                                         suffix):
    path = tmp_path / f"people{suffix}"
    x = _values()
    _write(path, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = dpf.protect(_readers()[engine](path), epsilon=5.0, bounds={"x": (0.0, 100.0)},
                        missing=0.0)
        p.dp.mean("x", epsilon=1.0, random_state=1)  # the untouched file is answered
    entries = len(p.dp.log)
    changed = x.copy()
    changed[0], changed[1] = 99.0, 10.0  # one person's value and another's: same n, same size
    rewrite_in_place(path, changed)
    with pytest.raises(dpf.SourceChangedError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.dp.mean("x", epsilon=1.0, random_state=1)
    assert p.dp.budget.epsilon_spent == 1.0
    assert len(p.dp.log) == entries


def test_the_binding_rereads_the_content_before_each_release(tmp_path, monkeypatch):
    """What is re-checked, and when: the file list, metadata and the SHA-256 digests of every
    bound file's content, before each release (never skipped because the metadata is
    unchanged)."""
    import polars as pl

    from dpframe.provenance import _binding as provenance

    path = tmp_path / "people.parquet"
    _write(path, _values())
    p = dpf.protect(pl.scan_parquet(path), epsilon=5.0, bounds={"x": (0.0, 100.0)},
                    missing=0.0)
    read: list[str] = []
    unchanged = provenance.file_unchanged
    monkeypatch.setattr(provenance, "file_unchanged",
                        lambda f, *rest: read.append(f) or unchanged(f, *rest))
    p.dp.mean("x", epsilon=1.0, random_state=1)
    p.dp.sum("x", epsilon=1.0, random_state=2)
    assert read == [str(path), str(path)]


def test_a_folder_root_binds_every_file_under_it(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    folder = tmp_path / "people"
    folder.mkdir()
    x = _values()
    _write(folder / "part-0.parquet", x[:150])
    _write(folder / "part-1.parquet", x[150:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = dpf.protect(dd.read_parquet(str(folder)), epsilon=5.0,
                        bounds={"x": (0.0, 100.0)}, missing=0.0)
    changed = x[150:].copy()
    changed[0] = 99.0
    rewrite_in_place(folder / "part-1.parquet", changed)
    with pytest.raises(dpf.SourceChangedError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.dp.mean("x", epsilon=1.0)
    assert p.dp.budget.epsilon_spent == 0.0


def test_a_second_engine_frame_over_a_protected_file_is_refused(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "people.parquet"
    _write(path, _values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dpf.protect(duckdb.read_parquet(str(path)), epsilon=5.0, bounds={"x": (0.0, 100.0)},
                    missing=0.0)
        with pytest.raises(dpf.LedgerError):
            dpf.protect(duckdb.read_parquet(str(path)), epsilon=5.0,
                        bounds={"x": (0.0, 100.0)}, missing=0.0)
