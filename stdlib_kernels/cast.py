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
from ._common import as_device_array, map_layout
from ._common import map1

S, D = pk.TypeVar("S"), pk.TypeVar("D")
DTYPES = (u8, u32, i16, i32, i64, bf16, f16, f32, f64, f8e4m3)


@pk.func
def apply(x: S, p: S, q: S, *, K) -> K:
    return K(x)


def _cast_kernel(numel: usize, num_dims: usize, info: ConstPtr[usize], inp: ConstPtr[S], out: Ptr[D], *, S, D):
    map_layout(numel, num_dims, info, inp, inp, inp, out, S(0), S(0), N=1,
               NB=S.nbytes if S.nbytes < D.nbytes else D.nbytes, F=apply, K=D, TRANSPOSE=None)


#: two blocks of 1024 an SM under candle's launch (32 registers); the 64-bit types keep the default budget
cast_kernel = pk.kernel(min_blocks_per_sm=2, loop_strength_reduction={"cuda": False})(_cast_kernel)
cast_kernel_wide = pk.kernel(loop_strength_reduction={"cuda": False})(_cast_kernel)


for _s in DTYPES:
    for _d in DTYPES:
        for _name in dict.fromkeys((kernel_name("cast", _s, _d), kernel_name("cast", _s.name, _d.name))):  # f8_e4m3, f8e4m3
            CAST.add((cast_kernel_wide if max(_s.nbytes, _d.nbytes) == 8 else cast_kernel).instance(_name, S=_s, D=_d))


def to(x, dtype, out=None):
    """``x`` converted to ``dtype`` (candle's ``to_dtype``): a new contiguous array."""
    x = as_device_array(x)
    dtype = dtype if isinstance(dtype, pk.DType) else dtype_of_numpy(dtype)
    return map1(CAST, kernel_name("cast", x.dtype, dtype), x, out, dtype=dtype, inplace=False)
