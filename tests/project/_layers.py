"""The package's modules and layers, read from the source: shared by the project tests that
check the layers (test_layers.py), the walk of one query (test_release_walk.py) and the
claims of docs/architecture.md (test_architecture_claims.py). Not a test file: test files do
not import each other (tests/README.md)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dpframe"

#: Bottom first, by package (docs/architecture.md, "Layers"): a module belongs to the first entry
#: naming it or a package holding it, so a new module in a package needs no line here. Loose
#: modules at the top of ``dpframe/`` are only the ones DESIGN §6 lists.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("errors", "_validation", "_typing", "_util", "datasets")),
    ("mechanisms and accounting", ("mechanisms", "accounting")),
    ("query", ("query",)),
    ("row-wise semantics", ("rowwise",)),
    ("engine", ("engine",)),
    ("backends", ("backends",)),
    ("provenance", ("provenance",)),
    ("release", ("release",)),
    ("views", ("report",)),
    ("surface", ("frames",)),
    # spec/ runs a spec through the public API (``import dpframe as dpf``, the root package,
    # which registers frames/): it shares the top layer with the commands
    ("spec and command line", ("spec", "cli", "__main__", "")),
]

#: The only modules loose at the top of ``dpframe/`` (DESIGN §6); everything else is in a package.
LOOSE = frozenset({"", "__main__", "errors", "_validation", "_typing", "datasets"})


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


@functools.cache
def parsed(module: str) -> ast.Module:
    """The parsed source of ``module`` (parsed once for every check)."""
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def layer(module: str) -> int:
    for i, (_name, members) in enumerate(LAYERS):
        for member in members:
            if module == member or (member and module.startswith(member + ".")):
                return i
    raise AssertionError(
        f"dpframe.{module} is in no layer of tests/project/_layers.py: place it")
