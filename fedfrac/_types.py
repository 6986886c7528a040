"""Type aliases shared by the annotated packages (ops, optim, data, algorithms)."""
from __future__ import annotations

from typing import Any

# A JAX pytree (nested dicts / lists / tuples / NamedTuples of arrays). JAX has no
# precise static type for it, so it is ``Any`` to the type checker; the name says
# what is expected.
PyTree = Any
