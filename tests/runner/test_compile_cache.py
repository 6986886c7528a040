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


RUN = ["-m", "fedfrac.main", "--config=configs/quickstart.py", "--config.rounds=2",
       "--config.model.hidden=(8,)", "--config.data.num_clients=4", "--config.only=fedavg",
       "--config.workers=1", "--config.progress=False"]


def _run(cache, workdir, stderr=False, prefix=(), driver=None):
  """A tiny ``python -m fedfrac.main`` (one method, in this process); its
  metrics without the wall times (and its stderr lines). ``prefix``: a command
  to run it under; ``driver``: Python run instead of ``-m fedfrac.main``."""
  env = dict(os.environ, PYTHONPATH=ROOT, FEDFRAC_COMPILE_CACHE=str(cache))
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  args = RUN if driver is None else ["-c", driver] + RUN[2:]
  out = subprocess.run([*prefix, sys.executable, *args, f"--workdir={workdir}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  with open(workdir / "metrics.csv") as f:
    rows = [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]
  lines = [line for line in out.stderr.splitlines() if line.strip()]
  return (rows, lines) if stderr else rows


def _entries(cache):
  """{entry file: modification time} of JAX's entries in ``cache``."""
  return {name: os.stat(cache / name).st_mtime_ns for name in os.listdir(cache)
          if name.endswith("-cache")}


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
  """A cache filled by one run (at ``cache``; a copy of it as saved in
  ``pristine``), and that run's metrics. JAX's keys hold the cache's path,
  so the tests use the cache where it was filled."""
  import shutil
  root = tmp_path_factory.mktemp("filled")
  rows = _run(root / "cache", root / "w")
  shutil.copytree(root / "cache", root / "pristine")
  return root, rows


def _copy(filled, tmp_path):
  """The filled cache as it was saved (file times kept), where it was filled."""
  import shutil
  root, _ = filled
  shutil.rmtree(root / "cache")
  shutil.copytree(root / "pristine", root / "cache")
  return root / "cache"


def test_a_second_identical_run_loads_every_program_from_the_cache(filled, tmp_path):
  cache = _copy(filled, tmp_path)   # as the first run (the fixture's) left it
  written = _entries(cache)
  # The method's rounds and the evaluation, among others.
  assert sum(name.startswith("jit__run_chunk-") for name in written) == 1, sorted(written)
  assert any(name.startswith("jit__eval_params-") for name in written), sorted(written)
  second = _run(cache, tmp_path / "second")
  assert _entries(cache) == written      # nothing compiled again: no entry new or rewritten
  assert second == filled[1]             # the same numbers from the loaded programs


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


@pytest.mark.parametrize("damage", ["every entry empty", "another program's entry"])
def test_a_bad_entry_is_replaced_in_one_line_and_its_program_compiled(filled, tmp_path,
                                                                      damage):
  # Before: an empty entry warned and recompiled on every run, never replaced
  # (11 warnings a run); another program's entry under this key stopped the run
  # with an AssertionError in pxla.py.
  cache = _copy(filled, tmp_path)
  names = sorted(_entries(cache), key=lambda n: os.path.getsize(cache / n))
  if damage == "every entry empty":
    bad = names
    for name in names:
      (cache / name).write_bytes(b"")
  else:
    bad = [n for n in names if n.startswith("jit__run_chunk-")]
    (cache / bad[0]).write_bytes((cache / names[0]).read_bytes())
  rows, lines = _run(cache, tmp_path / "w", stderr=True)
  assert rows == filled[1]
  assert lines == [f"compile cache {cache}: removed {len(bad)} entries that were empty, "
                   f"truncated or changed since saved; their programs compile and are "
                   f"saved again"], lines
  saved = _entries(cache)
  assert set(bad) <= set(saved) and all(os.path.getsize(cache / n) for n in saved)
  if damage == "every entry empty":   # saved again: the next run loads every entry
    rows, lines = _run(cache, tmp_path / "w2", stderr=True)
    assert rows == filled[1] and not lines and _entries(cache) == saved


READ_ONLY_DRIVER = (
    "import sys\n"
    "from fedfrac.runner import compile_cache\n"
    "compile_cache._writable = lambda path: 'Read-only file system'\n"
    "from fedfrac import main\n"
    "sys.argv = ['fedfrac-run'] + sys.argv[1:]\n"
    "main.cli()\n")


@pytest.mark.parametrize("how", ["reported read-only", "read-only mount"])
def test_a_read_only_cache_is_read_and_said_once(filled, tmp_path, how):
  # Before: 43 raw JAX warnings a run, one per program it could not save.
  import shutil
  cache = _copy(filled, tmp_path)
  for name in list(_entries(cache))[:3]:   # some programs are not there
    os.remove(cache / name)
  saved = _entries(cache)
  if how == "read-only mount":
    unshare = shutil.which("unshare")
    probe = [unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
             f"mount --bind -o ro {cache} {cache}"] if unshare else None
    if not probe or subprocess.run(probe, capture_output=True).returncode != 0:
      pytest.skip("cannot mount read-only here (needs unshare and user namespaces); "
                  "the reported read-only case covers the path")
    mount = f"mount --bind -o ro {cache} {cache} && exec \"$0\" \"$@\""
    rows, lines = _run(cache, tmp_path / "w", stderr=True,
                       prefix=[unshare, "--user", "--map-root-user", "--mount", "sh",
                               "-c", mount])
  else:
    rows, lines = _run(cache, tmp_path / "w", stderr=True, driver=READ_ONLY_DRIVER)
  assert rows == filled[1]
  assert len(lines) == 1 and lines[0].startswith(f"compile cache {cache} cannot be "
                                                 f"written ("), lines
  assert lines[0].endswith("loading the programs it holds, compiling the others without "
                           "saving them")
  assert _entries(cache) == saved     # nothing written there
