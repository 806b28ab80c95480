"""The registry: every backend name resolves here, and only here, to one
:class:`~swafloor.fuzz.protocol.BackendRecord`.

A registered name is declared by one :class:`Registered` entry in :data:`REGISTRY`: where its
factory is (``MODULE:FUNCTION``, imported only when the name is resolved, so slow or GPU-bound
backends cost nothing until used), what it needs installed beyond swafloor's dependencies and how far
it has been checked. Its capabilities, display name, ``prepare()`` and limits are what its factory
declares (:func:`swafloor.fuzz.protocol.factory`). ``dataplane:NAME`` wraps the record NAME resolves
to (:mod:`swafloor.fuzz.engines.dataplane`). ``reference-mutant:NAME`` names a seeded bug of the reference itself
(:mod:`.reference_mutants`), for the oracle to catch. A name not in the registry that
has the form ``MODULE:FACTORY`` loads a third-party factory (a ``config -> Backend`` callable, ideally
declared with ``factory``). The docs' backend table is generated from here (:func:`backend_rows`).
"""

from __future__ import annotations

import importlib
from typing import Any

import attrs

from swafloor.reference.seeded_bugs import DATA_PLANE, SEEDED_BUGS, TABLE_ONLY, SeededBug
from swafloor.reference.show import bounded, one_line

from ..protocol import DEFAULT_PARTS, BackendRecord, Comparison, Operation, Part, UnknownBackend, declaration_of

__all__ = ["REGISTRY", "DATAPLANE", "MUTANT_NAMES", "DATA_MUTANT_NAMES", "DATAPLANE_PREFIX", "Registered",
           "UnknownBackend", "BackendRecord", "ResolvedBackend", "resolve", "names", "check_factory", "backend_rows"]


@attrs.frozen
class Registered:
    """A registered backend, declared without importing it: ``target``, the ``MODULE:FUNCTION`` that
    builds it; ``needs``, what must be installed beyond swafloor's own dependencies; ``status``, how
    far it has been checked."""

    target: str
    needs: str = "nothing more"
    status: str = ""



#: The campaigns that run a seeded bug as a backend of its own (``mutant:NAME``); the oracle's seeded
#: bugs of the reference are ``reference-mutant:NAME`` (resolved below).
_AS_BACKEND = (TABLE_ONLY, DATA_PLANE)


def _mutant_status(bug: SeededBug) -> str:
    caught = " and ".join("dataplane:NAME" if c == DATA_PLANE else "its table-only campaign"
                          for c in bug.campaigns if c in _AS_BACKEND)
    return f"a seeded bug: {caught} must catch it"


#: The seeded bugs built as backends (the list in swafloor.reference.seeded_bugs): ``mutant:NAME``,
#: its factory the function of that name (dashes as underscores) in fuzz/backends/mutants.py.
_MUTANTS: dict[str, Registered] = {
    f"mutant:{bug.name}": Registered(f"swafloor.fuzz.backends.mutants:{bug.name.replace('-', '_')}",
                                     status=_mutant_status(bug))
    for bug in SEEDED_BUGS if set(bug.campaigns) & set(_AS_BACKEND)
}

def _in_venv(engine: str, target: str, status: str) -> Registered:
    """A backend of an engine that runs in its own venv (``scripts/ENGINE-venv``), its factory in the
    engine's room; ``status`` naming a test file is how CI fuzzes it there."""
    title = {"vllm": "vLLM", "sglang": "SGLang", "lmdeploy": "LMDeploy", "transformers": "transformers"}[engine]
    if status.startswith("tests/"):
        status = f"fuzzed in CI, in the {title} venv ({status})"
    return Registered(f"swafloor.fuzz.engines.{engine}.{target}", needs=f"{title}, in its own venv (scripts/{engine}-venv)",
                      status=status)


