"""What differs between vLLM releases, found by inspection: the ``vllm`` backends drive every release
whose v1 KV-cache manager has a sliding-window manager (``SlidingWindowSpec``, 0.8.3 on).

Nothing here reads a version string to decide anything (the version is only quoted in messages).
Each difference is detected from what the release has:

- importing: ``vllm`` is imported as a bare package (its ``__init__``, which imports the whole engine
  in some releases, never runs): the v1 block-manager modules are pure Python and need none of it.
  While they import, a model config name that transformers already ships may be registered again
  (older releases register their own ``aimv2``); where triton is missing, torch's compiler stack is
  imported first (older releases put a stand-in ``triton`` in sys.modules, which breaks a newer
  torch). A module missing from this environment raises :class:`MissingModule` naming it.
- constructors (``KVCacheManager``, ``Request``, the spec dataclasses, ``KVCacheConfig``): each is
  called with the arguments its signature names, from the values the adapter knows (a parameter
  renamed across releases, such as ``max_num_batched_tokens`` and ``max_in_flight_tokens``, is
  known under each name); a required parameter the adapter cannot give raises :class:`Unsupported`
  naming it.
- a step (``allocate_slots``): ``num_new_tokens`` or (older) ``num_tokens``, passed positionally.
- a resume with reused history: through ``num_external_computed_tokens`` (the KV-connector load path)
  where ``allocate_slots`` has it; before that, the way schedulers of those releases loaded external
  tokens: as new tokens of a request with nothing computed.
- the free with nothing to allocate: ``KVCacheManager.remove_skipped_blocks``, else the coordinator's,
  else (one group, no coordinator) the specialized manager's, whose freed blocks go back to the pool.
- tokens in flight: a release whose ``Request`` has ``num_in_flight_tokens`` frees on the processed
  history; an older one with an asynchronous scheduler is told nothing of the tokens in flight (the
  attribute the adapter sets is ignored) and frees on the scheduled history, as it then did;
  ``vllm-async`` is :class:`Unsupported` on a release without asynchronous scheduling.
- prefix caching: a ``Request`` that takes vLLM's block hasher (0.10.2 on) hashes its own blocks;
  before that the manager hashes them (``req_to_block_hashes``, dropped by ``free_block_hashes`` when
  the request finishes), with a hash that is a named tuple (its ``hash_value``), read as such.
- observation: releases without a coordinator (one group) get a read-only ``coordinator.get_blocks``
  view of the manager's own per-request block list, and blocks without ``is_null`` are told apart by
  identity with the pool's null block, so the backend reads every release the same way.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import re
import sys
import types
from typing import Any, Callable

from ...protocol import Unsupported

from ..common import MissingModule, arguments, brief, configs_registered_once, missing_module, parameters

__all__ = ["MissingModule", "import_vllm", "check_in_flight", "Release", "release_of", "version", "adopts_hit_alone"]


def version() -> str:
    """The installed vLLM's version, for messages only (nothing is decided on it)."""
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "?"


#: What the adapter takes from vLLM: each name and the module it is imported from.
_PARTS = {
    "SamplingParams": "vllm.sampling_params", "KVCacheManager": "vllm.v1.core.kv_cache_manager",
    "FullAttentionSpec": "vllm.v1.kv_cache_interface", "KVCacheConfig": "vllm.v1.kv_cache_interface",
    "KVCacheGroupSpec": "vllm.v1.kv_cache_interface", "SlidingWindowSpec": "vllm.v1.kv_cache_interface",
    "Request": "vllm.v1.request", "RequestStatus": "vllm.v1.request",
}


def _import_parts() -> dict[str, Any]:
    return {name: getattr(importlib.import_module(module), name) for name, module in _PARTS.items()}


