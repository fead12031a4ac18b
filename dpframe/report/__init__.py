"""Pictures of releases: notebook views (:func:`dpframe.frames.show.show`, ``dpf.show``) and
the steward's report page (``dpframe report``, :mod:`dpframe.cli.report`), drawn as inline
SVG (:mod:`dpframe.report.svg`, the charts of a whole analysis in :mod:`dpframe.report.plots`)
from public facts: released values, the sealed log, the budget. A file of many queries is read
back query by query (:mod:`dpframe.report.queries`) and drawn as cards
(:mod:`dpframe.report.analysis`)."""
