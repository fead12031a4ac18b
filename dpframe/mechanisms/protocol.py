"""What every mechanism a release draws from offers: one typed protocol.

A release (:mod:`dpframe.release._pipeline`) builds one mechanism per measurement before it
reads anything, draws from it once after the read and logs its public parameters. Every
mechanism it can build satisfies :class:`Mechanism`:

* the Laplace family (:class:`~dpframe.mechanisms.laplace.BoundedLaplace`,
  :class:`~dpframe.mechanisms.laplace.TruncatedLaplace`,
  :class:`~dpframe.mechanisms.laplace.Laplace`), calibrated so that a draw is
  ``(ε, δ)``-DP for a statistic of sensitivity Δ on the feasible set ``domain``
  (Holohan et al., bounded Laplace, §3; ``docs/privacy.md``), spending ``epsilon_overhead`` of
  ε on finite precision (snapping on a grid of spacing ``grid``: :mod:`.snapping`);
* the exponential mechanism over quantile bins, in the form a release logs
  (``dpframe.query._quantile``), pure ε-DP (``delta`` 0).

The protocol is structural (:class:`typing.Protocol`): nothing subclasses it, and mypy checks
each mechanism against it where a query or the pipeline names the type.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from dpframe.mechanisms.domains import FeasibleSet
from dpframe.mechanisms.randomness import RandomState

__all__ = ["Mechanism"]


class Mechanism(Protocol):
    """A calibrated mechanism: its public parameters and one draw.

    ``epsilon``/``delta``: the privacy parameters one draw spends (``epsilon_overhead`` of
    ``epsilon`` is reserved for finite precision); ``sensitivity``: the Δ it is calibrated to
    (largest change of the exact statistic between neighbours); ``scale``: the noise scale
    (Laplace ``b``; the exponential mechanism: rank units per e-fold); ``domain``: the
    feasible set every output lies in; ``grid``: the snapping grid's spacing (0: none).
    """

    @property
    def name(self) -> str: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def sensitivity(self) -> float: ...
    @property
    def scale(self) -> float: ...
    @property
    def domain(self) -> FeasibleSet: ...
    @property
    def epsilon_overhead(self) -> float: ...
    @property
    def grid(self) -> float: ...

    def sample(self, value: np.ndarray | float, *, random_state: RandomState = None
               ) -> float | np.ndarray:
        """The released value(s) for the exact statistic ``value`` (one draw per entry);
        ``random_state`` seeds it for tests, else the OS CSPRNG is used."""
        ...
