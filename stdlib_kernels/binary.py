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
from ._common import as_device_array, info_array, launch_stream, map_layout
from ._common import output

T = pk.TypeVar("T")
U = pk.TypeVar("U")

DTYPES = (pk.f32, pk.f64, pk.f16, pk.bf16, pk.f8e4m3, pk.u8, pk.u32, pk.i64)


@pk.func
def apply(a: T, b: T, p: T, q: T, *, K) -> K[1]:
    """One element: ``K = (op, U)``."""
    return K[0](a, b)


def _binary_op(numel: usize, num_dims: usize, info: ConstPtr[usize], lhs: ConstPtr[T], rhs: ConstPtr[T],
               out: Ptr[U], *, T, U, op):
    # candle passes info even for contiguous operands: map_layout tells them apart once a thread, and
    # the threads past its tiles (most of candle's grid) leave before reading info
    map_layout(numel, num_dims, info, lhs, rhs, lhs, out, T(0), T(0), N=2,
               NB=T.nbytes if T.nbytes < U.nbytes else U.nbytes, F=apply, K=(op, U), TRANSPOSE=None)


#: two blocks of 1024 an SM under candle's launch (32 registers); the 64-bit types keep the default budget
binary_op = pk.kernel(min_blocks_per_sm=2, loop_strength_reduction={"cuda": False})(_binary_op)
binary_op_wide = pk.kernel(loop_strength_reduction={"cuda": False})(_binary_op)


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
            BINARY.add((binary_op_wide if _t.nbytes == 8 else binary_op).instance(
                kernel_name(ROOT[_name], _tag), T=_t, U=_u, op=_op))


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
