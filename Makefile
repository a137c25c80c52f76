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
	cd benchmarks && ../$(PY) overhead.py && ../$(PY) gemm.py && ../$(PY) seed_bmm.py

clean:
	rm -rf $(VENV) examples/build .pytest_cache

# make fuzz      - the long fuzzing campaign (>= 10,000 programs up to LLVM, >= 1,000
#                  differential cases), then RELIABILITY.md from its report
FUZZ_PROGRAMS ?= 10000
FUZZ_DIFF     ?= 1000
FUZZ_SEED     ?= 1
FUZZ_JOBS     ?= 2

.PHONY: fuzz
fuzz: venv
	nice -n 10 $(PY) tests/fuzz/run_fuzz.py --programs $(FUZZ_PROGRAMS) --differential $(FUZZ_DIFF) \
		--seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS) --report tests/fuzz/fuzz-report.json --keep-dir fuzz-bugs; \
	status=$$?; $(PY) tests/fuzz/reliability_report.py --fuzz tests/fuzz/fuzz-report.json -o RELIABILITY.md; exit $$status
