"""Bounded cache of per-image vision-encoder outputs for the transformers runtime.

The prompts of one labelled state share their screenshots (history + current), and a Qwen-VL forward
re-encodes every image it is given. :class:`VisionCache` runs only the images it has not seen through the
vision tower (one call for all of them, duplicates within the call once), splits the result per image and
reassembles the batch's features in the original order; the model then receives them through its
``mm_encoder_outputs={"image": ...}`` argument (transformers >= 5.24) instead of ``pixel_values``.

Key of an image: SHA-256 of its ``pixel_values`` rows (``prod(image_grid_thw[i])`` patch rows of
``channels * temporal_patch * patch**2`` values) with its grid, dtype and row width, so only identical
processor outputs share an entry. Value: the image's merged features ``(prod(grid) / merge**2, hidden)``
and, for Qwen3-VL, one such tensor per deepstack layer. Entries are kept in least-recently-used order and
evicted once their bytes exceed ``capacity_bytes``; an entry larger than the whole bound is used for its
call and not stored.

The vision tower sees each image separately (per-image attention windows and ``cu_seqlens``), so an
image's features do not depend on the other images of the call; on CPU float32 the tiny test models give
bit-identical scores with and without the cache (tests/runtime/test_vision_cache.py).

Thread safety: the LRU, its byte count and the counters change only under one lock, so a policy shared by
threads keeps the cache consistent. The tower runs outside the lock: two threads that miss the same new
image at once both encode it (the second store replaces the first, with equal features), and neither
waits on the other's forward.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["VisionCache", "VisionCacheStats", "check_vision_cache_mb", "unsupported_reason"]

log = logging.getLogger("causalcache_memory.runtime.vision_cache")

_MB = 1 << 20


def check_vision_cache_mb(value: object) -> int:
    """``value`` as an int >= 0, or a :class:`ConfigError` naming the field, the value and the fix."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"vision_cache_mb={value!r} must be an integer >= 0: the megabytes of vision-encoder outputs "
            "kept per policy (e.g. 512), or 0 to turn the cache off"
        )
    return value


def unsupported_reason(model: Any) -> str | None:
    """Why ``model`` cannot take cached image features (None when it can).

    Needs a base model (``model.model``) with ``get_image_features(pixel_values, image_grid_thw)``, a
    ``visual.spatial_merge_size``, and a ``forward`` accepting ``mm_encoder_outputs`` (transformers 5.24).
    """
    base = getattr(model, "model", None)
    if base is None or not callable(getattr(base, "get_image_features", None)):
        return f"{type(model).__name__} has no model.get_image_features"
    if not isinstance(getattr(getattr(base, "visual", None), "spatial_merge_size", None), int):
        return f"{type(model).__name__} has no model.visual.spatial_merge_size"
    try:
        params = inspect.signature(type(model).forward).parameters
    except (TypeError, ValueError):
        return f"the signature of {type(model).__name__}.forward cannot be read"
    if "mm_encoder_outputs" not in params:
        return f"{type(model).__name__}.forward takes no mm_encoder_outputs (transformers older than 5.24?)"
    return None


@dataclass(frozen=True, slots=True)
class VisionCacheStats:
    """Counters since construction (or :meth:`VisionCache.clear`)."""

    hits: int
    """Image occurrences served without the vision tower (stored, or a duplicate earlier in the call)."""
    misses: int
    """Distinct images of a call not found in the cache; each is encoded once."""
    images_encoded: int
    """Images run through the vision tower by the cache (equals ``misses``)."""
    evictions: int
    """Entries dropped to stay within ``capacity_bytes``."""
    entries: int
    """Images stored now."""
    bytes: int
    """Bytes of the stored features now."""
    capacity_bytes: int
    """The bound on ``bytes``."""


@dataclass(frozen=True, slots=True)
class _Entry:
    pooler: torch.Tensor  # (tokens, hidden) merged features of one image
    deepstack: tuple[torch.Tensor, ...]  # Qwen3-VL: one (tokens, hidden) per deepstack layer; else ()

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.pooler, *self.deepstack))


def image_key(rows: torch.Tensor, grid: tuple[int, ...]) -> bytes:
    """Content key of one image: SHA-256 over its ``(patches, width)`` pixel rows, grid, dtype and width."""
    import torch

    data = rows.detach().to("cpu").contiguous()
    digest = hashlib.sha256(repr((grid, str(data.dtype), tuple(data.shape))).encode())
    digest.update(data.view(torch.uint8).numpy().data if data.numel() else b"")
    return digest.digest()


