"""Where each engine's verified derivations run: one compiler per engine.

A verified step (:class:`dpframe.derivations.Step`) is applied to a native frame by the
compiler of the frame's engine, never by running the expressions the user wrote:

=============  ==============================================================================
engine         how a step runs
=============  ==============================================================================
Polars         :mod:`~dpframe.rowwise.polars_target` (eager frames and lazy plans)
pandas         in Polars, on the columns read (:mod:`~dpframe.rowwise.pandas_eval`)
Dask           the pandas evaluation, partition by partition (``map_partitions``)
DuckDB         SQL text with guards and ``TRY`` (:mod:`~dpframe.rowwise.duckdb_target`)
Spark          SQL text valid with ANSI on or off (:mod:`~dpframe.rowwise.spark_target`)
=============  ==============================================================================

:func:`check_engine` refuses, before anything is read, a step using a function the frame's
engine cannot compute totally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpframe.errors import DerivationError
from dpframe.rowwise.functions import FUNCTIONS, INTERNAL
from dpframe.rowwise.nodes import Call, RowExpr, walk

__all__ = ["apply_steps", "check_engine"]


def _trees(step: Any) -> list[RowExpr]:
    return [step.predicate] if step.predicate is not None else [e for _, e in step.columns]


def check_engine(steps: Sequence[Any], engine: str) -> None:
    """Refuse steps that ``engine`` (a backend name) cannot compute totally; reads no data."""
    target = _target(engine)
    if target is None:
        return
    for step in steps:
        for tree in _trees(step):
            for node in walk(tree):
                if (isinstance(node, Call) and node.name not in target.SUPPORTED
                        and node.name not in INTERNAL):
                    api = FUNCTIONS[node.name].api
                    raise DerivationError(
                        f"{api} is not available in derivations on {engine} (dpframe cannot "
                        "compute it there so that no value makes it fail); compute it after "
                        "the release, or use a Polars or pandas frame. Nothing was read or "
                        "spent."
                    )
            target.check(tree)


def _target(engine: str) -> Any:
    if engine == "duckdb":
        from dpframe.rowwise import duckdb_target

        return duckdb_target
    if engine == "spark":
        from dpframe.rowwise import spark_target

        return spark_target
    return None


def apply_steps(native: Any, steps: Sequence[Any], engine: str, schema: Any = None) -> Any:
    """``native`` with the verified ``steps`` applied by its engine's compiler. ``schema``: the
    Polars schema of ``native`` as verified (pandas and Dask; read from the frame if None)."""
    for step in steps:
        native = _apply_one(native, step, engine, schema)
        schema = None  # changed by the step: read again from the result if needed
    return native


def _apply_one(native: Any, step: Any, engine: str, schema: Any) -> Any:
    args = (step.kind, step.predicate, step.columns)
    if engine in ("polars", "polars-lazy"):
        from dpframe.rowwise.polars_target import apply_step

        return apply_step(native, *args)
    if engine in ("pandas", "dask"):
        from dpframe.rowwise import pandas_eval

        if engine == "pandas":
            return pandas_eval.apply_step(native, *args, schema or _polars_schema(native))
        frame_schema = schema or _polars_schema(native._meta)
        meta = pandas_eval.apply_step(native._meta, *args, frame_schema)
        return native.map_partitions(pandas_eval.apply_step, *args, frame_schema, meta=meta)
    target = _target(engine)
    assert target is not None, engine
    return target.apply_step(native, *args)


def _polars_schema(pandas_frame: Any) -> dict[str, Any]:
    from dpframe.rowwise.pandas_eval import polars_schema

    return polars_schema(pandas_frame)


def catalogue_markdown() -> str:
    """The table of operators and functions for ``docs/frames.md`` ("What each function
    computes"): what users write, what dpframe computes, and whether DuckDB and Spark compile
    it (every function runs on Polars, pandas and Dask). A test keeps the docs equal to it."""
    from dpframe.rowwise import duckdb_target, spark_target
    from dpframe.rowwise.functions import OPERATORS

    def mark(name: str, target: Any) -> str:
        if name not in target.SUPPORTED:
            return "—"
        partial = getattr(target, "PARTIAL", {}).get(name)
        return f"✓ ({partial})" if partial else "✓"

    lines = ["| what you write | what dpframe computes, in every engine | DuckDB | Spark |",
             "|---|---|---|---|"]
    for meaning in OPERATORS.values():
        symbol, _, rest = meaning.partition(":")
        lines.append(f"| {symbol.strip()} | {rest.strip() or 'as written'} | ✓ | ✓ |")
    group = None
    for name, spec in FUNCTIONS.items():
        if spec.group != group:
            group = spec.group
            lines.append(f"| **{group}** | | | |")
        literal = " (literal arguments)" if spec.literal_args else ""
        lines.append(f"| `{spec.api}` | {spec.meaning}{literal} | "
                     f"{mark(name, duckdb_target)} | {mark(name, spark_target)} |")
    return "\n".join(lines)
