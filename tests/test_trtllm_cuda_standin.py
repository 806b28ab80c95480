"""The CPU stand-in for the CUDA driver (fuzz/engines/trtllm/cuda_standin.py): every call it implements, the
memory cap, deferred events, bytes shared through mappings, and the error codes the driver documents.

Run without cuda-bindings (the CI venv has none) on the stand-in's own enum; where cuda-bindings is
importable the same tests run again with its types (``types`` parameter)."""

from __future__ import annotations

import ctypes
import types

import pytest

from swafloor.fuzz.engines.trtllm import cuda_standin as cs
from swafloor.fuzz.engines.trtllm.cuda_standin import CUresult, CudaStandIn

G = cs.GRANULARITY
HAVE_BINDINGS = cs.bindings() is not None
MODES = [False] + ([True] if HAVE_BINDINGS else [])


@pytest.fixture(params=MODES, ids=lambda b: "cuda-bindings" if b else "own-enum")
def use_bindings(request):
    return request.param


def make(use_bindings, **kw):
    return CudaStandIn(use_bindings=use_bindings, **kw)


def code(result) -> int:
    return int(result[0])


OK = 0
INVALID = int(CUresult.CUDA_ERROR_INVALID_VALUE)


def test_results_are_tuples_with_the_result_first(use_bindings):
    d = make(use_bindings)
    for name, args in [("cuCtxGetDevice", ()), ("cuMemGetInfo", ()), ("cuEventCreate", (0,)),
                       ("cuStreamCreate", (0,)), ("cuCtxSynchronize", ()), ("cudaFree", (0,))]:
        out = getattr(d, name)(*args)
        assert isinstance(out, tuple) and code(out) == OK, name
    assert len(d.cuMemGetInfo()) == 3 and len(d.cuCtxSynchronize()) == 1
    if use_bindings:
        from cuda.bindings import driver

        assert isinstance(d.cuMemGetInfo()[0], driver.CUresult)
    else:
        assert d.cuMemGetInfo()[0] is CUresult.CUDA_SUCCESS


def test_every_listed_call_exists_and_the_list_is_the_22_plus_cudafree():
    assert len(cs.DRIVER_CALLS) == 22 and len(set(cs.DRIVER_CALLS)) == 22
    d = CudaStandIn(use_bindings=False)
    assert set(d.functions()) == set(cs.DRIVER_CALLS) | {"cudaFree"}


def test_physical_memory_counts_against_the_cap_and_out_of_memory_is_returned(use_bindings):
    d = make(use_bindings, cap=3 * G)
    assert d.cuMemGetInfo()[1:] == (3 * G, 3 * G)
    err, a = d.cuMemCreate(2 * G, None, 0)
    assert int(err) == OK and d.cuMemGetInfo()[1:] == (G, 3 * G)
    err, b = d.cuMemCreate(2 * G, None, 0)
    assert int(err) == int(CUresult.CUDA_ERROR_OUT_OF_MEMORY) and b is None
    assert code(d.cuMemCreate(G, None, 0)) == OK and d.cuMemGetInfo()[1] == 0
    assert code(d.cuMemRelease(a)) == OK and d.cuMemGetInfo()[1] == 2 * G
    assert code(d.cuMemCreate(2 * G, None, 0)) == OK  # the released bytes are available again
    assert d.peak == 3 * G


def test_allocation_errors_are_codes_not_exceptions(use_bindings):
    d = make(use_bindings)
    assert code(d.cuMemCreate(G + 1, None, 0)) == INVALID  # not a multiple of the granularity
    assert code(d.cuMemCreate(0, None, 0)) == INVALID
    err, a = d.cuMemCreate(G, None, 0)
    assert code(d.cuMemRelease(a)) == OK
    assert code(d.cuMemRelease(a)) == INVALID  # released twice
    assert code(d.cuMemRelease(12345)) == INVALID  # never created
    assert code(d.cuMemRelease("not a handle")) == INVALID


