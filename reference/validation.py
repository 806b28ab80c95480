"""Checks shared by the config and the semantics: bounded integers, enum values, printable keys."""

from __future__ import annotations

import enum
from typing import Any

from .errors import ConfigError
from .show import bounded

__all__ = ["MAX_COUNT", "printable_key", "require_int", "enum_value"]

#: The largest count a config may hold (tokens per block, window, sink tokens, slots, pool group
#: numbers, tokens in flight): beyond any engine's fixed-width integers, and it keeps every formula
#: on it cheap. Larger values are rejected, never silently clipped.
MAX_COUNT = 10**18


def printable_key(key: Any) -> str:
    """A dict key as it may appear in a field name: plain when short and printable, else bounded."""
    if isinstance(key, str) and len(key) <= 40 and key.isprintable():
        return key
    return bounded(key, 40)


def require_int(field: str, value: Any, minimum: int, maximum: int = MAX_COUNT) -> None:
    """Raise :class:`ConfigError` on ``field`` unless ``value`` is an int (not a bool) in range."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(field, value, "must be an integer")
    if value < minimum:
        raise ConfigError(field, value, f"must be >= {minimum}")
    if value > maximum:
        raise ConfigError(field, value, f"must be <= {maximum}")


def enum_value(field: str, enum_type: type[enum.Enum], value: Any) -> Any:
    """``value`` as a member of ``enum_type``, else :class:`ConfigError` on ``field`` naming the choices."""
    try:
        return enum_type(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, f"must be one of {[m.value for m in enum_type]}") from None
