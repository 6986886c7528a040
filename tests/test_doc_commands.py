"""What README.md, REPRODUCTION.md and the user guide tell a newcomer to type
exists as shown: every ``make`` target, and every ``fedfrac-*`` / ``python -m
fedfrac...`` command in a code block or an inline code span of every guide page
(Markdown or reST, and the docs the guide includes) parses with the flags shown
(argparse and absl parsers, without running anything: a parse is stopped before
the command's work starts), with the config files it names; and the Python
examples of the README and the guide run as written (on a tiny config)."""
from __future__ import annotations

import argparse
import contextlib
import glob
import importlib.util
import io
import os
import re
import shlex
import sys
from unittest import mock

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", "REPRODUCTION.md")
# The guide's pages (docs/api/guide, Markdown and reST) and the docs it includes.
GUIDE = tuple(sorted(os.path.relpath(p, ROOT) for ext in ("md", "rst") for p in glob.glob(
    os.path.join(ROOT, "docs", "api", "guide", "**", f"*.{ext}"), recursive=True)))
INCLUDED = ("docs/design.md", "docs/scaling.md", "docs/equations.md")
COMMAND = re.compile(r"(fedfrac-[a-z]+|python -m fedfrac[\w.]*|make [\w-]+)\b")
# "...", "<paper>", and an all-capitals metavariable (DIR, OUT, R) stand for a value.
PLACEHOLDER = re.compile(r"^\.\.\.$|<[^>]*>|^[A-Z][A-Z0-9_]*$")


def _read(name):
  with open(os.path.join(ROOT, name), encoding="utf-8") as f:
    return f.read()


def rst_commands(text: str) -> list:
  """Commands in reST ``text``: lines of ``code-block`` / ``code`` directives in a
  shell language (``\\`` continuations joined, comments dropped) and inline
  literals that start with a command."""
  out = []
  for m in re.finditer(r"^( *)\.\. (?:code-block|code|sourcecode):: *(bash|sh|shell|console)"
                       r"\n((?:\1 +.*\n|\s*\n)*)", text, re.M):
    for line in m.group(3).replace("\\\n", " ").splitlines():
      line = re.sub(r"\s+#.*$", "", line).strip()
      if line.startswith(":"):
        continue   # a directive option
      if COMMAND.match(line):
        out.append(" ".join(line.split()))
  for m in re.finditer(r"``(.+?)``", text, re.S):
    span = " ".join(m.group(1).split())
    if COMMAND.match(span):
      out.append(span)
  return out


def doc_commands(text: str, name: str = "") -> list:
  """Commands in ``text``: lines of shell code blocks, fenced or indented
  (``\\`` continuations joined, comments dropped), and inline code spans that
  start with a command; for a ``.rst`` file :func:`rst_commands`."""
  if name.endswith(".rst"):
    return rst_commands(text)
  out = []
  for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
    if m.group(1) in ("bash", "sh", "shell", ""):
      for line in m.group(2).replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if COMMAND.match(line):
          out.append(line)
  prose = re.sub(r"```.*?```", "", text, flags=re.S)
  # Indented (4-space) code blocks.
  for line in re.sub(r"\\\n\s*", " ", prose).splitlines():
    if line.startswith("    ") and COMMAND.match(line.strip()):
      out.append(re.sub(r"\s+#.*$", "", line).strip())
  for m in re.finditer(r"`([^`]+)`", prose):
    span = " ".join(m.group(1).split()).replace("\\|", "|")
    if COMMAND.match(span):
      out.append(span)
  return out


def variants(tokens: list) -> list:
  """``tokens`` once per alternative of a ``--flag=a|b|c`` value."""
  for i, tok in enumerate(tokens):
    if tok.startswith("-") and "=" in tok and "|" in tok.split("=", 1)[1]:
      flag, values = tok.split("=", 1)
      return [v for value in values.split("|")
              for v in variants(tokens[:i] + [f"{flag}={value}"] + tokens[i + 1:])]
  return [tokens]


