# Two commands on a fresh machine with Python 3.11:
#   make run   -> creates .venv, installs fedfrac, runs the offline quickstart comparison
#   make test  -> creates .venv, installs fedfrac with test extras, runs the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench reproduce clean

$(STAMP): setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m fedfrac.main --config=configs/quickstart.py --workdir=runs/quickstart

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile tests

bench: $(STAMP)
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) runs
