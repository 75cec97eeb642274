"""The base of every config section and the registry check the sections share."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from causalcache_memory.errors import CausalCacheError

__all__: list[str] = []  # private helpers of config/models.py


class _Strict(BaseModel):
    """Base of every section: unknown keys, non-finite numbers and booleans given for numbers are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if _wants_number(annotation):
                raise ValueError(f"{info.field_name}={value!r} is a boolean; this field takes a number")
        return value


def _wants_number(annotation: Any) -> bool:
    """True when ``annotation`` accepts int or float but not bool (YAML ``true`` is no ``1`` here)."""
    members = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    return bool not in members and any(m in (int, float) for m in members)


def _registered(check: Any, value: Any) -> Any:
    try:
        check(value)
    except CausalCacheError as exc:
        raise ValueError(str(exc)) from None
    return value
