"""The one release pipeline (not for users: they call ``frame.dp.*`` and ``dpf.*``).

* :mod:`~dpframe.release._pipeline` — ``run`` and ``plan``: the walk of one query through
  provenance, request checks, planning, reservation, the engine's read, the mechanisms, the
  log entries and the commit;
* :mod:`~dpframe.release._records` — the request, the planned queries and a key selection's
  public facts, as they pass between the steps;
* :mod:`~dpframe.release._request` — request checks; :mod:`~dpframe.release._key_checks` —
  keys against the key column's dtype;
* :mod:`~dpframe.release._planning` — plans and ε shares from public facts;
  :mod:`~dpframe.release._plan_cache` — plans reused per frame and request;
* :mod:`~dpframe.release._mechanisms` — each measurement's mechanism, built and drawn;
* :mod:`~dpframe.release._engine_pass` — the engine timeout on cluster engines;
* :mod:`~dpframe.release._outcome` — answers and intervals; :mod:`~dpframe.release._entries` —
  the log entries;
* :mod:`~dpframe.release._key_observation` — the keys a frame holds, for key selection;
* :mod:`~dpframe.release._safety_net` — a failure after the read spends, logs and says nothing;
* :mod:`~dpframe.release._accuracy_planner` — accuracy and ε for a target half-width
  (``frame.dp.accuracy``, ``epsilon_for``, ``split``).
"""

from dpframe.release._accuracy_planner import accuracy, epsilon_for, split
from dpframe.release._mechanisms import charged_delta
from dpframe.release._outcome import Outcome
from dpframe.release._pipeline import declared_keys, evaluate_derivation, plan, run
from dpframe.release._request import MECHANISMS

__all__ = [
    "MECHANISMS", "Outcome", "accuracy", "charged_delta", "declared_keys", "epsilon_for",
    "evaluate_derivation", "plan", "run", "split",
]
