"""What the engines' rooms share: loading an engine's own modules across its releases, calling what
it finds by signature, and the capabilities of an adapter that reads an engine's own block tables.
Engine-neutral; vLLM's and SGLang's rooms use it.

- :class:`MissingModule`: the engine's import needs a module this environment lacks (the release
  matrix then adds it beside the release: :mod:`swafloor.fuzz.matrix`).
- :func:`missing_module`: that error for an ImportError naming a module outside the engine's package.
- :func:`configs_registered_once`: while an engine imports, a model config name transformers already
  ships is kept (older releases register their own copy of one).
- :func:`parameters` and :func:`arguments`: a callable's named parameters, and the keyword arguments
  an adapter can give it from what it knows (a required one it cannot give is :class:`Unsupported`).
- :func:`open_request`: an adapter's open request by id, or the typed error naming the field.
- :func:`engine_table_capabilities`: what an adapter reading an engine's block tables and slot ids
  shows and how it is driven, with what differs per engine given.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Hashable

from swafloor.reference import LifeCycleKind, RequestError, RequestState

from ..protocol import Capabilities, Operation, Part, Unsupported

__all__ = ["MissingModule", "missing_module", "brief", "configs_registered_once", "parameters", "arguments",
           "engine_table_capabilities", "open_request"]


class MissingModule(Unsupported):
    """The engine's import needs a module this environment lacks; ``module`` names it."""

    def __init__(self, module: str, message: str):
        self.module = module
        super().__init__(message)


def brief(exc: BaseException, limit: int = 200) -> str:
    """An exception as one line of at most ``limit`` characters."""
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def missing_module(exc: ImportError, package: str, engine: str) -> MissingModule | None:
    """The :class:`MissingModule` an ImportError means when it names a module outside ``package`` (the
    engine's own: a module of it missing is the release's shape, not the environment's); else None.
    ``engine``: the engine and its version, for the message (``vLLM 0.33.0``)."""
    name = getattr(exc, "name", None)
    if isinstance(exc, ModuleNotFoundError) and name and name.split(".")[0] != package:
        return MissingModule(name.split(".")[0], f"{engine} needs the module {name!r}, not installed here")
    return None


@contextlib.contextmanager
def configs_registered_once():
    """While an engine imports: a model config name that transformers already ships is kept (older
    releases register their own copy of one, e.g. ``aimv2``, which a newer transformers refuses)."""
    try:
        from transformers import AutoConfig
    except Exception:  # noqa: BLE001 - no transformers: nothing to adapt
        yield
        return
    original = AutoConfig.__dict__.get("register")
    if original is None:
        yield
        return
    register = original.__func__ if isinstance(original, staticmethod) else original

    def tolerant(*args, **kwargs):
        kwargs["exist_ok"] = True
        return register(*args, **kwargs)

    AutoConfig.register = staticmethod(tolerant)
    try:
        yield
    finally:
        AutoConfig.register = original


def parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """``fn``'s named parameters (``self``, ``*args`` and ``**kwargs`` left out); {} when it has no signature."""
    try:
        params = dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}
    params.pop("self", None)
    return {n: p for n, p in params.items() if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}


def arguments(fn: Callable[..., Any], known: dict[str, Any], what: str) -> dict[str, Any]:
    """The keyword arguments for ``fn``: every parameter it has that ``known`` names; a required
    parameter ``known`` lacks raises :class:`Unsupported` naming it (``what``: the engine, its version
    and the callable, for the message: ``vLLM 0.33.0's Request``)."""
    chosen = {}
    for name, p in parameters(fn).items():
        if name in known:
            chosen[name] = known[name]
        elif p.default is inspect.Parameter.empty:
            raise Unsupported(f"{what} requires {name!r}, which this adapter cannot give")
    return chosen


def engine_table_capabilities(**differs: Any) -> Capabilities:
    """The capabilities of an adapter that drives an engine's own KV-cache manager as its scheduler
    does and reads its block tables and slot ids (vLLM's, SGLang's): every operation; the outcome,
    pool usage, tables and physical identity compared exactly (the engine returns no shortfall detail
    and validates no misuse: its scheduler never misuses it); pool totals (what the adapter built the
    pool with) and lengths (the engine keeps no capacity) set by the adapter, never compared; SWA and
    full attention layers without sink tokens; any pool size served (no floor of the engine's own); the
    computed tokens committed before the next allocation; no table ever shrunk. ``differs``: the rest
    (``semantics``, pool groups, reused history, ...), as :class:`~swafloor.fuzz.protocol.Capabilities` takes them."""
    return Capabilities(**{
        "operations": [Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.COMMIT, Operation.SUSPEND,
                       Operation.CLOSE],
        "observations": {Part.OUTCOME: "exact", Part.POOL_USED: "exact", Part.TABLES: "exact", Part.SLOTS: "exact"},
        "adapter_set": [Part.POOL_TOTALS, Part.LENGTHS],
        "layer_kinds": [LifeCycleKind.SWA, LifeCycleKind.FULL],
        "sinks": False,
        "legacy_floor": True,
        "commit_before_allocate": True,
        "capacity_cuts": False,
        **differs,
    })


def open_request(requests: dict, request_id: Hashable, states: tuple = ()) -> Any:
    """The open request ``request_id`` of an adapter's ``requests`` (in one of ``states`` when given);
    a typed error naming the field otherwise."""
    req = requests.get(request_id)
    if req is None:
        raise RequestError(request_id, "request_id", request_id, "unknown request")
    if req.state is RequestState.CLOSED:
        raise RequestError(request_id, "state", "closed", "request is closed")
    if states and req.state not in states:
        raise RequestError(request_id, "state", req.state.value, "not allowed in this state")
    return req
