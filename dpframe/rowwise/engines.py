"""Where each engine's verified derivations run: the compiler interface every engine implements.

A verified step (:class:`dpframe.provenance._derivations.Step`) is applied to a native frame by the
compiler of the frame's engine, never by running the expressions the user wrote. Each compiler
lives in its engine's folder and its adapter names it (``Backend.rowwise``):

=============  ==============================================================================
engine         how a step runs
=============  ==============================================================================
Polars         Polars expressions dpframe builds (:mod:`dpframe.backends.polars._rowwise`: the
               reference every other compiler is tested against)
pandas         in Polars, on the columns read (:mod:`dpframe.backends.pandas._rowwise`)
Dask           the pandas evaluation, partition by partition (``map_partitions``)
DuckDB         SQL text with guards and ``TRY`` (:mod:`dpframe.backends.duckdb._rowwise`)
Spark          SQL text valid with ANSI on or off (:mod:`dpframe.backends.spark._rowwise`)
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

__all__ = ["RowwiseTarget", "SQLTarget", "apply_steps"]


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


class SQLTarget(RowwiseTarget):
    """An SQL engine's compiler module (``SUPPORTED``, ``check``, ``apply_step``), imported when
    first used (it imports its engine): ``module`` is its full dotted name
    (:mod:`dpframe.backends.duckdb._rowwise`, :mod:`dpframe.backends.spark._rowwise`)."""

    def __init__(self, module: str, label: str) -> None:
        self.module, self.label = module, label

    def _compiler(self) -> Any:
        import importlib

        return importlib.import_module(self.module)

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


def apply_steps(native: Any, steps: Sequence[Any], target: RowwiseTarget,
                schema: Any = None) -> Any:
    """``native`` with the verified ``steps`` applied by its engine's compiler ``target``.
    ``schema``: the Polars schema of ``native`` as verified (pandas and Dask; read from the
    frame if None)."""
    for step in steps:
        native = target.apply(native, step, schema)
        schema = None  # changed by the step: read again from the result if needed
    return native
