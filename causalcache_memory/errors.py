"""One error hierarchy for the whole library.

Every error raised on purpose by causalcache-memory derives from :class:`CausalCacheError`; where a
builtin fits, the subclass also inherits it (``ConfigError`` is a ``ValueError``) so callers that
already catch builtins keep working. Messages name the field or object, the bad value and the fix.
"""

from __future__ import annotations

import logging
import warnings

__all__ = [
    "ActionParseError",
    "AllocationError",
    "ArchiveError",
    "ArchiveKeyError",
    "ArchiveLayoutError",
    "ArchivePermissionError",
    "ArchiveTimeoutError",
    "ArchiveUnavailableError",
    "BlobCorruptError",
    "BlobNotFoundError",
    "CausalCacheError",
    "CausalCacheWarning",
    "ConfigError",
    "ImageRejectedError",
    "ImageSpanMismatchError",
    "ImagesIgnoredError",
    "MissingDependencyError",
    "OcrCancelledError",
    "PolicyError",
    "PolicyInputError",
    "PolicyResponseError",
    "PolicyUnavailableError",
    "PromptImageError",
    "RenderError",
    "SchemaMismatchError",
    "ScreenTextError",
    "SelectorError",
    "TraceConflictError",
    "TraceError",
    "warn",
]


class CausalCacheError(Exception):
    """Base class of every error raised by causalcache-memory."""


class CausalCacheWarning(UserWarning):
    """Base class of warnings (for example: the selector failed and the step fell back to Recent-B)."""


def warn(message: str, *, logger: logging.Logger, stacklevel: int = 2) -> None:
    """Say ``message`` both ways: a WARNING record on ``logger`` and a :class:`CausalCacheWarning`.

    ``stacklevel`` is that of :func:`warnings.warn` as if called where :func:`warn` is called.
    """
    logger.warning(message)
    warnings.warn(message, CausalCacheWarning, stacklevel=stacklevel + 1)


class MissingDependencyError(CausalCacheError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class ConfigError(CausalCacheError, ValueError):
    """A configuration is invalid. ``errors`` lists every problem found, not only the first."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = list(errors or [])


class TraceError(CausalCacheError, ValueError):
    """An event trace was used against its invariants (append-only, contiguous indices)."""


class TraceConflictError(TraceError):
    """Two writers extended one episode's trace: the head a writer extended is no longer the head.

    Raised by :meth:`~causalcache_memory.trace.store.TraceStore.commit` (compare-and-swap on the head per
    episode); the message names the episode (the LangGraph ``thread_id``) and nothing recorded is lost.
    """


class ArchiveError(CausalCacheError):
    """A screenshot archive operation failed."""


class ArchiveKeyError(ArchiveError, ValueError):
    """An episode id or content hash given to the archive is malformed (for example a path like ``../x``)."""


class ArchiveUnavailableError(ArchiveError, ConnectionError):
    """The archive's storage cannot be reached (connection refused, unknown host, timeout)."""


class ArchiveTimeoutError(ArchiveUnavailableError, TimeoutError):
    """A storage call of the archive did not answer within its deadline (``archive.timeout_s``)."""


class ArchivePermissionError(ArchiveError, PermissionError):
    """The archive location is not writable or readable by this process (e.g. a read-only directory)."""


class ArchiveLayoutError(ArchiveError):
    """The archive directory holds something the archive never writes (a symlink, a file for a folder)."""


class BlobNotFoundError(ArchiveError, KeyError):
    """A content hash is not in the archive."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else "blob not found"


class BlobCorruptError(ArchiveError):
    """Stored bytes do not hash to their content address: never returned as pixels."""


class ImageRejectedError(ArchiveError, ValueError):
    """Bytes offered to the archive are not an acceptable image (corrupt, unsupported, too large)."""


class ScreenTextError(ArchiveError, ValueError):
    """Screen text offered to the archive is not acceptable (not a ``str``, not UTF-8, over the size cap)."""


class OcrCancelledError(ScreenTextError):
    """An OCR read stopped because its writer was closed (the screen gets no text; nothing is stored)."""


class AllocationError(CausalCacheError, ValueError):
    """An allocation violates the exact-B contract or an allocator was misused."""


class RenderError(CausalCacheError, ValueError):
    """A prompt could not be rendered from the trace and allocation."""


class PromptImageError(RenderError):
    """A screenshot needed by a prompt is missing or corrupt; names the event and the hash."""


class ImageSpanMismatchError(RenderError):
    """Encoded image token blocks do not match the prompt's declared images (count, length, framing)."""


class PolicyError(CausalCacheError):
    """A policy runtime failed."""


class PolicyInputError(PolicyError, ValueError):
    """A policy call was made with invalid arguments (e.g. prompts and targets of different lengths)."""


class PolicyUnavailableError(PolicyError, ConnectionError):
    """A policy server could not be reached (after bounded retries)."""


class PolicyResponseError(PolicyError, ValueError):
    """A policy server answered with something that is not the expected response."""


class ImagesIgnoredError(PolicyResponseError):
    """A policy server answered a prompt with images but did not encode them (its token count shows it)."""


class ActionParseError(CausalCacheError, ValueError):
    """A policy response could not be parsed into a typed action."""


class SelectorError(CausalCacheError):
    """The learned selector failed to load or to score."""


class SchemaMismatchError(SelectorError, ValueError):
    """A selector model's feature schema does not match this library's feature extractor."""
