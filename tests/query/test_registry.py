"""The registry of statistics (:mod:`dpframe.query.registry`) is the one place a statistic is
known by name: every entry has its ``frame.dp`` method, the release spec's vocabulary is the
registry's, and no module outside ``dpframe/query/`` branches on a statistic's name — except
the few listed below, each with its reason. Read from the source (``ast``) and from class
attributes by name; no data is read."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpframe.frames.namespace import DPGroupBy, DPNamespace
from dpframe.query.registry import STATISTICS, StatisticArguments, spec_statistics
from dpframe.spec import _parse

PACKAGE = Path(__file__).resolve().parents[2] / "dpframe"
NAMES = frozenset(STATISTICS)

#: (module under dpframe/, statistic name) -> why that module still compares a value with the
#: name. A branch not listed fails the test; a listed one that is gone fails it too.
ALLOWED: dict[tuple[str, str], str] = {
    # "sum" here is an engine aggregate's kind (query/_aggregates.Agg: rows, sum, sum_sq, ...),
    # not the statistic: the engine and backends write one expression per aggregate kind
    ("engine/_kernel.py", "sum"): "Agg kind, not a statistic",
    ("engine/_row_expressions.py", "sum"): "Agg kind, not a statistic",
    ("backends/spark/_sql.py", "sum"): "Agg kind, not a statistic",
    # mechanisms/ sits below query/ (tests/project/test_layers.py) and cannot read the
    # registry: the composed intervals dispatch on the shape of the post-processing (the
    # names double as those shapes' names) and a count component's interval is integer
    ("mechanisms/intervals.py", "mean"): "post-processing shape of a composed interval",
    ("mechanisms/intervals.py", "variance"): "post-processing shape of a composed interval",
    ("mechanisms/intervals.py", "std"): "post-processing shape of a composed interval",
    ("mechanisms/intervals.py", "proportions"): "post-processing shape of a composed interval",
    ("mechanisms/intervals.py", "count"): "a count component's interval is integer",
    ("mechanisms/accuracy.py", "count"): "ROUNDED: counts' half-widths are rounded "
                                         "(mechanisms/ is below the registry)",
    ("mechanisms/accuracy.py", "count_units"): "ROUNDED (as above)",
    # accounting/ sits below query/ and reads names from written log records (text)
    ("accounting/_log_view.py", "histogram"): "a log record's name, as text",
    ("accounting/_log_view.py", "value_counts"): "a log record's query field, as text",
    ("accounting/_release_tables.py", "quantile"): "a log record's query field, as text",
    # the report draws a *written* file: the statistic names it reads are log records' text (a
    # file format, also of files written by earlier versions), which choose each chart
    **{("report/analysis.py", name): "a written log record's statistic name picks the chart"
       for name in ("corr", "count", "cov", "histogram", "proportions", "quantile",
                    "value_counts")},
    ("report/queries.py", "quantile"): "a written log record's statistic name (text)",
    # a std's accuracy target is met through its variance's (h²): the spec's planner asks for
    # the variance by name; the rule could move to query/_accuracy.SquareRoot
    ("spec/_plan.py", "std"): "a std's target is its variance's h²",
    # message text: how each spec word with parameters is written (not a branch)
    **{("spec/_statistics.py", name): "an example in a message (_EXAMPLES)"
       for name in ("histogram", "value_counts", "proportions", "cov", "corr")},
}


def _strings(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _strings(element)


def _branches(tree: ast.AST) -> Iterator[str]:
    """Statistic names compared with (``==``, ``in``, ...) or matched on, and module-level
    collections of two or more of them (a second vocabulary)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                yield from (s for s in _strings(side) if s in NAMES)
        elif isinstance(node, ast.MatchValue):
            yield from (s for s in _strings(node.value) if s in NAMES)
    for stmt in getattr(tree, "body", []):
        if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue  # the names a module exports
        value = stmt.value
        keys = value.keys if isinstance(value, ast.Dict) else [value]
        found = [s for k in keys if k is not None for s in _strings(k) if s in NAMES]
        if len(found) >= 2:
            yield from found


def _found() -> set[tuple[str, str]]:
    quoted = re.compile("[\"'](?:" + "|".join(map(re.escape, NAMES)) + ")[\"']")
    out = set()
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        if module.startswith("query/") or not quoted.search(text):
            continue  # parse only the modules that quote a name (a fraction of the tree)
        tree = ast.parse(text)
        out.update((module, name) for name in _branches(tree))
    return out


def test_no_branch_on_a_statistic_name_outside_query() -> None:
    found = _found()
    assert sorted(found - set(ALLOWED)) == [], "branch on a statistic name outside query/: " \
        "ask the registry (dpframe/query/registry.py) instead, or list it in ALLOWED"
    assert sorted(set(ALLOWED) - found) == [], "ALLOWED lists a branch that is gone"


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_every_registered_statistic_has_its_dp_methods(name: str) -> None:
    entry = STATISTICS[name]
    assert callable(getattr(DPNamespace, entry.method, None)), f"frame.dp.{entry.method}"
    if entry.grouped:
        assert callable(getattr(DPGroupBy, entry.method, None)), \
            f"frame.dp.groupby(...).{entry.method}"


def test_the_spec_vocabulary_is_the_registry() -> None:
    words = tuple(e.name for e in spec_statistics())
    assert words == _parse.KINDS
    assert {e.name: e.parameters for e in spec_statistics()} == _parse.SPEC_PARAMETERS
    args = StatisticArguments(column="x", columns=("x", "y"), bins=4, keys=("a", "b"))
    for entry in spec_statistics():
        assert entry.build is not None
        assert entry.build(args).kind in (entry.name, "cov", "corr", "quantile")  # (a median)
