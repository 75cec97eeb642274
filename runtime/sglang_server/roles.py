"""Per-image roles in an SGLang request and in the radix-cache key of each image (no ``sglang`` import).

The client sends one role per image in ``mm_processor_kwargs`` (SGLang's Qwen-VL processor ignores keys it
does not know)::

    {"causalcache_image_roles": ["history", "history", "current"]}              # one request
    {"causalcache_image_roles": {"<rid 0>": [...], "<rid 1>": [...]}}           # a batch (keyed by rid)

A batch needs the mapping because SGLang copies the same ``mm_processor_kwargs`` object to every item of a
batch (``GenerateReqInput.__getitem__``); each item keeps its own ``rid``.

SGLang keys an image in the radix cache by the sentinel ids that replace its ``<|image_pad|>`` tokens
(``MultimodalDataItem.pad_values``, derived from the image hash). :func:`apply_roles` leaves a ``current``
image untouched (a request without history images is exactly a stock request) and gives a ``history``
image sentinels derived from its identity *and* the role, so K/V computed for an image as the current
screen is never reused for the same image as history, and vice versa. The item's ``hash`` is kept, so the
vision-encoder embedding cache (keyed by ``hash``) still reuses the screenshot's ViT output across roles;
only the language-model K/V differ. Text before the first history image keeps its ids and is shared
between pass 1 and pass 2.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from causalcache_memory.errors import ConfigError

__all__ = [
    "HISTORY",
    "ROLES",
    "ROLES_KWARG",
    "ROLE_KEY",
    "apply_roles",
    "history_items",
    "parse_roles",
    "role_pad_values",
]

#: ``mm_processor_kwargs`` key carrying the roles
ROLES_KWARG = "causalcache_image_roles"
#: ``MultimodalDataItem.model_specific_data`` key the processor writes and the model reads
ROLE_KEY = "causalcache_role"
HISTORY = "history"
ROLES = ("history", "current")
_ROLE_TAG = b"causalcache-hgkv-role-v1"
#: SGLang 0.5.23 ``schedule_batch``: sentinels are ``MM_PAD_SHIFT_VALUE + (62-bit value)``, 4 per item
DEFAULT_SHIFT = 1_000_000
DEFAULT_MASK = (1 << 62) - 1
DEFAULT_COUNT = 4


def parse_roles(kwargs: Mapping[str, Any] | None, *, rid: Any, n_images: int) -> list[str] | None:
    """The roles of one request's images, or None when the request carries none.

    Raises:
        ConfigError: malformed roles, or a count that differs from the request's images.
    """
    if not kwargs or ROLES_KWARG not in kwargs:
        return None
    value = kwargs[ROLES_KWARG]
    if isinstance(value, Mapping):
        if rid not in value:
            raise ConfigError(
                f"mm_processor_kwargs[{ROLES_KWARG!r}] maps request ids {sorted(map(str, value))[:4]} but not "
                f"this request's rid {rid!r}; a batch must list the roles of every item under its rid"
            )
        value = value[rid]
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise ConfigError(f"mm_processor_kwargs[{ROLES_KWARG!r}]={value!r} must be a list of roles")
    roles = list(value)
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise ConfigError(f"image roles {bad} are not one of {list(ROLES)}")
    if len(roles) != n_images:
        raise ConfigError(
            f"the request declares {len(roles)} image roles but carries {n_images} images; "
            "send one role per image, in image_data order"
        )
    return roles


def _identity(item: Any) -> bytes:
    identity = getattr(item, "identity", None)
    if identity:
        return bytes(identity)
    value = item.hash
    if value is None:
        raise ConfigError("an image item has no hash yet; hash it (set_pad_value) before applying roles")
    return int(value).to_bytes(8, byteorder="big")


def role_pad_values(
    item: Any, role: str, *, shift: int = DEFAULT_SHIFT, mask: int = DEFAULT_MASK, count: int = DEFAULT_COUNT
) -> tuple[int, ...]:
    """Radix-key sentinels of ``item`` seen in ``role`` (``count`` ids, each ``shift + 62-bit value``)."""
    if role not in ROLES:
        raise ConfigError(f"role {role!r} is not one of {list(ROLES)}")
    digest = hashlib.sha256(_ROLE_TAG + b"\0" + role.encode() + b"\0" + _identity(item)).digest()
    return tuple(shift + (int.from_bytes(digest[8 * i : 8 * i + 8], "big") & mask) for i in range(count))


def _set_role_data(item: Any, role: str) -> None:
    data = getattr(item, "model_specific_data", None)
    if not isinstance(data, dict):
        raise ConfigError(f"multimodal item {type(item).__name__} has no model_specific_data dict")
    data[ROLE_KEY] = role


def apply_roles(
    items: Sequence[Any],
    roles: Sequence[str],
    *,
    is_image: Any = None,
    shift: int = DEFAULT_SHIFT,
    mask: int = DEFAULT_MASK,
) -> None:
    """Tag the image items of one request with ``roles`` (in image order) and re-key history images.

    ``items`` are SGLang ``MultimodalDataItem`` objects (already hashed); non-image items are skipped.
    ``is_image(item)`` defaults to ``item.is_image()``.
    """
    check = is_image or (lambda item: item.is_image())
    images = [item for item in items if check(item)]
    if len(images) != len(roles):
        raise ConfigError(
            f"the processor produced {len(images)} image items but {len(roles)} roles were sent; "
            "bundled or dropped images cannot be gated"
        )
    for item, role in zip(images, roles, strict=True):
        if role != HISTORY:
            continue
        pads = role_pad_values(item, role, shift=shift, mask=mask, count=len(item.padding_values()))
        item.pad_values = pads
        item.pad_value = pads[0]
        _set_role_data(item, role)


def history_items(
    items: Sequence[Any] | None, *, shift: int = DEFAULT_SHIFT, mask: int = DEFAULT_MASK
) -> list:
    """The items of one request tagged ``history``; each must carry its role's sentinels (fail-closed).

    Raises:
        ConfigError: a history-tagged item whose radix key is not the history key (a role that did not
            reach the cache key would let the cache mix current and history K/V).
    """
    out = []
    for item in items or ():
        data = getattr(item, "model_specific_data", None) or {}
        if data.get(ROLE_KEY) != HISTORY:
            continue
        values = tuple(item.padding_values())
        expected = role_pad_values(item, HISTORY, shift=shift, mask=mask, count=len(values))
        if values != expected:
            raise ConfigError(
                "an image tagged 'history' does not carry its history radix key (pad values were "
                "recomputed after the causalcache processor ran, e.g. by caller mm_hashes); refusing to gate"
            )
        if not item.offsets:
            raise ConfigError("an image tagged 'history' has no token offsets")
        out.append(item)
    return out
