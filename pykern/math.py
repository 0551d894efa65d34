"""The math library, written in pykern itself: every target gets the same functions and the same bits.

Use from a kernel as ``pk.math.exp(x)`` (after ``import pykern.math``) or ``from pykern import math as
pkm``. Every public function is generic over ``T`` in {f32, f64}; f16 and bf16 arguments are widened
to f32, computed, and rounded back. Only exact primitives are used (``pk.fma``, ``pk.sqrt``,
``pk.rint``, bit casts, integer ops): no LLVM transcendental intrinsics, no vendor device library.

Accuracy (max error, measured by ``tests/lang/test_math.py``): at most 2 ulp for f32 and 4 ulp for
f64 on every function over its whole domain (sin/cos/tan included, up to the largest finite
argument); sqrt, fma, fabs, copysign, floor, ceil, trunc, round, fmin/fmax, minimum/maximum are exact.

Algorithms: Cody-Waite reduction (``x = k*ln2 + r`` with an exact fma step) and near-minimax
polynomials (Chebyshev fits, coefficients rounded to the working precision) for exp, exp2, expm1;
``log(1+f) = 2 atanh(f / (2+f))`` evaluated in double-word for log, log2, log1p and pow; for sin,
cos, tan a four-constant double-word reduction by pi/2 up to 2^21 (f32) / 2^49 (f64) and a
Payne-Hanek reduction beyond (exact integer product of the mantissa with a 192-bit window of 2/pi);
``erfc(x) = exp(-x^2) g(x)`` with piecewise polynomials for g (f32: its own f32 polynomials, g and
exp(-x^2) carried in double-word, x^2 split exactly with fma; f32 erf: 1 - exp(log(erfc(x))) from one
polynomial above 0.75). f32 functions use f32 arithmetic only. The f32 exp, tanh and erf that candle's GPU
kernels inline are straight-line code: both sides of each case computed, one chosen by ``pk.select``.

The language has no run-time-indexed tables, multiple return values or compile-time loops, so two
Python factories build device functions from data at import time: ``_horner`` (a polynomial from its
coefficients) and ``_table`` (a chain of selects over constant words, for the bits of 2/pi).
"""
from __future__ import annotations

import pykern as pk
from pykern.lang import builtins as B
from pykern import f32, f64, i32, i64, u32, u64

__all__ = ["exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
           "erf", "erfc", "normcdf", "pow", "fabs", "floor", "ceil", "round", "trunc", "copysign", "fma",
           "isnan", "isinf", "fmin", "fmax", "minimum", "maximum", "fmod"]

T = pk.TypeVar("T")

_INF = float("inf")
_NAN = float("nan")


def _per_type(v32: float, v64: float) -> dict:
    """A constant rounded per precision; a kernel reads it as ``C[T]`` (a compile-time lookup)."""
    return {f32: v32, f64: v64}


# double-word constants (hi, lo) per precision
_LN2 = _per_type(0.6931471824645996, 0.6931471805599453)
_LN2_LO = _per_type(-1.9046542121259336e-09, 2.3190468138462996e-17)
_IL2 = _per_type(1.4426950216293335, 1.4426950408889634)                 # 1/ln2
_IL2_LO = _per_type(1.925963033500011e-08, 2.0355273740931033e-17)
_PIO2_1 = _per_type(1.5707963705062866, 1.5707963267948966)              # pi/2 = _PIO2_1 + ... + _PIO2_4
_PIO2_2 = _per_type(-4.371138828673793e-08, 6.123233995736766e-17)
_PIO2_3 = _per_type(-1.7151245100058819e-15, -1.4973849048591698e-33)
_PIO2_4 = _per_type(1.056299898220315e-23, 5.562271104311117e-50)
_TWOOPI = _per_type(0.6366197466850281, 0.6366197723675814)               # 2/pi
_TWOOPI_LO = _per_type(2.5682552973194106e-08, -3.935735335036497e-17)
_RSQRT2, _RSQRT2_LO = 0.7071067811865476, -4.833646656726457e-17
_TWO_SQRTPI = 1.1283791670955126
_TWO_SQRTPI_32, _TWO_SQRTPI_M1_32 = 1.128379225730896, 0.12837916612625122   # 2/sqrt(pi), 2/sqrt(pi) - 1
_RSQRT2_32, _RSQRT2_32_LO = 0.7071067690849304, 1.2101617485882343e-08        # 1/sqrt(2) in f32 parts
_ERFC_C0, _ERFC_C1, _ERFC_C2 = 0.875, 1.625, 2.5
# 1.5 * 2^23: t = fma(v, c, _MAGIC32) rounds v c to an integer k (|v c| < 2^22): k = t - _MAGIC32 as a float, and
# t's bits are k + 0x4B400000, whose low 9 bits are 0, so that (bits << 23) = (k << 23)
_MAGIC32 = 12582912.0
_ONE32_BITS = 0x3F800000       # the bits of 1.0f: 2^k is (k << 23) + _ONE32_BITS for k in the normal range
_C23 = _per_type(0.6666666865348816, 0.6666666666666666)                 # 2/3 = _C23 + _C23_LO
_C23_LO = _per_type(-1.9868215517249155e-08, 3.700743415417188e-17)
# the formats
_MANT_BITS = _per_type(23, 52)
_MANT_MASK = _per_type(2 ** 23 - 1, 2 ** 52 - 1)
_BIAS = _per_type(127, 1023)
_MIN_NORMAL = _per_type(2.0 ** -126, 2.0 ** -1022)
_SUBNORMAL_SCALE, _SUBNORMAL_K = _per_type(2.0 ** 25, 2.0 ** 54), _per_type(-25, -54)   # scaled into the normals
# thresholds per precision
_TINY_TRIG = _per_type(2.0 ** -12, 2.0 ** -27)       # sin x = tan x = x, cos x = 1 below
_CW_MAX = _per_type(2.0 ** 21, 2.0 ** 49)            # Cody-Waite reduction up to here, Payne-Hanek beyond
# 2/pi after the binary point, 64 bits a word: word k holds bits 64k-63 .. 64k (word 0: zeros, so that a
# window may start before the point); 1216 bits cover the largest f64 exponent.
_TWOOPI_BITS = (
    0, 0xA2F9836E4E441529, 0xFC2757D1F534DDC0, 0xDB6295993C439041, 0xFE5163ABDEBBC561, 0xB7246E3A424DD2E0,
    0x06492EEA09D1921C, 0xFE1DEB1CB129A73E, 0xE88235F52EBB4484, 0xE99C7026B45F7E41, 0x3991D639835339F4,
    0x9C845F8BBDF9283B, 0x1FF897FFDE05980F, 0xEF2F118B5A0A6D1F, 0x6D367ECF27CB09B7, 0x4F463F669E5FEA2D,
    0x7527BAC7EBE5F17B, 0x3D0739F78A5292EA, 0x6BFB5FB11F8D5D08, 0x56033046FC7B6BAB)


