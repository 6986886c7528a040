"""Default experiment config, shared helpers, and validation by section (docs/design.md §2.3).

The config's names are defined below the section checks that use them and
re-exported here: the check helpers (:class:`ConfigError`, :func:`check`, ...)
in :mod:`fedfrac._validation`, ``base_config`` and the section readers in
:mod:`fedfrac.config_base`. ``base_config()`` returns a ConfigDict holding every
field a run reads; files in ``configs/`` start from it and change what they need.
Every key is declared once, with its default and its checks, by the layer that
reads its section (:mod:`fedfrac.config_schema`).
``validate(config)`` checks every field before any compute, each section by the
component that reads it (run fields, task, client, server and methods:
:mod:`fedfrac.runner.validate`; data: :mod:`fedfrac.data.validate`; model:
:mod:`fedfrac.models.validate`; engine, churn and attack:
:mod:`fedfrac.sim.validate`), and raises :class:`ConfigError` naming the key,
the value and what is allowed.
"""
from __future__ import annotations

from fedfrac._validation import (ConfigError, check, fail, get, int_at_least,  # noqa: F401
                                 is_int, is_num)
from fedfrac.config_base import (METHOD_SECTIONS, aggregator_spec,  # noqa: F401
                                 aggregator_spec_of, attack_config, base_config,
                                 check_key, client_config, config_section, files_source,
                                 import_config_file, method_labels, method_options,
                                 schema, section_config, server_config, sibling_config)


def validate(config) -> None:
  """Check every field; raise :class:`ConfigError` on the first bad one (a key
  nothing reads, or a field of ``base_config()`` missing, first)."""
  from fedfrac.config_keys import check_keys
  from fedfrac.data import validate as data_checks
  from fedfrac.models import validate as model_checks
  from fedfrac.runner import validate as run_checks
  from fedfrac.sim import validate as engine_checks
  check_keys(config)
  run_checks.validate_run(config)
  data_checks.validate_data(config)
  data_checks.check_unused(config, base_config())
  model_checks.validate_model(config)
  run_checks.validate_task(config)
  engine_checks.validate_engine(config)
  run_checks.validate_methods(config)
