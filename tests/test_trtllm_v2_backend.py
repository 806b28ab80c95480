"""The ``trtllm-v2`` adapter's plumbing, against a fake KVCacheManagerV2 written from upstream's documented
behaviour (tests/trtllm_fake_manager.py): a small campaign against the reference under the semantics
the adapter declares, seeded bugs of the fake caught in the part each breaks, the fake's documented
behaviours checked directly (the seed's deadlock at the pre-fix minimum, the resume gate, the silent
raise to the minimum), and the registered backend refusing to run without a source."""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.engines.trtllm.v2 import CAPABILITIES, adapter_factory
from swafloor.fuzz.protocol import BackendRecord, Unsupported
from swafloor.fuzz.runner import run_campaign
from swafloor.reference import AttentionLayer, Config

from . import trtllm_fake_manager as fake

EXAMPLES = 50  # about 5 s on one core (the reference side takes a third of it)


def record(bugs=(), name="trtllm-v2-fake"):
    build = adapter_factory(fake.module(bugs), name=name)
    return BackendRecord(name, build)


def test_the_fake_against_the_reference_passes():
    result = run_campaign(record(), "reference", examples=EXAMPLES, steps=12, seed=0, out_dir=None)
    assert result.divergence is None, result.divergence and result.divergence.describe()
    assert result.served > EXAMPLES // 2 and result.served_swa > 0 and result.steps > 20 * EXAMPLES


@pytest.mark.parametrize(("bug", "parts"), [
    ("stale-never-freed", {"pool_used"}),
    ("no-rollback", {"lengths"}),
    # a quota below the minimum (the adapter passes the config's own slots) raised to 1 slot per life
    # cycle only: the pools are short right after building
    ("pre-fix-minimum", {"pool_totals"}),
])
def test_a_seeded_bug_of_the_fake_is_caught_in_the_part_it_breaks(bug, parts):
    result = run_campaign(record([bug], name=f"fake:{bug}"), "reference", examples=EXAMPLES, steps=12, seed=0,
                          shrink=False, out_dir=None)
    assert result.divergence is not None, f"{bug} survived {result.examples} examples"
    field = result.divergence.field.split("[")[0]
    assert field in parts, result.divergence.describe()


def _manager(slots, bugs=(), window=4, t=4, max_util=1.0):
    v2 = fake.module(bugs)
    layers = [fake.AttentionLayerConfig(0, [fake.BufferConfig("key", 8), fake.BufferConfig("value", 8)], window),
              fake.AttentionLayerConfig(1, [fake.BufferConfig("key", 16), fake.BufferConfig("value", 16)])]
    sizes = [16 * slots[0], 32 * slots[1]]
    return v2.KVCacheManager(v2.KVCacheManagerConfig(
        tokens_per_block=t, cache_tiers=[v2.GpuCacheTierConfig(sum(sizes))], layers=layers,
        max_util_for_resume=max_util, initial_pool_ratio=[s / sum(sizes) for s in sizes]))


def _decode(kv, steps):
    """Prompt of one token, then decode steps (commit, then resize one further): the capacity whose
    resize fails, None when every step succeeds."""
    assert kv.resume(0) and kv.resize(1)
    for _ in range(steps):
        kv.commit([7])
        if not kv.resize(kv.history_length + 1):
            return kv.history_length + 1
    return None


def test_the_seeds_deadlock_at_the_pre_fix_minimum_and_completion_at_the_floor():
    # W = t = 4 (§10's measured case): one SWA slot deadlocks a lone request at resize(5) (its third
    # decode step after the prompt's first: block 1 needed while block 0 is still in the window [1, 4]);
    # two slots (the post-fix floor) complete.
    pre = _manager([1, 8], bugs=["pre-fix-minimum"])
    assert [s.total for s in pre.get_storage_statistics()] == [1, 8]
    assert _decode(pre.create_kv_cache(id="r"), 20) == 5
    post = _manager([1, 8])
    assert [s.total for s in post.get_storage_statistics()] == [2, 8]  # raised silently to the floor
    assert _decode(post.create_kv_cache(id="r"), 20) is None


