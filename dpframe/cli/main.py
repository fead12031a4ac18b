"""Command line: ``python -m dpframe demo`` runs a differentially private release end to end.

The demo generates a synthetic census table (:mod:`dpframe.datasets`), protects it with a
privacy budget (pandas, or a Polars ``LazyFrame`` in a ``dpf.Session``), answers a few single
queries (a truncated-Laplace mean, a mean on a filtered frame whose size is private, a
variance), a group-by over public keys, and one budget-split ``frame.dp.release`` of count /
mean / variance statistics; it prints the released tables, the budget and the accounting log,
writes the released table to Parquet with the log in the file's metadata, and reads the log
back from the file with ``dpf.read_log``. No network access.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dpframe as dpf
from dpframe import __version__
from dpframe.cli.inspect import add_parser as _add_inspect
from dpframe.cli.inspect import run as _run_inspect
from dpframe.cli.report import add_parser as _add_report
from dpframe.cli.report import run as _run_report
from dpframe.datasets import CENSUS_BOUNDS, CENSUS_KEYS, census
from dpframe.errors import DPFrameError, ParameterError
from dpframe.spec import add_release_parser, release_command

__all__ = ["build_parser", "main", "run_demo"]

# Share of the total epsilon spent by each step of the demo; 10 % is left unspent on purpose,
# to show the remaining budget. The final one-call release asks for half of delta (charged
# only where "auto" keeps the bounded mechanism, which uses it).
_SHARES = {
    "truncated_mean": 0.1,
    "filtered_mean": 0.1,
    "variance": 0.1,
    "groupby": 0.2,
    "release": 0.4,
}
_RELEASE_DELTA_SHARE = 0.5

# Columns of the log shown on screen (the file and pf.dp.log hold more).
_LOG_COLUMNS = (
    "release_id",
    "name",
    "query",
    "part",
    "columns",
    "group_by",
    "epsilon",
    "delta",
    "mechanism",
    "sensitivity",
    "scale",
    "size",
    "clamping",
    "random_source",
)
_FILE_LOG_COLUMNS = ("release_id", "name", "part", "epsilon", "delta", "mechanism", "time")


def _parse(text: str, kind: type, what: str) -> float:
    try:
        return kind(text.replace("_", "") if kind is int else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = int(_parse(text, int, "a whole number"))
    if value < 2:
        raise argparse.ArgumentTypeError(f"need at least 2 rows, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = _parse(text, float, "a number")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _delta(text: str) -> float:
    value = _parse(text, float, "a number")
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
    demo.add_argument(
        "--backend",
        choices=("pandas", "polars"),
        default="pandas",
        help="protect a pandas DataFrame, or a Polars LazyFrame inside a dpf.Session "
        "(default: %(default)s)",
    )

    add_release_parser(sub)

    _add_inspect(sub)

    _add_report(sub)
    return parser


def _print_section(title: str, out: Any) -> None:
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)), file=out)


def _log_view(log: Any, columns: Sequence[str] = ()) -> Any:
    """The most telling columns of a pandas log frame, shortened for a terminal."""
    keep = [c for c in (columns or _LOG_COLUMNS) if c in log.columns]
    view = log[keep].copy() if len(keep) >= 4 else log.copy()
    for col in view.columns:
        if view[col].dtype == object or str(view[col].dtype) in ("str", "string"):
            view[col] = view[col].fillna("").astype(str)
    if "clamping" in view.columns:  # "values clamped to [l, u] in the engine; ..." -> "[l, u]"
        view["clamping"] = view["clamping"].str.extract(r"(\[[^\]]*\])", expand=False).fillna("-")
    return view


def _as_pandas(frame: Any) -> Any:
    """A pandas view of a (small) pandas or Polars frame, for printing."""
    return frame if hasattr(frame, "iloc") else frame.to_pandas()


def _demo_output(output: str | Path) -> Path:
    """The demo's output file, refused before anything is released if it is a folder."""

    path = Path(output)
    if path.name in ("", ".", "..") or path.is_dir():
        raise ParameterError(f"--output {str(path)!r} is a folder; name the Parquet file to "
                             f"write inside it (e.g. {str(path / 'release.parquet')!r})")
    return path


