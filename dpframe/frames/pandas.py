"""Registers ``DataFrame.dp`` for pandas (the logic lives in :mod:`.namespace`)."""

from __future__ import annotations

import warnings

import pandas as pd

from dpframe.frames.namespace import DPNamespace

__all__ = ["PandasDP"]


class PandasDP(DPNamespace):
    """``pandas.DataFrame.dp`` — see :class:`dpframe.frames.namespace.DPNamespace`."""


with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # re-registration on reload
    pd.api.extensions.register_dataframe_accessor("dp")(PandasDP)
