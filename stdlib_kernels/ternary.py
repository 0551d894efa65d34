"""candle's TERNARY module: ``where_{I}_{T}(numel, num_dims, info, ids, t, f, out)``.

``out[i] = t[i] if ids[i] != 0 else f[i]`` over candle's ``info`` = dims, condition, true and false
strides. candle always passes ``info``; the kernel takes its contiguous loop when ``info`` says all three
are contiguous (checked once a thread), or when ``info`` is null.
"""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, usize
from pykern.runtime.launch import storage

from . import TERNARY, kernel_name
from ._common import as_device_array, info_array, is_contiguous, launch_stream, strided_index
from ._common import output
from .binary import block_layout, broadcast_tail, operand_offset

I = pk.TypeVar("I")
T = pk.TypeVar("T")

#: condition dtypes candle dispatches, and the value dtypes it has kernels for
CONDS = (pk.u8, pk.u32, pk.i64)
VALUES = (pk.f32, pk.f64, pk.f16, pk.bf16, pk.u8, pk.u32, pk.i64)
#: candle's f8 kernels are spelled ``fp8_e4m3`` and exist for these condition dtypes
F8_CONDS = (pk.i16, pk.i32, pk.i64, pk.u32, pk.u8)


@pk.kernel
def where_op(numel: usize, num_dims: usize, info: ConstPtr[usize], ids: ConstPtr[I], t: ConstPtr[T], f: ConstPtr[T],
          out: Ptr[T], *, I, T):
    # contiguous operands, by a null info or by an info saying so (candle always passes one): decided
    # once a thread from info's 3 x num_dims strides, then the plain loop (the GPU's tiled one)
    if info is None or (is_contiguous(num_dims, info, info + num_dims) and
                        is_contiguous(num_dims, info, info + 2 * num_dims) and
                        is_contiguous(num_dims, info, info + 3 * num_dims)):
        for i in pk.grid_stride(numel):
            out[i] = pk.select(ids[i] != 0, t[i], f[i])  # both loads: no divergent branch
        return
    t_in = broadcast_tail(num_dims, info, info + 2 * num_dims)
    t_out = block_layout(num_dims, info, info + 2 * num_dims)
    f_in = broadcast_tail(num_dims, info, info + 3 * num_dims)
    f_out = block_layout(num_dims, info, info + 3 * num_dims)
    for i in pk.grid_stride(numel):
        tv = t[operand_offset(i, numel, t_in, t_out, num_dims, info, info + 2 * num_dims)]
        fv = f[operand_offset(i, numel, f_in, f_out, num_dims, info, info + 3 * num_dims)]
        # the condition goes through the general strided index: one layout fewer to keep in
        # scalar registers (three spilled SGPRs on wave64 AMDGPU)
        out[i] = tv if ids[strided_index(i, num_dims, info, info + num_dims)] != 0 else fv


#: (condition, value, value tag): candle's table, then the ``f8e4m3`` spellings candle's Rust side
#: requests (``DType::F8E4M3.as_str()``; conditions u8/u32/i64 only), exported in addition
TABLE = ([(c, v, v.tag) for c in CONDS for v in VALUES] + [(c, pk.f8e4m3, "fp8_e4m3") for c in F8_CONDS]
         + [(c, pk.f8e4m3, "f8e4m3") for c in CONDS])
F8_EXTRAS = [kernel_name("where", c, "f8e4m3") for c in CONDS]
for _i, _t, _tag in TABLE:
    TERNARY.add(where_op.instance(kernel_name("where", _i, _tag), I=_i, T=_t))


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
