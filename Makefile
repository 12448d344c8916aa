# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv with the
# system python3 and install the project into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast tour bench bench-revisions peers clean docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,examples,docs]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m examples.rigid_body.demo

tour: $(STAMP)
	$(PY) examples/tour.py

# Two worker processes (pytest-xdist), one per core of the 2-core CI machine; a file's tests stay
# in one worker so module fixtures run once. `make test JOBS=0` runs in this process.
JOBS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

# The peers of the benchmark (PyTorch, geoopt, Pymanopt) in an environment of their own, never a
# dependency of the library. torch is pinned: this machine's pip has a CPU build of 2.13.0 locally,
# while an unpinned torch downloads several GB of CUDA packages. geoopt without its requirements,
# which would let pip pick another torch (it needs only torch, numpy and scipy). Pymanopt runs on
# its JAX backend, with the JAX our own benchmarks run (benchmarks/bench_solvers.py).
PEERS := .venv-peers
PEERS_STAMP := $(PEERS)/.installed

$(PEERS_STAMP):
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet "torch==2.13.0" numpy scipy
	$(PEERS)/bin/python -m pip install --quiet --no-deps "geoopt==0.5.1"
	$(PEERS)/bin/python -m pip install --quiet "jax==0.10.2" "jaxlib==0.10.2" "pymanopt==2.2.1"
	touch $(PEERS_STAMP)

peers: $(PEERS_STAMP)

bench: $(STAMP) $(PEERS_STAMP)
	$(PY) -m benchmarks

# Gradient and compile times of this checkout against another revision, e.g. the last one with
# custom_vjp rules: make bench-revisions REV=19a1728
REV ?= 19a1728
bench-revisions: $(STAMP)
	rm -rf .bench-rev && mkdir .bench-rev && git archive $(REV) | tar -x -C .bench-rev
	$(PY) -m benchmarks.revisions .bench-rev

# The documentation site, into site/ (strict: a warning, e.g. a broken cross-reference, fails;
# `make test` builds it too).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) $(PEERS) .bench-rev build *.egg-info .pytest_cache .mypy_cache site
