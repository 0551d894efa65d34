"""Expressions: integer and float arithmetic, shifts, comparisons, boolean logic, pointers, folding."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, usize

T = pk.TypeVar("T")
INTS = [i8, i16, i32, i64, u8, u16, u32, u64]


def run(dev, kern, grid, block, *args, shared_mem=0):
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, shared_mem=shared_mem, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


def wrap(v: int, ty) -> int:
    lo, hi = ty.int_range
    return (v - lo) % (hi - lo + 1) + lo


def cdiv(a: int, b: int, ty) -> int:
    if b == 0:
        return wrap(-1, ty)          # all bits set
    q = abs(a) // abs(b)
    return wrap(q if (a >= 0) == (b >= 0) else -q, ty)


def cmod(a: int, b: int, ty) -> int:
    if b == 0:
        return a
    return wrap(a - b * cdiv(a, b, ty), ty) if not (a == ty.int_range[0] and b == -1) else 0


# ---------------------------------------------------------------------------- integers, every type
N_INT_OPS = 16


@pk.kernel
def k_int_ops(a: ConstPtr[T], b: ConstPtr[T], s: ConstPtr[u32], out: Ptr[T], *, T):
    i = pk.global_id()
    x = a[i]
    y = b[i]
    o = out + i * 16
    o[0] = x + y
    o[1] = x - y
    o[2] = x * y
    o[3] = x // y
    o[4] = x % y
    o[5] = x & y
    o[6] = x | y
    o[7] = x ^ y
    o[8] = x << T(s[i])
    o[9] = x >> T(s[i])
    o[10] = -x
    o[11] = ~x
    o[12] = min(x, y)
    o[13] = max(x, y)
    o[14] = abs(x)
    o[15] = x * 3 + 1


INT_MOD = pk.Module("test_int_ops").add(*(k_int_ops.instance(f"int_ops_{t.name}", T=t) for t in INTS))


def _int_inputs(ty, n=256):
    lo, hi = ty.int_range
    rng = np.random.default_rng(ty.bits + (ty.is_signed << 7))
    special = [0, 1, 2, 3, 7, lo, hi, lo + 1, hi - 1, -1, -2, -7, 100, -100]
    special = [v for v in special if lo <= v <= hi]
    a = np.array(special * 2 + list(rng.integers(lo, hi, n - 2 * len(special), endpoint=True, dtype=np.int64 if ty.is_signed else np.uint64)), dtype=ty.np)
    b = np.array([wrap(v, ty) for v in [1, -1, 0, lo, hi, 3, -3, 2] * (n // 8)], dtype=ty.np)
    b[::5] = rng.integers(lo, hi, len(b[::5]), endpoint=True, dtype=np.int64 if ty.is_signed else np.uint64).astype(ty.np)
    a, b = a[:n], b[:n]
    return a, b


@pytest.mark.parametrize("ty", INTS, ids=lambda t: t.name)
def test_integer_ops_wrap_and_c_division(device, ty):
    n = 256
    a, b = _int_inputs(ty, n)
    s = (np.arange(n) % ty.bits).astype(np.uint32)
    fn = device.get_or_load_func(f"int_ops_{ty.name}", INT_MOD)
    da, db, ds, do = device.to_device(a), device.to_device(b), device.to_device(s), device.zeros(n * 16, ty.np)
    fn[n // 64, 64](da, db, ds, do)
    got = do.to_host().reshape(n, 16)
    mask = (1 << ty.bits) - 1
    for k in range(n):
        x, y, sh = int(a[k]), int(b[k]), int(s[k])
        ushr = (x & mask) >> sh
        exp = [wrap(x + y, ty), wrap(x - y, ty), wrap(x * y, ty), cdiv(x, y, ty), cmod(x, y, ty),
               wrap(x & y, ty), wrap(x | y, ty), wrap(x ^ y, ty), wrap(x << sh, ty),
               x >> sh if ty.is_signed else ushr, wrap(-x, ty), wrap(~x, ty), min(x, y), max(x, y),
               wrap(abs(x), ty), wrap(x * 3 + 1, ty)]
        assert [int(v) for v in got[k]] == exp, (ty, x, y, sh)


@pk.kernel
def k_div_edge(out: Ptr[i32], x: i32, y: i32, ux: u32, uy: u32, uout: Ptr[u32]):
    out[0] = x // y
    out[1] = x % y
    uout[0] = ux // uy
    uout[1] = ux % uy


@pytest.mark.parametrize("x,y", [(7, 0), (-7, 0), (0, 0), (-2**31, -1), (-7, 2), (7, -2), (-7, -2), (-2**31, 0)])
def test_division_edge_cases_do_not_trap(device, x, y):
    out, uout = run(device, k_div_edge, 1, 1, np.zeros(2, np.int32), x, y, x & 0xFFFFFFFF, y & 0xFFFFFFFF,
                    np.zeros(2, np.uint32))
    assert out.tolist() == [cdiv(x, y, i32), cmod(x, y, i32)]
    assert uout.tolist() == [cdiv(x & 0xFFFFFFFF, y & 0xFFFFFFFF, u32), cmod(x & 0xFFFFFFFF, y & 0xFFFFFFFF, u32)]


@pk.kernel
def k_shift_kinds(out: Ptr[i32], uout: Ptr[u32], x: i32, ux: u32):
    for k in range(32):
        out[k] = x >> k
        uout[k] = ux >> u32(k)


def test_shifts_arithmetic_for_signed_logical_for_unsigned(device):
    out, uout = run(device, k_shift_kinds, 1, 1, np.zeros(32, np.int32), np.zeros(32, np.uint32), -123456789, 0xF0000001)
    assert out.tolist() == [-123456789 >> k for k in range(32)]
    assert uout.tolist() == [0xF0000001 >> k for k in range(32)]


# ---------------------------------------------------------------------------- floats
def _fma(x, y, z, np_ty=np.float64) -> float:
    """x * y + z rounded once (exact rational arithmetic, then one correctly rounded conversion)."""
    x, y, z = float(x), float(y), float(z)
    if not all(map(np.isfinite, (x, y, z))):
        return x * y + z
    r = Fraction(x) * Fraction(y) + Fraction(z)
    if r == 0:
        return x * y + z      # the sign of an exact zero follows IEEE's rules
    try:
        f = float(r)
    except OverflowError:
        return float("inf") if r > 0 else float("-inf")
    if np_ty is np.float64:
        return f
    # round the exact value to the nearest f32 (ties to even) by looking at the neighbours
    c = np_ty(f)
    if not np.isfinite(c):
        return float(c)
    cands = [c, np.nextafter(c, np_ty(np.inf)), np.nextafter(c, np_ty(-np.inf))]
    cands = [v for v in cands if np.isfinite(v)]
    best = min(cands, key=lambda v: (abs(Fraction(float(v)) - r), int(np.array(v).view(np.uint32)) & 1))
    return float(best)


@pk.kernel
def k_float_ops(a: ConstPtr[T], b: ConstPtr[T], out: Ptr[T], *, T):
    i = pk.global_id()
    x = a[i]
    y = b[i]
    o = out + i * 12
    o[0] = x + y
    o[1] = x - y
    o[2] = x * y
    o[3] = x / y
    o[4] = -x
    o[5] = abs(x)
    o[6] = x // y
    o[7] = x % y
    o[8] = x * 2 + 0.5
    o[9] = x ** 3
    o[10] = pk.fma(x, y, x)
    o[11] = pk.sqrt(abs(x))


FLOAT_MOD = pk.Module("test_float_ops").add(*(k_float_ops.instance(f"float_ops_{t.name}", T=t) for t in (f32, f64)))


@pytest.mark.parametrize("ty", [f32, f64], ids=lambda t: t.name)
def test_ieee_float_ops(device, ty):
    sp = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.25, np.inf, -np.inf, np.nan, 1e-40, 1e30, -2.5, 1e-300, 5e-324]
    a = np.array(sp, dtype=ty.np).repeat(len(sp))
    b = np.tile(np.array(sp, dtype=ty.np), len(sp))
    rng = np.random.default_rng(5)
    a = np.concatenate([a, rng.standard_normal(64).astype(ty.np) * 100])
    b = np.concatenate([b, rng.standard_normal(64).astype(ty.np)])
    n = len(a)
    fn = device.get_or_load_func(f"float_ops_{ty.name}", FLOAT_MOD)
    do = device.zeros(n * 12, ty.np)
    fn[1, n](device.to_device(a), device.to_device(b), do)
    got = do.to_host().reshape(n, 12)
    with np.errstate(all="ignore"):
        exp = np.stack([a + b, a - b, a * b, a / b, -a, np.abs(a), np.floor(a / b), np.fmod(a, b),
                        a * ty.np.type(2) + ty.np.type(0.5), a * a * a,
                        np.array([_fma(x, y, x, ty.np.type) for x, y in zip(a, b)]).astype(ty.np),
                        np.sqrt(np.abs(a))], axis=1)
    np.testing.assert_array_equal(got, exp)
    # signs of zeros survive (a NaN's sign after negation is the target's: NVIDIA returns its canonical NaN)
    num = ~np.isnan(a)
    assert np.array_equal(np.signbit(got[num, 4]), np.signbit(-a[num]))


# ---------------------------------------------------------------------------- comparisons and logic
@pk.kernel
def k_compare(a: ConstPtr[i32], b: ConstPtr[i32], c: ConstPtr[i32], out: Ptr[u8]):
    i = pk.global_id()
    x = a[i]
    y = b[i]
    z = c[i]
    o = out + i * 10
    o[0] = u8(x < y)
    o[1] = u8(x <= y)
    o[2] = u8(x > y)
    o[3] = u8(x >= y)
    o[4] = u8(x == y)
    o[5] = u8(x != y)
    o[6] = u8(x < y < z)
    o[7] = u8(x <= y != z > 0)
    o[8] = u8(0 <= x < 5)
    o[9] = u8(not x < y)


def test_comparisons_and_chains(device):
    rng = np.random.default_rng(2)
    a, b, c = rng.integers(-3, 6, (3, 256)).astype(np.int32)
    got = run(device, k_compare, 4, 64, a, b, c, np.zeros(2560, np.uint8))[3].reshape(256, 10)
    for row, x, y, z in zip(got.tolist(), a.tolist(), b.tolist(), c.tolist()):
        assert row == [int(v) for v in (x < y, x <= y, x > y, x >= y, x == y, x != y, x < y < z,
                                         x <= y != z > 0, 0 <= x < 5, not x < y)]


@pk.kernel
def k_chain_side_effect(p: Ptr[i32], out: Ptr[u8]):
    # the middle operand of a chain is evaluated once: the atomic increments exactly once
    out[0] = u8(0 <= pk.atomic.add(p, 0, 1) < 100)


def test_chain_evaluates_middle_operand_once(device):
    p, out = run(device, k_chain_side_effect, 1, 1, np.zeros(1, np.int32), np.zeros(1, np.uint8))
    assert p[0] == 1 and out[0] == 1


@pk.kernel
def k_float_compare(a: ConstPtr[f32], b: ConstPtr[f32], out: Ptr[u8]):
    i = pk.global_id()
    o = out + i * 6
    o[0] = u8(a[i] < b[i])
    o[1] = u8(a[i] <= b[i])
    o[2] = u8(a[i] > b[i])
    o[3] = u8(a[i] >= b[i])
    o[4] = u8(a[i] == b[i])
    o[5] = u8(a[i] != b[i])


def test_float_comparisons_ieee(device):
    sp = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, np.nan], np.float32)
    a, b = sp.repeat(6), np.tile(sp, 6)
    got = run(device, k_float_compare, 1, 36, a, b, np.zeros(216, np.uint8))[2].reshape(36, 6)
    exp = np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b], 1).astype(np.uint8)
    np.testing.assert_array_equal(got, exp)


@pk.kernel
def k_logic(p: ConstPtr[i32], flags: ConstPtr[i32], out: Ptr[i32]):
    i = pk.global_id()
    f = flags[i]
    # short-circuit: with a null p, the load on the right is never executed
    a = 1 if p is not None and p[i] > 0 else 0
    b = 1 if p is None or p[i] > 0 else 0
    c = 1 if not (f > 2) and (f != 0 or f == 5) else 0
    d = 1 if f and not f == 3 else 0         # an int as a condition means != 0
    out[i * 4] = a
    out[i * 4 + 1] = b
    out[i * 4 + 2] = c
    out[i * 4 + 3] = d


def test_and_or_not_short_circuit(device):
    f = np.arange(-2, 6, dtype=np.int32).repeat(4)
    n = len(f)
    pvals = np.arange(n, dtype=np.int32) - 10
    exp_c = [int(not f_ > 2 and (f_ != 0 or f_ == 5)) for f_ in f.tolist()]
    exp_d = [int(bool(f_) and not f_ == 3) for f_ in f.tolist()]
    got = run(device, k_logic, 1, n, pvals, f, np.zeros(4 * n, np.int32))[2].reshape(n, 4)
    assert got[:, 0].tolist() == [int(v > 0) for v in pvals.tolist()]
    assert got[:, 1].tolist() == [int(v > 0) for v in pvals.tolist()]
    assert got[:, 2].tolist() == exp_c and got[:, 3].tolist() == exp_d
    # a null pointer: dereferencing it would crash the process; the guards prevent it
    got = run(device, k_logic, 1, n, None, f, np.zeros(4 * n, np.int32))[1].reshape(n, 4)
    assert got[:, 0].tolist() == [0] * n and got[:, 1].tolist() == [1] * n


@pk.kernel
def k_ifexp(x: ConstPtr[f32], out: Ptr[f32]):
    i = pk.global_id()
    v = x[i]
    out[i] = v if v > 0 else -v * 2 if v < -1 else 0.25


def test_conditional_expression(device):
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    got = run(device, k_ifexp, 1, 64, x, np.zeros(64, np.float32))[1]
    np.testing.assert_array_equal(got, np.where(x > 0, x, np.where(x < -1, -x * 2, np.float32(0.25))))


# ---------------------------------------------------------------------------- pointers
@pk.kernel
def k_pointers(base: ConstPtr[i32], out: Ptr[i32]):
    i = pk.global_id()
    p = base + 10             # offset
    q = p + i                 # dynamic offset
    r = q - 10                # negative offset back to base + i
    s = base + pk.i64(i) + (-3)
    out[i * 4] = q[0]
    out[i * 4 + 1] = r[0]
    out[i * 4 + 2] = p[pk.i64(i) - 5]   # negative index
    out[i * 4 + 3] = s[3]


def test_pointer_offsets_and_negative_indices(device):
    base = np.arange(100, 200, dtype=np.int32)
    got = run(device, k_pointers, 1, 32, base, np.zeros(128, np.int32))[1].reshape(32, 4)
    i = np.arange(32)
    np.testing.assert_array_equal(got, np.stack([base[10 + i], base[i], base[5 + i], base[i]], 1))


@pk.kernel
def k_null(p: Ptr[f32], q: ConstPtr[f32], out: Ptr[i32]):
    out[0] = 1 if p is None else 0
    out[1] = 1 if p is not None else 0
    out[2] = 1 if q is None else 0
    out[3] = 1 if None is q else 0


def test_null_tests(device):
    arr = np.zeros(4, np.float32)
    assert run(device, k_null, 1, 1, None, arr, np.zeros(4, np.int32))[1].tolist() == [1, 0, 0, 0]
    assert run(device, k_null, 1, 1, arr, None, np.zeros(4, np.int32))[1].tolist() == [0, 1, 1, 1]


# ---------------------------------------------------------------------------- folding and constants
SCALE = 3
LIMIT = 2 ** 40


@pk.kernel
def k_folding(out: Ptr[i64], x: ConstPtr[i64]):
    i = pk.global_id()
    k = (SCALE * 4 + 1) // 2 - (-7 // 2) + (-7 % 3)     # C semantics when folded too: 6 + 3 - 1
    out[i * 3] = x[i] * k
    out[i * 3 + 1] = x[i] + LIMIT                         # a big literal adopts i64
    out[i * 3 + 2] = pk.i64(1 << 33) + pk.i64(pk.i8(300))  # folded casts wrap like run-time casts


def test_constant_folding_c_semantics(device):
    x = np.arange(8, dtype=np.int64)
    got = run(device, k_folding, 1, 8, np.zeros(24, np.int64), x)[0].reshape(8, 3)
    assert got[:, 0].tolist() == (x * 8).tolist()
    assert got[:, 1].tolist() == (x + 2 ** 40).tolist()
    assert got[:, 2].tolist() == [2 ** 33 + 44] * 8


@pk.kernel
def k_literals(out: Ptr[f64], ux: ConstPtr[u8]):
    i = pk.global_id()
    v = ux[i] + 250            # u8 literal arithmetic wraps in u8
    w = ux[i] * 2
    out[i * 3] = f64(v)
    out[i * 3 + 1] = f64(w)
    out[i * 3 + 2] = 1.0 / 3.0 + f64(0)   # folded in double precision, stored as f64


def test_literals_adopt_operand_type(device):
    ux = np.arange(0, 256, 4, dtype=np.uint8)
    got = run(device, k_literals, 1, 64, np.zeros(192, np.float64), ux)[0].reshape(64, 3)
    assert got[:, 0].tolist() == [float((int(v) + 250) % 256) for v in ux]
    assert got[:, 1].tolist() == [float((int(v) * 2) % 256) for v in ux]
    assert got[0, 2] == 1.0 / 3.0


@pk.kernel
def k_bitcast(x: ConstPtr[f32], out: Ptr[u32], back: Ptr[f32]):
    i = pk.global_id()
    b = pk.bitcast(x[i], u32)
    out[i] = b
    back[i] = pk.bitcast(b ^ u32(0x80000000), f32)


def test_bitcast(device):
    x = np.array([0.0, -0.0, 1.0, -2.5, np.inf, 1e-45], np.float32)
    _, out, back = run(device, k_bitcast, 1, 6, x, np.zeros(6, np.uint32), np.zeros(6, np.float32))
    np.testing.assert_array_equal(out, x.view(np.uint32))
    np.testing.assert_array_equal(back, -x)


@pk.kernel
def k_minmax_float(a: ConstPtr[f32], b: ConstPtr[f32], out: Ptr[f32]):
    i = pk.global_id()
    o = out + i * 4
    o[0] = pk.fmin(a[i], b[i])
    o[1] = pk.fmax(a[i], b[i])
    o[2] = pk.minimum(a[i], b[i])
    o[3] = pk.maximum(a[i], b[i])


def test_float_min_max_nan_rules(device):
    sp = np.array([1.0, -1.0, np.nan, np.inf, -np.inf], np.float32)
    a, b = sp.repeat(5), np.tile(sp, 5)
    got = run(device, k_minmax_float, 1, 25, a, b, np.zeros(100, np.float32))[2].reshape(25, 4)
    np.testing.assert_array_equal(got, np.stack([np.fmin(a, b), np.fmax(a, b), np.minimum(a, b), np.maximum(a, b)], 1))
