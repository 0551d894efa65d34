"""pykern.math: accuracy in ulps against NumPy longdouble / mpmath references, and exact special values.

All kernels (every function x dtype) are compiled once, in one module, for the CPU device."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import pykern as pk
import pykern.math as pm
from pykern import ConstPtr, Ptr, usize

T = pk.TypeVar("T")
LD = np.longdouble
HAVE_LD = np.finfo(LD).nmant >= 63          # x87 80-bit long double: exact enough for f64 references


@pk.kernel
def apply1(n: usize, x: ConstPtr[T], out: Ptr[T], *, T, op):
    for i in pk.grid_stride(n):
        out[i] = op(x[i])


@pk.kernel
def apply2(n: usize, x: ConstPtr[T], y: ConstPtr[T], out: Ptr[T], *, T, op):
    for i in pk.grid_stride(n):
        out[i] = op(x[i], y[i])


@pk.kernel
def apply3(n: usize, x: ConstPtr[T], y: ConstPtr[T], z: ConstPtr[T], out: Ptr[T], *, T, op):
    for i in pk.grid_stride(n):
        out[i] = op(x[i], y[i], z[i])


@pk.kernel
def apply_pred(n: usize, x: ConstPtr[T], out: Ptr[pk.bool_], *, T, op):
    for i in pk.grid_stride(n):
        out[i] = op(x[i])


UNARY = ["exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "erf",
         "erfc", "normcdf", "fabs", "floor", "ceil", "round", "trunc"]
BINARY = ["pow", "copysign", "fmin", "fmax", "minimum", "maximum"]
DTYPES = {"f32": (pk.f32, np.float32), "f64": (pk.f64, np.float64)}
HALF_OPS = ["exp", "log", "sin", "tanh", "erf", "round", "rsqrt", "sqrt"]
BOUND = {"f32": 2.0, "f64": 4.0}
EXACT = {"sqrt", "fabs", "floor", "ceil", "round", "trunc"}
ERF_FAMILY = ("erf", "erfc", "normcdf")


@pytest.fixture(scope="module")
def fns():
    mod = pk.Module("math_tests")
    for dn, (dt, _) in DTYPES.items():
        for op in UNARY:
            mod.add(apply1.instance(f"{op}_{dn}", T=dt, op=getattr(pm, op)))
        for op in BINARY:
            mod.add(apply2.instance(f"{op}_{dn}", T=dt, op=getattr(pm, op)))
        mod.add(apply3.instance(f"fma_{dn}", T=dt, op=pm.fma))
        for op in ("isnan", "isinf"):
            mod.add(apply_pred.instance(f"{op}_{dn}", T=dt, op=getattr(pm, op)))
    for op in HALF_OPS:
        mod.add(apply1.instance(f"{op}_f16", T=pk.f16, op=getattr(pm, op)))
    mod.add(apply3.instance("fma_f16", T=pk.f16, op=pm.fma))
    dev = pk.device("cpu")
    return {name: dev.get_or_load_func(name, mod) for name in mod.names()}


def run(fns, name, *args):
    args = [np.ascontiguousarray(a) for a in args]
    out = np.empty(args[0].shape, bool if name.split("_")[0] in ("isnan", "isinf") else args[0].dtype)
    fns[name][64, 256](args[0].size, *args, out)
    return out


# ---------------------------------------------------------------- inputs
RNG = np.random.default_rng(1234)
N = 200_000


def logu(lo, hi, n=N, signed=True):
    """n points log-uniform in magnitude over [2^lo, 2^hi] (both signs if signed)."""
    m = np.exp2(RNG.uniform(lo, hi - 1, n)) * RNG.uniform(1, 2, n)
    return m * (RNG.choice([-1.0, 1.0], n) if signed else 1.0)


def domain(op, dn):
    f32 = dn == "f32"
    lim = {"f32": 2.0 ** 21, "f64": 2.0 ** 49}[dn]        # trig: Cody-Waite below, Payne-Hanek above
    d = {
        "exp": np.concatenate([RNG.uniform(-104, 89, N), logu(-40, 6)]) if f32 else
        np.concatenate([RNG.uniform(-746, 710, N), logu(-80, 9)]),
        "exp2": np.concatenate([RNG.uniform(-150, 128, N), logu(-40, 7)]) if f32 else
        np.concatenate([RNG.uniform(-1075, 1024, N), logu(-80, 10)]),
        "expm1": logu(-40 if f32 else -80, 7 if f32 else 9.5),
        "log": logu(-149 if f32 else -1074, 128 if f32 else 1024, signed=False),
        "log1p": np.concatenate([logu(-40 if f32 else -80, 100, signed=False), -np.exp2(RNG.uniform(-60, 0, N))]),
        "sqrt": logu(-149 if f32 else -1074, 127 if f32 else 1023, signed=False),
        "sin": np.concatenate([logu(-30, 3), logu(-30, math.log2(lim)), logu(math.log2(lim), 128 if f32 else 1024, N // 4)]),
        "tanh": logu(-30, 5),
        "erf": logu(-30, 3),
        "erfc": np.concatenate([RNG.uniform(-7, 11 if f32 else 27.5, N), logu(-30, 1)]),
        "normcdf": np.concatenate([RNG.uniform(-15 if f32 else -38.5, 9, N), logu(-30, 2)]),
        "round": np.concatenate([logu(-3, 25 if f32 else 54), RNG.integers(-1000, 1000, N) + 0.5]),
    }
    alias = {"log2": "log", "rsqrt": "sqrt", "cos": "sin", "tan": "sin", "fabs": "round", "floor": "round",
             "ceil": "round", "trunc": "round"}
    x = d[alias.get(op, op)].astype(DTYPES[dn][1])
    return x[np.isfinite(x)]


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-45, -1e-45, 5e-324, -5e-324,
            1e-310, 3e38, -3e38, 1e300, -1e300, 1e30, -1e30, 100.0, -100.0, 1000.0, -1000.0]


def specials(dn):
    with np.errstate(over="ignore"):
        return np.array(SPECIALS, dtype=DTYPES[dn][1])


# ---------------------------------------------------------------- references and ulps
def ulps(out, ref, dn):
    """|out - ref| in units of the last place of dtype dn at ref (ref: float64 or longdouble array)."""
    p, emin = (24, -126) if dn == "f32" else (53, -1022)
    ref = np.asarray(ref)
    a = np.abs(ref)
    _, e = np.frexp(np.where(a == 0, 1, a))
    e = np.maximum(e - 1, emin)
    ulp = np.ldexp(np.ones_like(a), (e - p + 1).astype(np.int32))
    err = np.abs(out.astype(ref.dtype) - ref) / ulp
    return np.where(out.astype(ref.dtype) == ref, 0.0, err)


NP_REF = {"exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log1p": np.log1p,
          "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan,
          "tanh": np.tanh, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
          "round": lambda x: np.copysign(np.floor(np.abs(x) + LD(0.5) if x.dtype == LD else np.abs(x) + 0.5), x)}
MP_REF = {"exp": mpmath.exp, "exp2": lambda v: mpmath.power(2, v), "expm1": mpmath.expm1, "log": mpmath.log,
          "log2": lambda v: mpmath.log(v, 2), "log1p": mpmath.log1p, "sqrt": mpmath.sqrt,
          "rsqrt": lambda v: 1 / mpmath.sqrt(v), "sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan,
          "tanh": mpmath.tanh, "erf": mpmath.erf, "erfc": mpmath.erfc, "normcdf": lambda v: mpmath.ncdf(v)}


def mp_ulps(out, x, op, dn, ys=None):
    """Max ulp error of out against mpmath at 50 digits (small samples)."""
    p, emin = (24, -126) if dn == "f32" else (53, -1022)
    worst = 0.0
    with mpmath.workdps(50):
        for i in range(x.size):
            args = (mpmath.mpf(float(x[i])),) if ys is None else (mpmath.mpf(float(x[i])), mpmath.mpf(float(ys[i])))
            r = MP_REF[op](*args) if ys is None else mpmath.power(*args)
            fmax = mpmath.mpf(float(np.finfo(np.float32 if dn == "f32" else np.float64).max))
            if r == 0:
                err = 0.0 if out[i] == 0 else math.inf
            elif abs(r) > fmax * (1 + mpmath.ldexp(1, -p - 1)):
                err = 0.0 if np.isinf(out[i]) and (out[i] > 0) == (r > 0) else math.inf
            else:
                e = max(int(mpmath.floor(mpmath.log(abs(r), 2))), emin)
                ulp = mpmath.ldexp(1, e - p + 1)
                err = float(abs(mpmath.mpf(float(out[i])) - r) / ulp)
            worst = max(worst, err)
    return worst


MEASURED: dict[tuple[str, str], float] = {}


def record(op, dn, err):
    MEASURED[(op, dn)] = max(MEASURED.get((op, dn), 0.0), float(err))


def reference(op, x, dn):
    """A reference array for x (float64 for f32 results; longdouble, else None, for f64 results)."""
    if dn == "f32":
        if op in ("erf", "erfc", "normcdf"):
            return None
        with np.errstate(all="ignore"):
            return NP_REF[op](x.astype(np.float64))
    if not HAVE_LD or op not in NP_REF:
        return None
    with np.errstate(all="ignore"):
        return NP_REF[op](x.astype(LD))


# ---------------------------------------------------------------- accuracy
@pytest.mark.parametrize("dn", ["f32", "f64"])
@pytest.mark.parametrize("op", [o for o in UNARY])
def test_unary_accuracy(fns, op, dn):
    x = domain(op, dn)
    out = run(fns, f"{op}_{dn}", x)
    bound = 0.0 if op in EXACT else BOUND[dn]
    ref = reference(op, x, dn)
    if op in EXACT:                                   # exact: equal to the correctly rounded reference
        want = ref.astype(DTYPES[dn][1]) if op == "round" else NP_REF[op](x)   # NumPy's sqrt is correctly rounded
        assert same(out, want), op
        record(op, dn, 0.0)
        return
    if dn == "f32" and op in ERF_FAMILY:            # f32 algorithms against the f64 ones (<= 3 ulp of f64)
        ref = run(fns, f"{op}_f64", x.astype(np.float64))
    if ref is not None:
        fin = np.isfinite(ref) & (np.abs(ref) <= np.finfo(DTYPES[dn][1]).max)
        err = ulps(out[fin], ref[fin], dn)
        worst = int(np.argmax(err))
        record(op, dn, err[worst])
        assert err[worst] <= bound, f"{op}_{dn}({x[fin][worst]!r}) = {out[fin][worst]!r}, ref {ref[fin][worst]!r}: {err[worst]:.2f} ulp"
        with np.errstate(over="ignore"):  # references past the format's range are infinities there
            beyond = np.isinf(ref[~fin].astype(np.float64)) | (np.abs(ref[~fin]) > np.finfo(DTYPES[dn][1]).max)
        assert np.array_equal(np.isinf(out[~fin]), beyond)
    if op not in EXACT and (ref is None or dn == "f64" or op in ERF_FAMILY):
        k = 2000 if dn == "f64" else 4000
        idx = RNG.choice(x.size, k, replace=False)
        worst = mp_ulps(out[idx], x[idx], op, dn)
        record(op, dn, worst)
        assert worst <= bound, f"{op}_{dn}: {worst:.2f} ulp against mpmath"


# the floats closest to multiples of pi/2 (m, e: x = m 2^e), where the reduction cancels most: f32 by an
# exhaustive search of [1, FLT_MAX], f64 by continued fractions of 2^e 2/pi for every exponent >= 0
HARD_TRIG = {"f32": [(16367173, 72), (10741887, 11), (16573937, -16), (10057457, 62), (5808979, 18), (1126547, 56),
                     (14173733, 88), (10695401, 2), (2470649, -19), (1751883, 69)],
             "f64": [(6381956970095103, 797), (3205513981387887, -46), (7763785107565477, -29), (5916243447979695, 79),
                     (8444920710073313, 939), (2925482757170843, 526), (8160885118204141, 808),
                     (8360820580228475, 628), (2145770658771043, 147), (7958046405119485, 243)]}


@pytest.mark.parametrize("dn", ["f32", "f64"])
def test_trig_huge_and_hard(fns, dn):
    """sin/cos/tan up to the largest finite argument (Payne-Hanek) and at the hardest cases, against mpmath."""
    npt = DTYPES[dn][1]
    hard = [s * m * 2.0 ** (e + j) for m, e in HARD_TRIG[dn] for j in range(3) for s in (1, -1)]
    top = 128 if dn == "f32" else 1024
    x = np.concatenate([hard, [np.finfo(npt).max, -np.finfo(npt).max, np.finfo(npt).tiny], logu(20, top, 700)]).astype(npt)
    for op in ("sin", "cos", "tan"):
        worst = mp_ulps(run(fns, f"{op}_{dn}", x), x, op, dn)
        record(op, dn, worst)
        assert worst <= BOUND[dn], f"{op}_{dn}: {worst:.2f} ulp against mpmath"


@pytest.mark.parametrize("dn", ["f32", "f64"])
def test_pow_accuracy(fns, dn):
    npt = DTYPES[dn][1]
    lim = 88.0 if dn == "f32" else 709.0
    x = logu(-20, 20, N, signed=False)
    y = RNG.uniform(-1, 1, N) * lim / np.abs(np.log(x))
    y = np.where(RNG.random(N) < 0.3, RNG.uniform(-30, 30, N), y)
    xn = -logu(-3, 3, 20000, signed=False)           # negative base, integer exponent
    yn = RNG.integers(-60, 60, 20000).astype(float)
    x, y = np.concatenate([x, xn]).astype(npt), np.concatenate([y, yn]).astype(npt)
    out = run(fns, f"pow_{dn}", x, y)
    if dn == "f32":
        with np.errstate(all="ignore"):
            ref = np.power(x.astype(np.float64), y.astype(np.float64))
    elif HAVE_LD:
        with np.errstate(all="ignore"):
            ref = np.power(x.astype(LD), y.astype(LD))
    else:
        ref = None
    if ref is not None:
        fin = np.isfinite(ref) & (np.abs(ref) <= np.finfo(npt).max) & (ref != 0)
        err = ulps(out[fin], ref[fin], dn)
        record("pow", dn, err.max())
        w = int(np.argmax(err))
        assert err[w] <= BOUND[dn], f"pow({x[fin][w]!r}, {y[fin][w]!r}) = {out[fin][w]!r}: {err[w]:.2f} ulp"
    if dn == "f64":
        idx = RNG.choice(x.size, 2000, replace=False)
        worst = mp_ulps(out[idx], x[idx], "pow", dn, ys=y[idx])
        record("pow", dn, worst)
        assert worst <= BOUND[dn]


# f32 erf family: the piece boundaries (erf/erfc: 0.5, 1, 1.5, 3, 4, 10.2; normcdf: the same times -sqrt(2)), where
# erfc turns subnormal and zero, and the subnormal lower tail of normcdf
ERF32_EDGES = [0.5, 1.0, 1.5, 2.25, 3.0, 3.919, 4.0, 9.3, 10.0, 10.05, 10.127, 10.2]


def test_erf32_edges(fns):
    e = np.array(ERF32_EDGES, np.float32)
    near = lambda v: np.concatenate([v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))])
    for op, x in (("erf", near(np.concatenate([e, -e]))), ("erfc", near(np.concatenate([e, -e]))),
                  ("normcdf", near(np.concatenate([e, -e]) * np.float32(-np.sqrt(2))))):
        x = np.concatenate([x, np.linspace(-14.3 if op == "normcdf" else 9.0, -12.0 if op == "normcdf" else 10.13, 500)])
        x = x.astype(np.float32)
        worst = mp_ulps(run(fns, f"{op}_f32", x), x, op, "f32")
        record(op, "f32", worst)
        assert worst <= BOUND["f32"], f"{op}_f32: {worst:.2f} ulp against mpmath"


# the straight-line f32 exp, tanh and erf select between two computed cases: around the switch points (tanh: 0.55, the
# 9.5 clamp; erf: 0.75, 3.87 where k stops at -24, the 4.0 clamp), in the subnormal range of exp, against mpmath
STRAIGHT32 = {"tanh": [0.55, 9.5, 2.0 ** -12], "erf": [0.75, 3.87, 3.9192, 4.0], "exp": [-87.3, -103.9, 88.72]}


def test_straight_line_f32_edges(fns):
    for op, edges in STRAIGHT32.items():
        e = np.array(edges, np.float32)
        x = np.concatenate([e + np.float32(d) * np.abs(e) for d in np.linspace(-2e-3, 2e-3, 41)]).astype(np.float32)
        x = np.concatenate([x, np.nextafter(e, np.float32(np.inf)), np.nextafter(e, np.float32(-np.inf))])
        x = np.concatenate([x, -x]) if op != "exp" else x
        worst = mp_ulps(run(fns, f"{op}_f32", x), x, op, "f32")
        record(op, "f32", worst)
        assert worst <= BOUND["f32"], f"{op}_f32: {worst:.2f} ulp against mpmath"
    signed = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38], np.float32)
    for op in ("tanh", "erf"):
        got = run(fns, f"{op}_f32", signed)
        assert np.array_equal(np.signbit(got), np.signbit(signed)), op
    assert same(run(fns, "tanh_f32", signed[:4]), signed[:4])


# ---------------------------------------------------------------- special values
def same(a, b):
    """Bitwise-equal as floats, NaN equal to NaN, signed zeros distinguished."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(np.all((np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))))


