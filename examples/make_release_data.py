"""Generate the input of ``examples/release_spec.toml``: a synthetic census as Parquet files.

    python examples/make_release_data.py [--rows 200000] [--files 4] [--out DIR]

Writes ``DIR/census-0.parquet`` ... (default ``DIR``: ``release_data`` next to this script,
where the example spec looks) from :func:`dpframe.datasets.census` (columns age, sex, region,
education, hours_worked, income; see docs/datasets.md). Offline and deterministic given the
seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dpframe.datasets import census


def make_release_data(out: Path, rows: int = 200_000, files: int = 4, seed: int = 0) -> list[Path]:
    """Write ``rows`` census rows split over ``files`` Parquet files in ``out``; return them."""
    out.mkdir(parents=True, exist_ok=True)
    frame = census(rows, seed=seed, backend="polars")
    step = -(-rows // files)
    paths = []
    for i in range(files):
        path = out / f"census-{i}.parquet"
        frame.slice(i * step, step).write_parquet(path)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "release_data")
    args = parser.parse_args(argv)
    paths = make_release_data(args.out, args.rows, args.files, args.seed)
    print(f"wrote {args.rows:,} rows to {len(paths)} files in {args.out}")


if __name__ == "__main__":
    main()
