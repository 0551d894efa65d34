"""The reduce family against NumPy, at wave widths 32 and 64 (and on a GPU when present).

Float sums are compared with a float64 reference within ``1e-5 * sum(|x|)`` (f32 accumulation);
integer sums, min/max and argmin/argmax exactly; NaN/inf handling and tie rules against a direct
transcription of candle-cpu's fold (``if f(val, s) { val = s }`` from the first element).
"""
from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

import pykern as pk
from pykern.runtime.launch import storage
from stdlib_kernels import REDUCE
from stdlib_kernels import _reduction as RD  # the skeleton other families reuse
from stdlib_kernels import reduce as R
from stdlib_kernels import reduce_launch as L

_HERE = pathlib.Path(__file__).resolve()
ABI = next((p / "shared" / "spec" / "candle_abi.json" for p in (_HERE.parents[3], _HERE.parents[2])
            if (p / "shared" / "spec" / "candle_abi.json").exists()), None)
RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def gpu_kernels_through_wrappers(monkeypatch):
    """On a CPU device the norm wrappers launch the host kernels (``L.HOST_KERNELS``); the tests here
    were written to reach the GPU kernels' strategies through the wrappers, so they keep doing so on
    the CPU (``test_host_norm_kernels`` checks the host kernels)."""
    monkeypatch.setattr(L, "HOST_KERNELS", False)


def dev_array(device, host, transpose=None):
    """``host`` on ``device``; with ``transpose``, a strided (non-contiguous) view of the same values."""
    if transpose is None:
        return device.to_device(np.ascontiguousarray(host))
    base = device.to_device(np.ascontiguousarray(np.transpose(host, np.argsort(transpose))))
    inv = np.argsort(transpose)
    # base holds host transposed by inv; view it back with permuted strides
    shape = host.shape
    strides = tuple(base.strides[list(inv).index(i)] for i in range(len(shape)))
    view = base.as_strided(shape, strides)
    assert not view.is_contiguous or host.ndim < 2
    np.testing.assert_array_equal(view.to_host(), host)
    return view


def cpu_fold(x, axis, use_min, index):
    """candle-cpu ``ReduceIndex::fold_impl`` along one axis."""
    x = np.moveaxis(x, axis, -1)
    out_v = np.empty(x.shape[:-1], x.dtype)
    out_i = np.empty(x.shape[:-1], np.uint32)
    for idx in np.ndindex(*x.shape[:-1]):
        row = x[idx]
        val, acc = row[0], 0
        for i, s in enumerate(row):
            if (val > s) if use_min else (val < s):
                val, acc = s, i
        out_v[idx], out_i[idx] = val, acc
    return out_i if index else out_v


# ------------------------------------------------------------------------------------------------- ABI
@pytest.mark.skipif(ABI is None, reason="shared/spec/candle_abi.json not found")
def test_abi_names_and_param_sizes():
    spec = json.loads(ABI.read_text())["modules"]["reduce"]
    extras = {f"{n}_rows_{t}" for n in ("softmax", "rmsnorm", "layernorm")
              for t in ("f32", "f64", "f16", "bf16")}  # the wrappers' own
    assert sorted(REDUCE.names()) == sorted(set(spec) | extras)
    target = pk.device("cpu").target
    for inst in REDUCE:
        sizes = [8 if hasattr(ty, "elem") else ty.nbytes
                 for _, ty in inst.typed(target).params]
        assert sizes == spec[inst.name.replace("_rows", "")], inst.name
    assert len(REDUCE) == 64 + len(extras)


# ------------------------------------------------------------------------------------------------- fast_*
DIMS = [[2], [0], [1], [0, 2], [2, 0], [1, 2], [0, 1, 2]]


@pytest.mark.parametrize("dims", DIMS, ids=lambda d: "-".join(map(str, d)))
@pytest.mark.parametrize("candle_shape", [False, True], ids=["own-launch", "candle-launch"])
@pytest.mark.parametrize("layout", ["strided", "contiguous"])
def test_reductions_of_strided_inputs(wave_device, dims, candle_shape, layout):
    """Every dims set over a transposed view and a contiguous tensor, under candle's launch (a block
    per output) and the wrappers' own (contiguous trailing dims as rows, a wave per row)."""
    x = RNG.standard_normal((5, 6, 37)).astype(np.float32)
    xi = RNG.integers(-1000, 1000, (5, 6, 37)).astype(np.int64)

    def run(op, v, d, keepdim=False):
        return R.fast_reduce_launch(op, v, d, keepdim, candle_shape=candle_shape).to_host()

    for host, exact in ((x, False), (xi, True)):
        v = dev_array(wave_device, host, transpose=(2, 0, 1) if layout == "strided" else None)
        got = run("fast_sum", v, dims)
        ref = host.astype(np.float64).sum(axis=tuple(dims))
        if exact:
            np.testing.assert_array_equal(got, host.sum(axis=tuple(dims)))
        else:
            tol = 1e-5 * np.abs(host.astype(np.float64)).sum(axis=tuple(dims))
            assert np.all(np.abs(got - ref) <= tol)
        np.testing.assert_array_equal(run("fast_max", v, dims), host.max(axis=tuple(dims)))
        np.testing.assert_array_equal(run("fast_min", v, dims, True), host.min(axis=tuple(dims), keepdims=True))
        if len(dims) == 1:
            np.testing.assert_array_equal(run("fast_argmax", v, dims), host.argmax(axis=dims[0]))
            np.testing.assert_array_equal(run("fast_argmin", v, dims), host.argmin(axis=dims[0]))


@pytest.mark.parametrize("n", [1, 7, 33, 1000, 4097, 65537])
def test_row_lengths(wave_device, n):
    rows = 1 if n > 5000 else 3
    x = RNG.standard_normal((rows, n)).astype(np.float32)
    xd = wave_device.to_device(x)
    got = R.sum(xd, [1]).to_host()
    assert np.all(np.abs(got - x.astype(np.float64).sum(1)) <= 1e-5 * np.abs(x).astype(np.float64).sum(1))
    np.testing.assert_array_equal(R.max(xd, [1]).to_host(), x.max(1))
    np.testing.assert_array_equal(R.argmin(xd, 1).to_host(), x.argmin(1))
    u = RNG.integers(0, 256, (rows, n)).astype(np.uint8)
    ud = wave_device.to_device(u)
    np.testing.assert_array_equal(R.sum(ud, [1]).to_host(), u.sum(1, dtype=np.uint8))  # wraps
    np.testing.assert_array_equal(R.argmax(ud, 1).to_host(), u.argmax(1))
    w = RNG.integers(0, 2**32, (rows, n), dtype=np.uint64).astype(np.uint32)
    wd = wave_device.to_device(w)
    np.testing.assert_array_equal(R.sum(wd, [1]).to_host(), w.sum(1, dtype=np.uint32))
    np.testing.assert_array_equal(R.min(wd, [1]).to_host(), w.min(1))


