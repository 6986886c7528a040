"""Package shape rules (docs/design.md section 2): no private JAX modules; imports
go down the layers, with no circles; no module uses another module's private
name; names are re-exported only by package faces (``__init__.py``); and the
public names at the top level."""
from __future__ import annotations

import ast
import pathlib

import fedfrac as ff

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fedfrac"


def _modules(*parts):
  base = ROOT.joinpath(*parts)
  return sorted(base.rglob("*.py")) if base.is_dir() else [base]


def _imports(path):
  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module


def test_no_private_jax_imports():
  bad = [(str(p), m) for p in _modules() for m in _imports(p) if m.startswith("jax._src")]
  assert not bad, bad


def _module_name(path):
  parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph():
  """``{module: {imported module: line}}`` among fedfrac's modules, from the source.

  Every import counts: statements at module level, inside a function and under
  ``if TYPE_CHECKING:``, and calls of ``importlib.import_module`` and
  ``__import__`` with a literal name. ``import a.b`` and ``from a import b`` name
  the module ``a.b`` when there is one, else the package ``a`` (its
  ``__init__``); relative imports are resolved. The packages above an imported
  module, which Python runs first, are not counted (else every module that its
  package's ``__init__`` imports would close a circle with it).
  """
  modules = {_module_name(p): p for p in _modules()}
  graph = {}
  for name, path in modules.items():
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges = {}
    for node in ast.walk(ast.parse(path.read_text())):
      targets = []
      if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          anchor = package.split(".")
          anchor = anchor[:len(anchor) - (node.level - 1)]
          base = ".".join(anchor + ([base] if base else []))
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                   for a in node.names]
      elif isinstance(node, ast.Call) and _literal_import(node):
        targets = [_literal_import(node)]
      for target in targets:
        if target in modules and target != name:
          edges.setdefault(target, node.lineno)
    graph[name] = edges
  return graph


def _literal_import(call):
  """The module name of ``importlib.import_module("a.b")`` / ``__import__("a.b")``
  (a literal first argument), else None."""
  f = call.func
  named = (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
      isinstance(f, ast.Name) and f.id in ("import_module", "__import__"))
  if named and call.args and isinstance(call.args[0], ast.Constant) and isinstance(
      call.args[0].value, str):
    return call.args[0].value
  return None


def _circles(graph):
  """The strongly connected components of ``graph`` with more than one module,
  each as one circle ``[a, b, ..., a]`` found inside it (Tarjan, then a search)."""
  index, low, stack, on_stack, components = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = set()
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.add(w)
        if w == v:
          break
      if len(component) > 1:
        components.append(component)

  for v in sorted(graph):
    if v not in index:
      visit(v)
  circles = []
  for component in components:
    start = min(component)
    paths, seen = [[start]], {start}
    while paths:   # breadth-first: the shortest way back to ``start``
      path = paths.pop(0)
      nxt = sorted(w for w in graph[path[-1]] if w in component)
      if start in nxt:
        circles.append(path + [start])
        break
      for w in nxt:
        if w not in seen:
          seen.add(w)
          paths.append(path + [w])
  return circles


def _describe(graph, circle):
  return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(circle, circle[1:])) + \
    f" -> {circle[-1]}"


def test_the_circle_finder_names_a_circle():
  graph = {"p.a": {"p.b": 3}, "p.b": {"p.c": 5}, "p.c": {"p.a": 7}, "p.d": {"p.a": 1}}
  assert _circles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
  assert _describe(graph, _circles(graph)[0]) == \
    "p.a (line 3) -> p.b (line 5) -> p.c (line 7) -> p.a"
  assert _circles({"p.a": {"p.b": 1}, "p.b": {}}) == []


def test_no_import_circles():
  """Imports run one way: no fedfrac module reaches itself through the modules it
  imports (module-level, function-level and TYPE_CHECKING imports, and
  ``importlib.import_module`` / ``__import__`` of a literal name, all count)."""
  graph = _import_graph()
  assert "fedfrac.runner.loop" in graph and graph["fedfrac.runner.loop"]
  # importlib counts: fedfrac.data.federated reaches partition that way.
  assert "fedfrac.data.partition" in graph["fedfrac.data.federated"]
  circles = _circles(graph)
  assert not circles, "import circles: " + "; ".join(_describe(graph, c) for c in circles)


