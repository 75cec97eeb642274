# Developer shortcuts. `make bench` measures; normal test runs execute each benchmark once (pyproject
# sets --benchmark-disable in addopts).
PYTHON ?= python
# one BLAS/OpenMP thread, as the benchmark targets are stated for one core
ONE_THREAD = OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: test bench bench-quick lint

test:
	$(PYTHON) -m pytest -q

bench:
	$(ONE_THREAD) $(PYTHON) -m pytest tests/benchmarks --benchmark-enable --benchmark-only --benchmark-sort=name \
		--benchmark-columns=min,median,max,rounds -q
	$(ONE_THREAD) causalcache bench --json BENCHMARKS.json

bench-quick:
	$(ONE_THREAD) causalcache bench --quick --json BENCHMARKS-quick.json

lint:
	ruff check . && ruff format --check .
