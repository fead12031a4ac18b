"""Registers ``DataFrame.dp`` for pandas (the logic lives in :mod:`.namespace`)."""

from __future__ import annotations

import pandas as pd

from dpframe.frames.namespace import DPNamespace
from dpframe.frames.registration import register

__all__ = ["PandasDP"]


class PandasDP(DPNamespace[pd.DataFrame, pd.DataFrame]):
    """``pandas.DataFrame.dp`` — see :class:`dpframe.frames.namespace.DPNamespace`."""


register(pd.DataFrame, "dp", PandasDP, pd.api.extensions.register_dataframe_accessor)
