"""The typed errors of the reference: one base, :class:`SwafloorError`, which every other module of
swafloor's errors on bad input also derives from. Each names the offending field and holds its value;
messages quote both in a bounded, one-line form (:func:`.show.bounded`)."""

from __future__ import annotations

from typing import Any

from .show import bounded

__all__ = ["SwafloorError", "ConfigError", "RequestError", "require_count", "require_id"]


class SwafloorError(Exception):
    """Base of every typed error swafloor raises on bad input: the reference's (below), the fuzz
    harness's (trace, backend, campaign, workers) and the TensorRT-LLM check's. The command line
    prints one and exits 2."""


class ConfigError(SwafloorError, ValueError):
    """A configuration value is invalid. ``field`` names it and ``value`` holds what was given; the
    message quotes a bounded, one-line form of both (a 5000-digit int or a deep list is fine)."""

    def __init__(self, field: str, value: Any, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        shown_field = field if len(field) <= 120 and field.isprintable() else bounded(field, 120)
        super().__init__(f"{shown_field}={bounded(value)}: {reason}")


class RequestError(SwafloorError, ValueError):
    """A request operation was misused. ``field`` names the offending input, ``value`` holds it."""

    def __init__(self, request_id: Any, field: str, value: Any, reason: str):
        self.request_id = request_id
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"request {bounded(request_id)}: {field}={bounded(value)}: {reason}")


def require_id(request_id: Any) -> None:
    """Request ids are non-empty strings (the protocol's and the traces' form)."""
    if type(request_id) is not str or not request_id:
        raise RequestError(request_id, "request_id", request_id, "must be a non-empty string")


def require_count(request_id: Any, field: str, value: Any) -> None:
    """A count (capacity, history, tokens) is a non-negative integer."""
    if type(value) is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RequestError(request_id, field, value, "must be an integer")
    if value < 0:
        raise RequestError(request_id, field, value, "must be >= 0")
