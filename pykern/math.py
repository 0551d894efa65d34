"""The math library, written in pykern itself: every target gets the same functions and the same bits.

Use from a kernel as ``pk.math.exp(x)`` (after ``import pykern.math``) or ``from pykern import math as
pkm``. Every public function is generic over ``T`` in {f32, f64}; f16 and bf16 arguments are widened
to f32, computed, and rounded back. Only exact primitives are used (``pk.fma``, ``pk.sqrt``,
``pk.rint``, bit casts, integer ops): no LLVM transcendental intrinsics, no vendor device library.

Accuracy (max error, measured by ``tests/lang/test_math.py``): at most 2 ulp for f32 and 4 ulp for
f64 on every function over its whole domain, except sin/cos/tan beyond the reduction range below;
sqrt, fma, fabs, copysign, floor, ceil, trunc, round, fmin/fmax, minimum/maximum are exact.

Algorithms: Cody-Waite reduction (``x = k*ln2 + r`` with an exact fma step) and near-minimax
polynomials (Chebyshev fits, coefficients rounded to the working precision) for exp, exp2, expm1;
``log(1+f) = 2 atanh(f / (2+f))`` evaluated in double-word for log, log2, log1p and pow; a
three/four-constant double-word reduction by pi/2 for sin, cos, tan (accurate for |x| <= 2^21 in f32
and |x| <= 2^49 in f64; beyond that the result is finite and within [-1, 1] but not accurate);
``erfc(x) = exp(-x^2) g(x)`` with piecewise polynomials for g. f32 erf, erfc, normcdf and pow are
evaluated with the f64 algorithms and rounded (f64 arithmetic is used there, nowhere else in f32).
"""
from __future__ import annotations

import pykern as pk
from pykern import f32, f64, i32, i64, u32, u64

__all__ = ["exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
           "erf", "erfc", "normcdf", "pow", "fabs", "floor", "ceil", "round", "trunc", "copysign", "fma",
           "isnan", "isinf", "fmin", "fmax", "minimum", "maximum"]

T = pk.TypeVar("T")

_INF = float("inf")
_NAN = float("nan")
# double-word constants (hi, lo) for f64 and for f32 ("_F")
_LN2, _LN2_LO = 0.6931471805599453, 2.3190468138462996e-17
_LN2_F, _LN2_LO_F = 0.6931471824645996, -1.9046542121259336e-09
_IL2, _IL2_LO = 1.4426950408889634, 2.0355273740931033e-17          # 1/ln2
_IL2_F, _IL2_LO_F = 1.4426950216293335, 1.925963033500011e-08
_PIO2_1, _PIO2_2, _PIO2_3, _PIO2_4 = 1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33, 5.562271104311117e-50
_PIO2_1F, _PIO2_2F, _PIO2_3F, _PIO2_4F = 1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15, 1.056299898220315e-23
_TWOOPI, _TWOOPI_LO = 0.6366197723675814, -3.935735335036497e-17
_TWOOPI_F, _TWOOPI_LO_F = 0.6366197466850281, 2.5682552973194106e-08
_RSQRT2, _RSQRT2_LO = 0.7071067811865476, -4.833646656726457e-17
_TWO_SQRTPI = 1.1283791670955126
_ERFC_C0, _ERFC_C1, _ERFC_C2 = 0.875, 1.625, 2.5
_C23, _C23_LO = 0.6666666666666666, 3.700743415417188e-17   # 2/3

# ---------------------------------------------------------------- polynomials (generated: Chebyshev fits)

@pk.func
def _p_exp_f32(z: pk.f32) -> pk.f32:
    p = pk.f32(0.0013926932588219643)
    p = pk.fma(p, z, 0.008363778702914715)
    p = pk.fma(p, z, 0.04166654869914055)
    p = pk.fma(p, z, 0.16666573286056519)
    p = pk.fma(p, z, 0.5)
    return p


@pk.func
def _p_exp_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(2.510135443993923e-08)
    p = pk.fma(p, z, 2.762134843705726e-07)
    p = pk.fma(p, z, 2.7557266402504823e-06)
    p = pk.fma(p, z, 2.480151862045023e-05)
    p = pk.fma(p, z, 0.00019841269864391087)
    p = pk.fma(p, z, 0.0013888888918952918)
    p = pk.fma(p, z, 0.008333333333329791)
    p = pk.fma(p, z, 0.04166666666662061)
    p = pk.fma(p, z, 0.16666666666666669)
    p = pk.fma(p, z, 0.5000000000000001)
    return p


