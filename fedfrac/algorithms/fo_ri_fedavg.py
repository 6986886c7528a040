"""FO-RI-FedAvg and its reductions RI-FedAvg (α = 1) and FO-FedAvg (λ = 0).

Fractional Order FL for BEV energy consumption modelling (Partohaghighi, Marcia,
West, Chen), DESIGN §3.2. Each local step of client k in round t:

  g̃ = g + λ_t · r(I_k) · (w − w_t)                      proximal pull
  p = clip((|w_h − w_{h−1}| + δ)^(1−α) / Γ(2−α), p_min, p_max),   p_0 = 1
  p ← p / (1 + β_κ κ_k)                                  optional spectral gate
  w ← w − η_t (g̃ ⊙ p)

as the optax chain ``proximal → fractional(elementwise) → gate → client
optimizer`` (the client optimizer is unit-rate SGD in the paper; its output is
scaled by the round's η_t). The server is FedAvg.

Schedules. η_t is the run's client learning-rate schedule: the paper's
η_t = η0/sqrt(t+1) is ``client.schedule="inv_sqrt"``, ``client.lr=η0`` (0.05).
λ_t = λ (``lam_schedule="constant"``, default; the paper does not pin a decay)
or λ/sqrt(t+1) (``"inv_sqrt"``).

Roughness index I_k (BEV Eqs. 13–18, :func:`fedfrac.ops.roughness_index`):
probed at the global model w_t on a fixed probe batch (the client's first
``probe_batch`` samples), with M = ``num_directions`` directions and m + 1 =
``grid`` + 1 points in [−ℓ, ℓ]. A client probes on its 1st, (R+1)-th,
(2R+1)-th, ... participation (R = ``probe_every``) and reuses the stored I_k in
between; the client state holds ``roughness [K]``, ``participations [K]`` and
``probes [K]``. The probe runs in the ``prepare_cohort`` hook, outside the
per-client vmap, in a loop over exactly the clients due this round, so rounds
without due clients cost nothing extra (a vmapped ``lax.cond`` would run the
probe for every client every round). Each probe evaluates its M·(m+1) losses
batched, ``probe_chunk`` at a time (0 = about 16384 probe samples per chunk).

Response r(I): ``"saturating"`` I/(I + τ_I) (default) or ``"clip"``
clip(I, I_min, I_max).

Spectral gate (β_κ > 0): κ_k = ‖W‖₂/(‖W‖_F + ε_F) (BEV Eq. 19) of the head's
kernel (the last linear layer) of the client's current iterate, recomputed every
local step with ``spectral_iters`` power iterations (default 200: 10, as in
DESIGN §3.2, leaves errors of ~1e-2 on random layers).

Probing: ``probe="auto"`` probes iff λ may be non-zero; ``"on"`` also probes
with λ = 0 (to record roughness diagnostics for FO-FedAvg); ``"off"`` needs
λ = 0.

Per-round diagnostics (``diagnostics=True``): client metrics ``drift``
(‖Δ_t^k‖₂), ``roughness`` (the I_k used), ``probed`` and ``prox_coef``
(λ_t r(I_k)); server metrics ``drift_mean``, ``drift_cv`` (Eqs. 36–38) and,
when probing, ``roughness_mean``, ``pearson_roughness_drift``,
``spearman_roughness_drift`` and ``drift_tertile_{low,mid,high}``.

Defaults are the paper's (IV-P): α 0.8, δ 1e-6, p ∈ [0.2, 5], λ 0.1, M 10,
ℓ 0.01, m 100, B_probe 128, R_probe 5, ε 1e-8, β_κ 0. τ_I (not given there) is 1.
"""
from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import optax
from jax import lax

from fedfrac import metrics as metrics_lib
from fedfrac.algorithms import base
from fedfrac.algorithms import server
from fedfrac.algorithms.fofedavg import alpha_in_range, check_alpha
from fedfrac.ops.roughness import roughness_index
from fedfrac.ops.spectral import spectral_flatness
from fedfrac.optim.fractional import fractional, fractional_set_reference
from fedfrac.optim.proximal import proximal, proximal_set_reference

