"""FILL: fill (contiguous buffer), const_set (any destination layout), copy2d (row blocks)."""
from __future__ import annotations

import numpy as np
import pytest

from pykern import bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32
from stdlib_kernels import FILL, fill
from _elementwise import abi_mismatches, assert_bits, random, round_to

ALL = fill.DTYPES + fill.EXTRA
VALUES = [1.5, -0.0, float("nan"), float("inf"), 3e38, -7.0]


def host_value(v, dtype):
    """candle's T::from_f64: ints truncate and saturate, floats round (f8 saturating)."""
    if dtype.is_int:
        from stdlib_kernels._common import from_f64
        return dtype.np.type(from_f64(v, dtype))
    return round_to(np.float64(v), dtype)[()]


def test_abi():
    assert abi_mismatches(FILL) == []
    assert all(f"{k}_{t}" in FILL for k in ("const_set", "copy2d") for t in ("i16", "i32"))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_const_set_layouts(device, dtype):
    for v in VALUES if dtype.is_float else [7, -1.9, 1e30, float("nan")]:
        base = random(dtype, (9, 131))
        x = device.to_device(base)
        fill.fill(x, v)
        assert_bits(x.to_host(), np.full(base.shape, host_value(v, dtype)), f"{dtype} {v}")
    # a strided destination: only the viewed elements change
    base = random(dtype, (2000,))
    x = device.to_device(base)
    fill.const_set(x.as_strided((5, 97), (150, 1), offset=13), 3)
    want = base.copy()
    np.lib.stride_tricks.as_strided(want[13:], (5, 97), (150 * want.itemsize, want.itemsize))[...] = 3
    assert_bits(x.to_host(), want, f"{dtype} strided")
    t = device.to_device(random(dtype, (37, 29)))
    fill.fill(t.transpose(), 5)
    assert_bits(t.to_host(), np.full((37, 29), 5, dtype.np))
    empty = device.to_device(random(dtype, (0, 3)))
    assert fill.fill(empty, 1) is empty


@pytest.mark.parametrize("dtype", fill.DTYPES, ids=str)
def test_fill_kernel(device, dtype):
    x = device.to_device(random(dtype, (4097,)))
    fill.fill_buffer(x, 2)
    assert_bits(x.to_host(), np.full((4097,), 2, dtype.np))
    fn = device.get_or_load_func(f"fill_{dtype.tag}", FILL)
    fn[3, 5](x, fill.from_f64(9, dtype), 0)  # numel 0 writes nothing
    fn[3, 5](x, fill.from_f64(4, dtype), 4000)  # 15 threads cover 4000 elements
    assert_bits(x.to_host(), np.array([4] * 4000 + [2] * 97, dtype.np))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_copy2d(device, dtype):
    src_h, dst_h = random(dtype, (50, 70)), random(dtype, (40, 90))
    src, dst = device.to_device(src_h), device.to_device(dst_h)
    d1, d2, so, do = 31, 53, 75, 101  # rows, cols, start offsets
    fill.copy2d(src, dst, d1, d2, 70, 90, so, do)
    want = dst_h.copy().reshape(-1)
    s = src_h.reshape(-1)
    for r in range(d1):
        want[do + r * 90: do + r * 90 + d2] = s[so + r * 70: so + r * 70 + d2]
    assert_bits(dst.to_host().reshape(-1), want, str(dtype))
    fill.copy2d(src, dst, 0, 5, 70, 90)  # empty: no launch
    fill.copy2d(src, dst, 5, 0, 70, 90)
    assert_bits(dst.to_host().reshape(-1), want)


@pytest.mark.parametrize("d1,d2,src_s,dst_s", [(33, 40, 40, 40), (17, 64, 128, 96), (9, 1000, 1004, 1000),
                                                (64, 3, 8, 4), (3, 4099, 4100, 4104)])