def test_two_mappings_of_one_allocation_share_its_bytes(use_bindings):
    d = make(use_bindings)
    _, handle = d.cuMemCreate(G, None, 0)
    _, va1 = d.cuMemAddressReserve(2 * G, 0, 0, 0)
    _, va2 = d.cuMemAddressReserve(G, 0, 0, 0)
    assert code(d.cuMemMap(int(va1) + G, G, 0, handle, 0)) == OK
    assert code(d.cuMemMap(va2, G, 0, handle, 0)) == OK
    assert code(d.cuMemSetAccess(int(va1) + G, G, ["rw"], 1)) == OK
    assert d.access == [(int(va1) + G, G, ["rw"])]
    d.write(int(va1) + G + 100, b"swafloor")
    assert d.read(int(va2) + 100, 8) == b"swafloor"
    # a host copy from device to host memory, and back to the other mapping
    host = ctypes.create_string_buffer(16)
    assert code(d.copy(ctypes.addressof(host), int(va2) + 100, 8)) == OK
    assert host.raw[:8] == b"swafloor"
    host.raw = b"KVbytes!" + bytes(8)
    assert code(d.copy(int(va2) + 200, ctypes.addressof(host), 8)) == OK
    assert d.read(int(va1) + G + 200, 8) == b"KVbytes!"
    assert code(d.copy(int(va2) + G - 4, int(va2), 8)) == INVALID  # runs past the mapping
    with pytest.raises(ValueError, match="not wholly mapped"):
        d.read(int(va1), 4)  # reserved but unmapped
    with pytest.raises(ValueError, match="not wholly mapped"):
        d.read(int(va1) + G - 4, 8)  # its first half unmapped


def test_a_range_crosses_adjacent_mappings_as_upstreams_larger_slots_do(use_bindings):
    # upstream maps a pool in pieces of physical memory: a slot larger than a piece spans two mappings
    d = make(use_bindings)
    _, first = d.cuMemCreate(G, None, 0)
    _, second = d.cuMemCreate(G, None, 0)
    _, va = d.cuMemAddressReserve(2 * G, 0, 0, 0)
    assert code(d.cuMemMap(va, G, 0, first, 0)) == OK
    assert code(d.cuMemMap(int(va) + G, G, 0, second, 0)) == OK
    d.write(int(va) + G - 3, b"straddle")
    assert d.read(int(va) + G - 3, 8) == b"straddle"
    assert d.read(int(va) + G, 5) == b"addle"
    host = ctypes.create_string_buffer(2 * G)
    assert code(d.copy(ctypes.addressof(host), int(va), 2 * G)) == OK
    assert host.raw[G - 3: G + 5] == b"straddle"
    assert code(d.copy(int(va) + G, int(va), G + 1)) == INVALID  # runs past the second mapping


def test_a_released_allocation_keeps_its_memory_until_its_last_mapping_goes(use_bindings):
    d = make(use_bindings, cap=2 * G)
    _, handle = d.cuMemCreate(2 * G, None, 0)
    _, va = d.cuMemAddressReserve(2 * G, 0, 0, 0)
    assert code(d.cuMemMap(va, 2 * G, 0, handle, 0)) == OK
    assert code(d.cuMemRelease(handle)) == OK
    assert d.cuMemGetInfo()[1] == 0
    d.write(int(va), b"still here")
    assert d.read(int(va), 10) == b"still here"
    assert code(d.cuMemMap(va, G, 0, handle, 0)) == INVALID  # the handle is gone for new mappings
    assert code(d.cuMemUnmap(va, 2 * G)) == OK
    assert d.cuMemGetInfo()[1] == 2 * G
    assert code(d.cuMemAddressFree(va, 2 * G)) == OK


def test_mapping_and_unmapping_errors(use_bindings):
    d = make(use_bindings)
    _, handle = d.cuMemCreate(2 * G, None, 0)
    _, va = d.cuMemAddressReserve(2 * G, 0, 0, 0)
    base = int(va)
    assert code(d.cuMemMap(base + G, 2 * G, 0, handle, 0)) == INVALID  # beyond the reservation
    assert code(d.cuMemMap(base + 4 * G, G, 0, handle, 0)) == INVALID  # outside every reservation
    assert code(d.cuMemMap(base, G, G, handle, 0)) == INVALID  # offset must be 0
    assert code(d.cuMemMap(base, 4 * G, 0, handle, 0)) == INVALID  # larger than the allocation
    assert code(d.cuMemMap(base, G, 0, 999, 0)) == INVALID  # unknown handle
    assert code(d.cuMemUnmap(base, G)) == INVALID  # nothing mapped there
    assert code(d.cuMemSetAccess(base, G, None, 1)) == INVALID  # access on an unmapped range
    assert code(d.cuMemMap(base, G, 0, handle, 0)) == OK
    assert code(d.cuMemMap(base, G, 0, handle, 0)) == INVALID  # overlaps the mapping there
    assert code(d.cuMemUnmap(base, 2 * G)) == INVALID  # runs past the mapping
    assert code(d.cuMemAddressFree(va, 2 * G)) == INVALID  # still mapped
    assert code(d.cuMemAddressFree(va, G)) == INVALID  # not the reserved size
    assert code(d.cuMemUnmap(base, G)) == OK
    assert code(d.cuMemUnmap(base, G)) == INVALID  # unmapped twice
    assert code(d.cuMemAddressFree(va, 2 * G)) == OK
    assert code(d.cuMemAddressFree(va, 2 * G)) == INVALID  # freed twice
    assert code(d.cuMemAddressReserve(G + 3, 0, 0, 0)) == INVALID
    assert code(d.cuMemAddressReserve(G, 3 * G, 0, 0)) == INVALID  # alignment not a power of two


