"""Helpers below every layer, with no knowledge of privacy: identity maps
(:mod:`~dpframe._util.identity`: ``IdentityMap``, entries keyed by object identity that leave
with their object), fork detection (:mod:`~dpframe._util.forking`: ``forked_after_polars``,
``check_polars_usable``), the live-buffer registry and dpframe's byte copies of in-memory frames
(:mod:`~dpframe._util.memory`: ``MemoryRegistry``, ``own_pandas``, ``own_polars``,
``own_arrow``) and the walk of a Polars plan (:mod:`~dpframe._util.polars_plan`).

Not for users. ``memory`` and ``polars_plan`` sit here rather than in ``provenance/`` because
the backends' adapters (a layer below provenance) call their copy routines
(docs/architecture.md, "Where did X go")."""