def test_copy2d_launch_shapes(device, d1, d2, src_s, dst_s):
    """Every launch covers every row: candle's one thread per element, fewer threads than a row,
    grids with threads left over; aligned rows (vector tiles) and unaligned ones."""
    src_h = random(f32, (d1 * src_s,))
    fn = device.get_or_load_func("copy2d_f32", FILL)
    want = np.zeros(d1 * dst_s, np.float32)
    for r in range(d1):
        want[r * dst_s: r * dst_s + d2] = src_h[r * src_s: r * src_s + d2]
    for grid, block in ((1, 1), (2, 33), (5, 1024), (-(-d1 * d2 // 1024), 1024), (200, 64)):
        dst = device.zeros(d1 * dst_s, f32)
        fn[grid, block](device.to_device(src_h), dst, d1, d2, src_s, dst_s)
        assert_bits(dst.to_host(), want, f"{grid}x{block}")

@pytest.mark.parametrize("dtype", [f32, u8], ids=str)
def test_const_set_candle_launch(device, dtype):
    """candle's grid (a thread an element, blocks of 1024; and of 96) with ``info`` always passed:
    contiguous layouts of rank 1-3 (a size-1 dim with any stride counts), and strided ones of rank 2
    and 3. Grids of many blocks, none a multiple of a tile's elements: with tiles, the workers are the
    threads of every S-th block (S = CONST_SET_SPREAD * W), each storing its S blocks' elements, and
    the other blocks leave first."""
    fn = device.get_or_load_func(f"const_set_{dtype.tag}", FILL)
    cases = [((1300,), (1,)), ((13, 100), (100, 1)), ((1, 1300), (7, 1)), ((5, 4, 65), (260, 65, 1)),
             ((13, 50), (100, 2)), ((5, 4, 30), (300, 65, 2)), ((40, 30), (1, 40)), ((37, 1001), (1001, 1)),
             ((37, 501), (1, 37)), ((3, 17, 401), (17 * 401, 401, 1))]
    for shape, strides in cases:
        size = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) + 100
        n = int(np.prod(shape))
        info = device.to_device(np.array(list(shape) + list(strides), np.uint64))
        for block in (1024, 96):
            base = random(dtype, (size,))
            x = device.to_device(base)
            fn[-(-n // block), block](n, len(shape), info, fill.from_f64(3, dtype), x)
            want = base.copy()
            np.lib.stride_tricks.as_strided(want, shape, [s * want.itemsize for s in strides])[...] = 3
            assert_bits(x.to_host(), want, f"{dtype} {shape} {strides} blocks of {block}")


@pytest.mark.parametrize("dtype", [f32, u8, f64], ids=str)
def test_const_set_launch_shapes(device, dtype):
    """Every element written, none past them, under every way a grid meets ``set_value``'s paths:
    a null ``info`` on candle's grid (the spread workers) and on short grids (grid-stride tiles in
    every block); ``info`` on short grids (with tiles, every S-th block works, over several chunks),
    contiguous and transposed; grids larger than candle's (blocks past the elements)."""
    fn = device.get_or_load_func(f"const_set_{dtype.tag}", FILL)
    tile = device.target.tile_bytes
    spread = fill.CONST_SET_SPREAD * (tile // dtype.nbytes) if tile > dtype.nbytes else 1
    value = fill.from_f64(5, dtype)
    n = 7 * 10001
    contiguous = device.to_device(np.array([7, 10001, 10001, 1], np.uint64))
    transposed = device.to_device(np.array([7, 10001, 1, 7], np.uint64))
    launches = [((-(-n // 1024), 1024), None), ((-(-n // 96), 96), None), ((3, 64), None), ((1, 1), None),
                ((-(-n // 1024) + 40, 1024), None), ((-(-n // 1024) + 40, 1024), contiguous),
                ((3, 64), contiguous), ((5, 32), transposed), ((spread + 1, 32), contiguous),
                ((4 * spread + 3, 2), transposed), ((-(-n // 1024) + 40, 1024), transposed)]
    for (grid, block), info in launches:
        base = random(dtype, (n + 50,))
        x = device.to_device(base)
        fn[grid, block](n, 0 if info is None else 2, info, value, x)
        want = base.copy()
        want[:n] = value
        assert_bits(x.to_host(), want, f"{dtype} {grid}x{block} info {'null' if info is None else 'set'}")
