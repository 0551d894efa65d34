"""The elementwise skeleton (``stdlib_kernels._common.map_layout``) under candle's raw arguments: every
family that takes ``info`` (unary, affine, cast, binary, ternary), each launch shape that changes which
threads work (candle's grid of a thread an element, small grids, blocks that are no whole warps, more
threads than elements), and the layouts ``info`` describes: null, contiguous (candle passes it), size-1
dims with odd strides, ranks 1 to 5 (the 2-D and flat-4 decisions and the loop beyond), transposed,
broadcast and sliced operands, rows shorter and longer than a strided run. Against NumPy, bit-exact."""
from __future__ import annotations

import numpy as np
import pytest

from pykern import f32, u8
from stdlib_kernels import AFFINE, BINARY, CAST, TERNARY, UNARY
from _elementwise import RNG, assert_bits


def _contig(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= n
    return strides


#: (shape, operand layouts): each layout is "c" (row-major), "t" (reversed dims' strides), "b" (broadcast
#: along dim 0), "s" (row-major in a buffer twice as wide along the last dim: a slice) or "1" (size-1
#: dims carry odd strides, still contiguous)
CASES = [
    ((1037,), "c"), ((3, 333), "c"), ((3, 333), "t"), ((3, 333), "b"), ((3, 333), "s"), ((5, 7), "t"),
    ((1, 333, 1), "1"), ((2, 3, 4, 45), "t"), ((2, 3, 4, 45), "b"), ((2, 1, 3, 4, 45), "c"),
    ((2, 1, 3, 4, 45), "t"), ((40, 3), "s"), ((67, 2), "t"),
]
LAUNCHES = ["candle", (2, 64), (3, 48), (1, 33), (7, 1024)]


def operand(device, host: np.ndarray, kind: str):
    """(device buffer, strides in elements) for ``host`` laid out as ``kind``."""
    shape = host.shape
    if kind in "c1":
        strides = _contig(shape)
        if kind == "1":
            strides = [s if n != 1 else 999 for n, s in zip(shape, strides)]
        return device.to_device(np.ascontiguousarray(host)), strides
    if kind == "t":
        buf = np.ascontiguousarray(host.transpose(tuple(reversed(range(host.ndim)))))
        return device.to_device(buf), list(reversed(_contig(buf.shape)))
    if kind == "b":
        row = np.ascontiguousarray(host[:1])
        return device.to_device(row), [0] + _contig(shape)[1:]
    wide = np.zeros(shape[:-1] + (2 * shape[-1],), host.dtype)
    wide[..., : shape[-1]] = host
    return device.to_device(wide), _contig(wide.shape)


def launch(fn, numel, launch_shape, *args):
    grid, block = ((-(-numel // 1024), 1, 1), (1024, 1, 1)) if launch_shape == "candle" else launch_shape
    fn[grid, block](numel, *args)


def data(shape, kind, dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    return x[:1].repeat(shape[0], 0) if kind == "b" else x  # a broadcast operand is one row repeated


@pytest.mark.parametrize("shape,kind", CASES, ids=lambda v: str(v))
def test_unary_affine_cast_layouts(wave_device, shape, kind):
    device = wave_device
    x = data(shape, kind)
    buf, strides = operand(device, x, kind)
    n = x.size
    for name, module, after, want, dt in (
            ("uneg_f32", UNARY, (), -x, np.float32),
            ("affine_f32", AFFINE, (1.5, -0.25), (x * np.float32(1.5)) + np.float32(-0.25), np.float32),
            ("cast_f32_u8", CAST, (), np.clip(np.trunc(np.nan_to_num(x * 0 + np.abs(x) * 40)), 0, 255).astype(np.uint8),
             np.uint8)):
        fn = device.get_or_load_func(name, module)
        src = buf
        if name == "cast_f32_u8":  # non-negative values in u8's range, same layout
            src, _ = operand(device, np.abs(x) * 40, kind)
        for info in ((None,) if kind == "c" else ()) + (list(shape) + strides,):
            for shape_ in LAUNCHES:
                out = device.to_device(np.full(n, 7, dt))
                dinfo = None if info is None else device.to_device(np.array(info, np.uint64))
                launch(fn, n, shape_, len(shape), dinfo, src, out, *after)
                assert_bits(out.to_host().reshape(shape), want, f"{name} {shape} {kind} info {info} {shape_}")


@pytest.mark.parametrize("shape,kind", CASES, ids=lambda v: str(v))
def test_binary_and_where_layouts(wave_device, shape, kind):
    """The first operand laid out as ``kind``, the others row-major: every operand keeps its own strides."""
    device = wave_device
    a, b, f = data(shape, kind), data(shape, "c"), data(shape, "c")
    cond = (RNG.random(shape) > 0.5).astype(np.uint8)
    if kind == "b":
        cond = cond[:1].repeat(shape[0], 0)
    da, sa = operand(device, a, kind)
    dc, sc = operand(device, cond, kind)
    db, sb = operand(device, b, "c")
    df, sf = operand(device, f, "c")
    n = a.size
    add = device.get_or_load_func("badd_f32", BINARY)
    lt = device.get_or_load_func("lt_f32", BINARY)
    where = device.get_or_load_func("where_u8_f32", TERNARY)
    for shape_ in LAUNCHES:
        out = device.to_device(np.full(n, np.nan, np.float32))
        launch(add, n, shape_, len(shape), device.to_device(np.array(list(shape) + sa + sb, np.uint64)), da, db, out)
        assert_bits(out.to_host().reshape(shape), a + b, f"badd {shape} {kind} {shape_}")
        out8 = device.to_device(np.full(n, 9, np.uint8))
        launch(lt, n, shape_, len(shape), device.to_device(np.array(list(shape) + sa + sb, np.uint64)), da, db, out8)
        assert_bits(out8.to_host().reshape(shape), (a < b).astype(np.uint8), f"lt {shape} {kind} {shape_}")
        out = device.to_device(np.full(n, np.nan, np.float32))
        info = device.to_device(np.array(list(shape) + sc + sa + sf, np.uint64))
        launch(where, n, shape_, len(shape), info, dc, da, df, out)
        assert_bits(out.to_host().reshape(shape), np.where(cond != 0, a, f), f"where {shape} {kind} {shape_}")


def test_contiguous_info_reads_like_null(wave_device):
    """candle's info for contiguous operands (ranks 1-5, size-1 dims with any stride) gives the null-info
    result under candle's grid, where most threads leave before reading info."""
    device = wave_device
    for dims in ([4097], [3, 1031], [1, 3, 1031], [2, 1, 3, 1, 200], [2, 2, 2, 2, 2, 2, 20]):
        x = RNG.standard_normal(int(np.prod(dims))).astype(np.float32)
        strides = [s if n != 1 else 5 for n, s in zip(dims, _contig(dims))]
        fn = device.get_or_load_func("uexp_f32", UNARY)
        got = []
        for info in (None, device.to_device(np.array(dims + strides, np.uint64))):
            out = device.to_device(np.zeros(x.size, np.float32))
            launch(fn, x.size, "candle", len(dims), info, device.to_device(x), out)
            got.append(out.to_host())
        assert_bits(got[1], got[0], f"{dims}")


def test_u8_tiles_launch_shapes(wave_device):
    """A u8 operand gives 16-element tiles: the workers are few, rounded up to whole groups of lanes."""
    device = wave_device
    for n in (1, 15, 16, 17, 511, 513, 16 * 32 * 3 + 5):
        x = (RNG.random(n) * 200).astype(np.uint8)
        fn = device.get_or_load_func("ucopy_u8", UNARY)
        for shape_ in LAUNCHES:
            out = device.to_device(np.zeros(n, np.uint8))
            launch(fn, n, shape_, 1, device.to_device(np.array([n, 1], np.uint64)), device.to_device(x), out)
            assert_bits(out.to_host(), x, f"n {n} {shape_}")
    assert u8.nbytes == 1 and f32.nbytes == 4
