"""The shared parameter texts of the ``.dp`` methods: one source, every method's docstring
complete (``help()`` and IDEs show each parameter in full)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dpframe as dpf
from dpframe.frames import parameters
from dpframe.frames.groupby import DPGroupBy
from dpframe.frames.namespace import DPNamespace
from dpframe.frames.parameters import (
    COMMON,
    entries,
    missing_parameters,
    shared_parameters,
    with_parameters,
)

FRAMES = Path(dpf.__file__).parent / "frames"


def _public_methods() -> Iterator[tuple[str, Callable[..., Any]]]:
    for cls in (DPNamespace, DPGroupBy):  # with the methods DPNamespace inherits from its parts
        for name in dir(cls):
            member = getattr(cls, name)
            if not name.startswith("_") and inspect.isfunction(member):
                yield f"{cls.__name__}.{name}", member
    yield "dp", dpf.dp


PUBLIC = dict(_public_methods())


def test_every_public_method_lists_each_of_its_parameters():
    missing = {name: missing_parameters(f) for name, f in PUBLIC.items()}
    assert {n: m for n, m in missing.items() if m} == {}
    assert len(PUBLIC) > 40  # both classes and dp() were found


def test_a_documented_parameter_has_a_description_in_help():
    doc = inspect.getdoc(DPGroupBy.mean) or ""
    assert COMMON["mechanism"] in doc and COMMON["random_state"] in doc
    assert "Examples\n--------\n>>> import pandas as pd, dpframe as dpf" in doc


def test_a_shared_text_is_written_once_in_the_source():
    """The largest shared entry appears in the frames/ sources only where it is defined."""
    needle = "the smaller worst-case error from public facts"
    hits = {p.name: p.read_text(encoding="utf-8").count(needle) for p in FRAMES.glob("*.py")}
    assert {n: c for n, c in hits.items() if c} == {"parameters.py": 1}


def test_the_sections_come_in_signature_order_with_own_entries_first():
    def f(column: str, *, epsilon: float, extra: int = 0) -> None:
        """Summary.

        Parameters
        ----------
        extra : int
            Its own text.
        column : str
            Overrides the shared one.

        Returns
        -------
        None
        """

    doc = with_parameters(f.__doc__, ["column", "epsilon", "extra"], [COMMON])
    names = re.findall(r"^(\w+) : ", doc, flags=re.M)
    assert names == ["column", "epsilon", "extra"]
    assert "Overrides the shared one." in doc and "A column with declared bounds." not in doc
    assert doc.index("Parameters") < doc.index("Returns")
    assert doc.startswith("Summary.\n\nParameters\n----------\ncolumn : str\n")


def test_a_section_is_added_before_the_first_section_and_unknown_names_are_reported():
    @shared_parameters(entries("""
    q : float
        A level.
    """))
    def g(q: float, *, epsilon: float, mystery: int = 0) -> None:
        """Summary line.

        Examples
        --------
        >>> 1
        1
        """

    doc = inspect.getdoc(g) or ""
    assert doc.index("q : float") < doc.index("epsilon : float") < doc.index("Examples")
    assert missing_parameters(g) == ["mystery"]


def test_variadic_parameters_are_named_with_their_star():
    assert parameters.parameter_names(DPNamespace.filter) == ["*predicates"]
    assert "*predicates\n    narwhals expressions" in (inspect.getdoc(DPNamespace.filter) or "")


@pytest.mark.parametrize("text", ["", "Only a summary."])
def test_a_docstring_without_sections_gets_one_at_the_end(text):
    doc = with_parameters(text, ["epsilon"], [COMMON])
    assert doc.rstrip().endswith(COMMON["epsilon"])
