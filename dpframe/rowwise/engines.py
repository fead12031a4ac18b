"""Where each engine's verified derivations run: one compiler per engine.

A verified step (:class:`dpframe.provenance._derivations.Step`) is applied to a native frame by the
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

:meth:`RowwiseTarget.check` refuses, before anything is read, a step using a function the frame's
engine cannot compute totally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpframe.errors import DerivationError
from dpframe.rowwise.functions import FUNCTIONS, INTERNAL
from dpframe.rowwise.nodes import Call, RowExpr, walk

__all__ = ["DASK", "DUCKDB", "PANDAS", "POLARS", "SPARK", "RowwiseTarget", "apply_steps"]


def _trees(step: Any) -> list[RowExpr]:
    return [step.predicate] if step.predicate is not None else [e for _, e in step.columns]


class RowwiseTarget:
    """One engine's compiler of verified steps: ``check`` refuses, before anything is read, a
    step using a function the engine cannot compute totally; ``apply`` applies one step to a
    native frame. Each backend adapter names its target (``Backend.rowwise``)."""

    #: the engine's name in messages
    label = "this engine"

    def check(self, steps: Sequence[Any]) -> None:
        """Every function of ``steps`` is one this engine computes totally (default: all)."""

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        raise NotImplementedError


class PolarsTarget(RowwiseTarget):
    """Polars eager frames and lazy plans (:mod:`~dpframe.rowwise.polars_target`)."""

    label = "Polars"

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        from dpframe.rowwise.polars_target import apply_step

        return apply_step(native, step.kind, step.predicate, step.columns)


class PandasTarget(RowwiseTarget):
    """pandas: in Polars, on the columns read (:mod:`~dpframe.rowwise.pandas_eval`)."""

    label = "pandas"

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        from dpframe.rowwise import pandas_eval

        return pandas_eval.apply_step(native, step.kind, step.predicate, step.columns,
                                      schema or _polars_schema(native))


class PartitionedPandasTarget(RowwiseTarget):
    """Dask: the pandas evaluation, partition by partition (``map_partitions``)."""

    label = "Dask"

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        from dpframe.rowwise import pandas_eval

        args = (step.kind, step.predicate, step.columns)
        frame_schema = schema or _polars_schema(native._meta)
        meta = pandas_eval.apply_step(native._meta, *args, frame_schema)
        return native.map_partitions(pandas_eval.apply_step, *args, frame_schema, meta=meta)


class SQLTarget(RowwiseTarget):
    """An SQL engine's compiler module (``SUPPORTED``, ``check``, ``apply_step``):
    :mod:`~dpframe.rowwise.duckdb_target`, :mod:`~dpframe.rowwise.spark_target`."""

    def __init__(self, module: str, label: str) -> None:
        self.module, self.label = module, label

    def _compiler(self) -> Any:
        import importlib

        return importlib.import_module(f"dpframe.rowwise.{self.module}")

    def check(self, steps: Sequence[Any]) -> None:
        target = self._compiler()
        for step in steps:
            for tree in _trees(step):
                for node in walk(tree):
                    if (isinstance(node, Call) and node.name not in target.SUPPORTED
                            and node.name not in INTERNAL):
                        api = FUNCTIONS[node.name].api
                        raise DerivationError(
                            f"{api} is not available in derivations on {self.label} (dpframe "
                            "cannot compute it there so that no value makes it fail); compute "
                            "it after the release, or use a Polars or pandas frame. Nothing was "
                            "read or spent."
                        )
                target.check(tree)

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        return self._compiler().apply_step(native, step.kind, step.predicate, step.columns)


POLARS = PolarsTarget()
PANDAS = PandasTarget()
DASK = PartitionedPandasTarget()
DUCKDB = SQLTarget("duckdb_target", "duckdb")
SPARK = SQLTarget("spark_target", "spark")


def apply_steps(native: Any, steps: Sequence[Any], target: RowwiseTarget,
                schema: Any = None) -> Any:
    """``native`` with the verified ``steps`` applied by its engine's compiler ``target``.
    ``schema``: the Polars schema of ``native`` as verified (pandas and Dask; read from the
    frame if None)."""
    for step in steps:
        native = target.apply(native, step, schema)
        schema = None  # changed by the step: read again from the result if needed
    return native


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