def test_a_failed_resize_rolls_back_and_misuse_raises():
    m = _manager([2, 1])  # full attention raised to max(1, SWA floor 2) = 2
    assert [s.total for s in m.get_storage_statistics()] == [2, 2]
    kv = m.create_kv_cache(id="r")
    assert kv.resume(0) and kv.resize(8)
    before = (kv.capacity, kv.history_length, kv.get_base_page_indices(0), kv.get_base_page_indices(1))
    assert kv.resize(9) is False  # full attention needs a third block
    assert (kv.capacity, kv.history_length, kv.get_base_page_indices(0), kv.get_base_page_indices(1)) == before
    with pytest.raises(ValueError):
        kv.resize(4, 5)
    kv.commit([1, 2, 3])
    with pytest.raises(ValueError):
        kv.resize(8, 2)


def test_committed_stale_pages_stay_as_evictable_cache_and_are_dropped_on_demand():
    m = _manager([2, 8])
    kv = m.create_kv_cache(id="r")
    assert kv.resume(0) and kv.resize(8)
    kv.commit(list(range(8)))  # history 8: block 0 (tokens 0..3) is out of the window [5, 8]
    assert kv.get_base_page_indices(0)[0] == -1
    assert m.get_storage_statistics()[0] == fake.PoolGroupStats(total=2, free=0, evictable=1)
    assert kv.resize(9)  # block 2 takes the evictable page
    assert m.get_storage_statistics()[0] == fake.PoolGroupStats(total=2, free=0, evictable=0)


def test_the_resume_gate_refuses_above_max_util_counting_evictable_pages_available():
    # §10: suspended at step 4 with 2 SWA slots and no host tier, the fullest pool is at 1.0 > 0.97.
    m = _manager([2, 8], max_util=0.97)
    kv = m.create_kv_cache(id="r")
    assert kv.resume(0) and kv.resize(1)
    for _ in range(4):
        kv.commit([7])
        assert kv.resize(kv.history_length + 1)
    kv.suspend()
    assert m.get_storage_statistics()[0].free == 0 and m.utilization()[0] == 1.0
    assert kv.resume(0) is False
    other = _manager([2, 8], max_util=0.97)
    kv2 = other.create_kv_cache(id="r")
    assert kv2.resume(0) and kv2.resize(8)
    kv2.commit(list(range(8)))  # one SWA page evictable: use 1/2
    kv2.suspend()
    assert other.utilization()[0] == 0.5 and kv2.resume(0)


def test_the_adapter_declares_what_it_sets_and_refuses_ssm():
    assert "max_util_for_resume=1.0" in " ".join(CAPABILITIES.notes)
    assert CAPABILITIES.commit_before_allocate and not CAPABILITIES.reused_history
    from swafloor.reference import SsmLayer

    with pytest.raises(Unsupported, match="SSM"):
        adapter_factory(fake.module())(Config(4, [AttentionLayer(4), SsmLayer()]))


def test_the_registered_backend_needs_a_source(monkeypatch):
    monkeypatch.delenv("SWAFLOOR_TRTLLM_SOURCE", raising=False)
    rec = resolve("trtllm-v2")
    with pytest.raises(Unsupported, match="--trtllm-source"):
        rec.factory(Config(4, [AttentionLayer(4)]))


