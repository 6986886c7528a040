"""BEV backbone study on the SYNTHETIC fleet (FO-RI-FedAvg paper §IV-O, Tables
XXXII–XXXIII): the same federation with the window MLP, a GRU or an LSTM.

  python -m fedfrac.main --config=configs/bev/architectures.py:gru --workdir=runs/bev_gru

Arguments: ``ann`` (the default two-hidden-layer MLP on the flattened window),
``gru`` / ``lstm`` (a single recurrent layer over the 60 time steps, the same
hidden size for both, linear head on the last hidden state; params split
``{extractor, head}``, fedfrac/models/regression.py). The paper runs this study
under its protocol (C = 0.3, α_D = 0.3, T = 300, n = 60, five seeds; see
configs/bev/paper.py); here it uses the scaled-down setup of configs/bev/base.py
(hidden size ``model.rnn_hidden`` = 64), FedAvg and FO-RI-FedAvg with the light
roughness probe.
"""
from __future__ import annotations

import ml_collections
from configs.bev import base

MODELS = {"ann": "window_mlp", "gru": "window_gru", "lstm": "window_lstm"}
METHODS = ("fedavg", "fo_ri_fedavg")


def get_config(arg="gru"):
  if arg not in MODELS:
    raise ValueError(f"architecture {arg!r}: allowed values are {', '.join(MODELS)}")
  c = base.get_config()
  c.model.name = MODELS[arg]
  c.name = f"BEV architecture {arg}, SYNTHETIC fleet"
  c.methods = ml_collections.ConfigDict()
  for label, (name, options) in base.secondary_methods(METHODS).items():
    if name in base.available([name]):
      c.methods[label] = base.method(name, **options)
  return c
