"""Guard try 2's witness-source check on an external-style generator (docs/notebook/results/guard_rule_try2.md):
a control that reads its value a few steps before typing it keeps that screen in the memory."""

from __future__ import annotations

from causalcache_lab.worlds_ext import generate_ext_tasks
from causalcache_lab.worlds_ext.harness import ExtEvalSettings, run_ext_eval


def test_the_checked_selector_never_drops_the_screen_a_control_typed_its_value_from(tmp_path):
    settings = ExtEvalSettings(
        "mobile",
        "noisy",
        tasks_per_split=4,
        policy_seeds=(0,),
        arms=("causalcache_noguard", "causalcache_try2"),
    )
    outcomes = []
    run_ext_eval(settings, tmp_path, progress=outcomes.append)
    tasks = {t.task_id: t for t in generate_ext_tasks("mobile", 8, settings.task_seed)}
    grounded = {"causalcache_noguard": [], "causalcache_try2": []}
    for o in outcomes:
        task = tasks[o.task_id]
        if o.split != "control" or not task.evidence_event:
            continue
        use = next(r for r in o.log if r["t"] == task.use_event)
        if (use.get("proposal") or {}).get("text") != task.needed_value:
            continue  # pass 1 misread it (the noisy policy): no screen shows what it typed
        assert task.evidence_event in use["recent"]  # the value was read inside Recent-B
        grounded[o.arm].append(task.evidence_event in use["selected"])
        if o.arm == "causalcache_try2" and not all(
            j in use["recent"] for j in use["selected"]
        ):  # it swapped: the source was held
            assert task.evidence_event in use["selected"]
    assert grounded["causalcache_try2"] and all(grounded["causalcache_try2"])
    # the unchecked selector drops that screen on some of the same decisions (what the check is for)
    assert not all(grounded["causalcache_noguard"])
