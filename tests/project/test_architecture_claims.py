"""The claims of docs/architecture.md that a program can check (its last section lists each claim
with the test that checks it): the layers table is the one tests/project/test_layers.py
enforces, every module and name the page mentions exists, no module is over 800 lines, every
package says its job, and the complexity limit holds for every module. Read from the source
(``ast``) and pyproject.toml; nothing of the package is imported."""

from __future__ import annotations

import ast
import functools
import re
import tomllib

from ._layers import LAYERS, MODULES, PACKAGE, parsed

DOC = PACKAGE.parent / "docs" / "architecture.md"
PYPROJECT = PACKAGE.parent / "pyproject.toml"
TOP_PACKAGES = frozenset(m for m, p in MODULES.items() if m and "." not in m
                         and p.name == "__init__.py")
#: Dotted names the page uses in prose that are no dpframe names (a parameter's attribute, a
#: plan's method as a reader writes it, the standard library).
INFORMAL = frozenset({"ctx.unit", "plan.finalize", "sys.setprofile", "dpf.show"})


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _current_text() -> str:
    """The page without the "before" column of "Where did X go" (paths that no longer exist,
    by design)."""
    text = _doc()
    head, _, rest = text.partition("### Where did X go")
    moved, sep, tail = rest.partition("\n## ")
    kept = [line.split("|")[2] if line.startswith("| ") and line.count("|") >= 4 else line
            for line in moved.splitlines()]
    return "\n".join([head, *kept, sep + tail])


def _top_level_names(tree: ast.Module) -> set[str]:
    """What a module defines or imports at its top (or under a top-level ``if``/``try``)."""
    names: set[str] = set()
    body = list(tree.body)
    for node in body:
        if isinstance(node, ast.If | ast.Try):
            body.extend([*node.body, *node.orelse])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@functools.cache
def _index() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]]]:
    """Names per module, per module stem, and attribute names per class, of every module."""
    modules: dict[str, set[str]] = {}
    stems: dict[str, set[str]] = {}
    classes: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = parsed(module)
        modules[module] = _top_level_names(tree)
        stems.setdefault(path.stem, set()).update(modules[module])
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, set()).update(_top_level_names(
                    ast.Module(body=node.body, type_ignores=[])))
    return modules, stems, classes


def _resolves(name: str) -> bool:
    """``name`` (``pkg.module.attr``, ``module_stem.attr`` or ``Class.member``) is a name of
    dpframe (read from the source: a module's top-level names, a class's members)."""
    modules, stems, classes = _index()
    parts = name.removeprefix("dpframe.").split(".")
    if parts[0] in TOP_PACKAGES:
        i = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in MODULES)
        rest = parts[i:]
        if not rest:
            return True
        if rest[0] not in modules[".".join(parts[:i])]:
            return False
        return len(rest) == 1 or rest[1] in classes.get(rest[0], {rest[1]})
    head, attr = parts[-2], parts[-1]
    return attr in stems.get(head, set()) or attr in classes.get(head, set())


def test_every_module_the_page_names_exists():
    files = {p.relative_to(PACKAGE).as_posix() for p in MODULES.values()}
    names = {p.rsplit("/", 1)[-1] for p in files} | {"py.typed"}
    missing = []
    for ref in re.findall(r"`([\w/.]+\.py)`", _current_text()):
        path = ref.removeprefix("dpframe/")
        known = ((PACKAGE.parent / ref).exists() or path in files
                 or any(f.endswith("/" + path) for f in files)) if "/" in ref else ref in names
        if not known:
            missing.append(ref)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_dotted_name_the_page_uses_exists():
    refs = set(re.findall(r"`((?:dpframe\.)?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`", _current_text()))
    unknown = sorted(r for r in refs - INFORMAL
                     if not r.endswith((".py", ".typed")) and not _resolves(r))
    assert not unknown, f"docs/architecture.md uses names dpframe does not have: {unknown}"


def test_the_layers_table_is_the_enforced_one():
    """The "Layers" table lists, top first, the packages of ``LAYERS``
    (tests/project/_layers.py)."""
    section = _doc().split("## Layers", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    documented = [set(re.findall(r"`(\w+)/`", row.split("|")[2])) for row in rows]
    enforced = [{m for m in members if m and (PACKAGE / m).is_dir()}
                for _name, members in reversed(LAYERS)]
    assert documented == enforced


def test_no_module_is_over_800_lines():
    long = {m: n for m, p in MODULES.items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert not long, f"modules over 800 lines (split them): {long}"


def test_every_package_says_its_job():
    silent = [m or "dpframe" for m, p in MODULES.items() if p.name == "__init__.py"
              and not ast.get_docstring(parsed(m))]
    assert not silent, f"packages whose __init__.py has no docstring: {silent}"


def test_the_complexity_limit_has_no_exemption_in_the_package():
    lint = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"] and lint["mccabe"]["max-complexity"] <= 15
    exempt = [path for path, codes in lint.get("per-file-ignores", {}).items()
              if path.startswith("dpframe") and "C901" in codes]
    assert not exempt, f"modules exempt from the complexity limit: {exempt}"