class _Parsed(Exception):
  pass


def parse_argparse(main, argv, names_only=False) -> str:
  """Run ``main(argv)`` only up to its ``ArgumentParser.parse_args``: '' when the
  flags parse (flag names checked only when a value is a placeholder, or with
  ``names_only``), else the parser's message."""
  original = argparse.ArgumentParser.parse_args
  placeholder = names_only or any(PLACEHOLDER.search(t.split("=", 1)[-1]) for t in argv)

  def stop(self, args=None, namespace=None):
    if self.prog.split()[0] not in ("fedfrac-sweep", "fedfrac-reproduce", "fedfrac-bench",
                                    "fedfrac-campaign"):
      return original(self, args, namespace)
    if placeholder:
      known = dict(self._option_string_actions)
      for action in self._actions:      # and the flags of a subcommand named
        if isinstance(action, argparse._SubParsersAction):
          for name in (t for t in args if t in action.choices):
            known.update(action.choices[name]._option_string_actions)
      unknown = [t.split("=")[0] for t in args if t.startswith("-") and
                 t.split("=")[0] not in known]
      raise _Parsed(f"unknown flags {unknown}" if unknown else "")
    original(self, args, namespace)
    raise _Parsed("")

  err = io.StringIO()
  with mock.patch.object(argparse.ArgumentParser, "parse_args", stop), \
       contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
      main(argv)
    except _Parsed as e:
      return str(e)
    except SystemExit as e:
      return err.getvalue().strip() or f"exit {e.code}"
  return "the command ran past its argument parser"


def parse_absl(argv) -> str:
  """``fedfrac-run`` / ``python -m fedfrac.main``'s flag parsing (config file
  loaded, ``--config.<key>`` overrides applied): '' or its one-line error."""
  from absl import flags
  from fedfrac import main as main_lib
  saved = list(sys.argv)
  err = io.StringIO()
  try:
    with contextlib.redirect_stderr(err):
      main_lib.parse_flags(["fedfrac-run"] + argv)
    return ""
  except SystemExit:
    return err.getvalue().strip() or "exit"
  finally:
    sys.argv[:] = saved
    flags.FLAGS.unparse_flags()
    for name in [n for n in flags.FLAGS if n.startswith("config.")]:
      delattr(flags.FLAGS, name)   # overrides are defined per parse, by config_flags


def make_targets() -> set:
  return set(re.findall(r"^([\w-]+):", _read("Makefile"), re.M))


