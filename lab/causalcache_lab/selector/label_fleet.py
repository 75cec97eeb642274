"""Selector labelling against a model fleet: many decision states in flight at once.

:func:`~causalcache_lab.selector.labels.run_labelling` labels one ``(state, B)`` after another, and
each state is a chain of dependent ``policy.score`` calls (anchor, singletons, then the teacher path).
Against a fleet (SGLang workers behind the SGLang Model Gateway, ``docs/DEPLOY.md``) the states are
independent, so :func:`run_labelling_fleet` keeps ``concurrency`` of them in flight on a thread pool:

* **bounded in-flight requests**: each state has at most one scoring request in flight, so at most
  ``concurrency`` requests are outstanding (size it to the fleet: a few per worker);
* **retries**: a state whose scoring failed with a transient error (policy unavailable, a bad response)
  is retried from its start up to ``retries`` times; the HTTP client retries single requests first;
* **resumable output**: the same JSON Lines file and header as ``run_labelling`` (records in completion
  order, keyed by ``state_key``); only the main thread writes, one flushed line per finished state, so an
  interrupted run resumes where it stopped and a failed state is simply labelled by the next run;
* **reporting**: a progress bar with error and retry counts, and returned counts with the throughput.

Labels are identical to the sequential ones: every state is labelled by the same
:func:`~causalcache_lab.selector.labels.label_state` (or, with ``labels.prompt_cap``, the same
capped labeller). Each state's prompts carry the trajectory's
episode id, so through the gateway one state's calls stay on one worker (its prefix cache) while states
spread over the fleet.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_lab.selector.label_reference import check_reference_labeller
from causalcache_lab.selector.labels import (
    LabelConfig,
    _open_for_append,
    _planned,
    check_labeller,
    label_state,
    labels_header,
    state_key,
)
from causalcache_lab.selector.prompt_cap import CandidatePrior, make_prior
from causalcache_memory.errors import PolicyResponseError, PolicyUnavailableError

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["TRANSIENT_ERRORS", "run_labelling_fleet"]

#: errors after which a state is retried (anything else is a bug and stops the run)
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (PolicyUnavailableError, PolicyResponseError, OSError)


def _label_with_retries(
    policy: Policy,
    archive: ScreenshotArchive,
    item: tuple[Trajectory, int, int],
    config: LabelConfig,
    prior: CandidatePrior | None,
    retries: int,
    backoff_s: float,
    references: dict | None = None,
) -> tuple[dict[str, Any] | None, int, str | None]:
    """``(record or None, retries used, last error)`` of one state."""
    traj, t, budget = item
    last = None
    for attempt in range(retries + 1):
        try:
            record = label_state(policy, archive, traj, t, budget, config, prior=prior, references=references)
            return record, attempt, None
        except TRANSIENT_ERRORS as exc:
            last = f"{type(exc).__name__}: {exc}"
            if attempt < retries:
                time.sleep(backoff_s * (2**attempt))
    return None, retries, last


def run_labelling_fleet(
    policy: Policy,
    archive: ScreenshotArchive,
    trajectories: Sequence[Trajectory],
    output: str | Path,
    config: LabelConfig | None = None,
    *,
    concurrency: int = 16,
    retries: int = 2,
    backoff_s: float = 0.5,
    progress: bool = True,
    max_states: int | None = None,
    force_labeller: bool = False,
) -> dict[str, Any]:
    """Label every planned ``(state, B)`` into ``output`` with ``concurrency`` states in flight.

    ``policy`` must be safe to call from several threads (the HTTP runtimes are). Returns counts
    ``{"planned", "skipped", "written", "failed", "retries", "prompts", "seconds", "states_per_s",
    "prompts_per_s", "errors"}`` (``errors``: up to 10 messages of failed states).
    """
    if concurrency < 1 or retries < 0:
        raise ValueError(f"concurrency={concurrency} must be >= 1 and retries={retries} >= 0")
    check_labeller(policy, trajectories, force=force_labeller)
    config = config or LabelConfig()
    check_reference_labeller(policy, config.reference)
    done, fh = _open_for_append(Path(output), labels_header(policy, config))
    plan = list(_planned(trajectories, config))
    todo = [p for p in plan if state_key(p[0].trajectory_id, p[1], p[2]) not in done]
    if max_states is not None:
        todo = todo[:max_states]
    counts: dict[str, Any] = {
        "planned": len(plan),
        "skipped": len(plan) - len(todo),
        "written": 0,
        "failed": 0,
        "retries": 0,
        "prompts": 0,
        "errors": [],
    }
    prior = make_prior(config.prompt_cap, archive) if config.prompt_cap is not None else None
    bar = _progress(len(todo), progress)
    refs: dict = {}  # one full-history reference per state, whatever its budgets (label_reference.py)
    start = time.perf_counter()
    try:
        with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="label") as pool:
            futures = [
                pool.submit(
                    _label_with_retries, policy, archive, item, config, prior, retries, backoff_s, refs
                )
                for item in todo
            ]
            for future in concurrent.futures.as_completed(futures):
                try:
                    record, used, error = future.result()
                except BaseException:  # a bug, not a transient error: stop, keep what was written
                    for pending in futures:
                        pending.cancel()
                    raise
                counts["retries"] += used
                if record is None:
                    counts["failed"] += 1
                    if len(counts["errors"]) < 10:
                        counts["errors"].append(error)
                else:
                    fh.write(json.dumps(record, separators=(",", ":")) + "\n")
                    fh.flush()
                    counts["written"] += 1
                    counts["prompts"] += record["prompts_scored"]
                bar.update(1)
                bar.set_postfix(failed=counts["failed"], retries=counts["retries"], refresh=False)
        os.fsync(fh.fileno())
    finally:
        fh.close()
        bar.close()
    seconds = time.perf_counter() - start
    counts["seconds"] = round(seconds, 3)
    counts["states_per_s"] = round(counts["written"] / seconds, 3) if seconds > 0 else 0.0
    counts["prompts_per_s"] = round(counts["prompts"] / seconds, 3) if seconds > 0 else 0.0
    return counts


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc="selector labels (fleet)", unit="state", disable=not enabled)
