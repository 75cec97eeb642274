"""The graph-state keys CausalCacheMemory brings into a LangGraph schema (JSON text and hashes only).

Every key is prefixed ``cc_`` so it merges into a user's schema without clashing:

* ``cc_trace``: :meth:`Trace.to_dict` of the episode (summaries, verbatim responses, screenshot hashes);
* ``cc_screenshot``: sha256 of the current screen ``x_t``;
* ``cc_pending``: the decided, not yet recorded step ``{"t", "response", "action"}`` (None after recording);
* ``cc_log``: the per-episode log, one :meth:`StepDecision.to_record` per decision (append reducer).

Pixels never enter state: screenshots live in the archive and state holds their content hashes, so a
checkpointer (SQLite, PostgreSQL) stores a few hundred bytes per step instead of the images.
"""

from __future__ import annotations

import operator
import sys
from typing import Annotated, Any, get_type_hints

from typing_extensions import TypedDict

from ...errors import TraceError
from ...trace import Trace

__all__ = [
    "STATE_KEYS",
    "CausalCacheState",
    "dump_trace",
    "load_trace",
    "merge_schema",
]


class CausalCacheState(TypedDict, total=False):
    """State keys of the memory (merge into any ``StateGraph`` schema or ``create_agent`` state)."""

    cc_trace: dict[str, Any] | None
    """The serialized trace (:meth:`Trace.to_dict`): text and sha256 hashes."""
    cc_screenshot: str | None
    """sha256 of the current screen ``x_t``."""
    cc_pending: dict[str, Any] | None
    """The decided step awaiting its post-action screenshot: ``{"t", "response", "action"}``."""
    cc_log: Annotated[list[dict[str, Any]], operator.add]
    """One small record per decision: S*, k, whether pass 2 fired, each pass's latency."""


STATE_KEYS: tuple[str, ...] = tuple(CausalCacheState.__annotations__)


def load_trace(state: dict[str, Any]) -> Trace | None:
    """The trace stored in ``state`` (None before the first observation)."""
    data = state.get("cc_trace")
    if not data:
        return None
    if not isinstance(data, dict):
        raise TraceError(
            f"state['cc_trace'] must be the dict written by CausalCacheMemory, got {type(data).__name__}; "
            "do not overwrite the memory's cc_* keys"
        )
    return Trace.from_dict(data)


def dump_trace(trace: Trace) -> dict[str, Any]:
    return trace.to_dict()


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
    merged = TypedDict(name, fields, total=False)  # type: ignore[operator]
    merged.__module__ = __name__
    return merged
