"""The catalogue of row-wise functions is what docs/frames.md shows, and every function in it
compiles for Polars (and so for pandas and Dask, which evaluate in Polars)."""

from __future__ import annotations

from pathlib import Path

from dpframe.backends._catalogue import catalogue_markdown
from dpframe.backends.polars import _rowwise as polars_target
from dpframe.rowwise.functions import FUNCTIONS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "frames.md"


def test_the_docs_show_the_catalogue_as_generated():
    text = DOCS.read_text(encoding="utf-8")
    begin, end = "<!-- functions:begin -->\n", "\n<!-- functions:end -->"
    shown = text[text.index(begin) + len(begin):text.index(end)]
    assert shown == catalogue_markdown(), (
        "docs/frames.md is out of date: replace the table between the functions markers with "
        "dpframe.backends._catalogue.catalogue_markdown()")


def test_every_catalogued_function_compiles_for_polars():
    assert set(FUNCTIONS) == set(polars_target.SUPPORTED)
