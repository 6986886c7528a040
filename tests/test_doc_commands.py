"""What README.md and REPRODUCTION.md tell a newcomer to type exists as shown:
every ``make`` target, and every ``fedfrac-*`` / ``python -m fedfrac...``
command in a code block or an inline code span parses with the flags shown
(argparse and absl parsers, without running anything: a parse is stopped before
the command's work starts), with the config files it names; and the README's
Python example runs as written (on a tiny config)."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from unittest import mock

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", "REPRODUCTION.md")
COMMAND = re.compile(r"(fedfrac-[a-z]+|python -m fedfrac[\w.]*|make [\w-]+)\b")
PLACEHOLDER = re.compile(r"^\.\.\.$|<[^>]*>")


def _read(name):
  with open(os.path.join(ROOT, name), encoding="utf-8") as f:
    return f.read()


def doc_commands(text: str) -> list:
  """Commands in ``text``: lines of shell code blocks, fenced or indented
  (``\\`` continuations joined, comments dropped), and inline code spans that
  start with a command."""
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


def parse_argparse(main, argv) -> str:
  """Run ``main(argv)`` only up to its ``ArgumentParser.parse_args``: '' when the
  flags parse (flag names checked only when a value is a placeholder), else the
  parser's message."""
  original = argparse.ArgumentParser.parse_args
  placeholder = any(PLACEHOLDER.search(t.split("=", 1)[-1]) for t in argv)

  def stop(self, args=None, namespace=None):
    if self.prog.split()[0] not in ("fedfrac-sweep", "fedfrac-reproduce", "fedfrac-bench"):
      return original(self, args, namespace)
    if placeholder:
      known = self._option_string_actions
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
  if tokens[0] == "make":
    return [] if tokens[1] in make_targets() else [f"no make target {tokens[1]!r}"]
  if tokens[:2] == ["python", "-m"]:
    module, args = tokens[2], tokens[3:]
  else:
    module = {"fedfrac-run": "fedfrac.main", "fedfrac-sweep": "fedfrac.sweep",
              "fedfrac-reproduce": "fedfrac.reproduce",
              "fedfrac-bench": "fedfrac.bench"}.get(tokens[0])
    args = tokens[1:]
    if module is None:
      return [f"no console script {tokens[0]!r} (setup.cfg)"]
  if not args or PLACEHOLDER.search(args[0]):
    return []              # the program named in prose, or fedfrac-reproduce <paper>
  problems = []
  for argv in variants(args):
    for tok in argv:
      if tok.startswith("--config=") and module != "fedfrac.bench":
        path = tok.split("=", 1)[1].split(":")[0]
        if not os.path.isfile(os.path.join(ROOT, path)):
          problems.append(f"{tok}: no such file")
    if module == "fedfrac.main":
      message = parse_absl(argv)
    elif module == "fedfrac.sweep":
      from fedfrac import sweep
      message = parse_argparse(sweep.main, argv)
    elif module == "fedfrac.reproduce":
      from fedfrac.reproduce import PAPERS
      if not argv or argv[0] not in PAPERS:
        message = f"no paper {argv[:1]}"
      else:
        message = parse_argparse(PAPERS[argv[0]].main, argv[1:])
    elif module == "fedfrac.bench":
      from fedfrac.bench import __main__ as bench
      message = parse_argparse(bench.main, argv)
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


def test_the_check_catches_a_wrong_flag_target_or_config():
  assert check("fedfrac-sweep --config=configs/quickstart.py --sed=0,1")
  assert check("fedfrac-reproduce kuramoto --no_such_flag=1")
  assert check("fedfrac-reproduce tuned --study=fractional|nonsense")
  assert check("python -m fedfrac.main --config=configs/quickstart.py --config.rounds_=3")
  assert check("python -m fedfrac.main --config=configs/no_such.py")
  assert check("make no-such-target")
  assert check("fedfrac-bench --vs-pytorch")
  assert not check("fedfrac-reproduce published --paper=...")
  assert not check("python -m fedfrac.main --config=configs/quickstart.py "
                   "--config.methods.fedavg.client.lr=0.01")


def test_readme_python_example_runs_as_written(monkeypatch):
  """The README's notebook example, verbatim, on a tiny config (``base_config``
  is the only thing replaced)."""
  import matplotlib
  import fedfrac as ff
  from tests import helpers
  block = next(m.group(1) for m in re.finditer(r"```python\n(.*?)```", _read("README.md"),
                                                re.S) if "ff.run(config)" in m.group(1))
  monkeypatch.setattr(ff, "base_config",
                      lambda: helpers.tiny_config(rounds=2, eval_every=1))
  previous = matplotlib.get_backend()
  namespace: dict = {}
  with contextlib.redirect_stdout(io.StringIO()) as out:
    exec(compile(block, "README.md", "exec"), namespace)
  assert matplotlib.get_backend() == previous
  assert namespace["config"].data.alpha == 0.3
  assert "| fedavg | baseline |" in out.getvalue()
  assert len(namespace["results"].plot()) == 2
