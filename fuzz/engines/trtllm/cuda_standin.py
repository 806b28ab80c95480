"""A CUDA driver stand-in for the CPU: the driver calls KVCacheManagerV2 makes, done on host memory.

Written here from the CUDA driver API's documented behaviour (no NVIDIA or TensorRT-LLM code). Each
call returns a tuple ``(CUresult, *values)`` as ``cuda.bindings.driver`` does, and never raises for
a misuse the driver reports: it returns the error code the documentation names.

What each part is:

- **Physical allocations** (``cuMemCreate``/``cuMemRelease``) are counters against an optional
  ``cap`` in bytes: an allocation that would pass it returns ``CUDA_ERROR_OUT_OF_MEMORY`` (so
  out-of-memory is injectable). Each allocation's bytes are a host ``bytearray``, made on first use.
  As the driver documents, a released allocation that is still mapped keeps its memory until its
  last mapping goes.
- **Address reservations and mappings** (``cuMemAddressReserve``/``Free``, ``cuMemMap``/``Unmap``):
  reservations are ranges of a device address space that no host pointer reaches (from ``2**47``
  up); a mapping makes a range read and write one allocation's bytes, so two mappings of one
  allocation see the same bytes. ``cuMemSetAccess`` is recorded (:attr:`CudaStandIn.access`).
- **Events and streams** are ids. An event recorded on a stream completes at once, or, with
  ``defer`` above 0, after a number of ``cuEventQuery`` polls drawn from a seeded generator (each
  poll before then returns ``CUDA_ERROR_NOT_READY``). Completing an event completes everything
  recorded before it on its stream, and the events that stream was told to wait for before it.
  ``cuEventSynchronize``, ``cuStreamSynchronize`` and ``cuCtxSynchronize`` complete what they wait
  for.
- ``cuMemGetInfo`` is ``(free, total)`` from the counters (total: the cap, else ``total_bytes``);
  ``cuMemHostRegister``/``Unregister`` keep a set of registered host ranges; copies
  (:meth:`CudaStandIn.copy`) are host copies between any mix of mapped device addresses and host
  addresses.

It imports without ``cuda.bindings``: then its result codes are :class:`CUresult`, a small enum of
its own with the driver's numeric values; with ``cuda.bindings`` importable it returns that
package's enum and handle types. :func:`install` puts its calls in place of a module's (default
``cuda.bindings.driver``; ``cudaFree`` on ``cuda.bindings.runtime``) and :func:`select_driver` picks
the real driver when a device is present unless the stand-in is asked for.
"""

from __future__ import annotations

import ctypes
import enum
import os
import random
import types
from typing import Any, Callable, Iterable

__all__ = [
    "CUresult",
    "CudaError",
    "CudaStandIn",
    "DRIVER_CALLS",
    "RUNTIME_CALLS",
    "bindings",
    "install",
    "select_driver",
    "device_present",
    "ENV_VAR",
    "namespace",
]

#: Set to ``standin`` to use the stand-in even where a device is present (``real`` to insist on one).
ENV_VAR = "SWAFLOOR_CUDA_DRIVER"

#: The driver calls the stand-in implements (KVCacheManagerV2's 22).
DRIVER_CALLS = (
    "cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap", "cuMemUnmap",
    "cuMemSetAccess", "cuMemHostRegister", "cuMemHostUnregister", "cuEventCreate", "cuEventDestroy",
    "cuEventRecord", "cuEventQuery", "cuEventSynchronize", "cuStreamCreate", "cuStreamDestroy",
    "cuStreamWaitEvent", "cuStreamSynchronize", "cuCtxGetDevice", "cuCtxSynchronize", "cuMemGetInfo",
    "cuGetErrorString",
)
#: The runtime calls it implements.
RUNTIME_CALLS = ("cudaFree",)


class CUresult(enum.IntEnum):
    """The driver's result codes the stand-in returns (the driver's numeric values)."""

    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713
    CUDA_ERROR_NOT_PERMITTED = 800
    CUDA_ERROR_NOT_SUPPORTED = 801


class CudaError(enum.IntEnum):
    """The runtime's result codes ``cudaFree`` returns."""

    cudaSuccess = 0
    cudaErrorInvalidValue = 1


