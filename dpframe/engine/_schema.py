"""A frame's schema (column name → narwhals dtype, from the schema only: no data is read)
and its engine's name for the log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import narwhals.stable.v2 as nw

from dpframe._util.identity import IdentityMap
from dpframe.engine._row_expressions import is_numeric
from dpframe.errors import UnsupportedInputError

__all__ = ["engine_dtypes", "engine_name", "frame_columns", "remember_schema", "validate_column"]


_NAMES_LOCK = threading.Lock()
_ENGINE_NAMES: dict[type, str] = {}


def engine_name(native: Any) -> str:
    """The engine and its version for the log (``"pandas 3.1.1"``, ``"polars-lazy 2.1.0"``);
    computed once per frame type."""
    with _NAMES_LOCK:
        cached = _ENGINE_NAMES.get(type(native))
    if cached is not None:
        return cached
    obj = nw.from_native(native)
    impl = obj.implementation
    name = str(impl.name).lower()
    if isinstance(obj, nw.LazyFrame):
        name += "-lazy"
    try:
        version = ".".join(str(v) for v in impl._backend_version())
    except Exception:  # pragma: no cover - narwhals internals vary
        version = ""
    name = f"{name} {version}".strip()
    with _NAMES_LOCK:
        _ENGINE_NAMES[type(native)] = name
    return name


#: Schemas of frames whose schema cannot change (private snapshots, immutable plans), so a
#: release does not convert a wide frame's schema again on every query.
_SCHEMAS: IdentityMap[dict[str, Any]] = IdentityMap()


def frame_columns(native: Any, *, immutable: bool = False) -> dict[str, Any]:
    """Column name → narwhals dtype, from the schema only (no data is read). ``immutable``:
    the caller knows ``native``'s schema can never change (dpframe's private snapshot of an
    in-memory frame, a lazy plan); it is then converted once and remembered."""
    if immutable:
        known = _SCHEMAS.get(native)
        if known is not None:
            return known
    obj = nw.from_native(native)
    schema = obj.collect_schema() if isinstance(obj, nw.LazyFrame) else obj.schema
    out = _object_columns_as_object(obj, dict(schema.items()))
    if immutable:
        _SCHEMAS.set(native, out)
    return out


def _object_columns_as_object(obj: Any, columns: dict[str, Any]) -> dict[str, Any]:
    """``columns`` with every column whose native dtype is numpy's ``object`` as
    ``nw.Object``. narwhals reports such a column of a pandas frame as ``String`` when pandas'
    ``infer_dtype`` finds strings in its first 100 values, so the dtype -- and with it whether
    a query is refused -- would depend on the data (two data sets differing in row 0, ``'a'``
    or ``7``, were answered and refused). From the dtype alone, an object column is
    ``Object``; cast it to ``str`` before protect to use it as a string column. (Eager frames
    whose native ``dtypes`` is a mapping; other frames' dtypes say nothing of values.)"""
    import numpy as np

    dtypes = getattr(obj.to_native(), "dtypes", None) if isinstance(obj, nw.DataFrame) else None
    items = getattr(dtypes, "items", None)
    if items is None:
        return columns
    for name, dtype in items():
        if isinstance(dtype, np.dtype) and dtype.kind == "O" and columns.get(name) != nw.Object:
            columns[name] = nw.Object
    return columns


#: The engine's own dtypes (its backend's ``schema``) of the frames :func:`remember_schema`
#: was given: frames whose schema cannot change, as in ``_SCHEMAS``.
_DTYPES: IdentityMap[dict[str, Any]] = IdentityMap()


def remember_schema(native: Any, read_dtypes: Callable[[Any], Mapping[str, Any]], *,
                    parent: Any = None, added: Mapping[str, tuple[Any, Any]] | None = None
                    ) -> bool:
    """Read the schema of ``native`` -- dpframe's private object of a verified frame, whose
    schema can never change -- once, when dpframe takes hold of it (at protect, at a
    derivation), and remember it: column → narwhals dtype (:func:`frame_columns`) and column →
    the engine's own dtype (``read_dtypes``: its backend's schema reader). The first release
    on the frame then plans from what was read here instead of converting the schema again.
    Names and dtypes only, the same reads a release would make.

    With ``parent`` (the private object ``native`` was derived from by a verified step that
    keeps every column of ``parent`` as it is and appends the columns ``added``: name → its
    narwhals dtype and its engine's dtype, the step's verified output dtype), nothing is read:
    the schema remembered is ``parent``'s plus those columns (:func:`_remember_extended`).
    Returns whether a schema is remembered for ``native``."""
    if parent is not None:
        return _remember_extended(native, parent, added or {})
    frame_columns(native, immutable=True)
    if _DTYPES.get(native) is None:
        _DTYPES.set(native, dict(read_dtypes(native)))
    return True


def _remember_extended(native: Any, parent: Any, added: Mapping[str, tuple[Any, Any]]) -> bool:
    """:func:`remember_schema` of a frame derived from ``parent`` by appending ``added``:
    ``parent``'s remembered schemas plus the added columns, without reading ``native``'s
    schema. Public facts only (names and dtypes: the parent's, read when dpframe took hold of
    it, and the verified step's). Done only when both of ``parent``'s schemas were remembered
    and no added name is already a column (a replaced column would keep its position and
    change its dtype): else nothing is remembered and the first release reads the schema as
    before."""
    columns, dtypes = _SCHEMAS.get(parent), _DTYPES.get(parent)
    if columns is None or dtypes is None or any(
            name in columns or name in dtypes for name in added):
        return False
    if _SCHEMAS.get(native) is None:
        _SCHEMAS.set(native, {**columns, **{name: d for name, (d, _) in added.items()}})
    if _DTYPES.get(native) is None:
        _DTYPES.set(native, {**dtypes, **{name: d for name, (_, d) in added.items()}})
    return True


def engine_dtypes(native: Any) -> dict[str, Any] | None:
    """The engine's own dtypes :func:`remember_schema` read for this very object, or None
    (never read: the caller asks its backend)."""
    return _DTYPES.get(native)


def validate_column(native: Any, column: str, *, numeric: bool = True,
                    columns: Mapping[str, Any] | None = None) -> Any:
    """Raise :class:`UnsupportedInputError` unless ``column`` exists (and is numeric); return
    its narwhals dtype. ``columns``: the schema if the caller already read it."""
    cols = frame_columns(native) if columns is None else columns
    if column not in cols:
        shown = ", ".join(map(repr, list(cols)[:20]))
        raise UnsupportedInputError(
            f"column {column!r} is not in the frame; available columns: {shown}"
        )
    if numeric and not is_numeric(cols[column]):
        raise UnsupportedInputError(
            f"column {column!r} has dtype {cols[column]}, not a numeric type; cast it to a "
            "number (e.g. frame.dp.with_columns(nw.col(...).cast(nw.Float64))) and declare "
            "its bounds"
        )
    return cols[column]
