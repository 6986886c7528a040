"""Byzantine clients inside a simulated round.

A fixed set of Byzantine clients per seed (``ops.attacks.byzantine_mask``, kept
in ``SimState.byzantine``) whose uploaded messages are transformed after
``client_update`` (sign flip, Gaussian noise, scaling), or whose labels are
flipped (y -> C − 1 − y) in the view their ``client_update`` trains on. Honest
clients run exactly as without an attack.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp

from fedfrac.ops import attacks as attacks_lib
from fedfrac.sim.stages import Cohort, Stage

ATTACKS = ("none", "sign_flip", "gaussian", "scaled", "label_flip")
MESSAGE_ATTACKS = ("sign_flip", "gaussian", "scaled")
ATTACK_TAG = 0x7FFFFFFE   # folded into a Byzantine client's key for its attack noise


@dataclasses.dataclass(frozen=True)
class AttackConfig:
  """Byzantine clients, fixed per seed.

  Attributes:
    kind: ``none``; ``sign_flip`` (upload −scale·m instead of the message m);
      ``gaussian`` (upload N(0, std² I) noise of the message's shape);
      ``scaled`` (upload scale·m); ``label_flip`` (train on labels C − 1 − y).
    fraction: share of the K clients that are Byzantine: round(fraction·K)
      clients chosen by ``ops.attacks.byzantine_mask(K, fraction, seed)``.
    scale: factor of ``sign_flip`` / ``scaled``.
    std: noise standard deviation of ``gaussian``.
    seed: seed of the Byzantine set; None = the run's seed.
  Message attacks change only floating-point leaves of the message.
  """
  kind: str = "none"
  fraction: float = 0.0
  scale: float = 1.0
  std: float = 1.0
  seed: Optional[int] = None

  @property
  def active(self) -> bool:
    return self.kind != "none"


def active_attack(attack: Optional[AttackConfig], classification: bool):
  """``attack`` if it does anything (checked), else None."""
  if attack is None or not attack.active:
    return None
  check_kind(attack.kind, classification)
  return attack


def check_kind(kind, classification: bool) -> None:
  """Raise ValueError unless ``attack.kind`` is allowed (label flipping needs
  class labels)."""
  if kind not in ATTACKS:
    raise ValueError(f"attack.kind={kind!r}: allowed values are {', '.join(ATTACKS)}")
  if kind == "label_flip" and not classification:
    raise ValueError("attack.kind='label_flip': label_flip needs a classification "
                     "task (task.loss='cross_entropy')")


def byzantine_clients(attack: Optional[AttackConfig], num_clients: int, seed):
  """``[K]`` bool mask of the run's Byzantine clients (None without an attack)."""
  if attack is None:
    return None
  attack_seed = seed if attack.seed is None else attack.seed
  if isinstance(attack_seed, jax.core.Tracer):   # under eval_shape: shape only
    attack_seed = 0
  return jnp.asarray(attacks_lib.byzantine_mask(num_clients, attack.fraction,
                                                int(attack_seed)))


def attack_message(message, attack: AttackConfig, byzantine, key):
  """The message a client uploads: attacked if ``byzantine`` (bool scalar), else
  ``message`` unchanged (bit for bit). ``key``: the client's round key."""
  leaves, treedef = jax.tree.flatten(message)
  floats = [i for i, x in enumerate(leaves) if jnp.issubdtype(jnp.result_type(x),
                                                               jnp.inexact)]
  honest = [leaves[i] for i in floats]
  if attack.kind == "sign_flip":
    bad = attacks_lib.sign_flip(honest, attack.scale)
  elif attack.kind == "scaled":
    bad = attacks_lib.scaled_update(honest, attack.scale)
  elif attack.kind == "gaussian":
    bad = attacks_lib.gaussian_attack(honest, jax.random.fold_in(key, ATTACK_TAG),
                                      attack.std)
  else:
    return message
  out = list(leaves)
  for i, h, b in zip(floats, honest, bad):
    out[i] = jnp.where(byzantine, b, h)
  return jax.tree.unflatten(treedef, out)


def cohort_poisoned_labels(arrays, ids, byzantine, num_classes):
  """Train labels ``[N]`` with every row owned by a label-flipping client of the
  cohort flipped (y -> C − 1 − y). Partitions give each row to one client and a
  client's index row is padded with its own first row, so a Byzantine client
  reads only flipped labels and an honest one only its own, clean labels."""
  rows = arrays["client_index"][ids]                                # [S, n_max]
  owned = jnp.broadcast_to(byzantine[:, None], rows.shape).astype(jnp.int32)
  hit = jnp.zeros(arrays["y"].shape, jnp.int32).at[rows].max(owned) > 0
  return jnp.where(hit, attacks_lib.label_flip(arrays["y"], num_classes), arrays["y"])


class Byzantine(Stage):
  """Byzantine clients as a stage of the round: the cohort's flags (from
  ``SimState.byzantine``, fixed per seed) and their count in the round metrics.
  The two kinds of attack are the two subclasses below."""

  def __init__(self, attack: AttackConfig):
    self.attack = attack

  def cohort(self, cohort: Cohort, arrays, state) -> Cohort:
    return cohort._replace(byzantine=state.byzantine[cohort.ids])

  def metrics(self, cohort: Cohort) -> dict:
    return {"clients/byzantine": cohort.byzantine,
            "byzantine_clients": jnp.sum((cohort.byzantine & cohort.mask)
                                         .astype(jnp.float32))}


class MessageAttack(Byzantine):
  """``sign_flip``, ``gaussian``, ``scaled``: a Byzantine client's uploaded
  message is transformed after its ``client_update`` (:func:`attack_message`)."""

  def client(self, out, byzantine, key):
    return (attack_message(out[0], self.attack, byzantine, key),) + tuple(out[1:])


class LabelFlip(Byzantine):
  """``label_flip``: the cohort's Byzantine clients train on labels C − 1 − y,
  flipped once per round in the shared train labels (:func:`cohort_poisoned_labels`),
  which the cohort hook (``prepare_cohort``) and ``client_update`` both read."""

  def __init__(self, attack: AttackConfig, num_classes: int):
    super().__init__(attack)
    self.num_classes = num_classes

  def data(self, arrays, cohort: Cohort):
    y = cohort_poisoned_labels(arrays, cohort.ids, cohort.byzantine, self.num_classes)
    return {**arrays, "y": y}


def attack_stage(attack: Optional[AttackConfig], num_classes: int):
  """The stage of an active attack (:func:`active_attack`), ``None`` without one."""
  if attack is None:
    return None
  if attack.kind == "label_flip":
    return LabelFlip(attack, num_classes)
  return MessageAttack(attack)