@pk.func
def _p_exp2_f32(z: pk.f32) -> pk.f32:
    p = pk.f32(0.00015453163359779865)
    p = pk.fma(p, z, 0.0013390863314270973)
    p = pk.fma(p, z, 0.009618083015084267)
    p = pk.fma(p, z, 0.055503569543361664)
    p = pk.fma(p, z, 0.24022650718688965)
    p = pk.fma(p, z, 0.6931471824645996)
    return p


@pk.func
def _p_exp2_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(4.4549605981865186e-10)
    p = pk.fma(p, z, 7.072585949269223e-09)
    p = pk.fma(p, z, 1.0178062445845774e-07)
    p = pk.fma(p, z, 1.321544258792169e-06)
    p = pk.fma(p, z, 1.525273382983612e-05)
    p = pk.fma(p, z, 0.0001540353044173605)
    p = pk.fma(p, z, 0.0013333558146416936)
    p = pk.fma(p, z, 0.009618129107606888)
    p = pk.fma(p, z, 0.0555041086648216)
    p = pk.fma(p, z, 0.24022650695910097)
    p = pk.fma(p, z, 0.6931471805599453)
    return p


@pk.func
def _p_log_f32(z: pk.f32) -> pk.f32:
    p = pk.f32(0.29601025581359863)
    p = pk.fma(p, z, 0.39988312125205994)
    p = pk.fma(p, z, 0.6666668653488159)
    return p


@pk.func
def _p_log_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(0.14644067424413199)
    p = pk.fma(p, z, 0.15329464536713094)
    p = pk.fma(p, z, 0.18182957719593876)
    p = pk.fma(p, z, 0.22222210183700977)
    p = pk.fma(p, z, 0.28571428631861595)
    p = pk.fma(p, z, 0.39999999999886393)
    p = pk.fma(p, z, 0.666666666666667)
    return p


@pk.func
def _p_sin_f32(z: pk.f32) -> pk.f32:
    p = pk.f32(2.7154360395797994e-06)
    p = pk.fma(p, z, -0.00019839234300889075)
    p = pk.fma(p, z, 0.008333330042660236)
    p = pk.fma(p, z, -0.1666666716337204)
    return p


@pk.func
def _p_sin_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(-7.567858770633791e-13)
    p = pk.fma(p, z, 1.6058162028230698e-10)
    p = pk.fma(p, z, -2.5052103519284336e-08)
    p = pk.fma(p, z, 2.755731921019633e-06)
    p = pk.fma(p, z, -0.0001984126984125123)
    p = pk.fma(p, z, 0.008333333333333325)
    p = pk.fma(p, z, -0.16666666666666666)
    return p


@pk.func
def _p_cos_f32(z: pk.f32) -> pk.f32:
    p = pk.f32(2.4469067284371704e-05)
    p = pk.fma(p, z, -0.0013887881068512797)
    p = pk.fma(p, z, 0.0416666604578495)
    return p


@pk.func
def _p_cos_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(-1.13551788827563e-11)
    p = pk.fma(p, z, 2.087570557714001e-09)
    p = pk.fma(p, z, -2.755731481138535e-07)
    p = pk.fma(p, z, 2.4801587293213554e-05)
    p = pk.fma(p, z, -0.0013888888888883076)
    p = pk.fma(p, z, 0.04166666666666666)
    return p


@pk.func
def _p_tanh_f32(z: pk.f32) -> pk.f32:
    p = pk.f32(-0.00661022774875164)
    p = pk.fma(p, z, 0.021309388801455498)
    p = pk.fma(p, z, -0.05390942841768265)
    p = pk.fma(p, z, 0.13333113491535187)
    p = pk.fma(p, z, -0.3333333134651184)
    return p


@pk.func
def _p_erf_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(-7.795898827002142e-10)
    p = pk.fma(p, z, 1.3720064546777686e-08)
    p = pk.fma(p, z, -1.6208483801871705e-07)
    p = pk.fma(p, z, 1.6447424703317362e-06)
    p = pk.fma(p, z, -1.492473690741966e-05)
    p = pk.fma(p, z, 0.00012055294904839707)
    p = pk.fma(p, z, -0.0008548325975389692)
    p = pk.fma(p, z, 0.0052239776071164225)
    p = pk.fma(p, z, -0.02686617064323777)
    p = pk.fma(p, z, 0.11283791670945006)
    p = pk.fma(p, z, -0.37612638903183543)
    p = pk.fma(p, z, 1.1283791670955126)
    return p


