"""YAML loading with every validation error reported at once (field path, bad value, what is allowed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from causalcache_memory.config.models import CausalCacheConfig
from causalcache_memory.errors import ConfigError

__all__ = ["config_schema", "format_validation_error", "load_config", "parse_config"]

M = TypeVar("M", bound=BaseModel)


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """Field names allowed at ``loc`` (the parent of an unknown key)."""
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


def format_validation_error(
    exc: ValidationError, model: type[BaseModel], source: str = "config"
) -> ConfigError:
    """Turn a pydantic ``ValidationError`` into one :class:`ConfigError` listing every problem."""
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        path = ".".join(str(p) for p in loc) or "(top level)"
        value = err.get("input")
        shown = json.dumps(value, default=str) if not isinstance(value, Mapping) else "{...}"
        if len(shown) > 80:
            shown = shown[:77] + "..."
        if err["type"] == "missing":
            lines.append(f"{path}: required key is missing; add it")
        elif err["type"] == "extra_forbidden":
            allowed = _allowed_keys(model, loc[:-1])
            hint = f"unknown key; allowed keys here: {', '.join(allowed)}" if allowed else "unknown key"
            lines.append(f"{path}: {hint}")
        else:
            lines.append(f"{path}: got {shown} — {err['msg']}")
    noun = "problem" if len(lines) == 1 else "problems"
    message = f"{source}: {len(lines)} {noun}:\n  " + "\n  ".join(lines)
    return ConfigError(message, lines)


def parse_config(
    data: Mapping[str, Any] | None, model: type[M] = CausalCacheConfig, source: str = "config"
) -> M:  # type: ignore[assignment]
    """Validate a mapping into ``model``; raises :class:`ConfigError` with every problem."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got {type(data).__name__}")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise format_validation_error(exc, model, source) from None


def load_config(path: str | Path, model: type[M] = CausalCacheConfig) -> M:  # type: ignore[assignment]
    """Load and validate a YAML file (``yaml.safe_load``; never arbitrary objects)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse_config(data, model, source=str(path))


def config_schema(model: type[BaseModel] = CausalCacheConfig) -> dict[str, Any]:
    """JSON schema of the configuration."""
    return model.model_json_schema()
