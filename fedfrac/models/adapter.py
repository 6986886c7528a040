"""Your own flax module as a fedfrac model.

fedfrac's model protocol (:class:`fedfrac.models.base.Model`): parameters are
``{"extractor": ..., "head": ...}`` (personalised methods such as FedRep and the
FIRMA ring keep the head per client and share the extractor; MOON and FDSE read
the extractor's features, the head's input) and the module is called as
``module.apply({"params": p}, x, train=..., rngs=..., return_features=...)``.
The built-in models are ``SplitModel(extractor, head)`` modules.

:class:`FlaxAdapter` runs a plain ``flax.linen`` module — one whose
``__call__(x)`` takes no ``train`` argument and whose parameters are not split —
under that protocol: its top-level submodule named ``head`` (e.g. the last
``nn.Dense(..., name="head")``, or the automatic name ``"Dense_1"``) becomes
``params["head"]``, every other top-level entry ``params["extractor"]``, and
the features are the head's input, captured while the module runs
(``flax.linen.intercept_methods``). A module given as it is (``model=Net()``,
``head=None``) whose top-level submodule is named ``"head"`` has that as its
head. Without a head every parameter is in the extractor: global methods
(FedAvg, FedProx, the fractional family, ...) run as usual, and a method that
keeps the head per client (FedRep, the FIRMA ring) or reads its features says
so in one line before compute. A ``train`` (or
``deterministic``) argument of ``__call__`` is passed when the module has one;
a module that draws randomness when evaluated (``nn.Dropout(deterministic=False)``)
is refused in one line saying to drive dropout by ``train``.
Only parameters are federated: a module with other variable collections
(BatchNorm's ``batch_stats``) is refused (use LayerNorm or GroupNorm).
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Optional

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp

from fedfrac.models.base import Model


def _call_arguments(module: nn.Module) -> set:
  try:
    return set(inspect.signature(type(module).__call__).parameters)
  except (TypeError, ValueError):
    return set()


# The head a module given without one has, when it has a top-level submodule so named.
DEFAULT_HEAD = "head"


@dataclasses.dataclass(frozen=True)
class FlaxAdapter:
  """``init`` / ``apply`` of fedfrac's protocol around a plain flax ``module``
  (see the module docstring); ``head`` names its top-level head submodule
  (None: the one named ``"head"`` if there is one)."""
  module: nn.Module
  head: Optional[str] = None

  def _head_in(self, params: dict) -> Optional[str]:
    """The head's name among the module's own top-level ``params``."""
    if self.head is not None:
      return self.head
    return DEFAULT_HEAD if DEFAULT_HEAD in params else None

  def _head_of(self, split: dict) -> Optional[str]:
    """The head's name, from fedfrac's ``{"extractor", "head"}`` parameters."""
    if self.head is not None:
      return self.head
    return DEFAULT_HEAD if jax.tree.leaves(split["head"]) else None

  def _mode(self, train: bool) -> dict:
    args = _call_arguments(self.module)
    if "train" in args:
      return {"train": train}
    if "deterministic" in args:
      return {"deterministic": not train}
    return {}

  def init(self, rngs, x) -> dict:
    variables = dict(self.module.init(rngs, x, **self._mode(False)))
    other = sorted(k for k in variables if k != "params")
    if other:
      raise ValueError(f"model: {type(self.module).__name__} has variable collections "
                       f"{', '.join(other)} besides its parameters; fedfrac federates "
                       f"parameters only (use LayerNorm or GroupNorm instead of BatchNorm)")
    params = dict(variables.get("params", {}))
    head: Any = {}
    if self.head is not None and self.head not in params:
      raise ValueError(f"model.head={self.head!r}: {type(self.module).__name__} has no "
                       f"top-level submodule of that name; its submodules are "
                       f"{', '.join(map(repr, params)) or '(none)'}")
    name = self._head_in(params)
    if name is not None:
      head = params.pop(name)
    return {"params": {"extractor": params, "head": head}}

  def module_params(self, params) -> dict:
    """fedfrac's ``{"extractor", "head"}`` parameters in the module's own
    structure (``module.apply({"params": module_params(p)}, x)`` runs it)."""
    inner = dict(params["extractor"])
    name = self._head_of(params)
    if name is not None:
      inner[name] = params["head"]
    return inner

  def apply(self, variables, x, train: bool = False, rngs=None,
            return_features: bool = False):
    inner = self.module_params(variables["params"])
    kwargs = dict(self._mode(train), rngs=rngs) if rngs else self._mode(train)
    if not return_features:
      return self.module.apply({"params": inner}, x, **kwargs)
    head = self._head_of(variables["params"])
    if head is None:
      raise ValueError(f"model.head=None: this method reads the features that enter the "
                       f"model's head; name the head submodule of "
                       f"{type(self.module).__name__}: ff.models.flax_model(module, "
                       f"head='...')")
    captured = []

    def grab(next_fun, args, kw, context):
      if context.method_name == "__call__" and getattr(context.module, "path",
                                                        None) == (head,):
        captured.append(args[0])
      return next_fun(*args, **kw)
    with nn.intercept_methods(grab):
      out = self.module.apply({"params": inner}, x, **kwargs)
    features = captured[0]
    return out, features.reshape((features.shape[0], -1))


def _rng_message(name: str, error: Exception) -> str:
  """One line for a module that draws randomness (dropout) when evaluated: what
  flax said, how fedfrac calls the module and what to change."""
  said = str(error).split(" (https://")[0]
  return (f"model: {name} draws randomness when evaluated ({said}): fedfrac calls its "
          f"__call__(x, train=...) with train=True and a 'dropout' rng while clients "
          f"train, train=False and no rng to evaluate; give __call__ a train argument "
          f"and build dropout as nn.Dropout(rate, deterministic=not train)")


def flax_model(module: nn.Module, head: Optional[str] = None) -> FlaxAdapter:
  """A plain flax ``module`` for ``ff.run(config, model=...)``; ``head`` names
  its top-level submodule that personalised methods keep per client (None: the
  one named ``"head"`` if any; see the module docstring)."""
  if isinstance(module, type) and issubclass(module, nn.Module):
    raise TypeError(f"model: {module.__name__} is a flax.linen Module class; pass an "
                    f"instance, e.g. {module.__name__}()")
  if not isinstance(module, nn.Module):
    raise TypeError(f"model: expected a flax.linen Module, got {type(module).__name__}")
  if head is not None and not isinstance(head, str):
    raise TypeError(f"model.head={head!r}: must be the name of a submodule (a string)")
  return FlaxAdapter(module, head)


def adapted_model(adapter: FlaxAdapter, input_shape, num_outputs, input_scale=1.0,
                  input_mean=(), input_std=(), name: str = "") -> Model:
  """The :class:`Model` running ``adapter`` on inputs of ``input_shape``; its
  outputs must be ``[B, num_outputs]`` (``[B]`` or ``[B, 1]`` for one output)."""
  model = Model(adapter, tuple(input_shape), int(num_outputs), float(input_scale),
                name or type(adapter.module).__name__, tuple(input_mean), tuple(input_std))
  x = jax.ShapeDtypeStruct((2,) + tuple(input_shape), jnp.float32)
  try:
    params = jax.eval_shape(model.init, jax.random.PRNGKey(0))
    out = jax.eval_shape(lambda p, v: model.apply(p, v), params, x)
  except flax.errors.InvalidRngError as e:
    raise ValueError(_rng_message(type(adapter.module).__name__, e)) from None
  shape = tuple(getattr(out, "shape", ()))
  allowed = {(2, int(num_outputs))} | ({(2,), (2, 1)} if int(num_outputs) == 1 else set())
  if shape not in allowed:
    raise ValueError(f"model: {type(adapter.module).__name__} gives outputs of shape "
                     f"{shape} for a batch of 2 inputs {tuple(input_shape)}; expected "
                     f"(2, {int(num_outputs)}) (one output per class, or 1 for "
                     f"regression)")
  return model