def test_candle_block_sizes(wave_device):
    """The launch candle uses (next_power_of_two(min(1024, E)) threads) and odd ones, same result."""
    x = RNG.standard_normal((4, 300)).astype(np.float32)
    xd = wave_device.to_device(x)
    fn = wave_device.get_or_load_func("fast_argmax_f32", REDUCE)
    info = wave_device.to_device(np.array([4, 300, 300, 1], np.uint64))
    for block in (1, 3, 32, 48, 64, 100, 512, 1024):
        out = wave_device.empty((4,), np.uint32)
        fn[(4, 1, 1), (block, 1, 1)](x.size, 300, 2, info, xd, out)
        np.testing.assert_array_equal(out.to_host(), x.argmax(1), err_msg=f"block {block}")


@pytest.mark.parametrize("cols", [64, 300, 1024, 4096])
def test_rows_by_wave_under_any_grid(wave_device, cols):
    """Rows of up to 4096 elements go one per wave (every fast_*): candle's grid (a block per row)
    gives them to every waves-th block, and smaller or larger grids still cover every row once."""
    rows = 37
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    x[5, 0] = np.nan  # a NaN first element is the row's min and max
    x[7, cols // 2] = x[7, cols - 1] = x[7].max() + 1  # a tie: the lower index wins
    xd = wave_device.to_device(x)
    info = wave_device.to_device(np.array([rows, cols, cols, 1], np.uint64))
    arg_max = np.where(np.arange(rows) == 5, 0, np.nanargmax(x, 1)).astype(np.uint32)
    arg_min = np.where(np.arange(rows) == 5, 0, np.nanargmin(x, 1)).astype(np.uint32)
    for op, ref in (("fast_sum", None), ("fast_min", x.min(1)), ("fast_max", x.max(1)), ("fast_argmax", arg_max),
                    ("fast_argmin", arg_min)):
        fn = wave_device.get_or_load_func(f"{op}_f32", REDUCE)
        for grid, block in ((rows, min(1024, 1 << (cols - 1).bit_length())), (1, 128), (3, 256), (rows + 5, 1024)):
            out = wave_device.empty((rows,), ref.dtype if ref is not None else np.float32)
            fn[grid, block](x.size, cols, 2, info, xd, out)
            got = out.to_host()
            if ref is None:
                want = x.astype(np.float64).sum(1)
                np.testing.assert_allclose(got[np.arange(rows) != 5], want[np.arange(rows) != 5], rtol=1e-5, atol=1e-4)
            else:
                np.testing.assert_array_equal(got, ref, err_msg=f"{op} {grid}x{block}")


@pytest.mark.parametrize("op", ["fast_sum", "fast_max", "fast_min", "fast_argmax", "fast_argmin"])
def test_candle_grid_on_strided_rows(wave_device, op):
    """candle's grid on rows that are not contiguous (a transposed view; 37 rows, no multiple of a
    block's waves): the blocks without a row leave before reading ``info``, so the waves of the
    others take the rows of ``spread_row`` through ``offset_of`` (``wave_rows``, strided). candle's block
    and raw launches of 2 to 32 waves (3: a count that is no power of two), a NaN first element
    (candle-cpu's answer), a tie (the lower index)."""
    x = RNG.standard_normal((37, 300)).astype(np.float32)
    x[4, 0] = np.nan
    x[9, 7] = x[9, 200] = x[9].max() + 1  # a tie: the lower index wins
    v = dev_array(wave_device, x, transpose=(1, 0))  # rows of 300 at a stride of 37 elements
    nan_row = np.arange(37) == 4
    ref = {"fast_sum": x.astype(np.float64).sum(1), "fast_max": np.where(nan_row, np.nan, np.nanmax(x, 1)),
           "fast_min": np.where(nan_row, np.nan, np.nanmin(x, 1)),
           "fast_argmax": np.where(nan_row, 0, np.nanargmax(x, 1)).astype(np.uint32),
           "fast_argmin": np.where(nan_row, 0, np.nanargmin(x, 1)).astype(np.uint32)}[op]

    def check(got, what):
        if op == "fast_sum":
            np.testing.assert_allclose(got[~nan_row], ref[~nan_row], rtol=1e-5, atol=1e-4, err_msg=what)
            assert np.isnan(got[4]), what
        else:
            np.testing.assert_array_equal(got, ref, err_msg=what)

    check(R.fast_reduce_launch(op, v, [1], candle_shape=True).to_host(), "candle's launch")
    fn = wave_device.get_or_load_func(f"{op}_f32", REDUCE)
    info = wave_device.to_device(np.array([37, 300, 1, 37], np.uint64))  # dims (37, 300), strides (1, 37)
    for waves in (2, 3, 8, 32):
        block = waves * wave_device.target.wave_size
        if block > 1024:
            continue
        out = wave_device.empty((37,), np.uint32 if "arg" in op else np.float32)
        fn[(37, 1, 1), (block, 1, 1)](x.size, 300, 2, info, storage(v), out)
        check(out.to_host(), f"{waves} waves")


NAN, INF = float("nan"), float("inf")
SPECIAL_ROWS = [
    [NAN, 1.0, 5.0, -2.0],       # NaN first: candle-cpu keeps it (index 0)
    [1.0, NAN, 5.0, -2.0],       # NaN later: skipped
    [INF, -INF, 3.0, INF],       # ties at +inf: first index
    [-INF, -INF, -INF, -INF],    # all equal
    [2.0, NAN, NAN, NAN],
    [0.0, -0.0, 0.0, -0.0],      # signed zeros compare equal: first wins
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_nan_inf_and_ties(wave_device, dtype):
    x = np.array(SPECIAL_ROWS, dtype=np.float64)
    x = np.concatenate([x, np.full((1, 4), 7.0)]).astype(dtype)
    xd = wave_device.to_device(x)
    for op, use_min, index in ((R.max, False, False), (R.min, True, False)):
        got = op(xd, [1]).to_host().astype(np.float64)
        ref = cpu_fold(x, 1, use_min, False).astype(np.float64)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
    np.testing.assert_array_equal(R.argmax(xd, 1).to_host(), cpu_fold(x, 1, False, True))
    np.testing.assert_array_equal(R.argmin(xd, 1).to_host(), cpu_fold(x, 1, True, True))
    # ties in a long row across threads and waves: the lowest index wins
    long = np.zeros((2, 3000), dtype)
    long[0, [70, 1500, 2999]] = 1
    long[1, :] = 3
    ld = wave_device.to_device(long)
    np.testing.assert_array_equal(R.argmax(ld, 1).to_host(), [70, 0])
    np.testing.assert_array_equal(R.argmin(ld, 1).to_host(), [0, 0])
    np.testing.assert_array_equal(R.argmin(wave_device.to_device(np.ascontiguousarray(long.T)), 0).to_host(), [0, 0])


def test_half_sums_accumulate_in_f32(wave_device):
    """3000 ones stall at 2048 in f16 arithmetic and 300 at 256 in bf16: both sum in f32."""
    for dtype, n in ((np.float16, 3000), (ml_dtypes.bfloat16, 300)):
        x = np.ones((2, n), dtype)
        got = R.sum(wave_device.to_device(x), [1]).to_host()
        np.testing.assert_array_equal(got.astype(np.float64), [n, n])
    x = RNG.standard_normal((3, 1000)).astype(np.float16)
    got = R.sum(wave_device.to_device(x), [1]).to_host().astype(np.float64)
    ref = x.astype(np.float64).sum(1)
    assert np.all(np.abs(got - ref) <= 1e-3 * np.abs(ref) + 1e-2)


def test_empty_and_scalar(wave_device):
    x = wave_device.to_device(np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(R.sum(x, [1]).to_host(), [0, 0, 0])
    with pytest.raises(ValueError):
        R.max(x, [1])
    with pytest.raises(ValueError):
        R.argmax(x, [0, 1])
    s = wave_device.to_device(np.array([[5.0]], np.float64))
    assert R.sum(s).to_host() == 5.0


def test_atomic_sum(wave_device):
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    got = R.sum_atomic_launch(dev_array(wave_device, x, transpose=(1, 2, 0)), [0, 2]).to_host()
    np.testing.assert_allclose(got, x.sum(axis=(0, 2), keepdims=True), rtol=1e-5, atol=1e-5)
    h = np.ones((3, 5), np.float16)
    np.testing.assert_array_equal(R.sum_atomic_launch(wave_device.to_device(h), [0]).to_host(), np.full((1, 5), 3))
    u = RNG.integers(0, 100, (3, 7)).astype(np.uint32)
    np.testing.assert_array_equal(R.sum_atomic_launch(wave_device.to_device(u), [1]).to_host(),
                                  u.sum(1, keepdims=True))


# ------------------------------------------------------------------------------------------------- softmax / norms
TOL = {np.float32: 2e-6, np.float64: 1e-13, np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2}


def as_f64(a):
    return np.asarray(a).astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_softmax(wave_device, dtype):
    # 1000, 1004: 16-bit rows as 8-byte words, pairs of them and one; 512, 1024: rows that fill every
    # lane's registers (no guards) under candle's block and the wrappers' own; 9000: held by 512 lanes,
    # two passes for fewer (f32/f64 keeping the row's start in registers) and for 1024 (not keeping it);
    # under candle's block, f32 rows of 1500 keep 1024 elements and read the rest in single elements,
    # 2048 keep all of it, 2600 keep 2048 and read the rest in chunks (16 a lane) and single elements
    for n in (1, 7, 33, 512, 1000, 1004, 1024, 1500, 2048, 2600, 9000):
        x = (RNG.standard_normal((3, n)) * 4).astype(dtype)
        if n > 1:
            x[1, 0] = -np.inf
        ref = np.exp(as_f64(x) - as_f64(x).max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        for block in ((1, 32, 1), (1, 256, 1), (1, 512, 1), (1, 1024, 1), None):  # candle's, wider, the wrappers
            got = as_f64(R.softmax_last_dim(wave_device.to_device(x), block).to_host())
            np.testing.assert_allclose(got, ref, rtol=TOL[dtype] * 4, atol=TOL[dtype] / 8, err_msg=f"n={n} {block}")
    x = (RNG.standard_normal((2, 17001)) * 4).astype(dtype)  # two passes in 1024 lanes, f32 keeping 16384
    ref = np.exp(as_f64(x) - as_f64(x).max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    got = as_f64(R.softmax_last_dim(wave_device.to_device(x)).to_host())
    np.testing.assert_allclose(got, ref, rtol=TOL[dtype] * 4, atol=TOL[dtype] / 8)
    bad = np.array([[1.0, np.nan, 2.0], [1.0, np.inf, 2.0]], dtype)
    assert np.isnan(as_f64(R.softmax_last_dim(wave_device.to_device(bad)).to_host())).all()
    bad = np.ones((2, 1000), dtype)
    bad[0, 517], bad[1, 999] = np.nan, np.inf  # inside a lane's chunk, the row's last element
    for block in ((1, 32, 1), None):
        assert np.isnan(as_f64(R.softmax_last_dim(wave_device.to_device(bad), block).to_host())).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_rms_and_layer_norm(wave_device, dtype):
    eps = 1e-5
    eps_ref = float(np.float32(eps))  # the kernels take eps as f32
    for n in (1, 7, 100, 1024, 1500):
        x = (RNG.standard_normal((37, n)) + 0.5).astype(dtype)  # rows: several waves and blocks
        alpha = RNG.standard_normal(n).astype(dtype)
        beta = RNG.standard_normal(n).astype(dtype)
        xf, af, bf = as_f64(x), as_f64(alpha), as_f64(beta)
        rms = xf / np.sqrt((xf * xf).mean(1, keepdims=True) + eps_ref)
        mean = xf.mean(1, keepdims=True)
        ln = (xf - mean) / np.sqrt(((xf - mean) ** 2).mean(1, keepdims=True) + eps_ref)
        xd = wave_device.to_device(x)
        tol = dict(rtol=TOL[dtype] * 8, atol=TOL[dtype] * 8)
        np.testing.assert_allclose(as_f64(R.rms_norm(xd, wave_device.to_device(alpha), eps).to_host()), rms * af, **tol)
        np.testing.assert_allclose(as_f64(R.rms_norm(xd, None, eps).to_host()), rms, **tol)
        np.testing.assert_allclose(as_f64(R.layer_norm(xd, wave_device.to_device(alpha), wave_device.to_device(beta),
                                                       eps).to_host()), ln * af + bf, **tol)
        np.testing.assert_allclose(as_f64(R.layer_norm(xd, None, None, eps).to_host()), ln, **tol)
        # candle's launches (a block of 32 or 1024 threads per row) on the same rows
        for block_size in (32, 1024):
            np.testing.assert_allclose(as_f64(R.rms_norm(xd, wave_device.to_device(alpha), eps, block_size)
                                              .to_host()), rms * af, **tol)
            np.testing.assert_allclose(as_f64(R.layer_norm(xd, wave_device.to_device(alpha),
                                                           wave_device.to_device(beta), eps, block_size)
                                              .to_host()), ln * af + bf, **tol)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16_bit_rows_at_any_alignment(wave_device, dtype):
    """16-bit rows held in registers go in 4-byte pairs when the row length is even and the pointers
    are 4-byte aligned; a view one element in (2-byte aligned) and odd rows take single elements."""
    eps_ref = float(np.float32(1e-5))
    for n, start in ((1000, 0), (1000, 1), (999, 0), (999, 1)):
        flat = (RNG.standard_normal(1 + 5 * n) * 3).astype(dtype)
        x = flat[start:start + 5 * n].reshape(5, n)
        xd = wave_device.to_device(flat).offset_view(start, (5, n))
        xf = as_f64(x)
        sm = np.exp(xf - xf.max(1, keepdims=True))
        sm /= sm.sum(1, keepdims=True)
        rms = xf / np.sqrt((xf * xf).mean(1, keepdims=True) + eps_ref)
        for block in ((1, 64, 1), None):  # 16 slots a thread: the row in registers
            np.testing.assert_allclose(as_f64(R.softmax_last_dim(xd, block).to_host()), sm, rtol=TOL[dtype] * 4,
                                       atol=TOL[dtype] / 8, err_msg=f"n={n} start={start} {block}")
        np.testing.assert_allclose(as_f64(R.rms_norm(xd, None, 1e-5).to_host()), rms, rtol=TOL[dtype] * 8,
                                   atol=TOL[dtype] * 8, err_msg=f"n={n} start={start}")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("block_size", [32, 1024, None])
@pytest.mark.parametrize("n", [1500, 3000, 6000, 17001])
def test_16_bit_layernorm_statistics(wave_device, dtype, block_size, n):
    """16-bit layernorm rows read from memory take their mean and variance in one pass, each thread's
    squares shifted by an element of the row: rows with an outlier first element (the worst case for
    one shift shared by the row) and a row whose mean is far larger than its spread stay within one
    16-bit ulp of float64 (near zero: within f32 rounding of the row's scale), for every organisation
    of a row: a wave's (candle's 1024 threads on 1500 columns), a group of 128 threads' (on 3000; the
    wrappers' 128 threads reading it twice), a block's in registers (candle's 6000; the wrappers' 1500),
    a block's read from memory (17001; the wrappers' 512 threads on 6000), a single wave's (32)."""
    eps_ref = float(np.float32(1e-5))
    x = (RNG.standard_normal((3, n)) * 2 + 300).astype(dtype)
    x[0, 0], x[1, 0] = 3e4, -3e4  # outliers first
    step = 2.0 if dtype is np.float16 else 16.0  # the spacing of 16-bit values near 3000
    x[2] = (3000 + step * RNG.integers(0, 2, n)).astype(dtype)  # mean**2 / variance ~ 1e7: E[x^2] - mean^2 fails
    xf = as_f64(x)
    want = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + eps_ref)
    got = as_f64(R.layer_norm(wave_device.to_device(x), None, None, 1e-5, block_size).to_host())
    # one 16-bit ulp of the exact value, plus f32-sized slack at the row's scale (outputs near zero)
    excess = np.abs(got - want) - as_f64(np.spacing(np.abs(want).astype(dtype)))
    assert (excess <= 2.0 ** -20 * np.abs(want).max(1, keepdims=True)).all(), excess.max(1)


@pytest.mark.parametrize("block_size", [32, 1024, None])
def test_16_bit_layernorm_outlier_is_no_shift(wave_device, block_size):
    """A thread of a 16-bit row read from memory shifts its squares by the median of its first three
    elements, not by its first: with the outlier 6e4 as thread 0's shift, a row of 17001 constant
    elements came out 1.5 f16 ulps off float64 (on the GPU, random rows up to 40 ulps)."""
    n = 17001
    x = np.full((2, n), 300, np.float16)
    x[0, 0] = 6e4
    x[1, 0], x[1, 1] = 6e4, -6e4  # two threads' first elements
    xf = as_f64(x)
    want = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + float(np.float32(1e-5)))
    got = as_f64(R.layer_norm(wave_device.to_device(x), None, None, 1e-5, block_size).to_host())
    assert (np.abs(got - want) <= as_f64(np.spacing(np.abs(want).astype(np.float16)))).all()


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16_bit_weights_at_any_alignment(wave_device, dtype):
    """alpha and beta of a row held in registers are read four elements at a time when they are
    8-byte aligned, else one by one: views one element in must give the same rows."""
    n, eps_ref = 1000, float(np.float32(1e-5))
    x = (RNG.standard_normal((6, n)) + 0.5).astype(dtype)
    flat_a, flat_b = (RNG.standard_normal(n + 1).astype(dtype) for _ in range(2))
    xf = as_f64(x)
    norm = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + eps_ref)
    xd, da, db = wave_device.to_device(x), wave_device.to_device(flat_a), wave_device.to_device(flat_b)
    for sa, sb in ((0, 0), (1, 0), (0, 1), (1, 1)):
        a, b = da.offset_view(sa, (n,)), db.offset_view(sb, (n,))
        want = norm * as_f64(flat_a[sa:sa + n]) + as_f64(flat_b[sb:sb + n])
        np.testing.assert_allclose(as_f64(R.layer_norm(xd, a, b, 1e-5).to_host()), want, rtol=TOL[dtype] * 8,
                                   atol=TOL[dtype] * 8, err_msg=f"alpha +{sa}, beta +{sb}")


def np_norms(x, alpha, beta, eps_ref):
    """float64 rmsnorm * alpha and layernorm * alpha + beta of ``x``'s rows (biased variance)."""
    xf = as_f64(x)
    rms = xf / np.sqrt((xf * xf).mean(1, keepdims=True) + eps_ref) * alpha
    mean = xf.mean(1, keepdims=True)
    return rms, (xf - mean) / np.sqrt(((xf - mean) ** 2).mean(1, keepdims=True) + eps_ref) * alpha + beta


TAG = {np.float32: "f32", np.float64: "f64", np.float16: "f16", ml_dtypes.bfloat16: "bf16"}


def check_norm_kernels(device, dtype, rows: int, n: int, block: int, suffix: str = ""):
    """rmsnorm and layernorm (``{name}{suffix}_{dtype}``) of ``rows`` random rows of ``n``, a block of
    ``block`` threads a row, against float64, out of place and in place; returns the rows and the
    tolerance."""
    eps_ref = float(np.float32(1e-5))
    x = (RNG.standard_normal((rows, n)) + 0.5).astype(dtype)
    alpha, beta = RNG.standard_normal(n).astype(dtype), RNG.standard_normal(n).astype(dtype)
    rms, ln = np_norms(x, alpha, beta, eps_ref)
    tol = dict(rtol=TOL[dtype] * 8, atol=TOL[dtype] * 8)
    ad, bd = device.to_device(alpha), device.to_device(beta)
    for name, params, want in (("rmsnorm", (ad,), rms), ("layernorm", (ad, bd), ln)):
        fn = device.get_or_load_func(f"{name}{suffix}_{TAG[dtype]}", REDUCE)
        xd = device.to_device(x)
        out = device.empty(x.shape, dtype)
        fn[(rows, 1, 1), (block, 1, 1)](xd, out, *params, n, block, 1e-5)
        np.testing.assert_allclose(out.to_host(), want, **tol, err_msg=name)
        fn[(rows, 1, 1), (block, 1, 1)](xd, xd, *params, n, block, 1e-5)
        np.testing.assert_allclose(xd.to_host(), want, **tol, err_msg=f"{name} in place")
    return x, tol


@pytest.mark.parametrize("rows, n", [(16, 1000), (5, 4096), (3, 12000), (2, 17001), (2, 33001)],
                         ids=["rows-share-blocks", "groups-share-blocks", "block-per-row-in-registers",
                              "block-per-row-half-held", "block-per-row-two-passes"])
def test_norm_launch_shapes(wave_device, rows, n):
    """The norms' block organisations: several rows of a few waves in one block (the wrappers' shape
    for 1000 columns), groups of a block's threads a row (candle's 1024 threads on 4096 columns: rmsnorm
    in two groups, layernorm in four; five rows leave a group without one), a block per row with the
    row in registers (candle's layernorm on 12000 columns; its rmsnorm and the wrappers' 512 threads
    hold half of it), half of the row in registers (the wrappers' 1024 threads on 17001 columns), and
    rows read in every pass (candle's 1024 threads on 17001 and 33001 columns, the wrappers' on
    33001)."""
    eps, eps_ref = 1e-5, float(np.float32(1e-5))
    x = (RNG.standard_normal((rows, n)) + 0.5).astype(np.float32)
    alpha, beta = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    rms, ln = np_norms(x, alpha, beta, eps_ref)
    xd, ad, bd = (wave_device.to_device(a) for a in (x, alpha, beta))
    for block_size in (None, 1024):
        np.testing.assert_allclose(as_f64(R.rms_norm(xd, ad, eps, block_size).to_host()), rms, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(as_f64(R.layer_norm(xd, ad, bd, eps, block_size).to_host()), ln, rtol=2e-5,
                                   atol=2e-5)


@pytest.mark.parametrize("dtype, n, block", [(np.float32, 8193, 512), (np.float32, 16384, 512),
                                              (np.float32, 20001, 1024), (np.float64, 5000, 512),
                                              (np.float64, 16384, 1024)])
def test_norms_half_held(wave_device, dtype, n, block):
    """The wrappers' f32/f64 ``*_rows_*`` kernels on rows longer than their threads hold, up to twice:
    the first part in registers, the rest read in each pass; in place too, and without alpha/beta."""
    rows = 3
    for name in ("rmsnorm", "layernorm"):
        assert L.norm_launch(name, rows, n, getattr(pk, TAG[dtype]), 32) == (
            f"{name}_rows_{TAG[dtype]}", (rows, 1, 1), (block, 1, 1))
    x, tol = check_norm_kernels(wave_device, dtype, rows, n, block, "_rows")
    out = wave_device.empty(x.shape, dtype)
    wave_device.get_or_load_func(f"layernorm_rows_{TAG[dtype]}", REDUCE)[(rows, 1, 1), (block, 1, 1)](
        wave_device.to_device(x), out, None, None, n, block, 1e-5)
    xf = as_f64(x)
    mean = xf.mean(1, keepdims=True)
    np.testing.assert_allclose(out.to_host(), (xf - mean) / np.sqrt(((xf - mean) ** 2).mean(1, keepdims=True)
                                                                     + float(np.float32(1e-5))), **tol)


@pytest.mark.parametrize("dtype, n, block", [(np.float32, 4096, 1024), (np.float32, 4096, 768),
                                              (np.float32, 6001, 1024), (np.float64, 3001, 1024),
                                              (np.float32, 4500, 544), (ml_dtypes.bfloat16, 4096, 1024),
                                              (np.float16, 3001, 1024), (ml_dtypes.bfloat16, 2500, 768),
                                              (ml_dtypes.bfloat16, 8192, 1024), (np.float16, 5001, 1024),
                                              (ml_dtypes.bfloat16, 16385, 1024)],
                         ids=["f32-4096-four-groups", "f32-4096-three-groups", "f32-6001-two-groups",
                              "f64-3001-two-groups", "f32-4500-a-block-of-17-waves", "bf16-4096-groups-of-128",
                              "f16-3001-groups-of-128", "bf16-2500-six-groups-of-128", "bf16-8192-groups-of-512",
                              "f16-5001-groups-of-512", "bf16-16385-a-block-per-row"])
def test_norm_row_groups(wave_device, dtype, n, block):
    """A block of one row (candle's launch) whose row fills the registers of 256 or more, but fewer,
    of its threads gives such a group a row each: 5 rows leave the second busy block with one row and
    its last row repeated by the empty groups; 768 threads make three groups a block (no power of two);
    544 (17 waves) no whole groups: a block per row. 16-bit rows of 2049-4096 go to groups of 128 that
    read them twice (8 a block, 6 of 768 threads), longer ones up to 16384 to groups of 512 (two a
    block, the third busy block's second group past the last row). In place too: every group reads its
    row before any stores, and a group past the end stores nothing."""
    check_norm_kernels(wave_device, dtype, 5, n, block)


@pytest.mark.parametrize("n, block_size", [(4096, 1024), (4096, None), (12000, 1024), (1000, 32)],
                         ids=["groups", "wrappers", "block-in-registers", "wave"])
def test_layernorm_of_rows_far_from_zero(wave_device, n, block_size):
    """f32 rows whose mean is 1e4 times their spread: E[x^2] - mean^2 in f32 would lose the variance
    entirely (an ulp of 1e8 is 8); the waves' (count, sum, M2) merged in one barrier (Chan) and the
    two-reduction forms stay within f32 rounding of the mean (~1e-3 of the spread here)."""
    eps_ref = float(np.float32(1e-5))
    x = (RNG.standard_normal((3, n)) + 1e4).astype(np.float32)
    xf = as_f64(x)
    want = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + eps_ref)
    got = as_f64(R.layer_norm(wave_device.to_device(x), None, None, 1e-5, block_size).to_host())
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-2)


# ------------------------------------------------------------------------------------------------- rope
def np_rope(x, c, s, layout):
    """Direct formulas: x (b, h, t, d) for rope/rope_i, (b, t, h, d) for rope_thd; cos/sin (t, d/2) or (b, t, d/2)."""
    x, c, s = as_f64(x), as_f64(c), as_f64(s)
    if layout == "rope_thd":
        t = x.shape[1]
        c = c[..., :t, :][:, :, None, :] if c.ndim == 3 else c[None, :t, None, :]
        s = s[..., :t, :][:, :, None, :] if s.ndim == 3 else s[None, :t, None, :]
    else:
        t = x.shape[2]
        c = c[:, None, :t, :] if c.ndim == 3 else c[None, None, :t, :]
        s = s[:, None, :t, :] if s.ndim == 3 else s[None, None, :t, :]
    if layout == "rope_i":
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


@pytest.mark.parametrize("layout", ["rope", "rope_i", "rope_thd"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rope(wave_device, layout, dtype):
    b, h, t, d = 2, 3, 5, 8
    shape = (b, t, h, d) if layout == "rope_thd" else (b, h, t, d)
    x = RNG.standard_normal(shape).astype(dtype)
    fn = getattr(R, layout)
    for cs_shape in ((t, d // 2), (t + 3, d // 2), (b, t, d // 2)):
        ang = RNG.uniform(-3, 3, cs_shape)
        c, s = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
        got = as_f64(fn(wave_device.to_device(x), wave_device.to_device(c), wave_device.to_device(s)).to_host())
        np.testing.assert_allclose(got, np_rope(x, c, s, layout), rtol=TOL[dtype] * 4, atol=TOL[dtype] * 4,
                                   err_msg=f"{layout} cos {cs_shape}")


@pytest.mark.parametrize("layout", ["rope", "rope_i", "rope_thd"])
def test_rope_rejects_what_does_not_fit(layout):
    fn = getattr(R, layout)
    dev = pk.device("cpu").to_device
    x = np.ones((1, 5, 1, 8) if layout == "rope_thd" else (1, 1, 5, 8), np.float32)  # t = 5, d = 8
    cs = dev(np.ones((5, 4), np.float32))
    for xx, c, s, what in ((x[0], cs, cs, "must be"),  # three dims
                           (x[..., :7], cs, cs, "d even"),
                           (x, dev(np.ones((4, 4), np.float32)), None, "do not fit"),  # t = 4 < 5
                           (x, dev(np.ones((5, 4), np.float16)), None, "share a dtype"),
                           (x, cs, dev(np.ones((5, 3), np.float32)), "both be")):
        with pytest.raises(ValueError, match=what):
            fn(dev(np.ascontiguousarray(xx)), c, c if s is None else s)
    assert fn(dev(x[:0]), cs, cs).shape == (0,) + x.shape[1:]  # empty: nothing to launch


def test_softmax_kernels_by_block():
    """candle's names for candle's block (1, 32, 1), ``softmax_rows_*`` for every other and for the
    wrappers' own launches (whose block may be candle's): candle's f32 kernel is built for one warp
    (a lane holds 256 bytes of a long row), and a wider block gets a launch error that names the
    limit."""
    assert L.softmax_kernel_name(pk.f16, (1, 32, 1)) == "softmax_f16"
    assert L.softmax_kernel_name(pk.f32, [1, 32, 1]) == "softmax_f32"
    for dtype in (pk.f32, pk.f64, pk.f16, pk.bf16):
        assert L.softmax_kernel_name(dtype, (1, 64, 1)) == f"softmax_rows_{dtype.name}"
        assert L.softmax_kernel_name(dtype) == f"softmax_rows_{dtype.name}"  # the wrappers' own launch
    dev = pk.device("cpu")
    f = dev.get_or_load_func("softmax_f32", REDUCE)
    x = dev.to_device(np.ones((1, 4000), np.float32))
    with pytest.raises(pk.LaunchError, match="64 threads exceeds its maximum block size 32"):
        f[(1, 1, 1), (1, 64, 1)](x, x, 4000)


def test_wrappers_pick_their_own_16_bit_norm_kernels():
    """16-bit rows by ``NARROW_LAUNCH``: a wave a row while its registers hold it (candle's kernel up
    to 256 columns, ``*_rows_*`` up to 512, eight rows a block), then candle's kernel reading the row
    twice with 64 threads up to 1536 columns, 128 up to 4096 (two, then four rows a block), then in
    candle's block of 1024 (which the kernel splits into groups of 512 up to 16384 columns); never
    fewer threads than a wave. f32 rows held by enough threads, rmsnorm's in ``rmsnorm_rows_f32``
    (candle's rmsnorm_f32 holds half as much: two blocks of 1024 an SM)."""
    launch = L.norm_launch
    for n, kernel, grid, block in ((7, "layernorm_f16", (8, 1, 1), (32, 8, 1)),
                                   (256, "layernorm_f16", (8, 1, 1), (32, 8, 1)),
                                   (257, "layernorm_rows_f16", (8, 1, 1), (32, 8, 1)),
                                   (512, "layernorm_rows_f16", (8, 1, 1), (32, 8, 1)),
                                   (513, "layernorm_f16", (16, 1, 1), (64, 4, 1)),
                                   (1536, "layernorm_f16", (16, 1, 1), (64, 4, 1)),
                                   (2048, "layernorm_f16", (32, 1, 1), (128, 2, 1))):
        assert launch("layernorm", 64, n, pk.f16, 32) == (kernel, grid, block), n
    assert launch("layernorm", 64, 1024, pk.f32, 32) == ("layernorm_f32", (16, 1, 1), (64, 4, 1))
    assert launch("rmsnorm", 8, 8192, pk.f32, 32) == ("rmsnorm_rows_f32", (8, 1, 1), (512, 1, 1))
    # longer f32/f64 rows: half held by the *_rows_* kernels, 512 threads up to twice what they hold
    for n, dtype, block in ((8193, pk.f32, 512), (16384, pk.f32, 512), (16385, pk.f32, 1024),
                            (32768, pk.f32, 1024), (4097, pk.f64, 512), (16384, pk.f64, 1024)):
        assert launch("layernorm", 8, n, dtype, 64) == (f"layernorm_rows_{dtype}", (8, 1, 1), (block, 1, 1)), n
    assert launch("rmsnorm", 8, 32769, pk.f32, 32) == ("rmsnorm_rows_f32", (8, 1, 1), (1024, 1, 1))
    assert launch("rmsnorm", 8, 32769, pk.f64, 32) == ("rmsnorm_f64", (8, 1, 1), (1024, 1, 1))
    for n, grid, block in ((2049, (2, 1, 1), (128, 4, 1)), (4096, (2, 1, 1), (128, 4, 1)),
                           (4097, (8, 1, 1), (1024, 1, 1)), (16384, (8, 1, 1), (1024, 1, 1)),
                           (16385, (8, 1, 1), (1024, 1, 1)), (65536, (8, 1, 1), (1024, 1, 1))):
        assert launch("layernorm", 8, n, pk.bf16, 32) == ("layernorm_bf16", grid, block), n
    assert launch("rmsnorm", 6, 4096, pk.bf16, 64)[1:] == ((3, 1, 1), (128, 2, 1))  # 4 rows a block: 6 % 4
    assert launch("rmsnorm", 64, 100, pk.bf16, 64) == ("rmsnorm_bf16", (16, 1, 1), (64, 4, 1))  # a wave of 64
    assert {f"{n}_rows_{t}" for n in ("rmsnorm", "layernorm") for t in ("f16", "bf16")} <= set(REDUCE.names())


# ------------------------------------------------------------------------------------------------- bad input
def test_wrappers_validate_before_launching():
    """Every wrapper checks its launch shape, sizes and dtypes before launching: a softmax block that is
    not (1, n <= 1024, 1) once corrupted the heap (its x threads took rows past the grid's), an alpha of
    the wrong length was read past its end, and a 0-d input to a norm raised IndexError."""
    dev = pk.device("cpu")
    x = dev.to_device(np.ones((4, 64), np.float32))
    for block in ((2, 32, 1), (1, 32, 2), (1, 0, 1), (1, 2048, 1), (1, 32), (1, 32.0, 1), 32, None.__class__):
        with pytest.raises(ValueError, match="softmax block"):
            R.softmax_last_dim(x, block=block)
    short, wide = dev.to_device(np.ones(3, np.float32)), dev.to_device(np.ones(64, np.float64))
    with pytest.raises(ValueError, match=r"rmsnorm alpha must have shape \(64,\)"):
        R.rms_norm(x, short, 1e-5)
    with pytest.raises(ValueError, match=r"layernorm beta must have shape \(64,\)"):
        R.layer_norm(x, None, short, 1e-5)
    with pytest.raises(ValueError, match=r"must have shape \(64,\)"):
        R.rms_norm(x, dev.to_device(np.ones((2, 32), np.float32)), 1e-5)
    with pytest.raises(TypeError, match="alpha must have the input's dtype f32"):
        R.rms_norm(x, wide, 1e-5)
    for norm in (lambda v: R.rms_norm(v, None, 1e-5), lambda v: R.layer_norm(v, None, None, 1e-5)):
        with pytest.raises(ValueError, match="0-d"):
            norm(dev.to_device(np.array(1.0, np.float32)))
    for block_size in (0, 2048, 1.5, True):
        with pytest.raises(ValueError, match="block_size must be an int from 1 to 1024"):
            R.rms_norm(x, None, 1e-5, block_size)
    # a last wave with fewer lanes than the block has waves is accepted and right (it got a wrong total,
    # rms_norm with 33 threads at a wave of 32 was 0.8 off, and was refused; test_raw_launches_at_any_block)
    ws = dev.target.wave_size
    xs = RNG.standard_normal((4, 64)).astype(np.float32)
    ln = (xs - xs.mean(1, keepdims=True)) / np.sqrt(xs.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(R.layer_norm(dev.to_device(xs), None, None, 1e-5, ws + 1).to_host(), ln,
                               rtol=1e-5, atol=1e-5)
    e = np.exp(xs - xs.max(1, keepdims=True))
    np.testing.assert_allclose(R.softmax_last_dim(dev.to_device(xs), (1, 577, 1)).to_host(),
                               e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)  # 18 or 9 waves and one lane
    with pytest.raises(TypeError, match="eps must be a float"):
        R.layer_norm(x, None, None, "1e-5")
    ints = dev.to_device(np.ones((4, 64), np.int32))
    for call in (lambda: R.softmax_last_dim(ints), lambda: R.rms_norm(ints, None, 1e-5), lambda: R.sum(ints),
                 lambda: R.argmax(ints, 1), lambda: R.sum_atomic_launch(ints, [0])):
        with pytest.raises(TypeError, match="dtype must be one of"):
            call()
    with pytest.raises(ValueError, match="op must be one of"):
        R.fast_reduce_launch("fast_prod", x)
    with pytest.raises(TypeError, match="dims must be ints"):
        R.sum(x, [1.0])
    with pytest.raises(TypeError):
        R.rms_norm(x, None, 1e-5, rounding="nearest")  # unknown keywords are refused, not ignored
    # what stays accepted: a 0-d softmax (one row of one element), candle's block given as a list
    assert R.softmax_last_dim(dev.to_device(np.array(3.0, np.float32))).to_host() == 1.0
    np.testing.assert_allclose(R.softmax_last_dim(x, [1, 32, 1]).to_host(), np.full((4, 64), 1 / 64), rtol=1e-6)


# ------------------------------------------------------------------------------------------------- the skeleton
@pk.kernel
def skeleton_sums(x: pk.ConstPtr[pk.f32], out: pk.Ptr[pk.f32], *, GATHER):
    """One block's sum through ``block_total``: every thread writes what ``GATHER`` leaves it."""
    sm = pk.shared.array(RD.MAX_WAVES, pk.f32)
    t = pk.thread_idx.x
    out[t] = RD.block_total(x[t], sm + 0, t, pk.block_dim.x, merge=RD.SUM, gather=GATHER, free=False)


ARG_MIN_F32 = RD.ARG_MIN.with_identity(float("inf"))


@pk.kernel
def skeleton_argmin(x: pk.ConstPtr[pk.f32], out: pk.Ptr[pk.u32], *, GATHER):
    """One block's (value, index) minimum through ``block_merge`` with an extra (the index)."""
    sv = pk.shared.array(RD.MAX_WAVES, pk.f32)
    si = pk.shared.array(RD.MAX_WAVES, pk.u32)
    t = pk.thread_idx.x
    index = pk.local.array(1, pk.u32)
    index[0] = t
    RD.block_merge(x[t], index, sv + 0, si + 0, t, pk.block_dim.x, merge=ARG_MIN_F32, gather=GATHER, free=False)
    if t == 0:
        out[0] = index[0]


GATHERS = (RD.EVERY_WAVE, RD.WHOLE_WAVES, RD.FIRST_WAVE)
SKELETON_SUMS = {g: skeleton_sums.instance(f"skeleton_sums_{i}", GATHER=g) for i, g in enumerate(GATHERS)}
#: FIRST_WAVE reloads a merge's extras (the index) from shared memory too (it once took only the values)
SKELETON_ARGMINS = {g: skeleton_argmin.instance(f"skeleton_argmin_{i}", GATHER=g) for i, g in enumerate(GATHERS)}


@pytest.mark.parametrize("block", [1, 5, 32, 33, 48, 65, 80, 100, 129, 256, 577, 1000, 1024])
def test_block_merge_skeleton(wave_device, block):
    """The skeleton alone, at every block size (partial waves, a last wave with fewer lanes than the
    block has waves (33, 65, 129, 577), blocks narrower than a wave): a sum wherever each gather
    promises it (EVERY_WAVE: lane 0 of every wave; WHOLE_WAVES: every thread; FIRST_WAVE: thread 0),
    and a value-and-index minimum whose ties go to the lower index."""
    x = RNG.integers(-50, 50, block).astype(np.float32)  # exact sums in f32
    xd = wave_device.to_device(x)
    ws = wave_device.target.wave_size
    for gather, kern in SKELETON_SUMS.items():
        out = wave_device.to_device(np.zeros(block, np.float32))
        kern.launch(1, block, xd, out, device=wave_device)
        got = out.to_host()
        assert got[0] == x.sum(), gather
        if gather == RD.EVERY_WAVE:
            np.testing.assert_array_equal(got[::ws], np.full(-(-block // ws), x.sum()))
        if gather == RD.WHOLE_WAVES:
            np.testing.assert_array_equal(got, np.full(block, x.sum()))
    x[-1] = x[block // 2] = x.min() - 1  # a tie: the lower index wins
    for gather, kern in SKELETON_ARGMINS.items():
        out = wave_device.to_device(np.zeros(1, np.uint32))
        kern.launch(1, block, wave_device.to_device(x), out, device=wave_device)
        assert out.to_host()[0] == (block // 2 if block > 1 else 0), gather


@pytest.mark.parametrize("block", [33, 48, 65, 80, 129, 577])
def test_raw_launches_at_any_block(wave_device, block):
    """candle's kernels launched raw with blocks that are no multiple of the wave, among them last
    waves with fewer lanes than the block has waves (33 threads at a wave of 32 gave rmsnorm a total
    0.8 off): fast_* (a block a row), softmax (block (1, n, 1)), rmsnorm and layernorm (block (n, 1, 1))."""
    rows, n = 3, 700
    x = RNG.standard_normal((rows, n)).astype(np.float32)
    xd = wave_device.to_device(x)
    info = wave_device.to_device(np.array([rows, n, n, 1], np.uint64))
    for op, want in (("fast_sum", x.astype(np.float64).sum(1)), ("fast_max", x.max(1)),
                     ("fast_argmin", x.argmin(1)), ("fast_argmax", x.argmax(1))):
        out = wave_device.empty((rows,), np.uint32 if "arg" in op else np.float32)
        fn = wave_device.get_or_load_func(f"{op}_f32", REDUCE)
        fn[(rows, 1, 1), (block, 1, 1)](x.size, n, 2, info, xd, out)
        if op == "fast_sum":
            np.testing.assert_allclose(out.to_host(), want, rtol=1e-5, atol=1e-4, err_msg=op)
        else:
            np.testing.assert_array_equal(out.to_host(), want, err_msg=op)
    out = wave_device.empty((rows, n), np.float32)
    wave_device.get_or_load_func("softmax_rows_f32", REDUCE)[(rows, 1, 1), (1, block, 1)](xd, out, n)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(out.to_host(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    check_norm_kernels(wave_device, np.float32, rows, n, block)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_host_norm_kernels(wave_device, dtype, monkeypatch):
    """The norm wrappers' own launch on a CPU device: the host kernels (a wave a row, every pass read
    from memory), against float64, with and without alpha/beta, in place, on row counts that fill
    whole blocks of rows and that do not."""
    monkeypatch.setattr(L, "HOST_KERNELS", True)
    ws = wave_device.target.wave_size
    # a wave a row, 256 // wave rows a block where they divide the row count (12 rows: 4 a block)
    assert L.host_norm_launch("rmsnorm", 12, pk.f32, ws) == ("rmsnorm_host_f32", (3, 1, 1), (ws, 4, 1))
    assert L.host_norm_launch("layernorm", 7, pk.bf16, ws) == ("layernorm_host_bf16", (7, 1, 1), (ws, 1, 1))
    eps_ref = float(np.float32(1e-5))
    tol = dict(rtol=TOL[dtype] * 8, atol=TOL[dtype] * 8)
    for rows, n in ((37, 1), (8, 7), (6, 100), (5, 1024), (3, 1500), (2, 5001)):
        x = (RNG.standard_normal((rows, n)) + 0.5).astype(dtype)
        alpha, beta = RNG.standard_normal(n).astype(dtype), RNG.standard_normal(n).astype(dtype)
        rms, ln = np_norms(x, alpha, beta, eps_ref)
        xd, ad, bd = (wave_device.to_device(a) for a in (x, alpha, beta))
        np.testing.assert_allclose(as_f64(R.rms_norm(xd, ad, 1e-5).to_host()), rms, **tol, err_msg=f"{rows}x{n}")
        np.testing.assert_allclose(as_f64(R.layer_norm(xd, ad, bd, 1e-5).to_host()), ln, **tol, err_msg=f"{rows}x{n}")
        xf = as_f64(x)
        mean = xf.mean(1, keepdims=True)
        plain = (xf - mean) / np.sqrt(((xf - mean) ** 2).mean(1, keepdims=True) + eps_ref)
        np.testing.assert_allclose(as_f64(R.layer_norm(xd, None, None, 1e-5).to_host()), plain, **tol)
        np.testing.assert_allclose(as_f64(R.rms_norm(xd, None, 1e-5).to_host()),
                                   xf / np.sqrt((xf * xf).mean(1, keepdims=True) + eps_ref), **tol)
    assert {k.name for k in L.REDUCE_HOST} == {f"{n}_host_{t}" for n in ("rmsnorm", "layernorm")
                                               for t in ("f32", "f64", "f16", "bf16")}
