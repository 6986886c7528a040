"""One (method, seed) run in checkpointed chunks: :func:`chunk_loop` (the rounds
between chunk boundaries, shared by :func:`fedfrac.runner.loop.run` and
:func:`fedfrac.runner.many.run_many`), :func:`run_one`, and the data a run is
built on. Below both drivers and the worker processes
(:mod:`fedfrac.runner.parallel`); :mod:`fedfrac.runner.loop` re-exports its names.
"""
from __future__ import annotations

import signal
import sys
import time
from typing import Callable, Optional

import jax
import numpy as np

from fedfrac import _validation
from fedfrac import data as data_lib
from fedfrac.runner import compile_cache, factories, signals
from fedfrac.runner.checkpoint import NoIntactCheckpoint
from fedfrac.runner.log import Progress, RunLog, quiet_callback_tracebacks
from fedfrac.runner.records import RunRecord, error_text, final_params, stop_target
from fedfrac.runner.workdir import (BINDING, Workdir, binding_differences, history_seed,
                                    shown_differences)


def to_host(tree):
  return jax.tree.map(np.asarray, jax.device_get(tree))


def slice_run(tree, i):
  """Run ``i`` of a batched tree (0-d leaves, e.g. the shared round, are kept)."""
  return jax.tree.map(lambda x: x[i] if np.ndim(x) else x, tree)


def whole(tree, i):
  """Run ``i`` of an unbatched (single-run) tree: the tree itself."""
  return tree


class RunInterrupted(KeyboardInterrupt):
  """Ctrl-C (SIGINT) or SIGTERM stopped :func:`run` after a chunk; checkpoints
  and files are written (:mod:`fedfrac.runner.signals`).

  Attributes: ``results`` (what finished, :class:`Results`), ``message`` (one
  line saying where it stopped and how to resume) and ``signum``."""

  def __init__(self, message, results, signum=signal.SIGINT):
    super().__init__(message)
    self.message, self.results, self.signum = message, results, int(signum)


def use_compile_cache(wanted: bool = True) -> Optional[str]:
  """``ff.run`` / ``ff.run_many`` use JAX's persistent compilation cache as the
  command lines do (:func:`fedfrac.runner.compile_cache.enable`: a re-run
  loads its programs from disk instead of compiling them again), unless
  ``FEDFRAC_COMPILE_CACHE=off`` or ``wanted`` is False (tools that time
  compilation). A cache this process already uses (a command line's, a
  reproduction's own directory) is kept. Returns the directory, or None."""
  current = jax.config.jax_compilation_cache_dir
  if not wanted or current:
    return current or None
  path = compile_cache.enable()
  if path is not None:   # JAX decides once per process whether a cache is used
    from jax.experimental.compilation_cache import compilation_cache as jax_cache
    jax_cache.reset_cache()
  return path


def failure_line(label, seed, error) -> str:
  """One line naming a (method, seed) run that raised ``error``: the others
  run on and are kept (:attr:`fedfrac.runner.records.Results.failed`)."""
  text = error_text(error)
  text = text if len(text) <= 300 else text[:297] + "..."
  return (f"method {label!r} seed {seed} failed: {text}; the other runs go on "
          f"and are kept (results.failed has the error)")


# Checkpoint writing of one run is said (checkpoint_cost_line) when it took longer
# than the run's rounds and at least this many seconds.
CHECKPOINT_NOTE_S = 1.0


def checkpoint_cost_line(label, seed, count, seconds, wall_s, config) -> str:
  """One line: writing ``count`` checkpoints took ``seconds``, more than the
  ``wall_s`` of the rounds themselves (the record's ``wall_s`` leaves it out),
  and which key spaces them out."""
  return (f"note: {label} seed {seed}: writing {count} checkpoints took {seconds:.1f} s, "
          f"more than its {wall_s:.1f} s of rounds (not in the record's wall_s); "
          f"config.checkpoint_every={config.checkpoint_every} writes one every "
          f"{config.checkpoint_every} chunk(s) of eval_every={config.eval_every} rounds: "
          f"set it higher, or to 0 for only the end, to spend less")


def resume_hint(workdir) -> str:
  """How to resume (on the command line the workdir quoted as a shell would need
  it; from Python the call's ``workdir=``); without a workdir, where the runs so
  far are: nowhere on the command line, in the exception's ``results`` from Python."""
  if not workdir and _validation.on_command_line():
    return "no --workdir was given, so nothing was kept"
  if not workdir:   # from Python the runs so far came back with the exception
    return ("the runs so far are in e.results (a stopped one as partial); nothing was "
            "written to disk, as no workdir= was given (give one to keep checkpoints and "
            "resume)")
  where = _validation.setting("workdir", str(workdir))
  if _validation.on_command_line():
    return f"rerun the same command with {where} to resume"
  return f"call it again with the same {where} to resume"


