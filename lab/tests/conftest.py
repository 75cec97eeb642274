"""The lab's test suite (``lab/tests``). It reuses the library's test helpers (``tests/`` and its
subfolders: fake archives, LangGraph graphs, loopback servers) and the shared fixtures, so those folders
are put on ``sys.path`` here, before any lab test module is imported. A lab test folder that needs a
library folder's fixtures re-exports them with ``lab_fixtures.library_fixtures``."""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

LIBRARY_TESTS = Path(__file__).resolve().parents[2] / "tests"
for folder in [LIBRARY_TESTS, *sorted(p for p in LIBRARY_TESTS.iterdir() if p.is_dir())]:
    if str(folder) not in sys.path:
        sys.path.append(str(folder))

if "TRITON_INTERPRET" not in os.environ and not glob.glob("/dev/nvidia[0-9]*"):
    os.environ["TRITON_INTERPRET"] = "1"  # as tests/conftest.py: Triton's interpreter on CPU machines
pytest_plugins = ["ci_services", "process_sweep", "pytester", "common_fixtures"]
