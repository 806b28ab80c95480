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

The registry (:func:`swafloor.fuzz.backends.resolve`) resolves ``dataplane:NAME``: it resolves NAME
and calls :func:`wrap`; this package imports only the protocol, never the registry.

A backend whose room declares an :class:`~swafloor.fuzz.protocol.EventOrder` (vLLM's prefix-caching
backends) is wrapped in that order instead (:mod:`.ordered`: KV written when a step executes, not when
it is allocated; steps dropped; the worker's own tables; no torch). A backend whose engine has a driver
(:data:`.driven.DRIVERS`: ``sglang``, ``sglang-lazy``, ``trtllm-v2``) is that driver's plane, in the
engine's own order beside the reference's execution layer (:class:`.driven.DrivenBackend`; no torch).
The torch wrapper (:mod:`.backend`) serves every other name: the reference, the oracles, the seeded bugs.

Scheduling and execution apart (issue 34) is :mod:`.execution`: the reference's execution layer with a
worker's own block tables and a ledger of who wrote each slot position (:mod:`.tables`), no torch.
"""

from __future__ import annotations

import os

import attrs

from swafloor.reference import Config, build_layout

from ...protocol import BackendRecord, Capabilities, Comparison, Operation, Part, UnknownBackend, Unsupported, parts_of

__all__ = ["PREFIX", "DEVICES", "wrap", "device_from_env", "choose_device"]

PREFIX = "dataplane:"
DEVICES = ("auto", "cpu", "cuda")
ENV_DEVICE = "SWAFLOOR_DEVICE"


def device_from_env(field: str = ENV_DEVICE) -> str:
    value = os.environ.get(ENV_DEVICE, "auto") or "auto"
    if value not in DEVICES:
        raise UnknownBackend(field, value, f"must be one of {', '.join(DEVICES)}")
    return value


def choose_device(requested: str, field: str, spec: str) -> str:
    """The torch device ``requested`` (``auto``, ``cpu``, ``cuda``) names here; raises
    :class:`UnknownBackend` without torch or without the device."""
    try:
        from .engine import device_name
    except ImportError as exc:
        raise UnknownBackend(field, spec, f"needs torch (pip install 'swafloor[dataplane]'): {exc}") from None
    try:
        return device_name(requested)
    except RuntimeError as exc:
        raise UnknownBackend("device", requested, str(exc)) from None


def _observations(inner: BackendRecord) -> dict[Part, Comparison]:
    caps = inner.capabilities
    outcome = Comparison.AT_LEAST if Operation.CLOSE in caps.operations else Comparison.EXACT
    chosen = {Part.OUTCOME: outcome}
    for part in (Part.LENGTHS, Part.ERRORS):
        if caps.mode(part) is not None:
            chosen[part] = Comparison.EXACT
    return chosen


def wrap(inner: BackendRecord, device: str, seed: int = 0, name: str | None = None) -> BackendRecord:
    """Paged attention on a device through another backend's block tables: the record of ``inner``
    wrapped on ``device`` (``cpu`` or ``cuda``). Its capabilities' notes say where slot ids come from:
    the backend's own, or (table-only) a mirror of its tables. It is checked under the semantics its
    inner backend claims (never drawn per example)."""
    if inner.event_order is not None:  # the engine declares its own order of schedule, execute and drop
        from .ordered import wrap_ordered

        return wrap_ordered(inner, name or PREFIX + inner.name, device)
    from .driven import DRIVERS, wrap_driven

    if inner.name in DRIVERS:  # an engine driven by its own room's driver, in its own order
        return wrap_driven(inner, name or PREFIX + inner.name, device)
    inner_caps = inner.capabilities
    if inner_caps.mode(Part.SLOTS) is not None:
        notes = inner_caps.notes + ("data plane: through the backend's own slot ids",)
    elif inner.name.startswith(PREFIX):
        notes = inner_caps.notes
    else:
        from .tables import TABLE_ONLY

        notes = inner_caps.notes + ("data plane " + TABLE_ONLY,)
    # one block size: the engine's KV pages are blocks of the config's t (no block size per life cycle)
    caps: Capabilities = attrs.evolve(inner_caps, observations=_observations(inner),
                                      needs_gpu=device.startswith("cuda"), notes=notes, all_semantics=False,
                                      mixed_block_sizes=False, full_attention_block_multiples=())
    label = name or PREFIX + inner.name

    def make(config: Config):
        from .backend import DataPlaneBackend
        from .engine import Engine
        from .tables import NoBlockTables, slot_source

        if config.semantics.cache_freed:  # a freed slot is poisoned: its cached data is not modelled
            raise Unsupported(f"{label}: freed blocks cached (semantics.cache_freed): not modelled by the data plane")
        if build_layout(config).mixed_block_sizes:
            raise Unsupported(f"{label}: a block size per life cycle: the data plane's pages are blocks of the "
                              f"config's t = {config.tokens_per_block}")
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

    # Declares no prepare() and no limits of its own, as before the record (the wrapped one's stay on ``inner``).
    return BackendRecord(label, make, caps, label=label, device=device, inner=inner)
