"""candle's BINARY module: ``b{add,sub,mul,div,maximum,minimum}_{T}`` and ``{eq,ne,lt,le,gt,ge}_{T}`` (u8 out).

One generic kernel, instantiated per (op, dtype). Semantics follow candle's CPU backend: arithmetic
in T (f16/bf16/f8 computed in f32 and rounded once), integers wrap, integer division by zero gives
all bits set (candle: a Rust panic on the CPU, garbage on CUDA); ``maximum(a, b) = b if a < b else a``
and ``minimum(a, b) = b if a > b else a`` for every dtype, so a NaN lhs propagates and a NaN rhs is
ignored (candle's CUDA kernels: fmax/fmin for f32/f64/f8, NaN-propagating for f16/bf16).
"""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, usize
from pykern.runtime.launch import storage

from . import BINARY, kernel_name
from ._common import as_device_array, info_array, is_contiguous, launch_stream, strided_index
from ._common import output

T = pk.TypeVar("T")
U = pk.TypeVar("U")

DTYPES = (pk.f32, pk.f64, pk.f16, pk.bf16, pk.f8e4m3, pk.u8, pk.u32, pk.i64)


@pk.func
def block_layout(num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize]) -> usize:
    """``outer`` when element ``i`` is at ``(i // inner) % outer``: broadcast leading dims, a contiguous
    block of ``outer`` elements, a broadcast tail of ``inner`` (``broadcast_tail``); else 0."""
    d = num_dims
    while d > 0 and (dims[d - 1] == 1 or strides[d - 1] == 0):  # the broadcast tail
        d -= 1
    acc: usize = 1
    while d > 0 and (dims[d - 1] == 1 or strides[d - 1] == acc):  # the contiguous block
        acc *= dims[d - 1]
        d -= 1
    while d > 0:  # broadcast leading dims
        d -= 1
        if dims[d] != 1 and strides[d] != 0:
            return 0
    return acc


@pk.func
def broadcast_tail(num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize]) -> usize:
    """The element count of the trailing dims the operand is broadcast over."""
    inner: usize = 1
    d = num_dims
    while d > 0:
        d -= 1
        if dims[d] != 1 and strides[d] != 0:
            return inner
        inner *= dims[d]
    return inner


