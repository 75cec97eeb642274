"""The trace chain's node format: one archive record per appended step (see :mod:`.store`).

Reading a node checks its format version and hashes; decoding checks that it continues its parent (the
episode matches and the event index is the parent's count + 1), so a chain with a skipped or repeated
index never loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ArchiveError, TraceError
from causalcache_memory.trace import Event, check_sha256

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["CHAIN_FORMAT_VERSION", "Node", "decode_node", "encode_node", "read_node", "size_of"]

CHAIN_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Node:
    """A decoded chain node linked to its decoded parent (``None`` for the root)."""

    head: str
    parent: Node | None
    episode: Mapping[str, str]
    event: Event | None
    current: str | None
    log: tuple[Mapping[str, Any], ...]
    n_events: int  # events in the chain up to and including this node
    current_size: tuple[int, int] | None = None


def size_of(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        width, height = (int(v) for v in value)
    except (TypeError, ValueError):
        raise TraceError(f"current_size={value!r} must be [width, height]") from None
    if width < 1 or height < 1:
        raise TraceError(f"current_size={value!r} must be [width, height] with both >= 1")
    return width, height


def encode_node(node: Mapping[str, Any]) -> bytes:
    return json.dumps(node, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def read_node(archive: ScreenshotArchive, sha: str, episode_id: str | None) -> dict[str, Any]:
    """The JSON object of chain node ``sha`` (format checked); :class:`TraceError` naming it otherwise."""
    where = f"episode {episode_id!r}" if episode_id else "this episode"
    try:
        raw = archive.get_record(sha)
    except ArchiveError as exc:
        raise TraceError(
            f"trace record {sha} of {where} cannot be read from archive "
            f"{getattr(archive, 'url', archive)!r} ({exc}); the episode's trace chain is "
            "broken: restore the archive or start a new episode"
        ) from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise TraceError(f"trace record {sha} of {where} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("v") != CHAIN_FORMAT_VERSION:
        raise TraceError(
            f"trace record {sha} of {where} is not a version-{CHAIN_FORMAT_VERSION} chain node "
            f"(v={data.get('v') if isinstance(data, dict) else type(data).__name__!r})"
        )
    parent = data.get("parent")
    if parent is not None:
        check_sha256(parent, what=f"parent of trace record {sha}")
    return data


def _corrupt(sha: str, episode_id: str | None, exc: TraceError) -> TraceError:
    where = f"episode {episode_id!r}" if episode_id else "this episode"
    return TraceError(f"trace record {sha} of {where} is corrupt: {exc}")


def decode_node(sha: str, data: dict[str, Any], parent: Node | None, episode_id: str | None) -> Node:
    """Decode node ``sha`` onto its decoded ``parent``; event indices must continue the parent's.

    Every refusal is a :class:`TraceError` naming the record ``sha`` (a corrupt field too)."""
    if parent is None:
        meta = data.get("episode")
        if not isinstance(meta, dict) or not all(k in meta for k in ("goal", "episode_id", "platform")):
            raise TraceError(f"trace record {sha} is a chain root without episode metadata")
        meta = {k: str(meta[k]) for k in ("goal", "episode_id", "platform")}
    else:
        meta = dict(parent.episode)
    if episode_id is not None and meta["episode_id"] != episode_id:
        raise TraceError(f"trace record {sha} belongs to episode {meta['episode_id']!r}, not {episode_id!r}")
    n_events = parent.n_events if parent is not None else 0
    event = None
    if data.get("event") is not None:
        try:
            event = Event.from_dict(data["event"])
        except TraceError as exc:
            raise _corrupt(sha, episode_id, exc) from exc
        if event.index != n_events + 1:
            raise TraceError(
                f"trace record {sha} of episode {meta['episode_id']!r} holds event {event.index}, "
                f"expected {n_events + 1}"
            )
        n_events += 1
    current = data.get("current")
    if current is not None:
        check_sha256(current, what=f"current screenshot in trace record {sha}")
    log = data.get("log") or []
    if not isinstance(log, list) or not all(isinstance(r, dict) for r in log):
        raise TraceError(f"trace record {sha}: 'log' must be a list of objects")
    try:
        size = size_of(data.get("current_size"))
    except TraceError as exc:
        raise _corrupt(sha, episode_id, exc) from exc
    return Node(sha, parent, meta, event, current, tuple(log), n_events, size)
