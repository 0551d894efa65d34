"""``DeviceArray``: memory on a device with a shape, a dtype and candle's element strides."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.types import DType
from . import dlpack


class DeviceArray:
    """An n-d array in a device's memory: an address, a shape and element strides (candle's layout).

    ``ptr`` is the device address as an int. Arrays made by ``Device.empty`` own their memory and
    free it when collected; views (indexing, ``transpose``, ``offset_view``...) keep their parent
    alive. A strided view goes to the stdlib's wrappers as it is (they pass its layout in candle's
    ``info``); a kernel's ``Ptr`` parameter takes contiguous arrays only.
    """

    def __init__(self, device: "Any", ptr: int, shape: tuple[int, ...], dtype: DType, owner: Any = None,
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
        return dlpack.export(self)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack.KIND_CODES[self.device.kind], self.device.index

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device.kind not in ("cuda", "hip"):
            raise AttributeError("__cuda_array_interface__ exists only for GPU arrays")
        return {"shape": self.shape, "typestr": self.dtype.np.str, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))
