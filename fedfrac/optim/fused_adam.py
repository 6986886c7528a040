"""One-pass Adam step for XLA:CPU (``engine.fused_adam``).

XLA:CPU forms no multi-output loop fusion, so optax.adam followed by
``p + lr * u`` runs as three loops per parameter leaf (one each for the new
first moment, second moment and parameter, the last two recomputing the
moments): three memory passes over every leaf on each local step. On FIRMA's
Fashion-MNIST MLP that is about 0.55 ms of a 1.3 ms step (docs/design.md
§2.5). :func:`for_client` returns a step that does the same in one pass, an
XLA FFI handler (``native/adam_cpu.cc``) compiled on first use with the C++
compiler of the machine into fedfrac's cache directory; the local-training
loop (:func:`fedfrac.algorithms.local_training.local_train`) calls it in place
of ``optimizer.update`` + ``p + lr * u`` + the masked-step select.

The numbers: the handler computes what XLA:CPU compiles optax.adam to in a
loop of local steps (XLA's simplifier turns ``(m/bc1)/(s + eps)`` into
``m/(bc1 (s + eps))`` and LLVM contracts multiply-adds, see the source), and
equals it bit for bit there, also vmapped or mapped over clients
(``tests/optim/test_fused_adam.py``). Inside the engine XLA fuses the optax
step with the gradient's last operations and rewrites it differently from one
program to the next (the optax path itself differs between vmapped and mapped
clients at float rounding), so engine runs agree with the default path to
float rounding per step, not bit for bit; hence off by default, and
committed tables are computed without it.

Adam (Kingma & Ba 2015, Algorithm 1) as optax writes it, per element:
  m' = (1 − β1) g + β1 m,   v' = (1 − β2) g² + β2 v,
  p' = p − lr · (m' / (1 − β1^t)) / (sqrt(v' / (1 − β2^t)) + ε).
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

TARGET = "fedfrac_adam_step"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native", "adam_cpu.cc")
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-std=c++17",
         "-shared", "-fPIC", "-w")
ENV_DIR = "FEDFRAC_NATIVE_DIR"      # where the compiled handler is kept

_state: dict = {}                   # "registered": bool, "why": reason it is not


def cache_dir() -> str:
  """``$FEDFRAC_NATIVE_DIR``, else ``$XDG_CACHE_HOME/fedfrac/native`` (``~/.cache``)."""
  if os.environ.get(ENV_DIR):
    return os.environ[ENV_DIR]
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "fedfrac", "native")


def _cpu_flags() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      return next((line for line in f if line.startswith("flags")), "")
  except OSError:
    return ""


def library_path() -> str:
  """The compiled handler's path: named by a digest of its source, the compiler
  flags, jaxlib's version and the CPU's features (``-march=native``)."""
  import jaxlib
  with open(SOURCE, "rb") as f:
    digest = hashlib.sha256(f.read())
  digest.update(" ".join(FLAGS).encode())
  digest.update(jaxlib.__version__.encode())
  digest.update(_cpu_flags().encode())
  return os.path.join(cache_dir(), f"adam_cpu-{digest.hexdigest()[:16]}.so")


def build(path: Optional[str] = None) -> str:
  """Compile the handler to ``path`` (default :func:`library_path`) unless it is
  there; written to a temporary name and renamed, so processes building it at
  once never load half a file. Raises ``RuntimeError`` with the reason."""
  path = path or library_path()
  if os.path.exists(path):
    return path
  compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
  if not compiler:
    raise RuntimeError("no C++ compiler (g++, c++ or $CXX) found")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
  os.close(fd)
  try:
    try:
      proc = subprocess.run([compiler, *FLAGS, f"-I{jax.ffi.include_dir()}", SOURCE,
                             "-o", tmp], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
      raise RuntimeError(f"{compiler} could not run: {e}") from None
    if proc.returncode != 0:
      raise RuntimeError(f"{compiler} failed: {' '.join(proc.stderr.split())[-500:]}")
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
  return path


def available() -> bool:
  """Whether the one-pass step can run here: CPU backend, the handler compiled
  and registered (once per process; the reason it is not is :func:`why_not`)."""
  if jax.default_backend() != "cpu":
    _state["why"] = f"backend {jax.default_backend()}: the handler is CPU-only"
    return False
  if "registered" not in _state:
    try:
      lib = ctypes.cdll.LoadLibrary(build())
      jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.FedfracAdamStep),
                                  platform="cpu")
      _state["registered"] = True
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
      _state["registered"], _state["why"] = False, str(e)
  return bool(_state["registered"])


def why_not() -> str:
  """Why :func:`available` is False ('' when it is True or was not asked)."""
  return _state.get("why", "")


@dataclasses.dataclass(frozen=True)
class FusedAdam:
  """Adam's local step in one pass, equal to ``optax.adam(1.0, b1, b2, eps)``'s
  update applied as ``p + lr * u``, on its state ``(ScaleByAdamState,
  EmptyState)``. Hashable (it sits in the static ``LocalTraining``)."""
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8

  def __call__(self, grads, opt_state, params, lr, active=True):
    """``(params', opt_state')`` after one step of learning rate ``lr`` (scalar);
    ``active`` False leaves both as they are (a masked step). Float32 leaves."""
    adam, rest = opt_state
    count = optax.safe_increment(adam.count)
    # optax's bias corrections, 1 − β^t, computed as optax computes them.
    bc1 = (1 - self.b1 ** count).astype(jnp.float32)
    bc2 = (1 - self.b2 ** count).astype(jnp.float32)
    act = jnp.asarray(active, jnp.float32)
    rate = jnp.asarray(lr, jnp.float32)
    attrs = dict(b1=np.float32(self.b1), c1=np.float32(1 - self.b1),
                 b2=np.float32(self.b2), c2=np.float32(1 - self.b2),
                 eps=np.float32(self.eps))

    def leaf(p, m, v, g):
      out = jax.ShapeDtypeStruct(p.shape, jnp.float32)
      return jax.ffi.ffi_call(TARGET, (out, out, out), vmap_method="broadcast_all")(
          p, m, v, g, rate, bc1, bc2, act, **attrs)

    triples = jax.tree.map(leaf, params, adam.mu, adam.nu, grads)
    treedef = jax.tree.structure(params)
    parts = [treedef.unflatten(list(x))
             for x in zip(*treedef.flatten_up_to(triples))]
    new_params, mu, nu = parts
    adam = adam._replace(count=jnp.where(act != 0, count, adam.count), mu=mu, nu=nu)
    return new_params, (adam, rest)

  @staticmethod
  def applies_to(params) -> bool:
    """Float32 leaves only (the handler's type); else the optax path."""
    return all(getattr(x, "dtype", None) == jnp.float32 for x in jax.tree.leaves(params))


def for_client(optimizer: str, weight_decay: float = 0.0, b1: float = 0.9,
               b2: float = 0.999, eps: float = 1e-8) -> Optional[Any]:
  """The one-pass step for a client optimizer (``client.optimizer``), or None where
  the optax path runs: another optimizer, or weight decay (``engine.fused_adam``
  asks for it only where :func:`available`)."""
  if optimizer != "adam" or weight_decay:
    return None
  return FusedAdam(b1, b2, eps) if available() else None
