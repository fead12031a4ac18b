"""Benchmark data: the census-like table of :mod:`dpframe.datasets` plus public group keys.

Each size is generated once (deterministically, seed 0) and cached as Parquet under
``benchmarks/.data/`` (gitignored), so every measurement process reads exactly the same
numbers, the Polars lazy scenarios can ``scan_parquet`` it, and the peer libraries (in their
own virtual environments) can load it too. The income column is also stored as ``.npy`` for
diffprivlib, whose environment has no Parquet reader.

Group-by keys: the census table has at most 7 keys per categorical column, so the group-by
scenarios use extra integer columns ``key10``, ``key1000`` and ``key100000`` drawn uniformly
from ``range(k)``; those ranges are the public keys.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

DEFAULT_DATA_DIR = Path(__file__).resolve().parent / ".data"
KEY_COUNTS: tuple[int, ...] = (10, 1000, 100_000)
SEED = 0

#: Public bounds used by every scenario (same as ``dpframe.datasets.CENSUS_BOUNDS``).
BOUNDS: dict[str, tuple[float, float]] = {
    "age": (16.0, 90.0),
    "hours_worked": (0.0, 80.0),
    "income": (0.0, 250_000.0),
}


def key_column(k: int) -> str:
    """Name of the integer key column with ``k`` public keys."""
    return f"key{k}"


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    return Path(override) if override is not None else DEFAULT_DATA_DIR


def parquet_path(rows: int, directory: Path) -> Path:
    return directory / f"census_{rows}_seed{SEED}.parquet"


def npy_path(rows: int, column: str, directory: Path) -> Path:
    return directory / f"census_{rows}_seed{SEED}_{column}.npy"


def census_bounds() -> dict[str, tuple[float, float]]:
    """The public bounds, from :mod:`dpframe.datasets` when it provides them."""
    try:
        from dpframe.datasets import CENSUS_BOUNDS
    except ImportError:  # pragma: no cover - the generator predates this harness
        return dict(BOUNDS)
    return {k: (float(v[0]), float(v[1])) for k, v in CENSUS_BOUNDS.items()}


def _generate(rows: int) -> object:
    """A Polars frame: census columns plus the key columns."""
    import polars as pl

    try:
        from dpframe.datasets import census

        df = census(rows, seed=SEED, backend="polars")
    except ImportError:  # pragma: no cover - fallback with the same numeric columns
        rng = np.random.default_rng(SEED)
        df = pl.DataFrame(
            {
                "age": rng.integers(16, 100, rows),
                "hours_worked": np.where(rng.random(rows) < 0.37, 0, rng.integers(1, 99, rows)),
                "income": np.round(rng.lognormal(10.3, 1.0, rows), 2),
            }
        )
    keys = {}
    for k in KEY_COUNTS:
        rng = np.random.default_rng([SEED, k])
        keys[key_column(k)] = rng.integers(0, k, rows, dtype=np.int64)
    return df.with_columns(pl.DataFrame(keys))


def ensure_dataset(rows: int, directory: Path) -> Path:
    """Generate and cache the table with ``rows`` rows; return its Parquet path."""
    path = parquet_path(rows, directory)
    npy = npy_path(rows, "income", directory)
    if path.exists() and npy.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    df = _generate(rows)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    df.write_parquet(tmp)  # type: ignore[attr-defined]
    os.replace(tmp, path)
    tmp_npy = npy.with_name(npy.name + f".tmp{os.getpid()}.npy")
    np.save(tmp_npy, df["income"].to_numpy())  # type: ignore[index]
    os.replace(tmp_npy, npy)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.data ROWS DIR``: generate one size (used in a subprocess)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    print(ensure_dataset(int(args[0]), Path(args[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
