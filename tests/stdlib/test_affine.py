"""AFFINE: ``x * mul + add`` in T for every dtype and layout, against NumPy (bit-exact)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pykern as pk
from pykern import bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32
from stdlib_kernels import AFFINE, affine
from _elementwise import abi_mismatches, assert_bits, layouts, random, round_to, specials

DTYPES = affine.DTYPES
SCALARS = {u8: (3, 7), u32: (3, 7), i16: (-3, 7), i32: (-3, 7), i64: (-3, 7)}


def expected(x: np.ndarray, dtype, mul, add) -> np.ndarray:
    """candle's CPU backend: two rounded operations in T (f16/bf16/f8 each rounded from f32), ints wrap."""
    if dtype.is_int:
        with np.errstate(over="ignore"):
            return (x * dtype.np.type(mul) + dtype.np.type(add)).astype(dtype.np)
    if dtype.is_storage_float:
        m, a = np.float32(dtype.np.type(mul)), np.float32(dtype.np.type(add))
        prod = round_to(x.astype(np.float32) * m, dtype)
        return round_to(prod.astype(np.float32) + a, dtype)
    return x * dtype.np.type(mul) + dtype.np.type(add)


def test_abi():
    assert abi_mismatches(AFFINE) == []
    assert "affine_f8e4m3" in AFFINE  # candle-core's spelling, absent from candle-kernels


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layouts(device, dtype):
    mul, add = SCALARS.get(dtype, (1.75, -0.5))
    for label, x, host in layouts(device, lambda s: random(dtype, s)):
        got = affine.affine(x, mul, add).to_host()
        assert_bits(got, expected(host, dtype, mul, add), f"{dtype} {label}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_in_place(device, dtype):
    mul, add = SCALARS.get(dtype, (0.5, 3.0))
    host = random(dtype, (5, 211))
    x = device.to_device(host)
    assert affine.affine(x, mul, add, out=x) is x
    assert_bits(x.to_host(), expected(host, dtype, mul, add), f"{dtype} in place")


def test_null_inp_kernel(device):
    """The raw kernel: a null inp reads out (in both paths, as candle), a null info means contiguous."""
    host = random(f32, (4, 33))
    out = device.to_device(host)
    fn = device.get_or_load_func("affine_f32", AFFINE)
    info = device.to_device(np.array([33, 4, 1, 33], np.uint64))  # a transposed layout, ignored in place
    fn[1, 64](out.size, 2, info, None, out, 2.0, 1.0)
    assert_bits(out.to_host(), host * 2 + 1)
    fn[1, 64](0, 2, None, out, out, 2.0, 1.0)  # numel 0: nothing happens
    assert_bits(out.to_host(), host * 2 + 1)


@pytest.mark.parametrize("dtype", (f32, f64, f16, bf16, f8e4m3), ids=str)
def test_special_values(device, dtype):
    host = specials(dtype)
    for mul, add in ((2.0, 0.0), (-1.0, 1.0), (0.0, 0.0)):
        got = affine.affine(device.to_device(host), mul, add).to_host()
        with np.errstate(all="ignore"):
            assert_bits(got, expected(host, dtype, mul, add), f"{dtype} mul={mul} add={add}")


@pytest.mark.parametrize("dtype", (u8, u32, i16, i32, i64), ids=str)
def test_integer_extremes_wrap(device, dtype):
    info = np.iinfo(dtype.np)
    host = np.array([info.min, info.max, 0, 1, info.max - 1], dtype.np)
    got = affine.affine(device.to_device(host), 3, 5).to_host()
    assert_bits(got, expected(host, dtype, 3, 5))
    # candle's T::from_f64 for the scalars: truncate and saturate
    got = affine.affine(device.to_device(host), 2.9, 1e30).to_host()
    assert_bits(got, expected(host, dtype, 2, info.max))


def test_odd_launch_shapes(device):
    """Grid-stride loops: any launch shape covers numel."""
    host = random(f32, (5000,))
    fn = device.get_or_load_func("affine_f32", AFFINE)
    for grid, block in ((1, 1), (3, 7), (1, 1024), (64, 1024)):
        out = device.zeros((5000,), f32)
        fn[grid, block](5000, 1, None, device.to_device(host), out, 3.0, 0.0)
        assert_bits(out.to_host(), host * np.float32(3))
