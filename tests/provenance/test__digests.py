"""The content check's hash (``dpframe.provenance._digests``): BLAKE3 when the optional
``blake3`` package imports, else SHA-256, chosen once at import and recorded on each binding
(``FileContent.algorithm``), which is always re-hashed with its own algorithm. With either
algorithm a same-size rewrite (modification time put back) is refused with nothing spent, an
unchanged file is answered, and neighbouring files (one row's value replaced) meet the same
outcomes, their exact sums within the logged sensitivity."""

from __future__ import annotations

import hashlib
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpframe as dpf
from dpframe.provenance import _binding, _digests
from dpframe.release._pipeline import exact_measurements
from tests.helpers.file_rewrites import rewrite_double

ALGORITHMS = ["sha256", "blake3"]


def _values(replaced: float | None) -> np.ndarray:
    x = np.random.default_rng(11).uniform(10.0, 99.0, 60).round(6)
    if replaced is not None:
        x[7] = replaced  # a neighbour: one row's value replaced
    return x


def _write(path: Path, x: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": x}), path, compression="none", use_dictionary=False,
                   write_statistics=False)


def _needs(algorithm: str) -> None:
    if algorithm == "blake3":
        pytest.importorskip("blake3")


def test_sha256_is_the_fallback_when_blake3_does_not_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "blake3", None)  # (makes `import blake3` fail)
    assert _digests.fastest_available() == "sha256"


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_file_hashed_whole_has_the_algorithms_own_digest(tmp_path, monkeypatch, algorithm):
    _needs(algorithm)
    path = tmp_path / "people.csv"
    path.write_bytes(b"x\n" + b"12.5\n" * 3000)
    monkeypatch.setattr(_digests, "DIGEST", algorithm)
    bound = _binding.bind_file(str(path))
    assert bound is not None and bound.layout is None and bound.algorithm == algorithm
    if algorithm == "blake3":
        import blake3

        expected = blake3.blake3(path.read_bytes()).digest()
    else:
        expected = hashlib.sha256(path.read_bytes()).digest()
    assert bound.digests[None] == expected
    size = path.stat().st_size
    assert _digests.ranges_digest(str(path), [(0, size + 1)], algorithm) is None  # truncated


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_either_algorithm_refuses_a_same_size_rewrite_on_neighbouring_files(
        tmp_path, monkeypatch, algorithm):
    """The binding made with ``algorithm`` (SHA-256 forced, or BLAKE3) keeps it when the
    default changes afterwards: the unchanged file is still answered (a digest of another
    algorithm would differ), the rewritten one refused, on both neighbouring files alike."""
    import polars as pl

    _needs(algorithm)
    other = "blake3" if algorithm == "sha256" else "sha256"
    outcomes, exact = [], []
    for replaced in (None, 55.5):
        path = tmp_path / f"people-{replaced}.parquet"
        x = _values(replaced)
        _write(path, x)
        monkeypatch.setattr(_digests, "DIGEST", algorithm)
        p = dpf.protect(pl.scan_parquet(path), epsilon=10.0, bounds={"x": (0.0, 100.0)},
                        missing=0.0)
        monkeypatch.setattr(_digests, "DIGEST", other)  # the default changes; not the binding
        bound = dpf.provenance.resolve(p).dataset.source.digests[str(path)]
        assert bound.algorithm == algorithm and bound.layout is not None
        p.dp.sum("x", epsilon=1.0, random_state=1)  # the unchanged file is answered
        exact.append(exact_measurements(p, {"s": dpf.sum("x")}))
        rewrite_double(path, x[5], x[5] + 0.25)
        with pytest.raises(dpf.SourceChangedError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p.dp.sum("x", epsilon=1.0, random_state=1)
        outcomes.append((p.dp.budget.epsilon_spent, len(p.dp.log)))
    assert outcomes[0] == outcomes[1] == (1.0, 1)
    for key, (values, sensitivity) in exact[0].items():
        other_values, other_sensitivity = exact[1][key]
        assert sensitivity == other_sensitivity
        assert np.all(np.abs(values - other_values) <= sensitivity)