# config.server (median / trimmed mean / Krum) replaces the server's mean.
ROBUST_AGGREGATION = True

PROBE_KEY_TAG = 0x50524F42   # fold_in tag of the probe directions' key
PROBE_SAMPLES_PER_CHUNK = 16384


def positive_int(v):
  return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def non_negative_int(v):
  return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check_options(hp):
  message = check_alpha(hp)
  if message:
    return message
  lo, hi = base.concrete(hp["p_min"]), base.concrete(hp["p_max"])
  if lo is not None and hi is not None and lo > 0 and hi > 0 and lo > hi:
    return f"p_min={hp['p_min']!r}: must be <= p_max={hp['p_max']!r}"
  lo, hi = base.concrete(hp["i_min"]), base.concrete(hp["i_max"])
  if lo is not None and hi is not None and lo > hi:
    return f"i_min={hp['i_min']!r}: must be <= i_max={hp['i_max']!r}"
  lam = base.concrete(hp["lam"])
  if hp["probe"] == "off" and lam is not None and lam > 0:
    return (f"probe='off': the roughness-informed pull needs I_k; set lam=0 "
            f"(got lam={hp['lam']!r}) or probe='auto'")
  return None


HPARAMS = base.HParams({
    "alpha": base.HParam(0.8, alpha_in_range,
                         "fractional order; must be in (0, 1], or (0, 2) with "
                         "allow_heuristic_alpha=True"),
    "delta": base.HParam(1e-6, base.positive, "must be > 0"),
    "p_min": base.HParam(0.2, base.non_negative,
                         "lower clip of the preconditioner; must be >= 0 (0 = none)"),
    "p_max": base.HParam(5.0, base.non_negative,
                         "upper clip of the preconditioner; must be >= 0 (0 = none)"),
    "allow_heuristic_alpha": base.HParam(False, base.boolean, "must be True or False"),
    "lam": base.HParam(0.1, base.non_negative, "proximal strength λ; must be >= 0"),
    "lam_schedule": base.HParam("constant", base.one_of("constant", "inv_sqrt"),
                                "allowed values are 'constant', 'inv_sqrt'"),
    "response": base.HParam("saturating", base.one_of("saturating", "clip"),
                            "allowed values are 'saturating', 'clip'"),
    "tau_i": base.HParam(1.0, base.positive, "saturation constant τ_I; must be > 0"),
    "i_min": base.HParam(0.0, base.non_negative, "must be >= 0"),
    "i_max": base.HParam(1.0, base.non_negative, "must be >= 0"),
    "probe": base.HParam("auto", base.one_of("auto", "on", "off"),
                         "allowed values are 'auto', 'on', 'off'"),
    "probe_every": base.HParam(5, positive_int, "R_probe; must be an integer >= 1"),
    "num_directions": base.HParam(10, positive_int, "M; must be an integer >= 1"),
    "grid": base.HParam(100, positive_int, "m; must be an integer >= 1"),
    "radius": base.HParam(0.01, base.positive, "ℓ; must be > 0"),
    "probe_batch": base.HParam(128, positive_int, "B_probe; must be an integer >= 1"),
    "probe_chunk": base.HParam(0, non_negative_int,
                               "losses per batched chunk; integer >= 0 (0 = auto)"),
    "eps_a": base.HParam(1e-8, base.non_negative, "must be >= 0"),
    "eps_t": base.HParam(1e-8, base.non_negative, "must be >= 0"),
    "beta_kappa": base.HParam(0.0, base.non_negative, "spectral gate β_κ; must be >= 0"),
    "spectral_iters": base.HParam(200, positive_int, "must be an integer >= 1"),
    "eps_f": base.HParam(1e-8, base.non_negative, "must be >= 0"),
    "server_lr": base.HParam(1.0, base.positive, "server learning rate; must be > 0"),
    "diagnostics": base.HParam(True, base.boolean, "must be True or False"),
}, checks=(_check_options,))


