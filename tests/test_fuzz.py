"""Fuzzing the command line with generated configs and overrides (hypothesis).

Each generated case is ``python -m fedfrac.main`` on the quickstart config cut
down to one method, 2 rounds and a tiny model, plus 1–4 overrides drawn from
valid and invalid values of run, data, model, client, churn, method-option and
unknown keys. Every case must end in one of three ways:

* status 0: the run finished (or was marked diverged) and no output file holds
  a NaN or an infinity;
* status 2: stopped before compute, stderr is exactly one line ``error: ...``;
* status 1: only with ``on_divergence='error'``, one line ``error: ... diverged``;

never a traceback. ``EXAMPLES`` cases per run, always the same ones: generated
from the fixed ``SEED`` with no example database; each case runs in its own
process (about 5–15 s on an idle 2-core CPU).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = 25
SEED = 14

BASE = {"only": "fedavg", "rounds": "2", "progress": "False", "model.hidden": "(8,)",
        "eval_every": "1", "data.num_clients": "4"}

# key -> values as typed on the command line (string fields unquoted, as
# config_flags takes them), valid and invalid mixed.
VALUES = {
    "rounds": ["2", "1", "0", "-3", "abc", "2.5"],
    "eval_every": ["1", "2", "0", "-1"],
    "client.lr": ["0.05", "1e3", "-1.0", "x", "0.0"],
    "client.optimizer": ["sgd", "adam", "adamw", "rmsprop"],
    "client.batch_size": ["16", "0", "2.5"],
    "data.alpha": ["0.5", "0.0", "'0.5'", "-1"],
    "data.num_clients": ["4", "0", "3.5", "500"],
    "data.partition": ["iid", "dirichlet", "shards", "label_skew", "bogus"],
    "data.split_seed": ["0", "3", "-5"],
    "data.seed": ["-1", "2", "-7"],
    "participation": ["1.0", "0.5", "0.0", "1.5"],
    "model.name": ["mlp", "bogus", "logreg"],
    "model.hidden": ["(8,)", "(4, 4)", "()", "(-1,)"],
    "task.loss": ["cross_entropy", "mse", "l1"],
    "churn.p_leave": ["0.0", "0.5", "1.0", "2.0"],
    "churn.p_join": ["1.0", "0.0", "0.5"],
    "seeds": ["(0,)", "(0, 0)", "(-1,)", "()"],
    "only": ["fedavg", ",", "nosuch", "fofedavg", "fedprox"],
    "on_divergence": ["stop", "error", "bogus"],
    "methods.fofedavg.alpha": ["0.9", "-1.0", "abc", "1.5"],
    "methods.fedavg.server_lr": ["1.0", "0.5", "-2.0"],
    "methods.fedavg.client.lr": ["0.05", "-1", "1e3"],
    "methods.fedavg.mu": ["0.1"],                     # not a fedavg option
    "data.num_clientz": ["4"],                        # unknown key
    "nosuch.key": ["1"],
}

overrides = st.dictionaries(st.sampled_from(sorted(VALUES)), st.just(None),
                            min_size=1, max_size=4).flatmap(
    lambda d: st.fixed_dictionaries({k: st.sampled_from(VALUES[k]) for k in d}))

NON_FINITE = re.compile(r"\b(nan|NaN|inf|Infinity|-inf)\b")
OUTPUTS = ("metrics.csv", "metrics.jsonl", "rounds.csv", "summary.json", "summary.md")


def _run(args, workdir):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, "-m", "fedfrac.main",
                         "--config=configs/quickstart.py", f"--workdir={workdir}", *args],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          phases=(Phase.explicit, Phase.generate),   # no shrinking: bounded time
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(overrides)
def test_generated_overrides_run_or_stop_with_one_line(case):
  merged = {**BASE, **case}
  args = [f"--config.{k}={v}" for k, v in merged.items()]
  workdir = tempfile.mkdtemp(prefix="fedfrac_fuzz_")
  try:
    out = _run(args, workdir)
    context = (args, out.returncode, out.stderr[-3000:])
    assert "Traceback" not in out.stderr, context
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    if out.returncode == 2:
      assert len(lines) == 1 and lines[0].startswith("error: "), context
      assert not os.path.exists(os.path.join(workdir, "metrics.csv")), context
    elif out.returncode == 1:
      assert merged.get("on_divergence") == "error", context
      errors = [l for l in lines if l.startswith("error: ")]
      assert len(errors) == 1 and "diverged" in errors[0], context
    else:
      assert out.returncode == 0, context
      for name in OUTPUTS:
        text = open(os.path.join(workdir, name)).read()
        assert not NON_FINITE.search(text), (name, context)
  finally:
    shutil.rmtree(workdir, ignore_errors=True)
