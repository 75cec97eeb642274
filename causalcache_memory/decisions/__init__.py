"""Decisions: one decision's outcome, how decisions are counted, and the warnings a memory's counts raise.

* :mod:`.step`: :class:`~causalcache_memory.decisions.step.StepDecision`, what
  :meth:`MemoryController.decide <causalcache_memory.controller.MemoryController.decide>` returns, and
  its JSON record;
* :mod:`.counts`: :class:`~causalcache_memory.decisions.counts.DecisionStats` and the rules that classify
  one decision record;
* :mod:`.stats`: :class:`~causalcache_memory.decisions.stats.DecisionMonitor`, a memory's live counts and
  its once-per-memory idle and missing-screen-text warnings.
"""
