"""FedEL (Zhang, Chen, Bian, Wang & Xu, "FedEL: Federated Elastic Learning for
Heterogeneous Devices", arXiv 2509.16902, NeurIPS 2025).

Source. The arXiv abstract and overview (https://arxiv.org/abs/2509.16902) and the
description in FO-RI-FedAvg ref. [54] / Table VIII. The paper's own equations were
not available here, so no equation numbers are cited; what follows is our reading
of its three parts, over the model's parameter tensors (the leaves of the params
pytree, in ``jax.tree.leaves`` order, which plays the role of the paper's block
order from input to output):

1. Window (sliding-window training). In round t the window is the ``window``
   consecutive tensors starting at ``(t · window) mod L`` (cyclic, L = number of
   tensors), so over ⌈L / window⌉ rounds every tensor is inside the window once.
   ``window = 0`` means the whole model. The window bounds the candidates of a
   client whose budget binds (r_k < 1 below), so slow clients train every part
   of the model in turn instead of always the same cheap, important tensors; a
   client that can afford full steps (r_k = 1) trains the whole model (our
   reading: the window exists to make budget-limited training progressive and
   balanced). The default, 2, is one layer (kernel and bias) per round.
2. Selection under a runtime budget. Training tensor i for one step costs
   c_i = |θ_i| / Σ_j |θ_j| of a full step (parameter count as the time proxy
   that replaces the paper's offline per-tensor time profile). A client that must
   run H_k local steps but can afford only b_k full steps this round may spend
   r_k = min(b_k / H_k, 1) of a full step per step. Inside the window it takes
   tensors in decreasing adjusted importance while their cumulative cost stays
   ≤ r_k (a tensor that fits is always taken; one too big is skipped, the
   next smaller-cost candidates are still considered in importance order). Its
   step then costs c_k = Σ_{i selected} c_i ≤ r_k, so H_k·c_k ≤ b_k.
3. Tensor-importance adjustment. Local importance is the first-order Taylor
   score I_i = |⟨∇_i F_k(w_t), w_t,i⟩| on the client's first mini-batch,
   normalised to sum 1. The adjusted score mixes it with the server's global
   importance Ī (the sample-weighted mean of last round's uploaded local scores,
   uniform before the first round): Ĩ_i = (1 − β) I_i + β Ī_i.

Clients then run the configured local optimizer on all their H_k steps with the
gradient of unselected tensors zeroed (and their update masked, so momentum or
weight decay cannot move them) and upload ``{"delta": Δ_k ⊙ s_k, "selected": s_k,
"importance": I_k}``. The server averages each tensor over the clients that
trained it: w_{t+1,i} = w_{t,i} + Σ_k p_k s_{k,i} Δ_{k,i} / Σ_k p_k s_{k,i}
(unchanged when nobody trained it), with p_k = n_k / Σ_j n_j over the clients
that upload.

Runtime budget and the engine's deadline. b_k is the view's ``step_budget``
(``[]``, ⌊T·s_k⌋ from the simulated client speed s_k and the round deadline T of
``config.system``); without a deadline it is the hparam ``budget_steps`` (one
number for every client; ``0`` = unlimited, i.e. b_k = H_k). FedEL is
``elastic`` (:class:`fedfrac.algorithms.contract.FedAlgorithm`): it reports c_k
as the client metric ``step_cost``, and under any deadline policy (``drop``,
``partial`` or ``none``) the engine neither drops nor truncates it. Each sampled
client runs all H_k steps, taking H_k·c_k / s_k ≤ T time units (the round lasts
the longest of these, :func:`fedfrac.ops.system.round_schedule`); its H_k steps
count in full in ``system/steps_run`` (a step that trains part of the model is
still a step) and as H_k·c_k in ``system/cost_steps``. A client whose budget
cannot pay even for the cheapest tensor of its window (c_k = 0) trains
nothing, uploads nothing and counts as dropped. So where FedAvg under ``drop``
loses every client with τ_k / s_k > T, FedEL keeps them on a part of the model.
With an unlimited budget (or a deadline everybody meets) every client trains the
whole model and FedEL is FedAvg exactly, whatever the window.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.algorithms import contract, local_training, schema, tasks, trees

HPARAMS = schema.HParamSchema({
    "window": schema.HParam(2, lambda v: isinstance(v, int) and not isinstance(v, bool)
                          and v >= 0,
                          "tensors per sliding window of a budget-limited client; an "
                          "integer >= 0 (0 = whole model)"),
    "beta": schema.HParam(0.5, schema.unit_interval,
                          "weight β of the global importance in the adjustment; in [0, 1]"),
    "budget_steps": schema.HParam(0.0, schema.non_negative,
                                "full local steps a client can afford per round; >= 0 "
                                "(0 = unlimited); a view field budget_steps overrides it"),
})


def tensor_costs(params):
  """Per-tensor cost of one training step as a fraction of a full step: ``[L]``."""
  sizes = np.array([max(int(np.prod(x.shape)), 1) for x in jax.tree.leaves(params)],
                   np.float64)
  return jnp.asarray(sizes / sizes.sum(), jnp.float32)


def window_mask(round_index, num_tensors, window):
  """``[L]`` bool: tensors inside round ``round_index``'s cyclic window."""
  if window == 0 or window >= num_tensors:
    return jnp.ones((num_tensors,), bool)
  start = (round_index * window) % num_tensors
  offset = (jnp.arange(num_tensors) - start) % num_tensors
  return offset < window


