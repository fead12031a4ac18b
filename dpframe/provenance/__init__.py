"""Where a frame's rows come from, checked before anything is released.

* :mod:`~dpframe.provenance._protect` — ``protect`` (public as ``dpf.protect``) and ``resolve``;
* :mod:`~dpframe.provenance._datasets` — ``Dataset`` and ``Session`` (public as ``dpf.Session``);
* :mod:`~dpframe.provenance._facts` — the frame facts;
* :mod:`~dpframe.provenance._declared`, :mod:`~dpframe.provenance._missing` — the declarations
  (bounds, keys, missing values and fill words);
* :mod:`~dpframe.provenance._binding` — lazy sources bound by their content;
* :mod:`~dpframe.provenance._verified`, :mod:`~dpframe.provenance._registry` — which frames are
  verified, and which data already has a budget;
* :mod:`~dpframe.provenance._derivations` — verification of derived frames (filters, new
  columns, Polars plans);
* :mod:`~dpframe.provenance._sources` — file sources (digests, readers, CSV parsing);
* :mod:`~dpframe.provenance._units` — privacy units (``count_units``, public as
  ``dpf.count_units``).
"""

from dpframe.provenance._derivations import NO_COLUMNS, Step, verify_expressions
from dpframe.provenance._protect import (
    DROP,
    FrameFacts,
    Missing,
    Session,
    check_key_list,
    declare_derived,
    derive,
    on_protect,
    protect,
    resolve,
    validate_bounds,
    validate_missing,
)
from dpframe.provenance._units import bound_plan, count_units, describe

__all__ = [
    "DROP",
    "NO_COLUMNS",
    "FrameFacts",
    "Missing",
    "Session",
    "Step",
    "bound_plan",
    "check_key_list",
    "count_units",
    "declare_derived",
    "derive",
    "describe",
    "on_protect",
    "protect",
    "resolve",
    "validate_bounds",
    "validate_missing",
    "verify_expressions",
]