# The layers, bottom to top: a module imports from its own layer and those below.
LAYERS = (
    ("_validation", "_types", "_version", "startup", "ops", "optim", "metrics"),
    ("config_schema", "config_base", "config_keys", "config"),
    ("data",),
    ("models",),
    ("algorithms",),
    ("sim",),
    ("runner",),
    ("catalog", "config_files", "_apidoc", "sweep"),
    ("main", "fedfrac"),
)
# The config is the one way in: base_config() gathers every layer's section
# schema, validate() runs every layer's section check, and its key list reads the
# algorithms' options (docs/design.md section 2).
UPWARD_BY_DESIGN = {("fedfrac.config_base", "fedfrac.data.schema"),
                    ("fedfrac.config_base", "fedfrac.models.schema"),
                    ("fedfrac.config_base", "fedfrac.runner.schema"),
                    ("fedfrac.config_base", "fedfrac.sim.schema"),
("fedfrac.config", "fedfrac.data.validate"),
                    ("fedfrac.config", "fedfrac.models.validate"),
                    ("fedfrac.config", "fedfrac.runner.validate"),
                    ("fedfrac.config", "fedfrac.sim.validate"),
                    ("fedfrac.config_base", "fedfrac.algorithms.server"),
                    ("fedfrac.config_keys", "fedfrac.algorithms")}


def _layer(module):
  part = module.split(".")[1] if "." in module else "fedfrac"
  for i, names in enumerate(LAYERS):
    if part.removesuffix(".py") in names:
      return i
  raise AssertionError(f"{module}: in no layer of LAYERS")


def test_imports_go_down_the_layers():
  graph = _import_graph()
  up = [f"{a} (line {line}) -> {b}" for a, edges in sorted(graph.items())
        for b, line in sorted(edges.items())
        if _layer(b) > _layer(a) and (a, b) not in UPWARD_BY_DESIGN]
  assert not up, "imports up the layers: " + "; ".join(up)


def test_public_names():
  assert callable(ff.run) and callable(ff.run_many)
  assert ff.Results is ff.runner.Results
  assert ff.sim.Simulation is ff.Simulation
  assert ff.sim.EngineConfig is ff.EngineConfig


def test_ff_engine_is_a_deprecated_name_of_ff_sim():
  import pytest
  with pytest.warns(DeprecationWarning, match="use ff.sim"):
    assert ff.engine is ff.sim
  assert "engine" not in vars(ff)


LAB = ROOT.parent / "fedfrac_lab"


def test_tests_mirror_the_package():
  """Each test folder is named after a fedfrac sub-package, so the tests of
  ``fedfrac/<pkg>/<module>.py`` are found under ``tests/<pkg>/``; the lab's tests
  sit under ``tests/lab/``, one folder per ``fedfrac_lab`` sub-package."""
  tests = pathlib.Path(__file__).resolve().parent
  for base, package in ((tests, ROOT), (tests / "lab", LAB)):
    folders = [p for p in base.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
               and not (base == tests and p.name == "lab")]
    assert folders
    for folder in folders:
      assert (package / folder.name / "__init__.py").exists(), folder.name
      assert all(f.name.startswith("test_") or f.name == "__init__.py"
                 for f in folder.glob("*.py")), folder.name


def _lab_imports(path):
  """The ``fedfrac_lab`` modules ``path`` names in an import statement or an
  ``importlib.import_module`` / ``__import__`` call, and in any string."""
  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      names = [node.module]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
      names = [w for w in node.value.replace('"', " ").split() if w.startswith("fedfrac_lab")]
    yield from (n for n in names if n.split(".")[0] == "fedfrac_lab")


def test_the_library_never_imports_the_lab():
  """fedfrac is the library: no module of it imports fedfrac_lab, by any import
  form, and ``import fedfrac`` (with everything it loads) leaves the lab out."""
  import subprocess
  import sys
  bad = {str(p.relative_to(ROOT.parent)): sorted(set(_lab_imports(p))) for p in _modules()}
  bad = {k: v for k, v in bad.items() if v and not k.endswith("__init__.py")}
  assert not bad, bad
  code = ("import sys, fedfrac as ff; ff.run, ff.sweep; "
          "print(sorted(m for m in sys.modules if m.startswith('fedfrac_lab')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT.parent, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["[]"]


def test_the_old_lab_names_of_the_library_say_where_they_went():
  import pytest
  for name in ("reproduce", "bench", "campaign"):
    with pytest.raises(AttributeError, match=f"import fedfrac_lab.{name}"):
      getattr(ff, name)


def _design_text():
  return (ROOT.parent / "docs" / "design.md").read_text()


def _resolves(dotted):
  """Whether ``fedfrac.a.b.name`` is an importable module, or an attribute of the
  longest importable module prefix."""
  import importlib
  parts = dotted.rstrip(".").split(".")
  for cut in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:cut]))
    except ImportError:
      continue
    for name in parts[cut:]:
      if not hasattr(obj, name):
        return False
      obj = getattr(obj, name)
    return True
  return False


