"""The release spec, ``dpframe release spec.toml`` (docs/release-spec.md): not for users as
modules (the command is the interface).

* :mod:`~dpframe.spec._parse` — the TOML spec read and checked (``parse_spec``, ``load_spec``),
  section by section: ``_toml`` (reading, line-mapped errors), ``_model`` (the checked spec's
  dataclasses), ``_input``, ``_columns`` (bounds, keys, missing, the neighbour definition),
  ``_derived`` (``[with_columns]``), ``_queries`` and ``_statistics`` (each ``[[query]]``),
  ``_filters``, ``_vocabulary`` (the statistic words, from the query registry);
* :mod:`~dpframe.spec._calls` — the one API call that releases each query (shared by the plan
  and the run);
* :mod:`~dpframe.spec._plan` — its plan through :func:`dpframe.release._pipeline.plan` and the
  accuracy planner (the dry run), written as text by :mod:`~dpframe.spec._format`;
* :mod:`~dpframe.spec._run` — the run (``run_spec``) and the ``release`` command's parser;
  :mod:`~dpframe.spec._release` — the releases and the output file.
"""

from dpframe.spec._run import add_release_parser, release_command

__all__ = ["add_release_parser", "release_command"]
