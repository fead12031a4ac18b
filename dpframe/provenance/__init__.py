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