class VisionCache:
    """LRU of per-image vision-encoder outputs bounded by ``capacity_bytes`` (see the module docstring)."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ConfigError(f"capacity_bytes={capacity_bytes} must be > 0 (use no cache to turn it off)")
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._bytes = 0
        self._output_type: type | None = None
        self._counts = {"hits": 0, "misses": 0, "images_encoded": 0, "evictions": 0}
        self._lock = threading.Lock()  # guards _entries, _bytes, _counts and _output_type (module doc)

    @classmethod
    def from_mb(cls, megabytes: int) -> VisionCache | None:
        """A cache of ``megabytes`` MiB, or None for 0 (validated by :func:`check_vision_cache_mb`)."""
        megabytes = check_vision_cache_mb(megabytes)
        return cls(megabytes * _MB) if megabytes else None

    def stats(self) -> VisionCacheStats:
        with self._lock:
            return VisionCacheStats(
                **self._counts,
                entries=len(self._entries),
                bytes=self._bytes,
                capacity_bytes=self.capacity_bytes,
            )

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._counts = dict.fromkeys(self._counts, 0)

    def image_features(self, model: Any, pixel_values: torch.Tensor, image_grid_thw: torch.Tensor) -> Any:
        """The ``mm_encoder_outputs["image"]`` of ``model`` for these images, encoding only new ones.

        ``pixel_values``: ``(sum_i prod(grid_i), width)`` rows, image after image (any device; hashed on
        CPU, only rows of new images are moved to the model's device). ``image_grid_thw``: ``(images, 3)``.
        Returns the model's image-output type with ``pooler_output`` a tuple of ``(tokens_i, hidden)`` and,
        when the model has them, ``deepstack_features`` a list over layers of such tuples.
        """
        grids = [tuple(int(v) for v in g) for g in image_grid_thw.tolist()]
        bounds = [0]
        for t, h, w in grids:
            bounds.append(bounds[-1] + t * h * w)
        if bounds[-1] != int(pixel_values.shape[0]):
            raise ValueError(
                f"pixel_values has {int(pixel_values.shape[0])} rows but image_grid_thw needs {bounds[-1]}"
            )
        keys = [image_key(pixel_values[bounds[i] : bounds[i + 1]], g) for i, g in enumerate(grids)]
        found: dict[bytes, _Entry] = {}
        new: list[int] = []  # first occurrence of each image not stored
        pending: set[bytes] = set()
        with self._lock:
            for i, key in enumerate(keys):
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    found[key] = entry
                elif key not in pending:
                    pending.add(key)
                    new.append(i)
                    continue
                self._counts["hits"] += 1  # stored, or a repeat of an image encoded in this call
        if new:
            found.update(self._encode(model, pixel_values, image_grid_thw, bounds, keys, new))
        output_type = self._output_type
        if output_type is None:  # pragma: no cover - a hit needs an earlier miss
            raise RuntimeError("VisionCache served hits before encoding any image")
        entries = [found[k] for k in keys]
        fields: dict[str, Any] = {"pooler_output": tuple(e.pooler for e in entries)}
        layers = len(entries[0].deepstack) if entries else 0
        if layers:
            fields["deepstack_features"] = [tuple(e.deepstack[j] for e in entries) for j in range(layers)]
        return output_type(**fields)

    def _encode(
        self,
        model: Any,
        pixel_values: torch.Tensor,
        image_grid_thw: torch.Tensor,
        bounds: list[int],
        keys: list[bytes],
        new: list[int],
    ) -> dict[bytes, _Entry]:
        """Run images ``new`` through the tower in one call; store and return their entries."""
        import torch

        device = next(model.parameters()).device
        rows = torch.cat([pixel_values[bounds[i] : bounds[i + 1]] for i in new]).to(device)
        grid = image_grid_thw[new].to(device)
        out = model.model.get_image_features(rows, grid, return_dict=True)  # outside the lock
        deepstack = getattr(out, "deepstack_features", None) or []
        encoded: dict[bytes, _Entry] = {}
        for n, i in enumerate(new):
            # clone: a split is a view that would keep the whole call's output alive
            encoded[keys[i]] = _Entry(
                out.pooler_output[n].clone(), tuple(layer[n].clone() for layer in deepstack)
            )
        with self._lock:
            self._output_type = type(out)
            for key, entry in encoded.items():
                self._store(key, entry)
            self._counts["misses"] += len(new)
            self._counts["images_encoded"] += len(new)
        return encoded

    def _store(self, key: bytes, entry: _Entry) -> None:
        """Insert under ``self._lock``; a key stored meanwhile by another thread is replaced, not counted twice."""
        size = entry.nbytes
        if size > self.capacity_bytes:
            return
        previous = self._entries.pop(key, None)
        if previous is not None:
            self._bytes -= previous.nbytes
        self._entries[key] = entry
        self._bytes += size
        while self._bytes > self.capacity_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.nbytes
            self._counts["evictions"] += 1
