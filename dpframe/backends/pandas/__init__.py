"""The pandas engine (NumPy, nullable and Arrow-backed dtypes): its adapter
(:mod:`~dpframe.backends.pandas._adapter`: ``PandasBackend``, ``is_pandas_frame``). Not for
users; the registry in :mod:`dpframe.backends` names it."""
