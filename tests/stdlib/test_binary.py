"""BINARY: the twelve ops for every dtype and layout, against NumPy / ml_dtypes (bit-exact).

Semantics are candle's CPU backend: f16/bf16/f8 computed in f32 and rounded once (f8 saturating),
integers wrap, ``maximum(a, b) = b if a < b else a`` (``minimum``: ``b if a > b else a``) so a NaN lhs
propagates and a NaN rhs is dropped; integer division truncates toward zero and ``x / 0`` gives all
bits set (``i64::MIN / -1`` wraps to ``i64::MIN``), where candle's CPU backend panics.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pykern as pk
from pykern import bf16, f8e4m3, f16, f32, f64, i64, u8, u32
from stdlib_kernels import BINARY, binary, kernel_name
from _elementwise import RNG, abi_mismatches, assert_bits, random, round_to, specials

DTYPES = binary.DTYPES
OPS = list(binary.ROOT)
ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
       "ge": np.greater_equal}


def int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating division; ``x / 0`` is all bits set and ``MIN / -1`` wraps."""
    safe = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):
        q = a // safe
        q = np.where((q * safe != a) & ((a < 0) != (safe < 0)), q + 1, q).astype(a.dtype)
    return np.where(b == 0, np.array(-1).astype(a.dtype), q)


