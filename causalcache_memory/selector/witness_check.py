"""The witness-source check: a check on the decision, not on the screen statistics (``witness_check``).

At a two-pass decision the pass-1 proposal ``a_1`` (the witness) was generated on Recent-B. When it types
a value (a value-shaped token of its text: :func:`~causalcache_memory.selector.screen_text.value_tokens`,
compared lower-cased as exact strings) that the current screen ``x_t`` does not show, the **witness
sources** are the events of Recent-B whose screen ``v_j`` shows it: the screens pass 1 could have read
it from. A set ``S*`` that displaces a witness source takes that evidence away from pass 2, which sees
the same current screen; the allocator then refuses ``S*`` and searches again with the sources held
(:func:`~causalcache_memory.selector.beam.beam_search`'s ``hold``). Where a screen's text is unknown
the check finds no source there (it never invents one); without a witness, without a value in it, or
when ``x_t`` shows the value, it does nothing.

Rule, criterion and measurements: docs/notebook/results/guard_rule_try2.md; docs/SELECTOR.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causalcache_memory.allocation.base import recent_b
from causalcache_memory.selector.screen_text import value_tokens

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.selector.screen_text import ScreenTextCache
    from causalcache_memory.trace import Trace

__all__ = ["DEFAULT_WITNESS_CHECK", "displaced_sources", "witness_sources", "witness_values"]

#: on by default (guard try 2, docs/notebook/results/guard_rule_try2.md)
DEFAULT_WITNESS_CHECK = True


def witness_values(witness: Action | None) -> frozenset[str]:
    """The lower-cased value-shaped tokens of the witness's text (empty without a witness or text)."""
    if witness is None or not witness.text:
        return frozenset()
    return frozenset(v.lower() for v in value_tokens(witness.text))


def witness_sources(
    cache: ScreenTextCache | None, trace: Trace, budget: int, witness: Action | None
) -> tuple[int, ...]:
    """Events of Recent-B (1-based, ascending) whose screen shows a value the witness types, when the
    current screen does not show it; ``()`` when the check does not apply (module docstring)."""
    values = witness_values(witness)
    if cache is None or not values:
        return ()
    current = cache.get(trace.current_screenshot)
    if current is not None and current.value_set & values:
        return ()  # pass 1 could read it on the current screen, which every set shows
    events = trace.events
    t = len(events) + 1
    out = []
    for j in recent_b(t, budget):
        blob = cache.get(events[j - 1].screenshot)
        if blob is not None and blob.value_set & values:
            out.append(j)
    return tuple(out)


def displaced_sources(sources: tuple[int, ...], selected: tuple[int, ...]) -> tuple[int, ...]:
    """The witness sources a set ``selected`` leaves out (the swap the check refuses when not empty)."""
    chosen = set(selected)
    return tuple(j for j in sources if j not in chosen)
