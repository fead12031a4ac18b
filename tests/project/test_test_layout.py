"""Every module of dpframe has its test file, or tests/README.md names what covers it.

The rule, stated at the top of tests/README.md and implemented here exactly: a module
``dpframe/<dir>/<name>.py`` (``__init__.py`` excepted; ``<dir>`` may be empty or nested) is
covered when

1. a file ``tests/<dir>/test_<stem>.py`` or ``tests/<dir>/test_<stem>_<part>.py`` exists, where
   ``<stem>`` is ``<name>`` with or without its leading underscore; or
2. the row of tests/README.md's folder table for the module's package (the row whose first cell
   is the code span of the first folder below ``dpframe/``, such as `` `release/` ``; the row
   `` `tests/` `` for a top-level module) holds a code span equal to the module's path below
   that package, with or without ``.py`` (`` `_entries` `` in the `` `release/` `` row,
   `` `duckdb/_sql_expr.py` `` in the `` `backends/` `` row).

Pure file-system and text checks: no dpframe module is imported.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dpframe"
TESTS = ROOT / "tests"
README = TESTS / "README.md"

_CODE_SPAN = re.compile(r"`([^`]+)`")


def _modules() -> list[Path]:
    """Every module of dpframe below the package root, ``__init__.py`` excepted."""
    return sorted(
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    )


def _has_test_file(module: Path) -> bool:
    """Clause 1: ``tests/<dir>/test_<stem>.py`` or ``test_<stem>_<part>.py`` exists."""
    folder = TESTS / module.parent
    if not folder.is_dir():
        return False
    names = {path.name for path in folder.glob("test_*.py")}
    stems = {module.stem, module.stem.removeprefix("_")}
    return any(
        name == f"test_{stem}.py" or (name.startswith(f"test_{stem}_") and name.endswith(".py"))
        for stem in stems
        for name in names
    )


def _readme_rows() -> dict[str, set[str]]:
    """The folder table of tests/README.md: first cell's code span -> the row's code spans."""
    rows: dict[str, set[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = line.split("|")
        first = _CODE_SPAN.search(cells[1])
        if first is not None:
            rows[first.group(1)] = set(_CODE_SPAN.findall("|".join(cells[2:])))
    return rows


def _row_key_and_name(module: Path) -> tuple[str, str]:
    """The row the module belongs to and its path below that row's package."""
    if len(module.parts) == 1:
        return "tests/", module.as_posix()
    return f"{module.parts[0]}/", Path(*module.parts[1:]).as_posix()


def _named_in_readme(module: Path, rows: dict[str, set[str]]) -> bool:
    """Clause 2: the package's row names the module as a code span (``.py`` optional)."""
    key, name = _row_key_and_name(module)
    spans = rows.get(key, set())
    return name in spans or name.removesuffix(".py") in spans


def test_readme_states_the_rule() -> None:
    text = README.read_text(encoding="utf-8")
    assert "test_<stem>_<part>.py" in text, "tests/README.md must state the coverage rule"


def test_every_module_has_a_test_file_or_is_named_in_the_readme() -> None:
    rows = _readme_rows()
    assert "tests/" in rows and "release/" in rows, "tests/README.md's folder table not found"
    uncovered = [
        module.as_posix()
        for module in _modules()
        if not _has_test_file(module) and not _named_in_readme(module, rows)
    ]
    assert not uncovered, (
        "modules with neither a test file (tests/<dir>/test_<stem>[_<part>].py) nor a code span "
        f"in their package's row of tests/README.md: {uncovered}"
    )


def _names_a_module(span: str) -> bool:
    """A code span read as a module name: a ``.py`` path or a private name (``_entries``)."""
    if Path(span).name.startswith("test") or "*" in span:
        return False
    return span.endswith(".py") or re.fullmatch(r"_\w+", span) is not None


def test_every_module_named_in_the_readme_exists() -> None:
    """A code span naming a module that no longer exists in its row's package is stale."""
    rows = _readme_rows()
    known = set()
    for module in _modules():
        key, name = _row_key_and_name(module)
        known |= {(key, name), (key, name.removesuffix(".py"))}
    stale = [
        f"{key}{span}"
        for key, spans in rows.items()
        for span in spans
        if _names_a_module(span) and (key, span) not in known
    ]
    assert not stale, f"tests/README.md names modules that do not exist: {stale}"
