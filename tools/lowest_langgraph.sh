#!/usr/bin/env bash
# The claimed lower bounds of the [langgraph] extra (pyproject.toml): a fresh venv with langchain 1.3.0,
# langgraph 1.2.0 and langgraph-checkpoint-sqlite 3.1 (pip picks the rest), the library from this checkout,
# and the LangGraph tests that cover the node API, the middleware, traces, composition, tenants, retention.
# Not in .ci/run (about 150 MB of downloads); run it before changing those bounds.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.lowest-venv}"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "langchain==1.3.0" "langgraph==1.2.0" "langgraph-checkpoint-sqlite==3.1.*" \
  pytest pytest-benchmark wheel
"$VENV/bin/python" -m pip install -q -e .
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -o addopts="" \
  -W "ignore::DeprecationWarning" -W "ignore::PendingDeprecationWarning" \
  tests/integrations/test_trace_policy.py tests/integrations/test_create_agent_pixels.py \
  tests/integrations/test_langgraph_nodes.py tests/integrations/test_middleware_composition.py \
  tests/integrations/test_archive_namespaces.py tests/reliability/test_retention_pruned.py
