"""Experiment configs: each file's ``get_config()`` returns the ConfigDict of one
experiment (``python -m fedfrac.main --config=configs/<folder>/<file>.py[:ARG]``).

Config files reuse each other with ordinary imports (``from configs.firma import
digits``): a file given as ``--config`` is imported under its package name
(:func:`fedfrac.config_base.import_config_file`), so this works from any working
directory. :mod:`configs.args` reads the ``ARG`` after the colon.
"""
