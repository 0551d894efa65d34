"""Types: explicit casts between every pair of dtypes, storage floats, promotion, bool."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, bool_, f8e4m3, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

S = pk.TypeVar("S")
D = pk.TypeVar("D")
ALL = [bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3]
F8_MAX = 448.0


def run(dev, kern, grid, block, *args, shared_mem=0):
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, shared_mem=shared_mem, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


@pk.kernel
def k_cast(n: pk.usize, x: ConstPtr[S], out: Ptr[D], *, S, D):
    for i in pk.grid_stride(n):
        out[i] = D(x[i])


CAST_MOD = pk.Module("test_casts").add(*(k_cast.instance(f"cast_{s.name}_{d.name}", S=s, D=d)
                                         for s in ALL for d in ALL))


def _inputs(ty) -> np.ndarray:
    if ty is bool_:
        return np.array([False, True] * 8, dtype=np.bool_)
    if ty.is_int:
        lo, hi = ty.int_range
        vals = [0, 1, -1, 2, 7, -7, 100, -100, 127, 128, -128, -129, 255, 256, 1000, -1000, 65535, 65536,
                2**31 - 1, -2**31, 2**31, 2**32 - 1, 2**53 + 1, -2**53 - 3, 2**63 - 1, -2**63, 2**64 - 1, lo, hi,
                12345678, -87654321, 16777217]
        return np.array(sorted({v for v in vals if lo <= v <= hi}), dtype=ty.np)
    vals = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 0.99, -0.99, 1.0, -1.0, 3.75, 100.4, -100.6, 127.9, 128.0,
            -128.0, -129.5, 255.5, 256.0, 300.0, 440.0, -440.0, 65504.0, 70000.0, -70000.0, 1e10, -1e10, 3e9,
            -3e9, 5e18, 2e19, -1e19, 1e30, 1e-3, 1e-6, 1e-40, 1e-310, np.inf, -np.inf, np.nan, 0.1, 1 / 3,
            16777217.0, 1.00048828125, 3.0517578125e-05]
    with np.errstate(all="ignore"):   # 1e30 -> f16 is inf, as intended
        arr = np.array(vals, dtype=np.float64).astype(ty.np)
    return arr if ty is not f8e4m3 else \
        np.array([v for v in vals if not np.isfinite(v) or abs(v) <= F8_MAX], np.float32).astype(ty.np)


def _round_float(x: np.ndarray, d) -> np.ndarray:
    """float64 values rounded to ``d`` as pykern defines it (ml_dtypes; fp8 saturates to ±448, ±inf too)."""
    if d is f8e4m3:
        with np.errstate(all="ignore"):
            r = x.astype(ml_dtypes.float8_e4m3fn)
        fin = ~np.isnan(x) & np.isnan(r.astype(np.float32))   # saturating: ±inf too
        r[fin] = np.copysign(F8_MAX, x[fin]).astype(ml_dtypes.float8_e4m3fn)
        return r
    with np.errstate(all="ignore"):
        return x.astype(d.np)


def _reference(x: np.ndarray, s, d) -> np.ndarray:
    if d is bool_:
        return (x.astype(np.float64) != 0) if s.is_float else (x != 0)
    if s is bool_:
        return x.astype(np.uint8).astype(np.float64).astype(d.np) if d.is_float else x.astype(d.np)
    if s.is_int and d.is_int:
        lo, hi = d.int_range
        return np.array([(int(v) - lo) % (hi - lo + 1) + lo for v in x], dtype=d.np)
    if s.is_int and d.is_float:  # Python's int -> float rounds correctly; the inputs avoid double rounding
        return _round_float(np.array([float(int(v)) for v in x], np.float64), d)
    xs = x.astype(np.float64)
    if d.is_int:
        lo, hi = d.int_range
        out = []
        for v in xs:
            if np.isnan(v):
                out.append(0)
            elif v >= hi:
                out.append(hi)
            elif v <= lo:
                out.append(lo)
            else:
                out.append(int(np.trunc(v)))
        return np.array(out, dtype=d.np)
    return _round_float(xs, d)


@pytest.mark.parametrize("s", ALL, ids=lambda t: t.name)
def test_casts_between_all_dtypes(device, s):
    x = _inputs(s)
    n = len(x)
    dx = device.to_device(x)
    for d in ALL:
        fn = device.get_or_load_func(f"cast_{s.name}_{d.name}", CAST_MOD)
        do = device.zeros(n, d.np)
        fn[1, 64](n, dx, do)
        got = do.to_host()
        exp = _reference(x, s, d)
        if d.is_float:
            g, e = got.astype(np.float64), exp.astype(np.float64)
            bad = ~((g == e) & (np.signbit(g) == np.signbit(e)) | (np.isnan(g) & np.isnan(e)))
        else:
            bad = got != exp
        assert not bad.any(), f"{s.name} -> {d.name}: inputs {x[bad]} gave {got[bad]}, expected {exp[bad]}"


def test_float_to_int_saturates_and_nan_is_zero(device):
    x = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 2.9, -2.9, 2**31, -2**31 - 1.0], np.float32)
    got = run(device, k_cast.instance(S=f32, D=i32), 1, 16, len(x), x, np.zeros(len(x), np.int32))[1]
    assert got.tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 2**31 - 1, -2**31]
    got = run(device, k_cast.instance(S=f32, D=u8), 1, 16, len(x), x, np.zeros(len(x), np.uint8))[1]
    assert got.tolist() == [0, 255, 0, 255, 0, 2, 0, 255, 0]


# ---------------------------------------------------------------------------- storage floats
T = pk.TypeVar("T")


@pk.kernel
def k_storage_ops(a: ConstPtr[T], b: ConstPtr[T], out: Ptr[T], flags: Ptr[u8], *, T):
    i = pk.global_id()
    x = a[i]
    y = b[i]
    o = out + i * 9
    o[0] = x + y
    o[1] = x - y
    o[2] = x * y
    o[3] = x / y
    o[4] = -x
    o[5] = abs(x)
    o[6] = x * 2 + 1          # two roundings: (x * 2) then + 1
    o[7] = min(x, y)
    o[8] = T(f32(x) * f32(y) + f32(x))   # computed in f32, rounded once
    flags[i * 2] = u8(x < y)
    flags[i * 2 + 1] = u8(x == y)


STORAGE_MOD = pk.Module("test_storage").add(*(k_storage_ops.instance(f"storage_{t.name}", T=t)
                                               for t in (f16, bf16, f8e4m3)))


@pytest.mark.parametrize("ty", [f16, bf16, f8e4m3], ids=lambda t: t.name)
def test_storage_float_arithmetic_rounds_like_ml_dtypes(device, ty):
    rng = np.random.default_rng(3)
    scale = 20.0 if ty is f8e4m3 else 1000.0
    a = (rng.standard_normal(512) * scale).astype(np.float32)
    b = (rng.standard_normal(512) * scale / 10).astype(np.float32)
    a[:6] = [0.0, -0.0, np.nan, 1.0, 300.0, -300.0]
    b[:6] = [0.0, 1.0, 1.0, 0.0, 300.0, 300.0]
    a, b = _round_float(a.astype(np.float64), ty), _round_float(b.astype(np.float64), ty)
    n = len(a)
    fn = device.get_or_load_func(f"storage_{ty.name}", STORAGE_MOD)
    do, dfl = device.zeros(n * 9, ty.np), device.zeros(n * 2, np.uint8)
    fn[n // 64, 64](device.to_device(a), device.to_device(b), do, dfl)
    got = do.to_host().reshape(n, 9).astype(np.float64)
    af, bf = a.astype(np.float32), b.astype(np.float32)

    def rnd(v):
        return _round_float(np.asarray(v, np.float32).astype(np.float64), ty).astype(np.float64)
    with np.errstate(all="ignore"):
        exp = np.stack([rnd(af + bf), rnd(af - bf), rnd(af * bf), rnd(af / bf), rnd(-af), rnd(np.abs(af)),
                        rnd(rnd(af * 2).astype(np.float32) + 1), rnd(np.where(np.isnan(af) | np.isnan(bf), np.nan, np.minimum(af, bf))),
                        rnd(af * bf + af)], 1)
    same = (got == exp) | (np.isnan(got) & np.isnan(exp))
    assert same.all(), (np.argwhere(~same)[:5], got[~same][:5], exp[~same][:5])
    flags = dfl.to_host().reshape(n, 2)
    np.testing.assert_array_equal(flags[:, 0], (af < bf).astype(np.uint8))
    np.testing.assert_array_equal(flags[:, 1], (af == bf).astype(np.uint8))


def test_f8e4m3_saturates_on_overflow(device):
    x = np.array([448.0, 449.0, 464.0, 500.0, 1e6, -1e6, -460.0], np.float32)
    got = run(device, k_cast.instance(S=f32, D=f8e4m3), 1, 8, len(x), x,
              np.zeros(len(x), ml_dtypes.float8_e4m3fn))[1].astype(np.float32)
    assert got.tolist() == [448.0, 448.0, 448.0, 448.0, 448.0, -448.0, -448.0]


# ---------------------------------------------------------------------------- promotion
@pk.kernel
def k_promote(a: ConstPtr[u32], b: ConstPtr[u64], c: ConstPtr[u8], d: ConstPtr[i16], h: ConstPtr[f16],
              f: ConstPtr[f32], g: ConstPtr[f64], o64: Ptr[u64], o16: Ptr[i16], of32: Ptr[f32], of64: Ptr[f64]):
    i = pk.global_id()
    o64[i] = a[i] + b[i]          # u32 with u64 -> u64
    o16[i] = c[i] + d[i]          # u8 with a wider signed -> i16
    of32[i] = h[i] * f[i]         # f16 with f32 -> f32
    of64[i] = f[i] + g[i]         # f32 with f64 -> f64


def test_lossless_promotion(device):
    a = np.array([2**32 - 1, 5], np.uint32)
    b = np.array([2**32, 2**63], np.uint64)
    c = np.array([255, 3], np.uint8)
    d = np.array([-300, 32000], np.int16)
    h = np.array([1.5, 0.1], np.float16)
    f = np.array([3.0, 1e-8], np.float32)
    g = np.array([1e-20, 1.0], np.float64)
    outs = run(device, k_promote, 1, 2, a, b, c, d, h, f, g, np.zeros(2, np.uint64), np.zeros(2, np.int16),
               np.zeros(2, np.float32), np.zeros(2, np.float64))
    assert outs[7].tolist() == [2**33 - 1, 2**63 + 5]
    assert outs[8].tolist() == [-45, 32003]
    np.testing.assert_array_equal(outs[9], h.astype(np.float32) * f)
    np.testing.assert_array_equal(outs[10], f.astype(np.float64) + g)


@pk.kernel
def k_bool(x: ConstPtr[bool_], y: ConstPtr[bool_], out: Ptr[bool_], cnt: Ptr[i32]):
    i = pk.global_id()
    a = x[i]
    b = y[i]
    out[i * 4] = a and b
    out[i * 4 + 1] = a or b
    out[i * 4 + 2] = not a
    out[i * 4 + 3] = a != b
    if a:
        cnt[i] = i32(a) + i32(b) * 2


def test_bool_values(device):
    x = np.array([False, False, True, True])
    y = np.array([False, True, False, True])
    _, _, out, cnt = run(device, k_bool, 1, 4, x, y, np.zeros(16, np.bool_), np.zeros(4, np.int32))
    np.testing.assert_array_equal(out.reshape(4, 4), np.stack([x & y, x | y, ~x, x != y], 1))
    assert cnt.tolist() == [0, 0, 1, 3]
