"""A config key is declared once: one :class:`fedfrac.config_schema.Field` gives
its default, its note and its checks, and nothing else in ``fedfrac/`` declares
it again, assigns it a default, or checks its type or range on its own.

The source scans here are the rule; each is also run on a small synthetic
source that breaks it, to show it would fail."""
from __future__ import annotations

import ast
import collections
import fnmatch
import pathlib
import re

import pytest

from fedfrac import config_base
from fedfrac.config_schema import Check, Field, Section, integer, number

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fedfrac"
SCHEMA_MODULES = {"config_schema.py", "data/schema.py", "models/schema.py",
                  "runner/schema.py", "sim/schema.py"}
CHECK_CALLS = ("check", "fail", "int_at_least", "int32_count", "get")

# Checks of one key outside its Field that the source scan cannot tell from a
# Field's own check: rules against something that is not a key, and parsers a
# Field's check calls (key -> why).
NOT_FIELD_CHECKS = {
    "participation": "1 for a method whose algorithm needs every client in every "
                     "round (algorithms.entry(name).full_participation)",
    "only": "must name labels of config.methods (config_base.method_labels)",
    "data.augment": "the spec's parser, fedfrac.data.augment.parse, is the Field's "
                    "check",
    "data.test_fraction": "against the loaded dataset's class sizes "
                          "(fedfrac.data.sources.stratified_split)",
}
# Values a helper sets for a run, not defaults ((path, key) -> why).
NOT_DEFAULTS = {
    ("config_base.py", "data.source"): "files_source() points a config at local files",
}


def _sources():
  """``{path relative to fedfrac/: source}`` of every module of the library."""
  return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(ROOT.rglob("*.py"))}


def _declared():
  """``{dotted key: Field}`` of the config's declaration."""
  return dict(config_base.schema().fields())


def _field_calls(sources):
  """``{leaf name: [path:line]}`` of every ``Field("<name>", ...)`` in ``sources``."""
  out = collections.defaultdict(list)
  for path, text in sources.items():
    for node in ast.walk(ast.parse(text)):
      if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Field"
          and node.args and isinstance(node.args[0], ast.Constant)):
        out[node.args[0].value].append(f"{path}:{node.lineno}")
  return out


def declared_twice(sources, declared) -> list:
  """Leaf names with more ``Field(...)`` declarations in ``sources`` than fields
  of that name in ``declared`` (a second declaration, wired in or not)."""
  count = collections.Counter(key.rsplit(".", 1)[-1] for key in declared)
  return sorted(f"{name}: {places}" for name, places in _field_calls(sources).items()
                if len(places) > count[name])


