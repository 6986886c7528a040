"""FIRMA's compiled programs (:mod:`fedfrac_lab.reproduce.firma`): one program per
(mode, method, number of clients), all seeds of a scenario vmapped in it and
every scenario with that number of clients reusing it (index tables padded to
common widths), and the per-seed records it returns (:func:`summarize_runs`);
:mod:`fedfrac_lab.reproduce.firma_groups` runs them.
"""
from __future__ import annotations

import dataclasses
import resource
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import data as data_lib
from fedfrac import sim as sim_lib
from fedfrac import runner
from fedfrac import metrics as metrics_lib
from fedfrac.ops import lockstep
from fedfrac_lab.reproduce import common, firma_variants, verdicts



SEEDS = 5


def load_digits_config():
  return common.config_module("firma/digits.py")


# Titles of the real data sets ``fedfrac-reproduce firma_files`` runs.
FILES_TITLES = {"fashion_mnist": "Fashion-MNIST", "mnist": "MNIST-60k"}


def config_module(files=None):
  """The module whose ``firma_config(mode, scenario)`` gives every run's config:
  ``configs/firma/digits.py`` when ``files`` is None, else a stand-in for it on
  local files. ``files`` (a plain dict, so it travels to worker processes and
  into point keys): ``dataset`` (``fashion_mnist`` or ``mnist``), ``dir`` (the
  ``files`` source's directory), ``rounds``, ``inputs`` (``authors``: the
  authors' input normalisation in ``reference_code``; ``unit``: [0, 1]),
  ``parallelism`` (``engine.client_parallelism``) and, when present,
  ``step_buckets`` (``engine.step_buckets``; absent: the engine's automatic
  choice, which depends on the clients' sizes), ``init`` and ``partition``
  (labelled variants, :mod:`fedfrac_lab.reproduce.firma_variants`); N = 10."""
  import types
  from fedfrac import config_base
  digits = load_digits_config()
  if files is None:
    return digits
  title = FILES_TITLES[files["dataset"]]

  def firma_config(mode, scenario):
    c = digits.firma_config(mode, scenario, num_clients=10, rounds=files["rounds"])
    c.name = c.name.replace("FIRMA digits (MNIST-1797)", f"FIRMA {title}")
    config_base.files_source(c, files["dir"])
    if files["inputs"] == "authors":
      digits.authors_inputs(c, "grey")
    c.engine.client_parallelism = files["parallelism"]
    if files.get("step_buckets") is not None:
      c.engine.step_buckets = int(files["step_buckets"])
    firma_variants.apply(c, files.get("init"), files.get("partition"))
    return c
  return types.SimpleNamespace(firma_config=firma_config, __file__=digits.__file__)


def cpu_seconds():
  r = resource.getrusage(resource.RUSAGE_SELF)
  return r.ru_utime + r.ru_stime


ARRAY_AXES = {"x": None, "y": None, "x_test": None, "y_test": None,
              "client_index": 0, "client_size": 0, "num_steps": 0,
              "client_test_index": 0, "client_test_size": 0,
              "y_test_scale": None, "y_test_center": None}


RUNS_FORMS = ("vmap", "map")


def make_program(sim, rounds, runs="vmap", options=False):
  """jit of R rounds, each followed by the evaluation, over a batch of runs
  (inputs and outputs stacked on a leading runs axis, ``ARRAY_AXES`` /
  ``STATE_AXES``). ``runs="vmap"``: the runs batched into one program (the
  accelerator form); ``"map"``: one run after another inside the program
  (``lax.map``; the CPU form with clients mapped, where a vmapped batch of
  seeds costs more per client-step than one seed, docs/design.md §2.5). The
  same numbers either way, to float rounding. ``options``: the program takes a
  third argument, ``{option: [runs]}`` of traced algorithm options, one value
  per run (``sim`` built with ``traced_options=True``; e.g. FibFL and FibFL+ in
  one program, :mod:`fedfrac_lab.reproduce.firma_groups`)."""
  if runs not in RUNS_FORMS:
    raise ValueError(f"runs={runs!r}: allowed values are {', '.join(RUNS_FORMS)}")

  def one_run(arrays, state, hp=None):
    algorithm = sim.algorithm if hp is None else sim.algorithm_fn(hp)

    def body(s, _):
      s, m = sim.run_round(algorithm, arrays, s)
      return s, (m, sim._evaluate(arrays, s, hp))
    return jax.lax.scan(body, state, None, length=rounds)
  if runs == "vmap":
    axes = (ARRAY_AXES, sim_lib.STATE_AXES) + ((0,) if options else ())
    return jax.jit(lockstep.vmap(one_run, "runs", in_axes=axes,
                                 out_axes=(sim_lib.STATE_AXES, 0)))

  def mapped(arrays, states, hp=None):
    shared = {k: v for k, v in arrays.items() if ARRAY_AXES[k] is None}
    per_run = {k: v for k, v in arrays.items() if ARRAY_AXES[k] is not None}

    def run(xs):
      run_arrays, run_state, run_hp = xs
      return one_run({**shared, **run_arrays}, run_state._replace(round=states.round),
                     run_hp)
    out_states, outputs = jax.lax.map(run, (per_run, states._replace(round=None), hp))
    return out_states._replace(round=out_states.round[0]), outputs
  return jax.jit(mapped)


def stack_arrays(feds, training):
  per_run = [sim_lib.data_arrays(f, training) for f in feds]
  out = {}
  for key, axis in ARRAY_AXES.items():
    if axis is None:
      out[key] = jnp.asarray(per_run[0][key])
    else:
      out[key] = jnp.asarray(np.stack([a[key] for a in per_run]))
  return out


