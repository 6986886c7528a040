"""Config sections declared once: each key is one :class:`Field` (its default,
what it means and its check), each section one :class:`Section` of them.

The layer that reads a section owns its schema (``data``: :mod:`fedfrac.data.schema`;
``model``: :mod:`fedfrac.models.schema`; ``engine``, ``churn``, ``system`` and
``attack``: :mod:`fedfrac.sim.schema`; the run fields, ``task``, ``client``,
``server`` and ``log``: :mod:`fedfrac.runner.schema`). From the same
declarations come :func:`fedfrac.config.base_config` (:meth:`Section.defaults`)
and the checks of every single value (:meth:`Section.check`): its type, range
or allowed values, reported as one line ``config.<key>=<value>: <allowed>``.
Rules that relate several keys stay functions in the owner's ``validate``
module, run after the field checks, and read the keys the schemas declare.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Union

import ml_collections

from fedfrac._validation import ConfigError, INT32_MAX, fail, is_int, is_num


class Check(NamedTuple):
  """``test(value, node) -> bool`` (``node``: the section holding the value) and
  the phrase saying what is allowed (``allowed(node)`` when it depends on it)."""
  test: Callable[[Any, Any], bool]
  allowed: Union[str, Callable[[Any], str]]

  def __call__(self, key, value, node) -> None:
    if not self.test(value, node):
      fail(key, value, self.allowed(node) if callable(self.allowed) else self.allowed)


class Rule(NamedTuple):
  """A check that is a function of the layer that reads the key (``rule(value)``
  raises ``ValueError("<section>.<key>=<value>: ...")``, as the engine does when it
  gets the same value): its message, with the section's place in the config."""
  rule: Callable[[Any], Any]
  section: str

  def __call__(self, key, value, node) -> None:
    try:
      self.rule(value)
    except ConfigError:
      raise
    except ValueError as e:
      text = str(e)
      if text.startswith(self.section + "."):
        text = key.rsplit(".", 1)[0] + text[len(self.section):]
      raise ConfigError(f"config.{text}") from None


def one_of(*values, quote: bool = True) -> Check:
  """``value in values``; the message lists them (``repr`` each when ``quote``)."""
  shown = ", ".join(map(repr, values) if quote else map(str, values))
  return Check(lambda v, node: v in values, f"allowed values are {shown}")


def number(lo: float = -float("inf"), hi: float = float("inf"), *, lo_open=False,
           hi_open=False, note: str = "") -> Check:
  """A number usable in float32 in the range; the message says the range:
  ``must be > 0``, ``must be >= 0``, ``must be in (0, 1]``, then ``note``."""
  def test(v, node):
    if not is_num(v):
      return False
    return ((v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi))
  if hi == float("inf"):
    allowed = "must be a finite number" if lo == -float("inf") else (
        f"must be {'>' if lo_open else '>='} {lo:g}")
  else:
    allowed = (f"must be in {'(' if lo_open else '['}{lo:g}, {hi:g}"
               f"{')' if hi_open else ']'}")
  return Check(test, allowed + note)


def integer(lo: Union[int, Callable[[Any], int]], note: str = "",
            allowed: Optional[str] = None) -> Check:
  """An integer ``>= lo`` (``lo(node)`` when it depends on the section)."""
  def low(node):
    return lo(node) if callable(lo) else lo
  return Check(lambda v, node: is_int(v) and v >= low(node),
               allowed or (lambda node: f"must be an integer >= {low(node)}{note}"))


def int32(what: str) -> Check:
  """An integer counted in int32 arrays (``<= 2**31 - 1``); ``what`` they count."""
  return Check(lambda v, node: not is_int(v) or v <= INT32_MAX,
               f"must be at most {INT32_MAX} (2**31 - 1): {what} are counted in int32")


BOOLEAN = Check(lambda v, node: isinstance(v, bool), "must be True or False")


class Field(NamedTuple):
  """One config key: its name, its default, what it means, and its checks (a
  :class:`Check` / :class:`Rule` or a tuple of them, run in order; none = any
  value); ``when(node, config)`` limits the checks to configs that read it.
  ``any_type``: the key takes values of several types (``engine.shard_clients``:
  True, False or ``"auto"``), so the config holds it untyped and a command-line
  value is read as a Python literal, not as text like its default; its checks say
  what is allowed."""
  name: str
  default: Any
  doc: str = ""
  check: Any = ()
  when: Optional[Callable[[Any, Any], bool]] = None
  any_type: bool = False

  def checks(self) -> tuple:
    return self.check if type(self.check) is tuple else (self.check,)

  def allowed(self, node=None) -> str:
    """What the field's checks allow, as their messages say it (``node``: the
    section holding it, for a phrase that depends on the section, e.g. its
    defaults); ``""`` when nothing is checked here. A :class:`Rule` is named by
    the layer whose function checks it."""
    phrases = []
    for c in self.checks():
      if isinstance(c, Rule):
        phrases.append(f"checked by the {c.section} layer")
      elif isinstance(c, Check):
        try:
          phrases.append(c.allowed(node) if callable(c.allowed) else c.allowed)
        except (AttributeError, KeyError, TypeError):
          phrases.append("depends on the section's other keys")
    return "; ".join(p for p in phrases if p)