def select_tensors(importance, costs, in_window, affordable):
  """Greedy selection under a budget.

  Args:
    importance: ``[L]`` adjusted importance Ĩ.
    costs: ``[L]`` per-step cost of each tensor (fractions of a full step).
    in_window: ``[L]`` bool, the round's window.
    affordable: ``[]`` fraction r of a full step the client may spend per step.
  Returns ``[L]`` bool: tensors taken in decreasing importance (window only)
  while the running cost stays ≤ r.
  """
  order = jnp.argsort(-jnp.where(in_window, importance, -jnp.inf))
  c_sorted = jnp.where(in_window[order], costs[order], jnp.inf)

  def take(spent, c):
    ok = spent + c <= affordable + 1e-6
    return jnp.where(ok, spent + c, spent), ok
  _, chosen_sorted = jax.lax.scan(take, jnp.zeros((), jnp.float32), c_sorted)
  return jnp.zeros_like(in_window).at[order].set(chosen_sorted)


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  window, beta, budget_hp = hp["window"], hp["beta"], hp["budget_steps"]

  def init(key, params0, num_clients, data_info):
    del key, num_clients, data_info
    num_tensors = len(jax.tree.leaves(params0))
    return {"params": params0,
            "importance": jnp.full((num_tensors,), 1.0 / num_tensors, jnp.float32)}, None

  def broadcast(server_state):
    return server_state

  def local_importance(params, view, key):
    """Normalised Taylor scores ``[L]`` on the client's first mini-batch."""
    b = training.batch_size
    n_max = view.index.shape[0]
    pos = jnp.arange(b) % n_max
    rows = view.index[pos]
    mask = jnp.arange(b) < view.size
    grads = jax.grad(lambda p: loss_fn(p, view.x[rows], view.y[rows], mask, key)[0])(params)
    scores = jnp.stack([jnp.abs(jnp.vdot(g, w)) for g, w in
                        zip(jax.tree.leaves(grads), jax.tree.leaves(params))])
    total = jnp.sum(scores)
    return jnp.where(total > 0, scores / jnp.where(total > 0, total, 1.0),
                     jnp.full_like(scores, 1.0 / scores.shape[0]))

  def client_update(payload, client_state, view, key, round_index):
    params = payload["params"]
    leaves, treedef = jax.tree.flatten(params)
    costs = tensor_costs(params)
    # training uses `key` itself (as FedAvg does); the importance batch a derived key
    importance = local_importance(params, view, jax.random.fold_in(key, 0x1e1))
    adjusted = (1.0 - beta) * importance + beta * payload["importance"]
    steps = jnp.maximum(view.num_steps, 1).astype(jnp.float32)
    budget = view.step_budget   # the engine's deadline budget (config.system)
    if budget is None:
      budget = jnp.where(budget_hp > 0, budget_hp, steps)
    affordable = jnp.minimum(jnp.asarray(budget, jnp.float32) / steps, 1.0)
    full = affordable >= 1.0          # the budget covers full steps: whole model
    selected = full | select_tensors(adjusted, costs,
                                     window_mask(round_index, len(leaves), window),
                                     affordable)
    sel_tree = jax.tree.unflatten(treedef, [selected[i] for i in range(len(leaves))])

    def only_selected(grads, params_now, step):
      del params_now, step
      return jax.tree.map(lambda g, s: g * s.astype(g.dtype), grads, sel_tree)

    delta, metrics = local_training.local_delta(params, view, key, round_index, loss_fn,
                                      training, step_hook=only_selected)
    delta = jax.tree.map(lambda d, s: d * s.astype(d.dtype), delta, sel_tree)
    metrics["update_norm"] = trees.tree_norm(delta)
    # c_k, the cost of one local step as a fraction of a full step (the engine's
    # elastic schedule: time H_k·c_k / s_k; 0 = nothing trained, not aggregated)
    metrics["step_cost"] = jnp.where(full, 1.0, jnp.sum(jnp.where(selected, costs, 0.0)))
    return ({"delta": delta, "selected": selected, "importance": importance},
            client_state, metrics)

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del key
    w = weights * mask.astype(weights.dtype)                       # [S]
    sel = messages["selected"].astype(jnp.float32)                  # [S, L]
    per_tensor = jnp.einsum("s,sl->l", w, sel)                      # Σ_k p_k s_k,i
    leaves, treedef = jax.tree.flatten(server_state["params"])
    d_leaves = jax.tree.leaves(messages["delta"])
    new = []
    for i, (p, d) in enumerate(zip(leaves, d_leaves)):
      num = jnp.tensordot(w, d, axes=1)
      new.append(p + jnp.where(per_tensor[i] > 0, num / jnp.where(per_tensor[i] > 0,
                                                                   per_tensor[i], 1.0), 0.0))
    total = jnp.maximum(jnp.sum(w), 1e-12)
    importance = jnp.where(jnp.sum(w) > 0,
                           jnp.einsum("s,sl->l", w, messages["importance"]) / total,
                           server_state["importance"])
    return contract.ServerUpdate(
        {"params": jax.tree.unflatten(treedef, new), "importance": importance},
        client_states, {"trained_tensor_fraction": jnp.mean(per_tensor > 0)})

  return contract.FedAlgorithm("fedel", init, broadcast, client_update, aggregate,
                               lambda server_state, client_state: server_state["params"],
                               elastic=True)


ENTRIES = (
    contract.AlgorithmEntry("fedel", build, HPARAMS,
                            "FedEL: sliding-window, importance-ranked tensor selection "
                            "under a runtime budget"),
)
