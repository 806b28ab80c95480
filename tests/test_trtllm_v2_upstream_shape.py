"""What the first run of the ``trtllm-v2`` adapter on upstream's assembled sources (issue 31) needed of
swafloor, held without upstream's sources (CI never has them): the Python-era manager's shape
(statistics and pool groups on its storage manager only, page indices of an active request only),
committed token ids never repeated (upstream shares a block whose tokens another request committed),
every request closed and the manager shut down when a run ends (upstream's destructors otherwise end
the process), a shutdown failure after a divergence not hiding it, and the loader's stand-ins for the
package's absent ``_sequence_arena`` and for the compiled copy kernels."""

from __future__ import annotations

import sys
import types

import pytest

from swafloor.fuzz.engines.trtllm import v2 as v2_backend
from swafloor.fuzz.engines.trtllm.kv_ops import KvCacheOperations
from swafloor.fuzz.engines.trtllm.v2 import _life_cycle_pool_groups, _page_indices, _storage_statistics, adapter_factory
from swafloor.fuzz.lockstep import Lockstep
from swafloor.fuzz.protocol import BackendRecord
from swafloor.fuzz.runner import run_campaign
from swafloor.fuzz.backends import resolve
from swafloor.reference import AttentionLayer, Config

from . import trtllm_fake_manager as fake

NS = types.SimpleNamespace


def test_statistics_and_pool_groups_come_from_the_storage_manager_when_the_manager_has_no_public_ones():
    stats = [NS(total=3, free=1, evictable=1)]
    python_era = NS(_storage=NS(get_statistics=lambda: stats, get_pool_group_index=lambda lc: [0, 1, 0][lc]))
    assert _storage_statistics(python_era) == stats
    assert _life_cycle_pool_groups(python_era, 3) == [0, 1, 0]
    public = NS(get_storage_statistics=lambda: stats, get_life_cycle_pool_group_indices=lambda: (1, 0))
    assert _storage_statistics(public) == stats and _life_cycle_pool_groups(public, 2) == [1, 0]


