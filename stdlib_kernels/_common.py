"""What every family shares: candle's ``info`` layout on the device; launch shapes, candle's ``Map1``
launch and scalar conversion on the host.

``info`` is candle's flat array: ``dims[num_dims]`` followed by one ``strides[num_dims]`` block per
operand (element strides; zero strides broadcast). A null ``info`` means every operand is contiguous.
"""
from __future__ import annotations

import math

import numpy as np

import pykern as pk
from pykern import ConstPtr, f32, usize
from pykern.runtime.base import DeviceArray
from pykern.runtime.launch import storage

#: candle's elementwise launch: 1024 threads, one element per thread
BLOCK = 1024


@pk.func
def strided_index(idx: usize, num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize]) -> usize:
    """The memory offset of logical element ``idx`` (candle's ``get_strided_index``)."""
    offset: usize = 0
    rest = idx
    d = num_dims
    while d > 0:
        d -= 1
        offset += (rest % dims[d]) * strides[d]
        rest //= dims[d]
    return offset


@pk.func
def is_contiguous(num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize]) -> bool:
    """Row-major contiguity (dims of size 1 may carry any stride)."""
    acc: usize = 1
    d = num_dims
    while d > 0:
        d -= 1
        if dims[d] != 1 and strides[d] != acc:
            return False
        acc *= dims[d]
    return True


def launch_1d(numel: int, block: int = BLOCK) -> tuple[int, int]:
    """candle's shape: ``ceil(numel / block)`` blocks of ``block`` threads (at least one block)."""
    return max(1, -(-numel // block)), block


#: the wrappers' block for grid-stride kernels: several blocks per SM keep loads in flight while one
#: block finishes (H200, 2^28 f32: exp 0.91 -> 0.97x torch against blocks of 1024; add, fill unchanged)
STREAM_BLOCK = 256


def launch_stream(numel: int, *arrays: DeviceArray, block: int = STREAM_BLOCK, tiles: int = 1) -> tuple[int, int]:
    """The wrappers' own shape for grid-stride kernels over ``arrays``: ``tiles`` tiles a thread (the
    GPU lowering gives each thread ``tile_bytes`` of the narrowest dtype per step, ``lower/tiles.py``;
    4 elements where tiles are off), so no block is launched empty. Math-bound kernels take 2: a
    thread's second tile loads while its first computes."""
    tile = arrays[0].device.target.tile_bytes
    per_thread = tiles * (max(1, tile // min(a.dtype.nbytes for a in arrays)) if tile else 4)
    return max(1, -(-numel // (block * per_thread))), block


def info_array(device, shape: tuple[int, ...], *strides: tuple[int, ...]) -> DeviceArray | None:
    """The ``info`` buffer for ``shape`` and each operand's strides; None when all are contiguous."""
    contiguous = DeviceArray(device, 0, shape, pk.f32).strides
    if all(tuple(s) == contiguous for s in strides):
        return None
    flat = np.array(list(shape) + [x for s in strides for x in s], dtype=np.uint64)
    return device.to_device(flat)


def as_device_array(x, device=None) -> DeviceArray:
    """Accept a device array; a framework's array (torch, CuPy, JAX) viewed in place through DLPack;
    or anything else NumPy reads, copied to ``device`` (the CPU by default)."""
    if isinstance(x, DeviceArray):
        return x
    if not isinstance(x, np.ndarray) and (hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")):
        return device.from_dlpack(x) if device is not None else pk.from_dlpack(x)
    return (device or pk.device("cpu")).to_device(np.asarray(x))

def compute_type(t):
    """What a dtype is computed in: f32 for the storage floats (f16, bf16, f8), else itself."""
    return f32 if t.is_storage_float else t


def from_f64(v, dtype):
    """candle's ``T::from_f64``: ints truncate and saturate like Rust's ``as`` (NaN -> 0); floats round."""
    if dtype.is_int:
        v = float(v)
        if math.isnan(v):
            return 0
        lo, hi = dtype.int_range
        return int(min(max(math.trunc(v) if math.isfinite(v) else v, lo), hi))
    return float(v)  # the launcher rounds (fp8 saturating, as a kernel's cast does)


def output(x: DeviceArray, out, dtype) -> DeviceArray:
    if out is None:
        return x.device.empty(x.shape, dtype)
    if out.shape != x.shape or out.dtype is not dtype or not out.is_contiguous or out.device is not x.device:
        raise ValueError(f"out must be a contiguous {dtype} array of shape {x.shape} on {x.device}, got {out!r}")
    return out


def map1(module, name: str, x, out=None, before=(), after=(), dtype=None, inplace: bool = True,
         tiles: int = 1) -> DeviceArray:
    """candle's Map1 launch: ``name(numel, num_dims, info, *before, inp, out, *after)`` over ``x``'s layout.

    ``out=x`` (contiguous) runs in place by passing a null ``inp``, where the kernel supports it."""
    x = as_device_array(x)
    if name not in module:  # a dtype the family has no kernel for: say so, not a bare KeyError
        same_op = sorted(k for k in module.names() if k.rsplit("_", 1)[0] == name.rsplit("_", 1)[0])
        raise TypeError(f"no {module.name} kernel {name!r} for {x.dtype}; there are {', '.join(same_op) or 'none'}")
    out = output(x, out, dtype or x.dtype)
    if x.size == 0:
        return out
    fn = x.device.get_or_load_func(name, module)
    if inplace and out.ptr == x.ptr and x.is_contiguous:
        inp, info = None, None
    else:
        inp, info = storage(x), info_array(x.device, x.shape, x.strides)  # the layout travels in info
    grid, block = launch_stream(x.size, x, out, tiles=tiles)
    fn[grid, block](x.size, x.ndim, info, *before, inp, out, *after)
    return out