# ---------------------------------------------------------------- device functions built from data
def _const(c) -> pk.FuncDef:
    """``const(a) = c`` in the type of ``a``."""
    @pk.func
    def const(a: T) -> T:
        return T(c)
    return const


# In the two factories below, each function defined in the loop sees the closure as it is at its definition
# (pykern reads closure values when a device function is declared), so ``inner`` is the previous one.
def _horner(coeffs: tuple) -> pk.FuncDef:
    """``p(z) = c0 z^n + c1 z^(n-1) + ... + cn`` by Horner's rule with fma (highest degree first)."""
    poly = _const(coeffs[0])
    for c in coeffs[1:]:
        inner = poly

        @pk.func
        def poly(z: T) -> T:
            return pk.fma(inner(z), z, c)
    return poly


def _poly(c32: tuple | None, c64: tuple) -> pk.FuncDef:
    """A polynomial with coefficients per precision (f32 ones rounded to f32; None: f64 only)."""
    p64 = _horner(c64)
    if c32 is None:
        return p64
    p32 = _horner(c32)

    @pk.func
    def poly(z: T) -> T:
        return p32(z) if T is f32 else p64(z)
    return poly


def _table(words: tuple) -> pk.FuncDef:
    """``pick(k) = words[k]`` for a u64 k below len(words): a chain of selects (no run-time tables)."""
    pick = _const(words[0])
    for i in range(1, len(words)):
        w, rest = words[i], pick

        @pk.func
        def pick(k: u64) -> u64:
            if k == i:
                return u64(w)
            return rest(k)
    return pick


# ---------------------------------------------------------------- polynomials (generated: Chebyshev fits)
_pexp = _poly(  # (e^r - 1 - r) / r^2 on |r| <= 0.35
    (0.0013926932588219643, 0.008363778702914715, 0.04166654869914055, 0.16666573286056519, 0.5),
    (2.510135443993923e-08, 2.762134843705726e-07, 2.7557266402504823e-06, 2.480151862045023e-05,
     0.00019841269864391087, 0.0013888888918952918, 0.008333333333329791, 0.04166666666662061,
     0.16666666666666669, 0.5000000000000001))
_pexp2 = _poly(  # (2^r - 1) / r on |r| <= 0.5
    (0.00015453163359779865, 0.0013390863314270973, 0.009618083015084267, 0.055503569543361664,
     0.24022650718688965, 0.6931471824645996),
    (4.4549605981865186e-10, 7.072585949269223e-09, 1.0178062445845774e-07, 1.321544258792169e-06,
     1.525273382983612e-05, 0.0001540353044173605, 0.0013333558146416936, 0.009618129107606888,
     0.0555041086648216, 0.24022650695910097, 0.6931471805599453))
_plog = _poly(  # (2 atanh(s) - 2s - 2s^3/3) / s^5 in s^2 (f32: (2 atanh(s) - 2s) / s^3)
    (0.29601025581359863, 0.39988312125205994, 0.6666668653488159),
    (0.14644067424413199, 0.15329464536713094, 0.18182957719593876, 0.22222210183700977,
     0.28571428631861595, 0.39999999999886393, 0.666666666666667))
_plogq = _poly((0.1887255609035492, 0.22217556834220886, 0.28571343421936035, 0.4000000059604645),  # f32: for pow
               (0.1174901599327367, 0.1170374052207906, 0.13334898841789578, 0.1538459321382296,
                      0.18181818351926282, 0.22222222221582205, 0.28571428571429486, 0.4))
_psin = _poly(  # (sin r - r) / r^3 in r^2
    (2.7154360395797994e-06, -0.00019839234300889075, 0.008333330042660236, -0.1666666716337204),
    (-7.567858770633791e-13, 1.6058162028230698e-10, -2.5052103519284336e-08, 2.755731921019633e-06,
     -0.0001984126984125123, 0.008333333333333325, -0.16666666666666666))
_pcos = _poly(  # (cos r - 1 + r^2/2) / r^4 in r^2
    (2.4469067284371704e-05, -0.0013887881068512797, 0.0416666604578495),
    (-1.13551788827563e-11, 2.087570557714001e-09, -2.755731481138535e-07, 2.4801587293213554e-05,
     -0.0013888888888883076, 0.04166666666666666))
_ptanh32 = _horner((  # (tanh x - x) / x^3 in x^2 on |x| < 0.55, f32
    -0.00661022774875164, 0.021309388801455498, -0.05390942841768265, 0.13333113491535187, -0.3333333134651184))
_perf = _poly(None, (  # erf(x) / x in x^2 on |x| < 1
    -7.795898827002142e-10, 1.3720064546777686e-08, -1.6208483801871705e-07, 1.6447424703317362e-06,
    -1.492473690741966e-05, 0.00012055294904839707, -0.0008548325975389692, 0.0052239776071164225,
    -0.02686617064323777, 0.11283791670945006, -0.37612638903183543, 1.1283791670955126))
_perfc0 = _poly(None, (  # g(a) = erfc(a) e^(a^2) in a - 0.875 on [0.5, 1.25)
    -8.178793859368783e-07, 2.6756701916034212e-06, -8.055394169675349e-06, 2.4813862578236507e-05,
    -7.415897873670597e-05, 0.00021396106885577818, -0.0005950810820218508, 0.0015904825816719737,
    -0.004069537665061771, 0.009922776769590946, -0.022925811484455237, 0.04982841533122216,
    -0.10091439212620511, 0.18795692377318343, -0.3158338964908418, 0.464311583202669))
