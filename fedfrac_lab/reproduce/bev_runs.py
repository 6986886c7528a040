"""The runs of the FO-RI-FedAvg BEV studies (:class:`SuiteRuns`): the command-line
overrides applied to each configuration, every configuration planned once and
run as ``fedfrac.sweep`` points (or ``run_many`` in this process), the numbers
kept for the report. The studies themselves are :class:`fedfrac_lab.reproduce.bev_suite.Suite`.
"""
from __future__ import annotations

import json
import os
import sys

import ml_collections

from fedfrac import runner as runner_lib
from fedfrac import data as data_lib
from fedfrac_lab.reproduce import common, jobs
from fedfrac.runner import points as points_lib
from fedfrac_lab.reproduce.bev_tables import group

STUDIES = ("main", "types", "ablations", "participation", "churn", "architectures",
           "scaling", "timing", "latency")


def load_config_module(name):
  """The config module configs/bev/<name>.py."""
  return common.config_module(f"bev/{name}.py")


class SuiteRuns:
  """Runs the studies' configurations and keeps every number (the studies and
  the report are :class:`fedfrac_lab.reproduce.bev_suite.Suite`)."""

  def __init__(self, args):
    self.args = args
    self.cache = {}
    self.memo = {}
    self.raw = {}
    self.sections = []
    self.main_results = None
    self.seeds = common.parse_seeds(args.seeds)
    self.ved = bool(args.ved)
    self.outcome = None
    self.run_s = 0.0     # seconds of the runs the current study used

  # -- config plumbing
  def configure(self, c):
    """Apply the command-line overrides (rounds, seeds, VED source)."""
    c.progress = False
    c.seeds = self.seeds
    if self.args.rounds:
      c.rounds = int(self.args.rounds)
      c.eval_every = min(c.eval_every, c.rounds)
    if self.ved:
      c.data.source = "ved_csv"
      c.data.num_clients = 0
      c.data.bev.ved_path = self.args.ved
      c.data.bev.stride = int(self.args.ved_stride)
      c.name = c.name.replace("SYNTHETIC fleet", "VED")
    return c

  @staticmethod
  def memo_key(c, grid=None):
    """A configuration's key: its config less its name, and its grid (studies
    that share a configuration, e.g. C = 0.5 and no churn, share its runs)."""
    key_cfg = ml_collections.ConfigDict(c.to_dict())
    key_cfg.name = ""
    return (key_cfg.to_json_best_effort(sort_keys=True), json.dumps(grid, sort_keys=True))

  def plan(self, studies):
    """Every ``run_many`` job of ``studies`` (``types`` needs ``main``'s runs),
    once per distinct configuration: ``[(key, config, grid)]``."""
    planned = {}
    wanted = set(studies) | ({"main"} if "types" in studies else set())
    for study in STUDIES:
      if study in wanted and hasattr(self, f"configs_{study}"):
        for _, c, grid in getattr(self, f"configs_{study}")():
          planned.setdefault(self.memo_key(c, grid), (c, grid))
    return [(k, c, g) for k, (c, g) in planned.items()]

  def run_planned(self, studies):
    """Run every job of ``studies`` as sweep points
    (:func:`fedfrac_lab.reproduce.jobs.run_jobs`: one batch per (configuration,
    method), a work queue over ``--workers`` processes, finished runs kept in
    the point directory) and memoise their results for the studies."""
    planned = self.plan(studies)
    if not planned:
      return None
    job_list = [jobs.Job(c, grid=grid) for _, c, grid in planned]
    directory = self.args.dir
    if directory is None and self.args.resume_dir:
      directory = os.path.join(self.args.resume_dir,
                               points_lib.digest(jobs.fingerprint("fo_ri_fedavg", job_list)))
    outcome = jobs.run_jobs("fo_ri_fedavg", job_list, workers=self.args.workers,
                            directory=directory, overwrite=self.args.overwrite)
    for (key, c, _), res in zip(planned, outcome.results):
      self.memo[key] = res
      print(f"  [{jobs.run_seconds(res):6.1f}s] {c.name}: {', '.join(group(res))}",
            file=sys.stderr, flush=True)
    self.outcome = outcome
    return outcome

  def run(self, c, grid=None):
    """The results of configuration ``c`` (and ``grid``): from the planned runs
    (:meth:`run_planned`), else ``ff.run_many`` in this process."""
    key = self.memo_key(c, grid)
    if key not in self.memo:
      self.memo[key] = runner_lib.run_many(c, grid=grid, data_cache=self.cache, progress=False)
    res = self.memo[key]
    self.run_s += jobs.run_seconds(res)
    return res

  def keep(self, study, key, results):
    out = {}
    for label, recs in group(results).items():
      out[label] = {str(r.seed): {"status": r.status, "wall_s": r.wall_s,
                                  "compile_s": r.compile_s,
                                  "final": {k: v for k, v in (r.rows[-1] if r.rows else
                                                              {}).items()
                                            if isinstance(v, (int, float))},
                                  "curve_rmse": [[row["round"], row.get("rmse")]
                                                 for row in r.rows]}
                    for r in recs}
    self.raw.setdefault(study, {})[key] = out

  def fed_data(self, c):
    """The federated dataset of ``c`` (memoised with the same key as run_many)."""
    key = (c.data.to_json_best_effort(sort_keys=True),
           c.data.seed if c.data.seed >= 0 else self.seeds[0])
    if key not in self.cache:
      self.cache[key] = data_lib.build(c.data, key[1])
    return self.cache[key]