def response(index, kind="saturating", tau=1.0, i_min=0.0, i_max=1.0):
  """r(I): ``saturating`` I/(I + τ_I) or ``clip`` clip(I, I_min, I_max) (DESIGN §3.2)."""
  if kind == "saturating":
    return index / (index + tau)  # r(I) = I/(I+τ_I)
  if kind == "clip":
    return jnp.clip(index, i_min, i_max)  # r(I) = clip(I, I_min, I_max)
  raise ValueError(f"response={kind!r}: allowed values are 'saturating', 'clip'")


def head_kernel(params):
  """The weight matrix of the last linear layer: the last ≥2-D leaf of
  ``params["head"]`` (or of ``params`` when there is no head subtree)."""
  tree = params["head"] if isinstance(params, Mapping) and "head" in params else params
  mats = [x for x in jax.tree.leaves(tree) if x.ndim >= 2]
  if not mats:
    raise ValueError("spectral gate: the model has no weight matrix in params['head']")
  return mats[-1]


def spectral_gate(beta, num_iters=200, eps=1e-8, select=head_kernel
                  ) -> optax.GradientTransformation:
  """Scale updates by 1/(1 + β κ), κ the spectral flatness of ``select(params)``.

  Stateless; ``update`` needs ``params`` (the current iterate).
  """
  def init_fn(params):
    del params
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError("spectral_gate: update(updates, state, params) needs params")
    kappa = spectral_flatness(select(params), num_iters, eps)  # κ_k (BEV Eq. 19)
    scale = 1.0 / (1.0 + beta * kappa)  # p ← p / (1 + β_κ κ_k)
    return jax.tree.map(lambda g: g * scale.astype(g.dtype), updates), state

  return optax.GradientTransformation(init_fn, update_fn)


def _bound(v):
  """Clip bound: None when concretely 0 (no clipping), else the (maybe traced) value."""
  c = base.concrete(v)
  return None if c is not None and c == 0 else v


def _may_be_nonzero(v):
  c = base.concrete(v)
  return c is None or c != 0