class Section:
  """A config section: its fields and sub-sections (each a :class:`Section`),
  in the order they are declared and checked.

  ``free``: a section whose keys the config chooses (``churn.per_class``,
  ``methods``): its default is ``defaults`` and its entries are checked by
  the owner's rules. ``when(node, config)``: check the section only then.
  """

  def __init__(self, name: str, doc: str, entries=(), *, free: bool = False,
               defaults: Optional[dict] = None,
               when: Optional[Callable[[Any, Any], bool]] = None):
    self.name, self.doc, self.free, self.when = name, doc, free, when
    self.entries = tuple(entries)
    self.free_defaults = dict(defaults or {})
    names = [e.name for e in self.entries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
      raise ValueError(f"section {name!r} declares {repeated[0]!r} twice")

  def __contains__(self, key) -> bool:
    return any(e.name == key for e in self.entries)

  def __getitem__(self, key):
    for e in self.entries:
      if e.name == key:
        return e
    raise KeyError(key)

  def keys(self) -> list:
    return [e.name for e in self.entries]

  def defaults(self) -> ml_collections.ConfigDict:
    """The section's defaults as a ConfigDict (sub-sections nested)."""
    if self.free:
      return ml_collections.ConfigDict(
          {k: ml_collections.ConfigDict(v) if isinstance(v, dict) else v
           for k, v in self.free_defaults.items()})
    out = ml_collections.ConfigDict()
    for e in self.entries:
      if isinstance(e, Section):
        out[e.name] = e.defaults()
      elif getattr(e, "any_type", False):   # a fresh reference per config
        out[e.name] = ml_collections.FieldReference(e.default, field_type=object)
      else:
        out[e.name] = e.default
    return out

  def check(self, node, prefix: str, config=None) -> None:
    """Run every field's checks on ``node`` (this section, found at
    ``config.<prefix>``); keys the node lacks are left to the key checks
    (:func:`fedfrac.config_keys.check_keys`)."""
    if self.free or node is None:
      return
    config = node if config is None else config
    for e in self.entries:
      if e.name not in node:
        continue
      key = f"{prefix}.{e.name}" if prefix else e.name
      value = node[e.name]
      if e.when is not None and not e.when(node, config):
        continue
      if isinstance(e, Section):
        e.check(value, key, config)
        continue
      for c in e.checks():
        c(key, value, node)

  def fields(self, prefix: str = ""):
    """``(dotted key, Field)`` of every field, sub-sections' included."""
    for e in self.entries:
      key = f"{prefix}.{e.name}" if prefix else e.name
      if isinstance(e, Section):
        yield from e.fields(key)
      else:
        yield key, e

  def values(self, node) -> dict:
    """``{field name: value}`` of this section's fields in ``node`` (a field the
    node lacks, e.g. in a config written before the key existed, at its default
    here, the one place it is declared); sub-sections are left out."""
    get = getattr(node, "get", None)
    return {e.name: (get(e.name, e.default) if get is not None else e.default)
            for e in self.entries if not isinstance(e, Section)}

  def build(self, cls, node, elsewhere=(), **given):
    """``cls(**kwargs)``: the object the layer reading this section takes (a
    dataclass or NamedTuple: ``EngineConfig``, ``SystemConfig``), its fields filled from the
    section's fields of the same name (:meth:`values`) and from ``given``
    (composites built from several keys or sections). A field of the section
    that ``cls`` lacks must be named in ``elsewhere`` (read by another object,
    e.g. ``engine.unroll`` by the local training): a key added to the schema
    and forgotten by its reader raises here, not silently nothing."""
    import dataclasses
    names = (set(cls._fields) if hasattr(cls, "_fields")          # a NamedTuple
             else {f.name for f in dataclasses.fields(cls)})
    values = self.values(node)
    lost = sorted(set(values) - names - set(elsewhere) - set(given))
    if lost:
      raise TypeError(f"config section {self.name!r}: {', '.join(lost)} reach no "
                      f"field of {cls.__name__} and are not named as read elsewhere")
    return cls(**{k: v for k, v in values.items() if k in names and k not in given},
               **given)

  def described(self, prefix: str = ""):
    """``(dotted key, default, allowed, doc)`` of every field in declaration
    order (``allowed``: :meth:`Field.allowed` with the section's defaults as its
    node): what ``fedfrac-run --list`` and the docs' config page print."""
    defaults = self.defaults()
    for e in self.entries:
      key = f"{prefix}.{e.name}" if prefix else e.name
      if isinstance(e, Section):
        if not e.free:
          yield from e.described(key)
      else:
        yield key, e.default, e.allowed(defaults), e.doc
