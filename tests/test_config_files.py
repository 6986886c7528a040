"""Config files are checked like the command line (fedfrac.config_files,
fedfrac.config_keys): every file in configs/ loads through the check; a
misspelt, unknown or deleted key, a get_config that is missing, returns a dict
or None, or sets a value of the wrong type, is one line naming the file, from
fedfrac-run, fedfrac-sweep and fedfrac-reproduce alike."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import ml_collections
import pytest

from fedfrac import config_files, config_keys, sweep
from fedfrac.config import ConfigError, base_config
from fedfrac_lab.reproduce import __main__ as reproduce_main
from fedfrac_lab.reproduce import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(os.path.relpath(p, ROOT)
                 for p in glob.glob(os.path.join(ROOT, "configs", "**", "*.py"),
                                    recursive=True)
                 if "def get_config(" in open(p, encoding="utf-8").read())


def _arguments(path):
  """The default (None) and the other arguments the reproductions pass."""
  module = common.load_module(os.path.join(ROOT, path))
  args = [None]
  if hasattr(module, "STUDIES"):            # bev/ablations: study=value
    args += [f"{s}={v}" for s, (values, _) in module.STUDIES.items() for v in values]
  if hasattr(module, "MODELS"):             # bev/architectures
    args += list(module.MODELS)
  if hasattr(module, "VALUES"):             # bev/participation, bev/scaling
    args += [str(v) for v in module.VALUES]
  if hasattr(module, "ASYMMETRIC"):         # bev/churn
    args += [str(v) for v in module.SYMMETRIC] + list(module.ASYMMETRIC)
  if isinstance(getattr(module, "SCENARIOS", None), dict):   # firma: compat,scenario
    args += [f"{c},{s}" for c in module.COMPAT for s in module.SCENARIOS]
  elif hasattr(module, "SCENARIOS"):        # fofedavg
    args += list(module.SCENARIOS)
  return args


def test_there_are_config_files():
  assert len(CONFIGS) >= 20 and "configs/quickstart.py" in CONFIGS


@pytest.mark.parametrize("path", CONFIGS)
def test_every_config_file_loads_through_the_check(path):
  for arg in _arguments(path):
    config = config_files.load_config_file(os.path.join(ROOT, path), arg)
    assert isinstance(config, ml_collections.ConfigDict)
    assert config_keys.key_problems(config) == ([], [], []), (path, arg)


# file body -> fragments of the one-line message
FAULTS = {
    "typo": ("from fedfrac.config import base_config\n"
             "def get_config():\n  c = base_config()\n  c.data.alhpa = 0.05\n  return c\n",
             ["config.data.alhpa=0.05: unknown key 'alhpa'; did you mean 'alpha'?",
              "config.data has keys: alpha, "]),
    "unknown_client_key": (
        "from fedfrac.config import base_config\n"
        "def get_config():\n  c = base_config()\n  c.client.learning_rate = 10.0\n"
        "  return c\n",
        ["config.client.learning_rate=10.0: unknown key 'learning_rate'; "
         "did you mean 'lr'?"]),
    "two_typos": ("from fedfrac.config import base_config\n"
                  "def get_config():\n  c = base_config()\n  c.data.alhpa = 0.05\n"
                  "  c.client.learning_rate = 10.0\n  return c\n",
                  ["unknown key 'learning_rate'", "; also: config.data.alhpa=0.05"]),
    "method_option": (
        "import ml_collections\nfrom fedfrac.config import base_config\n"
        "def get_config():\n  c = base_config()\n"
        "  c.methods.fofedavg = ml_collections.ConfigDict(dict(name='fofedavg', alpah=0.9))\n"
        "  return c\n",
        ["config.methods.fofedavg.alpah=0.9: unknown option for algorithm 'fofedavg'; "
         "did you mean 'alpha'?"]),
    "method_section_key": (
        "import ml_collections\nfrom fedfrac.config import base_config\n"
        "def get_config():\n  c = base_config()\n"
        "  c.methods.fedavg.client = ml_collections.ConfigDict(dict(lrr=0.1))\n"
        "  return c\n",
        ["config.methods.fedavg.client.lrr=0.1: unknown client option 'lrr'; "
         "did you mean 'lr'?"]),
    "returns_dict": ("from fedfrac.config import base_config\n"
                     "def get_config():\n  return base_config().to_dict()\n",
                     ["get_config() returned a dict; it must return an "
                      "ml_collections.ConfigDict"]),
    "returns_none": ("from fedfrac.config import base_config\n"
                     "def get_config():\n  c = base_config()\n",
                     ["get_config() returned None (a missing return statement?)"]),
    "no_get_config": ("X = 1\n", ["the file defines no get_config() function"]),
    "deleted_field": ("from fedfrac.config import base_config\n"
                      "def get_config():\n  c = base_config()\n  del c.data.alpha\n"
                      "  return c\n",
                      ["the config lacks config.data.alpha, a field of "
                       "fedfrac.config.base_config()"]),
    "partial_section": ("import ml_collections\nfrom fedfrac.config import base_config\n"
                        "def get_config():\n  c = base_config()\n"
                        "  c.model = ml_collections.ConfigDict(dict(name='mlp'))\n"
                        "  return c\n",
                        ["the config lacks config.model.conv_impl, config.model.dropout, "
                         "config.model.hidden"]),
    "section_replaced_by_a_value": (
        "from fedfrac.config import base_config\n"
        "def get_config():\n  c = base_config()\n  c.data.tfds = None\n  return c\n",
        ["config.data.tfds=None: must be a section with keys data_dir, download"]),
    "wrong_type": ("from fedfrac.config import base_config\n"
                   "def get_config():\n  c = base_config()\n  c.rounds = 'abc'\n"
                   "  return c\n",
                   ["sets a value of the wrong type, line 4 (c.rounds = 'abc'): config "
                    "field 'rounds' holds int values, got 'abc' (str)"]),
    "raises": ("def get_config():\n  raise RuntimeError('broken on purpose')\n",
               ["the config file raised RuntimeError: broken on purpose, line 2"]),
    "syntax_error": ("def get_config(:\n  pass\n",
                     ["cannot load the config file (SyntaxError"]),
}


def _write(tmp_path, name, body):
  path = tmp_path / f"{name}.py"
  path.write_text(body)
  return str(path)


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_faulty_config_file_is_one_line_naming_it(tmp_path, name):
  body, fragments = FAULTS[name]
  path = _write(tmp_path, name, body)
  with pytest.raises(ConfigError) as info:
    config_files.load_config_file(path)
  message = str(info.value)
  assert message.startswith(f"--config={path}: ") and "\n" not in message, message
  for fragment in fragments:
    assert fragment in message, message


def test_missing_file_and_directory(tmp_path):
  with pytest.raises(ConfigError, match="absent.py: no such file"):
    config_files.load_config_file(str(tmp_path / "absent.py"))
  with pytest.raises(ConfigError, match="is a directory"):
    config_files.load_config_file(str(tmp_path))


def test_a_config_file_argument_after_a_colon(tmp_path):
  path = _write(tmp_path, "arg", "from fedfrac.config import base_config\n"
                "def get_config(arg='3'):\n  c = base_config()\n  c.rounds = int(arg)\n"
                "  return c\n")
  assert config_files.load_config_file(path).rounds == 3
  assert config_files.load_config_file(f"{path}:7").rounds == 7


def test_override_keys_are_checked_with_did_you_mean():
  config = base_config()
  config_keys.check_override_key(config, "data.alpha")
  config_keys.check_override_key(config, "churn.per_class.bus")      # a new group
  config_keys.check_override_key(config, "methods.fedavg.server_lr")  # schema option
  with pytest.raises(ConfigError, match="unknown key 'alhpa'; did you mean 'alpha'"):
    config_keys.check_override_key(config, "data.alhpa")
  with pytest.raises(ConfigError, match="unknown key 'nosuch'"):
    config_keys.check_override_key(config, "nosuch.key")
  with pytest.raises(ConfigError, match="did you mean 'server_lr'"):
    config_keys.check_override_key(config, "methods.fedavg.server_lrr")


def test_fedfrac_run_refuses_a_misspelt_key_in_a_config_file(tmp_path):
  """Before: the run went ahead with data.alpha and client.lr at their defaults."""
  body, _ = FAULTS["two_typos"]
  path = _write(tmp_path, "typos", body)
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  out = subprocess.run([sys.executable, "-m", "fedfrac.main", f"--config={path}",
                        f"--workdir={tmp_path / 'run'}", "--config.rounds=1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert out.returncode == 2, out.stderr[-2000:]
  assert "Traceback" not in out.stderr
  lines = [l for l in out.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith(f"error: --config={path}: "), lines
  assert "did you mean 'lr'" in lines[0] and "config.data.alhpa" in lines[0]
  assert not (tmp_path / "run" / "metrics.csv").exists()


def test_fedfrac_sweep_refuses_a_faulty_config_file(tmp_path, capsys):
  body, fragments = FAULTS["returns_none"]
  path = _write(tmp_path, "none", body)
  with pytest.raises(SystemExit) as stopped:
    sweep.main([f"--config={path}", "--workers=1", f"--out={tmp_path / 't.md'}"])
  assert stopped.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(f"error: --config={path}: ")
  assert fragments[0] in err[0]
  assert not (tmp_path / "t.points").exists()


def test_fedfrac_reproduce_refuses_a_faulty_config_file(tmp_path, capsys):
  body, _ = FAULTS["unknown_client_key"]
  path = _write(tmp_path, "robust_typo", body)
  assert reproduce_main.main(["robust", f"--config={path}", "--workers=1",
                              f"--dir={tmp_path / 'points'}"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(f"error: --config={path}: ")
  assert "did you mean 'lr'" in err[0]
  assert not (tmp_path / "points").exists()


# -- configs/ is a package: files import each other, one argument parser --


def test_configs_is_a_package_and_its_files_import_each_other():
  folders = {os.path.dirname(p) for p in CONFIGS}
  assert all(os.path.isfile(os.path.join(ROOT, f, "__init__.py")) for f in folders)
  for path in CONFIGS:
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    assert "sibling_config" not in text and "importlib" not in text, path


def test_a_config_file_imports_its_siblings_from_any_working_directory(tmp_path):
  mnist = os.path.join(ROOT, "configs", "firma", "mnist.py")
  code = ("from fedfrac import config_files\n"
          f"c = config_files.load_config_file({mnist!r}, 'reference_code,ls1')\n"
          "import sys\n"
          "print(c.data.tfds.name, c.data.compat, c.name.endswith('[ls1, reference_code]'),"
          " sys.modules['configs.firma.digits'].__file__.startswith("
          f"{os.path.join(ROOT, 'configs')!r}))\n")
  env = dict(os.environ, PYTHONPATH=ROOT)
  out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["mnist", "reference_code", "True", "True"]


def test_sibling_config_still_loads_with_a_deprecation_warning():
  from fedfrac.config import import_config_file, sibling_config
  with pytest.warns(DeprecationWarning, match="configs/ is a package"):
    old = sibling_config(os.path.join(ROOT, "configs", "fofedavg", "x.py"), "digits.py")
  new = import_config_file(os.path.join(ROOT, "configs", "fofedavg", "digits.py"))
  assert old.get_config().to_dict() == new.get_config().to_dict()


def test_one_argument_parser_reads_every_config_argument():
  from configs import args
  fields, choices = {"compat": "paper", "scenario": "dir0.5"}, {"compat": ("paper", "x")}
  assert args.parse(None, fields, choices) == fields
  assert args.parse("x,ls1", fields, choices) == {"compat": "x", "scenario": "ls1"}
  assert args.parse("scenario=iid", fields, choices) == {"compat": "paper",
                                                         "scenario": "iid"}
  assert args.parse("K=20,s=5", {"K": 10, "s": 3}) == {"K": 20, "s": 5}
  for arg, message in (("K=abc", "config argument K='abc': must be an integer"),
                       ("z=1", "unknown name 'z'"),
                       ("1,2,3", "one value more than the argument has fields")):
    with pytest.raises(ValueError, match=message):
      args.parse(arg, {"K": 10, "s": 3})
  with pytest.raises(ValueError, match="compat='y': allowed values are paper, x"):
    args.parse("y", fields, choices)
  # The config files read their argument with it, as before.
  kuramoto = common.load_module(os.path.join(ROOT, "configs", "kuramoto", "digits.py"))
  assert kuramoto.parse_arg("K=20,s=5,mode=reference_code") == (20, 5, "reference_code")
  fo = common.load_module(os.path.join(ROOT, "configs", "fofedavg", "mnist_cnn.py"))
  assert fo.parse_arg("severe,100") == ("severe", 100)
  with pytest.raises(ValueError, match="scenario='nope'"):
    fo.parse_arg("nope")


def test_validate_alone_refuses_a_key_nothing_reads():
  """``ff.config.validate`` from a notebook checks the keys as ``ff.run`` does:
  a typo is one line with did-you-mean, not a setting silently ignored."""
  from fedfrac import config as config_lib
  config = base_config()
  config.client.learning_rate = 10.0
  with pytest.raises(ConfigError, match="config.client.learning_rate=10.0: unknown key "
                     "'learning_rate'; did you mean 'lr'"):
    config_lib.validate(config)
  config_lib.validate(base_config())
