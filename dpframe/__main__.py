"""Command line: ``python -m dpframe demo`` runs a differentially private release end to end.

The demo generates a synthetic census table (:mod:`dpframe.datasets`), protects it with a
privacy budget, releases count / mean / variance statistics (one budget-split
``frame.dp.release`` call and a few single queries, one of them on a filtered frame whose size
is private), prints the released table and the accounting log, writes the table to Parquet
with the log in the file's metadata, and reads the log back from the file. No network access.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main", "run_demo"]

# Share of the total epsilon spent by each step of the demo; 10 % is left unspent on purpose,
# to show the remaining budget.
_RELEASE_SHARE = 0.5
_TRUNCATED_SHARE = 0.1
_FILTERED_SHARE = 0.2
_VARIANCE_SHARE = 0.1

_LOG_COLUMNS = (
    "release_id",
    "query",
    "columns",
    "epsilon",
    "delta",
    "epsilon_overhead",
    "mechanism",
    "sensitivity",
    "scale",
    "size",
    "clamped",
    "random_source",
    "engine",
)


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"need at least 2 rows, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _delta(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (0 <= value < 1):
        raise argparse.ArgumentTypeError(f"delta must be in [0, 1), got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m dpframe`` argument parser."""
    from dpframe import __version__

    parser = argparse.ArgumentParser(
        prog="python -m dpframe",
        description="dpframe: differentially private statistics from pandas and Polars frames.",
        epilog="Run 'python -m dpframe demo --help' for the demo's options.",
    )
    parser.add_argument("--version", action="version", version=f"dpframe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    description = (
        textwrap.fill(
            "Generate a synthetic census-like table (age, sex, region, education, hours_worked, "
            "income; see docs/datasets.md), protect it with a privacy budget of EPSILON (and "
            "DELTA), and release differentially private statistics: one frame.dp.release() call "
            "that splits half of EPSILON across count / mean / variance queries, then single "
            "queries (a truncated-Laplace mean, a mean over the employed only, whose row count is "
            "private, and a variance), leaving 10% of EPSILON unspent.",
            width=78,
        )
        + "\n\n"
        + textwrap.fill(
            "Prints the released table, the remaining budget and the accounting log, writes the "
            "released table to PATH as Parquet with the log in the file's metadata, and reads the "
            "log back from the file with dpf.read_log(PATH). Works offline.",
            width=78,
        )
    )
    demo = sub.add_parser(
        "demo",
        help="protect a synthetic census table and publish a DP release to Parquet",
        description=description,
        epilog=(
            "examples:\n"
            "  python -m dpframe demo\n"
            "  python -m dpframe demo --rows 100000 --epsilon 0.5 --output /tmp/release.parquet"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--rows",
        type=_positive_int,
        default=1_000_000,
        metavar="N",
        help="number of rows (people) in the generated census table; at least 2 "
        "(default: %(default)s)",
    )
    demo.add_argument(
        "--epsilon",
        type=_positive_float,
        default=1.0,
        metavar="E",
        help="total privacy budget epsilon of the protected table, split across the releases "
        "(smaller = more private, noisier; default: %(default)s)",
    )
    demo.add_argument(
        "--delta",
        type=_delta,
        default=1e-6,
        metavar="D",
        help="total privacy budget delta; the bounded Laplace mechanism on an interval spends "
        "some delta (default: %(default)s)",
    )
    demo.add_argument(
        "--output",
        type=Path,
        default=Path("release.parquet"),
        metavar="PATH",
        help="Parquet file to write the released table to (overwritten); the accounting log "
        "is stored in its metadata (default: %(default)s)",
    )
    demo.add_argument(
        "--seed",
        type=_seed,
        default=0,
        metavar="S",
        help="seed of the synthetic data; the data are deterministic given S and N "
        "(default: %(default)s)",
    )
    demo.add_argument(
        "--noise-seed",
        type=_seed,
        default=None,
        metavar="S",
        help="seed the noise for a reproducible run (tests and teaching only: NOT private); "
        "by default noise comes from the operating system's secure random source",
    )
    return parser


def _print_section(title: str, out: Any) -> None:
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)), file=out)


def _log_view(log: Any) -> Any:
    """The most telling columns of the log frame (all of them if the names differ)."""
    keep = [c for c in _LOG_COLUMNS if c in log.columns]
    return log[keep] if len(keep) >= 4 else log


