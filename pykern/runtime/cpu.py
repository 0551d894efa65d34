"""The host runtime: device memory is host memory, kernels are JIT'd objects called over the grid.

Blocks are split into contiguous ranges and run on a thread pool; the drivers are plain C-ABI
functions called through ctypes, which releases the GIL, so blocks run in parallel on the cores.
"""
from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm
import numpy as np

from .. import config
from ..errors import LaunchError
from ..targets.cpu import ERR_SHARED, SHARED_LIMIT, CpuTarget
from .base import Device

_DRIVER = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class _Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_int32 * 3), ("block", ctypes.c_int32 * 3), ("dyn_shared", ctypes.c_int32),
                ("err_code", ctypes.c_int32), ("err_site", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("ranges", ctypes.c_void_p), ("nranges", ctypes.c_int64)]


class CpuModule:
    """A JIT'd module: one MCJIT engine owning the object code of all its kernels."""

    def __init__(self, target: CpuTarget, obj: bytes):
        empty = llvm.parse_assembly("")
        empty.triple = target.triple
        # each engine owns (and frees) its target machine: never share the target's cached one
        self.engine = llvm.create_mcjit_compiler(empty, target._make_target_machine())
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()


class CpuDevice(Device):
    kind = "cpu"

    def __init__(self, index: int = 0, wave_size: int | None = None, check_bounds: bool | None = None,
                 threads: int | None = None, tile_bytes: int = 0):
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise ValueError(f"device('cpu', threads=...) takes a positive int (None: one per core), got {threads!r}")
        if wave_size is not None and wave_size not in (32, 64):
            raise ValueError(f"device('cpu', wave_size=...) is 32 or 64, got {wave_size!r}")
        if check_bounds is not None and not isinstance(check_bounds, bool):
            raise ValueError(f"device('cpu', check_bounds=...) is a bool, got {check_bounds!r}")
        if not isinstance(tile_bytes, int) or isinstance(tile_bytes, bool) or tile_bytes < 0:
            raise ValueError(f"device('cpu', tile_bytes=...) is a non-negative int, got {tile_bytes!r}")
        super().__init__(index)
        self.check_bounds = config.check_bounds() if check_bounds is None else check_bounds
        self._target = CpuTarget(wave_size=wave_size or config.wave_size(), check_bounds=self.check_bounds,
                                 tile_bytes=tile_bytes)
        self.threads = threads or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="pykern-cpu") if self.threads > 1 else None

    def __repr__(self) -> str:
        return f"cpu(wave_size={self._target.wave_size})"

    @property
    def target(self) -> CpuTarget:
        return self._target

    @property
    def max_shared_per_block(self) -> int:
        """``SHARED_LIMIT``, the bound the CPU target checks at each launch like a GPU's (64 KiB, AMD's
        LDS a workgroup): code sized from it on the CPU takes the sizes it takes on most AMD GPUs."""
        return SHARED_LIMIT

    def alloc(self, nbytes: int):
        buf = np.empty(nbytes + 64, np.uint8)
        addr = buf.ctypes.data
        return addr + (-addr % 64), buf

    def copy_to_device(self, dst: int, src: np.ndarray) -> None:
        ctypes.memmove(dst, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src: int) -> None:
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)

    def load_artifact(self, artifact: bytes, kernels) -> CpuModule:
        return CpuModule(self._target, artifact)

    def get_function(self, handle: CpuModule, name: str):
        address = handle.engine.get_function_address(name)
        if not address:  # calling address 0 would crash the process
            raise LaunchError(f"kernel {name} is missing from its compiled module (a stale or foreign artifact?)")
        return (handle, _DRIVER(address))

    def launch_packed(self, func, grid, block, shared_mem, stream, args, sig, ranges=(), programmatic=False) -> None:
        """``ranges``: the (start, end) byte ranges of the argument buffers, for bounds-checked mode."""
        _, driver = func
        if shared_mem > SHARED_LIMIT:
            raise LaunchError(f"kernel {sig.name}: {shared_mem} bytes of dynamic shared memory exceed the "
                              f"{SHARED_LIMIT} bytes a block has (the CPU target bounds it like a GPU)")
        flat = (ctypes.c_int64 * max(1, 2 * len(ranges)))(*[v for r in ranges for v in r])
        launch = _Launch((ctypes.c_int32 * 3)(*grid), (ctypes.c_int32 * 3)(*block), shared_mem, 0, 0, 0,
                         ctypes.cast(flat, ctypes.c_void_p), len(ranges))
        argbuf = (ctypes.c_char * max(1, len(args))).from_buffer(args) if len(args) else None
        nblocks = grid[0] * grid[1] * grid[2]
        nthreads = block[0] * block[1] * block[2]
        chunks = self._split(nblocks, nthreads)
        if len(chunks) == 1 or self._pool is None:
            statuses = [driver(argbuf, ctypes.byref(launch), b0, b1) for b0, b1 in chunks]
        else:
            futures = [self._pool.submit(driver, argbuf, ctypes.byref(launch), b0, b1) for b0, b1 in chunks]
            statuses = [f.result() for f in futures]
        if any(statuses) or launch.err_code:
            what = {1: "a barrier (syncthreads) was reached by only some threads of a block",
                    2: "a wave operation was reached by only some lanes of a wave",
                    3: "out-of-bounds memory access"}.get(launch.err_code, "error")
            if launch.err_code == ERR_SHARED:
                raise LaunchError(f"kernel {sig.name}: {launch.err_site} bytes of static and {shared_mem} of dynamic "
                                  f"shared memory exceed the {SHARED_LIMIT} bytes a block has")
            raise LaunchError(f"kernel {sig.name}: {what} (line {launch.err_site})")

    def _split(self, nblocks: int, nthreads: int) -> list[tuple[int, int]]:
        # small launches run inline: a pool hop costs more than the work
        if nblocks * nthreads < 1 << 14 or self.threads == 1:
            return [(0, nblocks)]
        n = min(self.threads, nblocks)
        step = -(-nblocks // n)
        return [(b, min(b + step, nblocks)) for b in range(0, nblocks, step)]
