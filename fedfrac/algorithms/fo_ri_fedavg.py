"""FO-RI-FedAvg and its reductions RI-FedAvg (α = 1) and FO-FedAvg (λ = 0).

Fractional Order FL for BEV energy consumption modelling (Partohaghighi, Marcia,
West, Chen), docs/design.md §3.2. Each local step of client k in round t:

  g̃ = g + λ_t · r(I_k) · (w − w_t)                      proximal pull (Eq. 22)
  p = (|w_h − w_{h−1}| + δ)^(1−α) / Γ(2−α)              preconditioner (Eq. 10)
  p ← p / (1 + β_κ κ_k)                                 optional spectral gate (Eq. 24)
  p ← clip(p, p_min, p_max)                             optional clip (Eq. 12)
  w ← w − η_t (g̃ ⊙ p)                                   (Eq. 23)

for local steps h ≥ 1; step 0 is plain proximal SGD, p_0 = 1, neither gated nor
clipped (Alg. 1 l.15–18). The order preconditioner → gate → clip is Alg. 1
l.22–26. As optax: ``proximal → fractional(elementwise, gated) → client
optimizer`` (the client optimizer is unit-rate SGD in the paper; its output is
scaled by the round's η_t). The server is FedAvg.

Schedules. η_t is the run's client learning-rate schedule: the paper's
η_t = η0/sqrt(t+1) is ``client.schedule="inv_sqrt"``, ``client.lr=η0`` (0.05).
λ_t = λ (``lam_schedule="constant"``, default; the paper does not pin a decay)
or λ/sqrt(t+1) (``"inv_sqrt"``).

Roughness index I_k (BEV Eqs. 13–18, :func:`fedfrac.ops.roughness_index`):
probed at the global model w_t on a probe batch b_probe^k of ``probe_batch``
samples drawn at random, without replacement, from the client's data with the
client's key of the round (Alg. 1 l.8, :func:`probe_rows`), with M =
``num_directions`` directions and m + 1 = ``grid`` + 1 points in [−ℓ, ℓ]. §II-C
calls b_probe^k "fixed" while Alg. 1 l.8 samples it inside the round loop; we
read "fixed" as one batch for all M·(m+1) losses of a probe and draw a new batch
at every probe, as Alg. 1 does. A client probes on its 1st, (R+1)-th,
(2R+1)-th, ... participation (R = ``probe_every``) and reuses the stored I_k in
between; the client state holds ``roughness [K]``, ``participations [K]`` and
``probes [K]``. The probe runs in the ``prepare_cohort`` hook, outside the
per-client vmap, in a loop over exactly the clients due this round, so rounds
without due clients cost nothing extra (a vmapped ``lax.cond`` would run the
probe for every client every round). Each probe evaluates its M·(m+1) losses
batched, ``probe_chunk`` at a time (0 = about 16384 probe samples per chunk).

Slice increments (``probe_increments``, :mod:`fedfrac.ops.roughness`):
``"derivative"`` (default) takes each Δφ between neighbouring grid points from
the directional derivative (trapezoid rule), ``"paper"`` from the differences of
the sampled losses, as Eqs. 15–16 are written. At the paper's ℓ = 0.01 and
m = 100 the slices of ordinary networks change the loss by about one float32
spacing per grid step, so the loss differences measure rounding (I differs
between eager and jitted runs of the same probe); the derivative increments have
no such cancellation. Each probe also stores the share of its M slices whose
mean change per grid step is below 10 float spacings of the loss (client state
``rounding [K]``), reported as the metric ``roughness_rounding``; with
``probe_increments="paper"`` a run whose probes have any such slice also
prints one warning saying that its I_k measure rounding.

Response r(I): ``"saturating"`` I/(I + τ_I) (default) or ``"clip"``
clip(I, I_min, I_max).

Spectral gate (β_κ > 0): κ_k = ‖W‖₂/(‖W‖_F + ε_F) (BEV Eq. 19) of the head's
kernel (the last linear layer) of the round's global model w_t, computed once per
round before local training (Alg. 1 l.11) and constant over the local steps; the
factor 1/(1 + β_κ κ_k) multiplies p on steps h ≥ 1 before the clip
(:func:`spectral_gate_factor`). Since all clients start from w_t, κ_k is the same
for every client of a round. ‖W‖₂ comes from ``spectral_iters`` power iterations
(default 200, more than the "e.g. 10" of §IV-P: at 10 the gate factor is off by
~0.2 % median and up to ~6 % on random 32×10 – 128×10 layers; now that κ is
computed once per round the extra iterations cost nothing measurable). A head
with one output (the BEV regressors' ``[H, 1]`` kernel) has rank one, so κ = 1
(up to ε_F) and the gate is the constant 1/(1 + β_κ).

Probing: ``probe="auto"`` probes iff λ may be non-zero; ``"on"`` also probes
with λ = 0 (to record roughness diagnostics for FO-FedAvg); ``"off"`` needs
λ = 0.

Per-round diagnostics (``diagnostics=True``): client metrics ``drift``
(‖Δ_t^k‖₂), ``roughness`` (the I_k used), ``roughness_rounding`` (the share of
its probe's slices at rounding level), ``probed`` and ``prox_coef``
(λ_t r(I_k)); server metrics ``drift_mean``, ``drift_cv`` (Eqs. 36–38) and,
when probing, ``roughness_mean``, ``roughness_rounding`` (cohort mean),
``pearson_roughness_drift``, ``spearman_roughness_drift`` and
``drift_tertile_{low,mid,high}``.

Defaults are the paper's (IV-P): α 0.8, δ 1e-6, p ∈ [0.2, 5], λ 0.1, M 10,
ℓ 0.01, m 100, B_probe 128, R_probe 5, ε 1e-8, β_κ 0. τ_I (not given there) is 1.
The slice increments default to ``"derivative"`` (the paper's differences of
sampled losses are ``probe_increments="paper"``).
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import optax
from jax import lax

from fedfrac import metrics as metrics_lib
from fedfrac._validation import concrete_scalar
from fedfrac.algorithms import contract, local_training, schema, tasks, trees
from fedfrac.algorithms import server
from fedfrac.algorithms.fofedavg import alpha_in_range, check_alpha
from fedfrac.ops.roughness import INCREMENTS, roughness_profile
from fedfrac.ops.spectral import spectral_flatness
from fedfrac.optim.fractional import fractional, fractional_set_gate
from fedfrac.optim.proximal import proximal, proximal_set_reference


PROBE_KEY_TAG = 0x50524F42   # fold_in tag of the probe directions' key
PROBE_BATCH_TAG = 0x50424154  # fold_in tag of the probe batch's key
PROBE_SAMPLES_PER_CHUNK = 16384


def _check_options(hp):
  message = check_alpha(hp)
  if message:
    return message
  lo, hi = concrete_scalar(hp["p_min"]), concrete_scalar(hp["p_max"])
  if lo is not None and hi is not None and lo > 0 and hi > 0 and lo > hi:
    return f"p_min={hp['p_min']!r}: must be <= p_max={hp['p_max']!r}"
  lo, hi = concrete_scalar(hp["i_min"]), concrete_scalar(hp["i_max"])
  if lo is not None and hi is not None and lo > hi:
    return f"i_min={hp['i_min']!r}: must be <= i_max={hp['i_max']!r}"
  lam = concrete_scalar(hp["lam"])
  if hp["probe"] == "off" and lam is not None and lam > 0:
    return (f"probe='off': the roughness-informed pull needs I_k; set lam=0 "
            f"(got lam={hp['lam']!r}) or probe='auto'")
  return None


HPARAMS = schema.HParamSchema({
    "alpha": schema.HParam(0.8, alpha_in_range,
                           "fractional order; must be in (0, 1], or (0, 2) with "
                           "allow_heuristic_alpha=True"),
    "delta": schema.HParam(1e-6, schema.positive, "must be > 0"),
    "p_min": schema.HParam(0.2, schema.non_negative,
                           "lower clip of the preconditioner; must be >= 0 (0 = none)"),
    "p_max": schema.HParam(5.0, schema.non_negative,
                           "upper clip of the preconditioner; must be >= 0 (0 = none)"),
    "allow_heuristic_alpha": schema.HParam(False, schema.boolean, "must be True or False"),
    "lam": schema.HParam(0.1, schema.non_negative, "proximal strength λ; must be >= 0"),
    "lam_schedule": schema.HParam("constant", schema.one_of("constant", "inv_sqrt"),
                                  "allowed values are 'constant', 'inv_sqrt'"),
    "response": schema.HParam("saturating", schema.one_of("saturating", "clip"),
                              "allowed values are 'saturating', 'clip'"),
    "tau_i": schema.HParam(1.0, schema.positive, "saturation constant τ_I; must be > 0"),
    "i_min": schema.HParam(0.0, schema.non_negative, "must be >= 0"),
    "i_max": schema.HParam(1.0, schema.non_negative, "must be >= 0"),
    "probe": schema.HParam("auto", schema.one_of("auto", "on", "off"),
                           "allowed values are 'auto', 'on', 'off'"),
    "probe_every": schema.HParam(5, schema.positive_int, "R_probe; must be an integer >= 1"),
    "num_directions": schema.HParam(10, schema.positive_int, "M; must be an integer >= 1"),
    "grid": schema.HParam(100, schema.positive_int, "m; must be an integer >= 1"),
    "radius": schema.HParam(0.01, schema.positive, "ℓ; must be > 0"),
    "probe_batch": schema.HParam(128, schema.positive_int, "B_probe; must be an integer >= 1"),
    "probe_chunk": schema.HParam(0, schema.non_negative_int,
                                 "losses per batched chunk; integer >= 0 (0 = auto)"),
    "probe_increments": schema.HParam(
        "derivative", schema.one_of(*INCREMENTS),
        "slice increments; allowed values are 'derivative' (directional derivative, "
        "no rounding cancellation), 'paper' (loss differences, Eqs. 15-16)"),
    "eps_a": schema.HParam(1e-8, schema.non_negative, "must be >= 0"),
    "eps_t": schema.HParam(1e-8, schema.non_negative, "must be >= 0"),
    "beta_kappa": schema.HParam(0.0, schema.non_negative, "spectral gate β_κ; must be >= 0"),
    "spectral_iters": schema.HParam(200, schema.positive_int, "must be an integer >= 1"),
    "eps_f": schema.HParam(1e-8, schema.non_negative, "must be >= 0"),
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
    "diagnostics": schema.HParam(True, schema.boolean, "must be True or False"),
}, checks=(_check_options,))


def response(index, kind="saturating", tau=1.0, i_min=0.0, i_max=1.0):
  """r(I): ``saturating`` I/(I + τ_I) (BEV paper Eq. 21) or ``clip``
  clip(I, I_min, I_max) (docs/design.md §3.2)."""
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


def spectral_gate_factor(params, beta, num_iters=10, eps=1e-8, select=head_kernel):
  """1/(1 + β_κ κ_k) with κ_k = ‖W(w_t)‖₂/(‖W(w_t)‖_F + ε_F) (BEV paper Eqs. 19
  and 24), scalar ``[]``.

  ``params`` is the round's global model w_t (Alg. 1 l.11): the factor is
  computed once per round, before local training, and is constant over the
  local steps. Since every client of S_t starts from the same w_t, κ_k is the
  same for all of them (the paper indexes it by k; Alg. 1 l.11 computes it on
  W(w_t)). ``num_iters`` power iterations estimate ‖W‖₂
  (:func:`fedfrac.ops.spectral.spectral_flatness`).
  """
  kappa = spectral_flatness(select(params), num_iters, eps)  # κ_k, Eq. 19
  return 1.0 / (1.0 + beta * kappa)  # the factor of Eq. 24


def probe_rows(key, index, size, batch):
  """Rows of b_probe^k (BEV Alg. 1 l.8): ``batch`` samples drawn uniformly without
  replacement from the client's ``size`` valid rows ``index[:size]``.

  Args:
    key: the client's key of the round (a fresh batch at every probe).
    index: ``[N_max]`` int row ids of the client's samples (padded).
    size: number of valid entries of ``index`` (may be traced).
    batch: B_probe (static).
  Returns:
    ``(rows [batch] int, valid [batch] bool)``; when ``size < batch`` all valid
    rows come first and the padding slots are masked.
  """
  n_max = index.shape[0]
  scores = jax.random.uniform(key, (n_max,)) + jnp.where(jnp.arange(n_max) < size,
                                                          0.0, 2.0)
  if batch <= n_max:
    pos = jnp.argsort(scores)[:batch]
  else:
    pos = jnp.concatenate([jnp.argsort(scores),
                           jnp.full((batch - n_max,), n_max - 1, jnp.int32)])
  return index[pos], jnp.arange(batch) < size


ROUNDING_WARNING = (
    "roughness probe (probe_increments='paper'): at round {round}, {share:.0%} of "
    "the probed slices change the loss by less than 10 float spacings per grid "
    "step, so I_k measures float rounding, not the loss landscape; use "
    "probe_increments='derivative' (the default), a larger radius or a smaller "
    "grid")


def rounding_reporter():
  """``report(share, round_index)``: warns once (the first call with share > 0)
  that the probe's loss differences measure rounding; host side, for
  ``jax.debug.callback``. One reporter per built algorithm, so once per run
  (a fresh warning registry each time: Python's "once per location" rule would
  otherwise hide the warning of a second run in the same process)."""
  warned = []

  def report(share, round_index):
    share = float(share)
    if warned or not share > 0:
      return
    warned.append(True)
    warnings.warn_explicit(
        ROUNDING_WARNING.format(round=int(round_index) + 1, share=share),
        RuntimeWarning, __file__, report.__code__.co_firstlineno, module=__name__,
        registry={})
  return report


def _bound(v):
  """Clip bound: None when concretely 0 (no clipping), else the (maybe traced) value."""
  c = concrete_scalar(v)
  return None if c is not None and c == 0 else v


def _may_be_nonzero(v):
  c = concrete_scalar(v)
  return c is None or c != 0


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  model, task = ctx.model, ctx.task
  loss_fn = tasks.supervised_loss(model, task)
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
  increments = hp["probe_increments"]
  report_rounding = rounding_reporter() if increments == "paper" else None
  if use_gate:
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0))
    head_kernel(shapes)

  def client_optimizer():
    parts = []
    if use_prox:
      parts.append(proximal(0.0))   # coefficient set per round
    # preconditioner → gate → clip (Alg. 1 l.22–26) inside one transformation;
    # step 0 has p = 1: neither gated nor clipped (Alg. 1 l.15–18).
    parts.append(fractional(alpha, delta, "elementwise", "step", p_min, p_max,
                            allow_heuristic_alpha=True, gated=use_gate))
    parts.append(training.optimizer)
    return optax.chain(*parts)

  def probe_loss(params, batch):
    x, y, valid = batch
    return tasks.masked_mean(task.example_loss(model.apply(params, x), y), valid)

  def probe_batch(x, y, index, size, key):
    """b_probe^k: B_probe samples drawn from the client's data (Alg. 1 l.8)."""
    rows, valid = probe_rows(jax.random.fold_in(key, PROBE_BATCH_TAG), index, size,
                             probe_b)
    return x[rows], y[rows], valid

  def probe(params, x, y, index, size, key):
    """``(I_k, share of slices at rounding level)`` at ``params`` (BEV Eqs.
    13–18), scalars."""
    prof = roughness_profile(probe_loss, params, probe_batch(x, y, index, size, key),
                             jax.random.fold_in(key, PROBE_KEY_TAG), num_dirs,
                             hp["radius"], grid, hp["eps_a"], hp["eps_t"], chunk,
                             increments)
    return prof["index"], prof["rounding_fraction"]

  def init(key, params0, num_clients, data_info):
    del key, data_info
    clients = {"roughness": jnp.zeros((num_clients,), jnp.float32),
               "rounding": jnp.zeros((num_clients,), jnp.float32),
               "participations": jnp.zeros((num_clients,), jnp.int32),
               "probes": jnp.zeros((num_clients,), jnp.int32)}
    return {"params": params0}, clients

  def prepare_cohort(payload, states, views, keys, mask, round_index):
    """Probe I_k at w_t for the sampled clients due this round; reuse the rest."""
    due = mask & (states["participations"] % every == 0)
    order = jnp.argsort(jnp.where(due, 0, 1), stable=True)   # due clients first

    def body(i, carry):
      rough, rounding = carry
      s = order[i]
      value, share = probe(payload, views.x, views.y, views.index[s], views.size[s],
                           keys[s])
      return (rough.at[s].set(value.astype(rough.dtype)),
              rounding.at[s].set(share.astype(rounding.dtype)))
    rough, rounding = lax.fori_loop(0, jnp.sum(due.astype(jnp.int32)), body,
                                    (states["roughness"], states["rounding"]))
    if report_rounding is not None:
      jax.debug.callback(report_rounding, jnp.max(jnp.where(due, rounding, 0.0)),
                         round_index)
    return {**states, "roughness": rough, "rounding": rounding,
            "probes": states["probes"] + due.astype(jnp.int32)}

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)  # η_t
    tx = client_optimizer()
    opt_state = tx.init(payload)
    if use_gate:
      # κ_k once per round on W(w_t) (Alg. 1 l.11), constant over the local steps.
      opt_state = fractional_set_gate(opt_state, spectral_gate_factor(
          payload, beta, hp["spectral_iters"], hp["eps_f"]))
    index = client_state["roughness"]
    coef = None
    if use_prox:
      t = jnp.asarray(round_index, jnp.float32)
      lam_t = lam if hp["lam_schedule"] == "constant" else lam / jnp.sqrt(t + 1.0)
      coef = lam_t * response(index, hp["response"], hp["tau_i"], hp["i_min"],
                              hp["i_max"])   # λ_t · r(I_k)
      opt_state = proximal_set_reference(opt_state, payload, coef)
    params, _, metrics = local_training.local_train(payload, opt_state, view, key, lr,
                                                    loss_fn, training, optimizer=tx)
    delta = trees.tree_sub(params, payload)
    metrics["drift"] = trees.tree_norm(delta)  # ‖Δ_t^k‖₂ (Eq. 36)
    if probing:
      metrics["roughness"] = index
      metrics["roughness_rounding"] = client_state["rounding"]
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
        m = mask.astype(jnp.float32)
        out["roughness_rounding"] = (jnp.sum(m * client_metrics["roughness_rounding"])
                                     / jnp.maximum(jnp.sum(m), 1.0))
      return out

  return contract.FedAlgorithm("fo_ri_fedavg", init, contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params,
                               prepare_cohort=prepare_cohort if probing else None,
                               cohort_metrics=cohort_metrics)


ENTRIES = (
    contract.AlgorithmEntry(
        "fo_ri_fedavg", build, HPARAMS,
        "FO-RI-FedAvg: fractional order + roughness-informed proximal pull",
        robust_aggregation=True),
    contract.AlgorithmEntry(
        "ri_fedavg", build, HPARAMS.with_defaults(alpha=1.0),
        "RI-FedAvg: FO-RI-FedAvg with alpha = 1", robust_aggregation=True),
    contract.AlgorithmEntry(
        "fo_fedavg", build, HPARAMS.with_defaults(lam=0.0),
        "FO-FedAvg: FO-RI-FedAvg with lam = 0", robust_aggregation=True),
)
