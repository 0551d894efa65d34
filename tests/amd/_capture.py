"""Record every launch a piece of host code makes on the CPU target, so it can be replayed elsewhere.

A case (``_cases.py``) is ordinary code that calls pykern: a stdlib wrapper (``unary.uexp(x)``), a
candle-style ``get_or_load_func(...)[grid, block](...)``, a user kernel. It runs on a
``CapturingCpuDevice``, a CPU device that, at each launch, notes the kernel instance, the launch
shape, the packed arguments and the bytes of every allocation an argument points into, both before
and after the CPU ran the kernel. A ``Launch`` is then self-contained: the AMD replay
(``_worker.py``) recreates the same allocations (aliasing and offsets included: an in-place launch
passes one allocation twice, a candle storage offset is a pointer into the middle of one), packs the
same explicit arguments, and the test compares what the emulator left in each allocation with what the
CPU left there (``_compare.py``).

Every launch starts from the CPU's memory: a mismatch in one launch of a multi-launch wrapper is
reported on that launch and never spreads to the next.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Any, Callable

import numpy as np

from pykern.errors import LaunchError
from pykern.ir.types import DType
from pykern.runtime.cpu import CpuDevice


@dataclasses.dataclass
class Buffer:
    """One allocation a launch touches: its bytes before and after the CPU ran the kernel."""

    before: bytes
    after: bytes = b""
    #: the element dtype each pointer argument into this allocation declares (for the comparison)
    dtypes: set = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Launch:
    """A launch as the emulator must repeat it, and what the CPU target made of it."""

    case: str
    instance: Any  # the KernelInstance (its ``module`` is what gets built for the AMD arch)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    #: one entry per explicit parameter: ("ptr", buffer index, byte offset), ("null",) or ("value", bytes)
    args: list[tuple]
    buffers: list[Buffer]

    @property
    def kernel(self) -> str:
        return self.instance.name

    def describe(self) -> str:
        return f"{self.case}: {self.kernel}[grid={self.grid}, block={self.block}, shared={self.shared_mem}]"


class CapturingCpuDevice(CpuDevice):
    """A CPU device (one thread: launches are small) that records each launch as a ``Launch``."""

    def __init__(self, wave_size: int):
        super().__init__(wave_size=wave_size, threads=1)
        self._allocations: list[tuple[int, int, Any]] = []  # (address, bytes, owner), kept alive
        self._instances: dict[int, Any] = {}  # id(function handle) -> KernelInstance
        self.launches: list[Launch] = []
        self.case = ""

    def alloc(self, nbytes: int):
        addr, owner = super().alloc(nbytes)
        self._allocations.append((addr, nbytes, owner))
        return addr, owner

    def get_or_load_func(self, name: str, module):
        fn = super().get_or_load_func(name, module)
        self._instances[id(fn.handle)] = fn.instance
        return fn

    def release(self) -> None:
        """Forget the allocations of the finished case (their bytes are in its launches)."""
        self._allocations.clear()

    def _allocation_of(self, pointer: int, kernel: str, param: str) -> int:
        for index, (addr, nbytes, _) in enumerate(self._allocations):
            if addr <= pointer <= addr + nbytes:
                return index
        raise LaunchError(f"{self.case}: {kernel}'s argument {param} points outside every array made on the "
                          "capturing device; make the case's arrays with dev.to_device / dev.empty")

    def _snapshot(self, index: int) -> bytes:
        addr, nbytes, _ = self._allocations[index]
        out = np.empty(nbytes, np.uint8)
        self.copy_to_host(out, addr) if nbytes else None
        return out.tobytes()

    def launch_packed(self, func, grid, block, shared_mem, stream, args, sig, *more, **options) -> None:
        # the launch options (ranges, programmatic, and any the CPU runtime gains) pass through unread
        instance = self._instances[id(func)]
        param_types = [ty for _, ty in instance.typed(self.target).params]
        raw = bytes(args)
        used: dict[int, int] = {}  # allocation index -> buffer index in this launch
        replay: list[tuple] = []
        buffers: list[Buffer] = []
        for (name, size, _, kind), offset, ty in zip(sig.params, sig.offsets, param_types):
            field = raw[offset:offset + size]
            if kind != "ptr":
                replay.append(("value", field))
                continue
            pointer = struct.unpack("<Q", field)[0]
            if pointer == 0:
                replay.append(("null",))
                continue
            alloc = self._allocation_of(pointer, sig.name, name)
            if alloc not in used:
                used[alloc] = len(buffers)
                buffers.append(Buffer(self._snapshot(alloc)))
            buf = used[alloc]
            element = getattr(ty, "elem", None)
            if isinstance(element, DType):
                buffers[buf].dtypes.add(element)
            replay.append(("ptr", buf, pointer - self._allocations[alloc][0]))
        super().launch_packed(func, grid, block, shared_mem, stream, args, sig, *more, **options)
        for alloc, buf in used.items():
            buffers[buf].after = self._snapshot(alloc)
        self.launches.append(Launch(self.case, instance, tuple(grid), tuple(block), shared_mem, replay, buffers))


def capture(cases: dict[str, Callable], wave_size: int) -> tuple[list[Launch], dict[str, str]]:
    """Run each case on a fresh capturing device of ``wave_size``; returns the launches and, for a
    case that raised on the CPU, its error (the test reports it: the case itself is broken)."""
    launches: list[Launch] = []
    errors: dict[str, str] = {}
    dev = CapturingCpuDevice(wave_size)
    for name, run in cases.items():
        dev.case, dev.launches = name, []
        try:
            run(dev)
            if not dev.launches:
                raise AssertionError("the case launched nothing")
        except Exception as exc:  # reported by the case's test, not here
            errors[name] = f"{type(exc).__name__}: {exc}"
        launches += dev.launches
        dev.release()
    return launches, errors