def _dotted(node):
  """``"a.b.c"`` of an attribute chain ``x.a.b.c`` (without its root name)."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  return ".".join(reversed(parts)) if isinstance(node, ast.Name) else ""


def defaults_outside(sources, declared, allowed=NOT_DEFAULTS) -> list:
  """Literal values assigned to a declared key outside the schema modules:
  ``c.data.alpha = 0.5`` (a second default), or a ``ConfigDict(dict(...))`` /
  ``ConfigDict({...})`` spelling two or more keys of a declared section."""
  sections = collections.defaultdict(set)
  for key in declared:
    section, _, leaf = key.rpartition(".")
    sections[section].add(leaf)
  bad = []
  for path, text in sources.items():
    if path in SCHEMA_MODULES:
      continue
    for node in ast.walk(ast.parse(text)):
      if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
        for target in node.targets:
          key = _dotted(target)
          for cut in range(key.count(".") + 1):   # config.data.alpha, c.data.alpha
            tail = key.split(".", cut)[-1]
            if tail in declared and "." in tail and (path, tail) not in allowed:
              bad.append(f"{path}:{node.lineno}: {key} = {node.value.value!r}")
              break
      if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
          node.func, "id", "")) == "ConfigDict" and node.args):
        arg = node.args[0]
        names = ([k.arg for k in arg.keywords] if isinstance(arg, ast.Call) else
                 [k.value for k in arg.keys if isinstance(k, ast.Constant)]
                 if isinstance(arg, ast.Dict) else [])
        for section, leaves in sections.items():
          if len(names) >= 2 and set(names) <= leaves:
            bad.append(f"{path}:{node.lineno}: a {section or 'run'} section's "
                       f"defaults {names}")
  return bad


def _key_of(arg):
  """The key a check names: ``"data.alpha"``, or ``f"{prefix}.lr"`` as the
  pattern ``"*.lr"`` (``f"methods.{label}.name"``: ``"methods.*.name"``); None
  for anything else."""
  if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
    return arg.value
  if isinstance(arg, ast.JoinedStr):
    return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in arg.values)
  return None


def _keys_named(node, leaves) -> set:
  """Declared key names ``node`` reads: attributes, ``.get("x")`` / ``["x"]``
  strings and variables named like a key."""
  out = set()
  for sub in ast.walk(node):
    if isinstance(sub, ast.Attribute) and sub.attr in leaves:
      out.add(sub.attr)
    elif isinstance(sub, ast.Name) and sub.id in leaves:
      out.add(sub.id)
    elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
      out.update(w for w in re.findall(r"\w+", sub.value) if w in leaves)
  return out


def checks_outside(sources, declared, allowed=NOT_FIELD_CHECKS) -> list:
  """Checks of one declared key's own value outside the schema modules: a
  ``check(cond, "<key>", ...)`` whose condition, message and enclosing ``if``
  tests read no other key, any ``int_at_least`` / ``int32_count`` of a declared
  key and ``get(config, "<key>")``. A rule reading a second key is cross-field
  and stays a function; ``allowed`` lists the few the scan cannot see as such."""
  leaves = {k.rsplit(".", 1)[-1] for k in declared}
  checked = {k for k, f in declared.items() if f.checks()}
  bad = []
  for path, text in sources.items():
    if path in SCHEMA_MODULES:
      continue
    tree = ast.parse(text)
    parents = {child: parent for parent in ast.walk(tree)
               for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
      if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in CHECK_CALLS):
        continue
      name = node.func.id
      key_arg = node.args[1] if name in ("check", "int_at_least", "get") and len(
          node.args) > 1 else node.args[0] if node.args else None
      key = _key_of(key_arg)
      if key is None:
        continue
      leaf = key.rsplit(".", 1)[-1]
      if "*" in leaf:     # a key the call computes (an unknown option's message)
        continue
      if not any(fnmatch.fnmatchcase(k, key) for k in checked) or key in allowed:
        continue
      if name in ("int_at_least", "int32_count", "get"):
        bad.append(f"{path}:{node.lineno}: {name}(..., {key!r})")
        continue
      reads = _keys_named(node.args[0], leaves) if name == "check" else set()
      reads |= _keys_named(node.args[-1], leaves) if len(node.args) > 2 else set()
      up = parents.get(node)
      while up is not None and not isinstance(up, (ast.FunctionDef, ast.Module)):
        if isinstance(up, ast.If):
          reads |= _keys_named(up.test, leaves)
        up = parents.get(up)
      if reads <= {leaf}:
        bad.append(f"{path}:{node.lineno}: {name}(..., {key!r}) checks only {leaf}")
  return bad


# -- the rules, on the library --

def test_every_key_is_declared_once():
  declared = _declared()
  assert len(declared) > 100
  assert declared_twice(_sources(), declared) == []


def test_no_default_is_assigned_outside_the_schema():
  assert defaults_outside(_sources(), _declared()) == []


def test_no_key_is_checked_on_its_own_outside_its_schema():
  assert checks_outside(_sources(), _declared()) == []


def test_base_config_is_the_schema_defaults():
  c = config_base.base_config()
  for key, field in _declared().items():
    node = c
    for part in key.split("."):
      node = node[part]
    assert node == field.default or (node != node and field.default != field.default), key
  assert c.methods.fedavg.name == "fedavg" and len(c.churn.per_class) == 0


# -- each rule fails on a synthetic source that breaks it --

def test_a_second_declaration_of_a_key_is_caught():
  declared = _declared()
  extra = {"sim/other.py": 'from x import Field\nLR = Field("lr", 0.1, "again")\n'}
  found = declared_twice({**_sources(), **extra}, declared)
  assert len(found) == 1 and found[0].startswith("lr: ") and "sim/other.py:2" in found[0]


def test_two_fields_of_one_key_in_a_section_are_refused():
  with pytest.raises(ValueError, match="declares 'lr' twice"):
    Section("client", "", [Field("lr", 0.1), Field("lr", 0.2)])


def test_a_default_outside_the_schema_is_caught():
  declared = _declared()
  text = ("import ml_collections\n"
          "def my_base():\n"
          "  c = ml_collections.ConfigDict()\n"
          "  c.data.alpha = 0.5\n"
          "  c.task = ml_collections.ConfigDict(dict(loss='mse', huber_delta=1.0))\n")
  found = defaults_outside({"runner/mine.py": text}, declared)
  assert [f.split(":")[1] for f in found] == ["4", "5"], found


def test_a_check_outside_the_schema_is_caught():
  declared = _declared()
  text = ("def validate_more(config):\n"
          "  d = config.data\n"
          "  check(is_num(d.alpha) and d.alpha > 0, 'data.alpha', d.alpha, 'must be > 0')\n"
          "  int_at_least(config, 'data.min_size', 1)\n"
          "  check(cc.lr > 0, f'{prefix}.lr', cc.lr, 'must be > 0')\n"
          "  check(d.alpha < 1 or d.partition == 'iid', 'data.alpha', d.alpha, 'x')\n")
  found = checks_outside({"data/more.py": text}, declared)
  assert [f.split(":")[1] for f in found] == ["3", "4", "5"], found


def test_field_checks_give_one_line_naming_key_value_and_range():
  from fedfrac.config import ConfigError
  section = Section("demo", "", [
      Field("rate", 0.5, "", number(0, 1, lo_open=True)),
      Field("count", 1, "", (integer(1), Check(lambda v, node: v < 10, "must be < 10"))),
  ])
  with pytest.raises(ConfigError, match=r"^config\.demo\.rate=0: must be in \(0, 1\]$"):
    section.check({"rate": 0, "count": 1}, "demo")
  with pytest.raises(ConfigError, match=r"^config\.demo\.count=12: must be < 10$"):
    section.check({"rate": 0.5, "count": 12}, "demo")
  with pytest.raises(ConfigError, match=r"^config\.demo\.count=1.5: must be an integer >= 1$"):
    section.check({"rate": 0.5, "count": 1.5}, "demo")


def test_a_key_of_several_types_takes_each_from_python_and_the_command_line():
  """engine.shard_clients is True, False or "auto": from Python (a plain
  assignment, which a typed ConfigDict field refused with a raw TypeError) and
  from the command line (where "True" was kept as the text 'True' and refused),
  each config with its own value."""
  import fedfrac as ff
  from fedfrac import config_keys
  c = ff.base_config()
  c.engine.shard_clients = True
  ff.config.validate(c)
  assert ff.base_config().engine.shard_clients == "auto"     # not shared
  for text, value in (("True", True), ("False", False), ("auto", "auto")):
    c = ff.base_config()
    config_keys.set_key(c, "engine.shard_clients", text=text)
    assert c.engine.shard_clients is value or c.engine.shard_clients == value
    ff.config.validate(c)
  c.engine.shard_clients = "yes"
  with pytest.raises(ff.config.ConfigError,
                     match=r"^config.engine.shard_clients='yes': allowed values are True, "
                           r"False, 'auto'$"):
    ff.config.validate(c)
  c = ff.base_config()
  config_keys.set_key(c, "data.partition", text="True")   # a str key stays text
  assert c.data.partition == "True"


def test_the_engine_objects_are_built_from_the_schema_and_no_key_is_forgotten():
  import dataclasses
  from fedfrac.runner import factories
  from fedfrac.sim import schema as sim_schema
  from fedfrac.sim.state import EngineConfig

  # Every engine.* key reaches an EngineConfig field of its name, or is named as
  # read by another object; a key the engine lacks is refused when building.
  fields = {f.name for f in dataclasses.fields(EngineConfig)}
  for key in sim_schema.ENGINE.keys():
    assert key in fields or key in factories.ENGINE_KEYS_READ_ELSEWHERE, key
  c = config_base.base_config()
  c.engine.step_buckets = 3
  c.engine.matmul_precision = "bfloat16"
  engine = factories.engine_config(c)
  assert (engine.step_buckets, engine.matmul_precision) == (3, "bfloat16")
  # A key missing from an older config takes the schema's default.
  del c.engine["device_invariant"]
  assert factories.engine_config(c).device_invariant is False

  @dataclasses.dataclass
  class Target:
    a: int = 0

  section = Section("demo", "", [Field("a", 1), Field("b", 2)])
  with pytest.raises(TypeError, match="'demo': b reach no field of Target"):
    section.build(Target, {"a": 5, "b": 6})
  assert section.build(Target, {"a": 5}, elsewhere=("b",)) == Target(a=5)
