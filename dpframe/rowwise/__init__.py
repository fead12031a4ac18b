"""Row-wise expressions: read from a Polars plan, verified, and compiled for each engine.

:mod:`~dpframe.rowwise.nodes` holds the tree, :mod:`~dpframe.rowwise.reading` reads and verifies
it, :mod:`~dpframe.rowwise.functions` is the catalogue with each function's total meaning, and
one module per engine compiles the tree so that no value can make it fail.
"""