def _bare_package() -> None:
    """Put ``vllm`` in sys.modules as a package whose ``__init__`` never runs."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'vllm'", name="vllm")
    package = types.ModuleType("vllm")
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    package.__package__ = "vllm"
    package.__spec__ = importlib.util.spec_from_file_location(
        "vllm", spec.origin, submodule_search_locations=package.__path__
    )
    sys.modules["vllm"] = package


def import_vllm() -> dict[str, Any]:
    """Import the parts of vLLM the backend uses, as described in the module docstring: the v1
    block-manager modules only, never the package's ``__init__`` (which imports the whole engine in
    some releases)."""
    import torch

    if importlib.util.find_spec("vllm") is None:
        raise Unsupported("vLLM is not importable here; run the vLLM backend in the venv made by scripts/vllm-venv")
    if _failed:  # an import that failed once fails the same way (it may have left stand-ins behind)
        raise _failed[0]
    if "triton" not in sys.modules and importlib.util.find_spec("triton") is None:
        # Some releases put a stand-in ``triton`` module in sys.modules when triton is missing (and
        # compile a function at import); a newer torch importing its compiler stack after that takes
        # the stand-in for the real one and fails. Imported first, torch decides without it.
        import torch._dynamo  # noqa: F401
        import torch._dynamo.repro.after_dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    if "vllm" not in sys.modules:
        _bare_package()
    try:
        with configs_registered_once():
            parts = _import_parts()
    except ImportError as exc:
        _failed.append(missing_module(exc, "vllm", f"vLLM {version()}") or Unsupported(f"vLLM {version()} does not import here: {brief(exc)}"))
        raise _failed[0] from exc
    except Exception as exc:  # noqa: BLE001 - a release that does not import on this path
        wanted = re.search(r'requires "([A-Za-z_][A-Za-z0-9_]*)" to be installed', str(exc))  # a library's own check
        _failed.append(MissingModule(wanted.group(1), f"vLLM {version()} needs the module {wanted.group(1)!r}, not "
                                     f"installed here ({brief(exc, 120)})") if wanted
                       else Unsupported(f"vLLM {version()} does not import here: {brief(exc)}"))
        raise _failed[0] from exc
    return {**parts, "dtype": torch.float16}


_failed: list[Unsupported] = []


# ----------------------------------------------------------------------------- calls, by signature
def _arguments(fn: Callable[..., Any], known: dict[str, Any], what: str) -> dict[str, Any]:
    """The keyword arguments for ``fn`` from ``known`` (:func:`~swafloor.fuzz.engines.common.arguments`)."""
    return arguments(fn, known, f"vLLM {version()}'s {what}")


def check_in_flight(v: dict[str, Any]) -> None:
    """Raise :class:`Unsupported` unless this release schedules asynchronously (tokens in flight): its
    ``Request`` has ``num_in_flight_tokens`` (the manager frees on the processed history), or it has an
    asynchronous scheduler (``vllm.v1.core.sched.async_scheduler``) whose manager is told nothing of the
    tokens in flight and frees on the scheduled history, as it then did."""
    release = release_of(v)
    if not release.in_flight and importlib.util.find_spec("vllm.v1.core.sched.async_scheduler") is None:
        raise Unsupported(f"vLLM {version()} has no asynchronous scheduling (no vllm.v1.core.sched.async_scheduler, "
                          "no Request.num_in_flight_tokens)")


def adopts_hit_alone(allocate_slots: Callable[..., Any]) -> bool:
    """Whether this ``allocate_slots`` accepts a step with no new token and no externally loaded token
    that adopts computed (hit) tokens alone, read from its source: its refusal of an empty step (the
    first ``raise ValueError``) is guarded by a condition that names ``num_new_computed_tokens``. Where
    the refusal ignores the hit (0.11.2-0.30.0: "num_new_tokens must be greater than 0 ...") or the
    source cannot be read, False: the adapter then never asks such a step (see
    :class:`~.prefix.VllmPrefixBackend`)."""
    try:
        source = inspect.getsource(allocate_slots)
    except (OSError, TypeError):
        return False
    head, found, _ = source.partition("raise ValueError")
    if not found:
        return False
    guards = list(re.finditer(r"\bif\b", head))
    return bool(guards) and "num_new_computed_tokens" in head[guards[-1].start():]


def _asserts_one_group(init: Callable[..., Any]) -> bool:
    """Whether this ``KVCacheManager.__init__`` asserts one KV-cache group, read from its source (an
    ``assert`` on ``len(...kv_cache_groups) == 1``); a source that cannot be read: False."""
    try:
        source = inspect.getsource(init)
    except (OSError, TypeError):
        return False
    return re.search(r"assert\s+len\([\w.]*kv_cache_groups\)\s*==\s*1", source) is not None


def release_of(v: dict[str, Any]) -> "Release":
    """The :class:`Release` of the loaded vLLM (inspected once per process)."""
    if "release" not in v:
        v["release"] = Release(v)
    return v["release"]


class _OneGroupCoordinator:
    """A read-only view, for a manager without a coordinator (one KV-cache group): its blocks."""

    def __init__(self, manager: Any):
        self._manager = manager

    def get_blocks(self, request_id: str) -> tuple[list[Any], ...]:
        return (list(self._manager.req_to_blocks.get(request_id) or []),)


class Release:
    """The loaded release's constructors and calls, adapted by inspection."""

    def __init__(self, v: dict[str, Any]):
        self.v = v
        self.version = version()
        manager_class = v["KVCacheManager"]
        allocate = parameters(manager_class.allocate_slots)
        names = list(allocate)
        if not names or names[0] != "request" or len(names) < 2:
            raise Unsupported(f"vLLM {self.version}'s allocate_slots takes ({', '.join(names)}), not (request, tokens, ...)")
        #: the KV-connector load path (num_external_computed_tokens) exists
        self.external_load = "num_external_computed_tokens" in allocate
        #: allocate_slots takes a hit's tokens beside its blocks (num_new_computed_tokens, 0.9 on); before,
        #: it reads them from the blocks (``len(new_computed_blocks) * block_size``)
        self.hit_tokens_given = "num_new_computed_tokens" in allocate
        #: the manager serves one KV-cache group only (0.8.x: its constructor asserts it), read from its source
        self.one_group = _asserts_one_group(manager_class.__init__)
        probe = self.request("probe", 1, 1)
        #: the manager frees on the processed history given tokens in flight
        self.in_flight = hasattr(probe, "num_in_flight_tokens")
        #: allocate_slots adopts a local hit in a step that computes no token and loads none (0.31.0 on)
        self.adopts_hit_alone = adopts_hit_alone(manager_class.allocate_slots)
        #: the manager hashes each request's blocks itself, in ``req_to_block_hashes`` (its
        #: ``free_block_hashes`` drops them when the request finishes): its ``Request`` takes no block hasher
        self.manager_hashes = ("block_hasher" not in parameters(v["Request"])
                               and callable(getattr(manager_class, "free_block_hashes", None)))

    # -------------------------------------------------------------- construction
    def _spec(self, cls: Any, t: int, window: int | None) -> Any:
        known = dict(block_size=t, num_kv_heads=1, head_size=1, dtype=self.v["dtype"], use_mla=False)
        if window is not None:
            known["sliding_window"] = window
        return cls(**_arguments(cls, known, cls.__name__))

    def manager(self, t: int, windows: list[int | None], num_blocks: int, *, max_model_len: int, in_flight: int,
                caching: bool = False, eagle: bool = False, block_sizes: list[int] | None = None) -> Any:
        """A ``KVCacheManager`` with prefix caching off (``caching``: on): one group per window (None: full
        attention), every group drawn from one pool of ``num_blocks`` blocks; ``eagle``: ``use_eagle=True``
        (a release without it raises :class:`Unsupported`). ``block_sizes``: each group's own block size
        (default ``t`` for all); ``t`` is then the hash block size (it must divide each) and the
        scheduler's block size their lcm, as vLLM's hybrid models set them."""
        v = self.v
        sizes = [t] * len(windows) if block_sizes is None else list(block_sizes)
        groups = []
        for i, (window, size) in enumerate(zip(windows, sizes)):
            spec = self._spec(v["SlidingWindowSpec"] if window is not None else v["FullAttentionSpec"], size, window)
            groups.append(v["KVCacheGroupSpec"](**_arguments(
                v["KVCacheGroupSpec"], dict(layer_names=[f"layer.{i}"], kv_cache_spec=spec), "KVCacheGroupSpec")))
        config = v["KVCacheConfig"](**_arguments(v["KVCacheConfig"], dict(
            num_blocks=num_blocks, kv_cache_tensors=[], tensors={}, kv_cache_groups=groups), "KVCacheConfig"))
        manager_class = v["KVCacheManager"]
        tokens = max(1, in_flight)  # sizes only vLLM's admission cap, never used here
        known = dict(
            kv_cache_config=config, max_model_len=max_model_len, enable_caching=caching,
            scheduler_block_size=math.lcm(*sizes) if sizes else t, hash_block_size=t, max_in_flight_tokens=tokens, max_num_batched_tokens=tokens,
        )
        params = parameters(manager_class.__init__)
        if eagle:
            if "use_eagle" not in params:
                raise Unsupported(f"vLLM {self.version}'s KVCacheManager has no use_eagle")
            known["use_eagle"] = True
        if "enable_caching" not in params:
            raise Unsupported(f"vLLM {self.version}'s KVCacheManager has no enable_caching: prefix caching cannot be turned off")
        # An exception raised inside vLLM's own constructor (an AssertionError on this config, say) is
        # not a missing piece: it propagates, and the build diverges with its input (before issue 28 it
        # was called Unsupported and the config discarded, 40% of 0.8.5.post1's examples).
        manager = manager_class(**_arguments(manager_class.__init__, known, "KVCacheManager"))
        if not hasattr(manager, "coordinator"):
            manager.coordinator = _OneGroupCoordinator(manager)
        null = manager.block_pool.null_block
        block_class = type(null)
        if not hasattr(block_class, "is_null"):  # a release whose blocks cannot tell: mark the class once ...
            block_class.is_null = False
            block_class._swafloor_is_null = True
        if getattr(block_class, "_swafloor_is_null", False):  # ... and each pool's own null block
            null.is_null = True
        return manager

    def request(self, request_id: str, prompt_tokens: int | list[int], max_tokens: int, block_hasher: Any = None) -> Any:
        """A waiting ``Request`` of ``prompt_tokens`` tokens (a count: all 0; or the token ids);
        ``block_hasher``: the prefix cache's (a release whose requests take none refuses it)."""
        v = self.v
        sampling = v["SamplingParams"](max_tokens=max_tokens)
        tokens = [0] * prompt_tokens if isinstance(prompt_tokens, int) else list(prompt_tokens)
        if block_hasher is not None and "block_hasher" not in parameters(v["Request"]):
            raise Unsupported(f"vLLM {self.version}'s Request takes no block_hasher (it hashes inside its manager)")
        known = dict(
            block_hasher=block_hasher,
            request_id=request_id, prompt_token_ids=tokens, sampling_params=sampling, pooling_params=None,
            eos_token_id=None, arrival_time=0.0, prompt=None, multi_modal_inputs=None, multi_modal_hashes=None,
            multi_modal_placeholders=None, mm_features=None, mm_inputs=None, mm_hashes=None, mm_positions=None,
            lora_request=None, client_index=0,
        )
        return v["Request"](**_arguments(v["Request"], known, "Request"))

    # -------------------------------------------------------------- calls
    @staticmethod
    def allocate(manager: Any, request: Any, new_tokens: int, drafts: int = 0) -> Any:
        """A scheduled step of ``new_tokens`` (None: they do not fit); ``drafts`` of them are lookahead
        slots (``num_lookahead_tokens``), the rest scheduled tokens."""
        if drafts:
            return manager.allocate_slots(request, new_tokens - drafts, num_lookahead_tokens=drafts)
        return manager.allocate_slots(request, new_tokens)

    def load(self, manager: Any, request: Any, new_tokens: int, loaded: int) -> Any:
        """A waiting request's first step: ``loaded`` tokens held by a KV connector, ``new_tokens`` to
        compute; the request's computed tokens are 0 when called."""
        if self.external_load:
            return manager.allocate_slots(request, new_tokens, num_external_computed_tokens=loaded)
        return manager.allocate_slots(request, new_tokens + loaded)

    @staticmethod
    def remove_skipped(manager: Any, request: Any, computed: int) -> None:
        """The free that precedes every allocation, alone (a step with nothing to allocate)."""
        if hasattr(manager, "remove_skipped_blocks"):
            params = parameters(manager.remove_skipped_blocks)
            extra = {"num_prompt_tokens": request.num_prompt_tokens} if "num_prompt_tokens" in params else {}
            manager.remove_skipped_blocks(request.request_id, computed, **extra)
        elif hasattr(manager.coordinator, "remove_skipped_blocks"):
            manager.coordinator.remove_skipped_blocks(request.request_id, computed)
        else:
            blocks = manager.req_to_blocks[request.request_id]
            manager.block_pool.free_blocks(manager.specialized_manager.remove_skipped_blocks(blocks, computed))
