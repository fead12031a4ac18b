"""The public API says its types: no parameter of a function or method exported by
``dpframe.__all__``, nor of the ``.dp`` namespace and its group-by, is annotated with ``Any``
(issue 32), except where the value is a JSON
document (a log document read back from a file holds JSON values of any kind)."""

from __future__ import annotations

import inspect

import dpframe as dpf
from dpframe.frames.groupby import DPGroupBy
from dpframe.frames.namespace import DPNamespace

#: (function, parameter) pairs whose value is a JSON document
JSON_DOCUMENTS = {("write_parquet", "document")}


def _public_callables() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for name in dpf.__all__:
        obj = getattr(dpf, name)
        if inspect.isfunction(obj):
            out.append((name, obj))
        elif inspect.isclass(obj) and obj.__module__.startswith("dpframe"):
            out += [(f"{name}.{k}", v) for k, v in vars(obj).items()
                    if inspect.isfunction(v) and (not k.startswith("_") or k == "__init__")]
    for cls in (DPNamespace, DPGroupBy):  # the ``.dp`` methods and ``.dp.groupby(...)``'s
        out += [(f"{cls.__name__}.{k}", v) for k, v in vars(cls).items()
                if inspect.isfunction(v) and not k.startswith("_")]
    return out


def test_no_public_parameter_is_typed_any():
    loose = []
    for name, func in _public_callables():
        for p in inspect.signature(func).parameters.values():  # type: ignore[arg-type]
            if "Any" in str(p.annotation) and (name, p.name) not in JSON_DOCUMENTS:
                loose.append(f"{name}({p.name}: {p.annotation})")
    assert not loose, loose
