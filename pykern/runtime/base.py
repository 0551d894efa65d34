"""The device interface every runtime implements, and the parts all runtimes share.

A runtime (host CPU, HIP, CUDA) subclasses ``Device`` and supplies the raw operations: memory,
copies, loading an artifact, finding a function in it, launching with a packed argument buffer.
Everything users touch — device arrays, ``get_or_load_func`` with candle's per-module slots, the
argument checking and packing of a launch — lives here once.
"""
from __future__ import annotations

import difflib
import math
import threading
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..errors import LaunchError
from ..ir.types import DType, dtype_of_numpy
from ..lang.kernel import Module
from ..targets.base import Target


class DeviceArray:
    """An n-d array in a device's memory: an address, a shape and element strides (candle's layout).

    ``ptr`` is the device address as an int. Arrays made by ``Device.empty`` own their memory and
    free it when collected; views (indexing, ``transpose``, ``offset_view``...) keep their parent
    alive. A strided view goes to the stdlib's wrappers as it is (they pass its layout in candle's
    ``info``); a kernel's ``Ptr`` parameter takes contiguous arrays only.
    """

    def __init__(self, device: "Device", ptr: int, shape: tuple[int, ...], dtype: DType, owner: Any = None,
                 strides: tuple[int, ...] | None = None):
        self.device, self.ptr, self.shape, self.dtype = device, ptr, tuple(shape), dtype
        self._owner = owner
        #: strides in elements (candle's layout); zero strides broadcast
        self.strides = tuple(strides) if strides is not None else _contiguous_strides(self.shape)

    @property
    def is_contiguous(self) -> bool:
        """Row-major and dense; a dimension of size 1 may carry any stride (as candle's layout)."""
        return all(n == 1 or s == c for n, s, c in zip(self.shape, self.strides, _contiguous_strides(self.shape)))

    def as_strided(self, shape, strides, offset: int = 0) -> "DeviceArray":
        """A view of this array's memory with element ``strides``, starting ``offset`` elements in."""
        return DeviceArray(self.device, self.ptr + offset * self.dtype.nbytes, tuple(shape), self.dtype,
                           owner=self, strides=tuple(strides))

    def __getitem__(self, key) -> "DeviceArray":
        """A view, as NumPy's basic indexing gives: ints drop a dimension, slices (positive steps)
        keep it, ``...`` and ``None`` work; ``x[2:5]``, ``x[:, 1]``, ``x[..., ::2]``."""
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        used = sum(k is not None and k is not Ellipsis for k in key)
        if used > self.ndim:
            raise IndexError(f"too many indices for an array of {self.ndim} dimensions: {used}")
        if Ellipsis not in key:
            key = key + (Ellipsis,)
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (self.ndim - used) + key[at + 1:]
        shape, strides, offset, dim = [], [], 0, 0
        for k in key:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            n, st = self.shape[dim], self.strides[dim]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step < 0:
                    raise IndexError("a negative step would need negative strides, which candle's layout "
                                     "does not have; copy the reversed data on the host")
                shape.append(len(range(start, stop, step)))
                strides.append(st * step)
                offset += start * st if shape[-1] else 0
            elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                i = int(k) + n if k < 0 else int(k)
                if not 0 <= i < n:
                    raise IndexError(f"index {int(k)} is out of bounds for axis {dim} of size {n}")
                offset += i * st
            else:
                raise IndexError(f"DeviceArray takes ints, slices, ... and None as indices, not "
                                 f"{type(k).__name__} (no fancy indexing: see stdlib_kernels.indexing)")
            dim += 1
        return self.as_strided(shape, strides, offset)

    def transpose(self, a: int = -2, b: int = -1) -> "DeviceArray":
        shape, strides = list(self.shape), list(self.strides)
        shape[a], shape[b], strides[a], strides[b] = shape[b], shape[a], strides[b], strides[a]
        return self.as_strided(shape, strides)

    def broadcast_to(self, shape) -> "DeviceArray":
        shape = tuple(shape)
        pad = len(shape) - self.ndim
        src_shape, src_strides = (1,) * pad + self.shape, (0,) * pad + self.strides
        strides = tuple(0 if s == 1 and n != 1 else st for s, n, st in zip(src_shape, shape, src_strides))
        return self.as_strided(shape, strides)

    size = property(lambda self: int(math.prod(self.shape)))
    nbytes = property(lambda self: self.size * self.dtype.nbytes)
    ndim = property(lambda self: len(self.shape))

    def to_host(self) -> np.ndarray:
        if not self.is_contiguous:  # copy the span the view covers, then view it on the host
            span = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides)) if self.size else 0
            flat = DeviceArray(self.device, self.ptr, (span,), self.dtype, owner=self).to_host()
            item = self.dtype.nbytes
            return np.lib.stride_tricks.as_strided(flat, self.shape, [s * item for s in self.strides]).copy()
        out = np.empty(self.shape, self.dtype.np)
        if out.nbytes:
            self.device.copy_to_host(out, self.ptr)
        return out

    def copy_from_host(self, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host, dtype=self.dtype.np)
        if host.nbytes != self.nbytes:
            raise ValueError(f"size mismatch: {host.nbytes} bytes into {self.nbytes}")
        if host.nbytes:
            self.device.copy_to_device(self.ptr, host)

    def reshape(self, *shape) -> "DeviceArray":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape {self.shape} into {shape}")
        if not self.is_contiguous:
            raise ValueError("reshape needs a contiguous array")
        return DeviceArray(self.device, self.ptr, shape, self.dtype, owner=self)

    def offset_view(self, start: int, shape: tuple[int, ...]) -> "DeviceArray":
        """A view starting ``start`` elements in (candle's storage offsets)."""
        return DeviceArray(self.device, self.ptr + start * self.dtype.nbytes, shape, self.dtype, owner=self)

    def __dlpack__(self, stream=None, **_):
        from .dlpack import export
        return export(self)

    def __dlpack_device__(self) -> tuple[int, int]:
        from .dlpack import _KIND_CODES
        return _KIND_CODES[self.device.kind], self.device.index

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device.kind not in ("cuda", "hip"):
            raise AttributeError("__cuda_array_interface__ exists only for GPU arrays")
        return {"shape": self.shape, "typestr": self.dtype.np.str, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"


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
                      shared_mem: int, stream: Any, args: bytearray, sig) -> None:
        """Launch with the explicit arguments packed at the signature's offsets."""

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
        from .dlpack import import_array
        return import_array(self, obj)

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
                from ..compiler import build_module
                artifact, sigs = self._find_prebuilt(module) or build_module(module, self.target)
                loaded = (self.load_artifact(artifact, sigs), {s.name: s for s in sigs})
                self._slots[module.uid] = loaded
                self.load_count += 1
        return loaded

    def prebuilt_targets(self) -> list[Target]:
        """The targets whose prebuilt objects run here, best first (HIP adds the arch's generic one)."""
        return [self.target]

    def _find_prebuilt(self, module):
        from ..prebuilt import find_prebuilt
        for target in self.prebuilt_targets():
            found = find_prebuilt(module, target)
            if found is not None:
                return found
        return None

    def _load_one(self, module, instance) -> tuple[Any, Any]:
        """The (handle, signature) of one kernel of ``module``: from the module's slot when it is
        loaded or prebuilt (no compile), else compiled and loaded alone (its own cache entry), so the
        first launch of one kernel of a 100-kernel family pays for that kernel only."""
        from ..compiler import compile_kernels
        loaded = self._slots.get(module.uid)
        if loaded is None and (len(module) == 1 or self._find_prebuilt(module) is not None):
            loaded = self.load_module(module)
        if loaded is not None:
            handle, sigs = loaded
            return handle, sigs[instance.name]
        artifact, sigs = compile_kernels([instance], self.target, f"{module.name}.{instance.name}")
        self.kernel_load_count += 1
        return self.load_artifact(artifact, sigs), sigs[0]

    def get_or_load_func(self, name: str, module) -> "Function":
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
                from .launch import Function
                handle, sig = self._load_one(module, instance)
                fn = Function(self, instance, sig, self.get_function(handle, name))
                self._funcs[key] = fn
        return fn


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _as_dtype(dtype) -> DType:
    return dtype if isinstance(dtype, DType) else dtype_of_numpy(dtype)


def close_matches(name: str, names) -> str:
    near = difflib.get_close_matches(name, list(names), n=5)
    return f"; did you mean {', '.join(near)}?" if near else ""


__all__ = ["Device", "DeviceArray", "LaunchError", "close_matches"]
