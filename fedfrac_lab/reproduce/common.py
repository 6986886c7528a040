"""What every reproduction module shares: where the config files are, loading a
config file or a published-values file, and the command line a table quotes.

Config files (``configs/<paper>/*.py``) are loaded by path, as ``--config`` does,
not imported as a package: they live in the source checkout beside ``fedfrac/``.
A relative path is looked up from the working directory first and then from the
checkout that holds this package, so the commands work from any directory of a
source (or editable) install.
"""
from __future__ import annotations

import datetime
import json
import os
import shlex

import numpy as np

import fedfrac
from fedfrac import config_base
from fedfrac.sweep import checks as sweep_checks

# The library whose code produces the numbers, and the checkout the lab sits in
# (its configs/, results/ and docs).
PACKAGE_DIR = os.path.dirname(os.path.abspath(fedfrac.__file__))
CHECKOUT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PUBLISHED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "published")


def parse_seeds(text, flag="--seeds") -> tuple:
  """``"0,1,2"`` -> ``(0, 1, 2)``; anything else (empty, ``a``, an empty item,
  a negative or repeated seed) is ``SystemExit`` with one line naming the flag,
  its value and what is allowed, before any compute."""
  items = str(text).split(",")
  if not all(s.strip().isdigit() for s in items):
    raise SystemExit(f"{flag}={text!r}: comma-separated integers >= 0, e.g. 0,1,2")
  seeds = tuple(int(s) for s in items)
  if len(set(seeds)) != len(seeds):
    raise SystemExit(f"{flag}={text!r}: each seed once")
  return seeds


def worker_count(text) -> int:
  """``--workers`` (an argparse ``type``): an integer >= 0, else ``SystemExit``
  with one line naming the flag, its value and what is allowed."""
  try:
    n = int(text)
  except ValueError:
    n = -1
  if n < 0:
    raise SystemExit(f"--workers={text}: allowed values are 0 or 1 (run in this process) "
                     f"or a count of worker processes; leave it out for one per CPU core "
                     f"or device")
  return n


def output_path(flag, directory=False):
  """An argparse ``type`` for an output flag: the path as given (``""``: none),
  after refusing one that cannot be written (a file in the way, or a directory
  where a file goes: :func:`fedfrac.sweep.checks.check_output`) with
  ``SystemExit`` naming the flag, before any compute."""
  def parse(text):
    if text:
      try:
        sweep_checks.check_output(flag, text, directory=directory)
      except sweep_checks.UsageError as e:
        raise SystemExit(str(e)) from None
    return text
  parse.__name__ = "directory" if directory else "file path"
  return parse


def find_file(path):
  """Absolute path of ``path``: as given when it exists (absolute or relative to
  the working directory), else relative to the source checkout. Raises
  FileNotFoundError naming both places when neither has it."""
  if os.path.exists(path):
    return os.path.abspath(path)
  candidate = os.path.join(CHECKOUT_DIR, path)
  if not os.path.isabs(path) and os.path.exists(candidate):
    return candidate
  raise FileNotFoundError(
      f"{path!r}: not found in {os.getcwd()!r} nor in the source checkout "
      f"{CHECKOUT_DIR!r}")


def load_module(path):
  """The Python module at ``path`` (a config file, or another file loaded by path),
  through the same loader as ``--config`` (:func:`fedfrac.config_base.import_config_file`); its
  ``get_config`` checks what it returns as ``--config`` does
  (:func:`fedfrac.config_files.checked_module`: unknown or deleted keys, a
  result that is not a ConfigDict, one line each)."""
  from fedfrac import config_files
  path = find_file(path)
  return config_files.checked_module(
      config_base.import_config_file(path), path)


def config_module(relpath):
  """The config module ``configs/<relpath>`` (e.g. ``"firma/digits.py"``)."""
  return load_module(os.path.join("configs", relpath))


def published_document(paper):
  """The whole published-values file ``published/<paper>.json``.

  Two layouts are read: the transcription layout ``{"paper", "source", "settings",
  "tables": {table: {"caption", "columns", "rows": {row: {column: cell}},
  "notes", ...}}, "figures", "notes"}`` and the plain layout
  ``{table: {row: {column: value}}}`` (returned wrapped as
  ``{"tables": {table: {"rows": ...}}}``). A cell is a number, a string
  ("NR", symbolic costs), a list, ``{"mean", "std"}`` or another small dict
  (e.g. ``{"max_accuracy", "round"}``); ``None`` marks a cell the paper leaves
  blank."""
  path = os.path.join(PUBLISHED_DIR, f"{paper}.json")
  with open(path, encoding="utf-8") as f:
    doc = json.load(f)
  if "tables" not in doc:
    doc = {"tables": {t: {"rows": rows} for t, rows in doc.items()}}
  for table, body in doc["tables"].items():
    rows = body.get("rows") if isinstance(body, dict) else None
    if not isinstance(rows, dict) or not all(isinstance(r, dict) for r in rows.values()):
      raise ValueError(f"{path}: table {table!r} must map row -> {{column: value}}")
  return doc


def published(paper):
  """Published values of ``paper``: ``{table: {row: {column: cell}}}`` with table,
  row and column names as the paper prints them (see ``published_document`` for
  the cell forms). Cells the paper does not print are absent or ``None``."""
  return {t: body["rows"] for t, body in published_document(paper)["tables"].items()}