def check(command: str) -> list:
  """Problems with one documented ``command`` (empty when it parses)."""
  tokens = [t for t in shlex.split(command.replace("|", "\\|").replace("\\|", "|"))
            if t != "..."]
  if ">" in tokens:
    tokens = tokens[:tokens.index(">")]     # output redirected to a file
  if tokens[0] == "make":
    return [] if tokens[1] in make_targets() else [f"no make target {tokens[1]!r}"]
  if tokens[:2] == ["python", "-m"]:
    module, args = tokens[2], tokens[3:]
  else:
    module = {"fedfrac-run": "fedfrac.main", "fedfrac-sweep": "fedfrac.sweep",
              "fedfrac-reproduce": "fedfrac_lab.reproduce",
              "fedfrac-bench": "fedfrac_lab.bench",
              "fedfrac-campaign": "fedfrac_lab.campaign"}.get(tokens[0])
    args = tokens[1:]
    if module is None:
      return [f"no console script {tokens[0]!r} (setup.cfg)"]
  if not args or PLACEHOLDER.search(args[0]):
    if module not in ("fedfrac.main", "fedfrac.sweep", "fedfrac_lab.reproduce", "fedfrac_lab.bench",
                      "fedfrac_lab.campaign") and importlib.util.find_spec(module) is None:
      return [f"no module {module}"]
    return []              # the program named in prose, or fedfrac-reproduce <paper>
  if module == "fedfrac_lab.campaign" and args[0] not in ("run", "collect"):
    return [f"no fedfrac-campaign command {args[0]!r}"]
  if module == "fedfrac_lab.reproduce" and not any(a.startswith("-") for a in args):
    # A paper (and its subcommand) named in prose: the paper must exist.
    from fedfrac_lab.reproduce import PAPERS
    return [] if args[0] in PAPERS else [f"no paper {args[0]!r}"]
  # A flag named last without its value ("`firma --from-json`") names the flag.
  names_only = args[-1].startswith("-") and "=" not in args[-1]
  problems = []
  for argv in variants(args):
    for tok in argv:
      if tok.startswith("--config=") and module != "fedfrac_lab.bench":
        path = tok.split("=", 1)[1].split(":")[0]
        if not os.path.isfile(os.path.join(ROOT, path)):
          problems.append(f"{tok}: no such file")
    if module == "fedfrac.main":
      message = parse_absl(argv)
    elif module == "fedfrac.sweep":
      from fedfrac import sweep
      message = parse_argparse(sweep.main, argv, names_only)
    elif module == "fedfrac_lab.reproduce":
      from fedfrac_lab.reproduce import PAPERS
      if not argv or argv[0] not in PAPERS:
        message = f"no paper {argv[:1]}"
      else:
        message = parse_argparse(PAPERS[argv[0]].main, argv[1:], names_only)
    elif module == "fedfrac_lab.bench":
      from fedfrac_lab.bench import __main__ as bench
      message = parse_argparse(bench.main, argv, names_only)
    elif module == "fedfrac_lab.campaign":
      from fedfrac_lab.campaign import __main__ as campaign
      message = ("" if len(argv) == 1 else
                 parse_argparse(campaign.main, argv, names_only))
    else:
      message = f"unknown module {module}"
    if message:
      problems.append(message)
  return problems


@pytest.mark.parametrize("doc", DOCS)
def test_every_documented_command_parses_with_the_flags_shown(doc):
  commands = doc_commands(_read(doc))
  assert len(commands) >= 10
  problems = {c: p for c in dict.fromkeys(commands) if (p := check(c))}
  assert not problems, "\n".join(f"{c}\n  -> {p}" for c, p in problems.items())


@pytest.mark.parametrize("doc", GUIDE + INCLUDED)
def test_every_command_on_every_guide_page_parses(doc):
  problems = {c: p for c in dict.fromkeys(doc_commands(_read(doc), doc)) if (p := check(c))}
  assert not problems, "\n".join(f"{c}\n  -> {p}" for c, p in problems.items())


def test_the_guide_pages_hold_the_commands_the_readme_left_to_them():
  """The guide is found and read: its pages hold many commands (the README's
  sections moved there), and a reST page's code blocks and literals are read."""
  assert {"docs/api/guide/running.md", "docs/api/guide/sweeps.md",
          "docs/api/guide/reproductions/index.rst"} <= set(GUIDE)
  assert sum(len(doc_commands(_read(d), d)) for d in GUIDE) >= 40
  rst = ("Run ``fedfrac-reproduce firma --no_such=1`` or:\n\n.. code-block:: bash\n"
         "   :caption: x\n\n   make run   # the quickstart\n   fedfrac-sweep --seeds=0 \\\n"
         "       --sed=1\n\nText.\n")
  assert rst_commands(rst) == ["make run", "fedfrac-sweep --seeds=0 --sed=1",
                               "fedfrac-reproduce firma --no_such=1"]
  assert all(check(c) for c in rst_commands(rst)[1:])


