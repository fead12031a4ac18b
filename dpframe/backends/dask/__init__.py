"""The Dask engine: its adapter (:mod:`~dpframe.backends.dask._adapter`: ``DaskBackend``,
``is_dask_frame``) and its sums path per partition (:mod:`~dpframe.backends.dask._partitions`).
Not for users; the registry in :mod:`dpframe.backends` names it."""
