"""Unicode validity of in-memory strings, shared by the pandas, Dask and Polars adapters
(:meth:`dpframe.backends.Backend.invalid_text`)."""

from __future__ import annotations

from typing import Any

__all__ = ["invalid_pandas_column", "text_dtype", "valid_arrow"]


def text_dtype(dtype: Any) -> bool:
    return str(dtype) == "object" or "str" in str(dtype)


def invalid_pandas_column(column: Any) -> bool:
    """A pandas column holding a string that is not valid Unicode (object and Python-backed
    string columns: Python strings that do not encode; Arrow-backed strings: bytes that are
    not UTF-8)."""
    import pyarrow as pa

    if str(column.dtype) == "object" or getattr(column.dtype, "storage", None) == "python":
        try:
            for value in column.array:
                if isinstance(value, str):
                    value.encode("utf-8")
        except UnicodeError:
            return True
        return False
    if not text_dtype(column.dtype):
        return False
    try:
        array = pa.array(column, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return False  # (not Arrow-backed text: numpy-held, converted by pandas)
    return not valid_arrow(array)


def valid_arrow(array: Any) -> bool:
    import pyarrow as pa

    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True
