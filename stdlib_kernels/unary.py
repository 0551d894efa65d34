"""UNARY: ``ucopy`` and candle's 23 float ops (``uelu``/``upowf`` take a parameter before the pointers).

``inp is None`` means in place on ``out``; a null ``info`` means contiguous. f16/bf16/f8 are computed
in f32 (``W``) and rounded once; f32/f64 are computed in their own type.
"""
from __future__ import annotations

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32, usize
from pykern import math as pkm

from . import UNARY, kernel_name
from ._common import as_device_array, map_in_place, map_layout
from ._common import compute_type, map1

T, W = pk.TypeVar("T"), pk.TypeVar("W")
SQRT_2_OVER_PI = 0.7978845608028654   # candle: M_2_SQRTPI * M_SQRT1_2
FRAC_1_SQRT_2 = 0.7071067811865476


@pk.func
def apply(x: T, p: T, q: T, *, K) -> T:
    """One element: ``K = (W, op)``, computed in W and rounded once to T."""
    return T(K[1](K[0](x)))


@pk.func
def apply_p(x: T, p: T, q: T, *, K) -> T:
    """One element of a parameterised op (``uelu``, ``upowf``): ``op(x, param)`` in W."""
    return T(K[1](K[0](x), K[0](p)))


def _unary(numel: usize, num_dims: usize, info: ConstPtr[usize], inp: ConstPtr[T], out: Ptr[T], *, T, W, op):
    if inp is None:  # in place (candle's null inp); its own loop keeps inp's reads unaliased (vectorisable)
        map_in_place(numel, out, T(0), T(0), NB=T.nbytes, F=apply, K=(W, op))
    else:  # only ucopy has the tiled transpose (candle's .t().contiguous())
        map_layout(numel, num_dims, info, inp, inp, inp, out, T(0), T(0), N=1, NB=T.nbytes, F=apply, K=(W, op),
                   TRANSPOSE=transpose_tiles if op is copy_ else None)


#: two blocks of 1024 an SM under candle's launch (32 registers); the 64-bit types keep the default budget
unary = pk.kernel(min_blocks_per_sm=2, loop_strength_reduction={"cuda": False})(_unary)
unary_wide = pk.kernel(loop_strength_reduction={"cuda": False})(_unary)
#: 1-byte copies: the bound on CUDA only (on gfx90a its waves-per-EU limit spills SGPRs; docs/targets/cuda.md)
unary_narrow = pk.kernel(min_blocks_per_sm={"cuda": 2}, loop_strength_reduction={"cuda": False})(_unary)


TILE = 32  # transposes move tiles of TILE elements along i by TILE * LOADS[T] along j; see transpose_tiles


