"""The walk of one query, traced at run time (docs/architecture.md, "The walk of one query").

``frame.dp.mean`` is run under :func:`sys.setprofile`, which sees every call into a dpframe
function; each call from one package into another (and from one module of ``release/`` into
another) is recorded with its caller, in order. Three things are checked on that record:

* the walk goes **down through** provenance, the request checks, planning, the engine's read,
  the mechanism's draw and the log, each step entered from ``release/`` (the engine's read
  through the frame's adapter), in that order;
* **``release/`` is the only orchestrator**: no package below it calls into another package at
  the same or a higher layer (``LAYERS`` in tests/project/_layers.py) — except through a
  *callback passed down*: the function called is held by one of the caller's arguments (a
  function, a bound method, a ``functools.partial``, or an object whose class defines it, such
  as the frame's adapter). Each such site is listed in :data:`CALLBACKS` with its reason, and a
  callback not listed there fails too;
* the numbered arrows of ``docs/architecture.md``'s walk are calls of the record, in order.

The walk is traced on a pandas DataFrame (the numpy kernel), a Polars DataFrame and a Polars
LazyFrame (the engine's expression path). Each frame is released once before
the traced call (imports, column views), and the traced call asks for another ε so that it is
planned afresh.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import polars as pl
import pytest

import dpframe as dpf

from ._layers import layer

ROOT = Path(dpf.__file__).resolve().parent
DOC = ROOT.parent / "docs" / "architecture.md"

#: Callbacks passed down, by (calling package, argument holding the callee): the only calls
#: from a package below ``release/`` into one at the same or a higher layer.
CALLBACKS: dict[tuple[str, str], str] = {
    ("engine", "backend"): "the FrameEngine protocol: Backend.aggregate passes the frame's "
                           "adapter to engine.aggregate, which asks it for what differs between "
                           "engines (column views, row counts, collect, expressions)",
    ("query", "laplace"): "a measurement kind builds and draws its Laplace-family mechanism "
                          "through the factory release/_mechanisms.py passes it (LaplaceFactory)",
}


class Call(NamedTuple):
    caller: str  # module, relative to dpframe ("release._pipeline")
    caller_function: str
    callee: str
    callee_function: str
    via: str | None  # the caller's argument holding the callee, if any


def _module(code: types.CodeType) -> str | None:
    try:
        path = Path(code.co_filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    parts = list(path.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    return module.split(".")[0]


RELEASE = layer("release")


def _station(module: str) -> str:
    """A package, or a module of ``release/`` (whose modules are the walk's steps)."""
    return module if _package(module) == "release" else _package(module)


@functools.cache
def _codes_of_type(cls: type) -> frozenset[types.CodeType]:
    out = set()
    for klass in cls.__mro__:
        for value in vars(klass).values():
            if isinstance(value, property):
                value = value.fget
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            code = getattr(value, "__code__", None)
            if isinstance(code, types.CodeType):
                out.add(code)
    return frozenset(out)


def _holds(value: Any, code: types.CodeType) -> bool:
    """``value`` is, or carries, the function whose code is ``code``."""
    if isinstance(value, functools.partial):
        return _holds(value.func, code)
    if inspect.ismethod(value):
        value = value.__func__
    if getattr(value, "__code__", None) is code or getattr(value, "gi_code", None) is code:
        return True
    try:
        return code in _codes_of_type(type(value))
    except TypeError:
        return False


def _argument_holding(frame: types.FrameType | None, code: types.CodeType) -> str | None:
    """The name of ``frame``'s argument that holds ``code`` (a comprehension's: its enclosing
    function's)."""
    while frame is not None:
        co = frame.f_code
        n = co.co_argcount + co.co_kwonlyargcount
        n += bool(co.co_flags & inspect.CO_VARARGS) + bool(co.co_flags & inspect.CO_VARKEYWORDS)
        values = frame.f_locals
        for name in co.co_varnames[:n]:
            if name in values and _holds(values[name], code):
                return name
        if not co.co_name.startswith("<") or co.co_name == "<lambda>":
            return None
        frame = frame.f_back  # a comprehension: look at the function it is in
    return None


def _trace(run: Any) -> list[Call]:
    calls: list[Call] = []

    def profile(frame: types.FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame.f_code)
        if callee is None:
            return
        back = frame.f_back
        while back is not None and _module(back.f_code) is None:
            back = back.f_back  # a library between the two (its callback): the dpframe caller
        caller = None if back is None else _module(back.f_code)
        if caller is None or _station(caller) == _station(callee):
            return
        via = None
        if (layer(caller) < RELEASE and _package(callee) != _package(caller)
                and layer(callee) >= layer(caller)):
            via = _argument_holding(back, frame.f_code) or "?"
        calls.append(Call(caller, back.f_code.co_qualname, callee, frame.f_code.co_qualname,
                          via))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous)
    return calls


def _frame(kind: str) -> Any:
    data = pd.DataFrame({"income": [12.0, 30.0, 47.5, 81.0, 64.0]})
    native = data if kind == "pandas" else pl.DataFrame(data)
    if kind == "lazy":
        native = native.lazy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(native, epsilon=10.0, bounds={"income": (0, 100)}, missing="lower")
    return pf