@pk.func
def _p_erfc0_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(-8.178793859368783e-07)
    p = pk.fma(p, z, 2.6756701916034212e-06)
    p = pk.fma(p, z, -8.055394169675349e-06)
    p = pk.fma(p, z, 2.4813862578236507e-05)
    p = pk.fma(p, z, -7.415897873670597e-05)
    p = pk.fma(p, z, 0.00021396106885577818)
    p = pk.fma(p, z, -0.0005950810820218508)
    p = pk.fma(p, z, 0.0015904825816719737)
    p = pk.fma(p, z, -0.004069537665061771)
    p = pk.fma(p, z, 0.009922776769590946)
    p = pk.fma(p, z, -0.022925811484455237)
    p = pk.fma(p, z, 0.04982841533122216)
    p = pk.fma(p, z, -0.10091439212620511)
    p = pk.fma(p, z, 0.18795692377318343)
    p = pk.fma(p, z, -0.3158338964908418)
    p = pk.fma(p, z, 0.464311583202669)
    return p


@pk.func
def _p_erfc1_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(-3.800687020466049e-07)
    p = pk.fma(p, z, 1.3512787165173065e-06)
    p = pk.fma(p, z, -4.4930669928436464e-06)
    p = pk.fma(p, z, 1.5099518336215553e-05)
    p = pk.fma(p, z, -4.927939871192791e-05)
    p = pk.fma(p, z, 0.00015562644275927165)
    p = pk.fma(p, z, -0.000474647565976947)
    p = pk.fma(p, z, 0.0013938042459434039)
    p = pk.fma(p, z, -0.00392619850073242)
    p = pk.fma(p, z, 0.010561485442423916)
    p = pk.fma(p, z, -0.026977910093249322)
    p = pk.fma(p, z, 0.06496207478417834)
    p = pk.fma(p, z, -0.14603023666418335)
    p = pk.fma(p, z, 0.30226120936348594)
    return p


@pk.func
def _p_erfc2_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(4.010268793982498e-09)
    p = pk.fma(p, z, -1.7022233265672403e-08)
    p = pk.fma(p, z, 6.706690790495327e-08)
    p = pk.fma(p, z, -2.7262986241901926e-07)
    p = pk.fma(p, z, 1.0852366992052668e-06)
    p = pk.fma(p, z, -4.214357879841587e-06)
    p = pk.fma(p, z, 1.5961851696601105e-05)
    p = pk.fma(p, z, -5.8868958345706055e-05)
    p = pk.fma(p, z, 0.00021101982436023977)
    p = pk.fma(p, z, -0.0007335909374729658)
    p = pk.fma(p, z, 0.002467036815699688)
    p = pk.fma(p, z, -0.008001569382093874)
    p = pk.fma(p, z, 0.024937997086656914)
    p = pk.fma(p, z, -0.07434734678979472)
    p = pk.fma(p, z, 0.2108063640611436)
    return p


@pk.func
def _p_erfc3_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(284805079.2968425)
    p = pk.fma(p, z, -300085756.36476916)
    p = pk.fma(p, z, 148398164.72083947)
    p = pk.fma(p, z, -46147857.154772416)
    p = pk.fma(p, z, 10257656.645200914)
    p = pk.fma(p, z, -1772288.9097479063)
    p = pk.fma(p, z, 256239.6841748926)
    p = pk.fma(p, z, -33522.37337703205)
    p = pk.fma(p, z, 4316.650681956987)
    p = pk.fma(p, z, -591.6979794419112)
    p = pk.fma(p, z, 91.55938581889029)
    p = pk.fma(p, z, -16.660123983897552)
    p = pk.fma(p, z, 3.702483321854677)
    p = pk.fma(p, z, -1.0578554000107498)
    p = pk.fma(p, z, 0.42314218739982884)
    p = pk.fma(p, z, -0.28209479177338026)
    p = pk.fma(p, z, 0.564189583547756)
    return p


@pk.func
def _p_logq_f64(z: pk.f64) -> pk.f64:
    p = pk.f64(0.1174901599327367)
    p = pk.fma(p, z, 0.1170374052207906)
    p = pk.fma(p, z, 0.13334898841789578)
    p = pk.fma(p, z, 0.1538459321382296)
    p = pk.fma(p, z, 0.18181818351926282)
    p = pk.fma(p, z, 0.22222222221582205)
    p = pk.fma(p, z, 0.28571428571429486)
    p = pk.fma(p, z, 0.4)
    return p