def run_demo(
    rows: int = 1_000_000,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    output: str | Path = "release.parquet",
    seed: int = 0,
    noise_seed: int | None = None,
    out: Any = None,
) -> dict[str, Any]:
    """Run the demo; print to ``out`` (default stdout) and return what it released.

    Returns a dict with the released ``table`` (pandas), the single query results, the
    ``log`` frame, the ``log_from_file`` read back from ``output`` and the final ``budget``.
    """
    import pandas as pd

    import dpframe as dpf
    from dpframe.datasets import CENSUS_BOUNDS, census

    out = sys.stdout if out is None else out
    output = Path(output)
    extra: dict[str, Any] = {} if noise_seed is None else {"random_state": noise_seed}
    t0 = time.perf_counter()

    _print_section("1. data", out)
    df = census(rows, seed=seed)
    print(
        f"Synthetic census table: {len(df):,} rows, columns {', '.join(df.columns)} "
        f"(seed {seed}, {time.perf_counter() - t0:.1f} s).",
        file=out,
    )
    bounds = {col: (float(lo), float(hi)) for col, (lo, hi) in CENSUS_BOUNDS.items()}
    print("Public bounds (declared, not read from the data; values outside are clamped):", file=out)
    for col, (lo, hi) in bounds.items():
        print(f"  {col:<13} [{lo:,.0f}, {hi:,.0f}]", file=out)

    _print_section("2. protect", out)
    pf = dpf.protect(df, epsilon=epsilon, delta=delta, bounds=bounds)
    print(f"dpf.protect(df, epsilon={epsilon:g}, delta={delta:g}, bounds=...)", file=out)
    print(f"Budget: {pf.dp.budget}", file=out)
    if noise_seed is not None:
        print(f"Noise seeded with {noise_seed}: reproducible, NOT private.", file=out)

    _print_section("3. release: one call, epsilon split across queries", out)
    eps_release = epsilon * _RELEASE_SHARE
    queries = {
        "n": dpf.count(),
        "mean_age": dpf.mean("age"),
        "mean_hours": dpf.mean("hours_worked"),
        "mean_income": dpf.mean("income"),
        "var_income": dpf.variance("income"),
    }
    table = pf.dp.release(queries, epsilon=eps_release, **extra)
    print(f"pf.dp.release({{{', '.join(queries)}}}, epsilon={eps_release:g}):", file=out)
    with pd.option_context("display.width", 120, "display.max_columns", 20):
        print(table.to_string(index=False), file=out)

    _print_section("4. single queries", out)
    eps_trunc = epsilon * _TRUNCATED_SHARE
    mean_income_trunc = pf.dp.mean("income", epsilon=eps_trunc, mechanism="truncated", **extra)
    print(
        f"pf.dp.mean('income', epsilon={eps_trunc:g}, mechanism='truncated')"
        f"  -> {mean_income_trunc:,.2f}",
        file=out,
    )
    eps_filtered = epsilon * _FILTERED_SHARE
    employed = pf[pf.hours_worked > 0]
    mean_income_employed = employed.dp.mean("income", epsilon=eps_filtered, **extra)
    print(
        f"pf[pf.hours_worked > 0].dp.mean('income', epsilon={eps_filtered:g})"
        f"  -> {mean_income_employed:,.2f}",
        file=out,
    )
    print("  (a filtered frame has a private size: noisy sum / noisy count)", file=out)
    eps_var = epsilon * _VARIANCE_SHARE
    var_age = pf.dp.variance("age", epsilon=eps_var, **extra)
    print(f"pf.dp.variance('age', epsilon={eps_var:g})  -> {var_age:,.2f}", file=out)

    # For comparison only: the exact statistics of the clamped synthetic data. A real release
    # never prints these; here the data are synthetic, and the gap shows the noise.
    clamped = {col: df[col].clip(lo, hi) for col, (lo, hi) in bounds.items()}
    working = df["hours_worked"] > 0
    exact = {
        "n": float(len(df)),
        "mean_age": float(clamped["age"].mean()),
        "mean_hours": float(clamped["hours_worked"].mean()),
        "mean_income": float(clamped["income"].mean()),
        "var_income": float(clamped["income"].var()),
        "mean_income_employed": float(clamped["income"][working].mean()),
        "var_age": float(clamped["age"].var()),
    }
    released = {str(k): float(table[k].iloc[0]) for k in queries}
    released.update(mean_income_employed=float(mean_income_employed), var_age=float(var_age))
    _print_section("5. released vs exact (exact shown only because the data are synthetic)", out)
    for name, value in released.items():
        true = exact[name]
        rel = abs(value - true) / abs(true) if true else float("nan")
        print(
            f"  {name:<22} released {value:>18,.2f}   exact {true:>18,.2f}   rel. error {rel:.2e}",
            file=out,
        )

    _print_section("6. budget and accounting log", out)
    budget = pf.dp.budget
    print(f"Budget: {budget}", file=out)
    log = pf.dp.log
    with pd.option_context(
        "display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40
    ):
        print(_log_view(log).to_string(index=False), file=out)

    _print_section("7. write Parquet with the log inside, read the log back", out)
    output.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(output)
    print(f"table.to_parquet({str(output)!r})", file=out)
    log_from_file = dpf.read_log(output)
    print(f"dpf.read_log({str(output)!r}): {len(log_from_file)} entries", file=out)
    with pd.option_context(
        "display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40
    ):
        print(_log_view(log_from_file).to_string(index=False), file=out)
    print(f"\nDone in {time.perf_counter() - t0:.1f} s. Released file: {output}", file=out)
    return {
        "table": table,
        "mean_income_truncated": mean_income_trunc,
        "mean_income_employed": mean_income_employed,
        "var_age": var_age,
        "log": log,
        "log_from_file": log_from_file,
        "budget": budget,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dpframe`` and the ``dpframe`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from dpframe.errors import DPFrameError

    try:
        run_demo(
            rows=args.rows,
            epsilon=args.epsilon,
            delta=args.delta,
            output=args.output,
            seed=args.seed,
            noise_seed=args.noise_seed,
        )
    except DPFrameError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
