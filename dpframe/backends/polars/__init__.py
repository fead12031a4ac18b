"""The Polars engine, DataFrame and LazyFrame: its adapter
(:mod:`~dpframe.backends.polars._adapter`: ``PolarsBackend``, ``PolarsLazyBackend``, the
detectors). Not for users; the registry in :mod:`dpframe.backends` names it."""
