"""``fedfrac-campaign run --out DIR [...]`` (one budgeted window:
:mod:`fedfrac_lab.campaign.supervisor`) or ``fedfrac-campaign collect ARCHIVE [...]``
(verify an archive and unpack it into results/: :mod:`fedfrac_lab.campaign.collect`);
``--help`` after either lists its flags."""
from __future__ import annotations

import sys

USAGE = ("usage: fedfrac-campaign run --out DIR [--budget S] [--plan P] ... | "
         "fedfrac-campaign collect ARCHIVE [--plan P] [--root R]")


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv and argv[0] == "run":
    from fedfrac_lab.campaign import supervisor
    return supervisor.main(argv[1:])
  if argv and argv[0] == "collect":
    from fedfrac_lab.campaign import collect
    return collect.main(argv[1:])
  if argv and argv[0] in ("-h", "--help"):
    print(f"{USAGE}\n{__doc__}")
    return 0
  print(USAGE, file=sys.stderr)
  print(f"error: the first argument must be run or collect, got "
        f"{argv[0] if argv else 'nothing'!r}", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main())
