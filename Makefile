# make demo   - build every example with dslc, check it against numpy, build and run examples/c
# make test   - run the whole test suite (installs qemu-user and the aarch64 cross
#               gcc for tests/cross first when missing and when apt-get and root allow)
# make bench  - benchmark scripts (tables against numpy); not part of the tests
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench venv clean cross-tools

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

demo: venv
	$(PY) examples/run_examples.py

test: venv cross-tools
	$(PY) -m pytest

# Idempotent and quiet when installed; without apt or root tests/cross skips and says why.
cross-tools:
	@sh tests/cross/install_tools.sh

bench: venv
	$(PY) -m pip install --quiet -e ".[test,bench]"
	cd benchmarks && ../$(PY) overhead.py && ../$(PY) gemm.py && ../$(PY) seed_bmm.py && ../$(PY) dense.py --markdown dense_results.md && ../$(PY) pointwise.py && ../$(PY) quant.py && ../$(PY) tutorial.py

clean:
	rm -rf $(VENV) examples/build .pytest_cache
