"""The library's test suite: shared fixtures (``common_fixtures``), the CI-services plugin."""

from __future__ import annotations

import glob
import os

# The fused HGKV kernel's CPU tests run it under Triton's interpreter, which is most robust when chosen
# before triton is first imported (tests/kernel_modes.py also sets it per test). Machines with a GPU keep
# compiled Triton for the CUDA-marked tests.
if "TRITON_INTERPRET" not in os.environ and not glob.glob("/dev/nvidia[0-9]*"):
    os.environ["TRITON_INTERPRET"] = "1"
# services .ci/run starts must not skip under CI=true (ci_services); no process a test starts outlives the
# session (process_sweep); seeds and tiny screenshots (common_fixtures)
pytest_plugins = ["ci_services", "process_sweep", "pytester", "common_fixtures"]
