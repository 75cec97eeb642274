"""What you run to train and evaluate: never imported by the run-time core.

* :mod:`.world` -- the synthetic cross-app GUI world and its simulated policy (the demo's closed loop);
* :mod:`.data` -- trajectory records and dataset loaders;
* :mod:`.selector` -- selector labels, training, ONNX export, the chooser ladder;
* :mod:`.hgkv` -- replacement groups, DiD statistics and HGKV adapter training;
* :mod:`.eval` -- the closed-loop harness, bootstrap statistics and reports;
* :mod:`.bench` -- per-step overhead benchmarks (``causalcache bench``).

The run-time core (trace, archive, allocation, render, controller, selector inference, config) imports
none of these; ``tests/test_layers.py`` enforces it.
"""
