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

# Benchmarks -> benchmarks/results.md (+ .json); the PyTorch reference needs CPU
# torch (the CPU wheel index keeps pip from pulling CUDA packages). By default the
# CPU is split into one XLA device per core, so the cohort is sharded over the
# cores (benchmarks/results.md was made this way); override with XLA_FLAGS=.
BENCH_XLA_FLAGS ?= --xla_force_host_platform_device_count=$(shell nproc)
bench: $(STAMP)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch \
	    --index-url https://download.pytorch.org/whl/cpu
	XLA_FLAGS="$(or $(XLA_FLAGS),$(BENCH_XLA_FLAGS))" $(PY) scripts/bench.py --vs-torch \
	    --json benchmarks/results.json

clean:
	rm -rf $(VENV) runs
