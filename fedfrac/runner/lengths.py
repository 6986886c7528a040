"""A run kept in a workdir is continued only at a length whose rounds are its own.

Each checkpoint stores the length its run was asked for (``rounds``). A rerun
with another ``config.rounds`` resumes that run (extending a finished one, or
finishing a partial one at the new length); its rounds so far are then those
of the other length's program. They are the same rounds only when the
method's program does not depend on ``rounds``: a constant or ``inv_sqrt``
learning rate does not, a ``cosine`` schedule or FibFL++'s warm-up does.
:func:`check_continued` finds out by tracing one round and the evaluation of
the method at both lengths (``jax.make_jaxpr``: nothing is compiled or run)
and refuses, in one line before any compute, to continue a run whose program
differs, as a shorter length than a run already ran is refused
(:func:`fedfrac.runner.workdir.check_lengths`).
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from fedfrac._validation import ConfigError, argument, setting
from fedfrac.runner import factories
from fedfrac.runner.workdir import Workdir


def _program(config, label, fed_data):
  """The traced round and evaluation of method ``label``: their text and constants."""
  sim = factories.build_simulation(config, label, fed_data)
  state = jax.eval_shape(sim.init, 0)
  chunk = functools.partial(sim._run_chunk, hp=None, num_rounds=1)
  rounds = jax.make_jaxpr(chunk)(sim.arrays, state)
  evaluation = jax.make_jaxpr(sim._evaluate)(sim.arrays, state)
  return str(rounds) + str(evaluation), [np.asarray(c) for c in
                                          rounds.consts + evaluation.consts]


def depends_on_rounds(config, label, fed_data, other_rounds) -> bool:
  """Whether method ``label``'s program for ``config.rounds`` differs from its
  program for ``other_rounds`` rounds (on ``fed_data``)."""
  other = config.copy_and_resolve_references()
  other.rounds = int(other_rounds)
  text, consts = _program(config, label, fed_data)
  other_text, other_consts = _program(other, label, fed_data)
  return (text != other_text or len(consts) != len(other_consts)
          or not all(a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
                     for a, b in zip(consts, other_consts)))


def check_continued(config, workdir, jobs, data_for_seed) -> None:
  """Refuse (:class:`ConfigError`, one line) to continue a run of ``jobs``
  [(label, seed)] (grid runs ``label[option=value]`` included) whose checkpoint
  was written for another length than ``config.rounds`` when the method's
  program depends on it
  (``data_for_seed(seed)``: the run's data)."""
  verdicts = {}
  wd = Workdir(workdir)
  for label, seed in jobs:
    found = wd.latest_history(label, seed, wd.binding(label))
    if found is None:
      continue
    step, history = found
    asked = history.get("rounds")
    if not step or asked is None or int(asked) == config.rounds:
      continue
    asked = int(asked)
    method = label.split("[", 1)[0]   # a grid run ``label[option=value]``: its method's
    if (method, asked) not in verdicts:
      verdicts[(method, asked)] = depends_on_rounds(config, method, data_for_seed(seed),
                                                    asked)
    if not verdicts[(method, asked)]:
      continue
    done = step >= asked or bool(history.get("stopped"))   # finished, or at its target
    ran = (f"ran {step} rounds of a {asked}-round run" if step >= asked else
           f"stopped at its target at round {step} of a {asked}-round run"
           if history.get("stopped") else f"stopped at round {step} of a {asked}-round run")
    raise ConfigError(
        f"{setting('workdir', str(workdir))}: {label} seed {seed} {ran}, and "
        f"{label}'s program depends on config.rounds (a learning-rate schedule or a "
        f"warm-up over the rounds), so its rounds are not those of a "
        f"{config.rounds}-round run; give {setting('config.rounds', asked)} to "
        f"{'report' if done else 'finish'} it, another {argument('workdir')}, or "
        f"{setting('overwrite', method)} to run it for {config.rounds} rounds")