_perfc1 = _poly(None, (  # g in a - 1.625 on [1.25, 2)
    -3.800687020466049e-07, 1.3512787165173065e-06, -4.4930669928436464e-06, 1.5099518336215553e-05,
    -4.927939871192791e-05, 0.00015562644275927165, -0.000474647565976947, 0.0013938042459434039,
    -0.00392619850073242, 0.010561485442423916, -0.026977910093249322, 0.06496207478417834,
    -0.14603023666418335, 0.30226120936348594))
_perfc2 = _poly(None, (  # g in a - 2.5 on [2, 3)
    4.010268793982498e-09, -1.7022233265672403e-08, 6.706690790495327e-08, -2.7262986241901926e-07,
    1.0852366992052668e-06, -4.214357879841587e-06, 1.5961851696601105e-05, -5.8868958345706055e-05,
    0.00021101982436023977, -0.0007335909374729658, 0.002467036815699688, -0.008001569382093874,
    0.024937997086656914, -0.07434734678979472, 0.2108063640611436))
_perfc3 = _poly(None, (  # a g(a) in 1/a^2 on [3, 28]
    284805079.2968425, -300085756.36476916, 148398164.72083947, -46147857.154772416, 10257656.645200914,
    -1772288.9097479063, 256239.6841748926, -33522.37337703205, 4316.650681956987, -591.6979794419112,
    91.55938581889029, -16.660123983897552, 3.702483321854677, -1.0578554000107498, 0.42314218739982884,
    -0.28209479177338026, 0.564189583547756))
# f32 erf family: least-squares fits on Chebyshev nodes (relative error), rounded to f32 one coefficient at a time
# from the constant term up, each refit absorbing the roundings before it
_perf32 = _horner((  # (erf(x)/x - 2/sqrt(pi)) / x^2 in x^2 on |x| < 1 (for erfc, normcdf)
    -7.344888217630796e-06, 0.00010509399726288393, -0.0008389389258809388, 0.005215360317379236,
    -0.026863792911171913, 0.11283762753009796, -0.37612637877464294))
# g(a) = erfc(a) e^(a^2) = G0 + t P(t) (the constant G0 kept apart, so that g comes in double-word)
_ERFC32_G0 = (0.42758357524871826, 0.23108725249767303, 0.5641895532608032)
_perfc32a = _horner((  # P in t = a - 1 on [0.5, 1.5)
    0.0011062273988500237, -0.0029939941596239805, 0.0069665140472352505, -0.016618961468338966,
    0.037571556866168976, -0.07922999560832977, 0.15437163412570953, -0.2732119560241699))
_perfc32b = _horner((  # P in t = a - 2.25 on [1.5, 3)
    -7.810013812559191e-06, 3.0738745408598334e-05, -0.00010376725549576804, 0.0003492864780128002,
    -0.0011432220926508307, 0.003618323476985097, -0.011002139188349247, 0.03199275955557823,
    -0.08848650008440018))
_perfc32c = _horner((  # a g(a) = G0 + w P(w) in w = 1/a^2 on [3, 10.2]
    13.085016250610352, -8.613580703735352, 3.1531784534454346, -1.0348024368286133, 0.42259031534194946,
    -0.28208813071250916))
_perf32s = _horner((  # erf's own: the same on |x| < 0.75 (erf(x) = x + x (2/sqrt(pi) - 1 + x^2 P(x^2)))
    -0.0006737326039001346, 0.005113136488944292, -0.026834331452846527, 0.11283379048109055, -0.3761261999607086))
# f32 erf on [0.75, 4]: log(erfc(a)) = F0 + u P(u), u = a - C, C a multiple of 2^-22 just below 0.75 (so u is exact)
# where F0 = log(erfc(C)) is an f32 to 2.7e-12; P near-minimax for the absolute error of erfc (weight erfc(a))
_ERF32_C, _ERF32_F0 = 0.7495768070220947, -1.2409254312515259
_perf32t = _horner((
    -1.5518584405072033e-05, 0.0002923033607657999, -0.0023974848445504904, 0.012763907201588154,
    -0.05293213203549385, -0.8077837228775024, -2.2251899242401123))
_twoopi_word = _table(_TWOOPI_BITS)
_twoopi_word32 = _table(_TWOOPI_BITS[:6])    # f32 exponents reach word 5


# ---------------------------------------------------------------- helpers (T in {f32, f64})
@pk.func
def _fast2sum(a: T, b: T, part: i32) -> T:
    """a + b as a double-word, |a| >= |b| (or a = 0): part 0 the rounded sum, 1 its exact error."""
    s = a + b
    if part == 0:
        return s
    return b - (s - a)


@pk.func
def _to_bits(x: T) -> u64:
    """The bits of x (zero-extended for f32)."""
    return pk.u64(pk.bitcast(x, u32)) if T is f32 else pk.bitcast(x, u64)


@pk.func
def _from_bits(x: T, bits: u64) -> T:
    """The number of x's type with these bits."""
    return pk.bitcast(pk.u32(bits), f32) if T is f32 else pk.bitcast(bits, f64)


@pk.func
def _pow2(x: T, k: i32) -> T:
    """2^k in x's type, for k in its normal exponent range (f32: in i32 arithmetic)."""
    if T is f32:
        return pk.bitcast((k << 23) + _ONE32_BITS, f32)
    else:
        return _from_bits(x, pk.u64(k + _BIAS[T]) << _MANT_BITS[T])


@pk.func
def _scale(y: T, k: i32) -> T:
    """y * 2^k with one rounding, for |k| up to about twice the exponent range."""
    k1 = k >> 1                                                      # floor(k / 2): one shift
    return y * _pow2(y, k1) * _pow2(y, k - k1)


# f32 exp pieces, straight-line (no branches: the copies of a GPU tile interleave): k = round(x / ln2) comes from
# the _MAGIC32 rounding as a float and, in the bits, as an integer, with no float -> int conversion
@pk.func
def _expr32(x: f32, t: f32) -> f32:
    """e^r - 1 for r = x - k ln2 (|r| <= 0.35), where t = fma(x, 1/ln2, _MAGIC32) holds k = round(x / ln2)."""
    kf = t - _MAGIC32
    r = pk.fma(kf, -_LN2[f32], x)                                    # exact
    r = pk.fma(kf, -_LN2_LO[f32], r)
    return pk.fma(r * r, _pexp(r), r)