def run_demo(
    rows: int = 1_000_000,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    output: str | Path = "release.parquet",
    seed: int = 0,
    noise_seed: int | None = None,
    backend: str = "pandas",
    out: Any = None,
) -> dict[str, Any]:
    """Run the demo; print to ``out`` (default stdout) and return what it released.

    ``backend="pandas"`` protects a pandas ``DataFrame`` (the budget travels in the frame);
    ``"polars"`` protects a Polars ``LazyFrame`` inside a ``dpf.Session`` block.

    Returns a dict with the released ``table`` (one row; a frame of ``backend``), the
    ``by_region`` table, the single query results, the live ``log`` frame, the
    ``log_from_file`` read back from ``output`` (pandas) and the final ``budget``.
    """
    import pandas as pd


    if backend not in ("pandas", "polars"):
        raise ParameterError(f"backend must be 'pandas' or 'polars', got {backend!r}")
    polars = backend == "polars"
    out = sys.stdout if out is None else out
    output = _demo_output(output)
    seeded: dict[str, Any] = {} if noise_seed is None else {"random_state": noise_seed}
    eps = {step: epsilon * share for step, share in _SHARES.items()}

    def say(*lines: str) -> None:
        for line in lines:
            print(line, file=out)

    def show(frame: Any, max_rows: int = 40) -> None:
        with pd.option_context(
            "display.width", 200, "display.max_columns", 40, "display.max_colwidth", 32
        ):
            say(_as_pandas(frame).to_string(index=False, max_rows=max_rows))

    t0 = time.perf_counter()

    _print_section("1. data", out)
    df = census(rows, seed=seed, backend="polars" if polars else "pandas")
    say(
        f"Synthetic census table (dpframe.datasets.census, seed {seed}, {backend}): "
        f"{len(df):,} rows, columns {', '.join(df.columns)}; generated in "
        f"{time.perf_counter() - t0:.1f} s."
    )
    bounds = {col: (float(lo), float(hi)) for col, (lo, hi) in CENSUS_BOUNDS.items()}
    say("Public bounds (declared, not read from the data; values outside are clamped):")
    for col, (lo, hi) in bounds.items():
        values = df[col].to_numpy()
        outside = int(((values < lo) | (values > hi)).sum())
        interval = f"[{lo:,.0f}, {hi:,.0f}]"
        say(f"  {col:<13} {interval:<14} ({outside:,} rows outside)")
    say(f"Public keys: region {CENSUS_KEYS['region']}")

    _print_section("2. protect", out)
    # Polars frames carry no metadata: the budget lives in a Session, made current by `with`.
    session = dpf.Session() if polars else contextlib.nullcontext()
    with session:
        if polars:
            import polars as pl

            pf = dpf.protect(df.lazy(), epsilon=epsilon, delta=delta, bounds=bounds,
                             keys=CENSUS_KEYS, missing="lower")
            say(
                "with dpf.Session() as s:",
                f"    pf = dpf.protect(df.lazy(), epsilon={epsilon:g}, delta={delta:g}, "
                "bounds=CENSUS_BOUNDS, keys=CENSUS_KEYS, missing='lower')",
            )
        else:
            pf = dpf.protect(df, epsilon=epsilon, delta=delta, bounds=bounds, keys=CENSUS_KEYS,
                             missing="lower")
            say(
                f"pf = dpf.protect(df, epsilon={epsilon:g}, delta={delta:g}, "
                "bounds=CENSUS_BOUNDS, keys=CENSUS_KEYS, missing='lower')"
            )
        say("missing='lower': a missing value would count as its column's lower bound (a "
            "public fill), so every column keeps the public size n")
        say(f"pf.dp.budget: {pf.dp.budget}")
        if noise_seed is not None:
            say(f"Noise seeded with {noise_seed}: reproducible, NOT private.")

        _print_section("3. single queries", out)
        mean_income_trunc = pf.dp.mean(
            "income", epsilon=eps["truncated_mean"], mechanism="truncated", **seeded
        )
        say(
            f"pf.dp.mean('income', epsilon={eps['truncated_mean']:g}, mechanism='truncated')"
            f"  -> {mean_income_trunc:,.2f}"
        )
        if polars:
            employed = pf.filter(pl.col("hours_worked") > 0)
            spelled_filter = "pf.filter(pl.col('hours_worked') > 0)"
        else:
            import narwhals as nw

            employed = pf.dp.filter(nw.col("hours_worked") > 0)
            spelled_filter = "pf.dp.filter(nw.col('hours_worked') > 0)"
        mean_income_employed = employed.dp.mean("income", epsilon=eps["filtered_mean"], **seeded)
        say(
            f"{spelled_filter}.dp.mean('income', epsilon={eps['filtered_mean']:g})"
            f"  -> {mean_income_employed:,.2f}",
            "  (a filtered frame's size is private: noisy sum over noisy count)",
        )
        var_age = pf.dp.variance("age", epsilon=eps["variance"], **seeded)
        say(f"pf.dp.variance('age', epsilon={eps['variance']:g})  -> {var_age:,.2f}")

        _print_section("4. group-by over public keys (parallel composition)", out)
        by_region = pf.dp.groupby("region").release(
            {"n": dpf.count(), "mean_income": dpf.mean("income")},
            epsilon=eps["groupby"],
            **seeded,
        )
        say(
            "pf.dp.groupby('region').release({'n': dpf.count(), 'mean_income': "
            f"dpf.mean('income')}}, epsilon={eps['groupby']:g}):"
        )
        show(by_region)

        _print_section("5. release: one call, epsilon split across queries", out)
        spelled = {
            "n": "dpf.count()",
            "mean_age": "dpf.mean('age')",
            "mean_hours": "dpf.mean('hours_worked')",
            "mean_income": "dpf.mean('income')",
            "var_income": "dpf.variance('income')",
        }
        queries = {
            "n": dpf.count(),
            "mean_age": dpf.mean("age"),
            "mean_hours": dpf.mean("hours_worked"),
            "mean_income": dpf.mean("income"),
            "var_income": dpf.variance("income"),
        }
        delta_release = delta * _RELEASE_DELTA_SHARE
        table = pf.dp.release(queries, epsilon=eps["release"], delta=delta_release, **seeded)
        say("table = pf.dp.release(")
        say("    {")
        for k, v in spelled.items():
            say(f"        {k!r}: {v},")
        say("    },", f"    epsilon={eps['release']:g}, delta={delta_release:g},", ")")
        show(table)

        # For comparison only: the exact statistics of the clamped synthetic data. A real
        # release never prints these; here the data are synthetic, and the gap shows the noise.
        plain = _as_pandas(df)
        clamped = {col: plain[col].clip(lo, hi) for col, (lo, hi) in bounds.items()}
        working = plain["hours_worked"] > 0
        exact = {
            "n": float(len(plain)),
            "mean_age": float(clamped["age"].mean()),
            "mean_hours": float(clamped["hours_worked"].mean()),
            "mean_income": float(clamped["income"].mean()),
            "var_income": float(clamped["income"].var()),
            "mean_income_employed": float(clamped["income"][working].mean()),
            "var_age": float(clamped["age"].var()),
        }
        released = {name: float(_as_pandas(table)[name].iloc[0]) for name in queries}
        released["mean_income_employed"] = float(mean_income_employed)
        released["var_age"] = float(var_age)
        _print_section(
            "6. released vs exact (exact shown only because the data are synthetic)", out
        )
        say("  exact = the statistic of the clamped data, which the noise is calibrated to")
        for name, value in released.items():
            true = exact[name]
            rel = abs(value - true) / abs(true) if true else float("nan")
            say(
                f"  {name:<22} released {value:>18,.2f}   exact {true:>18,.2f}   "
                f"relative error {rel:.1e}"
            )

        _print_section("7. budget and accounting log", out)
        budget = pf.dp.budget
        say(f"pf.dp.budget: {budget}")
        log = pf.dp.log
        say(
            f"pf.dp.log: {len(log)} entries, one per noisy measurement (main columns; "
            "'clamping' shows the bounds values were clamped to):"
        )
        show(_log_view(_as_pandas(log)))

        _print_section("8. Parquet with the log inside", out)
        output.parent.mkdir(parents=True, exist_ok=True)
        if polars:
            table.dp.write_parquet(output)
            say(f"table.dp.write_parquet({str(output)!r})  # the log goes into the metadata")
        else:
            table.to_parquet(output)
            say(f"table.to_parquet({str(output)!r})  # the log is stored in the file's metadata")
    document = dpf.read_log(output)
    log_from_file = dpf.read_log(output, as_frame="pandas")
    file_budget = document["budget"]
    same = _log_view(log_from_file).equals(_log_view(_as_pandas(log)))
    say(
        f"dpf.read_log({str(output)!r}): the log travelled with the file.",
        f"  {len(log_from_file)} entries (the ledger's log as of this release; identical to "
        f"pf.dp.log: {same});",
        f"  budget recorded in the file: epsilon spent {file_budget['epsilon_spent']:g} of "
        f"{file_budget['epsilon']:g}, delta spent {file_budget['delta_spent']:g} of "
        f"{file_budget['delta']:g}.",
    )
    show(_log_view(log_from_file, _FILE_LOG_COLUMNS), max_rows=20)
    say(f"\nDone in {time.perf_counter() - t0:.1f} s. Released file: {output}")
    return {
        "table": table,
        "by_region": by_region,
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
    if args.command == "release":

        return release_command(args)
    if args.command == "inspect":

        try:
            return _run_inspect(args)
        except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed stream
            return 0
    if args.command == "report":

        return _run_report(args)

    try:
        run_demo(
            rows=args.rows,
            epsilon=args.epsilon,
            delta=args.delta,
            output=args.output,
            seed=args.seed,
            noise_seed=args.noise_seed,
            backend=args.backend,
        )
    except DPFrameError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
