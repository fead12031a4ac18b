"""``dpf.show(obj)``: a notebook view of a release table, a budget, or a planner table.

Release tables, logs and planner tables are the caller's own pandas or Polars frames (a
pandas subclass would not survive ordinary operations), so their own ``_repr_html_`` stays
theirs; ``dpf.show`` returns a :class:`View` that a notebook renders (``_repr_html_``) and a
script can save as a self-contained page (:meth:`View.save`). ``dpf.Estimate`` renders
itself.

What it takes:

* a release table (a frame carrying a release log): its values with their intervals, drawn on
  the declared bounds, with ε and mechanism per statistic, then the budget recorded in its log;
* a planner table (``frame.dp.accuracy(...)``): each query's half-width;
* a protected frame (or one derived from it) or a ``dpf.Session``: the budget, ε spent per
  release and per column;
* a log frame (``frame.dp.log``, ``dpf.read_log(path, as_frame=...)``): its measurements with
  the readable columns (release, statistic, mechanism, ε, scale, domain in the statistic's
  units) instead of all 35, and ε per release and per column;
* a ``dpf.Estimate``: the value with its interval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dpframe.accounting.ledger import Budget
from dpframe.accounting.seals import release_log_of
from dpframe.errors import DPFrameError, ParameterError
from dpframe.frames.results import Estimate
from dpframe.provenance import Session, resolve
from dpframe.report import views

__all__ = ["View", "columns_of_table", "page", "show"]


class View:
    """An HTML view: ``_repr_html_`` for notebooks, ``save(path)`` for a page."""

    def __init__(self, title: str, html: str) -> None:
        self.title = title
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"<dpframe view: {self.title} (render in a notebook, or .save('view.html'))>"

    def save(self, path: str | Path) -> Path:
        """Write the view as a self-contained HTML page (no network needed to open it)."""
        path = Path(path)
        path.write_text(page(self.title, self.html), encoding="utf-8")
        return path


def page(title: str, body: str) -> str:
    """A whole HTML document around ``body`` (no external resource)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{views.esc(title)}</title></head><body>{body}</body></html>\n")


def columns_of_table(table: Any) -> dict[str, list[Any]]:
    """A small result table as ``{column: values}`` (pandas, Polars or Arrow)."""
    if hasattr(table, "to_pydict"):  # Arrow
        return dict(table.to_pydict())
    if hasattr(table, "iloc"):  # pandas
        return {str(c): table[c].tolist() for c in table.columns}
    return dict(table.to_dict(as_series=False))  # Polars


def _labelled_index(table: Any) -> list[Any] | None:
    """A pandas table's row labels when they say what a row is (describe, cov: not a plain
    0..n-1 range)."""
    if not hasattr(table, "iloc") or isinstance(table.index, pd.RangeIndex):
        return None
    return [" / ".join(map(str, k)) if isinstance(k, tuple) else k for k in table.index]


def show(obj: object) -> View:
    """A view of ``obj`` (see the module docstring); ParameterError for anything else."""
    if isinstance(obj, Estimate):
        return View("estimate", views.estimate_html(obj))
    if isinstance(obj, Budget):
        return View("budget", views.wrap(views.budget_html({"budget": obj.as_dict()})))
    if isinstance(obj, Session):
        return View("budget", views.wrap(views.budget_html(obj.ledger.snapshot_document())))
    names = set(map(str, obj.columns)) if hasattr(obj, "columns") else set()
    if {"ledger_id", "release_id", "part", "mechanism", "domain_lower"} <= names:
        return View("log", views.wrap(views.log_html(columns_of_table(obj))))
    if {"name", "half_width", "alpha"} <= names:
        return View("planned accuracy", views.wrap(views.accuracy_html(columns_of_table(obj))))
    doc = release_log_of(obj) if hasattr(obj, "columns") else None
    if doc is not None:
        index = _labelled_index(obj)
        return View("release", views.wrap(
            views.release_html(columns_of_table(obj), doc, index=index),
            views.budget_html(doc)))
    try:
        ledger = resolve(obj).dataset.ledger
    except DPFrameError:
        raise ParameterError(
            "dpf.show takes a release table, a planner table (frame.dp.accuracy), a protected "
            f"frame, a dpf.Session, a dpf.Budget or a dpf.Estimate; got {type(obj).__name__}"
        ) from None
    return View("budget", views.wrap(views.budget_html(ledger.snapshot_document())))
