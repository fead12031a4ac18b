"""Registering the ``.dp`` namespace (``dpframe/frames/registration.py``): a free name is taken
silently, dpframe's own earlier registration is replaced silently (a module reload), and another
library's attribute of the same name is replaced with a warning naming it."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

from dpframe.frames.pandas import PandasDP
from dpframe.frames.registration import register


class _OtherLibraryNamespace:
    """Stands in for another library's ``.dp`` accessor."""


class _OurNamespace:
    """Stands in for the namespace being registered."""


def _registrar(cls: type) -> Callable[[str], Callable[[type], type]]:
    """A registrar like pandas' ``register_dataframe_accessor``: sets ``cls.<name>``."""

    def by_name(name: str) -> Callable[[type], type]:
        def decorate(namespace: type) -> type:
            setattr(cls, name, namespace)
            return namespace

        return decorate

    return by_name


def _frame_class(dp: Any = None) -> type:
    attributes = {} if dp is None else {"dp": dp}
    return type("Frame", (), attributes)


def test_a_free_name_is_taken_without_a_warning() -> None:
    frame = _frame_class()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register(frame, "dp", _OurNamespace, _registrar(frame))
    assert frame.dp is _OurNamespace


def test_replacing_dpframes_own_namespace_is_silent() -> None:
    frame = _frame_class(dp=PandasDP)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register(frame, "dp", _OurNamespace, _registrar(frame))
    assert frame.dp is _OurNamespace


def test_another_librarys_namespace_is_replaced_with_a_warning_naming_it() -> None:
    frame = _frame_class(dp=_OtherLibraryNamespace)
    with pytest.warns(UserWarning, match=r"replaced an existing .*Frame\.dp attribute"):
        register(frame, "dp", _OurNamespace, _registrar(frame))
    assert frame.dp is _OurNamespace
