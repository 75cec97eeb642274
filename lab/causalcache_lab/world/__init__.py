"""A synthetic cross-app GUI world, its expert and a simulated policy: CPU stand-ins for a benchmark and a VLM.

Pieces (one module each):

* :mod:`.font` / :mod:`.ocr` -- our 5x7 bitmap font drawn on a 12x16 px cell grid, and exact OCR of any
  world screenshot (a few ms, cached per screenshot hash);
* :mod:`.render` / :mod:`.apps` / :mod:`.content` -- Shop, Messages, Notes, Calendar, Settings, Browser, Files and a
  launcher, phone (540x1170) and desktop (1280x800, with an app dock), content drawn from a seed;
* :mod:`.env` -- :class:`GuiWorld`: ``reset() -> png``, ``step(action) -> (png, StepInfo)``;
* :mod:`.language` -- the goal language (intent sentences) and :func:`plan_goal`, the world knowledge
  the expert and the simulated policy share;
* :mod:`.tasks` / :mod:`.templates` -- :func:`generate_tasks`: goals in two construction-defined splits
  (``memory_critical`` cross-app, ``control`` single-app; :func:`split_of` reads only ``task.apps``) with
  success checkers; templates (grammar x app pair) split once into train / dev / eval;
* :mod:`.expert` -- successful demonstrations as :class:`~causalcache_lab.data.Trajectory`;
* :mod:`.sim_policy` (+ :mod:`.sim_reading`, :mod:`.sim_scoring`) -- :class:`SimulatedPolicy`, a
  deterministic simulator implementing the policy protocol from what its prompt contains (goal,
  summaries, pixels), with a VLM's reading mistakes and slips; it is not a model;
* :mod:`.family` / :mod:`.family_tasks` / :mod:`.splits` / :mod:`.positions` -- the world family (a world
  is a seed for named knobs), splits of worlds and their rule, and where the evidence sits (the rule
  that chose the ``before_read`` draw);
* :mod:`.calibration` -- :func:`run_episode` (a minimal closed loop), :class:`EvidenceOracleAllocator`,
  :func:`calibrate`; ``python -m causalcache_lab.world --tasks 300`` prints the calibration.

Example::

    task = generate_tasks(1, seed=0)[0]
    result = run_episode(task, RecentAllocator(), SimulatedPolicy(), LocalArchive("shots"), budget=4)
    print(task.split, task.evidence_age, result.success)

The world is version 2 (``docs/WORLD.md``): intent goals without plans, same-pattern distractors, several
grammars, noisy reading, shared app themes, and a fixed train/dev/eval split of templates
(:mod:`.templates`). Measured calibration: RESULTS.md.
"""

from causalcache_lab.world.calibration import (
    EVIDENCE_KEY,
    EpisodeResult,
    EvidenceOracleAllocator,
    calibrate,
    run_episode,
)
from causalcache_lab.world.env import GuiWorld, StepInfo, WorldState
from causalcache_lab.world.expert import generate_demonstrations, run_expert
from causalcache_lab.world.language import VALUE_KINDS, Need, PlanStep, plan_goal
from causalcache_lab.world.ocr import OcrCache, OcrLine, OcrResult, ocr_array, ocr_image, ocr_png
from causalcache_lab.world.render import SCREEN_SIZES
from causalcache_lab.world.sim_policy import PromptView, SimulatedPolicy
from causalcache_lab.world.tasks import Task, age_histogram, generate_tasks, split_of
from causalcache_lab.world.templates import all_templates, template_split, templates_in

__all__ = [
    "EVIDENCE_KEY",
    "SCREEN_SIZES",
    "VALUE_KINDS",
    "EpisodeResult",
    "EvidenceOracleAllocator",
    "GuiWorld",
    "Need",
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
    "all_templates",
    "calibrate",
    "generate_demonstrations",
    "generate_tasks",
    "ocr_array",
    "ocr_image",
    "ocr_png",
    "plan_goal",
    "run_episode",
    "run_expert",
    "split_of",
    "template_split",
    "templates_in",
]
