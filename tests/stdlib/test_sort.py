"""SORT: candle's ``asort_{asc,desc}_*`` under candle's launch, and the wrappers (``argsort``, ``sort``,
``topk``), against NumPy's stable sort in the documented total order (ties and +-0 by index, NaN the
largest value), for every dtype, both directions and rows of 1 to 8192 columns."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pykern as pk
from pykern import f8e4m3, i32, u32
from stdlib_kernels import SORT, kernel_name, sort
from _elementwise import ABI, RNG, abi_mismatches, assert_bits, random, specials
from tests.conftest import GPU_KINDS

#: row lengths; past ``sort.max_run`` (4096 columns for 64-bit keys: 4097, 8192) the wrappers sort
#: runs and merge them; rows of several waves (past 256 columns) are sorted by merge rounds
SIZES = (1, 2, 3, 31, 1000, 1024, 1025, 4097, 8192)
DTYPES = sort.DTYPES


def row_data(dtype, rows: int, n: int) -> np.ndarray:
    """Rows with many ties: half random values, half from a small pool (for floats NaN, +-inf, +-0,
    subnormals and the extremes; for integers the range's ends and a few small values)."""
    if dtype.is_float:
        pool = np.concatenate([specials(dtype), np.array([0.0, -0.0, 1.0, 1.0, np.nan], np.float64).astype(dtype.np)])
    else:
        info = np.iinfo(dtype.np)
        pool = np.array([info.min, info.max, 0, 1, 1, 2, info.max - 1], dtype.np)
    x = pool[RNG.integers(0, len(pool), (rows, n))]
    mixed = RNG.random((rows, n)) < 0.5
    x[mixed] = random(dtype, int(mixed.sum()))
    return x


def expected_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """NumPy's stable argsort of each row (last axis) in the documented order: floats by value with
    -0.0 == 0.0 and NaN the largest (last ascending, first descending), equal keys by index."""
    if x.dtype.kind in "iu":
        v = x.astype(np.int64)
        return np.argsort(~v if descending else v, axis=-1, kind="stable")  # ~ reverses without overflow
    v = x.astype(np.float64)
    nan = np.isnan(v)
    v = np.where(nan, 0.0, v) + 0.0  # -0.0 + 0.0 is +0.0
    if descending:
        return np.lexsort((-v, ~nan), axis=-1)  # np.lexsort is stable: the last key is the primary one
    return np.lexsort((v, nan), axis=-1)


def candle_launch(device, x: np.ndarray, descending: bool) -> np.ndarray:
    """candle-core's launch of ``asort_*``: a block of ``min(ncols_pad, 1024)`` threads a row and
    ``ncols_pad * 4`` bytes of dynamic shared memory, arguments ``x, dst, ncols as i32, ncols_pad``."""
    ncols = x.shape[-1]
    ncols_pad = 1 << (ncols - 1).bit_length()
    out = device.empty(x.shape, u32)
    fn = device.get_or_load_func(kernel_name("asort_desc" if descending else "asort_asc", _dtype(x)), SORT)
    fn[(x.size // ncols, 1, 1), (min(ncols_pad, 1024), 1, 1), None, ncols_pad * 4](
        device.to_device(x), out, ncols, ncols_pad)
    return out.to_host()


def _dtype(x: np.ndarray):
    return next(t for t in DTYPES if t.np == x.dtype)


@pytest.fixture(params=[32, 64] + GPU_KINDS, ids=lambda p: f"cpu{p}" if isinstance(p, int) else p)
def wave_width(request):
    """The CPU at wave widths 32 and 64 (``asort`` has no grid-stride loop: the GPU tiles change
    nothing in it), and any GPU."""
    return pk.device("cpu", wave_size=request.param) if isinstance(request.param, int) else pk.device(request.param)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_candle_kernels(wave_width, dtype, descending):
    """Every ``asort_*`` kernel under candle's exact launch, rows of 1 to 8192 columns (1 to 8 columns a
    thread held in registers, pairs across waves through the index array)."""
    for n in SIZES:
        x = row_data(dtype, 2 if n < 4000 else 1, n)
        got = candle_launch(wave_width, x, descending)
        assert (got == expected_order(x, descending)).all(), f"{n} columns"


@pytest.mark.parametrize("dtype", [pk.f32, pk.i64], ids=str)
def test_candle_kernels_any_block(wave_width, dtype):
    """Blocks other than candle's (candle's network on the index array alone) and rows whose padded
    length is 16 columns a thread (more than a thread holds)."""
    x = row_data(dtype, 2, 1000)
    for descending in (False, True):
        fn = wave_width.get_or_load_func(kernel_name("asort_desc" if descending else "asort_asc", dtype), SORT)
        for block in (1, 7, 64, 100, 1024):
            out = wave_width.empty(x.shape, u32)
            fn[2, block, None, 1024 * 4](wave_width.to_device(x), out, 1000, 1024)
            assert (out.to_host() == expected_order(x, descending)).all(), f"block of {block}"
    long = row_data(dtype, 1, 10000)  # candle's launch of 16384 padded columns: 16 a thread
    for descending in (False, True):
        assert (candle_launch(wave_width, long, descending) == expected_order(long, descending)).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_argsort_wrapper(wave_device, dtype, descending):
    """The wrappers' launch: one block a row (several short rows a block), runs merged past MAX_RUN."""
    for n in SIZES:
        x = row_data(dtype, 3 if n < 4000 else 1, n)
        got = sort.argsort(wave_device.to_device(x), descending=descending)
        assert got.dtype is u32 and got.shape == x.shape
        assert (got.to_host() == expected_order(x, descending)).all(), f"{n} columns"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_multi_pass(wave_device, dtype):
    """Rows longer than a run, with small runs: many merge passes, odd run counts and short last runs;
    runs of at least half a ``merge_tiles`` tile (1024 and up) take it for keys of up to 32 bits:
    tiles that straddle both runs, a last pair without a second run, a short last tile."""
    for n, run in ((1000, 64), (1025, 256), (37, 2), (33, 1), (4097, 1024), (300, 128), (2049, 1024),
                   (9000, 1024), (5000, 2048)):
        x = row_data(dtype, 3, n)
        for descending in (False, True):
            got = sort.sort_rows(wave_device.to_device(x), descending, run=run).to_host()
            assert (got == expected_order(x, descending)).all(), f"{n} columns, runs of {run}"


@pytest.mark.parametrize("dtype", [pk.f32, pk.u8, pk.i64], ids=str)
def test_long_rows_default_runs(wave_device, dtype):
    """Rows past ``max_run`` with the wrappers' own runs (8192 for keys of up to 32 bits: one block of
    1024 threads and 64 KiB of shared memory a run), merged by ``merge_tiles`` or ``merge_runs``."""
    x = row_data(dtype, 2, 17000)
    for descending in (False, True):
        got = sort.argsort(wave_device.to_device(x), descending=descending).to_host()
        assert (got == expected_order(x, descending)).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_values(wave_device, dtype):
    for n in (1, 31, 1000, 5000):
        x = row_data(dtype, 2, n)
        for descending in (False, True):
            values, indices = sort.sort(wave_device.to_device(x), descending=descending)
            want = expected_order(x, descending)
            assert (indices.to_host() == want).all()
            assert_bits(values.to_host(), np.take_along_axis(x, want, -1), f"sort {dtype} {n}")
    cv, ci = sort.sort(wave_device.to_device(x), candle_shape=True)
    assert (ci.to_host() == expected_order(x, False)).all()
    assert_bits(cv.to_host(), np.take_along_axis(x, expected_order(x, False), -1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_topk(wave_device, dtype):
    for n, k in ((1, 1), (31, 5), (1000, 17), (1000, 1000), (5000, 3), (64, 0)):
        x = row_data(dtype, 3, n)
        for largest in (True, False):
            values, indices = sort.topk(wave_device.to_device(x), k, largest=largest)
            want = expected_order(x, largest)[:, :k]
            assert values.shape == indices.shape == (3, k)
            assert (indices.to_host() == want).all(), f"{n} columns, k = {k}"
            assert_bits(values.to_host(), np.take_along_axis(x, want, -1))


def test_order_semantics(wave_device):
    """The documented order, spelled out: stable ties, -0.0 == 0.0, NaN largest, +-inf in place."""
    x = np.array([np.nan, 1.0, -0.0, -np.inf, 0.0, np.nan, 1.0, np.inf, -0.0, -1.0], np.float32)
    asc = [3, 9, 2, 4, 8, 1, 6, 7, 0, 5]
    desc = [0, 5, 7, 1, 6, 2, 4, 8, 9, 3]
    for candle in (False, True):
        assert sort.argsort(wave_device.to_device(x), candle_shape=candle).to_host().tolist() == asc
        assert sort.argsort(wave_device.to_device(x), descending=True, candle_shape=candle).to_host().tolist() == desc
    assert sort.argsort(wave_device.to_device(np.zeros(3000, np.float16))).to_host().tolist() == list(range(3000))
    assert sort.argsort(wave_device.to_device(np.zeros(3000, np.uint8)), descending=True).to_host().tolist() == list(range(3000))
    ints = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, 0, 1], np.int64)
    assert sort.argsort(wave_device.to_device(ints)).to_host().tolist() == [1, 2, 3, 4, 0]


@pytest.mark.parametrize("dtype", [pk.f32, pk.i64, pk.bf16], ids=str)
def test_dims_and_layouts(wave_device, dtype):
    """Any dim of strided, offset and transposed inputs; the results come back contiguous, in x's order."""
    base = row_data(dtype, 1, 2000)[0]
    dev_base = wave_device.to_device(base)
    it = base.itemsize
    cases = [
        ((4, 5, 6), (30, 6, 1), 0),
        ((4, 5, 6), (1, 4, 20), 3),          # every dim strided (a transposed layout), offset
        ((7, 33), (66, 2), 11),             # every other column
        ((3, 1, 9), (9, 9, 1), 5),
    ]
    for shape, strides, offset in cases:
        view = dev_base.as_strided(shape, strides, offset)
        host = np.lib.stride_tricks.as_strided(base[offset:], shape, [s * it for s in strides])
        for dim in range(-len(shape), len(shape)):
            for descending in (False, True):
                want = np.moveaxis(expected_order(np.moveaxis(host, dim, -1), descending), -1, dim)
                got = sort.argsort(view, dim=dim, descending=descending)
                assert got.is_contiguous and (got.to_host() == want).all(), (shape, strides, dim)
                values, indices = sort.sort(view, dim=dim, descending=descending)
                assert (indices.to_host() == want).all()
                assert_bits(values.to_host(), np.take_along_axis(host, want, dim))
            k = min(2, shape[dim])
            values, indices = sort.topk(view, k, dim=dim)
            want = np.take(np.moveaxis(expected_order(np.moveaxis(host, dim, -1), True), -1, dim), range(k), axis=dim)
            assert (indices.to_host() == want).all()
            assert_bits(values.to_host(), np.take_along_axis(host, want, dim))


def test_empty_and_scalar(device):
    for shape in ((0, 5), (5, 0), (0,), (2, 0, 3)):
        x = device.to_device(np.zeros(shape, np.float32))
        for dim in range(len(shape)):
            assert sort.argsort(x, dim=dim).shape == shape
            values, indices = sort.sort(x, dim=dim)
            assert values.shape == indices.shape == shape
        assert sort.asort_launch(x).shape == shape
    values, indices = sort.topk(device.to_device(np.zeros((5, 0), np.float32)), 0)
    assert values.shape == indices.shape == (5, 0)
    scalar = device.to_device(np.array(3.5, np.float32))
    assert sort.argsort(scalar).shape == () and int(sort.argsort(scalar).to_host()) == 0
    values, indices = sort.topk(scalar, 1)
    assert float(values.to_host()) == 3.5 and int(indices.to_host()) == 0
    assert sort.argsort(np.array([3.0, 1.0, 2.0], np.float32)).to_host().tolist() == [1, 2, 0]  # NumPy input: CPU


def test_errors(device):
    x = device.to_device(np.ones((3, 4), np.float32))
    for bad in (np.ones(3, np.int32), np.ones(3, f8e4m3.np)):
        with pytest.raises(TypeError, match="no sort kernel for dtype"):
            sort.argsort(device.to_device(bad))
    with pytest.raises(ValueError, match=r"dim 2 out of range for a 2-d array \(expected -2 <= dim < 2\)"):
        sort.argsort(x, dim=2)
    with pytest.raises(ValueError, match="dim -3 out of range"):
        sort.sort(x, dim=-3)
    with pytest.raises(TypeError, match="dim must be an int"):
        sort.argsort(x, dim=1.0)
    with pytest.raises(ValueError, match=r"k must be an int in \[0, 4\] \(the size of dim 1\), got 5"):
        sort.topk(x, 5)
    with pytest.raises(ValueError, match=r"k must be an int in \[0, 3\]"):
        sort.topk(x, -1, dim=0)
    with pytest.raises(ValueError, match="k must be an int"):
        sort.topk(x, 1.5)
    with pytest.raises(ValueError, match="run must be a power of two up to 8192"):
        sort.sort_rows(x, run=48)
    with pytest.raises(ValueError, match="sort_rows: takes a contiguous array"):
        sort.sort_rows(x.transpose())
    with pytest.raises(TypeError, match="sort_rows: no sort kernel for dtype i32"):
        sort.sort_rows(device.to_device(np.ones(3, np.int32)))
    with pytest.raises(ValueError, match="candle's launch takes a contiguous array"):
        sort.asort_launch(x.transpose())
    with pytest.raises(TypeError, match="asort: no kernel for dtype i32"):
        sort.asort_launch(device.to_device(np.ones(3, np.int32)))
    fn = device.get_or_load_func("asort_asc_f32", SORT)
    with pytest.raises(pk.LaunchError, match="'dst' expects an array of u32"):
        fn[1, 4, None, 16](x, device.empty((3, 4), i32), 4, 4)


def test_abi():
    assert abi_mismatches(SORT) == []
    candle = set(json.loads(ABI.read_text())["modules"]["sort"])
    assert len(candle) == 14 and set(SORT.names()) - candle == set(sort.SORT_EXTRAS)


@st.composite
def sort_case(draw):
    """A strided view (any dim order, steps of 1 or 2, an offset) of up to 3 dims, a dim and an order."""
    shape = tuple(draw(st.lists(st.integers(0, 40), min_size=1, max_size=3)))
    order = draw(st.permutations(range(len(shape))))
    step, acc, strides = draw(st.sampled_from([1, 2])), 1, [0] * len(shape)
    for d in reversed(order):
        strides[d] = acc * step
        acc *= shape[d] * step
    return (shape, strides, draw(st.integers(0, 3)), draw(st.integers(-len(shape), len(shape) - 1)),
            draw(st.sampled_from(DTYPES)), draw(st.booleans()), draw(st.integers(0, 4)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sort_case())
def test_hypothesis_layouts(c):
    """argsort, sort and topk of random strided views along a random dim, on the CPU (wave 32)."""
    shape, strides, offset, dim, dtype, descending, k = c
    device = pk.device("cpu", wave_size=32)
    span = 1 + offset + sum(max(n - 1, 0) * s for n, s in zip(shape, strides))
    base = row_data(dtype, 1, span)[0]
    view = device.to_device(base).as_strided(shape, strides, offset)
    host = np.lib.stride_tricks.as_strided(base[offset:], shape, [s * base.itemsize for s in strides])
    want = np.moveaxis(expected_order(np.moveaxis(host, dim, -1), descending), -1, dim)
    assert (sort.argsort(view, dim=dim, descending=descending).to_host() == want).all()
    values, indices = sort.sort(view, dim=dim, descending=descending)
    assert (indices.to_host() == want).all()
    assert_bits(values.to_host(), np.take_along_axis(host, want, dim))
    k = min(k, shape[dim])
    values, indices = sort.topk(view, k, dim=dim, largest=descending)
    assert (indices.to_host() == np.take(want, range(k), axis=dim)).all()
