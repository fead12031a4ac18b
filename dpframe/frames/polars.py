"""Registers ``DataFrame.dp`` and ``LazyFrame.dp`` for Polars (never ``Expr.dp``: another DP
library owns that name)."""

from __future__ import annotations

import polars as pl

from dpframe.frames.namespace import DPNamespace
from dpframe.frames.registration import register

__all__ = ["PolarsDP", "PolarsLazyDP"]


class PolarsDP(DPNamespace[pl.DataFrame, pl.DataFrame]):
    """``polars.DataFrame.dp`` — see :class:`dpframe.frames.namespace.DPNamespace`."""


class PolarsLazyDP(DPNamespace[pl.LazyFrame, pl.DataFrame]):
    """``polars.LazyFrame.dp``: aggregates are pushed into the lazy plan; only they are
    collected."""


register(pl.DataFrame, "dp", PolarsDP, pl.api.register_dataframe_namespace)
register(pl.LazyFrame, "dp", PolarsLazyDP, pl.api.register_lazyframe_namespace)
