"""The pandas engine (NumPy, nullable and Arrow-backed dtypes), everything that speaks its API:
the adapter (:mod:`~dpframe.backends.pandas._adapter`: ``PandasBackend``, ``is_pandas_frame``),
the row-wise compiler (:mod:`~dpframe.backends.pandas._rowwise`: derivations in Polars, on the
columns read) and its buffers (:mod:`~dpframe.backends.pandas._memory`: sealed copies, buffer
ranges). Not for users; the registry in :mod:`dpframe.backends` names it."""
