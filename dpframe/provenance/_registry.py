"""The registries of protected data in this process — the objects passed to protect, the
files lazy sources read, engine lineages and memory — which refuse to open a second budget
on data that already has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpframe._util.identity import IdentityMap
from dpframe._util.memory import LIVE_BUDGET, PROTECTED_MEMORY
from dpframe._util.polars_plan import plan_sources
from dpframe.backends import Backend, pandas_ranges
from dpframe.errors import LedgerError
from dpframe.provenance import _derivations as derivations
from dpframe.provenance._binding import _stat_all
from dpframe.provenance._datasets import Dataset, _registry_lock
from dpframe.provenance._verified import ATTRS_KEY, _Handle, _registered

#: objects passed to protect, while they live (a flag only: a value that referred to the data
#: set would keep its frames, hence the key itself, alive)
_originals: IdentityMap[bool] = IdentityMap()
#: (device, inode) of files protected lazy sources read (identities only, no data set)
_files: set[tuple[int, int]] = set()


#: names in the structure of protected engine frames that identify what they read (DuckDB's
#: registered objects and generated relation aliases: ``Backend.lineage``); a frame whose
#: structure names one of them derives from a protected frame
_lineages: set[str] = set()


def _lineage(frame: Any, backend: Backend) -> set[str]:
    return set(backend.lineage(frame))


def _engine_paths(frame: Any, backend: Backend) -> list[str]:
    """The files an engine frame reads, as far as the engine names them without reading."""
    listed = backend.bound_files(frame)
    return list(listed) if listed is not None else backend.source_paths(frame)


#: the memory of protected frames (the objects passed to protect, and dpframe's snapshots)
_memory = PROTECTED_MEMORY


def _refuse_live(frame: Any, backend: Backend) -> None:
    """Refuse to open a second budget on data that already has one in this process: a frame
    that is protected or derived from a protected one, the very object protected before (a
    re-run notebook cell), a Polars frame or plan over the buffers of a protected frame
    (``clone()``, ``lazy()``, ``select(pl.all())``), a lazy source (any engine) over files a
    protected frame already reads, or an engine frame whose structure names what a protected
    one reads (a DuckDB ``rel.project(...)``, ``filter``, ``order`` of a protected relation,
    or SQL over it: :meth:`DuckDBBackend.lineage`). Structure only: no value is compared."""
    if backend.carries_handle:
        # a live handle, or its notice after a pickle / Parquet round trip (a public fact)
        handle = frame.attrs.get(ATTRS_KEY)
        live = isinstance(handle, _Handle) or (
            isinstance(handle, Mapping) and "dpframe_handle" in handle)
    elif backend.readable_plans:
        live = _registered(frame) is not None or bool(derivations.plan_markers(frame))
    else:
        live = _registered(frame) is not None
    if _originals.get(frame) is not None:
        live = True
    if not live:
        live = _memory.overlaps(backend.buffer_ranges(frame))
    if not live:  # (an engine plan over in-memory pandas objects: Dask's from_pandas)
        live = _memory.overlaps(r for part in _memory_leaves(frame, backend)
                                for r in _pandas_ranges_of(part))
    if not live and backend.lazy:
        paths = plan_sources(frame)[0] if backend.readable_plans else _engine_paths(
            frame, backend)
        with _registry_lock:
            live = any(st[2:] in _files for st in _stat_all(paths).values() if st[0] >= 0)
    if not live:
        names = _lineage(frame, backend)
        with _registry_lock:
            live = not names.isdisjoint(_lineages)
    if live:
        raise LedgerError(LIVE_BUDGET)


def _remember_original(frame: Any, dataset: Dataset, data: Any) -> None:
    try:
        _originals.set(frame, True)
    except TypeError:  # pragma: no cover - every supported frame type is weak-referenceable
        return
    with _registry_lock:
        if dataset.source is not None:
            for st in dataset.source.files.values():
                if st[0] >= 0:
                    _files.add((st[2], st[3]))  # the file itself, whatever its name
        _lineages.update(_lineage(frame, dataset.backend))
        if data is not frame:
            _lineages.update(_lineage(data, dataset.backend))
    ranges_of = dataset.backend.buffer_ranges
    # the memory of the object protected (what copies of it share) while it lives, and of
    # dpframe's snapshot while that lives
    _memory.add(ranges_of(frame), frame, ranges_of)
    if data is not frame:
        _memory.add(ranges_of(data), data, ranges_of)
    for part in _memory_leaves(frame, dataset.backend):
        _memory.add(_pandas_ranges_of(part), part, _pandas_ranges_of)
    dataset.backend.protected(frame)  # (Dask: a frame built later over equal values gets its
    # own expression)


def _pandas_ranges_of(obj: Any) -> list[tuple[int, int]]:
    """The buffer ranges of a pandas DataFrame or Series."""
    return pandas_ranges(obj.to_frame() if obj.ndim == 1 else obj)


def _memory_leaves(frame: Any, backend: Backend) -> list[Any]:
    """The pandas objects an engine plan reads from memory (``Backend.memory_leaves``)."""
    return list(backend.memory_leaves(frame))