def chunk_loop(runner, state, logs, *, start_round: int, end_round: int, rounds: int,
               eval_every: int, compile_fn: Callable, split: Callable = whole,
               bar: Optional[Progress] = None,
               after_chunk: Optional[Callable] = None,
               stop: Optional[Callable] = None):
  """Run chunks of rounds until ``end_round``, until no run is still running
  (each diverged or stopped at its target, :attr:`RunLog.running`), or until
  ``stop()`` says so (checked after each chunk, on the host: a batch of runs
  stops when every run in it has).

  Each chunk runs ``min(eval_every, rounds − r, end_round − r)`` rounds, then
  evaluates; its host metrics go to every run's log (``split(tree, i)``: run
  ``i``'s part), each getting an equal share of the chunk's wall time.

  Args:
    runner: a :class:`fedfrac.sim.Simulation` or :class:`BatchedSimulation`.
    state: its state (batched: stacked states).
    logs: one :class:`RunLog` per run in ``state``.
    compile_fn: ``compile_fn(num_rounds, state) -> seconds`` compiling a chunk.
    after_chunk: ``after_chunk(round, chunk_index, state, last)`` (e.g.
      checkpoints); ``last`` is True after the final chunk of this call.
    stop: ``stop() -> bool``, e.g. whether Ctrl-C was pressed.
  Returns:
    ``(state, compile seconds, last round run)``.
  """
  r, chunk_index, compile_s = start_round, 0, 0.0
  while r < end_round and any(log.running for log in logs):
    n = min(eval_every, rounds - r, end_round - r)
    compiled = compile_fn(n, state)
    compile_s += compiled
    for log in logs:   # each run's share, kept in its checkpoints with its wall time
      log.compile_s += compiled / len(logs)
    t0 = time.perf_counter()
    state, round_metrics = runner.run_chunk(state, n)
    evaluation = runner.evaluate(state)
    jax.block_until_ready((state, evaluation))
    dt = time.perf_counter() - t0
    round_metrics, evaluation = to_host(round_metrics), to_host(evaluation)
    row = None
    error = None
    for i, log in enumerate(logs):
      try:
        row = log.add_chunk(r, split(round_metrics, i), split(evaluation, i),
                            dt / len(logs)) or row
      except FloatingPointError as e:   # on_divergence="error": checkpoint first
        error = e
    r += n
    chunk_index += 1
    if bar is not None:
      bar.update(n, row, dt)
    signals.raise_if_swallowed()   # a Ctrl-C lost in a garbage-collection callback
    stopping = (error is not None or r >= end_round or (stop is not None and stop())
                or not any(log.running for log in logs))
    if after_chunk is not None:
      after_chunk(r, chunk_index, state, stopping)
    if error is not None:
      raise error
    if stopping:
      break
  return state, compile_s, r


