"""``dataplane:NAME``: paged attention on device memory through another backend's block tables.

``dataplane:reference``, ``dataplane:oracle``, ``dataplane:mutant:...`` (any name the registry
resolves) wrap that backend: every operation goes to it, and after each one the wrapper does what an
engine does with the tables it shows: writes each computed token's keys and values into the slot its
block holds, then computes the in-flight tokens of every active request through the tables (SWA with
sink blocks, full attention, an SSM recurrence) and compares them with the same computation on a
dense copy of each request's sequence (:mod:`.engine` documents the data, the storage and the
tolerance; :mod:`.backend` when tokens are written).

The wrapper is compared with the reference on the outcome (``at-least``: holding fewer blocks may
succeed where the reference runs out of slots), the lengths and the errors the wrapped backend
declares: block tables and pool counts are not compared, so what a wrong table loses is caught by
its data. Torch is an optional extra (``pip install 'swafloor[dataplane]'``) imported only when a
``dataplane:`` backend is resolved. The device is ``SWAFLOOR_DEVICE`` (``auto``, ``cpu``, ``cuda``;
default ``auto``: CUDA when torch sees it) or ``swafloor fuzz --device``.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from swafloor.reference import Config, build_layout

from ...compare import parts_of
from ...protocol import Comparison, Operation, Part, Unsupported, factory

__all__ = ["PREFIX", "DEVICES", "resolve_dataplane", "wrap", "device_from_env"]

PREFIX = "dataplane:"
DEVICES = ("auto", "cpu", "cuda")
ENV_DEVICE = "SWAFLOOR_DEVICE"


def device_from_env(field: str = ENV_DEVICE) -> str:
    from .. import UnknownBackend

    value = os.environ.get(ENV_DEVICE, "auto") or "auto"
    if value not in DEVICES:
        raise UnknownBackend(field, value, f"must be one of {', '.join(DEVICES)}")
    return value


def _torch_device(requested: str, field: str, spec: str) -> str:
    from .. import UnknownBackend

    try:
        from .engine import device_name
    except ImportError as exc:
        raise UnknownBackend(field, spec, f"needs torch (pip install 'swafloor[dataplane]'): {exc}") from None
    try:
        return device_name(requested)
    except RuntimeError as exc:
        raise UnknownBackend("device", requested, str(exc)) from None


def _observations(inner: Any) -> dict[Part, Comparison]:
    caps = inner.capabilities
    outcome = Comparison.AT_LEAST if Operation.CLOSE in caps.operations else Comparison.EXACT
    chosen = {Part.OUTCOME: outcome}
    for part in (Part.LENGTHS, Part.ERRORS):
        if caps.mode(part) is not None:
            chosen[part] = Comparison.EXACT
    return chosen


def wrap(inner: Any, device: str, seed: int = 0, name: str | None = None):
    """A factory wrapping the resolved backend ``inner`` on ``device`` (``cpu`` or ``cuda``)."""
    caps = attrs.evolve(
        inner.capabilities, observations=_observations(inner), needs_gpu=device.startswith("cuda"),
        all_semantics=False,  # the data plane is checked under the semantics its inner backend claims
    )
    label = name or PREFIX + inner.name

    @factory(caps, name=label)
    def make(config: Config):
        from .backend import DataPlaneBackend
        from .engine import Engine
        from .tables import NoBlockTables, slot_source

        backend = inner.factory(config)
        layout = build_layout(config)
        totals = layout.slots
        if inner.capabilities.mode(Part.POOL_TOTALS) is not None:
            totals = parts_of(backend.observe()).get(Part.POOL_TOTALS, totals)
        try:
            source = slot_source(backend, inner.capabilities, tuple(layout.pool_group_of), tuple(totals))
        except NoBlockTables as exc:
            raise Unsupported(f"{label}: {exc}") from None
        return DataPlaneBackend(backend, config, Engine(layout, totals, device, seed=seed), source, seed=seed)

    make.device = device  # type: ignore[attr-defined]
    make.inner = inner  # type: ignore[attr-defined]
    return make


def resolve_dataplane(spec: str, field: str = "backend", device: str | None = None):
    """Resolve ``dataplane:NAME``: resolve NAME, then wrap it. ``device``: ``auto``, ``cpu`` or
    ``cuda`` (default: ``SWAFLOOR_DEVICE``, else ``auto``)."""
    from .. import ResolvedBackend, UnknownBackend, resolve

    inner_spec = spec[len(PREFIX):]
    if not inner_spec:
        raise UnknownBackend(field, spec, "names no backend to wrap (dataplane:NAME)")
    requested = device_from_env() if device is None else device
    if requested not in DEVICES:
        raise UnknownBackend("device", requested, f"must be one of {', '.join(DEVICES)}")
    inner = resolve(inner_spec, field)
    chosen = _torch_device(requested, field, spec)
    made = wrap(inner, chosen, name=spec)
    return ResolvedBackend(spec, made, made.capabilities)