# Our own one-line descriptions, returned by cuGetErrorString (bytes, as the bindings give them).
_DESCRIPTIONS = {
    CUresult.CUDA_SUCCESS: "no error",
    CUresult.CUDA_ERROR_INVALID_VALUE: "an argument is out of its range",
    CUresult.CUDA_ERROR_OUT_OF_MEMORY: "device memory exhausted",
    CUresult.CUDA_ERROR_NOT_INITIALIZED: "driver not initialized",
    CUresult.CUDA_ERROR_INVALID_DEVICE: "no such device",
    CUresult.CUDA_ERROR_INVALID_CONTEXT: "no valid context",
    CUresult.CUDA_ERROR_INVALID_HANDLE: "the handle names no live object",
    CUresult.CUDA_ERROR_NOT_READY: "the work is not complete yet",
    CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: "host range already registered",
    CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: "host range not registered",
    CUresult.CUDA_ERROR_NOT_PERMITTED: "operation not permitted",
    CUresult.CUDA_ERROR_NOT_SUPPORTED: "operation not supported",
}

GRANULARITY = 2 << 20  # bytes: the allocation granularity the stand-in enforces (the driver's usual one)
DEVICE_BASE = 1 << 47  # device addresses start here, above every user-space host address on x86-64
DEFAULT_TOTAL = 80 << 30  # cuMemGetInfo's total without a cap


def bindings() -> tuple[Any, Any] | None:
    """``(cuda.bindings.driver, cuda.bindings.runtime)`` when importable, else None."""
    try:
        from cuda.bindings import driver, runtime  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - absent, or broken without a driver library
        return None
    return driver, runtime


class _Types:
    """How results and handles are spelled: cuda.bindings' types where importable, else ours."""

    def __init__(self, use_bindings: bool):
        found = bindings() if use_bindings else None
        self.driver = found[0] if found else None
        self.runtime = found[1] if found else None

    def result(self, code: CUresult) -> Any:
        return self.driver.CUresult(int(code)) if self.driver is not None else code

    def runtime_result(self, code: CudaError) -> Any:
        return self.runtime.cudaError_t(int(code)) if self.runtime is not None else code

    def handle(self, kind: str, value: int) -> Any:
        if self.driver is None:
            return value
        return getattr(self.driver, kind)(value)