def test_a_request_not_active_is_read_through_its_held_pages_with_its_stale_blocks_shown_empty():
    def base(_lc):
        raise AssertionError("upstream asserts is_active here")

    manager = NS(_life_cycles=[NS(get_stale_range=lambda h, t: (0, h // t - 1))])
    suspended = NS(is_active=False, history_length=8, tokens_per_block=2, get_base_page_indices=base,
                   get_aggregated_page_indices=lambda lc: iter([5, 6, 7, 8, 9]))
    assert _page_indices(manager, suspended, 0) == [-1, -1, -1, 8, 9]
    active = NS(is_active=True, get_base_page_indices=lambda lc: [-1, 4], get_aggregated_page_indices=None)
    assert _page_indices(manager, active, 0) == [-1, 4]
    faked = NS(get_base_page_indices=lambda lc: [3])  # the tests' fake: no status property, no aggregated
    assert _page_indices(manager, faked, 0) == [3]


def test_committed_token_ids_are_never_repeated_across_requests():
    committed = []

    class Ops(KvCacheOperations):
        def __init__(self):
            self.manager = NS(create_kv_cache=lambda id: NS(commit=committed.append))
            self.stream, self.caches, self.committed = 0, {}, {}

    ops = Ops()
    for rid in ("r0", "r1"):
        ops.create(rid)
    ops.commit("r0", 3)
    ops.commit("r1", 3)
    ops.commit("r0", 2)
    ids = [t for batch in committed for t in batch]
    assert len(ids) == len(set(ids)) == 8
    assert ops.committed == {"r0": 5, "r1": 3}


def test_every_example_closes_its_requests_and_shuts_the_manager_down(monkeypatch):
    shutdowns, open_at_shutdown = [], []
    original = fake.FakeKVCacheManager.shutdown

    def counting(self):
        open_at_shutdown.append(sum(c.status is not fake.CacheStatus.CLOSED for c in self.caches))
        shutdowns.append(self)
        return original(self)

    monkeypatch.setattr(fake.FakeKVCacheManager, "shutdown", counting)
    record = BackendRecord("trtllm-v2-fake", adapter_factory(fake.module()))
    result = run_campaign(record, "reference", examples=15, steps=10, seed=1, out_dir=None)
    assert result.divergence is None, result.divergence and result.divergence.describe()
    assert len(shutdowns) >= result.served > 0
    assert not any(open_at_shutdown)


def test_dispose_is_idempotent_and_a_shutdown_failure_is_returned_not_raised():
    config = Config(tokens_per_block=4, layers=(AttentionLayer(window=4),))
    lock = Lockstep(config, adapter_factory(fake.module()), resolve("reference").factory,
                    v2_backend.CAPABILITIES)
    assert lock.dispose() is None and lock.dispose() is None

    broken = Lockstep(config, adapter_factory(fake.module()), resolve("reference").factory,
                      v2_backend.CAPABILITIES)
    manager = broken.backend.manager

    def fails():
        raise RuntimeError("shrink can't be finished")

    manager.shutdown = fails
    kept = len(v2_backend._UNCOLLECTED)
    assert broken.dispose() == "RuntimeError: shrink can't be finished"
    assert len(v2_backend._UNCOLLECTED) == kept + 1 and v2_backend._UNCOLLECTED[-1][0] is manager
    v2_backend._UNCOLLECTED.pop()


_INIT = '''
from ._sequence_arena import PageBudget, SequenceArena, check_index_width
from tensorrt_llm.bindings.internal.batch_manager.kv_cache_manager_v2_utils import (
    MemToMemTask, copy_device_to_device, copy_host_to_host,
)
import tensorrt_llm.runtime.kv_cache_manager_v2._sequence_arena as arena_module
KVCacheManager = KVCacheManagerConfig = GpuCacheTierConfig = AttentionLayerConfig = BufferConfig = object
'''


def test_the_loader_stands_in_the_absent_sequence_arena_and_the_copy_kernels(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings", reason="needs cuda-bindings")
    import ctypes

    from swafloor.fuzz.engines.trtllm import whole
    from swafloor.fuzz.engines.trtllm.loader import LoadError

    folder = tmp_path / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True)
    (folder / "__init__.py").write_text(_INIT)
    (folder / "_life_cycle_registry.py").write_text("")
    (folder / "rawref" / "__init__.py").write_text("NULL = None\n")
    monkeypatch.setenv("SWAFLOOR_CUDA_DRIVER", "standin")
    try:
        package, _stream = whole.load_whole(folder)
        assert getattr(package.arena_module, "__swafloor_synthetic__", False)
        with pytest.raises(LoadError, match="_sequence_arena.SequenceArena"):
            package.SequenceArena(1, 2)  # a placeholder: called, it names itself
        src, dst = ctypes.create_string_buffer(b"abcd", 4), ctypes.create_string_buffer(4)
        task = package.MemToMemTask(ctypes.addressof(dst), ctypes.addressof(src))
        assert package.copy_host_to_host([task], 4, 0) == 0 and dst.raw == b"abcd"
        assert "tensorrt_llm.runtime.kv_cache_manager_v2._sequence_arena" in whole._STATE["finder"].made
    finally:
        if "restore" in whole._STATE:
            whole._STATE.pop("restore")()
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]


def test_a_sequence_arena_file_in_the_source_is_used_not_stood_in(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings", reason="needs cuda-bindings")
    from swafloor.fuzz.engines.trtllm import whole

    folder = tmp_path / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True)
    (folder / "__init__.py").write_text(_INIT)
    (folder / "_sequence_arena.py").write_text(
        "PageBudget = SequenceArena = 'real'\ndef check_index_width(*a):\n    return None\n")
    (folder / "_life_cycle_registry.py").write_text("")
    (folder / "rawref" / "__init__.py").write_text("NULL = None\n")
    monkeypatch.setenv("SWAFLOOR_CUDA_DRIVER", "standin")
    try:
        package, _stream = whole.load_whole(folder)
        assert package.SequenceArena == "real"
    finally:
        if "restore" in whole._STATE:
            whole._STATE.pop("restore")()
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]


def test_the_reference_quota_variant_leaves_configs_with_slots_of_their_own_unsupported(monkeypatch):
    from swafloor.fuzz.protocol import Unsupported
    from swafloor.reference.config import BelowMinimum

    monkeypatch.delenv("SWAFLOOR_TRTLLM_SOURCE", raising=False)
    own = Config(tokens_per_block=4, layers=(AttentionLayer(window=4),), slots=(1,), below_minimum=BelowMinimum.BUMP)
    with pytest.raises(Unsupported, match="slots of their own"):
        v2_backend.trtllm_v2_reference_quota(own)
    plain = Config(tokens_per_block=4, layers=(AttentionLayer(window=4),))
    with pytest.raises(Unsupported, match="needs a source folder"):  # the same path as trtllm-v2 from here
        v2_backend.trtllm_v2_reference_quota(plain)
    assert resolve("trtllm-v2-reference-quota").name == "trtllm-v2-reference-quota"


def test_the_cli_takes_a_source_for_the_reference_quota_variant_too(tmp_path, monkeypatch, capsys):
    from swafloor.cli import main

    monkeypatch.delenv("SWAFLOOR_TRTLLM_SOURCE", raising=False)
    assert main(["fuzz", "--backend", "trtllm-v2-reference-quota"]) == 2
    assert "needs --trtllm-source" in capsys.readouterr().err
    assert main(["fuzz", "--backend", "trtllm-v2-reference-quota", "--trtllm-source", str(tmp_path / "absent")]) == 2
    assert "not a directory" in capsys.readouterr().err
