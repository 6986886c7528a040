"""``fedfrac-reproduce firma_authors``: fedfrac's FibFL / FibFL+ beside the authors'
PyTorch code (docs/design.md §3.3). The checks themselves need the authors'
repository and PyTorch, so here only what the command refuses before any work:
one ``error:`` line naming the flag, exit status 2."""
from __future__ import annotations

import pytest

from fedfrac_lab.reproduce import PAPERS, firma_authors


@pytest.mark.parametrize("argv,message", [
    (["parity"], "--authors: parity needs a checkout of the authors' code"),
    (["fmnist", "--method=fibfl"], "--authors: fmnist needs a checkout"),
    (["parity", "--authors=/nowhere", "--method=fibfl_pp"],
     "--method: parity covers fibfl and fibfl_plus"),
    (["fedfrac", "--set=gama=1.0"], "--set: gama: unknown option for algorithm 'fibfl'"),
    (["fedfrac", "--method=fibfl_plus", "--set=tau=1.5"], "--set: tau=1.5"),
    (["fedfrac", "--set=mode=papers"], "--set: mode='papers'; allowed values are"),
])
def test_bad_input_is_one_error_line_before_any_work(argv, message, capsys):
  with pytest.raises(SystemExit) as e:
    firma_authors.main(argv)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert err.startswith("fedfrac-reproduce firma_authors: error: ") and message in err


def test_set_options_reads_literals_and_keeps_words():
  assert firma_authors.set_options(["gamma=1.0", "init=shared", "extractor_epochs=2"]) == {
      "gamma": 1.0, "init": "shared", "extractor_epochs": 2}
  assert PAPERS["firma_authors"] is firma_authors