@pk.func
def transpose_tiles(c: usize, r: usize, s: usize, inp: ConstPtr[T], out: Ptr[T], blocks: usize):
    """``out[i*r + j] = inp[i + j*s]`` for i < c, j < r, through shared memory, one tile of TILE (i) x rows
    (j, rows = TILE * LOADS[T]) at a time: the block reads it along the input's unit-stride dim i (a wave
    reads TILE elements of one input row), a barrier, then writes it along the output's rows (rows
    contiguous elements each), a barrier. Shared rows of TILE + 1 elements: no bank conflicts.

    Each thread has LOADS[T] loads (16 bytes) in flight: candle's launch (a block of 1024 threads per
    1024 elements) would otherwise wait on memory latency with 4 bytes a thread; its blocks beyond the
    tile count return at once. Any launch shape is correct: the first ``blocks`` blocks (those that hold
    ``map_layout``'s workers; the rest have left) take tiles in a loop of that step, and a block's threads
    cover a tile in steps of block_dim.x; edge tiles are partial. Branches around the
    barriers depend on the arguments and block ids only. Loads and shared stores are unconditional
    (straight-line, so the loads issue together): lanes outside the matrix read the tile's first element
    and write it to a spare row of ``sh`` (or to padding the write-out never reads)."""
    sh = pk.shared.array((TILE * LOADS[T] + 1, TILE + 1), T)
    rows = u32(TILE * LOADS[T])
    elems = rows * TILE
    tiles_c = (c + (TILE - 1)) // TILE
    ntiles = tiles_c * ((r + (rows - 1)) // rows)
    t = pk.thread_idx.x
    step = pk.block_dim.x
    tile = usize(pk.block_idx.x)
    while tile < ntiles:
        i0 = (tile % tiles_c) * TILE
        j0 = (tile // tiles_c) * rows
        ni = u32(min(c - i0, usize(TILE)))  # this tile's extent along i and j (smaller at the edges)
        nj = u32(min(r - j0, usize(rows)))
        src = inp + (j0 * s + i0)
        dst = out + (i0 * r + j0)
        k0 = t
        while k0 < elems:  # read: k = jj * TILE + ii; k == elems is the spare row
            for e in range(LOADS[T]):  # unrolled
                k = min(k0 + u32(e) * step, elems)
                ii = k % TILE
                jj = k // TILE
                sh[jj, ii] = src[pk.select(ii < ni and jj < nj, usize(jj) * s + ii, usize(0))]
            k0 += LOADS[T] * step
        pk.syncthreads()
        k0 = t
        while k0 < elems:  # write: k = ii * rows + jj; k == elems reads padding (ii = TILE, jj = 0)
            for e in range(LOADS[T]):
                k = min(k0 + u32(e) * step, elems)
                jj = k % rows
                ii = k // rows
                v = sh[jj, ii]
                if ii < ni and jj < nj:
                    dst[usize(ii) * r + jj] = v
            k0 += LOADS[T] * step
        tile += blocks
        if tile < ntiles:  # the next tile overwrites sh
            pk.syncthreads()


def _unary_p(numel: usize, num_dims: usize, info: ConstPtr[usize], param: T, inp: ConstPtr[T], out: Ptr[T],
             *, T, W, op):
    if inp is None:
        map_in_place(numel, out, param, param, NB=T.nbytes, F=apply_p, K=(W, op))
    else:
        map_layout(numel, num_dims, info, inp, inp, inp, out, param, param, N=1, NB=T.nbytes, F=apply_p, K=(W, op),
                   TRANSPOSE=None)


unary_p = pk.kernel(min_blocks_per_sm=2, loop_strength_reduction={"cuda": False})(_unary_p)
unary_p_wide = pk.kernel(loop_strength_reduction={"cuda": False})(_unary_p)


@pk.func
def copy_(x: T) -> T: return x   # not 'copy': the host wrapper below takes that name
@pk.func
def neg(x: T) -> T: return -x
@pk.func
def recip(x: T) -> T: return 1 / x
@pk.func
def sqr(x: T) -> T: return x * x
@pk.func
def sqrt(x: T) -> T: return pk.sqrt(x)
@pk.func
def abs_(x: T) -> T: return pk.fabs(x)
@pk.func
def ceil(x: T) -> T: return pk.ceil(x)
@pk.func
def floor(x: T) -> T: return pk.floor(x)
@pk.func
def relu(x: T) -> T: return pk.fmax(x, 0)          # NaN -> 0 (Rust's max), every dtype
@pk.func
def sign(x: T) -> T: return T(x > 0) - T(x < 0)   # NaN, +-0 -> 0


@pk.func
def round_(x: T) -> T:  # halves away from zero (roundf); x - trunc(x) is exact
    t = pk.trunc(x)
    if pk.fabs(x - t) >= 0.5:
        t += pk.copysign(1, x)
    return t


@pk.func
def exp(x: T) -> T: return pkm.exp(x)
@pk.func
def log(x: T) -> T: return pkm.log(x)
@pk.func
def sin(x: T) -> T: return pkm.sin(x)
@pk.func
def cos(x: T) -> T: return pkm.cos(x)
@pk.func
def tanh(x: T) -> T: return pkm.tanh(x)
@pk.func
def erf(x: T) -> T: return pkm.erf(x)
@pk.func
def normcdf(x: T) -> T: return pkm.normcdf(x)  # -x/sqrt(2) carried in double-word: <= 2 ulp f32, 4 f64 down the tail
@pk.func
def gelu(x: T) -> T: return 0.5 * x * (1 + pkm.tanh(SQRT_2_OVER_PI * x * (1 + 0.044715 * x * x)))
@pk.func
def gelu_erf(x: T) -> T: return (pkm.erf(x * FRAC_1_SQRT_2) + 1) * 0.5 * x
@pk.func
def silu(x: T) -> T: return x / (1 + pkm.exp(-x))
@pk.func
def sigmoid(x: T) -> T: return 1 / (1 + pkm.exp(-x))
@pk.func
def elu(x: T, alpha: T) -> T: return x if pk.copysign(1, x) > 0 else pkm.expm1(x) * alpha   # no cancellation near 0
@pk.func
def powf(x: T, e: T) -> T: return pkm.pow(x, e)


# Results rounded to 16 bits or fewer (f16, bf16, f8) need far less than f32 accuracy, and their kernels
# are bound by arithmetic: e^x from the hardware's 2^x and a reciprocal estimate (relative error below
# 2^-17 before the final rounding; exact libm and division on the host), gelu as x * sigmoid(2u), its
# tanh form without cancellation. A result may differ from the correctly rounded one by 1 ulp of its type.
LOG2E = 1.4426950408889634


@pk.func
def exp_narrow(x: T) -> T: return pk.fast_exp2(x * LOG2E)
@pk.func
def sigmoid_narrow(x: T) -> T:  # e = e^-|x| in (0, 1]: the reciprocal is of [1, 2], never of a huge or infinite value
    e = pk.fast_exp2(-pk.fabs(x) * LOG2E)
    r = pk.fast_rcp(1 + e)
    return pk.select(x >= 0, r, e * r)
@pk.func
def silu_narrow(x: T) -> T: return x * sigmoid_narrow(x)
@pk.func
def gelu_narrow(x: T) -> T: return x * sigmoid_narrow(2 * SQRT_2_OVER_PI * x * (1 + 0.044715 * x * x))


#: erfc(z) = t exp(P(t) - z^2), t = 1 / (1 + z/2) (Numerical Recipes' form, P fitted here for the precision
#: each type needs: |error of P| < 3.8e-4 for bf16/f8 (8 bits), 5.1e-5 for f16 (11 bits), minimax-like on [0, 1]),
#: scaled by log2(e) for the hardware's 2^x
ERFC_P = {bits: tuple(c * LOG2E for c in p) for bits, p in (
    (8, (-1.2651395797729492, 0.9846431016921997, 0.47051140666007996, -0.07402292639017105, -0.11636453866958618)),
    (11, (-1.265562653541565, 1.004091739654541, 0.3216527998447418, 0.3316466212272644, -0.5716335773468018,
          0.17975449562072754)))}


@pk.func
def poly(t: f32, *, coeffs) -> f32:  # Horner with fused steps (separate mul/add round twice and cost two)
    p = f32(coeffs[len(coeffs) - 1])
    for k in pk.static_range(len(coeffs) - 2, -1, -1):
        p = pk.fma(p, t, coeffs[k])
    return p


@pk.func
def gelu_erf_narrow(x: T) -> T:  # x Phi(x) = x (1 - q) for x >= 0 (q <= 1/2), x q below, q = erfc(|x| / sqrt 2) / 2
    a = pk.fabs(x)                 # from ERFC_P: no cancellation anywhere
    t = pk.fast_rcp(pk.fma(a, 0.5 * FRAC_1_SQRT_2, 1.0))
    q = (0.5 * t) * pk.fast_exp2(pk.fma(a * (-0.5 * LOG2E), a, poly(t, coeffs=ERFC_P[11 if T is f16 else 8])))
    return x * pk.select(x >= 0, 1 - q, q)


NARROW = {"exp": exp_narrow, "sigmoid": sigmoid_narrow, "silu": silu_narrow, "gelu": gelu_narrow,
          "gelu_erf": gelu_erf_narrow}
PRIMITIVE = {"neg": neg, "recip": recip, "sqr": sqr, "sqrt": sqrt, "abs": abs_, "ceil": ceil, "floor": floor,
             "round": round_, "relu": relu, "sign": sign}
MATH = {"exp": exp, "log": log, "sin": sin, "cos": cos, "tanh": tanh, "erf": erf, "normcdf": normcdf, "gelu": gelu,
        "gelu_erf": gelu_erf, "silu": silu, "sigmoid": sigmoid}
OPS = PRIMITIVE | MATH
PARAM_OPS = {"elu": elu, "powf": powf}
FLOATS = (f32, f64, f16, bf16, f8e4m3)
COPY_DTYPES = (f32, f64, u8, u32, i64, f16, bf16, f8e4m3, i16, i32)  # i16/i32: requested by candle, absent there
LOADS = {t: 16 // t.nbytes for t in COPY_DTYPES}  # transpose_tiles: 16 bytes of loads in flight per thread


def _tags(t):  # candle spells fp8 ops "fp8_e4m3", ucopy "f8_e4m3"; candle-core asks for "f8e4m3"
    return ("fp8_e4m3", "f8e4m3") if t is f8e4m3 else (t,)


for _t in COPY_DTYPES:
    for _tag in (_t.tag, "f8e4m3") if _t is f8e4m3 else (_t,):
        UNARY.add({1: unary_narrow, 8: unary_wide}.get(_t.nbytes, unary).instance(
            kernel_name("ucopy", _tag), T=_t, W=_t, op=copy_))
for _name, _op in OPS.items():
    for _t in FLOATS:
        for _tag in _tags(_t):
            UNARY.add((unary_wide if _t.nbytes == 8 else unary).instance(
                kernel_name("u" + _name, _tag), T=_t, W=compute_type(_t),
                op=NARROW.get(_name, _op) if _t.is_storage_float else _op))
for _name, _op in PARAM_OPS.items():
    for _t in FLOATS:
        for _tag in _tags(_t):
            UNARY.add((unary_p_wide if _t.nbytes == 8 else unary_p).instance(
                kernel_name("u" + _name, _tag), T=_t, W=compute_type(_t), op=_op))


# ---- host wrappers: unary.exp(x), unary.elu(x, alpha), unary.copy(x) ... --------------------------------
def _kernel_for(op: str, dtype) -> str:
    return kernel_name(op, dtype.tag if op == "ucopy" or dtype is not f8e4m3 else "fp8_e4m3")


def _wrapper(op: str, param: bool):
    def run(x, *args, out=None):
        x = as_device_array(x)
        if len(args) != param:
            raise TypeError(f"{op}() takes {'x and one parameter' if param else 'x'}")
        return map1(UNARY, _kernel_for("u" + op if op != "copy" else "ucopy", x.dtype), x, out, args,
                    tiles=2 if op in MATH else 1)
    run.__name__ = run.__qualname__ = op
    run.__doc__ = f"candle's ``u{op}`` on a device array (strided inputs allowed); ``out=x`` runs in place."
    return run


for _name in ["copy", *OPS, *PARAM_OPS]:
    globals()[_name] = _wrapper(_name, _name in PARAM_OPS)
__all__ = ["copy", *OPS, *PARAM_OPS]
