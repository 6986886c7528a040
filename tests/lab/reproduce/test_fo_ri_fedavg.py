"""The BEV configs hold the paper's protocol and ablation grids (FO-RI-FedAvg
paper §IV-G, §IV-N, §IV-O, §IV-P)."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from fedfrac import config as config_lib
from fedfrac import models
from fedfrac.optim import schedules
from fedfrac_lab.reproduce import common


def test_paper_config_is_the_protocol_of_section_iv_p():
  c = common.config_module("bev/paper.py").get_config()
  config_lib.validate(c)
  assert c.rounds == 300 and c.participation == 0.3
  assert (c.client.optimizer, c.client.batch_size, c.client.local_epochs) == ("sgd", 64, 1)
  assert (c.data.bev.window, c.data.bev.stride) == (60, 1)
  assert tuple(c.seeds) == (1, 2, 3, 4, 5)
  assert c.task.mape_rule == "stabilized"
  eta = schedules.lr_schedule(c.client.schedule, c.client.lr, c.rounds)
  for t in (0, 3, 99, 299):
    assert float(eta(t)) == pytest.approx(0.05 / np.sqrt(t + 1), rel=1e-6)
  fo = c.methods["fo_ri_fedavg"]
  assert fo.name == "fo_ri_fedavg" and set(fo.keys()) == {"name"}   # defaults = §IV-P
  assert all("client" not in m for m in c.methods.values())


def test_ablation_grids_are_the_papers():
  mod = common.config_module("bev/ablations.py")
  grids = {k: v for k, (v, _) in mod.STUDIES.items()}
  assert grids["alpha"] == (1.0, 0.9, 0.8, 0.7, 0.6)
  assert grids["lam"] == (0.02, 0.05, 0.1, 0.2)
  assert grids["beta_kappa"] == (0.0, 0.25, 0.5, 1.0)
  assert grids["probe_every"] == (1, 5, 10)
  combos = set()
  for value in grids["safeguard"]:
    m = mod.get_config(f"safeguard={value}").methods["fo_ri_fedavg"]
    combos.add((m.delta < 1e-9, m.p_min == m.p_max == 0.0))
  # δ > 0 and δ → 0, each with and without the clip.
  assert combos == {(False, False), (False, True), (True, False), (True, True)}


def test_churn_regimes_are_the_papers():
  mod = common.config_module("bev/churn.py")
  rates = {s: (mod.get_config(s).churn.p_leave, mod.get_config(s).churn.p_join)
           for s in mod.PAPER_ASYMMETRIC}
  assert {r for s, r in rates.items() if s.startswith("loss")} == {
      (0.05, 0.02), (0.1, 0.02), (0.2, 0.02)}
  assert {r for s, r in rates.items() if s.startswith("gain")} == {
      (0.02, 0.05), (0.02, 0.1), (0.02, 0.2)}
  assert mod.get_config("0.1").churn.cohort_rule == "available"


@pytest.mark.parametrize("arch", ["gru", "lstm"])
def test_architecture_study_builds_recurrent_backbones(arch):
  c = common.config_module("bev/architectures.py").get_config(arch)
  config_lib.validate(c)
  model = models.build(c.model, (c.data.bev.window, 6), 1)
  params = model.init(jax.random.PRNGKey(0))
  assert set(params) == {"extractor", "head"}
  x = np.zeros((3, c.data.bev.window, 6), np.float32)
  assert model.apply(params, x).shape == (3,)
  with pytest.raises(ValueError, match="architecture 'cnn'"):
    common.config_module("bev/architectures.py").get_config("cnn")


def test_the_suite_plans_each_shared_configuration_once():
  import argparse
  from fedfrac_lab.reproduce import fo_ri_fedavg
  args = argparse.Namespace(seeds="0,1", rounds=2, ved="", ved_stride=10, dir=None,
                            resume_dir="", overwrite=False, workers=1)
  suite = fo_ri_fedavg.Suite(args)
  sizes = {s: len(getattr(suite, f"configs_{s}")())
           for s in ("participation", "churn", "architectures")}
  planned = suite.plan(list(sizes))
  # The churn "none" row and the ANN backbone are the participation sweep's C = 0.5.
  assert len(planned) == sum(sizes.values()) - 2
  assert len({key for key, _, _ in planned}) == len(planned)
  assert all(c.rounds == 2 and tuple(c.seeds) == (0, 1) for _, c, _ in planned)
  # The vehicle-type study reads the main table's runs.
  assert [c.name for _, c, _ in suite.plan(["types"])] == [
      c.name for _, c, _ in suite.configs_main()]
  # Timing and latency measure this process: nothing to plan.
  assert suite.plan(["timing", "latency"]) == []
