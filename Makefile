# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv with the
# system python3 and install the project into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast tour bench clean docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,examples,docs]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m examples.rigid_body.demo

tour: $(STAMP)
	$(PY) examples/tour.py

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) -m benchmarks

# The documentation site, into site/ (strict: a warning, e.g. a broken cross-reference, fails;
# `make test` builds it too).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache site
