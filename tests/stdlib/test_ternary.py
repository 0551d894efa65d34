"""TERNARY: ``where_{I}_{T}`` for every condition and value dtype and layout (bit-exact selection)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pykern as pk
from pykern import f8e4m3, f32, f64, i16, i32, i64, u8, u32
from stdlib_kernels import TERNARY, kernel_name, ternary
from _elementwise import ABI, RNG, abi_mismatches, assert_bits, random, specials

PAIRS = sorted({(c, v) for c, v, _ in ternary.TABLE}, key=str)


def cond_data(dtype, n: int) -> np.ndarray:
    """Conditions: zeros and assorted non-zero values (every non-zero value means true)."""
    info = np.iinfo(dtype.np)
    choices = np.array([0, 0, 0, 1, 2, info.max] + ([-1, info.min] if info.min else []), dtype=dtype.np)
    return choices[RNG.integers(0, len(choices), n)]


def value_data(dtype, n: int) -> np.ndarray:
    x = random(dtype, n)
    if dtype.is_float:
        s = specials(dtype)[:n]
        x[: len(s)] = s  # NaN, +-0, +-inf, subnormals are selected bit-exactly
    return x


def views(device, cdt, vdt):
    """(label, (cond, t, f) views, (cond, t, f) host arrays)."""
    bases = [cond_data(cdt, 4200), value_data(vdt, 4200), value_data(vdt, 4200)]
    devs = [device.to_device(b) for b in bases]

    def make(specs):
        vs, hs = [], []
        for (shape, strides, off), base, dev in zip(specs, bases, devs):
            it = base.itemsize
            vs.append(dev.as_strided(shape, strides, off))
            hs.append(np.lib.stride_tricks.as_strided(base[off:], shape, [s * it for s in strides]))
        return vs, hs

    c = ((3, 1037), (1037, 1), 0)
    yield "contiguous", *make([c, c, c])
    t = ((29, 37), (1, 29), 0)
    yield "transposed cond", *make([t, ((29, 37), (37, 1), 0), ((29, 37), (37, 1), 0)])
    yield "broadcast values", *make([((37, 45), (45, 1), 0), ((45,), (1,), 3), ((37, 1), (1, 1), 5)])
    yield "broadcast cond", *make([((1, 45), (45, 1), 0), ((37, 45), (1, 37), 0), ((37, 45), (45, 1), 0)])
    yield "scalar values", *make([((4, 5, 61), (305, 61, 1), 0), ((), (), 1), ((), (), 2)])
    yield "middle broadcast", *make([((4, 1, 6), (6, 6, 1), 0), ((4, 5, 6), (30, 6, 1), 0), ((1, 5, 1), (5, 1, 1), 0)])
    yield "sliced with offsets", *make([((5, 97), (150, 1), 13), ((5, 97), (1, 5), 21), ((5, 97), (98, 1), 2)])
    e = ((0, 5), (5, 1), 0)
    yield "empty", *make([e, e, e])


def expected(c, t, f):
    c, t, f = np.broadcast_arrays(c, t, f)
    return np.where(c != 0, t, f)


@pytest.mark.parametrize("cdt,vdt", PAIRS, ids=lambda p: str(p))
def test_layouts(device, cdt, vdt):
    for label, (c, t, f), (hc, ht, hf) in views(device, cdt, vdt):
        got = ternary.where(c, t, f)
        assert got.dtype is vdt
        assert_bits(got.to_host(), expected(hc, ht, hf), f"{label} where {cdt} {vdt}")


def test_candle_launch_with_raw_info(device):
    """candle always passes info (4n entries) and launches ceil(n/1024) x 1024 on pre-offset pointers."""
    c = cond_data(u32, 2 * 700)
    t, f = RNG.standard_normal(700).astype(np.float64), RNG.standard_normal((2, 1)).astype(np.float64)
    info = device.to_device(np.array([2, 700, 700, 1, 0, 1, 1, 0], np.uint64))
    out = device.empty((2, 700), f64)
    fn = device.get_or_load_func("where_u32_f64", TERNARY)
    fn[(2, 1, 1), (1024, 1, 1)](1400, 2, info, device.to_device(c), device.to_device(t), device.to_device(f), out)
    assert_bits(out.to_host(), expected(c.reshape(2, 700), t, f))
    info = device.to_device(np.array([1400, 1, 1, 1], np.uint64))  # contiguous, described explicitly
    tt, ff = RNG.standard_normal(1400), RNG.standard_normal(1400)
    fn[1, 64](1400, 1, info, device.to_device(c), device.to_device(tt), device.to_device(ff), out.reshape(1400))
    assert_bits(out.to_host().reshape(-1), np.where(c != 0, tt, ff))


def test_candle_info_for_contiguous_operands(device):
    """candle's where_* always gets info (issue 25): all-contiguous strides in it take the kernel's
    contiguous loop; one strided operand (here the condition, transposed) is still read by strides."""
    c = cond_data(u8, 4 * 6 * 5).reshape(4, 6, 5)
    t, f = RNG.standard_normal((4, 6, 5)).astype(np.float32), RNG.standard_normal((4, 6, 5)).astype(np.float32)
    dc, dt, df, out = device.to_device(c), device.to_device(t), device.to_device(f), device.empty((4, 6, 5), f32)
    fn = device.get_or_load_func("where_u8_f32", TERNARY)
    contiguous = [30, 5, 1]
    info = device.to_device(np.array([4, 6, 5] + contiguous * 3, np.uint64))
    fn[(1, 1, 1), (1024, 1, 1)](c.size, 3, info, dc, dt, df, out)
    assert_bits(out.to_host(), np.where(c != 0, t, f))
    ct = np.ascontiguousarray(c.transpose(2, 1, 0))
    info = device.to_device(np.array([4, 6, 5, 1, 4, 24] + contiguous * 2, np.uint64))
    fn[(1, 1, 1), (1024, 1, 1)](c.size, 3, info, device.to_device(ct), dt, df, out)
    assert_bits(out.to_host(), np.where(ct.transpose(2, 1, 0) != 0, t, f))


def test_f8e4m3_spellings(device):
    assert ternary.F8_EXTRAS == [kernel_name("where", c, "f8e4m3") for c in (u8, u32, i64)]
    c, v = np.array([1, 0, 3], np.uint8), np.array([1.5, -448, np.nan], f8e4m3.np)
    out = device.empty(3, f8e4m3)
    device.get_or_load_func("where_u8_f8e4m3", TERNARY)[1, 1024](
        3, 1, None, device.to_device(c), device.to_device(v), device.to_device(v[::-1].copy()), out)
    assert_bits(out.to_host(), np.where(c != 0, v, v[::-1]))
    for cdt in (i16, i32):  # candle's own fp8 kernels also take i16/i32 conditions
        hc = np.array([0, -1, 5], cdt.np)
        assert_bits(ternary.where(device.to_device(hc), device.to_device(v), device.to_device(v[::-1].copy())).to_host(),
                    np.where(hc != 0, v, v[::-1]))


def test_errors(device):
    c = device.to_device(np.ones(3, np.uint8))
    with pytest.raises(TypeError, match="dtypes"):
        ternary.where(c, device.to_device(np.ones(3, np.float32)), device.to_device(np.ones(3, np.float64)))
    with pytest.raises(TypeError, match="no kernel"):
        ternary.where(device.to_device(np.ones(3, np.int32)), *[device.to_device(np.ones(3, np.float32))] * 2)
    with pytest.raises(ValueError, match="broadcast"):
        ternary.where(c, *[device.to_device(np.ones(4, np.float32))] * 2)


def test_abi():
    assert abi_mismatches(TERNARY) == []
    extra = set(TERNARY.names()) - set(json.loads(ABI.read_text())["modules"]["ternary"])
    assert extra == set(ternary.F8_EXTRAS)
    target = pk.device("cpu").target
    for name in extra:
        assert [t.nbytes for _, t in TERNARY.get(name).typed(target).params] == [8] * 7


@st.composite
def operand(draw, shape):
    keep = [draw(st.booleans()) or n == 1 for n in shape]
    order = draw(st.permutations(range(len(shape))))
    step, acc, strides = draw(st.sampled_from([1, 2])), 1, [0] * len(shape)
    for d in reversed(order):
        strides[d] = acc * step if keep[d] else 0
        acc *= (shape[d] if keep[d] else 1) * step
    return strides, draw(st.integers(0, 3))


@st.composite
def case(draw):
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=0, max_size=4)))
    return shape, [draw(operand(shape)) for _ in range(3)], draw(st.sampled_from(PAIRS))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case())
def test_hypothesis_strides(device, c):
    shape, ops, (cdt, vdt) = c
    span = 20 + max(sum(max(n - 1, 0) * s for n, s in zip(shape, st_)) for st_, _ in ops)
    bases = [cond_data(cdt, span), value_data(vdt, span), value_data(vdt, span)]
    views = [device.to_device(b).as_strided(shape, s, o) for b, (s, o) in zip(bases, ops)]
    hosts = [np.lib.stride_tricks.as_strided(b[o:], shape, [x * b.itemsize for x in s]) for b, (s, o) in zip(bases, ops)]
    assert_bits(ternary.where(*views).to_host(), expected(*hosts))