@pytest.mark.parametrize("dn", ["f32", "f64"])
def test_unary_specials(fns, dn):
    npt = DTYPES[dn][1]
    inf, nan = np.inf, np.nan
    big = npt(3e38) if dn == "f32" else npt(1e300)
    cases = {
        "exp": [(0.0, 1.0), (-0.0, 1.0), (inf, inf), (-inf, 0.0), (nan, nan), (1000.0, inf), (-1000.0, 0.0)],
        "exp2": [(0.0, 1.0), (inf, inf), (-inf, 0.0), (nan, nan), (10.0, 1024.0), (-3.0, 0.125), (-1000.0 if dn == "f32" else -1074.0, 0.0 if dn == "f32" else 5e-324)],
        "expm1": [(0.0, 0.0), (-0.0, -0.0), (inf, inf), (-inf, -1.0), (nan, nan), (1e-30, 1e-30), (-1e-30, -1e-30)],
        "log": [(1.0, 0.0), (0.0, -inf), (-0.0, -inf), (-1.0, nan), (inf, inf), (-inf, nan), (nan, nan)],
        "log2": [(1.0, 0.0), (0.0, -inf), (-1.0, nan), (inf, inf), (nan, nan), (1024.0, 10.0), (0.125, -3.0),
                 (1e-45 if dn == "f32" else 5e-324, -149.0 if dn == "f32" else -1074.0)],
        "log1p": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -inf), (-2.0, nan), (inf, inf), (nan, nan), (1e-30, 1e-30)],
        "sqrt": [(0.0, 0.0), (-0.0, -0.0), (inf, inf), (-1.0, nan), (nan, nan), (4.0, 2.0)],
        "rsqrt": [(0.0, inf), (-0.0, -inf), (inf, 0.0), (-1.0, nan), (nan, nan), (4.0, 0.5)],
        "sin": [(0.0, 0.0), (-0.0, -0.0), (inf, nan), (-inf, nan), (nan, nan), (1e-30, 1e-30)],
        "cos": [(0.0, 1.0), (-0.0, 1.0), (inf, nan), (-inf, nan), (nan, nan)],
        "tan": [(0.0, 0.0), (-0.0, -0.0), (inf, nan), (nan, nan), (-1e-30, -1e-30)],
        "tanh": [(0.0, 0.0), (-0.0, -0.0), (inf, 1.0), (-inf, -1.0), (nan, nan), (100.0, 1.0), (1e-30, 1e-30)],
        "erf": [(0.0, 0.0), (-0.0, -0.0), (inf, 1.0), (-inf, -1.0), (nan, nan), (10.0, 1.0)],
        "erfc": [(0.0, 1.0), (inf, 0.0), (-inf, 2.0), (nan, nan), (30.0, 0.0), (-10.0, 2.0)],
        "normcdf": [(0.0, 0.5), (inf, 1.0), (-inf, 0.0), (nan, nan), (-40.0, 0.0)],
        "round": [(0.5, 1.0), (-0.5, -1.0), (1.5, 2.0), (2.5, 3.0), (-2.5, -3.0), (-0.25, -0.0), (0.49999997 if dn == "f32" else 0.49999999999999994, 0.0), (inf, inf), (nan, nan), (big, big)],
        "floor": [(-0.5, -1.0), (-0.0, -0.0), (0.5, 0.0), (inf, inf), (nan, nan)],
        "ceil": [(-0.5, -0.0), (0.5, 1.0), (-inf, -inf), (nan, nan)],
        "trunc": [(-0.5, -0.0), (1.5, 1.0), (-inf, -inf), (nan, nan)],
        "fabs": [(-0.0, 0.0), (-inf, inf), (-2.0, 2.0)],
    }
    for op, pairs in cases.items():
        x = np.array([p[0] for p in pairs], npt)
        want = np.array([p[1] for p in pairs], npt)
        got = run(fns, f"{op}_{dn}", x)
        assert same(got, want), f"{op}_{dn}: {x} -> {got}, expected {want}"
    # every function on the shared special list: NaN exactly where the reference is NaN, no crash
    xs = specials(dn)
    for op in UNARY:
        got = run(fns, f"{op}_{dn}", xs)
        if op in ("sin", "cos", "tan", "erf", "erfc", "tanh", "normcdf"):
            assert np.all(np.isnan(got) == (np.isnan(xs) | (np.isinf(xs) & (op in ("sin", "cos", "tan"))))), op
        if op in ("sin", "cos"):
            assert np.all(np.abs(got[np.isfinite(got)]) <= 1), op


