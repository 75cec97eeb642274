"""The base of every config section and the registry check the sections share."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from causalcache_memory.errors import CausalCacheError

__all__ = ["refuse_renamed"]  # the rest: private helpers of config/models.py


def refuse_renamed(data: Any, renamed: Mapping[str, str]) -> Any:
    """Refuse keys that were renamed, naming the old and the new key (nothing is released: no alias)."""
    if isinstance(data, Mapping):
        old = [key for key in renamed if key in data]
        if old:
            raise ValueError(
                "; ".join(f"{key} was renamed {renamed[key]}: write {renamed[key]} instead" for key in old)
                + " ('budget' names B only)"
            )
    return data


class _Strict(BaseModel):
    """Base of every section: unknown keys, non-finite numbers and booleans given for numbers are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)
    #: ``{old key: new key}`` of this section, refused by name (:func:`refuse_renamed`)
    RENAMED: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return refuse_renamed(data, cls.RENAMED)

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