@pk.func
def _pow2t32(t: f32) -> f32:
    """2^k for the k held by t (see _expr32), k in the normal range."""
    return pk.bitcast((pk.bitcast(t, i32) << 23) + _ONE32_BITS, f32)


@pk.func
def _exp32(x: f32) -> f32:
    """e^x: the clamp keeps NaN (and takes +-inf in); 2^k applied in two steps (overflow, subnormals)."""
    x = pk.minimum(pk.maximum(x, -110.0), 100.0)
    t = pk.fma(x, _IL2[f32], _MAGIC32)
    y = _expr32(x, t)
    # t's bits are k + 0x4B400000, even, and 0x4B400000 / 2 ends in 9 zero bits: so h << 23 = floor(k/2) << 23
    # and (b - h) << 23 = ceil(k/2) << 23 (no subtraction of the constant, no division)
    b = pk.bitcast(t, i32)
    h = b >> 1
    s1 = pk.bitcast((h << 23) + _ONE32_BITS, f32)                    # 2^floor(k/2)
    s2 = pk.bitcast(((b - h) << 23) + _ONE32_BITS, f32)              # 2^ceil(k/2)
    return pk.fma(s1, y, s1) * s2                                    # s1 (1 + y) rounded once (s1 normal)


@pk.func
def _exp_r(r: T, k: i32) -> T:
    """2^k * e^r for |r| <= 0.35."""
    y = pk.fma(r * r, _pexp(r), r)
    return _scale(y + 1.0, k)


@pk.func
def _exp(x: T) -> T:
    if T is f32:
        return _exp32(x)
    else:
        if pk.isnan(x):
            return x
        x = pk.fmin(pk.fmax(x, -750.0), 720.0)
        kf = pk.rint(x * _IL2[T])
        r = pk.fma(kf, -_LN2[T], x)                                  # exact
        r = pk.fma(kf, -_LN2_LO[T], r)
        return _exp_r(r, pk.i32(kf))


@pk.func
def _exp2(x: T) -> T:
    if pk.isnan(x):
        return x
    x = pk.fmin(pk.fmax(x, -160.0 if T is f32 else -1100.0), 140.0 if T is f32 else 1050.0)
    kf = pk.rint(x)
    r = x - kf
    return _scale(pk.fma(r, _pexp2(r), 1.0), pk.i32(kf))


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
    kf = pk.rint(x * _IL2[T])
    rh = pk.fma(kf, -_LN2[T], x)                                     # exact
    r = pk.fma(kf, -_LN2_LO[T], rh)
    c = pk.fma(kf, -_LN2_LO[T], rh - r)                              # r + c = x - k ln2
    e = pk.fma(r * r, _pexp(r), r)
    e = e + pk.fma(c, e, c)                                          # expm1(r + c)
    k = pk.i32(kf)
    if k <= (23 if T is f32 else 52):
        t = _scale(T(1.0), k)
        return pk.fma(t, e, t - 1.0)
    return _scale(e + (1.0 - _scale(T(1.0), -k)), k)


@pk.func
def _log1p_part(f: T, part: i32) -> T:
    """log(1 + f) as a double-word hi + lo (part 0: hi, 1: lo) for f in [-0.3, 0.42], f exact. Parts 4, 5: the
    same to about 2^-36 relative in f32 too (the s^3 term in double-word, as always in f64), for pow."""
    dh = f + 2.0
    dl = (2.0 - dh) + f
    sh = f / dh
    rem = pk.fma(-sh, dh, f) - sh * dl
    sl = rem / dh
    z = sh * sh
    lh = sh * 2.0
    if T is f32 and part < 4:
        ll = sl * 2.0 + sh * z * _plog(z)
    else:
        # the s^3 term carried in double-word so that pow gets log to ~2^-64 relative
        ze = pk.fma(sh, sh, -z)
        s3 = sh * z
        s3e = pk.fma(sh, z, -s3) + sh * ze
        t1 = s3 * _C23[T]
        t1e = pk.fma(s3, _C23[T], -t1) + (s3e * _C23[T] + s3 * _C23_LO[T])
        h1 = lh + t1
        e1 = t1 - (h1 - lh)
        ll = e1 + (sl * 2.0 + (t1e + sl * (z * 2.0) + s3 * z * _plogq(z)))   # d/ds 2atanh(s) = 2/(1-s^2)
        lh = h1
    return _fast2sum(lh, ll, part & 1)


@pk.func
def _log_part(x: T, part: i32) -> T:
    """x = 2^k m, m in [sqrt(2)/2, sqrt(2)): parts 0/1 = log(m) hi/lo, 2 = k. x finite, > 0."""
    kadj = 0
    if x < _MIN_NORMAL[T]:
        x = x * _SUBNORMAL_SCALE[T]
        kadj = _SUBNORMAL_K[T]
    bits = _to_bits(x)
    k = pk.i32(bits >> _MANT_BITS[T]) - _BIAS[T] + kadj
    m = _from_bits(x, (bits & _MANT_MASK[T]) | (pk.u64(_BIAS[T]) << _MANT_BITS[T]))
    if m > 1.4142135623730951:
        m = m * 0.5
        k = k + 1
    if part == 2:
        return T(k)
    return _log1p_part(m - 1.0, part)


@pk.func
def _log_dd(x: T, part: i32) -> T:
    """log(x) as double-word (part 0: hi, 1: lo; 4, 5: the same, more accurate in f32); x finite, > 0."""
    h = _log_part(x, part & 4)
    l = _log_part(x, (part & 4) + 1)
    kf = _log_part(x, 2)
    ah = kf * _LN2[T]
    al = pk.fma(kf, _LN2[T], -ah) + kf * _LN2_LO[T]
    s = ah + h
    bb = s - ah
    e = (ah - (s - bb)) + (h - bb)
    return _fast2sum(s, e + (al + l), part & 1)


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
    c = T(_IL2[T])
    ph = h * c
    pl = pk.fma(h, c, -ph) + (h * _IL2_LO[T] + l * c)
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
def _mulhi(a: u64, b: u64) -> u64:
    """The high 64 bits of the 128-bit product a * b."""
    al = a & 0xffffffff
    ah = a >> 32
    bl = b & 0xffffffff
    bh = b >> 32
    lh = al * bh
    hl = ah * bl
    mid = ((al * bl) >> 32) + (lh & 0xffffffff) + (hl & 0xffffffff)
    return ah * bh + (lh >> 32) + (hl >> 32) + (mid >> 32)