def test_design_doc_names_only_modules_and_names_that_exist():
  import re
  text = _design_text()
  dotted = sorted(set(re.findall(r"fedfrac(?:\.[A-Za-z_]\w*)+", text)))
  assert dotted and not [d for d in dotted if not _resolves(d)]
  # The layout block of §2: every file it names exists where it says, and every
  # sub-package is there.
  block = text.split("## 2. Architecture", 1)[1].split("```", 2)[1]
  roots = {"fedfrac": ROOT, "fedfrac_lab": LAB}
  top, package, missing, listed = "fedfrac", "", [], {"fedfrac": set(), "fedfrac_lab": set()}
  for line in block.splitlines():
    head = re.match(r"(\w+)/", line)
    if head:
      top, package = (head.group(1) if head.group(1) in roots else None), ""
      continue
    sub = re.match(r"  (\w+)/", line)
    if sub:
      package = sub.group(1)
      if top:
        listed[top].add(package)
    elif re.match(r"  \S", line):
      package = ""
    if top:
      for name in re.findall(r"\b(\w+\.py)\b", line):
        base = roots[top]
        path = base / package / name if package else base / name
        if not path.exists():
          missing.append(str(path.relative_to(ROOT.parent)))
  assert not missing, missing
  for top, base in roots.items():
    packages = {p.parent.name for p in base.glob("*/__init__.py")}
    assert packages <= listed[top], (top, sorted(packages - listed[top]))


