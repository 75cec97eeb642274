"""Decoding a policy server's JSON reply: finite numbers only, bounded nesting, named errors.

A body holding a non-finite number (``NaN``, ``Infinity``, or a literal that overflows a float) is refused
with :class:`PolicyResponseError`, so a NaN logprob never becomes a NaN score. JSON nested deeper than
``max_depth`` levels is refused the same way (Python's decoder would raise a bare ``RecursionError`` at
about 1,000 levels; a policy server's reply is a few levels deep). An integer literal of more than
:data:`MAX_INT_DIGITS` digits is refused too (Python's decoder raises a bare ``ValueError`` past 4,300
digits; a token id, count or coordinate has a few).
"""

from __future__ import annotations

import json
import math
from typing import Any

from causalcache_memory.errors import PolicyResponseError

__all__ = ["MAX_INT_DIGITS", "decode_json_reply", "snippet"]

#: the longest integer literal a reply may hold (token ids, counts and pixel coordinates have a few digits)
MAX_INT_DIGITS = 40


def snippet(text: str | bytes | object, limit: int = 300) -> str:
    """A short printable excerpt of a response body for error messages."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = json.dumps(text, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def decode_json_reply(content: bytes, *, url: str, status_code: int, max_depth: int) -> Any:
    """The decoded body; raises :class:`PolicyResponseError` naming the URL and showing a snippet."""
    try:
        value = json.loads(
            content, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int
        )
    except _TooLong as exc:
        raise PolicyResponseError(
            f"{url} answered with {exc}; a policy server's numbers have a few digits. "
            f"body: {snippet(content)}"
        ) from None
    except _NonFinite as exc:
        raise PolicyResponseError(
            f"{url} answered with a non-finite number ({exc}); a score, logprob or coordinate must be "
            f"finite. body: {snippet(content)}"
        ) from None
    except RecursionError:
        value = _TOO_DEEP
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or any other refusal of the decoder
        raise PolicyResponseError(
            f"{url} answered HTTP {status_code} with a body that is not valid JSON ({exc}); "
            f"body: {snippet(content)}"
        ) from exc
    if value is _TOO_DEEP or _deeper_than(value, max_depth):
        raise PolicyResponseError(
            f"{url} answered with JSON nested deeper than max_json_depth={max_depth} levels; "
            f"a policy server's reply is a few levels deep. body: {snippet(content[:300])}"
        )
    return value


_TOO_DEEP = object()


def _deeper_than(value: Any, limit: int) -> bool:
    """True if ``value`` nests lists/objects more than ``limit`` levels (iterative; containers only)."""
    stack = [(value, 1)] if isinstance(value, (list, dict)) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (list, dict)))
    return False


class _NonFinite(ValueError):
    pass


class _TooLong(ValueError):
    pass


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _TooLong(f"an integer of {digits} digits (the limit MAX_INT_DIGITS is {MAX_INT_DIGITS})")
    return int(text)


def _refuse_constant(name: str) -> float:
    raise _NonFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(f"{text[:40]} overflows a float")
    return value