def build(ctx: base.BuildContext, hp: dict) -> base.FedAlgorithm:
  training = ctx.training
  model, task = ctx.model, ctx.task
  loss_fn = base.supervised_loss(model, task)
  alpha, delta = hp["alpha"], hp["delta"]
  p_min, p_max = _bound(hp["p_min"]), _bound(hp["p_max"])
  lam, beta = hp["lam"], hp["beta_kappa"]
  use_prox = _may_be_nonzero(lam)
  use_gate = _may_be_nonzero(beta)
  probing = hp["probe"] == "on" or (hp["probe"] == "auto" and use_prox)
  every = hp["probe_every"]
  num_dirs, grid, probe_b = hp["num_directions"], hp["grid"], hp["probe_batch"]
  chunk = hp["probe_chunk"] or max(1, PROBE_SAMPLES_PER_CHUNK // probe_b)
  chunk = None if chunk >= num_dirs * (grid + 1) else chunk
  server_lr = hp["server_lr"]
  # Validate the concrete options once (traced grid values are checked upstream).
  fractional(alpha, delta, "elementwise", "step", p_min, p_max,
                  allow_heuristic_alpha=hp["allow_heuristic_alpha"])
  if use_gate:
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0))
    head_kernel(shapes)

  def client_optimizer():
    parts = []
    if use_prox:
      parts.append(proximal(0.0))   # coefficient set per round
    parts.append(fractional(alpha, delta, "elementwise", "step", p_min, p_max,
                                 allow_heuristic_alpha=True))
    if use_gate:
      parts.append(spectral_gate(beta, hp["spectral_iters"], hp["eps_f"]))
    parts.append(training.optimizer)
    return optax.chain(*parts)

  def probe_loss(params, batch):
    x, y, valid = batch
    return base.masked_mean(task.example_loss(model.apply(params, x), y), valid)

  def probe_batch(x, y, index, size):
    """The client's fixed probe batch: its first B_probe samples (masked)."""
    pos = jnp.minimum(jnp.arange(probe_b), index.shape[0] - 1)
    rows = index[pos]
    return x[rows], y[rows], jnp.arange(probe_b) < size

  def probe(params, x, y, index, size, key):
    """I_k at ``params`` (BEV Eqs. 13–18), scalar."""
    return roughness_index(probe_loss, params, probe_batch(x, y, index, size),
                           jax.random.fold_in(key, PROBE_KEY_TAG), num_dirs,
                           hp["radius"], grid, hp["eps_a"], hp["eps_t"], chunk)

  def init(key, params0, num_clients, data_info):
    del key, data_info
    clients = {"roughness": jnp.zeros((num_clients,), jnp.float32),
               "participations": jnp.zeros((num_clients,), jnp.int32),
               "probes": jnp.zeros((num_clients,), jnp.int32)}
    return {"params": params0}, clients

  def prepare_cohort(payload, states, views, keys, mask, round_index):
    """Probe I_k at w_t for the sampled clients due this round; reuse the rest."""
    del round_index
    due = mask & (states["participations"] % every == 0)
    order = jnp.argsort(jnp.where(due, 0, 1), stable=True)   # due clients first

    def body(i, rough):
      s = order[i]
      value = probe(payload, views.x, views.y, views.index[s], views.size[s], keys[s])
      return rough.at[s].set(value.astype(rough.dtype))
    rough = lax.fori_loop(0, jnp.sum(due.astype(jnp.int32)), body, states["roughness"])
    return {**states, "roughness": rough,
            "probes": states["probes"] + due.astype(jnp.int32)}

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)  # η_t
    tx = client_optimizer()
    opt_state = tx.init(payload)
    index = client_state["roughness"]
    coef = None
    if use_prox:
      t = jnp.asarray(round_index, jnp.float32)
      lam_t = lam if hp["lam_schedule"] == "constant" else lam / jnp.sqrt(t + 1.0)
      coef = lam_t * response(index, hp["response"], hp["tau_i"], hp["i_min"],
                              hp["i_max"])   # λ_t · r(I_k)
      opt_state = proximal_set_reference(opt_state, payload, coef)
    params, _, metrics = base.local_train(payload, opt_state, view, key, lr, loss_fn,
                                          training, optimizer=tx)
    delta = base.tree_sub(params, payload)
    metrics["drift"] = base.tree_norm(delta)  # ‖Δ_t^k‖₂ (Eq. 36)
    if probing:
      metrics["roughness"] = index
      metrics["probed"] = (client_state["participations"] % every == 0).astype(jnp.float32)
    if coef is not None:
      metrics["prox_coef"] = coef
    client_state = {**client_state, "participations": client_state["participations"] + 1}
    return delta, client_state, metrics

  # Σ_k p_k Δ_k (FedAvg's mean), or the robust rule of ``config.server``.
  aggregate = server.global_delta_aggregate(ctx.aggregator, server_lr)

  cohort_metrics = None
  if hp["diagnostics"]:
    def cohort_metrics(client_metrics, weights, mask):
      del weights
      out = metrics_lib.drift_stats_jnp(client_metrics["drift"], mask)
      if probing:
        out.update(metrics_lib.roughness_drift_diagnostics_jnp(
            client_metrics["roughness"], client_metrics["drift"], mask))
      return out

  return base.FedAlgorithm("fo_ri_fedavg", init, base.broadcast_params,
                           client_update, aggregate, base.eval_global_params,
                           prepare_cohort=prepare_cohort if probing else None,
                           cohort_metrics=cohort_metrics)
