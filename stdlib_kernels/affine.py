"""AFFINE: ``affine_{dt}(numel, num_dims, info, inp, out, mul, add)``: ``out = x * mul + add`` in T.

As candle's CPU backend: two rounded operations (no fused multiply-add), integers wrap; f16/bf16/f8
round after each operation. ``inp is None`` means in place on ``out``; a null ``info`` means contiguous.
"""
from __future__ import annotations

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32, usize

from . import AFFINE, kernel_name
from ._common import map_in_place, map_layout
from ._common import from_f64, map1

T = pk.TypeVar("T")
DTYPES = (f32, f64, f16, u8, u32, i16, i32, i64, bf16, f8e4m3)


@pk.func
def apply(x: T, mul: T, add: T, *, K) -> T:
    return x * mul + add


def _affine_kernel(numel: usize, num_dims: usize, info: ConstPtr[usize], inp: ConstPtr[T], out: Ptr[T], mul: T,
                   add: T, *, T):
    if inp is None:  # in place; its own loop keeps inp's reads unaliased (vectorisable)
        map_in_place(numel, out, mul, add, NB=T.nbytes, F=apply, K=0)
    else:
        map_layout(numel, num_dims, info, inp, inp, inp, out, mul, add, N=1, NB=T.nbytes, F=apply, K=0,
                   TRANSPOSE=None)


#: two blocks of 1024 an SM under candle's launch (32 registers); the 64-bit types keep the default budget
affine_kernel = pk.kernel(min_blocks_per_sm=2, loop_strength_reduction={"cuda": False})(_affine_kernel)
affine_kernel_wide = pk.kernel(loop_strength_reduction={"cuda": False})(_affine_kernel)


for _t in DTYPES:  # plus candle-core's spelling of f8 (DType::F8E4M3.as_str())
    for _tag in (_t.tag, "f8e4m3") if _t is f8e4m3 else (_t,):
        AFFINE.add((affine_kernel_wide if _t.nbytes == 8 else affine_kernel).instance(kernel_name("affine", _tag),
                                                                                      T=_t))


def affine(x, mul: float, add: float, out=None):
    """``x * mul + add`` (candle's ``Tensor::affine``); ``out=x`` runs in place."""
    from ._common import as_device_array
    x = as_device_array(x)
    return map1(AFFINE, kernel_name("affine", x.dtype), x, out, after=(from_f64(mul, x.dtype), from_f64(add, x.dtype)))