@pytest.mark.parametrize("dn", ["f32", "f64"])
def test_pow_specials(fns, dn):
    npt = DTYPES[dn][1]
    inf, nan = np.inf, np.nan
    cases = [(nan, 0.0, 1.0), (1.0, nan, 1.0), (nan, 1.0, nan), (2.0, nan, nan), (-1.0, inf, 1.0), (-1.0, -inf, 1.0),
             (0.5, -inf, inf), (2.0, -inf, 0.0), (0.5, inf, 0.0), (2.0, inf, inf), (0.0, -3.0, inf), (-0.0, -3.0, -inf),
             (-0.0, -2.0, inf), (-0.0, -0.5, inf), (0.0, 3.0, 0.0), (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0),
             (-inf, -3.0, -0.0), (-inf, -2.0, 0.0), (-inf, 3.0, -inf), (-inf, 2.0, inf), (inf, -1.0, 0.0), (inf, 2.0, inf),
             (-2.0, 0.5, nan), (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0), (2.0, 10.0, 1024.0), (10.0, 2000.0, inf), (10.0, -2000.0, 0.0),
             (4.0, 0.5, 2.0), (-3.0, 1e20, inf)]
    x, y, want = (np.array(c, npt) for c in zip(*cases))
    got = run(fns, f"pow_{dn}", x, y)
    assert same(got, want), list(zip(x, y, got, want))


