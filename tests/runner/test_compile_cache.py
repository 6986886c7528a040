"""fedfrac.runner.compile_cache: where the persistent compilation cache lives,
and that a second identical ``python -m fedfrac.main`` loads every program
its first run (main process and worker processes) compiled."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

from fedfrac.runner import compile_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("environ, expected", [
    ({"FEDFRAC_COMPILE_CACHE": "/data/cc", "JAX_COMPILATION_CACHE_DIR": "/jax"}, "/data/cc"),
    ({"JAX_COMPILATION_CACHE_DIR": "/jax"}, "/jax"),
    ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/fedfrac/jax"),
    ({"FEDFRAC_COMPILE_CACHE": "off", "JAX_COMPILATION_CACHE_DIR": "/jax"}, None),
    ({"FEDFRAC_COMPILE_CACHE": " False "}, None),
    ({"FEDFRAC_COMPILE_CACHE": "0"}, None),
])
def test_the_directory_follows_the_settings(environ, expected):
  assert compile_cache.directory(environ) == expected


def test_the_default_is_under_the_users_cache_directory():
  assert compile_cache.directory({}) == os.path.join(
      os.path.expanduser("~"), ".cache", "fedfrac", "jax")


def test_a_directory_that_cannot_be_made_is_one_line_and_no_cache(tmp_path, capsys):
  blocker = tmp_path / "file"
  blocker.write_text("")
  assert compile_cache.enable({"FEDFRAC_COMPILE_CACHE": str(blocker / "cache")}) is None
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(f"compile cache off: cannot create {blocker}")


def _run(cache, workdir):
  """A tiny ``python -m fedfrac.main`` (one method, in this process); its
  metrics without the wall times."""
  env = dict(os.environ, PYTHONPATH=ROOT, FEDFRAC_COMPILE_CACHE=str(cache))
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  out = subprocess.run(
      [sys.executable, "-m", "fedfrac.main", "--config=configs/quickstart.py",
       "--config.rounds=2", "--config.model.hidden=(8,)", "--config.data.num_clients=4",
       "--config.only=fedavg", "--config.workers=1", f"--workdir={workdir}"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  with open(workdir / "metrics.csv") as f:
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]


def _entries(cache):
  return {name: os.stat(cache / name).st_mtime_ns for name in os.listdir(cache)}


def test_a_second_identical_run_loads_every_program_from_the_cache(tmp_path):
  cache = tmp_path / "cache"
  first = _run(cache, tmp_path / "first")
  written = _entries(cache)
  # The method's rounds and the evaluation, among others.
  assert sum(name.startswith("jit__run_chunk-") for name in written) == 1, sorted(written)
  assert any(name.startswith("jit__eval_params-") for name in written), sorted(written)
  second = _run(cache, tmp_path / "second")
  assert _entries(cache) == written      # nothing compiled again: no entry new or rewritten
  assert second == first                 # the same numbers from the loaded programs


def test_worker_processes_inherit_the_cache(tmp_path):
  """What a command starts (``config.workers``, the sweep's queue) caches in
  the same directory, every program however short its compilation."""
  env = dict(os.environ, PYTHONPATH=ROOT, FEDFRAC_COMPILE_CACHE=str(tmp_path))
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  child = ("import jax; c = jax.config; print(c.jax_compilation_cache_dir, "
           "c.jax_persistent_cache_min_compile_time_secs, "
           "c.jax_persistent_cache_min_entry_size_bytes)")
  script = ("import subprocess, sys; from fedfrac.runner import compile_cache; "
            "compile_cache.enable(); "
            f"subprocess.run([sys.executable, '-c', {child!r}], check=True)")
  out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr
  assert out.stdout.split() == [str(tmp_path), "0.0", "0"]


def test_off_sets_nothing(monkeypatch):
  import jax
  before = jax.config.jax_compilation_cache_dir
  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
  assert compile_cache.enable({"FEDFRAC_COMPILE_CACHE": "off"}) is None
  assert jax.config.jax_compilation_cache_dir == before
  assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