def run_one(config, label, seed, fed_data, workdir=None, stop_after_round=None,
            progress=None, stop=None, keep_params=True) -> RunRecord:
  """Run one method for one seed; resume from ``workdir`` if it has a checkpoint
  (saying so in one line on stderr: ``resuming fedavg seed 0 from round 950``).

  The record's status is ``ok``, ``diverged at round r`` or ``partial`` (stopped
  by ``stop_after_round`` or ``stop()`` before ``config.rounds``). With
  ``config.stop_at_target`` the run ends after the chunk whose evaluation
  first reaches its target (status ``ok``, ``record.stopped`` says where and
  why); resumed, a run that stopped so is finished and runs no round. With
  ``on_divergence="error"`` the raised ``FloatingPointError`` carries the run's
  record as ``.record``. ``keep_params``: the record holds the final parameters
  (:meth:`Results.final_params`).
  """
  quiet_callback_tracebacks()   # a callback's exception is said in the failure line
  try:
    sim = factories.build_simulation(config, label, fed_data)
  except _validation.ConfigError:
    raise
  except ValueError as e:   # an option the method cannot use with this config
    raise _validation.ConfigError(f"config.methods.{label}: {e}") from None
  state = sim.init(seed)
  history, ckpt, bound = None, None, None
  if workdir:
    wd = Workdir(workdir)
    ckpt = wd.checkpointer(label, seed)
    bound = wd.binding(label)
    # Checkpoints hold K client rows as host arrays whatever the placement
    # (replicated or sharded by client); place_state puts them back.
    try:
      restored = ckpt.restore_latest(sim.host_state(state))
    except NoIntactCheckpoint as e:   # nothing to resume from: the run starts again
      print(f"{e.found}; restarting {label} seed {seed} from round 0", file=sys.stderr)
      ckpt.remove_steps()
      restored = None
    if restored is not None and bound is not None and BINDING in restored[2]:
      diffs = binding_differences(restored[2][BINDING], bound, label)
      if diffs:   # copied in from another experiment: never continued
        print(f"checkpoints in {ckpt.directory} are of another experiment "
              f"({shown_differences(diffs)}); restarting {label} seed {seed} "
              f"from round 0", file=sys.stderr)
        ckpt.remove_steps()
        restored = None
    if restored is not None and history_seed(restored[2]) not in (None, seed):
      # copied in from another seed's folder: never continued as this seed's
      print(f"checkpoints in {ckpt.directory} are of seed "
            f"{history_seed(restored[2])}, not seed {seed}; restarting {label} "
            f"seed {seed} from round 0", file=sys.stderr)
      ckpt.remove_steps()
      restored = None
    if restored is not None:
      step, state, history = restored
      state = sim.place_state(state)
  payload_bytes, message_bytes = sim.communication_bytes(state)
  log = RunLog(label, config.methods[label].name, seed, sim.algorithm.comm,
               payload_bytes, message_bytes, config.on_divergence, history,
               sim.algorithm.host_metrics, target=stop_target(config))
  if history is not None and log.running and step < config.rounds and (
      stop_after_round is None or step < stop_after_round):
    print(f"resuming {label} seed {seed} from round {step}", file=sys.stderr)
  start_round = int(state.round)
  if history is not None and "compile_s" not in history:
    # A checkpoint written before compile time was kept in it: the run's record
    # of the same rounds has it (a finished run found again keeps its own).
    try:
      kept = wd.read_record(label, seed, bound)
      if kept.round_rows == log.round_rows:
        log.compile_s = kept.compile_s
    except (OSError, ValueError):   # none, or not verified (sealed.Damaged)
      pass
  end_round = config.rounds if stop_after_round is None else min(config.rounds,
                                                                 stop_after_round)
  show = config.progress if progress is None else progress
  bar = Progress(show and log.running, config.rounds, f"{label} seed {seed}",
                 start_round)

  saving = [0, 0.0]   # checkpoints written, seconds spent writing them

  def save(r, chunk_index, state, last):
    if ckpt and (last or not log.running or (
        config.checkpoint_every and chunk_index % config.checkpoint_every == 0)):
      t = time.perf_counter()
      extra = {"rounds": config.rounds, "method": label, "seed": int(seed)}
      if bound is not None:
        extra[BINDING] = bound
      ckpt.save(r, sim.host_state(state), {**log.history(), **extra})
      saving[0], saving[1] = saving[0] + 1, saving[1] + time.perf_counter() - t
  done = start_round
  try:
    state, _, done = chunk_loop(
        sim, state, [log], start_round=start_round, end_round=end_round,
        rounds=config.rounds, eval_every=config.eval_every,
        compile_fn=lambda n, _: sim.compile(n), bar=bar, after_chunk=save, stop=stop)
  except FloatingPointError as e:
    e.record = log.record()
    raise
  finally:
    bar.close()
  record = log.record(partial=done < config.rounds)
  if saving[1] > max(record.wall_s, CHECKPOINT_NOTE_S):
    print(checkpoint_cost_line(label, seed, saving[0], saving[1], record.wall_s, config),
          file=sys.stderr)
  if keep_params:
    host = sim.host_state(state)
    record.params = final_params(sim.algorithm, host.server, host.clients,
                                 sim.num_clients)
  return record


def build_data(config, data_seed, user_data=None):
  """``data_lib.build`` (of ``user_data``, your own data checked by
  :func:`fedfrac.data.arrays.user_data`, when given: a FederatedData is used as
  it is); a request the data cannot meet (e.g. more clients than samples allow)
  is a :class:`ConfigError` naming the data section."""
  if isinstance(user_data, data_lib.FederatedData):
    return user_data
  try:
    return data_lib.build(config.data, data_seed, dataset=user_data)
  except (_validation.ConfigError, data_lib.DataFileError):
    raise
  except ValueError as e:
    raise _validation.ConfigError(f"config.data (data seed {data_seed}): {e}") from None


def data_seed(config, seed):
  return seed if config.data.seed < 0 else config.data.seed