# ---------------------------------------------------------------- helpers (T in {f32, f64})
@pk.func
def _scale(y: T, k: i32) -> T:
    """y * 2^k with one rounding, for |k| up to about twice the exponent range."""
    k1 = k // 2
    k2 = k - k1
    if T is f32:
        return y * pk.bitcast(pk.u32(k1 + 127) << 23, f32) * pk.bitcast(pk.u32(k2 + 127) << 23, f32)
    else:
        return y * pk.bitcast(pk.u64(k1 + 1023) << 52, f64) * pk.bitcast(pk.u64(k2 + 1023) << 52, f64)


@pk.func
def _pexp(r: T) -> T:
    """(e^r - 1 - r) / r^2 on |r| <= 0.35."""
    return _p_exp_f32(r) if T is f32 else _p_exp_f64(r)


@pk.func
def _exp_r(r: T, lo: T, k: i32) -> T:
    """2^k * e^(r + lo) for |r| <= 0.35 and tiny lo."""
    y = pk.fma(r * r, _pexp(r), r) + lo
    return _scale(y + 1.0, k)


@pk.func
def _exp(x: T) -> T:
    if pk.isnan(x):
        return x
    x = pk.fmin(pk.fmax(x, -110.0 if T is f32 else -750.0), 100.0 if T is f32 else 720.0)
    kf = pk.rint(x * (_IL2_F if T is f32 else _IL2))
    r = pk.fma(kf, -(_LN2_F if T is f32 else _LN2), x)           # exact
    r = pk.fma(kf, -(_LN2_LO_F if T is f32 else _LN2_LO), r)
    return _exp_r(r, 0.0, pk.i32(kf))


@pk.func
def _exp2(x: T) -> T:
    if pk.isnan(x):
        return x
    x = pk.fmin(pk.fmax(x, -160.0 if T is f32 else -1100.0), 140.0 if T is f32 else 1050.0)
    kf = pk.rint(x)
    r = x - kf
    q = _p_exp2_f32(r) if T is f32 else _p_exp2_f64(r)
    return _scale(pk.fma(r, q, 1.0), pk.i32(kf))


@pk.func
def _expm1(x: T) -> T:
    if pk.isnan(x):
        return x
    if x > (80.0 if T is f32 else 700.0):
        return _exp(x)
    if x < (-18.0 if T is f32 else -40.0):
        return -1.0
    ax = pk.fabs(x)
    if ax < (2.0 ** -26 if T is f32 else 2.0 ** -55):
        return x
    if ax < 0.34:
        return pk.fma(x * x, _pexp(x), x)
    kf = pk.rint(x * (_IL2_F if T is f32 else _IL2))
    rh = pk.fma(kf, -(_LN2_F if T is f32 else _LN2), x)          # exact
    r = pk.fma(kf, -(_LN2_LO_F if T is f32 else _LN2_LO), rh)
    c = pk.fma(kf, -(_LN2_LO_F if T is f32 else _LN2_LO), rh - r)  # r + c = x - k ln2
    e = pk.fma(r * r, _pexp(r), r)
    e = e + pk.fma(c, e, c)                                          # expm1(r + c)
    k = pk.i32(kf)
    if k <= (23 if T is f32 else 52):
        t = _scale(T(1.0), k)
        return pk.fma(t, e, t - 1.0)
    return _scale(e + (1.0 - _scale(T(1.0), -k)), k)


@pk.func
def _log1p_part(f: T, part: i32) -> T:
    """log(1 + f) as a double-word hi + lo (part 0: hi, 1: lo) for f in [-0.3, 0.42], f exact."""
    dh = f + 2.0
    dl = (2.0 - dh) + f
    sh = f / dh
    rem = pk.fma(-sh, dh, f) - sh * dl
    sl = rem / dh
    z = sh * sh
    lh = sh * 2.0
    if T is f32:
        ll = sl * 2.0 + sh * z * _p_log_f32(z)
    else:
        # the s^3 term carried in double-word so that pow gets log to ~2^-64 relative
        ze = pk.fma(sh, sh, -z)
        s3 = sh * z
        s3e = pk.fma(sh, z, -s3) + sh * ze
        t1 = s3 * _C23
        t1e = pk.fma(s3, _C23, -t1) + (s3e * _C23 + s3 * _C23_LO)
        h1 = lh + t1
        e1 = t1 - (h1 - lh)
        ll = e1 + (sl * 2.0 + (t1e + sl * (z * 2.0) + s3 * z * _p_logq_f64(z)))   # d/ds 2atanh(s) = 2/(1-s^2)
        lh = h1
    hi = lh + ll
    if part == 0:
        return hi
    return ll - (hi - lh)


