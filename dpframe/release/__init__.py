"""The one release pipeline (not for users: they call ``frame.dp.*`` and ``dpf.*``).

* :mod:`~dpframe.release._pipeline` — ``run`` and ``plan``: provenance, request checks,
  planning, reservation, the aggregation pass, mechanisms, log entries, commit;
* :mod:`~dpframe.release._key_observation` — the keys a frame holds, for key selection;
* :mod:`~dpframe.release._safety_net` — a failure after the read spends, logs and says nothing;
* :mod:`~dpframe.release._accuracy_planner` — accuracy and ε for a target half-width
  (``frame.dp.accuracy``, ``epsilon_for``, ``split``).
"""
