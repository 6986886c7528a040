"""fedfrac.sim.evaluate: one evaluation program shared by the methods whose
evaluated parameters have the same structure, with the numbers of each method's
own program."""
from __future__ import annotations

import dataclasses

import jax
import ml_collections
import numpy as np

from fedfrac.runner import factories
from fedfrac.runner.chunked import build_data
from tests.helpers import tiny_config

# Global models of one structure (fedavg; scaffold, whose states also hold
# control variates) and a personalised one (fibfl: each client's model).
METHODS = ("fedavg", "scaffold", "fibfl")


def _simulations(methods=METHODS):
  config = tiny_config(rounds=2)
  for name in methods:
    config.methods[name] = ml_collections.ConfigDict(dict(name=name))
  fed = build_data(config, 0)
  return {name: factories.build_simulation(config, name, fed) for name in methods}


def test_methods_with_the_same_evaluated_structure_share_one_program_with_equal_numbers():
  sims = _simulations()
  states = {}
  for name, sim in sims.items():
    state = states[name] = sim.init(0)
    shared = jax.tree.map(np.asarray, sim.evaluate(state))
    own = jax.tree.map(np.asarray, jax.jit(sim._evaluate)(sim.arrays, state))
    assert shared.keys() == own.keys()
    for key in own:   # the method's own one-program evaluation, bit for bit
      np.testing.assert_array_equal(shared[key], own[key], err_msg=f"{name} {key}")
  programs = {name: sim._eval_program for name, sim in sims.items()}
  assert programs["fedavg"] is programs["scaffold"]
  assert programs["fibfl"] is not programs["fedavg"]   # every client's model: its own
  # A program is keyed by what it computes: another batch size is another program.
  other = _simulations(("fedavg",))["fedavg"]
  other.config = dataclasses.replace(other.config, eval_batch_size=7)
  other.evaluate(states["fedavg"])
  assert other._eval_program is not programs["fedavg"]


def test_batched_runs_share_the_program_too_with_the_numbers_of_one_vmapped_program():
  from fedfrac.sim.batched import BatchedSimulation
  from fedfrac.sim.state import STATE_AXES
  sims = _simulations(("fedavg", "scaffold"))
  batches = {name: BatchedSimulation(sim, [sim.data, sim.data]) for name, sim in sims.items()}
  for name, batch in batches.items():
    states = batch.init([0, 1])
    shared = jax.tree.map(np.asarray, batch.evaluate(states))
    own = jax.jit(jax.vmap(sims[name]._evaluate, in_axes=(batch.in_axes, STATE_AXES, None)))(
        batch.arrays, states, None)
    for key, value in jax.tree.map(np.asarray, own).items():
      assert value.shape[0] == 2
      np.testing.assert_array_equal(shared[key], value, err_msg=f"{name} {key}")
  assert batches["fedavg"]._eval_compiled is batches["scaffold"]._eval_compiled


def test_the_shared_program_is_keyed_by_the_parameter_tree_too():
  """A flax module run as ``Net()`` (its head inside the extractor) and then as
  ``flax_model(Net(), head="head")`` gives the same leaves in another tree: the
  same program text. The cache returned the first executable for the second
  tree ("Function compiled with input pytree does not match"), until a restart."""
  import jax.numpy as jnp
  from fedfrac.sim import evaluate
  w, b, h = jnp.ones((3, 2)), jnp.ones((2,)), jnp.full((2, 2), 2.0)
  unsplit = {"extractor": {"Dense_0": {"b": b, "w": w}, "head": {"kernel": h}}, "head": {}}
  split = {"extractor": {"Dense_0": {"b": b, "w": w}}, "head": {"kernel": h}}

  def metrics(params):
    leaves = jax.tree.leaves(params)
    return {"total": sum(jnp.sum(x) for x in leaves)}
  first = evaluate.shared_program(metrics, unsplit)
  second = evaluate.shared_program(metrics, split)
  assert float(first(unsplit)["total"]) == float(second(split)["total"]) == 16.0
  assert evaluate.shared_program(metrics, split) is second   # still shared
