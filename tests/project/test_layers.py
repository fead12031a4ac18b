"""The package's import layers (docs/architecture.md, "Layers"): every import — at the top of a
module or inside a function — points to the same layer or one below, and no two modules import
each other, however indirectly. Read from the source (``ast``), nothing imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from ._layers import LAYERS, LOOSE, MODULES, PACKAGE, layer, parsed


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """Every dpframe module ``module`` imports (and the line), anywhere in its source."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(parsed(module)):
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


def test_only_the_listed_modules_are_loose():
    loose = {m for m, path in MODULES.items() if m and path.parent == PACKAGE} | {""}
    assert loose <= LOOSE, (f"loose modules at the top of dpframe/: {sorted(loose - LOOSE)}; "
                            "move them into their layer's package (docs/architecture.md)")


def test_every_module_has_a_layer():
    for module in MODULES:
        layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    upward = [f"line {line}: dpframe.{target} ({LAYERS[layer(target)][0]})"
              for target, line in _imports(module) if layer(target) > layer(module)]
    assert not upward, (f"dpframe.{module} ({LAYERS[layer(module)][0]}) imports upward: "
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


def test_the_check_sees_function_local_imports(tmp_path, monkeypatch):
    """An import inside a function is an import too: the walk covers it (on a probe module,
    since the package itself now imports dpframe modules at the top only)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dpframe.backends.dask import _partitions\n"
                     "    return _partitions\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "backends.probe", probe)
    assert "backends.dask._partitions" in {target for target, _ in _imports("backends.probe")}


# -- engine names: only dpframe/backends/ tells engines apart (issue 22) -------------------------
#: The distributed and SQL engines' libraries: imported only inside dpframe/backends/.
ENGINE_LIBRARIES = frozenset({"pyspark", "duckdb", "dask"})
#: The adapters' detectors: the question "which engine is this frame?" is the adapters' alone.
DETECTORS = frozenset({"is_spark_frame", "is_dask_frame", "is_duckdb_relation",
                       "is_pandas_frame", "is_polars_eager", "is_polars_lazy"})
#: Engine names as adapters log them; a comparison of an adapter's ``name``/``family`` (or of
#: anything called ``backend``/``engine``) with one of these is a branch on the engine. (An
#: adapter's ``results_in`` names the library result tables are built in, pandas or Polars:
#: the frames layer formats tables by it, which is no branch on the frame's engine.)
ENGINE_NAMES = frozenset({"pandas", "polars", "polars-lazy", "duckdb", "spark", "dask"})
_ENGINE_ATTRIBUTES = frozenset({"name", "family"})

#: Modules outside dpframe/backends/ allowed to tell engines apart, and why (keep it short).
ENGINE_NAME_EXCEPTIONS: dict[str, str] = {
    # the row-wise compilers, one per engine (each adapter names its own: Backend.rowwise);
    # each speaks its engine's own API
    # demo data built in the library the caller names (a constructor choice, not a branch
    # on a frame's engine)
    "datasets": "builds the demo data sets as pandas or Polars frames, as asked",
    "cli.main": "the demo command's --backend pandas|polars",
}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the import statements under ``if TYPE_CHECKING:`` (types for the checker,
    never imported when the code runs: allowed anywhere)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING", "typing.TYPE_CHECKING"):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt)
                       if isinstance(n, ast.Import | ast.ImportFrom))
    return out


def _engine_branches(source: str) -> Iterator[str]:
    """Where ``source`` imports an engine library, asks a detector, or compares an adapter's
    name or family (or a ``backend``/``engine`` value) with an engine name, or sniffs a module
    name. Allowed and not reported: imports under ``if TYPE_CHECKING:`` (never run), and
    pyarrow (file I/O and Arrow buffers: a base library, not an engine)."""
    tree = ast.parse(source)
    typing_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""]
            for name in names:
                if name.split(".")[0] in ENGINE_LIBRARIES:
                    yield f"line {node.lineno}: imports {name}"
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in DETECTORS:
                        yield f"line {node.lineno}: imports {alias.name}"
        elif isinstance(node, ast.Name | ast.Attribute):
            ident = node.id if isinstance(node, ast.Name) else node.attr
            if ident in DETECTORS:
                yield f"line {node.lineno}: asks {ident}"
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_engine(s) for s in sides) and any(_is_engine_valued(s) for s in sides):
                yield f"line {node.lineno}: compares {ast.unparse(node)}"
            elif any(_names_engine(s) for s in sides) and any(_is_module_name(s) for s in sides):
                yield f"line {node.lineno}: sniffs a module name: {ast.unparse(node)}"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "startswith" and any(_names_engine(a) for a in node.args)):
            yield f"line {node.lineno}: sniffs a module name: {ast.unparse(node)}"


def _names_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in ENGINE_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_engine(e) for e in node.elts)
    return False


def _is_engine_valued(node: ast.expr) -> bool:
    """An adapter's ``name``/``family``, or a value called ``backend``/``engine``/``family``
    (``family == "polars"`` is a branch on the engine whatever holds the family)."""
    if isinstance(node, ast.Attribute):
        return node.attr in _ENGINE_ATTRIBUTES or "backend" in node.attr or node.attr in (
            "engine", "family", "result_family")
    if isinstance(node, ast.Name):
        return "backend" in node.id or node.id in ("engine", "family", "result_family")
    return False


def _is_module_name(node: ast.expr) -> bool:
    """A class's or object's module name (``type(x).__module__``, a name holding one, or a part
    of it): comparing it with an engine's name tells engines apart by sniffing."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__module__" or _is_module_name(node.value)
    if isinstance(node, ast.Name):
        return "module" in node.id
    if isinstance(node, ast.Subscript):
        return _is_module_name(node.value)
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and _is_module_name(node.func.value)
    return False


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not (
    m == "backends" or m.startswith("backends."))))
