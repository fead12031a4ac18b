"""Pictures of releases: notebook views (:func:`dpframe.frames.show.show`, ``dpf.show``) and
the steward's report page (``dpframe report``, :mod:`dpframe.cli.report`), drawn as inline
SVG (:mod:`dpframe.report.svg`) from public facts: released values, the sealed log, the
budget."""
