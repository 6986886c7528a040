"""The argument after the colon of ``--config=configs/<file>.py:ARG``, read one way
by every config file that takes one.

``ARG`` is comma-separated items, each ``name=value`` or a bare value, which
goes to the next field in the order the file declares them::

  --config=configs/firma/digits.py:reference_code,dir0.1     # compat, scenario
  --config=configs/kuramoto/digits.py:K=20,s=5,mode=reference_code
  --config=configs/fofedavg/mnist_cnn.py:severe,100           # scenario, clients
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence


def _grammar(fields, choices) -> str:
  return ",".join(f"{name}=<{'|'.join(map(str, choices[name]))}>" if name in choices
                  else f"{name}=<{type(default).__name__}>"
                  for name, default in fields.items())


def _value(name, text, default, fields, choices):
  if isinstance(default, int) and not isinstance(default, bool):
    try:
      return int(text)
    except ValueError:
      raise ValueError(f"config argument {name}={text!r}: must be an integer; the "
                       f"argument reads {_grammar(fields, choices)}") from None
  return text


def parse(arg: Optional[str], fields: Mapping[str, Any],
          choices: Optional[Mapping[str, Sequence]] = None) -> dict:
  """``{name: value}``: the defaults ``fields`` (``{name: default}``, in the order
  bare values fill them) with the items of ``arg`` applied. A value is text, or an
  integer where the default is one; ``choices`` (``{name: allowed values}``)
  limits a field. Raises ``ValueError`` in one line naming the item and what the
  argument reads."""
  choices = dict(choices or {})
  values, order = dict(fields), list(fields)
  for item in (part.strip() for part in (arg or "").split(",")):
    if not item:
      continue
    name, equals, text = (part.strip() for part in item.partition("="))
    if not equals:
      if not order:
        raise ValueError(f"config argument {item!r}: one value more than the argument "
                         f"has fields; it reads {_grammar(fields, choices)}")
      name, text = order[0], item
    if name not in fields:
      raise ValueError(f"config argument {item!r}: unknown name {name!r}; the argument "
                       f"reads {_grammar(fields, choices)}")
    if name in order:
      order.remove(name)
    value = _value(name, text, fields[name], fields, choices)
    if name in choices and value not in choices[name]:
      raise ValueError(f"config argument {name}={value!r}: allowed values are "
                       f"{', '.join(map(str, choices[name]))}; the argument reads "
                       f"{_grammar(fields, choices)}")
    values[name] = value
  return values
