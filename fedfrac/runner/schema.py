"""The config sections a run reads itself: the top-level run fields, ``task``,
``client``, ``server``, ``methods`` and ``log``; every key once, with its default,
meaning and check (:mod:`fedfrac.config_schema`). Rules that relate several keys
are in :mod:`fedfrac.runner.validate`."""
from __future__ import annotations

from fedfrac._validation import check, is_int
from fedfrac.algorithms import tasks
from fedfrac.config_schema import (BOOLEAN, Check, Field, Section, int32, integer, number,
                                   one_of)
from fedfrac.optim import schedules

MAX_SEED = 2**63 - 1   # the largest seed a PRNG key takes (a C long)


def check_seeds(seeds, key="seeds") -> None:
  """Seeds are distinct integers in ``0 .. MAX_SEED`` (a tuple, or one integer)."""
  shown = seeds
  if is_int(seeds):
    seeds = (seeds,)
  check(isinstance(seeds, (tuple, list)) and len(seeds) > 0
        and all(is_int(s) and s >= 0 for s in seeds), key, shown,
        "must be a non-empty tuple of integers >= 0")
  big = [s for s in seeds if s > MAX_SEED]
  check(not big, key, shown, f"seed {big[0] if big else ''} is too large; seeds are "
        f"integers in 0..{MAX_SEED} (2**63 - 1)")
  repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
  check(not repeated, key, shown,
        f"seed {repeated[0] if repeated else ''} is listed twice; each seed is one "
        f"independent run")


def _seeds(v, node) -> bool:
  check_seeds(v)   # raises its own one-line ConfigError
  return True


RUN = (
    Field("name", "experiment", "the experiment's name (tables, records)"),
    Field("seeds", (0,), "one run per seed and method", Check(_seeds, "")),
    Field("rounds", 30, "T communication rounds",
          (integer(1), int32("rounds"))),
    Field("participation", 1.0, "C: |S_t| = max(ceil(C K), 1)",
          number(0, 1, lo_open=True)),
    Field("eval_every", 1, "rounds per compiled chunk; evaluate after each", integer(1)),
    Field("checkpoint_every", 1, "chunks between checkpoints (0 = only at the end)",
          integer(0)),
    Field("target_accuracy", 0.8, "for rounds-to-target", number(0, 1)),
    Field("target_rmse", 0.0, "regression: rounds until RMSE <= this (0 = off)",
          number(0, note=" (0 = off)")),
    Field("stop_at_target", False, "end a run at its first evaluation reaching the "
          "target (target_accuracy; regression target_rmse), not `rounds`", BOOLEAN),
    Field("progress", True, "show a progress line per chunk"),
    Field("on_divergence", "stop", "\"stop\": mark the run diverged; \"error\": raise",
          one_of("stop", "error")),
    Field("only", "", "comma-separated method labels to run (empty = all)",
          Check(lambda v, node: isinstance(v, str), "must be a string of "
                "comma-separated method labels ('' = all)")),
    Field("workers", 1, "processes for the (method, seed) runs; 0 = one per CPU core "
          "/ local device (same results, faster compiles)",
          integer(0, allowed="must be an integer >= 0 (0 = one process per CPU core "
                  "or local device)")),
)

CLIENT = Section("client", "Local training of every client (a method may override "
                 "any key in methods.<label>.client).", [
    Field("optimizer", "sgd", "the client optimizer",
          one_of(*schedules.OPTIMIZERS, quote=False)),
    Field("lr", 0.05, "η, the client learning rate", number(0, lo_open=True)),
    Field("momentum", 0.9, "momentum of the momentum / nesterov optimizers",
          number(0, 1, hi_open=True)),
    Field("weight_decay", 0.0, "L2 weight decay", number(0)),
    Field("schedule", "constant", "learning-rate schedule over rounds",
          one_of(*schedules.SCHEDULES, quote=False)),
    Field("final_lr_fraction", 0.0, "cosine: the last round's lr as a fraction of lr",
          number(0, 1)),
    Field("lr_decay", 1.0, "exponential: lr factor per round", number(0, 1, lo_open=True)),
    Field("batch_size", 32, "B, rows per local step", integer(1)),
    Field("local_epochs", 1, "E local epochs (local_steps = 0)",
          (integer(1, note=" (or set local_steps > 0)"),
           int32("local steps (epochs x batches per epoch)")),
          when=lambda node, config: node.get("local_steps", 0) == 0),
    Field("local_steps", 0, "local steps per round (0 = epoch mode)",
          (integer(0, note=" (0 = epoch mode)"), int32("local steps"))),
])

TASK = Section("task", "mape_eps: ε_Y (label units, Wh for BEV). mape_rule: "
               "\"stabilized\" = 100/N Σ |e|/(|y| + ε_Y) over all samples (FO-RI-FedAvg "
               "Eq. 34); \"thresholded\" = 100 · mean |e|/|y| over samples with |y| > ε_Y.", [
    Field("loss", "cross_entropy", "cross_entropy (class labels) | mse | huber",
          one_of("cross_entropy", "mse", "huber")),
    Field("huber_delta", 1.0, "δ of the Huber loss", number(0, lo_open=True)),
    Field("mape_eps", 1.0, "ε_Y (label units, Wh for BEV)", number(0)),
    Field("mape_rule", "stabilized", "stabilized | thresholded",
          one_of(*tasks.MAPE_RULES)),
])

# Checked as one AggregatorSpec (fedfrac.algorithms.server), with the cohort size.
SERVER = Section("server", "How the server combines the cohort's updates "
                 "(fedfrac.algorithms.server): mean | median | trimmed_mean (trim_beta "
                 "per side) | krum | multi_krum (num_byzantine = f; multi = clients "
                 "averaged, 0 = cohort − f).", [
    Field("aggregator", "mean", "mean | median | trimmed_mean | krum | multi_krum"),
    Field("trim_beta", 0.1, "trimmed_mean: the fraction trimmed per side"),
    Field("num_byzantine", 0, "f, the Byzantine clients Krum tolerates"),
    Field("multi", 0, "multi_krum: clients averaged (0 = cohort − f)"),
])

METHODS = Section("methods", "label -> {name: <algorithm>, <options>..., client: "
                  "{<client overrides>}, server: {<server overrides>}, attack: "
                  "{<attack overrides>}}", free=True,
                  defaults={"fedavg": {"name": "fedavg"}})

LOG = Section("log", "Run records besides metrics.csv / metrics.jsonl: tensorboard = "
              "also write TensorBoard event files (extra ``tensorboard``; "
              "fedfrac.runner.tensorboard).", [
    Field("tensorboard", False, "also write TensorBoard event files", BOOLEAN),
])