def test_unmap_takes_several_whole_mappings_at_once(use_bindings):
    d = make(use_bindings)
    _, h1 = d.cuMemCreate(G, None, 0)
    _, h2 = d.cuMemCreate(G, None, 0)
    _, va = d.cuMemAddressReserve(2 * G, 0, 0, 0)
    assert code(d.cuMemMap(va, G, 0, h1, 0)) == OK and code(d.cuMemMap(int(va) + G, G, 0, h2, 0)) == OK
    assert code(d.cuMemSetAccess(va, 2 * G, None, 1)) == OK
    assert code(d.cuMemUnmap(va, 2 * G)) == OK and d.mappings == {}


def test_reservations_are_aligned_and_disjoint(use_bindings):
    d = make(use_bindings)
    _, a = d.cuMemAddressReserve(G, 8 * G, 0, 0)
    _, b = d.cuMemAddressReserve(4 * G, 0, 0, 0)
    assert int(a) % (8 * G) == 0 and int(a) >= cs.DEVICE_BASE
    assert int(a) + G < int(b) or int(b) + 4 * G < int(a)


def test_host_register_and_unregister(use_bindings):
    d = make(use_bindings)
    buf = ctypes.create_string_buffer(4096)
    p = ctypes.addressof(buf)
    assert code(d.cuMemHostRegister(p, 4096, 0)) == OK
    assert code(d.cuMemHostRegister(p + 100, 10, 0)) == int(CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    assert code(d.cuMemHostUnregister(p)) == OK
    assert code(d.cuMemHostUnregister(p)) == int(CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
    assert code(d.cuMemHostRegister(0, 10, 0)) == INVALID


def test_events_complete_at_once_without_a_schedule(use_bindings):
    d = make(use_bindings)
    _, s = d.cuStreamCreate(0)
    _, e = d.cuEventCreate(0)
    assert code(d.cuEventQuery(e)) == OK  # never recorded: success, as the driver documents
    assert code(d.cuEventRecord(e, s)) == OK
    assert code(d.cuEventQuery(e)) == OK
    assert code(d.cuStreamWaitEvent(s, e, 0)) == OK
    assert code(d.cuEventSynchronize(e)) == OK and code(d.cuStreamSynchronize(s)) == OK
    assert code(d.cuEventDestroy(e)) == OK and code(d.cuStreamDestroy(s)) == OK
    assert code(d.cuEventDestroy(e)) == int(CUresult.CUDA_ERROR_INVALID_HANDLE)
    assert code(d.cuStreamDestroy(s)) == int(CUresult.CUDA_ERROR_INVALID_HANDLE)
    assert code(d.cuEventQuery(e)) == int(CUresult.CUDA_ERROR_INVALID_HANDLE)
    assert code(d.cuEventRecord(999, 0)) == int(CUresult.CUDA_ERROR_INVALID_HANDLE)
    assert code(d.cuStreamSynchronize(999)) == int(CUresult.CUDA_ERROR_INVALID_HANDLE)


def _polls_until_done(d, e) -> int:
    ready = int(CUresult.CUDA_ERROR_NOT_READY)
    for n in range(100):
        c = code(d.cuEventQuery(e))
        if c == OK:
            return n
        assert c == ready
    raise AssertionError("never completed")


def test_deferred_events_follow_the_seeded_schedule():
    def schedule(seed):
        d = CudaStandIn(use_bindings=False, defer=1.0, max_polls=4, seed=seed)
        _, s = d.cuStreamCreate(0)
        out = []
        for _ in range(12):
            _, e = d.cuEventCreate(0)
            d.cuEventRecord(e, s)
            out.append(_polls_until_done(d, e))
        return out

    a = schedule(7)
    assert a == schedule(7)  # the schedule is the seed's
    assert all(1 <= n <= 4 for n in a) and len(set(a)) > 1  # every one deferred, by varying polls
    assert a != schedule(8)


def test_synchronize_completes_deferred_work_and_stream_order_holds():
    d = CudaStandIn(use_bindings=False, defer=1.0, max_polls=3, seed=1)
    _, s1 = d.cuStreamCreate(0)
    _, s2 = d.cuStreamCreate(0)
    ready = int(CUresult.CUDA_ERROR_NOT_READY)
    events = [d.cuEventCreate(0)[1] for _ in range(4)]
    for e in events[:2]:
        d.cuEventRecord(e, s1)
    assert code(d.cuEventQuery(events[0])) == ready
    assert code(d.cuEventSynchronize(events[1])) == OK
    assert code(d.cuEventQuery(events[0])) == OK  # earlier on its stream: done with it
    d.cuEventRecord(events[2], s1)
    assert code(d.cuStreamWaitEvent(s2, events[2], 0)) == OK
    d.defer = 0.0
    d.cuEventRecord(events[3], s2)  # not deferred itself, but queued after a wait on a pending event
    assert code(d.cuEventQuery(events[2])) == ready
    assert code(d.cuStreamSynchronize(s2)) == OK
    assert code(d.cuEventQuery(events[2])) == OK and code(d.cuEventQuery(events[3])) == OK
    d.defer = 1.0
    d.cuEventRecord(events[0], s1)
    assert code(d.cuCtxSynchronize()) == OK and code(d.cuEventQuery(events[0])) == OK


def test_info_calls_and_error_strings(use_bindings):
    d = make(use_bindings, total_bytes=10 * G)
    err, dev = d.cuCtxGetDevice()
    assert int(err) == OK and int(dev) == 0
    assert d.cuMemGetInfo()[1:] == (10 * G, 10 * G)
    err, text = d.cuGetErrorString(CUresult.CUDA_ERROR_OUT_OF_MEMORY)
    assert int(err) == OK and isinstance(text, bytes) and b"memory" in text
    assert code(d.cuGetErrorString(424242)) == INVALID
    assert int(d.cudaFree(0)[0]) == 0 and int(d.cudaFree(0x1234)[0]) == 1


def test_bad_options_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="CudaStandIn.cap"):
        CudaStandIn(cap=-1)
    with pytest.raises(ValueError, match="CudaStandIn.defer"):
        CudaStandIn(defer=2.0)
    with pytest.raises(ValueError, match="select_driver.prefer"):
        cs.select_driver("gpu")


def test_install_replaces_and_restores_a_modules_calls():
    module = types.SimpleNamespace(cuMemCreate="original", cudaFree="original-free")
    d = CudaStandIn(use_bindings=False)
    restore = cs.install(d, module)
    assert module.cuMemCreate == d.cuMemCreate and module.cuEventQuery == d.cuEventQuery
    assert module.cudaFree == d.cudaFree
    restore()
    assert module.cuMemCreate == "original" and module.cudaFree == "original-free"
    assert not hasattr(module, "cuEventQuery")


def test_the_selector_takes_the_standin_when_asked_or_without_a_device(monkeypatch):
    name, d = cs.select_driver("standin", cap=G)
    assert name == "standin" and isinstance(d, CudaStandIn) and d.cap == G
    monkeypatch.setattr(cs, "device_present", lambda: False)
    assert cs.select_driver("auto")[0] == "standin"
    with pytest.raises(ValueError, match="no CUDA device"):
        cs.select_driver("real")
    monkeypatch.setenv(cs.ENV_VAR, "standin")
    monkeypatch.setattr(cs, "device_present", lambda: True)
    assert cs.select_driver()[0] == "standin"


def test_a_virtual_pool_grown_and_shrunk_chunk_by_chunk_with_the_bindings_argument_types(use_bindings):
    """The call shapes a virtual-memory pool uses (facts: upstream's _cuda_virt_mem reserves once, maps
    one physical chunk at a time at the end, sets access with a one-descriptor tuple, unmaps from the
    end): handles and addresses passed back as the bindings' objects where they are importable."""
    d = make(use_bindings, cap=4 * G)
    wrap = (lambda v: __import__("cuda.bindings.driver", fromlist=["x"]).CUdeviceptr(v)) if use_bindings else int
    _, base = d.cuMemAddressReserve(8 * G, 0, 0, 0)
    handles = []
    for i in range(5):
        err, h = d.cuMemCreate(G, None, 0)
        if int(err) != OK:
            assert int(err) == int(CUresult.CUDA_ERROR_OUT_OF_MEMORY) and i == 4  # the cap: 4 chunks
            break
        handles.append(h)
        ptr = wrap(int(base) + i * G)
        assert code(d.cuMemMap(ptr, G, 0, h, 0)) == OK
        assert code(d.cuMemSetAccess(ptr, G, ("rw",), 1)) == OK
    assert len(handles) == 4 and d.cuMemGetInfo()[1] == 0
    d.write(int(base) + 3 * G + 5, b"tail")
    for i in reversed(range(4)):
        assert code(d.cuMemUnmap(wrap(int(base) + i * G), G)) == OK
        assert code(d.cuMemRelease(handles[i])) == OK
    assert d.cuMemGetInfo()[1] == 4 * G
    assert code(d.cuMemAddressFree(base, 8 * G)) == OK