@pk.func
def operand_offset(i: usize, numel: usize, inner: usize, outer: usize, num_dims: usize, dims: ConstPtr[usize],
                   strides: ConstPtr[usize]) -> usize:
    """Element ``i``'s offset: the block form if ``outer`` is set (contiguous: 1, numel), else strided.
    Below 2**32 elements the divisions are 32-bit (several times cheaper on GPUs)."""
    if inner == 1 and outer == numel:
        return i
    if numel > 0xFFFFFFFF:
        return strided_index(i, num_dims, dims, strides) if outer == 0 else (i // inner) % outer
    if outer == 0:
        offset: usize = 0
        rest = pk.u32(i)
        d = num_dims
        while d > 0:
            d -= 1
            n = pk.u32(dims[d])
            offset += usize(rest % n) * strides[d]
            rest //= n
        return offset
    if inner == 1:
        return usize(pk.u32(i) % pk.u32(outer))
    return usize(pk.u32(i) // pk.u32(inner) % pk.u32(outer))


@pk.kernel
def binary_op(numel: usize, num_dims: usize, info: ConstPtr[usize], lhs: ConstPtr[T], rhs: ConstPtr[T],
              out: Ptr[U], *, T, U, op):
    # contiguous operands, by a null info or by an info saying so (candle always passes one): decided
    # once a thread from info's 2 x num_dims strides, then the plain loop (the GPU's tiled one)
    if info is None or (is_contiguous(num_dims, info, info + num_dims) and
                        is_contiguous(num_dims, info, info + 2 * num_dims)):
        for i in pk.grid_stride(numel):
            out[i] = op(lhs[i], rhs[i])
        return
    l_in = broadcast_tail(num_dims, info, info + num_dims)
    l_out = block_layout(num_dims, info, info + num_dims)
    r_in = broadcast_tail(num_dims, info, info + 2 * num_dims)
    r_out = block_layout(num_dims, info, info + 2 * num_dims)
    for i in pk.grid_stride(numel):
        out[i] = op(lhs[operand_offset(i, numel, l_in, l_out, num_dims, info, info + num_dims)],
                    rhs[operand_offset(i, numel, r_in, r_out, num_dims, info, info + 2 * num_dims)])


# candle's CPU ops (``v1 < v2 ? v2 : v1`` for maximum); comparisons give 0/1 as u8
@pk.func
def add(a: T, b: T) -> T: return a + b  # noqa: E704
@pk.func
def sub(a: T, b: T) -> T: return a - b  # noqa: E704
@pk.func
def mul(a: T, b: T) -> T: return a * b  # noqa: E704
@pk.func
def maximum(a: T, b: T) -> T: return b if a < b else a  # noqa: E704
@pk.func
def minimum(a: T, b: T) -> T: return b if a > b else a  # noqa: E704
@pk.func
def eq(a: T, b: T) -> pk.u8: return pk.u8(a == b)  # noqa: E704
@pk.func
def ne(a: T, b: T) -> pk.u8: return pk.u8(a != b)  # noqa: E704
@pk.func
def lt(a: T, b: T) -> pk.u8: return pk.u8(a < b)  # noqa: E704
@pk.func
def le(a: T, b: T) -> pk.u8: return pk.u8(a <= b)  # noqa: E704
@pk.func
def gt(a: T, b: T) -> pk.u8: return pk.u8(a > b)  # noqa: E704
@pk.func
def ge(a: T, b: T) -> pk.u8: return pk.u8(a >= b)  # noqa: E704
@pk.func
def div(a: T, b: T) -> T:
    if T.is_float:
        return a / b
    return a // b  # truncating; x // 0 is all bits set


ARITH = {"add": add, "sub": sub, "mul": mul, "div": div, "maximum": maximum, "minimum": minimum}
CMP = {"eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge}
#: candle's kernel root per wrapper name
ROOT = {**{n: "b" + n for n in ARITH}, **{n: n for n in CMP}}
#: spellings candle's Rust side requests (``DType::F8E4M3.as_str()``) next to the PTX's ``f8_e4m3``
F8_EXTRAS = [kernel_name(ROOT[n], "f8e4m3") for n in ROOT]

for _name, _op in {**ARITH, **CMP}.items():
    for _t in DTYPES:
        _u = _t if _name in ARITH else pk.u8
        for _tag in (_t.tag, "f8e4m3") if _t is pk.f8e4m3 else (_t.tag,):
            BINARY.add(binary_op.instance(kernel_name(ROOT[_name], _tag), T=_t, U=_u, op=_op))


def _launch(name: str, a, b, out=None):
    a = as_device_array(a)
    b = as_device_array(b, a.device)
    if a.dtype is not b.dtype or a.dtype not in DTYPES:
        raise TypeError(f"{name}: no kernel for dtypes {a.dtype} and {b.dtype}; dtypes: {', '.join(map(str, DTYPES))}")
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = a.broadcast_to(shape), b.broadcast_to(shape)
    out = output(a, out, a.dtype if name in ARITH else pk.u8)
    if out.size:
        info = info_array(a.device, shape, a.strides, b.strides)
        a.device.get_or_load_func(kernel_name(ROOT[name], a.dtype), BINARY)[launch_stream(out.size, a, out)](
            out.size, len(shape), info, storage(a), storage(b), out)  # the layouts travel in info
    return out


def _wrapper(name: str):
    def fn(a, b, out=None):
        return _launch(name, a, b, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} of ``a`` and ``b`` (NumPy broadcasting) with candle's ``{ROOT[name]}`` kernels."
    return fn


add, sub, mul, div, maximum, minimum, eq, ne, lt, le, gt, ge = (_wrapper(n) for n in ROOT)
__all__ = list(ROOT) + ["binary_op", "DTYPES", "F8_EXTRAS"]