def places(value):
  """Decimal places of a published number as transcribed (0.736 -> 3)."""
  if isinstance(value, dict):
    value = value.get("mean")
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return 0
  text = repr(float(value))
  if "e" in text:
    return 6
  return len(text.split(".")[1].rstrip("0"))


def column_places(rows, column):
  """Decimal places the paper prints in ``column`` of a table's ``rows``: the most
  any of its cells has (the transcription drops trailing zeros: 0.7360 -> 0.736)."""
  return max([places(cols.get(column)) for cols in rows.values()] or [0])


def fmt_value(value, digits):
  """``value`` to ``digits`` decimals; ``{"mean", "std"}`` as "mean ± std"; strings
  (e.g. "NR") as they are; ``None`` as "–"."""
  if value is None:
    return "–"
  if isinstance(value, dict) and "mean" in value:
    std = value.get("std")
    return (f"{value['mean']:.{digits}f}" +
            (f" ± {std:.{digits}f}" if std is not None else ""))
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    return f"{value:.{digits}f}"
  return str(value)


def published_mean(value):
  """The number a published cell claims (its mean for ``{"mean", "std"}``), or None
  for a non-numeric cell ("NR", symbolic)."""
  if isinstance(value, dict):
    value = value.get("mean")
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return None
  return float(value)


def seed_mean_std(values):
  """(mean, sample std) over seeds of the finite ``values``; (None, None) if none."""
  v = np.asarray([x for x in values if x is not None], np.float64)
  v = v[np.isfinite(v)]
  if v.size == 0:
    return None, None
  return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def load_results_json(relpath):
  """A committed results JSON (``results/...``, looked up as :func:`find_file`
  does); None when the file is absent."""
  try:
    path = find_file(relpath)
  except FileNotFoundError:
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def markdown_tables(relpath):
  """The tables of a committed markdown report (for results kept only as markdown):
  ``[(heading, [{column: cell text}])]``, ``heading`` the last ``#`` line above
  the table. Raises FileNotFoundError when the file is absent."""
  with open(find_file(relpath), encoding="utf-8") as f:
    lines = f.read().splitlines()
  out, heading, i = [], "", 0
  while i < len(lines):
    line = lines[i]
    if line.startswith("#"):
      heading = line.lstrip("#").strip()
    if (line.startswith("|") and i + 1 < len(lines)
        and lines[i + 1].replace("|", "").replace("-", "").strip() == ""
        and lines[i + 1].startswith("|---")):
      header = [c.strip() for c in line.strip().strip("|").split("|")]
      rows, i = [], i + 2
      while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        rows.append(dict(zip(header, cells)))
        i += 1
      out.append((heading, rows))
      continue
    i += 1
  return out


def parse_mean_std(text):
  """``"0.880 ± 0.017"`` -> (0.880, 0.017); ``"0.878"`` -> (0.878, None); None for
  a cell without a leading number ("n/a", "–")."""
  head = text.split("(")[0].strip()
  mean, _, std = head.partition("±")
  try:
    return float(mean), (float(std) if std.strip() else None)
  except ValueError:
    return None


def command_line(paper, argv):
  """The command that reproduces a table, as the table quotes it."""
  return " ".join(["fedfrac-reproduce", paper] + [shlex.quote(a) for a in argv])


# ---------------------------------------------------------------------- figures
# Every reproduction given ``--out=X.md`` writes its figures beside the markdown as
# ``X_<name>.png`` (``fedfrac.runner.plots``: own Agg canvas, the caller's
# matplotlib backend is never changed).


def figure_path(out, name):
  """``X_<name>.png`` beside the markdown report ``out`` = ``X.md``."""
  return f"{os.path.splitext(out)[0]}_{name}.png"


def stack_curves(curves):
  """Per-seed curves [(rounds [n_i], values [n_i])] -> ``(rounds [n], values
  [seeds, n])`` cut to the shortest (a diverged run may stop early); None when
  there is no curve with at least one point."""
  curves = [(np.asarray(x), np.asarray(v, np.float64)) for x, v in curves]
  n = min((len(v) for _, v in curves), default=0)
  if n == 0:
    return None
  return curves[0][0][:n], np.stack([v[:n] for _, v in curves])


def split_grid_label(label):
  """``"name[option=value]"`` (a grid run's label) -> ``(name, option, value)``
  with ``value`` a float; None for a label without a numeric grid value."""
  if not (label.endswith("]") and "[" in label and "=" in label):
    return None
  name, _, inside = label[:-1].partition("[")
  option, _, value = inside.partition("=")
  try:
    return name, option, float(value)
  except ValueError:
    return None


def wide_range(xs):
  """True when the positive values ``xs`` span two decades or more (log x axis)."""
  xs = np.asarray([x for x in xs if x is not None], np.float64)
  return bool(xs.size and np.all(xs > 0) and xs.max() / xs.min() >= 100)


def produced_line(elapsed_s: float) -> str:
  """The provenance line a table ends with: date, jax version, backend, wall time."""
  import jax
  return (f"Produced {datetime.date.today().isoformat()} with jax {jax.__version__} on "
          f"{jax.default_backend()} in {elapsed_s:.0f} s.")


def write_text(path: str, text: str) -> None:
  """Write a report to ``path`` (its directory created), atomically: a killed
  command leaves the previous file or the new one, never a truncated one."""
  from fedfrac.runner.checkpoint import atomic_write
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  atomic_write(path, text)