@pk.func
def _twoopi_bits(x: T, k: u64) -> u64:
    """Word k of _TWOOPI_BITS (the words an exponent of T can reach)."""
    return _twoopi_word32(k) if T is f32 else _twoopi_word(k)


@pk.func
def _funnel(hi: u64, lo: u64, s: u64) -> u64:
    """The 64 bits that start s bits into hi, continuing into lo (s < 64)."""
    return (hi << s) | ((lo >> (63 - s)) >> 1)


@pk.func
def _sin_part(rh: T, rl: T, part: i32) -> T:
    """sin(rh + rl) as double-word (part 0 hi, 1 lo)."""
    z = rh * rh
    u = rh * z * _psin(z) + rl * (1.0 - 0.5 * z)
    return _fast2sum(rh, u, part)


@pk.func
def _cos_part(rh: T, rl: T, part: i32) -> T:
    """cos(rh + rl) as double-word (part 0 hi, 1 lo)."""
    z = rh * rh
    ze = pk.fma(rh, rh, -z)
    hz = 0.5 * z
    w = 1.0 - hz
    v = (((1.0 - w) - hz) - 0.5 * ze) + (z * z * _pcos(z) - rh * rl)
    return _fast2sum(w, v, part)


@pk.func
def _trig(x: T, fn: i32) -> T:
    """sin (fn 0), cos (fn 1) or tan (fn 2) of x: x = q pi/2 + (rh + rl), then a polynomial on |r| <= pi/4."""
    if pk.isinf(x) or pk.isnan(x):
        return x - x
    ax = pk.fabs(x)
    if ax < _TINY_TRIG[T]:
        return T(1.0) if fn == 1 else x
    q = i64(0)
    rh = x
    rl = T(0.0)
    if ax > 0.785 and ax <= _CW_MAX[T]:
        # Cody-Waite: q * (pi/2) in four parts, the first product exact
        qf = pk.rint(pk.fma(x, _TWOOPI[T], x * _TWOOPI_LO[T]))
        c2 = T(_PIO2_2[T])
        t = pk.fma(qf, -_PIO2_1[T], x)                                   # exact
        p = qf * c2
        pe = pk.fma(qf, c2, -p)
        s = t - p
        bb = s - t
        e = (t - (s - bb)) - (p + bb)
        lo = e - pe - qf * _PIO2_3[T] - qf * _PIO2_4[T]
        rh = s + lo
        rl = lo - (rh - s)
        q = pk.i64(qf)
    elif ax > _CW_MAX[T]:
        # Payne-Hanek: |x| = m 2^e; (m 2^e 2/pi) mod 4 from m times the bits of 2/pi from weight 2^(1-e)
        # on (bits >= 2 give multiples of 4). v = 192 bits of 2/pi from there, so x 2/pi mod 4 =
        # (m v mod 2^192) 2^-190: its bits 190, 191 are the quadrant, the 126 below the fraction.
        bits = _to_bits(ax)
        m = (bits & _MANT_MASK[T]) | (_MANT_MASK[T] + 1)
        j = (bits >> _MANT_BITS[T]) - (_BIAS[T] + _MANT_BITS[T] - 62)      # 62 + e
        k = j >> 6
        sft = j & 63
        w1 = _twoopi_bits(x, k + 1)
        w2 = _twoopi_bits(x, k + 2)
        v1 = _funnel(w1, w2, sft)
        lo1 = m * v1
        b = _mulhi(m, _funnel(w2, _twoopi_bits(x, k + 3), sft)) + lo1       # product bits 64..127
        a = m * _funnel(_twoopi_bits(x, k), w1, sft) + _mulhi(m, v1) + pk.u64(b < lo1)   # bits 128..191
        n = (a + (1 << 61)) >> 62                                          # the nearest quadrant
        f = pk.i64(a - (n << 62))                                          # fraction: f 2^-62 + b 2^-126
        # as exact chunks of the working precision, summed in double-word, times pi/2 in double-word
        if T is f32:
            c0 = T(f >> 40) * (2.0 ** -22)
            c1 = T((f >> 16) & 0xffffff) * (2.0 ** -46)
            c2 = T(((f & 0xffff) << 8) | pk.i64(b >> 56)) * (2.0 ** -70)
            c3 = T(pk.i64(b >> 32) & 0xffffff) * (2.0 ** -94)
        else:
            c0 = T(f >> 32) * (2.0 ** -30)
            c1 = T(f & 0xffffffff) * (2.0 ** -62)
            c2 = T(b >> 32) * (2.0 ** -94)
            c3 = T(b & 0xffffffff) * (2.0 ** -126)
        h = c0 + c1
        lo = (c0 - h) + c1
        h2 = h + c2
        lo = lo + ((h - h2) + c2)
        h3 = h2 + c3
        lo = lo + ((h2 - h3) + c3)
        uh = h3 + lo
        ul = lo - (uh - h3)
        ph = uh * _PIO2_1[T]
        pl = pk.fma(uh, _PIO2_1[T], -ph) + (uh * _PIO2_2[T] + ul * _PIO2_1[T])
        rh = ph + pl
        rl = pl - (rh - ph)
        q = pk.i64(n)
        if x < 0.0:
            rh = -rh
            rl = -rl
            q = -q
    if fn == 2:
        sh = _sin_part(rh, rl, 0)
        sl = _sin_part(rh, rl, 1)
        ch = _cos_part(rh, rl, 0)
        cl = _cos_part(rh, rl, 1)
        nh = sh
        nl = sl
        dh = ch
        dl = cl
        if (q & 1) != 0:
            nh = -ch
            nl = -cl
            dh = sh
            dl = sl
        t = nh / dh
        res = (pk.fma(-t, dh, nh) + nl) - t * dl
        return t + res / dh
    q = q + fn                                                               # cos x = sin(x + pi/2)
    r = _sin_part(rh, rl, 0) if (q & 1) == 0 else _cos_part(rh, rl, 0)
    return -r if (q & 2) != 0 else r