@pytest.mark.parametrize("dn", ["f32", "f64"])
def test_binary_exact(fns, dn):
    npt = DTYPES[dn][1]
    x = np.concatenate([logu(-30, 30, 20000), specials(dn), [np.nan, 1.0, np.nan]]).astype(npt)
    y = np.concatenate([logu(-30, 30, 20000), specials(dn)[::-1], [1.0, np.nan, np.nan]]).astype(npt)
    assert same(run(fns, f"copysign_{dn}", x, y), np.copysign(x, y))
    assert same(run(fns, f"minimum_{dn}", x, y), np.minimum(x, y))
    assert same(run(fns, f"maximum_{dn}", x, y), np.maximum(x, y))
    for op, ref in (("fmin", np.fmin), ("fmax", np.fmax)):
        got, want = run(fns, f"{op}_{dn}", x, y), ref(x, y)
        assert np.array_equal(got, want, equal_nan=True), op          # +0/-0 may come either way, as in C
    z = logu(-30, 30, x.size).astype(npt)
    got = run(fns, f"fma_{dn}", x, y, z)
    if dn == "f32":
        with np.errstate(over="ignore"):  # sums past f32's range round to infinity, as fma does
            want = (x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)).astype(np.float32)  # exact product
        assert np.array_equal(got, want, equal_nan=True)
    else:                                             # f64: the exact x*y + z rounded once, via mpmath
        with mpmath.workprec(2200):
            want = np.array([float(mpmath.mpf(a) * mpmath.mpf(b) + mpmath.mpf(c)) if np.isfinite(a * b + c) else a * b + c
                             for a, b, c in zip(x[:2000].tolist(), y[:2000].tolist(), z[:2000].tolist())])
        assert same(got[:2000], want)
    xs = np.concatenate([specials(dn), [np.float64(np.finfo(npt).max)]]).astype(npt)
    assert np.array_equal(run(fns, f"isnan_{dn}", xs), np.isnan(xs))
    assert np.array_equal(run(fns, f"isinf_{dn}", xs), np.isinf(xs))


