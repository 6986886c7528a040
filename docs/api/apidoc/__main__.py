"""``python -m apidoc write DIR | check OBJECTS_INV`` (with ``docs/api`` on the
path, as ``make docs`` runs it)."""
from __future__ import annotations

import sys

from apidoc import main

if __name__ == "__main__":
  sys.exit(main())