@pk.func
def _tanh32(x: f32) -> f32:
    """Straight-line: on a = |x|, the odd polynomial (a < 0.55; it gives a itself below 2^-12) and
    1 - 2/(e^(2a) + 1), both computed, one selected, x's sign put back (so tanh(-0) = -0).
    e^(2a) + 1 = s (1 + y) + 1 is rounded once; it lies in [4, 2^29], so its reciprocal is the
    hardware's estimate and one Newton step (no IEEE division, whose slow-path branch on GPUs
    splits a tile's copies apart)."""
    a = pk.fabs(x)
    z = a * a
    small = pk.fma(a * z, _ptanh32(z), a)
    a2 = pk.minimum(a, 9.5) * 2.0                                    # tanh rounds to 1 above 9.5; NaN kept
    t = pk.fma(a2, _IL2[f32], _MAGIC32)
    y = _expr32(a2, t)                                               # e^a2 = s (1 + y), s = 2^k, 0 <= k <= 28
    s = _pow2t32(t)
    d = pk.fma(s, y, s + 1.0)
    r = pk.fast_rcp(d)
    r = pk.fma(pk.fma(-d, r, 1.0), r, r)
    big = pk.fma(-2.0, r, 1.0)
    return pk.copysign(pk.select(a < 0.55, small, big), x)


@pk.func
def _tanh(x: T) -> T:
    if T is f32:
        return _tanh32(x)
    else:
        ax = pk.fabs(x)
        if ax < 2.0 ** -27:
            return x
        if ax > 22.0:
            return pk.copysign(1.0, x)
        t = _expm1(ax * 2.0)
        return pk.copysign(t / (t + 2.0), x)


# ---------------------------------------------------------------- erf family (f64 algorithms)
@pk.func
def _erfc_g(a: f64) -> f64:
    """g(a) = erfc(a) exp(a^2) for 0.5 <= a <= 28."""
    if a < 1.25:
        return _perfc0(a - _ERFC_C0)
    if a < 2.0:
        return _perfc1(a - _ERFC_C1)
    if a < 3.0:
        return _perfc2(a - _ERFC_C2)
    return _perfc3(1.0 / (a * a)) / a


@pk.func
def _expmsq_mul(a: f64, g: f64) -> f64:
    """exp(-a^2) * g for 0 <= a <= 28, a^2 taken exactly, g folded in before the last rounding."""
    z = a * a
    ze = pk.fma(a, a, -z)
    kf = pk.rint(-z * _IL2[f64])
    r = pk.fma(kf, -_LN2[f64], -z)                                   # exact
    r = pk.fma(kf, -_LN2_LO[f64], r)
    y = pk.fma(r * r, _pexp(r), r)                                   # e^r - 1
    y = pk.fma(-ze, y, y - ze)                                       # e^(r - ze) - 1
    return _scale(pk.fma(g, y, g), pk.i32(kf))


@pk.func
def _erf64(x: f64) -> f64:
    if pk.isnan(x):
        return x
    ax = pk.fabs(x)
    if ax < 1.0:
        return x * _perf(x * x)
    if ax >= 6.0:
        return pk.copysign(1.0, x)
    return pk.copysign(1.0 - _expmsq_mul(ax, _erfc_g(ax)), x)


@pk.func
def _erfc64(x: f64) -> f64:
    if pk.isnan(x):
        return x
    if x < 0.5:
        if x > -1.0:
            return pk.fma(-x, _perf(x * x), 1.0)
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


# ---------------------------------------------------------------- erf family, f32 (f32 arithmetic only)
@pk.func
def _erfx32(x: f32) -> f32:
    """erf(x)/x - 1 for |x| < 1 (in [-0.16, 0.13], so that x + x y keeps its rounding errors small)."""
    z = x * x
    return pk.fma(z, _perf32(z), _TWO_SQRTPI_M1_32)


@pk.func
def _expmsq_mul32(a: f32, g: f32, dg: f32) -> f32:
    """exp(-a^2) * g * (1 + dg) for 0 <= a <= 10.2, |dg| tiny: a^2 = z + ze exactly, exp(-z - ze) with the
    reduced argument kept in two parts (r + d), g folded in before the last rounding (once, even into the
    subnormals)."""
    z = a * a
    ze = pk.fma(a, a, -z)
    kf = pk.rint(-z * _IL2[f32])
    rh = pk.fma(kf, -_LN2[f32], -z)                                  # exact
    r = pk.fma(kf, -_LN2_LO[f32], rh)
    d = pk.fma(kf, -_LN2_LO[f32], rh - r) + (dg - ze)                # -z - ze - k ln2 + dg = r + d
    q = r * r * _pexp(r)                                             # e^r - 1 - r
    yl = q + pk.fma(d, r + q, d)                                     # e^(r + d) - 1 - r
    ph = g * r                                                       # g e^(r + d) = g + g r + g yl, in double-word
    s = g + ph
    e = (g - s) + ph
    return _scale(s + (e + pk.fma(g, yl, pk.fma(g, r, -ph))), pk.i32(kf))


@pk.func
def _erfc_tail32(a: f32, al: f32, half: f32) -> f32:
    """half * erfc(a + al) for 0.5 <= a <= 10.2, |al| <= ulp(a); erfc = exp(-a^2) g(a), g's rounding errors
    (and -erfc'(a) al / erfc(a) = 2/sqrt(pi) al / g) passed on as a relative correction."""
    e1 = f32(0.0)
    ia = f32(1.0)
    if a < 1.5:
        t = a - 1.0
        c = _ERFC32_G0[0]
        p = t * _perfc32a(t)
        pe = pk.fma(t, _perfc32a(t), -p)
    elif a < 3.0:
        t = a - 2.25
        c = _ERFC32_G0[1]
        p = t * _perfc32b(t)
        pe = pk.fma(t, _perfc32b(t), -p)
    else:
        w = 1.0 / (a * a)                                            # a g = c + w P(w), g = that / a
        c = _ERFC32_G0[2]
        p = w * _perfc32c(w)
        pe = pk.fma(w, _perfc32c(w), -p)
        ia = 1.0 / a
        e1 = pk.fma(-a, ia, 1.0)                                     # 1/a = ia (1 + e1)
    gh = c + p                                                       # |p| < c
    gl = ((c - gh) + p) + pe
    num = gl - _TWO_SQRTPI_32 * (al * a if a >= 3.0 else al)
    if a >= 3.0:
        g = gh * ia
        num = num * ia + pk.fma(gh, ia, -g)
        gh = g
    return _expmsq_mul32(a, half * gh, num / gh + e1)