def expected(op: str, a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    """candle's CPU result of ``op`` on host arrays of ``dtype``."""
    wide = (lambda x: x.astype(np.float32)) if dtype.is_storage_float else (lambda x: x)
    wa, wb = wide(a), wide(b)
    if op in CMP:
        return CMP[op](wa, wb).astype(np.uint8)
    if op == "maximum":
        return np.where(wa < wb, b, a)
    if op == "minimum":
        return np.where(wa > wb, b, a)
    if op == "div" and dtype.is_int:
        return int_div(a, b)
    with np.errstate(all="ignore"):
        r = ARITH[op](wa, wb)
    return round_to(r, dtype) if dtype.is_storage_float else r.astype(dtype.np)


def check_all(dev_a, dev_b, host_a, host_b, dtype, ops=OPS):
    for op in ops:
        got = getattr(binary, op)(dev_a, dev_b)
        want = expected(op, *np.broadcast_arrays(host_a, host_b), dtype)
        assert got.shape == want.shape and got.dtype is (u8 if op in CMP else dtype)
        assert_bits(got.to_host(), want, f"{op} {dtype}")


def data(dtype, n: int) -> np.ndarray:
    x = random(dtype, n)
    if dtype.is_float:  # exactly representable; spread the exponents for mul/div
        x = (x.astype(np.float64) * np.exp2(RNG.integers(-3, 4, n))).astype(dtype.np)
    return x


def views(device, dtype):
    """(label, lhs view, rhs view, lhs host, rhs host): every layout the kernels must handle."""
    base_a, base_b = data(dtype, 4200), data(dtype, 4200)
    base_b[::5] = base_a[::5]  # equal pairs for the comparisons
    da, db = device.to_device(base_a), device.to_device(base_b)
    it = base_a.itemsize

    def view(dev, host, shape, strides, offset=0):
        return (dev.as_strided(shape, strides, offset),
                np.lib.stride_tricks.as_strided(host[offset:], shape, [s * it for s in strides]))

    def both(shape_a, strides_a, off_a, shape_b, strides_b, off_b):
        (va, ha), (vb, hb) = view(da, base_a, shape_a, strides_a, off_a), view(db, base_b, shape_b, strides_b, off_b)
        return va, vb, ha, hb

    yield "contiguous", *both((3, 1037), (1037, 1), 0, (3, 1037), (1037, 1), 0)
    yield "lhs transposed", *both((29, 37), (1, 29), 0, (29, 37), (37, 1), 0)
    yield "both transposed", *both((31, 33), (1, 31), 0, (31, 33), (1, 31), 0)
    yield "rhs row broadcast", *both((37, 45), (45, 1), 0, (45,), (1,), 0)
    yield "lhs column, rhs row", *both((37, 1), (1, 1), 0, (1, 45), (45, 1), 0)
    yield "rhs column", *both((19, 67), (67, 1), 0, (19, 1), (1, 1), 0)
    yield "scalar rhs", *both((4, 5, 61), (305, 61, 1), 0, (), (), 7)
    yield "scalar lhs", *both((), (), 3, (1031,), (1,), 0)
    yield "middle broadcast", *both((4, 5, 6), (30, 6, 1), 0, (4, 1, 6), (6, 6, 1), 0)
    yield "outer+inner broadcast", *both((4, 5, 6), (30, 6, 1), 0, (1, 5, 1), (5, 1, 1), 0)
    yield "sliced with offsets", *both((5, 97), (150, 1), 13, (5, 97), (1, 5), 21)
    yield "strided both", *both((7, 9, 11), (2, 150, 14), 1, (7, 9, 11), (99, 11, 1), 2)
    yield "empty", *both((0, 5), (5, 1), 0, (0, 5), (5, 1), 0)
    yield "empty broadcast", *both((3, 0), (0, 1), 0, (1,), (1,), 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layouts(device, dtype):
    for label, va, vb, ha, hb in views(device, dtype):
        try:
            check_all(va, vb, ha, hb, dtype)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None


@pytest.mark.parametrize("dtype", [f32, f64, f16, bf16, f8e4m3], ids=str)
def test_float_specials(device, dtype):
    s = specials(dtype)
    a, b = s[:, None], s[None, :]  # every pair, through row and column broadcasts
    check_all(device.to_device(a), device.to_device(b), a, b, dtype)


@pytest.mark.parametrize("dtype", [u8, u32, i64], ids=str)
def test_int_extremes(device, dtype):
    info = np.iinfo(dtype.np)
    s = np.array(sorted({0, 1, 2, 3, 7, info.max, info.max - 1, info.min, info.min + 1, info.max // 2}
                        | ({-1, -2, -7} if info.min else set())), dtype=dtype.np)
    a, b = s[:, None], s[None, :]
    check_all(device.to_device(a), device.to_device(b), a, b, dtype)


def test_documented_int_semantics(device):
    """Division by zero gives all bits set, MIN / -1 wraps, division truncates, arithmetic wraps."""
    d = lambda x, t: device.to_device(np.array(x, t))  # noqa: E731
    assert binary.div(d([7, 0, 255], np.uint8), d([0, 0, 0], np.uint8)).to_host().tolist() == [255] * 3
    assert binary.div(d([7, 2**32 - 1], np.uint32), d([0, 0], np.uint32)).to_host().tolist() == [2**32 - 1] * 2
    lo = np.iinfo(np.int64).min
    got = binary.div(d([7, -7, lo, -7, 7], np.int64), d([0, 2, -1, -2, -2], np.int64)).to_host().tolist()
    assert got == [-1, -3, lo, 3, -3]
    assert binary.add(d([250], np.uint8), d([10], np.uint8)).to_host().tolist() == [4]
    assert binary.sub(d([0], np.uint32), d([1], np.uint32)).to_host().tolist() == [2**32 - 1]


def test_nan_max_min_follow_candle_cpu(device):
    nan = np.float32(np.nan)
    a, b = device.to_device(np.array([nan, 1, -0.0], np.float32)), device.to_device(np.array([1, nan, 0.0], np.float32))
    mx, mn = binary.maximum(a, b).to_host(), binary.minimum(a, b).to_host()
    assert np.isnan(mx[0]) and mx[1] == 1 and np.signbit(mx[2])  # lhs wins on NaN and on +-0
    assert np.isnan(mn[0]) and mn[1] == 1 and np.signbit(mn[2])


def test_candle_launch_shape_and_raw_info(device):
    """The kernel as candle launches it: grid ceil(n/1024) x 1024, pre-offset pointers, raw info."""
    a, b = RNG.standard_normal((6, 301)).astype(np.float32), RNG.standard_normal((301,)).astype(np.float32)
    da, db, out = device.to_device(a), device.to_device(b), device.empty((6, 301), f32)
    info = device.to_device(np.array([6, 301, 301, 1, 0, 1], np.uint64))
    fn = device.get_or_load_func("bsub_f32", BINARY)
    fn[(-(-a.size // 1024), 1, 1), (1024, 1, 1)](a.size, 2, info, da, db, out)
    assert_bits(out.to_host(), a - b)
    fn[(1, 1, 1), (32, 1, 1)](a.size, 2, None, da, device.to_device(np.tile(b, 6)), out)  # grid-stride
    assert_bits(out.to_host(), a - b)


def test_candle_info_for_contiguous_operands(device):
    """candle passes info even when both operands are contiguous (issue 25): the kernel sees that from
    info and takes its contiguous loop; size-1 dims carry any stride. An info where only one operand
    is contiguous must still index the other by its strides."""
    a, b = RNG.standard_normal((3, 5, 7)).astype(np.float32), RNG.standard_normal((3, 5, 7)).astype(np.float32)
    da, db, out = device.to_device(a), device.to_device(b), device.empty((3, 5, 7), f32)
    fn = device.get_or_load_func("badd_f32", BINARY)
    grid = (-(-a.size // 1024), 1, 1)
    for dims, sa, sb in [([3, 5, 7], [35, 7, 1], [35, 7, 1]), ([1, 105, 1], [999, 1, 5], [0, 1, 3]),
                         ([105], [1], [1])]:
        info = device.to_device(np.array(dims + sa + sb, np.uint64))
        fn[grid, (1024, 1, 1)](a.size, len(dims), info, da, db, out)
        assert_bits(out.to_host(), a + b)
    bt = RNG.standard_normal((7, 5, 3)).astype(np.float32)  # b read through transposed strides
    info = device.to_device(np.array([3, 5, 7, 35, 7, 1, 1, 3, 15], np.uint64))
    fn[grid, (1024, 1, 1)](a.size, 3, info, da, device.to_device(bt), out)
    assert_bits(out.to_host(), a + bt.transpose(2, 1, 0))


def test_f8e4m3_spellings(device):
    """candle's Rust side asks for ``{op}_f8e4m3``; they run the same kernels as ``{op}_f8_e4m3``."""
    assert sorted(binary.F8_EXTRAS) == sorted(kernel_name(r, "f8e4m3") for r in binary.ROOT.values())
    x = np.array([1.5, -2, 448, 0.25], f8e4m3.np)
    dx, out = device.to_device(x), device.empty(4, f8e4m3)
    device.get_or_load_func("bmul_f8e4m3", BINARY)[1, 1024](4, 1, None, dx, dx, out)
    assert_bits(out.to_host(), round_to(x.astype(np.float32) ** 2, f8e4m3))


def test_errors(device):
    a = device.to_device(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="broadcast"):
        binary.add(a, device.to_device(np.ones(4, np.float32)))
    with pytest.raises(TypeError, match="no kernel"):
        binary.add(a, device.to_device(np.ones(3, np.float64)))
    with pytest.raises(TypeError, match="no kernel"):
        binary.add(device.to_device(np.ones(3, np.int32)), device.to_device(np.ones(3, np.int32)))


def test_abi():
    assert abi_mismatches(BINARY) == []
    import json
    from _elementwise import ABI
    extra = set(BINARY.names()) - set(json.loads(ABI.read_text())["modules"]["binary"])
    assert extra == set(binary.F8_EXTRAS)
    target = pk.device("cpu").target
    for name in extra:
        assert [t.nbytes for _, t in BINARY.get(name).typed(target).params] == [8] * 6


@st.composite
def operand(draw, shape):
    """A strided view (broadcast dims, permuted and stepped strides, an offset) spanning ``shape``."""
    keep = [draw(st.booleans()) or n == 1 for n in shape]
    sizes = [n if k else 1 for n, k in zip(shape, keep)]
    order = draw(st.permutations(range(len(shape))))
    step, acc, strides = draw(st.sampled_from([1, 2])), 1, [0] * len(shape)
    for d in reversed(order):
        strides[d] = acc * step if keep[d] else 0
        acc *= sizes[d] * step
    return strides, draw(st.integers(0, 3))


@st.composite
def case(draw):
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=0, max_size=4)))
    return shape, draw(operand(shape)), draw(operand(shape)), draw(st.sampled_from(OPS)), \
        draw(st.sampled_from([f32, i64, bf16, u8]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case())
def test_hypothesis_strides(device, c):
    shape, (sa, oa), (sb, ob), op, dtype = c
    span = 8 + max(sum(max(n - 1, 0) * s for n, s in zip(shape, st_)) for st_ in (sa, sb))
    ha, hb = data(dtype, span), data(dtype, span)
    it = ha.itemsize
    va = device.to_device(ha).as_strided(shape, sa, oa)
    vb = device.to_device(hb).as_strided(shape, sb, ob)
    na = np.lib.stride_tricks.as_strided(ha[oa:], shape, [s * it for s in sa])
    nb = np.lib.stride_tricks.as_strided(hb[ob:], shape, [s * it for s in sb])
    check_all(va, vb, na, nb, dtype, ops=[op])
