"""candle's TERNARY module: ``where_{I}_{T}(numel, num_dims, info, ids, t, f, out)``.

``out[i] = t[i] if ids[i] != 0 else f[i]`` over candle's ``info`` = dims, condition, true and false
strides. candle always passes ``info``; the kernel takes its contiguous loop when ``info`` says all three
are contiguous (``_common.map_layout``: checked once a thread, by the threads that have a tile), or when
``info`` is null.
"""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, usize
from pykern.runtime.launch import storage

from . import TERNARY, kernel_name
from ._common import as_device_array, info_array, launch_stream, map_layout
from ._common import output

I = pk.TypeVar("I")
T = pk.TypeVar("T")

#: condition dtypes candle dispatches, and the value dtypes it has kernels for
CONDS = (pk.u8, pk.u32, pk.i64)
VALUES = (pk.f32, pk.f64, pk.f16, pk.bf16, pk.u8, pk.u32, pk.i64)
#: candle's f8 kernels are spelled ``fp8_e4m3`` and exist for these condition dtypes
F8_CONDS = (pk.i16, pk.i32, pk.i64, pk.u32, pk.u8)


@pk.func
def apply(c: I, t: T, f: T, p: T, q: T, *, K) -> T:
    return pk.select(c != 0, t, f)  # both loads: no divergent branch


def _where_op(numel: usize, num_dims: usize, info: ConstPtr[usize], ids: ConstPtr[I], t: ConstPtr[T],
              f: ConstPtr[T], out: Ptr[T], *, I, T):
    # candle always passes info: map_layout tells contiguous operands apart once a thread, and the
    # threads past its tiles (15 in 16 of candle's grid with a u8 condition) leave before reading it
    map_layout(numel, num_dims, info, ids, t, f, out, T(0), T(0), N=3,
               NB=I.nbytes if I.nbytes < T.nbytes else T.nbytes, F=apply, K=0, TRANSPOSE=None)


#: two blocks of 1024 an SM under candle's launch (32 registers) where a thread's tile fits them: 16-bit
#: or narrower values (a u8 condition gives 16 elements a thread: 16 f32 values of each operand spill)
where_op = pk.kernel(min_blocks_per_sm=2, loop_strength_reduction={"cuda": False}, moves=("T",))(_where_op)
where_op_wide = pk.kernel(loop_strength_reduction={"cuda": False}, moves=("T",))(_where_op)


#: (condition, value, value tag): candle's table, then the ``f8e4m3`` spellings candle's Rust side
#: requests (``DType::F8E4M3.as_str()``; conditions u8/u32/i64 only), exported in addition
TABLE = ([(c, v, v.tag) for c in CONDS for v in VALUES] + [(c, pk.f8e4m3, "fp8_e4m3") for c in F8_CONDS]
         + [(c, pk.f8e4m3, "f8e4m3") for c in CONDS])
F8_EXTRAS = [kernel_name("where", c, "f8e4m3") for c in CONDS]
for _i, _t, _tag in TABLE:
    TERNARY.add((where_op_wide if _t.nbytes > 2 or _i.nbytes == 8 else where_op).instance(
        kernel_name("where", _i, _tag), I=_i, T=_t))


def where(cond, on_true, on_false, out=None):
    """``on_true`` where ``cond`` is non-zero, else ``on_false`` (NumPy broadcasting), with candle's kernels."""
    cond = as_device_array(cond)
    dev = cond.device
    on_true, on_false = as_device_array(on_true, dev), as_device_array(on_false, dev)
    if on_true.dtype is not on_false.dtype:
        raise TypeError(f"where: values have dtypes {on_true.dtype} and {on_false.dtype}")
    name = kernel_name("where", cond.dtype, "fp8_e4m3" if on_true.dtype is pk.f8e4m3 else on_true.dtype)
    if name not in TERNARY:
        raise TypeError(f"where: no kernel for condition {cond.dtype} and values {on_true.dtype}")
    shape = np.broadcast_shapes(cond.shape, on_true.shape, on_false.shape)
    ops = [x.broadcast_to(shape) for x in (cond, on_true, on_false)]
    out = output(ops[1], out, on_true.dtype)
    numel = out.size
    if numel:
        info = info_array(dev, shape, *(x.strides for x in ops))
        dev.get_or_load_func(name, TERNARY)[launch_stream(numel, *ops, out)](numel, len(shape), info, *map(storage, ops), out)
    return out


__all__ = ["where", "where_op", "TABLE", "CONDS", "VALUES", "F8_CONDS", "F8_EXTRAS"]
