"""Host-side helpers the elementwise families share: candle's ``Map1`` launch and scalar conversion."""
from __future__ import annotations

import math

import numpy as np

from pykern import f8e4m3, f32
from pykern.runtime.base import DeviceArray

from ._common import as_device_array, info_array, launch_stream


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
    if dtype is f8e4m3 and not math.isnan(v):  # saturate as a kernel's cast does (the launcher's
        return min(max(float(v), -448.0), 448.0)   # ml_dtypes rounding would give NaN past 464)
    return float(v)


def output(x: DeviceArray, out, dtype) -> DeviceArray:
    if out is None:
        return x.device.empty(x.shape, dtype)
    if out.shape != x.shape or out.dtype is not dtype or not out.is_contiguous or out.device is not x.device:
        raise ValueError(f"out must be a contiguous {dtype} array of shape {x.shape} on {x.device}, got {out!r}")
    return out


def map1(module, name: str, x, out=None, before=(), after=(), dtype=None, inplace: bool = True) -> DeviceArray:
    """candle's Map1 launch: ``name(numel, num_dims, info, *before, inp, out, *after)`` over ``x``'s layout.

    ``out=x`` (contiguous) runs in place by passing a null ``inp``, where the kernel supports it."""
    x = as_device_array(x)
    out = output(x, out, dtype or x.dtype)
    if x.size == 0:
        return out
    fn = x.device.get_or_load_func(name, module)
    if inplace and out.ptr == x.ptr and x.is_contiguous:
        inp, info = None, None
    else:
        inp, info = x, info_array(x.device, x.shape, x.strides)
    grid, block = launch_stream(x.size)
    fn[grid, block](x.size, x.ndim, info, *before, inp, out, *after)
    return out