@functools.cache
def _walk(kind: str) -> tuple[Call, ...]:
    pf = _frame(kind)
    pf.dp.mean("income", epsilon=0.25, random_state=7)  # imports, column views
    return tuple(_trace(lambda: pf.dp.mean("income", epsilon=0.5, random_state=7)))


KINDS = ["pandas", "polars", "lazy"]

#: The steps of the walk, in order: (callee module, callee function, the caller's station).
STEPS = [
    ("provenance._protect", "resolve", "release._pipeline"),
    ("release._request", "check_request", "release._pipeline"),
    ("release._planning", "_plan_all", "release._plan_cache"),
    ("engine._aggregation", "aggregate", "backends"),
    ("mechanisms.laplace", "_LaplaceFamily.sample", "query"),
    ("accounting.ledger", "Ledger.commit", "release._pipeline"),
]


def _first(calls: tuple[Call, ...], callee: str, function: str) -> int:
    for i, c in enumerate(calls):
        if c.callee == callee and c.callee_function == function:
            return i
    raise AssertionError(f"the walk never enters dpframe.{callee}.{function}")


@pytest.mark.parametrize("kind", KINDS)
def test_the_walk_goes_down_through_each_step(kind):
    calls = _walk(kind)
    assert calls[0].caller.startswith("frames") and calls[0].caller_function.startswith(
        "DPNamespace."), calls[0]
    order = [_first(calls, callee, function) for callee, function, _ in STEPS]
    assert order == sorted(order), [STEPS[i][:2] for i in sorted(range(len(order)),
                                                                  key=order.__getitem__)]
    for (_callee, function, station), i in zip(STEPS, order, strict=True):
        assert _station(calls[i].caller) == station, (function, calls[i])
    # the engine's read is asked of the frame's adapter, by release/
    read = calls[_first(calls, "backends._base", "Backend.aggregate")]
    assert _package(read.caller) == "release", read
    assert sum(c.callee_function == "aggregate" and c.callee == "engine._aggregation"
               for c in calls) == 1  # one read
    # the draw happens in the measurement's kind, which release/ asks
    kind_draw = next(c for c in calls[order[4]::-1] if c.callee_function.endswith(".draw"))
    assert _package(kind_draw.caller) == "release", kind_draw


@pytest.mark.parametrize("kind", KINDS)
def test_no_package_below_release_climbs(kind):
    climbs = [c for c in _walk(kind) if c.via is not None]
    unexplained = [c for c in climbs if (_package(c.caller), c.via) not in CALLBACKS]
    assert not unexplained, (
        "calls from below release/ into a package at the same or a higher layer, not through "
        "a callback passed down (move the call up into release/, or pass a callback down and "
        "list it in CALLBACKS with its reason): "
        + "; ".join(f"{c.caller}.{c.caller_function} -> {c.callee}.{c.callee_function}"
                    for c in unexplained))


def test_every_listed_callback_is_used():
    used = {(_package(c.caller), c.via) for kind in KINDS for c in _walk(kind) if c.via}
    assert set(CALLBACKS) <= used, f"callbacks no walk uses (drop them): {set(CALLBACKS) - used}"


def test_the_climb_check_sees_a_climb():
    """A call from below release/ up into it, not through an argument, is reported (on a probe:
    a function of dpframe/engine/ calling one of dpframe/release/ directly)."""
    def probe(path: str, source: str, **names: Any) -> Any:
        namespace = dict(names)
        exec(compile(source, str(ROOT / path), "exec"), namespace)
        return namespace["f"]

    up = probe("release/_probe.py", "def f(*args):\n    return None\n")
    direct = probe("engine/_probe.py", "def f():\n    return up()\n", up=up)
    passed = probe("engine/_probe.py", "def f(callback):\n    return callback()\n")
    assert [(c.caller, c.callee, c.via) for c in _trace(direct) if c.via] == [
        ("engine._probe", "release._probe", "?")]
    assert [c.via for c in _trace(lambda: passed(up)) if c.via] == ["callback"]


#: A numbered arrow of docs/architecture.md's walk: ``| n | from | to | function |``.
ARROW = re.compile(r"^\| *(\d+) *\| *`([\w./]+)` *\| *`([\w./]+)` *\| *`([\w.<>]+)` *\|",
                   re.MULTILINE)


def _doc_arrows() -> list[tuple[int, str, str, str]]:
    section = DOC.read_text(encoding="utf-8").split("## The walk of one query", 1)[1]
    section = section.split("\n## ", 1)[0]
    return [(int(n), a.strip("/").replace("/", "."), b.strip("/").replace("/", "."), f)
            for n, a, b, f in ARROW.findall(section)]


def test_the_documented_walk_is_the_traced_one():
    """Each numbered arrow of docs/architecture.md is a call of the pandas walk (from the named
    package or module to the named one, of the named function), in the order numbered."""
    arrows = _doc_arrows()
    assert [n for n, *_ in arrows] == list(range(1, len(arrows) + 1)) and len(arrows) >= 10
    calls = _walk("pandas")
    at = 0
    for n, source, target, function in arrows:
        for i in range(at, len(calls)):
            c = calls[i]
            if ((c.caller == source or _package(c.caller) == source)
                    and (c.callee == target or _package(c.callee) == target)
                    and c.callee_function == function):
                at = i + 1
                break
        else:
            raise AssertionError(f"arrow {n} ({source} -> {target}: {function}) is not a call "
                                 f"of the walk after arrow {n - 1}")
