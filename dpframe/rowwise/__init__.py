"""Row-wise expressions: read from a Polars plan, verified, and compiled for each engine.

:mod:`~dpframe.rowwise.nodes` holds the tree, :mod:`~dpframe.rowwise.reading` reads and verifies
it, :mod:`~dpframe.rowwise.functions` is the catalogue with each function's total meaning,
:mod:`~dpframe.rowwise.calendar` the calendar facts every compiler shares, and
:mod:`~dpframe.rowwise.engines` the interface each engine's compiler implements; the compilers
themselves live in their engine's folder (``dpframe/backends/<engine>/_rowwise.py``) so that no
value can make them fail.
"""