def stack_states(sim, seeds, feds):
  states = [sim.init(s, f) for s, f in zip(seeds, feds)]
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[st._replace(round=None)
                                                      for st in states])
  return stacked._replace(round=states[0].round)


def build_feds(cfg_module, mode, scenarios, seeds):
  """{scenario: (config, [fed per seed])} for one compatibility mode."""
  out = {}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # expected label-skew drops (K = 3)
    for scen in scenarios:
      cfg = cfg_module.firma_config(mode, scen)
      cache, feds = {}, []
      for seed in seeds:
        ds = seed if cfg.data.seed < 0 else cfg.data.seed
        if ds not in cache:
          cache[ds] = data_lib.build(cfg.data, ds)
        feds.append(cache[ds])
      out[scen] = (cfg, feds)
  return out


def pad_rows(a, rows):
  """Append copies of row 0 up to ``rows`` rows (rows no client index refers to)."""
  if a.shape[0] == rows:
    return a
  return np.concatenate([a, np.repeat(a[:1], rows - a.shape[0], axis=0)])


def table_widths(all_feds) -> dict:
  """The widths :func:`common_shapes` pads ``all_feds`` ({mode: {scenario:
  (config, [fed])}}) to: the largest client's train and test index tables
  (``n_max``, ``m_max``) and the largest train and test sets (``n_train``,
  ``n_test``), plain ints (they travel to worker processes)."""
  feds = [f for per_mode in all_feds.values() for _, fs in per_mode.values() for f in fs]
  return {"n_max": max(int(f.client_index.shape[1]) for f in feds),
          "m_max": max(int(f.client_test_index.shape[1]) for f in feds),
          "n_train": max(int(f.x_train.shape[0]) for f in feds),
          "n_test": max(int(f.x_test.shape[0]) for f in feds)}


def common_shapes(all_feds, widths=None):
  """Pad every dataset of every mode to the same array shapes, so a method whose
  compiled program does not depend on the mode (FedAvg, RDFL, FedRep, FibFL,
  FibFL+: the mode only changes their initial state) compiles once for both
  (the compilation cache recognises the identical program). The digits splits
  of the two modes differ by one row (1,438/359 vs 1,437/360); the extra rows
  are copies of row 0 that no client's index refers to. Per-client metrics are
  unaffected; only FedAvg's pooled (non-reported) test accuracy sees one extra
  test row.

  ``widths`` (:func:`table_widths` of a larger set, e.g. every scenario of a
  dataset) pads further, so runs made in separate calls (one scenario each)
  share array shapes and the compilation cache finds the program of the first
  call for the next ones (the campaign's windows). Index tables padded wider
  give the same per-client numbers: a client's batches come from its own
  positions only (``local_training.epoch_permutations``)."""
  own = table_widths(all_feds)
  widths = {k: max(v, int((widths or {}).get(k, 0))) for k, v in own.items()}
  n_max, m_max = widths["n_max"], widths["m_max"]
  n_train, n_test = widths["n_train"], widths["n_test"]

  def pad(f):
    f = data_lib.federated_data.pad_tables(f, n_max, m_max)
    return dataclasses.replace(f, x_train=pad_rows(f.x_train, n_train),
                               y_train=pad_rows(f.y_train, n_train),
                               x_test=pad_rows(f.x_test, n_test),
                               y_test=pad_rows(f.y_test, n_test))
  cache = {}

  def padded(f):
    if id(f) not in cache:
      cache[id(f)] = pad(f)
    return cache[id(f)]
  return {mode: {s: (c, [padded(f) for f in fs]) for s, (c, fs) in per_mode.items()}
          for mode, per_mode in all_feds.items()}


def summarize_runs(sim, method, states, round_metrics, evaluation, rounds, num_clients):
  """Per-seed summary dicts from the batched outputs (host NumPy). Each says
  whether its run ended at chance (``at_chance``: final accuracy ≤ 1 / classes +
  2 pp, :func:`fedfrac_lab.reproduce.verdicts.at_chance`), so a table of it names the
  run without recomputing the rule (records written before the flag fall back to
  the same rule)."""
  acc = np.asarray(evaluation["client_accuracy_mean"])       # [seeds, R]
  gini = np.asarray(evaluation["client_accuracy_gini"])
  first = jax.tree.map(lambda x: x[0] if np.ndim(x) else x, states)
  payload_b, message_b = sim.communication_bytes(first)
  comm = runner.round_communication(sim.algorithm.comm)
  per_round_bytes = [sum(comm(payload_b, message_b, num_clients, r)) for r in range(rounds)]
  runs = []
  for i in range(acc.shape[0]):
    r50 = metrics_lib.rounds_to_target(np.arange(1, rounds + 1), acc[i], 0.5)
    run = {"accuracy": float(acc[i, -1]), "gini": float(gini[i, -1]),
           "at_chance": verdicts.at_chance(float(acc[i, -1]), sim.data.num_classes),
           "curve": acc[i].tolist(), "r50": r50,
           "plateau_std": metrics_lib.plateau_std(acc[i]),
           "bytes_per_round": per_round_bytes}
    for key in ("spectral_gap", "ring_cost_before", "ring_cost_after",
                "ring_saving_pct"):
      name = f"server/{key}"
      if name in round_metrics:
        v = np.asarray(round_metrics[name])[i]
        run[key] = float(v[-1]) if key.startswith("ring") else v.tolist()
    runs.append(run)
  return runs