def test_the_check_catches_a_wrong_flag_target_or_config():
  assert check("fedfrac-sweep --config=configs/quickstart.py --sed=0,1")
  assert check("fedfrac-reproduce kuramoto --no_such_flag=1")
  assert check("fedfrac-reproduce tuned --study=fractional|nonsense")
  assert check("python -m fedfrac.main --config=configs/quickstart.py --config.rounds_=3")
  assert check("python -m fedfrac.main --config=configs/no_such.py")
  assert check("make no-such-target")
  assert check("fedfrac-bench --vs-pytorch")
  assert not check("fedfrac-reproduce published --paper=...")
  # Named in prose: a paper, a subcommand, a module, a flag given last without
  # its value; a metavariable (DIR, R) checks the flag names, subcommands' too.
  assert check("fedfrac-reproduce no_such_paper")
  assert check("fedfrac-campaign start")
  assert check("python -m fedfrac.no_such > out.md")
  assert not check("python -m fedfrac_lab.equations > docs/equations.md")
  assert not check("fedfrac-reproduce firma --from-json")
  assert check("fedfrac-reproduce firma --from-jsn")
  assert not check("fedfrac-reproduce kuramoto_authors run --authors=DIR --out=OUT")
  assert check("fedfrac-reproduce kuramoto_authors run --authors=DIR --outt=OUT")
  assert not check("python -m fedfrac.main --config=configs/quickstart.py "
                   "--config.methods.fedavg.client.lr=0.01")


def _python_block(doc, marker):
  return next(m.group(1) for m in re.finditer(r"```python\n(.*?)```", _read(doc), re.S)
              if marker in m.group(1))


def _run_block(monkeypatch, doc, marker, **config):
  """Execute the ``python`` block of ``doc`` that contains ``marker``, verbatim,
  with ``ff.base_config`` replaced by the tests' tiny digits config (two rounds
  unless ``config`` says otherwise); returns (its namespace, what it printed).
  The algorithms it registers are unregistered after it."""
  import fedfrac as ff
  from tests import helpers
  block = _python_block(doc, marker)
  monkeypatch.setattr(ff, "base_config", lambda: helpers.tiny_config(
      **{"rounds": 2, "eval_every": 1, **config}))
  namespace: dict = {}
  registered = set(ff.algorithms.REGISTRY)
  try:
    with contextlib.redirect_stdout(io.StringIO()) as out:
      exec(compile(block, doc, "exec"), namespace)
  finally:      # an algorithm the example registers (algorithms=) is not left behind
    for name in set(ff.algorithms.REGISTRY) - registered:
      ff.algorithms.unregister(name)
  return namespace, out.getvalue()


def test_readme_python_example_runs_as_written(monkeypatch):
  """The README's example, a method of one's own beside FedAvg on numpy arrays,
  runs as written (on the tests' tiny config: two rounds) and is about 15 lines."""
  block = _python_block("README.md", "ff.run(config, data=(x, y)")
  assert len(block.strip().splitlines()) <= 22
  namespace, printed = _run_block(monkeypatch, "README.md", "ff.run(config, data=(x, y)")
  results = namespace["results"]
  assert results.methods() == ["fedavg", "mine"]
  assert "| mine | other |" in printed and "| fedavg | baseline |" in printed
  assert not results.failed
  assert results.final_params("mine") is not None


def test_running_page_python_example_runs_as_written(monkeypatch):
  """The guide's notebook example (Running experiments), on a tiny config."""
  import matplotlib
  previous = matplotlib.get_backend()
  namespace, printed = _run_block(monkeypatch, "docs/api/guide/running.md", "ff.run(config)")
  assert matplotlib.get_backend() == previous
  assert namespace["config"].data.alpha == 0.3
  assert "| fedavg | baseline |" in printed
  assert len(namespace["results"].plot()) == 2


def test_sweeps_page_python_example_runs_as_written(monkeypatch):
  """The guide's ``ff.run_many`` example (Sweeps and clusters): every method at
  every learning rate of the grid, over three seeds, in one table."""
  namespace, printed = _run_block(monkeypatch, "docs/api/guide/sweeps.md", "ff.run_many(")
  labels = namespace["results"].methods()
  assert len(labels) == 6 and all("client.lr" in label for label in labels)
  assert "fedprox" in printed
