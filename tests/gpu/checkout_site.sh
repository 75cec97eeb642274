# Sourced by the GPU drivers (run_kernel_checks.sh, run_learn_checks.sh), with OUT_NAME set: sets ROOT (the
# checkout), OUT (default $ROOT/$OUT_NAME, created, absolute) and PY (default python3; a relative path is
# taken from ROOT), and makes causalcache_memory importable from the checkout without installing it. A
# temporary tree maps runtime/ and integrations/ into causalcache_memory, as pyproject's package-dir does;
# Python then runs from the scratch directory $WORK with PYTHONSAFEPATH, so the checkout's own
# causalcache_memory/ (which lacks them) is never first on sys.path.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/$OUT_NAME}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PY="${PYTHON:-python3}"
case "$PY" in /*) ;; */*) PY="$ROOT/$PY" ;; esac

WORK="$(mktemp -d)"
SITE="$WORK/site"
mkdir -p "$SITE/causalcache_memory"
for entry in "$ROOT"/causalcache_memory/*; do ln -s "$entry" "$SITE/causalcache_memory/"; done
ln -s "$ROOT/runtime" "$SITE/causalcache_memory/runtime"
ln -s "$ROOT/integrations" "$SITE/causalcache_memory/integrations"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
cd "$WORK"
