"""The package's import layers (docs/architecture.md, "Layers"): every import — at the top of a
module or inside a function — points to the same layer or one below, and no two modules import
each other, however indirectly. Read from the source (``ast``), nothing imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dpframe"

#: Bottom first. A module belongs to the first entry naming it or a package holding it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("errors", "_validation", "identity", "logentries", "log_schema", "keyset",
                    "datasets", "polars_plan", "memory", "safety_net", "forking")),
    ("mechanisms and accounting", ("mechanisms", "analyses", "audit", "accounting", "durable",
                                   "integrity", "io", "exports")),
    ("query", ("aggregates", "queries", "measurement_kinds")),
    ("row-wise semantics", ("rowwise",)),
    ("backends", ("backends", "bounding", "tick_keys", "sources")),
    ("engine", ("row_expressions", "engine_dask", "engine_spark", "engine", "key_observation")),
    ("provenance", ("derivations", "provenance", "units")),
    ("release", ("release", "planner")),
    ("surface", ("frames", "spec", "spec_plan", "spec_run", "steward", "report", "__main__",
                 "")),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    for i, (_name, members) in enumerate(LAYERS):
        for member in members:
            if module == member or (member and module.startswith(member + ".")):
                return i
    raise AssertionError(f"dpframe.{module} is in no layer of tests/test_layers.py: place it")


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """Every dpframe module ``module`` imports (and the line), anywhere in its source."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").split(".")[0] == "dpframe":
                target = (node.module or "").partition(".")[2]
            else:
                continue
            subs = [f"{target}.{a.name}".lstrip(".") for a in node.names]
            found = [s for s in subs if s in MODULES]
            for name in found or [target]:
                if name in MODULES and name != module:
                    yield name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dpframe":
                    name = alias.name.partition(".")[2]
                    if name in MODULES and name != module:
                        yield name, node.lineno


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    upward = [f"line {line}: dpframe.{target} ({LAYERS[_layer(target)][0]})"
              for target, line in _imports(module) if _layer(target) > _layer(module)]
    assert not upward, (f"dpframe.{module} ({LAYERS[_layer(module)][0]}) imports upward: "
                        + "; ".join(upward))


def test_no_import_cycles():
    graph = {m: {t for t, _ in _imports(m)} for m in MODULES}
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> None:
        if node in path:
            cycle = [*path[path.index(node):], node]
            raise AssertionError("import cycle: " + " -> ".join(f"dpframe.{m}" for m in cycle))
        if node in done:
            return
        path.append(node)
        for target in sorted(graph[node]):
            visit(target)
        path.pop()
        done.add(node)

    for module in sorted(graph):
        visit(module)


def test_the_check_sees_function_local_imports():
    """Much of the package imports inside functions (heavy libraries load only when used); the
    walk covers those too: the engine calls the Dask path through one."""
    top_level = {node.module for node in ast.parse(
        MODULES["engine"].read_text(encoding="utf-8")).body if isinstance(node, ast.ImportFrom)}
    assert "dpframe.engine_dask" not in top_level
    assert "engine_dask" in {target for target, _ in _imports("engine")}