REGISTRY: dict[str, Registered] = {
    "reference": Registered("swafloor.fuzz.backends.reference:reference", status="the specification itself"),
    "core": Registered("swafloor.fuzz.backends.core:core",
                       status="the core manager alone: fuzzed against the reference in CI (default semantics, tests/test_core.py)"),
    "oracle": Registered("swafloor.fuzz.backends.oracle:oracle", status="fuzzed against the reference in CI"),
    "oracle-eviction": Registered("swafloor.fuzz.backends.oracle:oracle_eviction",
                                  status="fuzzed against the reference in CI (eviction intervals, tests/test_eviction_interval.py)"),
    "oracle-load": Registered("swafloor.fuzz.backends.oracle:oracle_load",
                              status="fuzzed against the reference in CI (a first resume's load holding every loaded "
                              "token, tests/test_load_holds_prefix.py)"),
    "oracle-refusal": Registered("swafloor.fuzz.backends.oracle:oracle_refusal",
                                 status="fuzzed against the reference in CI (a refused resize keeps stale blocks, tests/test_refusal.py)"),
    "oracle-growth": Registered("swafloor.fuzz.backends.oracle:oracle_growth",
                                status="fuzzed against the reference in CI (stale blocks freed only by a resize that "
                                "adds a block, tests/test_refusal.py)"),
    "oracle-radix": Registered("swafloor.fuzz.backends.oracle:oracle_radix",
                               status="fuzzed against the reference in CI (SGLang's radix tree: its lock and "
                               "publication, tests/test_radix_layer.py)"),
    "oracle-ring": Registered("swafloor.fuzz.backends.oracle:oracle_ring",
                              status="fuzzed against the reference in CI (sliding windows kept as rings, tests/test_ring.py)"),
    "oracle-sharing": Registered("swafloor.fuzz.backends.oracle:oracle_sharing",
                                 status="fuzzed against the reference in CI (prefix sharing, tests/test_sharing_campaign.py)"),
    "oracle-eagle": Registered("swafloor.fuzz.backends.oracle:oracle_eagle",
                               status="fuzzed against the reference in CI (EAGLE hits, draft slots, tests/test_eagle_campaign.py)"),
    "oracle-mixed": Registered("swafloor.fuzz.backends.oracle:oracle_mixed",
                               status="fuzzed against the reference in CI (block sizes per life cycle, tests/test_block_sizes.py)"),
    **_MUTANTS,
    "vllm": _in_venv("vllm", "backend:vllm", "tests/test_vllm.py"),
    "vllm-async": _in_venv("vllm", "backend:vllm_async", "tests/test_vllm.py"),
    "vllm-prefix": _in_venv("vllm", "prefix:vllm_prefix", "tests/test_vllm_prefix.py"),
    "vllm-prefix-eagle": _in_venv("vllm", "prefix:vllm_prefix_eagle", "tests/test_vllm_prefix.py"),
    "vllm-prefix-mixed": _in_venv("vllm", "prefix:vllm_prefix_mixed", "tests/test_vllm_prefix.py"),
    "vllm-prefix-eagle-mixed": _in_venv("vllm", "prefix:vllm_prefix_eagle_mixed",
                                        "diverges on the pinned release (semantics not modelled yet); CI replays "
                                        "tests/regressions/vllm-prefix-eagle-mixed-cache-past-boundary.json"),
    "vllm-admission": _in_venv("vllm", "admission:vllm_admission", "tests/test_vllm_admission.py"),
    "vllm-prefix-any-window": _in_venv("vllm", "prefix:vllm_prefix_any_window",
                                       "replays the trace that pins why vllm-prefix refuses a window of 1"),
    "sglang": _in_venv("sglang", "backend:sglang", "tests/test_sglang.py"),
    "sglang-lazy": _in_venv("sglang", "backend:sglang_lazy", "tests/test_sglang.py"),
    "sglang-radix": _in_venv("sglang", "radix:sglang_radix", "tests/test_sglang_radix.py"),
    "sglang-admission": _in_venv("sglang", "admission:sglang_admission", "tests/test_sglang_admission.py"),
    "sglang-eagle": _in_venv("sglang", "eagle:sglang_eagle", "tests/test_sglang_pages.py"),
    "sglang-eagle-v1": _in_venv("sglang", "eagle_v1:sglang_eagle_v1",
                                "0.5.7's default EAGLE worker (v1): tests/test_sglang_eagle_v1.py"),
    "lmdeploy": _in_venv("lmdeploy", "backend:lmdeploy",
                         "fuzzed in CI, in the LMDeploy venv (tests/test_lmdeploy.py): its ci campaign diverges, in a "
                         "class with a verdict (docs/lmdeploy.md)"),
    "transformers-cb": _in_venv("transformers", "backend:transformers_cb", "tests/test_transformers_cb.py"),
    "vllm-no-reuse": _in_venv("vllm", "backend:vllm_no_reuse", "run by swafloor matrix vllm on older releases"),
    "trtllm": Registered("swafloor.fuzz.engines.trtllm.backend:trtllm", needs="tensorrt_llm and a CUDA GPU",
                         status="never run on a GPU"),
    "trtllm-v2": Registered("swafloor.fuzz.engines.trtllm.v2:trtllm_v2",
                            needs="a KVCacheManagerV2 source folder (--trtllm-source PATH) and cuda-bindings",
                            status="plumbing fuzzed in CI against a fake manager (tests/test_trtllm_v2_backend.py); "
                                   "run on upstream's assembled sources, pre-fix and post-fix, 2026-12-04 "
                                   "(docs/trtllm.md; swafloor check trtllm --whole)"),
    "trtllm-v2-reference-quota": Registered(
        "swafloor.fuzz.engines.trtllm.v2:trtllm_v2_reference_quota",
        needs="a KVCacheManagerV2 source folder (--trtllm-source PATH) and cuda-bindings",
        status="trtllm-v2 on configs without slots of their own; run on upstream's assembled sources 2026-12-04"),
}
#: ``dataplane:NAME``: any registered NAME, wrapped (:func:`swafloor.fuzz.engines.dataplane.wrap`).
DATAPLANE = Registered("swafloor.fuzz.engines.dataplane:wrap", needs="torch (swafloor[dataplane]); CUDA optional",
                       status="run on the CPU in CI; never run on a GPU")

