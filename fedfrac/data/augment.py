"""Training-data augmentation on device: random crop after zero padding,
horizontal flip and Cutout as pure keyed JAX functions (``data.augment``).

``data.augment`` is a comma-separated list of ops applied in order to every
training batch, inside the compiled local-step loop
(:func:`fedfrac.algorithms.local_training.local_train`), never to evaluation data:

* ``crop:SIZE:PAD`` — torchvision's ``RandomCrop(SIZE, padding=PAD)``: pad PAD
  zero pixels on every side, then take a SIZE × SIZE window at a uniform random
  offset (row and column each in ``0 … H + 2·PAD − SIZE``). The model takes whole
  images, so SIZE must equal the image's height and width.
* ``flip`` — ``RandomHorizontalFlip()``: mirror the columns with probability 1/2.
* ``cutout:SIZE`` — Cutout (DeVries & Taylor 2017, as in the Kuramoto-FedAvg
  authors' loaders): a centre (row, column) uniform over the image, and the rows
  ``[r − SIZE//2, r + SIZE//2)`` × columns ``[c − SIZE//2, c + SIZE//2)`` clipped to
  the image are filled with the input mean (``data.input_mean`` in the model's
  [0, 1] units, 0 when unset), i.e. with 0 after normalisation: the authors apply
  Cutout after ``Normalize``, multiplying the normalised pixels by 0.

``"crop:28:4,flip,cutout:16"`` is the Kuramoto-FedAvg authors' MNIST /
Fashion-MNIST training transform. Images are ``[H, W, C]`` per example in their
stored units (uint8 0…255, or floats); the ops work in float32 and the model's
``input_scale`` / normalisation apply afterwards, as for unaugmented batches.

Randomness: the batch at local step h of a client draws from
``fold_in(fold_in(client_key, AUGMENT_STREAM), h)``, example b from
``split(·, B)[b]`` and op i from ``fold_in(·, i)`` — the client's own round key
(``fold_in`` of its id, see fedfrac.sim.round), so the images depend on the run's
key, the round, the client and the step only: not on the cohort order, and the
same under ``vmap`` as in a per-client loop.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp

from fedfrac._validation import fail

OPS = {"crop": 2, "flip": 0, "cutout": 1}       # op -> number of integer arguments
SYNTAX = "crop:SIZE:PAD, flip, cutout:SIZE"
# fold_in tag of the augmentation stream of a client's round key (any constant
# other than the tags the engine folds in; 'aug' in ASCII).
AUGMENT_STREAM = 0x617567


def parse(text: str) -> tuple:
  """``data.augment`` -> ``((name, args), ...)`` (``()`` when ``text`` is empty).

  Raises ConfigError naming the key and value on an unknown op, a missing or
  extra argument, or an argument that is not an integer in range."""
  if not isinstance(text, str):
    fail("data.augment", text, f"must be a string of comma-separated ops ({SYNTAX}); "
         f"'' = off")
  ops = []
  for item in filter(None, (part.strip() for part in text.split(","))):
    name, *args = item.split(":")
    if name not in OPS:
      fail("data.augment", text, f"unknown op {name!r}; allowed: {SYNTAX}")
    if len(args) != OPS[name]:
      fail("data.augment", text, f"op {item!r} takes {OPS[name]} integer argument(s): "
           f"{SYNTAX}")
    if not all(a.strip().isdigit() for a in args):
      fail("data.augment", text, f"op {item!r}: arguments must be integers >= 0")
    values = tuple(int(a) for a in args)
    if name in ("crop", "cutout") and values[0] < 1:
      fail("data.augment", text, f"op {item!r}: SIZE must be >= 1")
    ops.append((name, values))
  return tuple(ops)


@dataclasses.dataclass(frozen=True)
class Augmentation:
  """Parsed ``data.augment`` for images of ``image_shape`` ``(H, W, C)``.

  ``fill``: Cutout's value per channel in the stored input units. Hashable, so it
  can sit in the static :class:`~fedfrac.algorithms.local_training.LocalTraining`.
  """
  ops: tuple
  image_shape: tuple
  fill: tuple

  def __call__(self, client_key: jax.Array, step, x: jax.Array) -> jax.Array:
    """The training batch ``x [B, H, W, C]`` of local step ``step`` of the client
    whose round key is ``client_key``, augmented: float32 ``[B, H, W, C]``."""
    return self.batch(jax.random.fold_in(jax.random.fold_in(client_key, AUGMENT_STREAM),
                                         step), x)

  def batch(self, key: jax.Array, x: jax.Array) -> jax.Array:
    """Augment a batch ``x [B, H, W, C]`` -> float32 ``[B, H, W, C]``, example b
    with key ``split(key, B)[b]``."""
    keys = jax.random.split(key, x.shape[0])
    return jax.vmap(self.image)(keys, x)

  def image(self, key: jax.Array, image: jax.Array) -> jax.Array:
    """One image ``[H, W, C]`` through every op in order (op i keyed fold_in(key, i))."""
    image = image.astype(jnp.float32)
    for i, (name, args) in enumerate(self.ops):
      k = jax.random.fold_in(key, i)
      if name == "crop":
        image = random_crop(k, image, *args)
      elif name == "flip":
        image = random_flip(k, image)
      else:
        image = cutout(k, image, args[0], jnp.asarray(self.fill, jnp.float32))
    return image


def random_crop(key: jax.Array, image: jax.Array, size: int, pad: int) -> jax.Array:
  """``RandomCrop(size, padding=pad)`` of ``image [H, W, C]``: zero-pad ``pad`` on
  each side, then the ``size × size`` window at a uniform offset."""
  padded = jnp.pad(image, ((pad, pad), (pad, pad), (0, 0)))
  kr, kc = jax.random.split(key)
  r = jax.random.randint(kr, (), 0, padded.shape[0] - size + 1)
  c = jax.random.randint(kc, (), 0, padded.shape[1] - size + 1)
  return jax.lax.dynamic_slice(padded, (r, c, 0), (size, size, image.shape[2]))


def random_flip(key: jax.Array, image: jax.Array) -> jax.Array:
  """``RandomHorizontalFlip()``: columns reversed with probability 1/2."""
  return jnp.where(jax.random.bernoulli(key), image[:, ::-1, :], image)


def cutout(key: jax.Array, image: jax.Array, size: int, fill: jax.Array) -> jax.Array:
  """Cutout of ``image [H, W, C]``: centre uniform over the pixels, the square
  ``[r − size//2, r + size//2) × [c − size//2, c + size//2)`` (clipped to the
  image) set to ``fill [C]`` (or a scalar)."""
  h, w = image.shape[0], image.shape[1]
  kr, kc = jax.random.split(key)
  r = jax.random.randint(kr, (), 0, h)
  c = jax.random.randint(kc, (), 0, w)
  half = size // 2
  rows, cols = jnp.arange(h), jnp.arange(w)
  box = (((rows >= r - half) & (rows < r + half))[:, None]
         & ((cols >= c - half) & (cols < c + half))[None, :])
  return jnp.where(box[:, :, None], fill, image)


def build(text: str, input_shape: Sequence[int], input_scale: float = 1.0,
          input_mean: Sequence[float] = ()) -> Augmentation | None:
  """The :class:`Augmentation` of ``data.augment=text`` for inputs of per-example
  shape ``input_shape``; ``None`` when ``text`` names no op.

  Cutout fills with ``input_mean / input_scale`` (per channel; 0 without a mean).
  Raises ConfigError (one line: key, value, what is allowed) for ops on inputs
  that are not images ``[H, W, C]``, a crop whose size is not the image's, or a
  Cutout larger than the image."""
  ops = parse(text)
  if not ops:
    return None
  shape = tuple(int(d) for d in input_shape)
  if len(shape) != 3:
    fail("data.augment", text, f"needs image inputs [H, W, C]; this data's inputs are "
         f"{shape} per example")
  h, w, channels = shape
  for name, args in ops:
    if name == "crop":
      size, pad = args
      if size > h or size > w:
        fail("data.augment", text, f"crop size {size} is larger than the {h}x{w} image")
      if size != h or size != w:
        fail("data.augment", text, f"crop size {size} is smaller than the {h}x{w} image; "
             f"the model takes whole images, so the crop must keep the image's shape")
    if name == "cutout" and (args[0] > h or args[0] > w):
      fail("data.augment", text, f"Cutout size {args[0]} is bigger than the {h}x{w} image")
  mean = tuple(float(v) for v in input_mean) or (0.0,)
  if len(mean) == 1:
    mean = mean * channels
  fill = tuple(m / float(input_scale) for m in mean)
  return Augmentation(ops=ops, image_shape=shape, fill=fill)