@pk.func
def _log_part(x: T, part: i32) -> T:
    """x = 2^k m, m in [sqrt(2)/2, sqrt(2)): parts 0/1 = log(m) hi/lo, 2 = k. x finite, > 0."""
    if T is f32:
        kadj = 0
        if x < 1.1754943508222875e-38:
            x = x * 33554432.0
            kadj = -25
        bits = pk.bitcast(x, u32)
        k = pk.i32((bits >> 23) & 0xff) - 127 + kadj
        m = pk.bitcast((bits & 0x7fffff) | 0x3f800000, f32)
    else:
        kadj = 0
        if x < 2.2250738585072014e-308:
            x = x * 18014398509481984.0
            kadj = -54
        bits = pk.bitcast(x, u64)
        k = pk.i32((bits >> 52) & 0x7ff) - 1023 + kadj
        m = pk.bitcast((bits & 0xfffffffffffff) | 0x3ff0000000000000, f64)
    if m > 1.4142135623730951:
        m = m * 0.5
        k = k + 1
    if part == 2:
        return T(k)
    return _log1p_part(m - 1.0, part)


@pk.func
def _log_dd(x: T, part: i32) -> T:
    """log(x) as double-word (part 0: hi, 1: lo); x finite, > 0."""
    h = _log_part(x, 0)
    l = _log_part(x, 1)
    kf = _log_part(x, 2)
    ah = kf * (_LN2_F if T is f32 else _LN2)
    al = pk.fma(kf, _LN2_F if T is f32 else _LN2, -ah) + kf * (_LN2_LO_F if T is f32 else _LN2_LO)
    s = ah + h
    bb = s - ah
    e = (ah - (s - bb)) + (h - bb)
    lo = e + (al + l)
    hi = s + lo
    if part == 0:
        return hi
    return lo - (hi - s)


@pk.func
def _log_special(x: T) -> T:
    """log's value at NaN, negative, zero and +inf."""
    if x == 0.0:
        return -_INF
    if x < 0.0:
        return _NAN
    return x


@pk.func
def _log(x: T) -> T:
    if not (x > 0.0 and x < _INF):
        return _log_special(x)
    return _log_dd(x, 0)


@pk.func
def _log2(x: T) -> T:
    if not (x > 0.0 and x < _INF):
        return _log_special(x)
    h = _log_part(x, 0)
    l = _log_part(x, 1)
    kf = _log_part(x, 2)
    c = T(_IL2_F if T is f32 else _IL2)
    ph = h * c
    pl = pk.fma(h, c, -ph) + (h * (_IL2_LO_F if T is f32 else _IL2_LO) + l * c)
    w = kf + ph
    bb = w - kf
    e = (kf - (w - bb)) + (ph - bb)
    return w + (e + pl)


@pk.func
def _log1p(x: T) -> T:
    if not (x > -1.0 and x < _INF):
        return _log_special(x + 1.0)
    if pk.fabs(x) < (2.0 ** -25 if T is f32 else 2.0 ** -54):
        return x
    if x > -0.29 and x < 0.41:
        return _log1p_part(x, 0)
    u = x + 1.0
    bv = u - 1.0
    c = (1.0 - (u - bv)) + (x - bv)            # u + c = 1 + x exactly
    return _log_dd(u, 0) + (_log_dd(u, 1) + c / u)


# ---------------------------------------------------------------- trigonometry
@pk.func
def _rpio2(x: T, part: i32) -> T:
    """x = q pi/2 + (rh + rl): part 0 = q, 1 = rh, 2 = rl (|rh| <= ~pi/4)."""
    if pk.fabs(x) < 0.785:
        if part == 1:
            return x
        return x * 0.0
    q = pk.rint(pk.fma(x, _TWOOPI_F if T is f32 else _TWOOPI, x * (_TWOOPI_LO_F if T is f32 else _TWOOPI_LO)))
    if part == 0:
        return q
    c2 = T(_PIO2_2F if T is f32 else _PIO2_2)
    t = pk.fma(q, -(_PIO2_1F if T is f32 else _PIO2_1), x)         # exact
    p = q * c2
    pe = pk.fma(q, c2, -p)
    s = t - p
    bb = s - t
    e = (t - (s - bb)) - (p + bb)
    lo = e - pe - q * (_PIO2_3F if T is f32 else _PIO2_3) - q * (_PIO2_4F if T is f32 else _PIO2_4)
    rh = s + lo
    # beyond the accurate range (|x| > 2^21 in f32, 2^49 in f64) the remainder can be anything:
    # clamping keeps sin/cos in [-1, 1] and tan finite there (a no-op inside the range)
    if part == 1:
        return pk.fmin(pk.fmax(rh, -0.9), 0.9)
    return pk.fmin(pk.fmax(lo - (rh - s), -(2.0 ** -20)), 2.0 ** -20)


