"""Matrix-product precision of a simulation (``config.engine.matmul_precision``).

Every matrix product and convolution the engine traces (local steps, the
server step, evaluation) runs under ``jax.default_matmul_precision`` of the
setting:

* ``highest`` (default): full float32 products (``lax.Precision.HIGHEST``); on a
  CPU this is what XLA computes anyway, so it changes no number there.
* ``tensorfloat32``: float32 inputs rounded to TF32 (10-bit mantissa) inside
  the product, float32 accumulation: NVIDIA tensor cores (Ampere and later).
* ``bfloat16``: one bfloat16 pass (8-bit mantissa), float32 accumulation.

Parameters, optimizer state and every other array stay float32; only the
products' inputs are rounded. A fast mode is safe for a table when its numbers
stay within the seeds' spread (``fedfrac-bench`` measures both).
"""
from __future__ import annotations


import jax

PRECISIONS = ("highest", "tensorfloat32", "bfloat16")


def check_matmul_precision(value) -> None:
  """Raise ValueError unless ``engine.matmul_precision`` is one of :data:`PRECISIONS`."""
  if value not in PRECISIONS:
    raise ValueError(f"engine.matmul_precision={value!r}: allowed values are "
                     f"{', '.join(PRECISIONS)}")


def scope(value: str):
  """Context in which traced products use precision ``value`` (enter it inside
  the traced function: JAX reads the setting when a product is traced)."""
  check_matmul_precision(value)
  return jax.default_matmul_precision(value)


def traced(fn, value: str):
  """``fn`` traced under :func:`scope` ``(value)``."""
  check_matmul_precision(value)

  def wrapped(*args, **kwargs):
    with scope(value):
      return fn(*args, **kwargs)
  wrapped.__name__ = getattr(fn, "__name__", "traced")
  wrapped.__doc__ = fn.__doc__
  return wrapped


