"""The Polars engine, DataFrame and LazyFrame, everything that speaks its API: the adapters
(:mod:`~dpframe.backends.polars._adapter`: ``PolarsBackend``, ``PolarsLazyBackend``, the
detectors), the row-wise compiler (:mod:`~dpframe.backends.polars._rowwise`, dpframe's reference
semantics), its buffers (:mod:`~dpframe.backends.polars._memory`) and a spec's input reader
(:mod:`~dpframe.backends.polars._file_input`). Not for users; the registry in
:mod:`dpframe.backends` names it."""
