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
from swafloor.reference.show import bounded

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
    "vllm-no-reuse": "swafloor.fuzz.backends.vllm:vllm_no_reuse",
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
        super().__init__(f"{field}={bounded(value)}: {reason}")


@attrs.frozen
class ResolvedBackend:
    """A named factory with its declared capabilities."""

    name: str
    factory: Any = attrs.field(eq=False)
    capabilities: Any = attrs.field(eq=False)


def names() -> tuple[str, ...]:
    """Registered names; any of them may also be wrapped as ``dataplane:NAME``."""
    return tuple(REGISTRY)


_BACKEND_METHODS = ("observe",)  # besides the operations a backend's capabilities declare


def _checked_factory(factory: Any, field: str, spec: str, caps: Any):
    """``factory`` wrapped so that what it returns is checked to be a backend: a spec naming a
    callable that is no backend factory (``builtins:print``, a manager class) is then a clean
    :class:`UnknownBackend` naming it, not an AttributeError later."""
    required = tuple(op.value for op in type(next(iter(caps.operations))) if op in caps.operations)
    required += _BACKEND_METHODS

    def build(config):
        backend = factory(config)
        missing = [name for name in required if not callable(getattr(backend, name, None))]
        if missing:
            raise UnknownBackend(
                field, spec, f"is not a backend factory: it returned {bounded(type(backend).__name__, 40)}, "
                f"which lacks {', '.join(missing)}"
            )
        return backend

    if not isinstance(factory, type):  # a function's attributes: capabilities, backend_name, prepare
        build.__dict__.update(getattr(factory, "__dict__", {}))
    for name in ("capabilities", "backend_name", "prepare", "__name__", "__qualname__", "__doc__"):
        if hasattr(factory, name):
            setattr(build, name, getattr(factory, name))
    build.__wrapped__ = factory
    return build


def resolve(spec: str, field: str = "backend", *, allow_import: bool = True) -> ResolvedBackend:
    """Resolve a registered name or ``MODULE:FACTORY``; raises :class:`UnknownBackend`.

    ``allow_import=False`` (names read from a trace file) accepts registered names only, so a file
    cannot make swafloor import a module of its choosing; ``MODULE:FACTORY`` is for the command line."""
    from ..protocol import capabilities_of

    if not isinstance(spec, str) or not spec:
        raise UnknownBackend(field, spec, "must be a backend name or MODULE:FACTORY")
    if len(spec) > 200 or not spec.isprintable():
        raise UnknownBackend(field, spec, "is not a backend name (too long or not printable)")
    if spec.startswith(DATAPLANE_PREFIX):  # a wrapper around the backend named after the prefix
        if not allow_import and spec[len(DATAPLANE_PREFIX):] not in REGISTRY:
            raise UnknownBackend(field, spec, _ONLY_REGISTERED)
        from .dataplane import resolve_dataplane

        return resolve_dataplane(spec, field)
    if spec not in REGISTRY and not allow_import:
        raise UnknownBackend(field, spec, _ONLY_REGISTERED)
    target = REGISTRY.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UnknownBackend(field, spec, f"not a registered backend ({', '.join(REGISTRY)}) nor MODULE:FACTORY")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise UnknownBackend(field, spec, f"{bounded(module_name, 60)} is not an absolute module name (a.b.c)")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise UnknownBackend(field, spec, f"{bounded(attr, 60)} is not an attribute name")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownBackend(field, spec, f"cannot import module {module_name!r}: {_brief(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the module's own code failed while importing
        raise UnknownBackend(field, spec, f"importing {module_name!r} failed: {type(exc).__name__}: {_brief(exc)}") from None
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
        raise UnknownBackend(field, spec, _brief(exc)) from None
    return ResolvedBackend(spec, _checked_factory(obj, field, spec, caps), caps)


def check_factory(resolved: ResolvedBackend) -> None:
    """Build ``resolved`` once on a small config, so that a spec naming a callable that returns no
    backend fails now (UnknownBackend, one line) rather than after a campaign has started. A factory
    that refuses the config or fails otherwise is left for the campaign to report."""
    from swafloor.reference import AttentionLayer, Config

    try:
        resolved.factory(Config(4, [AttentionLayer(4)]))
    except UnknownBackend:
        raise
    except Exception:  # noqa: BLE001 - Unsupported, or a build failure the campaign reports as such
        pass


_ONLY_REGISTERED = (
    f"a trace file may name only registered backends ({', '.join(REGISTRY)}, dataplane:NAME); "
    "give MODULE:FACTORY on the command line (--backend/--against) to load a module"
)


def _brief(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."