#: Seeded bugs a table-only campaign catches (``swafloor fuzz --backend mutant:NAME``).
MUTANT_NAMES = tuple(f"mutant:{bug.name}" for bug in SEEDED_BUGS if TABLE_ONLY in bug.campaigns)
#: Seeded bugs only the data plane (``dataplane:NAME``, which wraps any backend here) can catch (none
#: since physical identity is compared: a shared slot fails the ``slots`` part at the step).
DATA_MUTANT_NAMES = tuple(f"mutant:{bug.name}" for bug in SEEDED_BUGS if bug.campaigns == (DATA_PLANE,))
DATAPLANE_PREFIX = "dataplane:"

#: The record's former name.
ResolvedBackend = BackendRecord


def names() -> tuple[str, ...]:
    """Registered names; any of them may also be wrapped as ``dataplane:NAME``."""
    return tuple(REGISTRY)


_BACKEND_METHODS = ("observe",)  # besides the operations a backend's capabilities declare


def _checked_factory(factory: Any, field: str, spec: str, caps: Any):
    """``factory`` wrapped so that what it returns is checked to be a backend: a spec naming a
    callable that is no backend factory (``builtins:print``, a manager class) is then a clean
    :class:`UnknownBackend` naming it, not an AttributeError later. What the factory declares is on
    the record, not on this wrapper."""
    required = tuple(op.value for op in Operation if op in caps.operations) + _BACKEND_METHODS

    def build(config):
        backend = factory(config)
        missing = [name for name in required if not callable(getattr(backend, name, None))]
        if missing:
            raise UnknownBackend(
                field, spec, f"is not a backend factory: it returned {bounded(type(backend).__name__, 40)}, "
                f"which lacks {', '.join(missing)}"
            )
        return backend

    build.__wrapped__ = factory
    return build


