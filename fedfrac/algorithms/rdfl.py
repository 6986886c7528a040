"""RDFL: ring decentralised federated learning (Wang et al. 2021), the uniform-ring
baseline of FIRMA.

No server and no private head: every client trains its FULL model for E epochs
with its persistent optimizer state (SGD momentum 0.9 in FIRMA's setup; never
reset, never sent), then every model is mixed with its two ring neighbours from
a snapshot: θ_i ← γθ_i + (1−γ)(θ_L + θ_R)/2 — one N×N matrix
(:func:`fedfrac.ops.ring.mixing_matrix_ring_uniform`) over the stacked models.

``gamma=None`` picks γ by ``compat``: 0.5 in the paper (Table 4 / docs/design.md §3.3);
1.0 with ``compat="reference_code"``: the authors' runner
(``fibfl/runner.py``, ``_RDFL_CFG``) passes ``gamma=1`` to a blend
``γ·own + (1−γ)·mean(L, R)``, so their RDFL never mixes (clients train alone),
although ``fibfl/rdfl.py`` itself defaults to 0.5. ``compat="reference_code"``
also starts every client from its own random model.

Traffic: the full model to both neighbours, 2·N·p bytes per round (FIRMA Table 2)
— also with γ = 1, since the protocol still exchanges the models.
"""
from __future__ import annotations

import jax.numpy as jnp

from fedfrac.algorithms import contract, firma, local_training, schema, tasks
from fedfrac.ops import ring


HPARAMS = schema.HParamSchema({
    "gamma": schema.HParam(None, schema.interval(0, 1, optional=True),
                           "self-retention γ; None (by compat) or in [0, 1]"),
    **firma.COMPAT_HPARAMS,
})


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training, model, task = ctx.training, ctx.model, ctx.task
  num_clients = ctx.data_info.num_clients
  if num_clients < 2:
    raise ValueError(f"data.num_clients={num_clients}: a ring needs at least 2 clients")
  ref = hp["compat"] == "reference_code"
  gamma = hp["gamma"] if hp["gamma"] is not None else (1.0 if ref else 0.5)
  per_client = firma.per_client_init(hp)
  loss_fn = tasks.supervised_loss(model, task)
  opt = training.optimizer

  def init(key, params0, n, data_info):
    del data_info
    params = firma.initial_models(model, key, params0, n, per_client)
    # γ is data (not a compile-time constant): both compat modes share a program.
    server = {"order": jnp.arange(n, dtype=jnp.int32),
              "gamma": jnp.asarray(gamma, jnp.float32)}
    return server, {"params": params, "opt": firma.stacked_init(opt, params)}

  def broadcast(server_state):
    del server_state
    return {}

  def client_update(payload, cs, view, key, round_index):
    del payload
    lr = training.lr_schedule(round_index)
    params, opt_state, metrics = local_training.local_train(cs["params"], cs["opt"],
                                                            view, key,
                                                            lr, loss_fn, training)
    # What a client sends to each neighbour: its full model.
    return params, {"params": params, "opt": opt_state}, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del messages, weights, mask, key
    m = ring.mixing_matrix_ring_uniform(num_clients, server_state["gamma"],
                                        order=server_state["order"])
    # RDFL shares the whole model (no private head).
    params = ring.apply_mixing(m, client_states["params"])
    return contract.ServerUpdate(server_state, {**client_states, "params": params},
                                 {"spectral_gap": firma.spectral_gap(m)})

  def eval_params(server_state, client_state):
    del server_state
    return client_state["params"]

  return contract.FedAlgorithm("rdfl", init, broadcast, client_update, aggregate,
                               eval_params, personalized=True,
                               comm=firma.ring_communication(1))


ENTRIES = (
    contract.AlgorithmEntry(
        "rdfl", build, HPARAMS,
        "RDFL: ring decentralised FL, uniform ring",
        full_participation=True, decentralised=True),
)
