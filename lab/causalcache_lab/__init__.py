"""The lab: what you run to train and evaluate the memory, beside the library and never imported by it.

* :mod:`.world` -- the synthetic cross-app GUI world and its simulated policy (the demo's closed loop);
* :mod:`.data` -- trajectory records and dataset loaders;
* :mod:`.selector` -- selector labels, training, ONNX export, the allocation ladder;
* :mod:`.learn` -- ``causalcache learn``: a team's recordings to a deployable selector;
* :mod:`.hgkv` -- replacement groups, DiD statistics and HGKV adapter training;
* :mod:`.eval` -- the closed-loop harness, bootstrap statistics and reports;
* :mod:`.bench` -- per-step overhead benchmarks (``causalcache bench``);
* :mod:`.cli` -- the lab's ``causalcache`` subcommands (``demo``, ``learn``, ``train``, ...).

The lab imports the library (:mod:`causalcache_memory`); the library imports nothing from here
(``tests/architecture/test_lab_boundary.py``). The lab reaches the library's registries through entry
points declared in ``lab/pyproject.toml``, not through import side effects: its CLI commands (group
``causalcache.commands``) and the ``simulated`` runtime (group ``causalcache.runtimes``,
:func:`causalcache_lab.runtimes.simulated`). Importing this package registers nothing.
"""
