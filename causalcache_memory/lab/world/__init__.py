"""A synthetic cross-app GUI world, its expert and a simulated policy: CPU stand-ins for a benchmark and a VLM.

Pieces (one module each):

* :mod:`.font` / :mod:`.ocr` -- our 5x7 bitmap font drawn on a 12x16 px cell grid, and exact OCR of any
  world screenshot (a few ms, cached per screenshot hash);
* :mod:`.render` / :mod:`.apps` -- Shop, Messages, Notes, Calendar, Settings, Browser, Files and a
  launcher, phone (540x1170) and desktop (1280x800, with an app dock), content drawn from a seed;
* :mod:`.env` -- :class:`GuiWorld`: ``reset() -> png``, ``step(action) -> (png, StepInfo)``;
* :mod:`.tasks` -- :func:`generate_tasks`: templated goals in two construction-defined splits
  (``memory_critical`` cross-app, ``control`` single-app; :func:`split_of` reads only ``task.apps``) with
  success checkers;
* :mod:`.expert` -- successful demonstrations as :class:`~causalcache_memory.lab.data.Trajectory`;
* :mod:`.sim_policy` -- :class:`SimulatedPolicy`, a deterministic simulator implementing the policy
  protocol from what its prompt contains (goal, summaries, pixels); it is not a model;
* :mod:`.calibration` -- :func:`run_episode` (a minimal closed loop), :class:`EvidenceOraclePolicy`,
  :func:`calibrate`; ``python -m causalcache_memory.lab.world --tasks 300`` prints the calibration.

Example::

    task = generate_tasks(1, seed=0)[0]
    result = run_episode(task, RecentAllocator(), SimulatedPolicy(), LocalArchive("shots"), budget=4)
    print(task.split, task.evidence_age, result.success)

Measured calibration (``python -m causalcache_memory.lab.world --tasks 300 --seed 0 --platform mixed``,
B = 4; 150 memory-critical tasks, 52 with the evidence inside the Recent-4 window; 150 controls; see
RESULTS.md section 2):

==============  ===============  ========  ==================  ======================
arm             memory-critical  controls  memory, age <= 4    memory, age > 4
==============  ===============  ========  ==================  ======================
summary-only    0.00             0.87      0.00                0.00
Recent-4        0.27             0.87      0.79                0.00
oracle          0.88             0.87      0.87                0.89
==============  ===============  ========  ==================  ======================

Evidence ages of the memory-critical tasks: 2: 6, 3: 22, 4: 24, 5: 10, 6: 12, 7: 19, 8: 12, 9: 12,
10: 14, 11: 13, 12: 6.
"""

from causalcache_memory.lab.world.calibration import (
    EVIDENCE_KEY,
    EpisodeResult,
    EvidenceOraclePolicy,
    calibrate,
    run_episode,
)
from causalcache_memory.lab.world.env import GuiWorld, StepInfo, WorldState
from causalcache_memory.lab.world.expert import generate_demonstrations, run_expert
from causalcache_memory.lab.world.ocr import OcrCache, OcrLine, OcrResult, ocr_array, ocr_image, ocr_png
from causalcache_memory.lab.world.render import SCREEN_SIZES
from causalcache_memory.lab.world.sim_policy import PromptView, SimulatedPolicy
from causalcache_memory.lab.world.tasks import (
    VALUE_KINDS,
    PlanStep,
    Task,
    age_histogram,
    generate_tasks,
    parse_goal,
    split_of,
)

__all__ = [
    "EVIDENCE_KEY",
    "SCREEN_SIZES",
    "VALUE_KINDS",
    "EpisodeResult",
    "EvidenceOraclePolicy",
    "GuiWorld",
    "OcrCache",
    "OcrLine",
    "OcrResult",
    "PlanStep",
    "PromptView",
    "SimulatedPolicy",
    "StepInfo",
    "Task",
    "WorldState",
    "age_histogram",
    "calibrate",
    "generate_demonstrations",
    "generate_tasks",
    "ocr_array",
    "ocr_image",
    "ocr_png",
    "parse_goal",
    "run_episode",
    "run_expert",
    "split_of",
]