@pk.func
def _sin_part(rh: T, rl: T, part: i32) -> T:
    """sin(rh + rl) as double-word (part 0 hi, 1 lo)."""
    z = rh * rh
    u = rh * z * (_p_sin_f32(z) if T is f32 else _p_sin_f64(z)) + rl * (1.0 - 0.5 * z)
    sh = rh + u
    if part == 0:
        return sh
    return u - (sh - rh)


@pk.func
def _cos_part(rh: T, rl: T, part: i32) -> T:
    """cos(rh + rl) as double-word (part 0 hi, 1 lo)."""
    z = rh * rh
    ze = pk.fma(rh, rh, -z)
    hz = 0.5 * z
    w = 1.0 - hz
    v = (((1.0 - w) - hz) - 0.5 * ze) + (z * z * (_p_cos_f32(z) if T is f32 else _p_cos_f64(z)) - rh * rl)
    ch = w + v
    if part == 0:
        return ch
    return v - (ch - w)


@pk.func
def _sin(x: T) -> T:
    if pk.isinf(x) or pk.isnan(x):
        return x - x
    if pk.fabs(x) < (2.0 ** -12 if T is f32 else 2.0 ** -27):
        return x
    q = pk.i64(_rpio2(x, 0)) & 3
    rh = _rpio2(x, 1)
    rl = _rpio2(x, 2)
    r = _sin_part(rh, rl, 0) if (q & 1) == 0 else _cos_part(rh, rl, 0)
    return -r if (q & 2) != 0 else r


@pk.func
def _cos(x: T) -> T:
    if pk.isinf(x) or pk.isnan(x):
        return x - x
    if pk.fabs(x) < (2.0 ** -13 if T is f32 else 2.0 ** -28):
        return T(1.0)
    q = pk.i64(_rpio2(x, 0)) & 3
    rh = _rpio2(x, 1)
    rl = _rpio2(x, 2)
    r = _cos_part(rh, rl, 0) if (q & 1) == 0 else _sin_part(rh, rl, 0)
    return -r if ((q + 1) & 2) != 0 else r


@pk.func
def _tan(x: T) -> T:
    if pk.isinf(x) or pk.isnan(x):
        return x - x
    if pk.fabs(x) < (2.0 ** -12 if T is f32 else 2.0 ** -27):
        return x
    q = pk.i64(_rpio2(x, 0)) & 1
    rh = _rpio2(x, 1)
    rl = _rpio2(x, 2)
    sh = _sin_part(rh, rl, 0)
    sl = _sin_part(rh, rl, 1)
    ch = _cos_part(rh, rl, 0)
    cl = _cos_part(rh, rl, 1)
    nh = sh
    nl = sl
    dh = ch
    dl = cl
    if q != 0:
        nh = -ch
        nl = -cl
        dh = sh
        dl = sl
    t = nh / dh
    res = (pk.fma(-t, dh, nh) + nl) - t * dl
    return t + res / dh


@pk.func
def _tanh(x: T) -> T:
    ax = pk.fabs(x)
    if ax < (2.0 ** -12 if T is f32 else 2.0 ** -27):
        return x
    if ax > (9.5 if T is f32 else 22.0):
        return pk.copysign(1.0, x)
    if T is f32:
        if ax < 0.55:
            z = x * x
            return pk.fma(x * z, _p_tanh_f32(z), x)
        e = _exp(ax * 2.0)
        return pk.copysign(1.0 - 2.0 / (e + 1.0), x)
    else:
        t = _expm1(ax * 2.0)
        return pk.copysign(t / (t + 2.0), x)


# ---------------------------------------------------------------- erf family (f64 algorithms)
@pk.func
def _erfc_g(a: f64) -> f64:
    """g(a) = erfc(a) exp(a^2) for 0.5 <= a <= 28."""
    if a < 1.25:
        return _p_erfc0_f64(a - _ERFC_C0)
    if a < 2.0:
        return _p_erfc1_f64(a - _ERFC_C1)
    if a < 3.0:
        return _p_erfc2_f64(a - _ERFC_C2)
    return _p_erfc3_f64(1.0 / (a * a)) / a


