"""The sign-flip table of ``digits_signflip.py`` on a Dirichlet(0.5) label-skewed split.

Same model, training, attack (2 of 10 clients upload −10·Δ) and methods; only the
partition changes. Robust rules that keep a single or a central client's update
(Krum, the median) lose accuracy when honest clients' updates differ by data
skew; this table shows by how much.

  fedfrac-reproduce robust --config=configs/robust/digits_signflip_dirichlet.py --out=results/robust_digits_dirichlet.md
"""

from configs.robust import digits_signflip as _base


def get_config():
  c = _base.get_config()
  c.name = "digits, Dirichlet(0.5), 10 clients, 20% sign-flip (x10) attackers"
  c.data.partition = "dirichlet"
  c.data.alpha = 0.5
  return c
