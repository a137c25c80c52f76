# make demo   - build every example with dslc and check it against numpy
# make test   - run the whole test suite
# make bench  - benchmark scripts (tables against numpy); not part of the tests
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

demo: venv
	$(PY) examples/run_examples.py

test: venv
	$(PY) -m pytest

bench: venv
	$(PY) -m pip install --quiet -e ".[test,bench]"
	cd benchmarks && ../$(PY) overhead.py && ../$(PY) gemm.py && ../$(PY) seed_bmm.py && ../$(PY) dense.py --markdown dense_results.md

clean:
	rm -rf $(VENV) examples/build .pytest_cache
