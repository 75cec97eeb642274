"""The graph-state keys CausalCacheMemory brings into a LangGraph schema: O(1) in the episode length.

Every key is prefixed ``cc_`` so it merges into a user's schema without clashing:

* ``cc_head``: sha256 of the head of the episode's trace chain (:mod:`causalcache_memory.trace.store`);
  the trace (summaries, verbatim responses, screenshot hashes) and the per-decision log live in the
  archive as content-addressed JSON records, one small record per append;
* ``cc_episode``: the episode id (the run's ``thread_id``, made archive-safe), named in error messages;
* ``cc_t``: index of the next decision ``t`` (events recorded + 1);
* ``cc_screenshot``: sha256 of the current screen ``x_t``;
* ``cc_pending``: the decided, not yet recorded step (None after recording): a
  :class:`~.session.PendingStep` stored as its dict ``{"t", "response", "action", "parse_error"}``
  (plus ``"tool_call_id"`` under ``create_agent``).

One key has no prefix because the user's screenshot node writes it: ``screen_text``, the screen's text
beside the image. It is input only: the memory stores it in the archive and never leaves it in state.

No key grows with ``t``, so a checkpointer that stores the whole state at every step (``SqliteSaver``)
writes the same few hundred bytes per step at step 5 and at step 500. Pixels never enter state either:
screenshots live in the archive and state holds their content hashes. Read the trace and the log back
with :meth:`CausalCacheMemory.trace` and :meth:`CausalCacheMemory.episode_log`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, get_type_hints

from typing_extensions import TypedDict

from causalcache_memory.errors import TraceError
from causalcache_memory.trace import Trace, check_sha256

if TYPE_CHECKING:
    from causalcache_memory.trace.store import TraceStore

__all__ = [
    "STATE_KEYS",
    "CausalCacheState",
    "head_of",
    "load_trace",
    "merge_schema",
    "state_update",
]


class CausalCacheState(TypedDict, total=False):
    """State keys of the memory (merge into any ``StateGraph`` schema or ``create_agent`` state)."""

    cc_head: str | None
    """sha256 of the trace chain's head record in the archive (None before the first observation)."""
    cc_episode: str | None
    """The episode id the chain is retained under."""
    cc_t: int | None
    """Index of the next decision (number of recorded events + 1)."""
    cc_screenshot: str | None
    """sha256 of the current screen ``x_t``."""
    cc_pending: dict[str, Any] | None
    """The decided step awaiting its post-action screenshot (:meth:`PendingStep.to_state`)."""
    screen_text: str | None
    """Input only: the text of the screen a screenshot node returns beside the image (accessibility
    tree or OCR). The memory takes it out of the update and stores it in the archive beside the
    screenshot (:mod:`.text_intake`); state never holds it and no prompt shows it."""


STATE_KEYS: tuple[str, ...] = tuple(k for k in CausalCacheState.__annotations__ if k.startswith("cc_"))


def head_of(state: Mapping[str, Any]) -> str | None:
    """The trace chain head stored in ``state`` (None before the first observation)."""
    head = state.get("cc_head")
    if not head:
        if state.get("cc_trace"):
            raise TraceError(
                "state holds 'cc_trace' written by an older CausalCacheMemory (trace kept in state); "
                "this version keeps the trace in the archive under 'cc_head': finish that episode with the "
                "old version or start a new thread"
            )
        return None
    try:
        return check_sha256(head, what="state['cc_head']")
    except TraceError as exc:
        raise TraceError(f"{exc}; do not overwrite the memory's cc_* keys") from None


def load_trace(state: Mapping[str, Any], store: TraceStore) -> Trace | None:
    """The trace at ``state['cc_head']`` read through ``store`` (a :class:`TraceStore`), or None."""
    head = head_of(state)
    return None if head is None else store.load_trace(head, episode_id=state.get("cc_episode"))


def state_update(head: str, trace: Trace) -> dict[str, Any]:
    """The ``cc_*`` values after committing ``trace`` at ``head`` (``cc_pending`` is set by the caller)."""
    return {
        "cc_head": head,
        "cc_episode": trace.episode_id,
        "cc_t": trace.t,
        "cc_screenshot": trace.current_screenshot,
    }


def _hints(schema: type) -> dict[str, Any]:
    module = sys.modules.get(getattr(schema, "__module__", ""), None)
    return get_type_hints(schema, globalns=getattr(module, "__dict__", None), include_extras=True)


def merge_schema(schema: type | None) -> type:
    """A TypedDict with the fields of ``schema`` (reducers kept) plus :class:`CausalCacheState`.

    Used as the first-parameter annotation of the memory's nodes, so ``StateGraph.add_node`` registers
    the ``cc_*`` channels in the user's graph without the user editing their schema.
    """
    if schema is None or schema is CausalCacheState:
        return CausalCacheState
    fields = {**_hints(schema), **_hints(CausalCacheState)}
    name = f"{getattr(schema, '__name__', 'State')}WithCausalCache"
    merged = TypedDict(name, fields, total=False)  # type: ignore[misc]  # a TypedDict built at run time
    merged.__module__ = __name__
    return merged