@pk.func
def _expmsq_mul(a: f64, g: f64) -> f64:
    """exp(-a^2) * g for 0 <= a <= 28, a^2 taken exactly, g folded in before the last rounding."""
    z = a * a
    ze = pk.fma(a, a, -z)
    kf = pk.rint(-z * _IL2)
    r = pk.fma(kf, -_LN2, -z)                                        # exact
    r = pk.fma(kf, -_LN2_LO, r)
    y = pk.fma(r * r, _pexp(r), r)                                   # e^r - 1
    y = pk.fma(-ze, y, y - ze)                                       # e^(r - ze) - 1
    return _scale(pk.fma(g, y, g), pk.i32(kf))


@pk.func
def _erf64(x: f64) -> f64:
    if pk.isnan(x):
        return x
    ax = pk.fabs(x)
    if ax < 1.0:
        return x * _p_erf_f64(x * x)
    if ax >= 6.0:
        return pk.copysign(1.0, x)
    return pk.copysign(1.0 - _expmsq_mul(ax, _erfc_g(ax)), x)


@pk.func
def _erfc64(x: f64) -> f64:
    if pk.isnan(x):
        return x
    if x < 0.5:
        if x > -1.0:
            return pk.fma(-x, _p_erf_f64(x * x), 1.0)
        if x < -6.0:
            return 2.0
        return 2.0 - _expmsq_mul(-x, _erfc_g(-x))
    if x > 27.3:
        return 0.0
    return _expmsq_mul(x, _erfc_g(x))


@pk.func
def _normcdf64(x: f64) -> f64:
    if pk.isnan(x):
        return x
    uh = -x * _RSQRT2
    if uh < 0.5:
        return 0.5 * _erfc64(uh)
    if uh > 27.3:
        return 0.0
    ul = pk.fma(-x, _RSQRT2, -uh) - x * _RSQRT2_LO                   # -x/sqrt(2) = uh + ul
    return _expmsq_mul(uh, 0.5 * _erfc_g(uh) - (0.5 * _TWO_SQRTPI) * ul)


# ---------------------------------------------------------------- pow (f64 algorithm)
@pk.func
def _pow_pos(ax: f64, y: f64) -> f64:
    """ax^y for finite ax > 0 and finite y, via double-word log and exp."""
    lh = _log_dd(ax, 0)
    ll = _log_dd(ax, 1)
    ph = y * lh
    pl = pk.fma(y, lh, -ph) + y * ll
    if ph > 710.0:
        return _INF
    if ph < -750.0:
        return 0.0
    kf = pk.rint(ph * _IL2)
    r = pk.fma(kf, -_LN2, ph)                                         # exact
    r = pk.fma(kf, -_LN2_LO, r) + pl
    return _exp_r(r, 0.0, pk.i32(kf))


@pk.func
def _pow64(x: f64, y: f64) -> f64:
    if y == 0.0 or x == 1.0:
        return 1.0
    if pk.isnan(x) or pk.isnan(y):
        return x + y
    ax = pk.fabs(x)
    yint = pk.trunc(y) == y
    yodd = yint and pk.fabs(y) < 9007199254740992.0 and pk.trunc(y * 0.5) != y * 0.5
    if pk.isinf(y):
        if ax == 1.0:
            return 1.0
        if (ax < 1.0) == (y > 0.0):
            return 0.0
        return _INF
    if ax == 0.0 or pk.isinf(x):
        big = (ax == 0.0) == (y < 0.0)                                  # |result| is inf
        mag = f64(_INF) if big else f64(0.0)
        return pk.copysign(mag, x) if yodd else mag
    if x < 0.0 and not yint:
        return _NAN
    r = _pow_pos(ax, y)
    return -r if (x < 0.0 and yodd) else r


# ---------------------------------------------------------------- public functions
@pk.func
def exp(x: T) -> T:
    """e^x."""
    if T is f32 or T is f64:
        return _exp(x)
    else:
        return T(_exp(pk.f32(x)))


@pk.func
def exp2(x: T) -> T:
    """2^x."""
    if T is f32 or T is f64:
        return _exp2(x)
    else:
        return T(_exp2(pk.f32(x)))


@pk.func
def expm1(x: T) -> T:
    """e^x - 1, accurate near 0."""
    if T is f32 or T is f64:
        return _expm1(x)
    else:
        return T(_expm1(pk.f32(x)))


@pk.func
def log(x: T) -> T:
    """Natural logarithm."""
    if T is f32 or T is f64:
        return _log(x)
    else:
        return T(_log(pk.f32(x)))


