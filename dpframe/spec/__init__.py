"""The release spec, ``dpframe release spec.toml`` (docs/release-spec.md): not for users as
modules (the command is the interface).

* :mod:`~dpframe.spec._parse` — the TOML spec read and checked (``parse_spec``, ``load_spec``);
* :mod:`~dpframe.spec._plan` — its plan through :func:`dpframe.release._pipeline.plan` (the dry
  run);
* :mod:`~dpframe.spec._run` — the run (``run_spec``) and the ``release`` command's parser.
"""