def test_import_fedfrac_leaves_scipy_signal_to_the_bev_data():
  """SciPy's signal module took 0.7 s of ``import fedfrac``'s 2 s; only the
  synthetic BEV fleet uses it, and imports it when it runs."""
  import subprocess
  import sys
  code = ("import sys, fedfrac; print('scipy.signal' in sys.modules); "
          "fedfrac.data.simulate_fleet(1, hours_per_vehicle=0.05, seed=0); "
          "print('scipy.signal' in sys.modules)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT.parent, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["False", "True"]


def test_import_fedfrac_leaves_matplotlib_to_the_figures():
  """matplotlib took about half a second of ``import fedfrac``; a run's table
  comes from :mod:`fedfrac.runner.finals`, and matplotlib loads with the first
  figure or ``ff.sweep``."""
  import subprocess
  import sys
  code = ("import sys, fedfrac as ff; print('matplotlib' in sys.modules); "
          "from fedfrac.runner import results_figures, summary_table; "
          "print('matplotlib' in sys.modules); "
          "print(ff.sweep.__name__); "
          "print('matplotlib' in sys.modules)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT.parent, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["False", "True", "fedfrac.sweep", "True"]


# -- Shape: private names stay in their module, re-exports only in package faces --

# -- Shape: private names stay in their module, re-exports only in package faces --


def _all_modules(bases):
  """``{dotted name: path}`` of every module under the package folders ``bases``."""
  return {".".join(p.relative_to(base.parent).with_suffix("").parts).removesuffix(".__init__"): p
          for base in bases for p in sorted(base.rglob("*.py"))}


def _is_private(name):
  return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _top_level(body):
  """The statements run at a module's top level, into ``if`` / ``try`` / ``with``."""
  for node in body:
    yield node
    if isinstance(node, (ast.If, ast.Try, ast.With)):
      for field in ("body", "orelse", "finalbody"):
        yield from _top_level(getattr(node, field, []))
      for handler in getattr(node, "handlers", []):
        yield from _top_level(handler.body)


def _targets(node):
  if isinstance(node, ast.Name):
    yield node.id
  elif isinstance(node, (ast.Tuple, ast.List)):
    for elt in node.elts:
      yield from _targets(elt)
  elif isinstance(node, ast.Starred):
    yield from _targets(node.value)


class _Module:
  """One module's source, read once: the names it defines at top level (by
  ``def``, ``class`` or assignment), the names it imports at top level, and
  every import in it as ``(line, module, name or None, bound name)``."""

  def __init__(self, name, path, modules):
    self.name, self.path = name, path
    self.is_face = path.name == "__init__.py"
    self.tree = ast.parse(path.read_text())
    package = name if self.is_face else name.rpartition(".")[0]
    self.defined, self.imported, self.imports = set(), set(), []
    for node in _top_level(self.tree.body):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        self.defined.add(node.name)
      elif isinstance(node, ast.Assign):
        for target in node.targets:
          self.defined.update(_targets(target))
      elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        self.defined.update(_targets(node.target))
      elif isinstance(node, (ast.For, ast.AsyncFor)):
        self.defined.update(_targets(node.target))
    for node in ast.walk(self.tree):
      if isinstance(node, ast.Import):
        for a in node.names:
          bound = a.asname or a.name.split(".")[0]
          target = a.name if a.asname else a.name.split(".")[0]
          self.imports.append((node.lineno, target, None, bound))
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          anchor = package.split(".")
          anchor = anchor[:len(anchor) - (node.level - 1)]
          base = ".".join(anchor + ([base] if base else []))
        for a in node.names:
          bound = a.asname or a.name
          if f"{base}.{a.name}" in modules:
            self.imports.append((node.lineno, f"{base}.{a.name}", None, bound))
          else:
            self.imports.append((node.lineno, base, a.name, bound))
    for node in _top_level(self.tree.body):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        self.imported.update(a.asname or a.name.split(".")[0] if isinstance(node, ast.Import)
                             else a.asname or a.name for a in node.names)
    self.imported -= self.defined


def _shape_report(bases=None):
  """``(private, reexported)``: each a sorted list of ``"module:line name from
  module"`` for every use, in fedfrac or fedfrac_lab, of (a) a private name
  (``_x``, not a dunder) of another module, by ``from m import _x`` or by
  ``m._x`` on an imported module; (b) a name from a module that is not a package
  face (``__init__.py``) and does not define it but imports it from elsewhere."""
  paths = _all_modules(bases or (ROOT, LAB))
  modules = {name: _Module(name, path, paths) for name, path in paths.items()}
  private, reexported = [], []

  def use(user, line, owner, name):
    where = f"{user.name}:{line} {name} from {owner}"
    if owner not in modules or owner == user.name:
      return
    if _is_private(name):
      private.append(where)
    source = modules[owner]
    if not source.is_face and name in source.imported and name not in source.defined:
      reexported.append(where)

  for user in modules.values():
    bound = {}   # local name -> our module it names
    for line, target, name, local in user.imports:
      if name is None:
        if target in modules or any(m.startswith(target + ".") for m in modules):
          bound[local] = target
      else:
        use(user, line, target, name)
    for node in ast.walk(user.tree):
      if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
        continue
      chain, base = [], node
      while isinstance(base, ast.Attribute):
        chain.insert(0, base.attr)
        base = base.value
      if not isinstance(base, ast.Name) or base.id not in bound:
        continue
      owner = bound[base.id]
      while len(chain) > 1 and f"{owner}.{chain[0]}" in modules:
        owner = f"{owner}.{chain.pop(0)}"
      # ``a.b.name`` is reported by its own node, ``a.b.name.x`` not
      if len(chain) == 1 and f"{owner}.{chain[0]}" not in modules:
        use(user, node.lineno, owner, chain[0])
  return sorted(set(private)), sorted(set(reexported))


def test_the_shape_checker_finds_private_names_and_reexports(tmp_path):
  """On a small package: ``from m import _x`` and ``m._x`` of another module
  count, a module's own ``_x`` and a dunder do not; importing a name from a
  module that imports it from elsewhere counts, from the package face not."""
  pkg = tmp_path / "pkg"
  pkg.mkdir()
  files = {
    "__init__.py": "from pkg.a import shared\n",
    "a.py": "_x = 1\nshared = 2\n__all__ = ['shared']\ndef _own():\n  return _x\n",
    "b.py": "from pkg.a import _x, shared\nfrom pkg import a\nY = a._x + a.__all__[0]\n",
    "c.py": "from pkg.b import shared\nfrom pkg import b\nZ = b.shared\n",
    "d.py": "from pkg import shared\nfrom pkg.a import shared as s2\n",
  }
  for name, text in files.items():
    (pkg / name).write_text(text)
  private, reexported = _shape_report([pkg])
  assert private == ["pkg.b:1 _x from pkg.a", "pkg.b:3 _x from pkg.a"]
  assert reexported == ["pkg.c:1 shared from pkg.b", "pkg.c:3 shared from pkg.b"]


def test_no_private_names_across_modules():
  """No module of fedfrac or fedfrac_lab uses another module's private name
  (``_x``): what two modules share is public where it is defined."""
  private, _ = _shape_report()
  assert not private, f"{len(private)} private names used across modules: {private}"


def test_reexports_only_in_package_faces():
  """A name is imported from the module that defines it, or from a package's
  ``__init__`` (its face); never from another module that imports it."""
  _, reexported = _shape_report()
  assert not reexported, f"{len(reexported)} imports through a re-export: {reexported}"
