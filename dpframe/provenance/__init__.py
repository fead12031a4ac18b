"""Where a frame's rows come from, checked before anything is released.

* :mod:`~dpframe.provenance._protect` — ``protect`` and ``Session`` (public as ``dpf.protect``,
  ``dpf.Session``), the frame facts and declarations (bounds, keys, missing values), ``resolve``;
* :mod:`~dpframe.provenance._derivations` — verification of derived frames (filters, new
  columns, Polars plans);
* :mod:`~dpframe.provenance._sources` — file sources (digests, readers, CSV parsing);
* :mod:`~dpframe.provenance._units` — privacy units (``count_units``, public as
  ``dpf.count_units``).
"""
