"""The device interface every runtime implements, and the parts all runtimes share.

A runtime (host CPU, HIP, CUDA) subclasses ``Device`` and supplies the raw operations: memory,
copies, loading an artifact, finding a function in it, launching with a packed argument buffer.
Everything users touch — device arrays, ``get_or_load_func`` with candle's per-module slots, the
argument checking and packing of a launch — lives here once.
"""
from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..compiler import build_module, compile_kernels
from ..errors import LaunchError
from ..ir.types import DType, dtype_of_numpy
from ..lang.kernel import Module
from ..prebuilt import find_prebuilt
from ..targets.base import Target
from . import dlpack
from .array import DeviceArray
from .launch import Function


class Device(ABC):
    """One device: its target, its memory, and candle's ModuleStore (one slot per module)."""

    kind = ""  # "cpu", "hip", "cuda"

    def __init__(self, index: int = 0):
        self.index = index
        self._slots: dict[int, Any] = {}  # module uid -> LoadedModule
        self._funcs: dict[tuple[int, str], Any] = {}
        self._lock = threading.RLock()  # held while loading: one thread compiles, the others wait
        self.load_count = 0  # whole modules loaded so far (tests check loads happen once)
        self.kernel_load_count = 0  # kernels compiled and loaded one at a time (``get_or_load_func``)

    def __repr__(self) -> str:
        return f"{self.kind}:{self.index}"

    # ---- what a runtime supplies -----------------------------------------------------------------
    @property
    @abstractmethod
    def target(self) -> Target: ...

    @abstractmethod
    def alloc(self, nbytes: int) -> tuple[int, Any]:
        """Allocate; returns (address, owner) — the owner frees the memory when collected."""

    @abstractmethod
    def copy_to_device(self, dst: int, src: np.ndarray) -> None: ...
    @abstractmethod
    def copy_to_host(self, dst: np.ndarray, src: int) -> None: ...

    @abstractmethod
    def load_artifact(self, artifact: bytes, kernels: list) -> Any:
        """Load a compiled module (code object, PTX, host object) and return a handle."""

    @abstractmethod
    def get_function(self, handle: Any, name: str) -> Any: ...

    @abstractmethod
    def launch_packed(self, func: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      shared_mem: int, stream: Any, args: bytearray, sig, programmatic: bool = False) -> None:
        """Launch with the explicit arguments packed at the signature's offsets. ``programmatic``: the
        launch may overlap the kernel before it (``Function.launch``); a runtime whose launches never
        overlap ignores it."""

    @property
    @abstractmethod
    def max_shared_per_block(self) -> int:
        """The most shared memory, static and dynamic together, one block may take here (bytes): the
        device's own limit rather than CUDA's portable 48 KiB, so a wrapper can size a shared table to
        the GPU it runs on (scatter's ranges, ``stdlib_kernels/indexing.py``). On CUDA a launch past
        48 KiB opts the function in itself (``cuda.opt_in_shared``); no other runtime needs an opt-in."""

    def synchronize(self) -> None:
        pass

    # ---- arrays ------------------------------------------------------------------------------------
    def empty(self, shape, dtype) -> DeviceArray:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n >= 0 for n in shape):
            raise ValueError(f"an array's shape is non-negative ints, got {shape!r}")
        shape = tuple(int(n) for n in shape)
        dt = _as_dtype(dtype)
        nbytes = int(math.prod(shape)) * dt.nbytes
        ptr, owner = self.alloc(max(nbytes, 1))
        return DeviceArray(self, ptr, shape, dt, owner)

    def empty_like(self, x) -> DeviceArray:
        """A new contiguous array of ``x``'s shape and dtype (a DeviceArray, a NumPy array...)."""
        return self.empty(tuple(x.shape), x.dtype if isinstance(x, DeviceArray) else np.dtype(x.dtype))

    def zeros_like(self, x) -> DeviceArray:
        return self.zeros(tuple(x.shape), x.dtype if isinstance(x, DeviceArray) else np.dtype(x.dtype))

    def zeros(self, shape, dtype) -> DeviceArray:
        arr = self.empty(shape, dtype)
        arr.copy_from_host(np.zeros(arr.shape, arr.dtype.np))
        return arr

    def from_dlpack(self, obj) -> DeviceArray:
        """A view of a torch/CuPy/JAX/NumPy array on this device, through DLPack (or CUDA's array
        interface): no copy, the producer kept alive; the stdlib's wrappers take such arrays as they
        are. bf16 and float8_e4m3fn come through DLPack."""
        ptr, dtype, shape, strides = dlpack.import_array(self, obj)
        arr = DeviceArray(self, ptr, shape, dtype, owner=obj, strides=strides)
        if not arr.is_contiguous:  # a strided view of a flat base, so a launch checks its layout (launch.py's
            span = 1 + sum((n - 1) * abs(st) for n, st in zip(shape, arr.strides))  # fast path trusts un-viewed arrays)
            arr = DeviceArray(self, ptr, (max(span, 1),), dtype, owner=obj).as_strided(shape, arr.strides)
        return arr

    def to_device(self, host) -> DeviceArray:
        host = np.asarray(host)
        arr = self.empty(host.shape, dtype_of_numpy(host.dtype))
        arr.copy_from_host(host)
        return arr

    # ---- candle's ModuleStore ----------------------------------------------------------------------
    def load_module(self, module) -> Any:
        """The loaded form of the whole of ``module`` on this device, loading it on first use
        (thread-safe): candle's ``ModuleStore`` slot, and what a Rust backend loads."""
        loaded = self._slots.get(module.uid)
        if loaded is not None:
            return loaded
        with self._lock:
            loaded = self._slots.get(module.uid)
            if loaded is None:
                found = self._find_prebuilt(module)
                if found is None:
                    with _announce(f"compiling module {module.name} ({len(module)} kernels) for {self.target}"):
                        found = build_module(module, self.target)
                artifact, sigs = found
                loaded = (self.load_artifact(artifact, sigs), {s.name: s for s in sigs})
                self._slots[module.uid] = loaded
                self.load_count += 1
        return loaded

    def prebuilt_targets(self) -> list[Target]:
        """The targets whose prebuilt objects run here, best first (HIP adds the arch's generic one)."""
        return [self.target]

    def _find_prebuilt(self, module):
        for target in self.prebuilt_targets():
            found = find_prebuilt(module, target)
            if found is not None:
                return found
        return None

    def _load_one(self, module, instance) -> tuple[Any, Any]:
        """The (handle, signature) of one kernel of ``module``: from the module's slot when it is
        loaded or prebuilt (no compile), else compiled and loaded alone (its own cache entry), so the
        first launch of one kernel of a 100-kernel family pays for that kernel only."""
        loaded = self._slots.get(module.uid)
        if loaded is None and (len(module) == 1 or self._find_prebuilt(module) is not None):
            loaded = self.load_module(module)
        if loaded is not None:
            handle, sigs = loaded
            return handle, sigs[instance.name]
        artifact, sigs = compile_kernels([instance], self.target, f"{module.name}.{instance.name}")
        self.kernel_load_count += 1
        return self.load_artifact(artifact, sigs), sigs[0]

    def get_or_load_func(self, name: str, module) -> Function:
        """candle's ``get_or_load_func``: the launchable ``name`` of ``module``, loaded once per device.

        ``module`` is a ``pykern.Module``, or what candle's API names one by: a stdlib ``Id`` (or its
        int index) or the module's name (``"unary"``)."""
        module = Module.lookup(module)
        key = (module.uid, name)
        fn = self._funcs.get(key)
        if fn is not None:
            return fn
        instance = module.get(name)  # raises with close matches
        with self._lock:
            fn = self._funcs.get(key)
            if fn is None:
                handle, sig = self._load_one(module, instance)
                fn = Function(self, instance, sig, self.get_function(handle, name))
                self._funcs[key] = fn
        return fn


@contextlib.contextmanager
def _announce(what: str, stream=None):
    """A line on a terminal while something slow runs (``what...`` then its time); nothing when
    stderr is not a terminal. A whole-module compile can take tens of seconds; a user should see why."""
    stream = stream or sys.stderr
    live = bool(getattr(stream, "isatty", lambda: False)())
    start = time.perf_counter()
    if live:
        stream.write(f"pykern: {what}...")
        stream.flush()
    try:
        yield
    finally:
        if live:
            stream.write(f" {time.perf_counter() - start:.1f}s\n")
            stream.flush()


def _as_dtype(dtype) -> DType:
    return dtype if isinstance(dtype, DType) else dtype_of_numpy(dtype)


__all__ = ["Device", "DeviceArray", "LaunchError"]
