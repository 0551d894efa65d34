"""CAST: ``cast_{src}_{dst}(numel, num_dims, info, inp, out)``, a strided source into a contiguous output.

Conversions are pykern's casts, which are candle's CPU backend's (Rust ``as``): float -> int truncates
and saturates (NaN -> 0), int -> int wraps, float -> float rounds to nearest even, into f8 saturating
to +-448. Every pair of candle's ten dtypes is exported (candle-kernels has 58 of the 100), and each
pair with f8 also under candle-core's spelling ``f8e4m3``.
"""
from __future__ import annotations

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32, usize
from pykern.ir.types import dtype_of_numpy

from . import CAST, kernel_name
from ._common import as_device_array, is_contiguous, strided_index
from ._common import map1

S, D = pk.TypeVar("S"), pk.TypeVar("D")
DTYPES = (u8, u32, i16, i32, i64, bf16, f16, f32, f64, f8e4m3)


@pk.kernel
def cast_kernel(numel: usize, num_dims: usize, info: ConstPtr[usize], inp: ConstPtr[S], out: Ptr[D], *, S, D):
    if info is None or is_contiguous(num_dims, info, info + num_dims):
        for i in pk.grid_stride(numel):
            out[i] = D(inp[i])
    else:
        for i in pk.grid_stride(numel):
            out[i] = D(inp[strided_index(i, num_dims, info, info + num_dims)])


for _s in DTYPES:
    for _d in DTYPES:
        for _name in dict.fromkeys((kernel_name("cast", _s, _d), kernel_name("cast", _s.name, _d.name))):  # f8_e4m3, f8e4m3
            CAST.add(cast_kernel.instance(_name, S=_s, D=_d))


def to(x, dtype, out=None):
    """``x`` converted to ``dtype`` (candle's ``to_dtype``): a new contiguous array."""
    x = as_device_array(x)
    dtype = dtype if isinstance(dtype, pk.DType) else dtype_of_numpy(dtype)
    return map1(CAST, kernel_name("cast", x.dtype, dtype), x, out, dtype=dtype, inplace=False)
