"""What one client sees of the data inside ``client_update``
(:class:`ClientView`), read by the algorithms and by their local training loop
(:mod:`fedfrac.algorithms.local_training`); re-exported by
:mod:`fedfrac.algorithms.contract`."""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax


class ClientView(NamedTuple):
  """What one client sees of the data inside ``client_update``.

  Attributes:
    x: ``[N, ...]`` the flat train inputs of all clients (shared, never copied).
    y: ``[N]`` the flat train targets.
    index: ``[n_max]`` int32 rows owned by this client (padded).
    size: ``[]`` int32 number of valid rows n_k.
    num_steps: ``[]`` int32 local steps this client runs this round (under
      ``config.system.policy="partial"`` already cut to what fits before the
      deadline; 0 for a client dropped by ``"drop"``; for an ``elastic``
      algorithm always the full local work τ_k, see :class:`FedAlgorithm`).
    client_id: ``[]`` int32.
    step_budget: ``[]`` int32 local steps this client can afford before the
      round's deadline, ⌊T·s_k⌋ for deadline T and speed s_k
      (:mod:`fedfrac.ops.system`; may exceed ``num_steps``), e.g. FedEL's
      per-client runtime budget; ``None`` when the engine sets no budget (read
      it with :func:`step_budget`, which then gives ``num_steps``).
  """
  x: jax.Array
  y: jax.Array
  index: jax.Array  # type: ignore[assignment]  # a field, shadows tuple.index
  size: jax.Array
  num_steps: jax.Array
  client_id: jax.Array
  step_budget: Optional[jax.Array] = None


def step_budget(view: ClientView) -> jax.Array:
  """``[]`` int32 local steps ``view``'s client can afford this round:
  ``view.step_budget``, or ``view.num_steps`` when there is no deadline."""
  return view.num_steps if view.step_budget is None else view.step_budget