@pk.func
def _erfc_dw32(uh: f32, ul: f32, half: f32) -> f32:
    """half * erfc(uh + ul) (half 1 or 0.5, folded in before the last rounding); uh not NaN, |ul| <= ulp(uh)."""
    if uh < 0.5:
        if uh > -1.0:
            # 1 - erf(uh) - erf'(uh) ul, the leading 1 - uh in double-word
            z = uh * uh
            em = pk.fma(z, pk.fma(z, pk.fma(z, -0.16666667, 0.5), -1.0), 1.0)   # e^-z to 4%: only scales ul
            s = 1.0 - uh
            e = (1.0 - s) - uh
            return half * (s + (e - pk.fma(uh, _erfx32(uh), ul * _TWO_SQRTPI_32 * em)))
        if uh < -4.0:
            return half * 2.0
        return half * (2.0 - _erfc_tail32(-uh, -ul, 1.0))
    if uh > 10.2:
        return 0.0
    return _erfc_tail32(uh, ul, half)


@pk.func
def _erf32(x: f32) -> f32:
    """Straight-line: x + x P(x^2) (|x| < 0.75) and 1 - e^f(a), a = min(|x|, 4), both computed, one selected.
    f = log(erfc(a)) = F0 + q with q = u P(u), u = a - C exact; the reduction takes F0 - k ln2 + q without
    rounding F0 + q (that rounding would count where erfc is large), and 1 - s (1 + y) is rounded once.
    k is kept >= -24 so that 1 - s is exact: past a = 3.87, where that leaves r down to -1.4, s = 2^-24
    scales y's extra error away."""
    z = x * x
    small = pk.fma(x, pk.fma(z, _perf32s(z), _TWO_SQRTPI_M1_32), x)
    a = pk.minimum(pk.fabs(x), 4.0)                                  # erf rounds to +-1 above 3.92; NaN kept
    u = a - _ERF32_C
    q = u * _perf32t(u)
    t = pk.fmax(pk.fma(q + _ERF32_F0, _IL2[f32], _MAGIC32), _MAGIC32 - 24.0)   # k = round(f / ln2) >= -24
    kf = t - _MAGIC32
    r = pk.fma(kf, -_LN2[f32], _ERF32_F0) + q
    r = pk.fma(kf, -_LN2_LO[f32], r)
    y = pk.fma(r * r, _pexp(r), r)                                   # erfc(a) = s (1 + y), s = 2^k
    s = _pow2t32(t)
    big = pk.fma(-s, y, 1.0 - s)
    return pk.select(pk.fabs(x) < 0.75, small, pk.copysign(big, x))


@pk.func
def _erfc32(x: f32) -> f32:
    if pk.isnan(x):
        return x
    return _erfc_dw32(x, 0.0, 1.0)


@pk.func
def _normcdf32(x: f32) -> f32:
    if pk.isnan(x):
        return x
    uh = -x * _RSQRT2_32
    ul = pk.fma(-x, _RSQRT2_32, -uh) - x * _RSQRT2_32_LO             # -x/sqrt(2) = uh + ul
    return _erfc_dw32(uh, ul, 0.5)


@pk.func
def _erf(x: T) -> T:
    return _erf32(x) if T is f32 else _erf64(x)


@pk.func
def _erfc(x: T) -> T:
    return _erfc32(x) if T is f32 else _erfc64(x)


@pk.func
def _normcdf(x: T) -> T:
    return _normcdf32(x) if T is f32 else _normcdf64(x)


# ---------------------------------------------------------------- pow
@pk.func
def _exp_r2(r: T, c: T, k: i32) -> T:
    """2^k e^(r + c) for |r| <= 0.35, |c| tiny: 1 + r + (e^(r + c) - 1 - r) summed in double-word."""
    q = r * r * _pexp(r)                                             # e^r - 1 - r
    yl = q + pk.fma(c, r + q, c)
    s = 1.0 + r
    e = (1.0 - s) + r
    return _scale(s + (e + yl), k)


@pk.func
def _pow_pos(ax: T, y: T) -> T:
    """ax^y for finite ax > 0 and finite y, via double-word log and exp."""
    lh = _log_dd(ax, 4)
    ll = _log_dd(ax, 5)
    ph = y * lh
    pl = pk.fma(y, lh, -ph) + y * ll
    if ph > (89.0 if T is f32 else 710.0):
        return _INF
    if ph < (-105.0 if T is f32 else -750.0):
        return 0.0
    kf = pk.rint(ph * _IL2[T])
    r = pk.fma(kf, -_LN2[T], ph)                                     # exact
    if T is f32:
        rr = pk.fma(kf, -_LN2_LO[T], r)
        return _exp_r2(rr, pk.fma(kf, -_LN2_LO[T], r - rr) + pl, pk.i32(kf))
    r = pk.fma(kf, -_LN2_LO[T], r) + pl
    return _exp_r(r, pk.i32(kf))


@pk.func
def _pow(x: T, y: T) -> T:
    if y == 0.0 or x == 1.0:
        return 1.0
    if pk.isnan(x) or pk.isnan(y):
        return x + y
    ax = pk.fabs(x)
    yint = pk.trunc(y) == y
    yodd = yint and pk.fabs(y) < (16777216.0 if T is f32 else 9007199254740992.0) and pk.trunc(y * 0.5) != y * 0.5
    if pk.isinf(y):
        if ax == 1.0:
            return 1.0
        if (ax < 1.0) == (y > 0.0):
            return 0.0
        return _INF
    if ax == 0.0 or pk.isinf(x):
        big = (ax == 0.0) == (y < 0.0)                                  # |result| is inf
        mag = T(_INF) if big else T(0.0)
        return pk.copysign(mag, x) if yodd else mag
    if x < 0.0 and not yint:
        return _NAN
    r = _pow_pos(ax, y)
    return -r if (x < 0.0 and yodd) else r


@pk.func
def _sin(x: T) -> T:
    return _trig(x, 0)


@pk.func
def _cos(x: T) -> T:
    return _trig(x, 1)


@pk.func
def _tan(x: T) -> T:
    return _trig(x, 2)


@pk.func
def _rsqrt(x: T) -> T:
    return 1.0 / pk.sqrt(x)