def test_f16(fns):
    """f16 arguments compute in f32 and round back: within 1 ulp of f16 (sqrt, round exact)."""
    x = np.concatenate([RNG.uniform(-10, 10, 20000), [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -2.5]]).astype(np.float16)
    refs = {"exp": np.exp, "log": np.log, "sin": np.sin, "tanh": np.tanh, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
            "round": NP_REF["round"]}
    with np.errstate(all="ignore"):
        for op, f in refs.items():
            got = run(fns, f"{op}_f16", x).astype(np.float64)
            ref = f(x.astype(np.float64))
            close = np.abs(got - ref) <= np.spacing(np.abs(ref.astype(np.float16))).astype(np.float64)
            assert np.all(close | (np.isnan(got) & np.isnan(ref)) | (got == ref)), op
            if op in ("sqrt", "round"):
                assert same(got, ref.astype(np.float16)), op
    v = RNG.uniform(-4, 4, (3, 5000)).astype(np.float16)
    got = run(fns, "fma_f16", *v)
    want = (v[0].astype(np.float64) * v[1].astype(np.float64) + v[2].astype(np.float64)).astype(np.float16)
    assert same(got, want)


def test_report():
    """Print the measured max ulp error per function (pytest -s)."""
    for (op, dn), e in sorted(MEASURED.items()):
        print(f"{op:8s} {dn}: {e:.3f} ulp")
