"""Typed GUI actions: the model, parsers from policy outputs, renderers and full-action equivalence."""

from .model import ACTION_TYPES, POINTER_TYPES, Action, ActionType

__all__ = ["ACTION_TYPES", "POINTER_TYPES", "Action", "ActionType"]
