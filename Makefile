# make demo   - build every example with dslc, check it against numpy, build and run examples/c
# make test   - run the whole test suite (installs qemu-user and the aarch64 cross
#               gcc for tests/cross first when missing and when apt-get and root allow)
# make bench  - benchmark scripts, then BENCHMARKS.md and plots (see below); not part of the tests
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench bench-quick bench-report bench-deps venv clean cross-tools

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

demo: venv
	$(PY) examples/run_examples.py

test: venv cross-tools
	$(PY) -m pytest -n auto

# Idempotent and quiet when installed; without apt or root tests/cross skips and says why.
cross-tools:
	@sh tests/cross/install_tools.sh

# make bench        - every benchmark script (about 14 minutes on the 2-core Zen 4; gemm.py, with its Zen 3 table, 3 of them), then
#                     BENCHMARKS.md, its plots (docs/bench/*.png) and README's summary, from the
#                     results they recorded (benchmarks/results/*.json); run it on a quiet machine
# make bench-quick  - the same, small and fast, into build/bench-quick/ (the committed files untouched)
# make bench-report - only rewrite the report from the recorded results
bench-deps: venv
	$(PY) -m pip install --quiet -e ".[test,bench]"

bench: bench-deps
	$(PY) benchmarks/report.py

bench-quick: bench-deps
	$(PY) benchmarks/report.py --quick

bench-report: bench-deps
	$(PY) benchmarks/report.py --compose-only

clean:
	rm -rf $(VENV) examples/build .pytest_cache build/bench-quick

# make fuzz      - the long reliability run: >= 10,000 programs fuzzed up to LLVM and
#                  >= 1,000 differential cases (tests/fuzz/run_fuzz.py), valgrind memcheck,
#                  then RELIABILITY.md from their reports (tests/fuzz/reports/)
# make memcheck  - only the valgrind run (installs valgrind with apt-get when it can)
FUZZ_PROGRAMS ?= 10000
FUZZ_DIFF     ?= 1000
FUZZ_SEED     ?= 1
FUZZ_JOBS     ?= 2
REPORTS       := tests/fuzz/reports

.PHONY: fuzz memcheck
fuzz: venv memcheck
	nice -n 10 $(PY) tests/fuzz/run_fuzz.py --programs $(FUZZ_PROGRAMS) --differential $(FUZZ_DIFF) \
		--seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS) --report $(REPORTS)/fuzz.json --keep-dir fuzz-bugs; \
	status=$$?; $(PY) tests/fuzz/reliability_report.py --fuzz $(REPORTS)/fuzz.json \
		--memcheck $(REPORTS)/memcheck.json -o RELIABILITY.md; exit $$status

memcheck: venv
	@command -v valgrind >/dev/null || apt-get install -y valgrind >/dev/null 2>&1 || \
		sudo -n apt-get install -y valgrind >/dev/null 2>&1 || echo "valgrind unavailable: memcheck is skipped"
	mkdir -p $(REPORTS)
	nice -n 10 $(PY) tests/hardening/memcheck.py --report $(REPORTS)/memcheck.json