@pk.func
def log2(x: T) -> T:
    """Base-2 logarithm (exact at powers of two)."""
    if T is f32 or T is f64:
        return _log2(x)
    else:
        return T(_log2(pk.f32(x)))


@pk.func
def log1p(x: T) -> T:
    """log(1 + x), accurate near 0."""
    if T is f32 or T is f64:
        return _log1p(x)
    else:
        return T(_log1p(pk.f32(x)))


@pk.func
def sqrt(x: T) -> T:
    """Correctly rounded square root."""
    return pk.sqrt(x)


@pk.func
def rsqrt(x: T) -> T:
    """1 / sqrt(x)."""
    if T is f32 or T is f64:
        return 1.0 / pk.sqrt(x)
    else:
        return T(1.0 / pk.sqrt(pk.f32(x)))


@pk.func
def sin(x: T) -> T:
    """Sine (see the module doc for the accurate argument range)."""
    if T is f32 or T is f64:
        return _sin(x)
    else:
        return T(_sin(pk.f32(x)))


@pk.func
def cos(x: T) -> T:
    """Cosine (see the module doc for the accurate argument range)."""
    if T is f32 or T is f64:
        return _cos(x)
    else:
        return T(_cos(pk.f32(x)))


@pk.func
def tan(x: T) -> T:
    """Tangent (see the module doc for the accurate argument range)."""
    if T is f32 or T is f64:
        return _tan(x)
    else:
        return T(_tan(pk.f32(x)))


@pk.func
def tanh(x: T) -> T:
    """Hyperbolic tangent."""
    if T is f32 or T is f64:
        return _tanh(x)
    else:
        return T(_tanh(pk.f32(x)))


@pk.func
def erf(x: T) -> T:
    """Error function."""
    if T is f64:
        return _erf64(x)
    else:
        return T(_erf64(pk.f64(x)))


@pk.func
def erfc(x: T) -> T:
    """Complementary error function 1 - erf(x), accurate for large x."""
    if T is f64:
        return _erfc64(x)
    else:
        return T(_erfc64(pk.f64(x)))


@pk.func
def normcdf(x: T) -> T:
    """Standard normal CDF, 0.5 * erfc(-x / sqrt(2)), accurate in the lower tail."""
    if T is f64:
        return _normcdf64(x)
    else:
        return T(_normcdf64(pk.f64(x)))


@pk.func
def pow(x: T, y: T) -> T:
    """x^y with C99 special cases (pow(x, 0) = pow(1, y) = 1, negative x with integer y, ...)."""
    if T is f64:
        return _pow64(x, y)
    else:
        return T(_pow64(pk.f64(x), pk.f64(y)))


@pk.func
def fabs(x: T) -> T:
    return pk.fabs(x)


@pk.func
def floor(x: T) -> T:
    return pk.floor(x)


@pk.func
def ceil(x: T) -> T:
    return pk.ceil(x)


@pk.func
def trunc(x: T) -> T:
    return pk.trunc(x)


@pk.func
def _round(x: T) -> T:
    t = pk.trunc(x)
    if pk.fabs(x - t) >= 0.5:
        return t + pk.copysign(1.0, x)
    return t


@pk.func
def round(x: T) -> T:
    """Round to nearest, halves away from zero (C round; pk.rint rounds halves to even)."""
    if T is f32 or T is f64:
        return _round(x)
    else:
        return T(_round(pk.f32(x)))


@pk.func
def copysign(x: T, y: T) -> T:
    return pk.copysign(x, y)


@pk.func
def fma(x: T, y: T, z: T) -> T:
    """x * y + z with one rounding."""
    if T is f32 or T is f64:
        return pk.fma(x, y, z)
    else:
        return T(pk.fma(pk.f64(x), pk.f64(y), pk.f64(z)))


@pk.func
def isnan(x: T) -> pk.bool_:
    return pk.isnan(x)


@pk.func
def isinf(x: T) -> pk.bool_:
    return pk.isinf(x)


@pk.func
def fmin(x: T, y: T) -> T:
    """The smaller argument, ignoring a NaN (C fmin)."""
    return pk.fmin(x, y)


@pk.func
def fmax(x: T, y: T) -> T:
    """The larger argument, ignoring a NaN (C fmax)."""
    return pk.fmax(x, y)


@pk.func
def minimum(x: T, y: T) -> T:
    """The smaller argument, NaN if either is NaN; -0 < +0."""
    return pk.minimum(x, y)


@pk.func
def maximum(x: T, y: T) -> T:
    """The larger argument, NaN if either is NaN; -0 < +0."""
    return pk.maximum(x, y)
