"""The Dask engine, everything that speaks its API: the adapter
(:mod:`~dpframe.backends.dask._adapter`: ``DaskBackend``, ``is_dask_frame``), its sums path per
partition (:mod:`~dpframe.backends.dask._partitions`), the row-wise compiler (the pandas one per
partition, :mod:`~dpframe.backends.dask._rowwise`) and a spec's input reader
(:mod:`~dpframe.backends.dask._file_input`). Not for users; the registry in
:mod:`dpframe.backends` names it."""
