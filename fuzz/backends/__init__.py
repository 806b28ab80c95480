"""Backends and their registry: names mapped to ``module:factory`` strings, imported only when named.

Slow or GPU-bound backends therefore cost nothing until used. A name not in the registry that has
the form ``MODULE:FACTORY`` loads a third-party factory (a ``config -> Backend`` callable, ideally
decorated with :func:`swafloor.fuzz.protocol.factory` to declare its capabilities).
"""

from __future__ import annotations

import importlib
from typing import Any

import attrs

from swafloor.reference import SwafloorError

__all__ = ["REGISTRY", "MUTANT_NAMES", "DATA_MUTANT_NAMES", "DATAPLANE_PREFIX", "UnknownBackend", "ResolvedBackend", "resolve", "names"]

REGISTRY: dict[str, str] = {
    "reference": "swafloor.fuzz.backends.reference:reference",
    "oracle": "swafloor.fuzz.backends.oracle:oracle",
    "mutant:legacy-floor": "swafloor.fuzz.backends.mutants:legacy_floor",
    "mutant:no-inflight-token": "swafloor.fuzz.backends.mutants:no_inflight_token",
    "mutant:floor-division": "swafloor.fuzz.backends.mutants:floor_division",
    "mutant:ignore-sinks": "swafloor.fuzz.backends.mutants:ignore_sinks",
    "mutant:allocate-before-release": "swafloor.fuzz.backends.mutants:allocate_before_release",
    "mutant:release-inflight-block": "swafloor.fuzz.backends.mutants:release_inflight_block",
    "mutant:shared-slot": "swafloor.fuzz.backends.mutants:shared_slot",
    "vllm": "swafloor.fuzz.backends.vllm:vllm",
    "vllm-async": "swafloor.fuzz.backends.vllm:vllm_async",
    "trtllm": "swafloor.fuzz.backends.trtllm:trtllm",
}

#: Seeded bugs whose block tables and slot counts match the reference's: only the data plane
#: (``dataplane:NAME``, which wraps any backend here) can catch them.
DATA_MUTANT_NAMES = ("mutant:shared-slot",)
MUTANT_NAMES = tuple(name for name in REGISTRY if name.startswith("mutant:") and name not in DATA_MUTANT_NAMES)
DATAPLANE_PREFIX = "dataplane:"


class UnknownBackend(SwafloorError, ValueError):
    """A backend name or ``MODULE:FACTORY`` could not be resolved. ``field``/``value`` name it."""

    def __init__(self, field: str, value: Any, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")


@attrs.frozen
class ResolvedBackend:
    """A named factory with its declared capabilities."""

    name: str
    factory: Any = attrs.field(eq=False)
    capabilities: Any = attrs.field(eq=False)


def names() -> tuple[str, ...]:
    """Registered names; any of them may also be wrapped as ``dataplane:NAME``."""
    return tuple(REGISTRY)


def resolve(spec: str, field: str = "backend") -> ResolvedBackend:
    """Resolve a registered name or ``MODULE:FACTORY``; raises :class:`UnknownBackend`."""
    from ..protocol import capabilities_of

    if not isinstance(spec, str) or not spec:
        raise UnknownBackend(field, spec, "must be a backend name or MODULE:FACTORY")
    if spec.startswith(DATAPLANE_PREFIX):  # a wrapper around the backend named after the prefix
        from .dataplane import resolve_dataplane

        return resolve_dataplane(spec, field)
    target = REGISTRY.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UnknownBackend(field, spec, f"not a registered backend ({', '.join(REGISTRY)}) nor MODULE:FACTORY")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownBackend(field, spec, f"cannot import module {module_name!r}: {exc}") from None
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise UnknownBackend(field, spec, f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise UnknownBackend(field, spec, "is not callable (a factory takes a Config and returns a Backend)")
    try:
        caps = capabilities_of(obj)
    except TypeError as exc:
        raise UnknownBackend(field, spec, str(exc)) from None
    return ResolvedBackend(spec, obj, caps)