def _int(value: Any) -> int | None:
    """A handle, pointer or size as an int (cuda.bindings objects convert with int()); None if not."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        getter = getattr(value, "getPtr", None)
        return int(getter()) if callable(getter) else None


class _Allocation:
    __slots__ = ("size", "released", "mappings", "_bytes")

    def __init__(self, size: int):
        self.size = size
        self.released = False
        self.mappings = 0
        self._bytes: bytearray | None = None

    @property
    def data(self) -> bytearray:
        if self._bytes is None:
            self._bytes = bytearray(self.size)
        return self._bytes


class _Event:
    __slots__ = ("stream", "pending", "polls")

    def __init__(self) -> None:
        self.stream: int | None = None
        self.pending = False  # recorded and not complete
        self.polls = 0  # while pending: queries still answered CUDA_ERROR_NOT_READY


class CudaStandIn:
    """One stand-in device: its memory counters, address space, events and streams.

    ``cap``: the most bytes of physical allocations live at once (None: no cap below ``total_bytes``).
    ``defer``: the chance an event recorded completes only after some polls; ``max_polls``: the most
    polls it may take; ``seed``: the generator's seed (the schedule is a function of it and the calls).
    """

    def __init__(self, *, cap: int | None = None, total_bytes: int = DEFAULT_TOTAL, granularity: int = GRANULARITY,
                 defer: float = 0.0, max_polls: int = 3, seed: int = 0, use_bindings: bool = True):
        for field, value, low in (("cap", cap, 0), ("total_bytes", total_bytes, 1), ("granularity", granularity, 1),
                                  ("max_polls", max_polls, 1)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise ValueError(f"CudaStandIn.{field}: must be an int >= {low}, got {value!r}")
        if not isinstance(defer, (int, float)) or not 0.0 <= defer <= 1.0:
            raise ValueError(f"CudaStandIn.defer: must be a probability in [0, 1], got {defer!r}")
        self.cap = cap
        self.total_bytes = total_bytes if cap is None else cap
        self.granularity = granularity
        self.defer = float(defer)
        self.max_polls = max_polls
        self.rng = random.Random(seed)
        self.types = _Types(use_bindings)
        self.allocated = 0  # bytes of physical allocations holding memory
        self.peak = 0
        self._next_id = 1
        self.allocations: dict[int, _Allocation] = {}
        self.reservations: dict[int, int] = {}  # start -> size
        self._next_address = DEVICE_BASE
        self.mappings: dict[int, tuple[int, int, int]] = {}  # start -> (size, handle, reservation start)
        self.access: list[tuple[int, int, Any]] = []  # (address, size, descriptors) per cuMemSetAccess
        self.host_registered: dict[int, int] = {}  # host pointer -> size
        self.events: dict[int, _Event] = {}
        self.streams: dict[int, list[tuple[str, int]]] = {0: []}  # id -> pending ("event"|"wait", event id)
        self.calls: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing
    def _new_id(self) -> int:
        value = self._next_id
        self._next_id += 1
        return value

    def _ok(self, *values: Any) -> tuple:
        return (self.types.result(CUresult.CUDA_SUCCESS), *values)

    def _err(self, code: CUresult, arity: int = 0) -> tuple:
        return (self.types.result(code), *([None] * arity))

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def functions(self) -> dict[str, Callable[..., tuple]]:
        """Every driver and runtime call it implements, by name."""
        return {name: getattr(self, name) for name in DRIVER_CALLS + RUNTIME_CALLS}

    # ------------------------------------------------------------------ physical memory
    def cuMemCreate(self, size: Any, prop: Any = None, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuMemCreate")
        n = _int(size)
        if n is None or n <= 0 or n % self.granularity:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE, 1)
        if self.allocated + n > self.total_bytes:
            return self._err(CUresult.CUDA_ERROR_OUT_OF_MEMORY, 1)
        handle = self._new_id()
        self.allocations[handle] = _Allocation(n)
        self.allocated += n
        self.peak = max(self.peak, self.allocated)
        return self._ok(self.types.handle("CUmemGenericAllocationHandle", handle))

    def _live_allocation(self, handle: Any) -> tuple[int, _Allocation] | None:
        key = _int(handle)
        found = self.allocations.get(key) if key is not None else None
        return None if found is None or found.released else (key, found)

    def cuMemRelease(self, handle: Any) -> tuple:  # noqa: N802
        self._count("cuMemRelease")
        found = self._live_allocation(handle)
        if found is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        key, allocation = found
        allocation.released = True
        if allocation.mappings == 0:  # else its memory goes with its last mapping
            self._free_allocation(key)
        return self._ok()

    def _free_allocation(self, key: int) -> None:
        allocation = self.allocations.pop(key)
        self.allocated -= allocation.size

    # ------------------------------------------------------------------ address space
    def cuMemAddressReserve(self, size: Any, alignment: Any = 0, addr: Any = 0, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuMemAddressReserve")
        n, align = _int(size), _int(alignment)
        if n is None or n <= 0 or n % self.granularity or align is None or align < 0:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE, 1)
        align = max(align, self.granularity)
        if align & (align - 1):
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE, 1)
        start = (self._next_address + align - 1) // align * align  # the hint ``addr`` is not honoured
        self._next_address = start + n + self.granularity  # a gap: ranges never touch
        self.reservations[start] = n
        return self._ok(self.types.handle("CUdeviceptr", start))

    def cuMemAddressFree(self, ptr: Any, size: Any) -> tuple:  # noqa: N802
        self._count("cuMemAddressFree")
        start, n = _int(ptr), _int(size)
        if start is None or self.reservations.get(start) != n:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        if any(r == start for _, _, r in self.mappings.values()):
            # The driver asks that the range be unmapped first; the stand-in refuses to free it mapped.
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        del self.reservations[start]
        return self._ok()

    def _reservation_of(self, start: int, n: int) -> int | None:
        for base, size in self.reservations.items():
            if base <= start and start + n <= base + size:
                return base
        return None

    def cuMemMap(self, ptr: Any, size: Any, offset: Any, handle: Any, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuMemMap")
        start, n, off = _int(ptr), _int(size), _int(offset)
        found = self._live_allocation(handle)
        if start is None or n is None or n <= 0 or off != 0 or found is None:  # offset: must be 0 (documented)
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        key, allocation = found
        if n > allocation.size or start % self.granularity or n % self.granularity:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        base = self._reservation_of(start, n)
        if base is None:  # outside every reservation, or past its end
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        for other, (m, _, _) in self.mappings.items():
            if other < start + n and start < other + m:  # overlaps a mapping already there
                return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        self.mappings[start] = (n, key, base)
        allocation.mappings += 1
        return self._ok()

    def cuMemUnmap(self, ptr: Any, size: Any) -> tuple:  # noqa: N802
        """Unmaps whole mappings that tile ``[ptr, ptr + size)`` exactly; anything else is refused."""
        self._count("cuMemUnmap")
        start, n = _int(ptr), _int(size)
        if start is None or n is None or n <= 0:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        covered, cursor = [], start
        while cursor < start + n:
            mapping = self.mappings.get(cursor)
            if mapping is None:
                return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
            covered.append(cursor)
            cursor += mapping[0]
        if cursor != start + n:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        for address in covered:
            _, key, _ = self.mappings.pop(address)
            allocation = self.allocations[key]
            allocation.mappings -= 1
            if allocation.released and allocation.mappings == 0:
                self._free_allocation(key)
        return self._ok()

    def _mapped_span(self, start: int, n: int) -> bool:
        cursor = start
        while cursor < start + n:
            hit = next(((a, m) for a, (m, _, _) in self.mappings.items() if a <= cursor < a + m), None)
            if hit is None:
                return False
            cursor = hit[0] + hit[1]
        return True

    def cuMemSetAccess(self, ptr: Any, size: Any, desc: Any = None, count: Any = 1) -> tuple:  # noqa: N802
        self._count("cuMemSetAccess")
        start, n = _int(ptr), _int(size)
        if start is None or n is None or n <= 0 or not self._mapped_span(start, n):
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        self.access.append((start, n, desc))
        return self._ok()

    # ------------------------------------------------------------------ host registration
    def cuMemHostRegister(self, p: Any, bytesize: Any, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuMemHostRegister")
        start, n = _int(p), _int(bytesize)
        if not start or n is None or n <= 0:
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        for other, m in self.host_registered.items():
            if other < start + n and start < other + m:
                return self._err(CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        self.host_registered[start] = n
        return self._ok()

    def cuMemHostUnregister(self, p: Any) -> tuple:  # noqa: N802
        self._count("cuMemHostUnregister")
        start = _int(p)
        if start not in self.host_registered:
            return self._err(CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
        del self.host_registered[start]
        return self._ok()

    # ------------------------------------------------------------------ events and streams
    def cuEventCreate(self, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuEventCreate")
        event = self._new_id()
        self.events[event] = _Event()
        return self._ok(self.types.handle("CUevent", event))

    def _event(self, event: Any) -> int | None:
        key = _int(event)
        return key if key in self.events else None

    def _stream(self, stream: Any) -> int | None:
        key = 0 if stream is None else _int(stream)
        return key if key in self.streams else None

    def cuEventDestroy(self, event: Any) -> tuple:  # noqa: N802
        self._count("cuEventDestroy")
        key = self._event(event)
        if key is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        self._complete(key)  # the driver lets recorded work finish; nothing waits on it afterwards
        del self.events[key]
        return self._ok()

    def cuEventRecord(self, event: Any, stream: Any = 0) -> tuple:  # noqa: N802
        self._count("cuEventRecord")
        key, s = self._event(event), self._stream(stream)
        if key is None or s is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        record = self.events[key]
        if record.pending:  # a re-record replaces the capture still pending
            self.streams[record.stream] = [i for i in self.streams[record.stream] if i != ("event", key)]
        queue = self.streams[s]
        record.stream = s
        deferred = self.defer > 0 and self.rng.random() < self.defer
        record.polls = self.rng.randint(1, self.max_polls) if deferred else 0
        # Pending when deferred, or when work queued before it on the stream is (it cannot finish first).
        record.pending = deferred or any(self._pending(item) for item in queue)
        if record.pending:
            queue.append(("event", key))
        return self._ok()

    def _pending(self, item: tuple[str, int]) -> bool:
        record = self.events.get(item[1])
        return record is not None and record.pending

    def _complete(self, key: int) -> None:
        """Complete event ``key`` and what its stream held before it (waited-for events included)."""
        record = self.events.get(key)
        if record is None or not record.pending:
            return
        record.pending, record.polls = False, 0
        queue = self.streams.get(record.stream, [])
        if ("event", key) in queue:
            position = queue.index(("event", key))
            before, queue[:] = queue[:position], queue[position + 1:]
            for _, other in before:
                self._complete(other)

    def _stream_done(self, s: int) -> None:
        for _, other in list(self.streams[s]):
            self._complete(other)
        self.streams[s].clear()

    def cuEventQuery(self, event: Any) -> tuple:  # noqa: N802
        self._count("cuEventQuery")
        key = self._event(event)
        if key is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        record = self.events[key]
        if record.pending and record.polls > 0:
            record.polls -= 1
            return self._err(CUresult.CUDA_ERROR_NOT_READY)
        self._complete(key)  # its schedule ran out: it and the work before it are done
        return self._ok()  # complete, or never recorded (the driver answers success then)

    def cuEventSynchronize(self, event: Any) -> tuple:  # noqa: N802
        self._count("cuEventSynchronize")
        key = self._event(event)
        if key is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        self._complete(key)
        return self._ok()

    def cuStreamCreate(self, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuStreamCreate")
        stream = self._new_id()
        self.streams[stream] = []
        return self._ok(self.types.handle("CUstream", stream))

    def cuStreamDestroy(self, stream: Any) -> tuple:  # noqa: N802
        self._count("cuStreamDestroy")
        s = _int(stream)
        if s is None or s == 0 or s not in self.streams:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        self._stream_done(s)  # the driver finishes queued work before the stream goes
        del self.streams[s]
        return self._ok()

    def cuStreamWaitEvent(self, stream: Any, event: Any, flags: Any = 0) -> tuple:  # noqa: N802
        self._count("cuStreamWaitEvent")
        s, key = self._stream(stream), self._event(event)
        if s is None or key is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        if self.events[key].pending:  # later work on the stream waits for it
            self.streams[s].append(("wait", key))
        return self._ok()

    def cuStreamSynchronize(self, stream: Any) -> tuple:  # noqa: N802
        self._count("cuStreamSynchronize")
        s = self._stream(stream)
        if s is None:
            return self._err(CUresult.CUDA_ERROR_INVALID_HANDLE)
        self._stream_done(s)
        return self._ok()

    def cuCtxGetDevice(self) -> tuple:  # noqa: N802
        self._count("cuCtxGetDevice")
        return self._ok(self.types.handle("CUdevice", 0))

    def cuCtxSynchronize(self) -> tuple:  # noqa: N802
        self._count("cuCtxSynchronize")
        for s in list(self.streams):
            self._stream_done(s)
        return self._ok()

    # ------------------------------------------------------------------ information
    def cuMemGetInfo(self) -> tuple:  # noqa: N802
        self._count("cuMemGetInfo")
        return self._ok(self.total_bytes - self.allocated, self.total_bytes)

    def cuGetErrorString(self, error: Any) -> tuple:  # noqa: N802
        self._count("cuGetErrorString")
        code = _int(error)
        try:
            text = _DESCRIPTIONS[CUresult(code)]
        except (ValueError, KeyError):
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE, 1)
        return self._ok(text.encode())

    def cudaFree(self, ptr: Any) -> tuple:  # noqa: N802
        """``cudaFree(0)`` (what callers use to make the primary context) succeeds; the stand-in has no
        runtime allocations, so any other pointer is an invalid value."""
        self._count("cudaFree")
        code = CudaError.cudaSuccess if _int(ptr) == 0 else CudaError.cudaErrorInvalidValue
        return (self.types.runtime_result(code),)

    # ------------------------------------------------------------------ bytes
    def _device_views(self, address: int, n: int) -> list[memoryview] | None:
        """The bytes ``[address, address + n)`` as views of the mappings holding them, in order: a
        range may cross from one mapping into the next one mapped right after it (upstream maps a
        pool's physical memory in pieces, so a slot larger than a piece spans several). None when
        any byte of it is unmapped."""
        views: list[memoryview] = []
        at, left = address, n
        while left > 0:
            for start, (size, key, _) in self.mappings.items():
                if start <= at < start + size:
                    take = min(left, start + size - at)
                    views.append(memoryview(self.allocations[key].data)[at - start: at - start + take])
                    at, left = at + take, left - take
                    break
            else:
                return None
        return views

    def read(self, address: int, n: int) -> bytes:
        """``n`` bytes at mapped device addresses (across adjacent mappings), or at a host address
        (any host memory: a host pointer the caller owns). A device range not wholly mapped raises
        ValueError."""
        if address >= DEVICE_BASE:
            views = self._device_views(address, n)
            if views is None:
                raise ValueError(f"CudaStandIn.read: address {address:#x}+{n} is not wholly mapped")
            return b"".join(bytes(v) for v in views)
        return ctypes.string_at(address, n)

    def write(self, address: int, data: bytes) -> None:
        """Write ``data`` at mapped device addresses (across adjacent mappings), or at a host address
        the caller owns."""
        if address >= DEVICE_BASE:
            views = self._device_views(address, len(data))
            if views is None:
                raise ValueError(f"CudaStandIn.write: address {address:#x}+{len(data)} is not wholly mapped")
            at = 0
            for view in views:
                view[:] = data[at: at + len(view)]
                at += len(view)
        else:
            ctypes.memmove(address, bytes(data), len(data))

    def copy(self, dst: int, src: int, n: int, stream: Any = 0) -> tuple:
        """A host copy of ``n`` bytes (device or host addresses on either side), done at once: the
        stand-in for a copy kernel or an asynchronous memcpy. Returns ``(CUresult,)``."""
        if n < 0 or any(a >= DEVICE_BASE and self._device_views(a, n) is None for a in (dst, src)):
            return self._err(CUresult.CUDA_ERROR_INVALID_VALUE)
        if n:
            self.write(dst, self.read(src, n))
        return self._ok()


def install(standin: CudaStandIn, target: Any = None, runtime_target: Any = None) -> Callable[[], None]:
    """Put ``standin``'s calls in place of ``target``'s (a module or namespace; default
    ``cuda.bindings.driver``, with ``cudaFree`` on ``cuda.bindings.runtime``). Returns a function that
    puts the originals back."""
    if target is None:
        found = bindings()
        if found is None:
            raise ImportError("install: cuda.bindings is not importable; pass the module to patch as target")
        driver, runtime = found
        runtime_target = runtime if runtime_target is None else runtime_target
    else:
        driver = target
        runtime_target = target if runtime_target is None else runtime_target
    saved: list[tuple[Any, str, Any, bool]] = []
    for module, names in ((driver, DRIVER_CALLS), (runtime_target, RUNTIME_CALLS)):
        for name in names:
            had = hasattr(module, name)
            saved.append((module, name, getattr(module, name, None), had))
            setattr(module, name, getattr(standin, name))

    def restore() -> None:
        for module, name, value, had in reversed(saved):
            if had:
                setattr(module, name, value)
            else:
                delattr(module, name)

    return restore


def device_present() -> bool:
    """Whether the real driver answers with at least one CUDA device (False without cuda.bindings)."""
    found = bindings()
    if found is None:
        return False
    driver = found[0]
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return False
        err, count = driver.cuDeviceGetCount()
        return int(err) == 0 and int(count) > 0
    except Exception:  # noqa: BLE001 - no driver library
        return False


def select_driver(prefer: str | None = None, **standin_options: Any) -> tuple[str, Any]:
    """``("real", cuda.bindings.driver)`` where a device is present, else ``("standin", CudaStandIn)``.
    ``prefer`` (default ``$SWAFLOOR_CUDA_DRIVER``, else ``auto``): ``standin`` always takes the
    stand-in; ``real`` insists on the device (ValueError naming the field when there is none)."""
    choice = prefer if prefer is not None else (os.environ.get(ENV_VAR) or "auto")
    if choice not in ("auto", "real", "standin"):
        raise ValueError(f"select_driver.prefer: must be auto, real or standin, got {choice!r}")
    if choice != "standin" and device_present():
        return "real", bindings()[0]
    if choice == "real":
        raise ValueError(f"select_driver.prefer: 'real' asked but no CUDA device is present (or {ENV_VAR})")
    return "standin", CudaStandIn(**standin_options)


def namespace(standin: CudaStandIn) -> types.SimpleNamespace:
    """A module-like namespace holding only the stand-in's calls and its result enum."""
    return types.SimpleNamespace(CUresult=CUresult, cudaError_t=CudaError, **standin.functions())
