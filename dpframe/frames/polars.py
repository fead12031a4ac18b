"""Registers ``DataFrame.dp`` and ``LazyFrame.dp`` for Polars (never ``Expr.dp``: another DP
library owns that name)."""

from __future__ import annotations

import warnings

import polars as pl

from dpframe.frames.namespace import DPNamespace

__all__ = ["PolarsDP", "PolarsLazyDP"]


class PolarsDP(DPNamespace):
    """``polars.DataFrame.dp`` — see :class:`dpframe.frames.namespace.DPNamespace`."""


class PolarsLazyDP(DPNamespace):
    """``polars.LazyFrame.dp``: aggregates are pushed into the lazy plan; only they are
    collected."""


with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    pl.api.register_dataframe_namespace("dp")(PolarsDP)
    pl.api.register_lazyframe_namespace("dp")(PolarsLazyDP)
