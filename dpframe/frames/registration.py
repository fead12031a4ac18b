"""Register the ``.dp`` namespace on a frame class, warning only on a real clash."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["register"]


def register(cls: type, name: str, namespace: type, registrar: Callable[[str], Any]) -> None:
    """Register ``namespace`` as ``cls.<name>`` with the library's own ``registrar``.

    Re-registering dpframe's own namespace (a module reload) is silent; if another library
    already owns ``cls.<name>``, dpframe warns (naming it) and takes the name, so the clash is
    visible instead of hidden.
    """
    existing = getattr(cls, name, None)
    owner = getattr(existing, "_accessor", None) or getattr(existing, "_ns", None) or existing
    ours = isinstance(owner, type) and owner.__module__.startswith("dpframe.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the library's own warning; ours below
        registrar(name)(namespace)
    if existing is not None and not ours:
        warnings.warn(
            f"dpframe replaced an existing {cls.__module__}.{cls.__name__}.{name} attribute "
            f"({existing!r}); the other library's '{name}' namespace is no longer reachable",
            UserWarning, stacklevel=3,
        )