def test_the_installed_gpu_backend_is_the_same_adapter_compared_exactly(monkeypatch):
    """``trtllm`` (the installed package on a GPU) drives upstream through the trtllm-v2 adapter and
    compares every part it observes exactly, nothing at-least: run here over the fake manager in place
    of the installed package, a clean campaign passes and a leaked page is a pool_used divergence."""
    from swafloor.fuzz.engines.trtllm import backend

    rec = resolve("trtllm")
    assert rec.capabilities.needs_gpu
    observed = rec.capabilities.observations
    assert set(observed) >= {"outcome", "pool_totals", "pool_used", "lengths", "tables"}
    assert set(observed.values()) == {"exact"}, observed
    for bugs, expected in (((), None), (("stale-never-freed",), "pool_used")):
        monkeypatch.setattr(backend, "require_runtime", lambda bugs=bugs: (fake.module(list(bugs)), 0))
        result = run_campaign(rec, "reference", examples=EXAMPLES // 2, steps=12,
                              seed=0, shrink=False, out_dir=None)
        if expected is None:
            assert result.divergence is None, result.divergence.describe()
        else:
            assert result.divergence is not None and result.divergence.field.split("[")[0] == expected


# --------------------------------------------------------------------------- the whole-package loader
_PACKAGE_INIT = '''
"""A stand-in source folder written for this test: it exports the fake manager's names, logs through
tensorrt_llm.logger (absent here: the loader makes it) and makes driver calls at construction."""
from cuda.bindings import driver
from tensorrt_llm.logger import logger
import tests.trtllm_fake_manager as _fake

BufferConfig = _fake.BufferConfig
AttentionLayerConfig = _fake.AttentionLayerConfig
SsmLayerConfig = _fake.SsmLayerConfig
GpuCacheTierConfig = _fake.GpuCacheTierConfig
KVCacheManagerConfig = _fake.KVCacheManagerConfig


class KVCacheManager(_fake.FakeKVCacheManager):
    def __init__(self, config):
        err, handle = driver.cuMemCreate(2 << 20, None, 0)
        assert int(err) == 0, err
        logger.info("made a physical allocation")
        super().__init__(config)
'''


def _source(tmp_path):
    folder = tmp_path / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True)
    (folder / "__init__.py").write_text(_PACKAGE_INIT)
    (folder / "_life_cycle_registry.py").write_text("")
    (folder / "rawref" / "__init__.py").write_text("NULL = None\n")
    return folder


def test_the_whole_loader_names_cuda_bindings_when_it_is_missing(tmp_path, monkeypatch):
    from swafloor.fuzz.engines.trtllm import cuda_standin, whole
    from swafloor.fuzz.engines.trtllm.loader import LoadError

    monkeypatch.setattr(cuda_standin, "bindings", lambda: None)
    with pytest.raises(LoadError, match="cuda-bindings"):
        whole.load_whole(_source(tmp_path))


def test_the_registered_backend_runs_a_source_folder_on_the_cuda_standin(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings", reason="needs cuda-bindings (not in the CI venv); CI runs the fake directly")
    import sys

    from swafloor.fuzz.engines.trtllm import v2 as v2_backend
    from swafloor.fuzz.engines.trtllm import whole

    source = _source(tmp_path)
    monkeypatch.setenv("SWAFLOOR_TRTLLM_SOURCE", str(source))
    monkeypatch.setenv("SWAFLOOR_CUDA_DRIVER", "standin")
    monkeypatch.setattr(v2_backend, "_LOADED", {})
    try:
        result = run_campaign("trtllm-v2", "reference", examples=10, steps=8, seed=0, out_dir=None)
        assert result.divergence is None, result.divergence and result.divergence.describe()
        assert result.served > 0
        standin = whole.standin_in_use()
        assert standin is not None and standin.calls["cuMemCreate"] >= result.served
    finally:
        if "restore" in whole._STATE:
            whole._STATE.pop("restore")()
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]


def test_the_cli_flag_refuses_bad_input_in_one_line(tmp_path, monkeypatch, capsys):
    from swafloor.cli import main

    monkeypatch.delenv("SWAFLOOR_TRTLLM_SOURCE", raising=False)
    cases = [
        (["fuzz", "--backend", "trtllm-v2"], "needs --trtllm-source"),
        (["fuzz", "--backend", "trtllm-v2", "--trtllm-source", str(tmp_path / "absent")], "not a directory"),
        (["fuzz", "--backend", "oracle", "--trtllm-source", str(tmp_path)], "trtllm-v2 backend only"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