def resolve(spec: str, field: str = "backend", *, allow_import: bool = True,
            device: str | None = None) -> BackendRecord:
    """Resolve a registered name, ``dataplane:NAME`` or ``MODULE:FACTORY`` to its record; raises
    :class:`UnknownBackend`.

    ``allow_import=False`` (names read from a trace file) accepts registered names only, so a file
    cannot make swafloor import a module of its choosing; ``MODULE:FACTORY`` is for the command line.
    ``device``: a data-plane wrapper's device (``auto``, ``cpu``, ``cuda``; default ``SWAFLOOR_DEVICE``)."""

    if not isinstance(spec, str) or not spec:
        raise UnknownBackend(field, spec, "must be a backend name or MODULE:FACTORY")
    if len(spec) > 200 or not spec.isprintable():
        raise UnknownBackend(field, spec, "is not a backend name (too long or not printable)")
    if spec.startswith(DATAPLANE_PREFIX):  # a wrapper around the backend named after the prefix
        if not allow_import and spec[len(DATAPLANE_PREFIX):] not in REGISTRY:
            raise UnknownBackend(field, spec, _ONLY_REGISTERED)
        return _dataplane(spec, field, device)
    if spec.startswith("reference-mutant:"):  # a seeded bug of the reference (.reference_mutants)
        from .reference_mutants import resolve_mutant

        return resolve_mutant(spec, field)
    if spec not in REGISTRY and not allow_import:
        raise UnknownBackend(field, spec, _ONLY_REGISTERED)
    registered = REGISTRY.get(spec)
    target = spec if registered is None else registered.target
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UnknownBackend(field, spec, f"not a registered backend ({', '.join(REGISTRY)}) nor MODULE:FACTORY")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise UnknownBackend(field, spec, f"{bounded(module_name, 60)} is not an absolute module name (a.b.c)")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise UnknownBackend(field, spec, f"{bounded(attr, 60)} is not an attribute name")
    try:
        module = _import_user_module(module_name) if registered is None else importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownBackend(field, spec, f"cannot import module {module_name!r}: {one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the module's own code failed while importing
        raise UnknownBackend(field, spec, f"importing {module_name!r} failed: {type(exc).__name__}: {one_line(exc)}") from None
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise UnknownBackend(field, spec, f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise UnknownBackend(field, spec, "is not callable (a factory takes a Config and returns a Backend)")
    try:
        declared = declaration_of(obj)
    except TypeError as exc:
        raise UnknownBackend(field, spec, one_line(exc)) from None
    extra = {} if registered is None else {"needs": registered.needs, "status": registered.status}
    return BackendRecord(spec, _checked_factory(obj, field, spec, declared.capabilities), declared.capabilities,
                         declared.prepare, declared.limits, declared.label, declared.event_order, **extra)


def _import_user_module(module_name: str):
    """Import a ``MODULE`` named on the command line as ``python -m`` would find it: when it is not
    importable and the current folder is not on ``sys.path`` (the ``swafloor`` console script and
    ``pytest`` leave it off), look there too, last, so a module there never shadows an installed one."""
    import os
    import sys

    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        here = os.getcwd()
        if exc.name != top or any(os.path.abspath(p or ".") == here for p in sys.path):
            raise
        sys.path.append(here)
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


def _dataplane(spec: str, field: str, device: str | None) -> BackendRecord:
    """``dataplane:NAME``: the record NAME resolves to, wrapped on the chosen device."""
    # The data plane's room, by the name its entry gives (the core imports no room by an import statement).
    dataplane = importlib.import_module(DATAPLANE.target.partition(":")[0])
    DEVICES, choose_device, device_from_env, wrap = (  # noqa: N806
        dataplane.DEVICES, dataplane.choose_device, dataplane.device_from_env, dataplane.wrap)

    inner_spec = spec[len(DATAPLANE_PREFIX):]
    if not inner_spec:
        raise UnknownBackend(field, spec, "names no backend to wrap (dataplane:NAME)")
    requested = device_from_env() if device is None else device
    if requested not in DEVICES:
        raise UnknownBackend("device", requested, f"must be one of {', '.join(DEVICES)}")
    inner = resolve(inner_spec, field)
    chosen = choose_device(requested, field, spec)
    return attrs.evolve(wrap(inner, chosen, name=spec), needs=DATAPLANE.needs, status=DATAPLANE.status)


def check_factory(resolved: BackendRecord) -> None:
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


def backend_rows() -> list[dict[str, str]]:
    """One row per registered name, and one for the ``dataplane:NAME`` wrappers: what it compares
    (the parts it shows, each ``exact`` or ``at-least``; a differential of one decision, such as
    ``vllm-admission``, says what instead: its ``kind`` is ``differential``, run by ``swafloor matrix``
    and its own module, not ``swafloor fuzz``), what it needs installed, its status; the
    docs' backend table is made from these. Imports each backend's module (not the peer it drives)."""
    rows = []
    for name, registered in REGISTRY.items():
        module, _, attr = registered.target.partition(":")
        built = getattr(importlib.import_module(module), attr)
        caps = declaration_of(built).capabilities
        modes = caps.observations
        exact = all(m is Comparison.EXACT for m in modes.values())
        if isinstance(getattr(built, "compares", None), str):  # a differential of one decision, not a campaign
            compares = built.compares
        elif set(modes) == set(Part) and exact:
            compares = "every part, exact (physical identity included)"
        elif set(modes) == DEFAULT_PARTS and exact:
            compares = "every part, exact (no slot ids: physical identity not compared)"
        else:
            compares = ", ".join(f"{p.value} {m.value}" for p, m in modes.items())
        rows.append({"name": name, "factory": registered.target, "compares": compares,
                     "needs": registered.needs, "status": registered.status,
                     "kind": "differential" if callable(getattr(built, "differential", None)) else "campaign"})
    rows.append({"name": "dataplane:NAME", "factory": DATAPLANE.target, "kind": "campaign",
                 "compares": "NAME's outcome (at-least where NAME can close requests, else exact), lengths and "
                             "errors; data[...]: attention outputs through its block tables. In the engine's own "
                             "order instead: NAME's own comparison where its room declares an EventOrder (vLLM's "
                             "prefix backends); the outcome, at least, where NAME's engine has a driver (sglang, "
                             "sglang-lazy, trtllm-v2); read[...]/write[...]: each read of a step against the ledger",
                 "needs": DATAPLANE.needs, "status": DATAPLANE.status})
    return rows
