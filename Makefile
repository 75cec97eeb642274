# Developer shortcuts. `make bench` measures; normal test runs execute each benchmark once (pyproject
# sets --benchmark-disable in addopts).
PYTHON ?= python
# one BLAS/OpenMP thread, as the benchmark targets are stated for one core
ONE_THREAD = OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: test bench bench-quick lint typecheck mutate plant-bugs

test:
	$(PYTHON) -m pytest -q -n 2 --dist loadfile

bench:
	$(ONE_THREAD) $(PYTHON) -m pytest lab/tests/benchmarks --benchmark-enable --benchmark-only --benchmark-sort=name \
		--benchmark-columns=min,median,max,rounds -q
	$(ONE_THREAD) causalcache bench --json BENCHMARKS.json

bench-quick:
	$(ONE_THREAD) causalcache bench --quick --json BENCHMARKS-quick.json

lint:
	ruff check . && ruff format --check .

typecheck:
	$(PYTHON) tools/typecheck.py

# Mutation testing (opt-in, slow; not part of CI): cosmic-ray over the invariant modules listed in
# pyproject.toml [tool.causalcache.mutate], JOBS parallel workers; summary in mutation-out/summary.md.
# Needs `pip install -e ".[mutation]"` (cosmic-ray 8.7.0). docs/TESTING.md.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MODULES ?=
mutate:
	$(PYTHON) tools/mutate.py --jobs $(JOBS) $(if $(MODULES),--modules $(MODULES),)

# Plant each bug of the issue-19 table in a temporary copy and show the tests catch it.
plant-bugs:
	$(PYTHON) tools/plant_bugs.py