def test_no_engine_branch_outside_backends(module):
    """No engine name outside ``dpframe/backends/``: what differs between engines is an
    adapter's method or attribute (docs/architecture.md, "Layers")."""
    found = list(_engine_branches(MODULES[module].read_text(encoding="utf-8")))
    if module in ENGINE_NAME_EXCEPTIONS:
        assert found, f"dpframe.{module} no longer branches on the engine: drop its exception"
        return
    assert not found, (f"dpframe.{module} tells engines apart outside dpframe/backends/: "
                       + "; ".join(found))


def test_the_engine_branch_check_finds_branches():
    """The check sees each kind of branch (on a snippet, not the package)."""
    snippet = ("import dask.dataframe\nfrom dpframe.backends import is_spark_frame\n"
               "x = backend.family == 'pandas'\ny = b.name in ('duckdb', 'spark')\n"
               "z = backend == 'dask'\nw = family == 'polars'\n"
               "v = type(t).__module__.startswith('pandas')\n"
               "u = type(t).__module__.split('.')[0] == 'polars'\n"
               "module = type(t).__module__\nr = module.partition('.')[0] in ('polars',)\n")
    assert len(list(_engine_branches(snippet))) == 9
    allowed = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import duckdb\n"
               "import pyarrow.parquet as pq\n")
    assert not list(_engine_branches(allowed))
    assert not list(_engine_branches("x = backend.lazy\ny = mech.name == 'bounded'\n"))


# -- private by name: a package's _-prefixed modules are its own ------------------------------
#: Cross-package imports of a private module left on purpose, and why (keep it short).
PRIVATE_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("backends._base", "engine._aggregation"):
        "tests monkeypatch dpframe.engine._aggregation.aggregate; the adapter's call must see it",
    ("backends.dask._adapter", "engine._aggregation"):
        "the same: each partition's aggregate is the patched one",
}


def _private(parts: list[str]) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def _private_imports(module: str, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Where ``module`` imports, from another top-level package of dpframe, a ``_``-prefixed
    module or name (``from dpframe.release._pipeline import run``, ``from dpframe.release
    import _pipeline``, ``from dpframe.release.x import _name``). A top-level package or module
    whose own name starts with ``_`` (``_util``, ``_validation``) is dpframe's, not a package's
    private part; imports inside a package are its own business."""
    own = module.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level:
            parts = (node.module or "").split(".")
            if parts[0] != "dpframe" or len(parts) < 2 or parts[1] == own:
                continue
            for alias in node.names:
                if _private([*parts[2:], alias.name]):
                    yield ".".join([*parts[1:], alias.name]), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "dpframe" and len(parts) > 2 and parts[1] != own and _private(
                        parts[2:]):
                    yield ".".join(parts[1:]), node.lineno


def test_no_private_import_across_packages():
    """A package uses another through the names its ``__init__.py`` exports, never through
    that package's ``_``-prefixed modules or names (only the listed exceptions)."""
    found = {(m, t): line for m in MODULES for t, line in _private_imports(m, parsed(m))}
    new = [f"dpframe.{m} line {line}: {t}" for (m, t), line in sorted(found.items())
           if (m, t) not in PRIVATE_IMPORT_EXCEPTIONS]
    assert not new, ("imports of another package's private modules or names (export the name "
                     "from its __init__.py and import it from there): " + "; ".join(new))
    stale = set(PRIVATE_IMPORT_EXCEPTIONS) - set(found)
    assert not stale, f"exceptions no longer needed (drop them): {sorted(stale)}"


def test_the_private_import_check_finds_them():
    snippet = ("from dpframe.release._pipeline import run\nfrom dpframe.release import _pipeline\n"
               "from dpframe.engine.x import _name\nimport dpframe.query._keys\n"
               "from dpframe.frames._own import fine\nfrom dpframe._util.identity import ok\n"
               "from dpframe.release import run\n")
    assert [t for t, _ in _private_imports("frames.probe", ast.parse(snippet))] == [
        "release._pipeline.run", "release._pipeline", "engine.x._name", "query._keys"]
