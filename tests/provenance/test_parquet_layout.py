"""A Parquet root is bound in parts (``dpframe.provenance._binding.FileContent``): the rest of
the file (magics, footer, page indexes, any byte in no column chunk) and each column's chunks,
with byte ranges read from the footer dpframe hashed itself
(``dpframe.provenance._parquet_layout``). A release hashes the rest and the chunks of the
columns it can read: a same-size rewrite (modification time put back) of a column it reads —
before or during the read — or of the footer is refused with nothing spent; a rewrite of a
column it does not read cannot reach its answer and is refused by the first release reading
that column. Neighbouring files (one row's value replaced) meet the same outcomes."""

from __future__ import annotations

import itertools
import os
import struct
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpframe as dpf
from dpframe.provenance import _binding
from dpframe.provenance._datasets import Dataset
from dpframe.provenance._parquet_layout import read_layout
from dpframe.release import _pipeline
from tests.helpers.file_rewrites import rewrite_double

N = 120


def _columns(replaced: float | None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    x = rng.uniform(10.0, 99.0, N).round(6)
    x[0], x[1] = 1.0, 100.0  # the extremes, so page statistics survive a middle rewrite
    if replaced is not None:
        x[7] = replaced  # a neighbour: one row's value replaced
    y = rng.uniform(20.0, 80.0, N).round(6)
    y[0], y[1] = 0.5, 99.5
    return {"x": x, "y": y, "k": np.arange(N) % 4}


def _write(path: Path, replaced: float | None, *, page_index: bool = True) -> None:
    """Uncompressed plain floats (a value's 8 bytes can be found and replaced in place), three
    row groups, page indexes when asked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(_columns(replaced)), path, compression="none",
                   use_dictionary=["k"], row_group_size=N // 3, write_page_index=page_index)


def _protect(path: Path) -> Any:
    import polars as pl

    return dpf.protect(pl.scan_parquet(path), epsilon=10.0,
                       bounds={"x": (0.0, 100.0), "y": (0.0, 100.0)}, missing=0.0)


def _dataset(frame: Any) -> Dataset:
    return dpf.provenance.resolve(frame).dataset


@pytest.mark.parametrize("writer", ["pyarrow", "pyarrow-no-page-index", "polars"])
def test_the_parts_cover_every_byte_once_and_match_the_footer(tmp_path, writer):
    import polars as pl
    import pyarrow.parquet as pq

    path = tmp_path / "people.parquet"
    if writer == "polars":  # (page indexes, and a copy of each chunk's metadata after it)
        pl.DataFrame(_columns(None)).write_parquet(path, row_group_size=N // 3)
    else:
        _write(path, None, page_index=writer == "pyarrow")
    layout, _rest = read_layout(str(path), "sha256") or (None, None)
    assert layout is not None
    parts = sorted([*layout.rest, *(r for rs in layout.columns.values() for r in rs)])
    assert parts[0][0] == 0 and parts[-1][1] == os.path.getsize(path)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    meta = pq.read_metadata(path)
    assert meta.num_row_groups == 3
    for j, name in enumerate(["x", "y", "k"]):
        chunks = [meta.row_group(i).column(j) for i in range(3)]
        assert layout.columns[name] == tuple(
            (c.dictionary_page_offset or c.data_page_offset,
             (c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size)
            for c in chunks)


def test_other_files_are_hashed_whole(tmp_path):
    csv = tmp_path / "people.csv"
    csv.write_text("x\n1.0\n")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\x19\x00" * 8 + struct.pack("<I", 16) + b"PAR1")
    for path in (csv, bad):
        bound = _binding.bind_file(str(path))
        assert bound is not None and bound.layout is None and list(bound.digests) == [None]


@pytest.mark.parametrize("replaced", [None, 55.5])  # neighbouring files
def test_a_rewrite_of_a_read_column_or_the_footer_is_refused(tmp_path, monkeypatch, replaced):
    path = tmp_path / "people.parquet"
    _write(path, replaced)
    p = _protect(path)
    p.dp.mean("x", epsilon=1.0, random_state=1)  # the untouched file is answered
    x = _columns(replaced)["x"]
    rewrite_double(path, x[5], x[5] + 0.25)  # a value of x, the column read
    with pytest.raises(dpf.SourceChangedError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.dp.mean("x", epsilon=1.0, random_state=1)
    assert p.dp.budget.epsilon_spent == 1.0
    rewrite_double(path, x[5] + 0.25, x[5])  # the protected bytes, put back
    p.dp.mean("x", epsilon=1.0, random_state=1)
    data = path.read_bytes()  # the writer's name in the footer: same size, other bytes
    at = data.rindex(b"parquet-cpp")
    _overwrite(path, at, b"PARQUET-CPP")
    with pytest.raises(dpf.SourceChangedError):
        _dataset(p).begin_check(set())()  # even a release reading no column
    assert p.dp.budget.epsilon_spent == 2.0


def _overwrite(path: Path, at: int, data: bytes) -> None:
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("replaced", [None, 55.5])  # neighbouring files
def test_an_unread_column_rewrite_is_refused_by_the_first_release_reading_it(
        tmp_path, monkeypatch, replaced):
    path = tmp_path / "people.parquet"
    _write(path, replaced)
    p = _protect(path)
    expected = p.dp.mean("x", epsilon=1.0, random_state=3)
    y = _columns(replaced)["y"]
    rewrite_double(path, y[9], y[9] + 0.25)  # y: not read by a mean of x
    assert p.dp.mean("x", epsilon=1.0, random_state=3) == expected  # the same bytes read
    assert p.dp.budget.epsilon_spent == 2.0
    with pytest.raises(dpf.SourceChangedError):  # the first release reading y
        p.dp.mean("y", epsilon=1.0, random_state=3)
    with pytest.raises(dpf.SourceChangedError):  # a release reading every column
        p.dp.release({"x": dpf.mean("x"), "y": dpf.mean("y")}, epsilon=1.0, random_state=3)
    assert p.dp.budget.epsilon_spent == 2.0


def test_a_rewrite_of_a_read_column_during_the_read_is_refused(tmp_path, monkeypatch):
    """The chunk digests wait until the read has rewritten one value of the column read."""
    path = tmp_path / "people.parquet"
    _write(path, None)
    p = _protect(path)
    rewritten = threading.Event()
    digest, aggregate = _binding.ranges_digest, _pipeline._aggregate
    x = _columns(None)["x"]

    def late_digest(*args: Any) -> bytes | None:
        rewritten.wait(30)
        return digest(*args)

    def read(*args: Any) -> Any:
        rewrite_double(path, x[5], x[5] + 0.25)
        rewritten.set()
        return aggregate(*args)

    monkeypatch.setattr(_binding, "ranges_digest", late_digest)
    monkeypatch.setattr(_pipeline, "_aggregate", read)
    with pytest.raises(dpf.SourceChangedError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.dp.mean("x", epsilon=1.0, random_state=1)
    assert p.dp.budget.epsilon_spent == 0.0 and len(p.dp.log) == 0


def test_only_a_bare_parquet_scan_maps_columns_by_name(tmp_path):
    """A rename or filter in the protected plan makes every column's chunks hashed."""
    import polars as pl

    path = tmp_path / "people.parquet"
    _write(path, None)
    renamed = tmp_path / "renamed.parquet"
    _write(renamed, None)
    assert _dataset(_protect(path)).source.by_name  # type: ignore[union-attr]
    swapped = pl.scan_parquet(renamed).select(pl.col("y").alias("x"), pl.col("x").alias("y"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = dpf.protect(swapped, epsilon=1.0, bounds={"x": (0.0, 100.0)}, missing=0.0)
    assert not _dataset(other).source.by_name  # type: ignore[union-attr]


def test_polars_reads_a_column_from_its_own_chunks_only(tmp_path):
    """The premise of checking by parts, on the engine it applies to: with every other
    column's chunks overwritten by noise, Polars still reads the same values of ``x``."""
    import polars as pl

    path = tmp_path / "people.parquet"
    _write(path, None)
    before = pl.scan_parquet(path).select("x").collect()
    layout, _rest = read_layout(str(path), "sha256") or (None, None)
    assert layout is not None
    noise = np.random.default_rng(0)
    with open(path, "r+b") as f:
        for start, end in (*layout.columns["y"], *layout.columns["k"]):
            f.seek(start)
            f.write(noise.bytes(end - start))
    assert pl.scan_parquet(path).select("x").collect().equals(before)


def test_a_derivation_hashes_the_columns_its_steps_reference(tmp_path):
    """``source_columns``: what a release of a derived column can read is that column's
    inputs and every column a step needs (the filter's ``k``), as Polars projects them."""
    import polars as pl

    path = tmp_path / "people.parquet"
    _write(path, None)
    p = _protect(path)
    derived = p.dp.filter(pl.col("k") > 0).dp.with_columns(
        (pl.col("x") * 2).alias("z"), bounds={"z": (0.0, 200.0)}, missing=0.0)
    data = dpf.provenance.resolve(derived).data
    assert _binding.source_columns(data, ["z"]) == {"x", "k"}
    assert _binding.source_columns(data.join(data, on="k"), ["z"]) is None
    derived.dp.mean("z", epsilon=1.0, random_state=1)
    y = _columns(None)["y"]
    rewrite_double(path, y[9], y[9] + 0.25)  # y: referenced by no step, not read
    derived.dp.mean("z", epsilon=1.0, random_state=1)
    layout, _rest = read_layout(str(path), "sha256") or (None, None)
    assert layout is not None
    last = layout.columns["k"][0][1] - 1  # the last byte of k's first chunk, flipped
    _overwrite(path, last, bytes([path.read_bytes()[last] ^ 1]))
    with pytest.raises(dpf.SourceChangedError):  # k: read by the filter
        derived.dp.mean("z", epsilon=1.0, random_state=1)
    assert p.dp.budget.epsilon_spent == 2.0


def _swap_labels(path: Path) -> None:
    """Swap the one-byte ``path_in_schema`` labels of x's and y's chunks in the footer (the
    same size): a reader still pairs chunks with the schema's leaves by position."""
    data = bytearray(path.read_bytes())
    start = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    footer = bytes(data[start:-8])
    for old, new in ((b"x", b"y"), (b"y", b"x")):
        marks = [i for i in range(len(footer)) if footer.startswith(b"\x19\x18\x01" + old, i)]
        assert marks
        for i in marks:
            data[start + i + 3] = new[0]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("replaced", [None, 55.5])  # neighbouring files
def test_chunk_labels_that_disagree_with_the_schema_hash_the_file_whole(tmp_path, replaced):
    """A footer whose chunks name other columns than the schema's leaves at their positions
    (the reader goes by position) gets no layout: the file is hashed whole, so a rewrite of
    x's real chunk is refused."""
    import polars as pl

    path = tmp_path / "people.parquet"
    _write(path, replaced, page_index=False)
    _swap_labels(path)
    x = _columns(replaced)["x"]
    assert np.allclose(pl.read_parquet(path)["x"].to_numpy(), x)  # Polars: by position
    assert read_layout(str(path), "sha256") is None
    p = _protect(path)
    p.dp.mean("x", epsilon=1.0, random_state=3)
    rewrite_double(path, x[5], x[5] + 0.25)
    with pytest.raises(dpf.SourceChangedError):
        p.dp.mean("x", epsilon=1.0, random_state=3)
    assert p.dp.budget.epsilon_spent == 1.0