@pk.func
def _round(x: T) -> T:
    t = pk.trunc(x)
    if pk.fabs(x - t) >= 0.5:
        return t + pk.copysign(1.0, x)
    return t


# ---------------------------------------------------------------- public functions
def _public(name: str, impl: pk.FuncDef, doc: str, wide=f32) -> pk.FuncDef:
    """The public ``name(x)``: ``impl`` on f32/f64 (only f64 where ``wide`` is f64); other float types
    (f16, bf16; f32 where wide is f64) are converted to ``wide``, computed, and rounded back."""
    @pk.func
    def public(x: T) -> T:
        if T is f64 or T is wide:
            return impl(x)
        else:
            return T(impl(wide(x)))
    return _named(public, name, doc)


def _named(fdef: pk.FuncDef, name: str, doc: str) -> pk.FuncDef:
    """A factory-made device function under its public name (errors and cache fingerprints use it)."""
    fdef.name = fdef.source.name = name
    fdef.__doc__ = doc
    return fdef


exp = _public("exp", _exp, "e^x.")
exp2 = _public("exp2", _exp2, "2^x.")
expm1 = _public("expm1", _expm1, "e^x - 1, accurate near 0.")
log = _public("log", _log, "Natural logarithm.")
log2 = _public("log2", _log2, "Base-2 logarithm (exact at powers of two).")
log1p = _public("log1p", _log1p, "log(1 + x), accurate near 0.")
rsqrt = _public("rsqrt", _rsqrt, "1 / sqrt(x).")
sin = _public("sin", _sin, "Sine (accurate for every finite argument: Payne-Hanek reduction beyond 2^21 / 2^49).")
cos = _public("cos", _cos, "Cosine (accurate for every finite argument).")
tan = _public("tan", _tan, "Tangent (accurate for every finite argument).")
tanh = _public("tanh", _tanh, "Hyperbolic tangent.")
round = _public("round", _round, "Round to nearest, halves away from zero (C round; pk.rint rounds halves to even).")
erf = _public("erf", _erf, "Error function.")
erfc = _public("erfc", _erfc, "Complementary error function 1 - erf(x), accurate for large x.")
normcdf = _public("normcdf", _normcdf, "Standard normal CDF, 0.5 * erfc(-x / sqrt(2)), accurate in the lower tail.")


@pk.func
def pow(x: T, y: T) -> T:
    """x^y with C99 special cases (pow(x, 0) = pow(1, y) = 1, negative x with integer y, ...)."""
    if T is f32 or T is f64:
        return _pow(x, y)
    else:
        return T(_pow(pk.f32(x), pk.f32(y)))


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


def _exact(name: str, prim, doc: str, binary: bool = False) -> pk.FuncDef:
    """The public ``name(x)`` (or ``name(x, y)`` where binary): the exact primitive ``prim``."""
    if binary:
        @pk.func
        def public(x: T, y: T) -> T:
            return prim(x, y)
    else:
        @pk.func
        def public(x: T) -> T:
            return prim(x)
    return _named(public, name, doc)


sqrt = _exact("sqrt", pk.sqrt, "Correctly rounded square root.")
fabs = _exact("fabs", pk.fabs, "|x|.")
floor = _exact("floor", pk.floor, "Round toward -inf.")
ceil = _exact("ceil", pk.ceil, "Round toward +inf.")
trunc = _exact("trunc", pk.trunc, "Round toward zero.")
copysign = _exact("copysign", pk.copysign, "|x| with the sign of y.", binary=True)
fmin = _exact("fmin", pk.fmin, "The smaller argument, ignoring a NaN (C fmin).", binary=True)
fmax = _exact("fmax", pk.fmax, "The larger argument, ignoring a NaN (C fmax).", binary=True)
minimum = _exact("minimum", pk.minimum, "The smaller argument, NaN if either is NaN; -0 < +0.", binary=True)
maximum = _exact("maximum", pk.maximum, "The larger argument, NaN if either is NaN; -0 < +0.", binary=True)


_UINT = {pk.f32: pk.u32, pk.f64: pk.u64}


@pk.func
def fmod(x: T, y: T) -> T:
    """C fmod: x - n*y with n = trunc(x / y), exact (the result is always representable), with the
    sign of x. Bit-level long division (musl's algorithm), so every target gives the same bits;
    NVPTX's own frem lowering rounds. What ``%`` on floats means in kernels."""
    if T is not pk.f32 and T is not pk.f64:
        return T(_fmod(pk.f32(x), pk.f32(y)))  # exact: the remainder of two halves fits a half
    else:
        return _fmod(x, y)


B.OPERATOR_FUNCS["float_mod"] = fmod  # `%` on floats in every kernel


@pk.func
def _fmod(x: T, y: T) -> T:
    if pk.isnan(x) or pk.isnan(y) or pk.isinf(x) or y == 0:
        return (x * y) / (x * y)
    if pk.fabs(x) < pk.fabs(y):
        return x
    ux = pk.bitcast(pk.fabs(x), _UINT[T])
    uy = pk.bitcast(pk.fabs(y), _UINT[T])
    ex = pk.i32(ux >> _MANT_BITS[T])
    ey = pk.i32(uy >> _MANT_BITS[T])
    mx = ux & _MANT_MASK[T]
    my = uy & _MANT_MASK[T]
    if ex == 0:  # subnormal: normalise the mantissa
        ex = 1
        while mx >> _MANT_BITS[T] == 0:
            mx <<= 1
            ex -= 1
    else:
        mx |= 1 << _MANT_BITS[T]
    if ey == 0:
        ey = 1
        while my >> _MANT_BITS[T] == 0:
            my <<= 1
            ey -= 1
    else:
        my |= 1 << _MANT_BITS[T]
    while ex > ey:
        if mx >= my:
            mx -= my
        mx <<= 1
        ex -= 1
    if mx >= my:
        mx -= my
    if mx == 0:
        return x * 0  # a zero with the sign of x
    while mx >> _MANT_BITS[T] == 0:
        mx <<= 1
        ex -= 1
    if ex > 0:
        bits = (mx & _MANT_MASK[T]) | (_UINT[T](ex) << _MANT_BITS[T])
    else:
        bits = mx >> _UINT[T](1 - ex)
    return pk.copysign(pk.bitcast(bits, T), x)
