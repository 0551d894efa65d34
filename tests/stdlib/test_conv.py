"""CONV: every kernel x dtype against direct NumPy references, launched as candle launches them (one
thread per output, blocks of 1024, ``info`` always passed) and with a small grid (grid-stride loops).

References: integer results are exact (sums wrap: computed in uint64 and reduced modulo 2^bits, which
is what wrapping at every step gives); sums of products in floats are held to the error bound of
their accumulation, ``|got - exact| <= n u_A sum|x w| + u_T |exact|`` (n terms accumulated with unit
roundoff u_A, one rounding to T); data movement (im2col, nearest, max pool), col2im (a replayed sum in
T), the average pool (a replayed sum in A) and bilinear (replayed in f64) are bit-exact.
"""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, f64, u8, u32, usize
from pykern.runtime.base import DeviceArray
from pykern.runtime.launch import storage
from stdlib_kernels import CONV, conv, kernel_name
from stdlib_kernels import conv_launch as cl
from stdlib_kernels.matmul import DTYPES as GEMM_DTYPES
from _elementwise import ABI, RNG, abi_mismatches, assert_bits

DTYPES = conv.DTYPES
IDS = [t.tag for t in DTYPES]
VEC_IDS = [t.tag for t in conv.VEC_DTYPES]


# ---- data and layouts -------------------------------------------------------------------------------
def values(dtype, shape) -> np.ndarray:
    """Small integers for ints (u8 products and sums wrap), uniform [-2, 2) rounded to ``dtype`` for floats."""
    if dtype.is_int:
        hi = 255 if dtype is u8 else 70000
        return RNG.integers(0, hi, size=shape, endpoint=True).astype(dtype.np)
    return RNG.uniform(-2, 2, size=shape).astype(dtype.np)


def view(dev, host: np.ndarray, layout: str):
    """``host``'s values on ``dev`` as a view of the given layout: contiguous, dims stored in reverse
    order (every stride non-unit), or every other element of a buffer starting 5 elements in."""
    shape = host.shape
    if layout == "contiguous":
        return dev.to_device(host)
    if layout == "permuted":
        base = dev.to_device(np.ascontiguousarray(host.transpose(tuple(reversed(range(host.ndim))))))
        strides, acc = [0] * host.ndim, 1
        for d in range(host.ndim):
            strides[d] = acc
            acc *= shape[d]
        return base.as_strided(shape, strides)
    assert layout == "offset"
    contiguous = [int(np.prod(shape[d + 1:])) * 2 for d in range(host.ndim)]
    buf = np.zeros(5 + 2 * max(1, host.size) + 3, host.dtype)
    np.lib.stride_tricks.as_strided(buf[5:], shape, [s * host.itemsize for s in contiguous])[...] = host
    return dev.to_device(buf).as_strided(shape, contiguous, offset=5)


def pitched(dev, x, pitch: int, start: int) -> DeviceArray:
    """``x`` (NCHW) on ``dev`` with rows ``pitch`` elements apart (>= its width), ``start`` elements into
    its buffer: the row-vector paths' alignment and row-stride cases."""
    b, c, h, w = x.shape
    strides = [c * h * pitch, h * pitch, pitch, 1]
    buf = np.zeros(start + b * c * h * pitch, x.dtype)
    np.lib.stride_tricks.as_strided(buf[start:], x.shape, [v * x.itemsize for v in strides])[...] = x
    return dev.to_device(buf).as_strided(x.shape, strides, offset=start)


LAYOUTS = ("contiguous", "permuted", "offset")


def info_of(dev, *arrays):
    return dev.to_device(np.array([x for a in arrays for x in (*a.shape, *a.strides)], np.uint64))


def launch(dev, name: str, threads: int, *args, small: bool = False, module=CONV, shape=None):
    """candle's launch (ceil(threads/1024) blocks of 1024), one block of 64 threads (grid-stride), or ``shape``."""
    fn = dev.get_or_load_func(name, module)
    grid, block = shape or ((1, 64) if small else (max(1, -(-threads // 1024)), 1024))
    fn[grid, block](*[storage(a) if isinstance(a, DeviceArray) else a for a in args])


# ---- references -------------------------------------------------------------------------------------
def wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.uint64) if x.dtype.kind == "u" else x.astype(np.float64)


def out_size(size, k, stride, padding, dilation) -> int:
    return max(0, (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1)


def conv_ref(x, w, stride, padding, dilation):
    """N-d convolution (1-d or 2-d) of (b, c_in, *s) with (c_out, c_in, *k) in float64 or uint64."""
    nd = x.ndim - 2
    xp = np.pad(wide(x), [(0, 0), (0, 0)] + [(padding, padding)] * nd)
    outs = [out_size(x.shape[2 + d], w.shape[2 + d], stride, padding, dilation) for d in range(nd)]
    out = np.zeros((x.shape[0], w.shape[0], *outs), xp.dtype)
    if 0 in outs:
        return out
    for taps in np.ndindex(*w.shape[2:]):
        sl = tuple(slice(t * dilation, t * dilation + stride * (o - 1) + 1, stride) for t, o in zip(taps, outs))
        cols = xp[(slice(None), slice(None)) + sl]
        out += np.einsum("bc...,oc->bo...", cols, wide(w)[(slice(None), slice(None)) + taps])
    return out


def conv_transpose_ref(x, w, stride, padding, out_padding, dilation):
    """Transposed convolution of (b, c_in, *s) with (c_in, c_out, *k): scatter, then crop the padding."""
    nd = x.ndim - 2
    outs = [(x.shape[2 + d] - 1) * stride - 2 * padding + dilation * (w.shape[2 + d] - 1) + out_padding + 1
            for d in range(nd)]
    full = [max(padding + o, (x.shape[2 + d] - 1) * stride + dilation * (w.shape[2 + d] - 1) + 1)
            for d, o in enumerate(outs)]
    acc = np.zeros((x.shape[0], w.shape[1], *full), wide(x).dtype)
    for taps in np.ndindex(*w.shape[2:]):
        sl = tuple(slice(t * dilation, t * dilation + stride * (n - 1) + 1, stride) for t, n in zip(taps, x.shape[2:]))
        acc[(slice(None), slice(None)) + sl] += np.einsum("bc...,co->bo...", wide(x), wide(w)[(slice(None), slice(None)) + taps])
    return acc[(slice(None), slice(None)) + tuple(slice(padding, padding + o) for o in outs)]


def check_sum(got: np.ndarray, exact, magnitude, terms: int, dtype, what: str, narrow_steps: int = 0):
    """Integers: equal modulo 2^bits. Floats: within the accumulation's bound (module docstring), plus
    ``narrow_steps u_T sum|x w|`` where partial sums are rounded to T and added in T (col2im)."""
    if dtype.is_int:
        assert_bits(got, exact.astype(dtype.np), what)
        return
    u_acc = np.finfo(np.float64 if dtype is f64 else np.float32).eps / 2
    u_out = float(ml_dtypes.finfo(dtype.np).eps) / 2
    bound = (terms * u_acc * 1.01 + narrow_steps * u_out) * magnitude + u_out * np.abs(exact) \
        + float(ml_dtypes.finfo(dtype.np).smallest_subnormal)
    err = np.abs(got.astype(np.float64) - exact)
    assert got.shape == exact.shape, (what, got.shape, exact.shape)
    if err.size and (err > bound).any():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(f"{what}: |{got[i]} - {exact[i]}| = {err[i]} > bound {bound[i]} at {i}")


def absolute(x):
    return np.abs(wide(x)) if x.dtype.kind != "u" else wide(x)


# ---- convolutions -------------------------------------------------------------------------------------
#: (b, c_in, size, c_out, k, stride, padding, dilation): 1x1, stride > kernel, dilation, padding >= kernel,
#: a kernel larger than the padded input (empty output)
CONV_CASES = [
    (2, 3, 11, 4, 3, 1, 0, 1),
    (1, 5, 9, 2, 1, 1, 0, 1),
    (2, 2, 13, 3, 2, 3, 1, 1),
    (1, 3, 10, 2, 3, 2, 1, 2),
    (2, 2, 5, 3, 2, 1, 3, 1),
    (1, 2, 3, 2, 7, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_conv1d(wave_device, dtype):
    dev = wave_device
    for n, (b, ci, l, co, k, stride, pad, dil) in enumerate(CONV_CASES):
        x, w = values(dtype, (b, ci, l)), values(dtype, (co, ci, k))
        exact, mag = conv_ref(x, w, stride, pad, dil), conv_ref(absolute(x), absolute(w), stride, pad, dil)
        l_out = exact.shape[2]
        layout = LAYOUTS[n % 3]
        xd, wd = view(dev, x, layout), view(dev, w, LAYOUTS[(n + 1) % 3])
        out = dev.empty((b, co, l_out), dtype)
        launch(dev, f"conv1d_{dtype.tag}", out.size, x.size, l_out, stride, pad, dil, info_of(dev, xd, wd), xd, wd, out,
               small=n % 2 == 1)
        check_sum(out.to_host(), exact, mag, ci * k, dtype, f"conv1d case {n} {layout}")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_conv2d(wave_device, dtype):
    dev = wave_device
    for n, (b, ci, s, co, k, stride, pad, dil) in enumerate(CONV_CASES):
        x, w = values(dtype, (b, ci, s, s - 2)), values(dtype, (co, ci, k, max(1, k - 1)))
        exact = conv_ref(x, w, stride, pad, dil)
        mag = conv_ref(absolute(x), absolute(w), stride, pad, dil)
        h_out, w_out = exact.shape[2:]
        xd, wd = view(dev, x, LAYOUTS[n % 3]), view(dev, w, LAYOUTS[(n + 2) % 3])
        out = dev.empty(exact.shape, dtype)
        launch(dev, f"conv2d_{dtype.tag}", out.size, x.size, w_out, h_out, stride, pad, dil, info_of(dev, xd, wd), xd, wd,
               out, small=n % 2 == 0)
        check_sum(out.to_host(), exact, mag, w[0].size, dtype, f"conv2d case {n}")


#: (b, c_in, size, c_out, k, stride, padding, out_padding, dilation)
CONVT_CASES = [
    (2, 3, 7, 2, 3, 1, 0, 0, 1),
    (1, 2, 5, 3, 1, 2, 0, 1, 1),
    (2, 2, 6, 2, 3, 2, 1, 1, 2),
    (1, 3, 4, 2, 2, 3, 2, 2, 1),
    (1, 2, 5, 2, 4, 1, 3, 0, 1),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_conv_transpose1d(wave_device, dtype):
    dev = wave_device
    for n, (b, ci, l, co, k, stride, pad, opad, dil) in enumerate(CONVT_CASES):
        x, w = values(dtype, (b, ci, l)), values(dtype, (ci, co, k))
        exact = conv_transpose_ref(x, w, stride, pad, opad, dil)
        mag = conv_transpose_ref(absolute(x), absolute(w), stride, pad, opad, dil)
        xd, wd = view(dev, x, LAYOUTS[n % 3]), view(dev, w, LAYOUTS[(n + 1) % 3])
        out = dev.empty(exact.shape, dtype)
        launch(dev, f"conv_transpose1d_{dtype.tag}", out.size, x.size, exact.shape[2], stride, pad, opad, dil,
               info_of(dev, xd, wd), xd, wd, out, small=n % 2 == 1)
        check_sum(out.to_host(), exact, mag, ci * k, dtype, f"conv_transpose1d case {n}")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_conv_transpose2d(wave_device, dtype):
    dev = wave_device
    for n, (b, ci, s, co, k, stride, pad, opad, dil) in enumerate(CONVT_CASES):
        x, w = values(dtype, (b, ci, s, s + 1)), values(dtype, (ci, co, k, k + 1))
        exact = conv_transpose_ref(x, w, stride, pad, opad, dil)
        mag = conv_transpose_ref(absolute(x), absolute(w), stride, pad, opad, dil)
        xd, wd = view(dev, x, LAYOUTS[(n + 1) % 3]), view(dev, w, LAYOUTS[n % 3])
        out = dev.empty(exact.shape, dtype)
        h_out, w_out = exact.shape[2:]
        launch(dev, f"conv_transpose2d_{dtype.tag}", out.size, x.size, w_out, h_out, stride, pad, opad, dil,
               info_of(dev, xd, wd), xd, wd, out, small=n % 2 == 0)
        check_sum(out.to_host(), exact, mag, ci * k * (k + 1), dtype, f"conv_transpose2d case {n}")


# ---- im2col / col2im ------------------------------------------------------------------------------------
def im2col_ref(x, k_sizes, stride, padding, dilation):
    """(b, *out, c, *k) patches of (b, c, *s), zeros in the padding."""
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(padding, padding)] * nd)
    outs = [out_size(x.shape[2 + d], k_sizes[d], stride, padding, dilation) for d in range(nd)]
    out = np.zeros((x.shape[0], *outs, x.shape[1], *k_sizes), x.dtype)
    for pos in np.ndindex(*outs):
        for taps in np.ndindex(*k_sizes):
            src = tuple(p * stride + t * dilation for p, t in zip(pos, taps))
            out[(slice(None), *pos, slice(None), *taps)] = xp[(slice(None), slice(None), *src)]
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_im2col1d(wave_device, dtype):
    run_im2col1d(wave_device, dtype)


def run_im2col1d(dev, dtype, module=CONV):
    for n, (b, c, l, _, k, stride, pad, dil) in enumerate(CONV_CASES):
        x = values(dtype, (b, c, l))
        want = im2col_ref(x, (k,), stride, pad, dil)
        l_out = want.shape[1]
        xd = view(dev, x, LAYOUTS[n % 3])
        out = dev.empty(want.shape, dtype)
        threads = b * l_out * c  # candle's dst_numel: threads, each writing l_k values
        for shape in (None, (1, 64), (3, 16), conv.im2col_launch(b, c, 1, l_out, 1, k, dtype)):
            launch(dev, f"im2col1d_{dtype.tag}", threads, threads, l_out, k, stride, pad, dil, info_of(dev, xd), xd,
                   out, module=module, shape=shape)
            assert_bits(out.to_host(), want, f"im2col1d case {n} launch {shape}")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_im2col(wave_device, dtype):
    run_im2col(wave_device, dtype)


def run_im2col(dev, dtype, module=CONV):
    for n, (b, c, s, _, k, stride, pad, dil) in enumerate(CONV_CASES):
        x = values(dtype, (b, c, s, s + 2))
        want = im2col_ref(x, (k, k + 1), stride, pad, dil)
        h_out, w_out = want.shape[1:3]
        xd = view(dev, x, LAYOUTS[(n + 1) % 3])
        out = dev.empty(want.shape, dtype)
        for shape in (None, (1, 64), (3, 16)):  # staged under blocks of >= 32 threads; one output a step below
            launch(dev, f"im2col_{dtype.tag}", out.size, out.size, h_out, w_out, k, k + 1, stride, pad, dil,
                   info_of(dev, xd), xd, out, module=module, shape=shape)
            assert_bits(out.to_host(), want, f"im2col case {n} launch {shape}")


@pytest.mark.parametrize("dtype", [f32, u8], ids=["f32", "u8"])
def test_im2col_staging(wave_device, dtype):
    """The staged path with several channel chunks (a 7x8 window), pixels not a multiple of the stage,
    and a window too large to stage a channel of (the one-output-a-step loop)."""
    dev = wave_device
    for shape, (kh, kw), pad in (((2, 6, 9, 10), (7, 8), 3), ((1, 3, 17, 18), (16, 17), 1),
                                 ((2, 5, 11, 13), (3, 3), 1), ((1, 40, 6, 7), (3, 3), 2)):  # 3x3: unrolled taps
        x = values(dtype, shape)
        want = im2col_ref(x, (kh, kw), 1, pad, 1)
        xd = view(dev, x, "permuted")
        out = dev.empty(want.shape, dtype)
        own = conv.im2col_launch(shape[0], shape[1], want.shape[1], want.shape[2], kh, kw, dtype)
        for launch_shape in (own, (5, 256), (1, 1024), (2, 96), (3, 32)):
            launch(dev, f"im2col_{dtype.tag}", out.size, out.size, want.shape[1], want.shape[2], kh, kw, 1, pad, 1,
                   info_of(dev, xd), xd, out, shape=launch_shape)
            assert_bits(out.to_host(), want, f"im2col {shape} {kh}x{kw} launch {launch_shape}")
    for shape, k, pad in (((2, 40, 30), 9, 4), ((1, 3, 310), 300, 2)):  # im2col1d: 2 chunks; unstageable (f32)
        x = values(dtype, shape)
        want = im2col_ref(x, (k,), 1, pad, 1)
        xd = view(dev, x, "offset")
        out = dev.empty(want.shape, dtype)
        threads = shape[0] * want.shape[1] * shape[1]
        own = conv.im2col_launch(shape[0], shape[1], 1, want.shape[1], 1, k, dtype)
        for launch_shape in (own, (1, 1024), (2, 96), (3, 32)):
            launch(dev, f"im2col1d_{dtype.tag}", threads, threads, want.shape[1], k, 1, pad, 1, info_of(dev, xd), xd,
                   out, shape=launch_shape)
            assert_bits(out.to_host(), want, f"im2col1d {shape} k={k} launch {launch_shape}")


ROWS_IDS = [t.tag for t in conv.ROWS_IM2COL_DTYPES]


@pytest.mark.parametrize("dtype", conv.ROWS_IM2COL_DTYPES, ids=ROWS_IDS)
def test_im2col_rows(wave_device, dtype):
    """The wrappers' own ``im2col_rows_*`` / ``im2col1d_rows_*`` (candle's im2col / im2col1d semantics):
    channels past one chunk (a partial last chunk), rows past one item's pixels (several w tiles, a
    partial last one), stride and dilation above 1, padding of the kernel's size or more, 1x1 and 7x5
    windows, a run not a whole number of vectors (unaligned rows: the one-element path), contiguous and
    strided layouts; under the wrappers' grid (``im2col_rows_*``: capped, so a block loops over items
    and the pipeline fills the next while writing the current), fewer blocks than items, blocks of 32
    and 96 threads."""
    dev = wave_device
    cases2 = [((2, 40, 9, 70), (3, 3), 1, 1, 1), ((1, 70, 12, 11), (3, 3), 2, 1, 1), ((2, 9, 8, 9), (1, 1), 1, 0, 1),
              ((1, 6, 13, 140), (7, 5), 1, 3, 2), ((2, 3, 6, 7), (3, 3), 1, 4, 1), ((1, 33, 5, 5), (2, 3), 3, 2, 1)]
    # contiguous, an even width: the 16-bit pair fill (odd and even padding, strides 2 and 3, a source
    # pair's column before the window's first, an odd run: the element write beside it)
    pairs2 = [((1, 70, 12, 12), (3, 3), 2, 1, 1), ((2, 13, 6, 10), (3, 3), 1, 2, 2), ((1, 5, 6, 8), (3, 3), 1, 1, 1),
              ((2, 9, 4, 130), (3, 3), 1, 1, 1), ((1, 8, 7, 16), (2, 5), 3, 3, 1)]
    for n, (shape, (kh, kw), stride, pad, dil) in enumerate(cases2 + pairs2):
        x = values(dtype, shape)
        want = im2col_ref(x, (kh, kw), stride, pad, dil)
        # contiguous and aligned: the word fill
        xd = view(dev, x, LAYOUTS[n % 3] if n % 2 and n < len(cases2) else "contiguous")
        h_out, w_out = want.shape[1:3]
        assert conv.im2col_rows_ok(xd, h_out, w_out, kh, kw, stride, pad, dil), (shape, kh, kw)
        own = conv.im2col_rows_launch(shape[0], shape[1], h_out, w_out, kh, kw, stride, dil, dtype, dev)
        for launch_shape in (own, (3, 288), (2, 96), (5, 32)):
            out = dev.empty(want.shape, dtype)
            launch(dev, f"im2col_rows_{dtype.tag}", out.size, out.size, h_out, w_out, kh, kw, stride, pad, dil,
                   info_of(dev, xd), xd, out, shape=launch_shape)
            assert_bits(out.to_host(), want, f"im2col_rows {shape} {kh}x{kw} s{stride} p{pad} d{dil} {launch_shape}")
        # the 16-bit pair fill (im2col_rows_pairs_*): where its host test holds, and nothing written elsewhere
        pairs = conv.im2col_rows_pairs_ok(xd, h_out, w_out, kh, kw, stride, pad, dil)
        assert pairs or n < len(cases2) or dtype not in conv.ROWS_PAIRS_DTYPES, (shape, n)
        if dtype in conv.ROWS_PAIRS_DTYPES:
            own = conv.im2col_rows_launch(shape[0], shape[1], h_out, w_out, kh, kw, stride, dil, dtype, dev, pairs=True)
            for launch_shape in (own, (3, 288), (2, 96), (5, 32)):
                out = dev.to_device(np.full(want.shape, 7, dtype.np))
                launch(dev, f"im2col_rows_pairs_{dtype.tag}", out.size, out.size, h_out, w_out, kh, kw, stride, pad,
                       dil, info_of(dev, xd), xd, out, shape=launch_shape)
                # (AMDGPU's im2col_rows_pairs_* is the one-stage im2col_rows: every layout)
                one_stage = conv.im2col_rows_params(dtype, dev.target, pairs=True)[1] == 1
                expect = want if pairs or one_stage else np.full(want.shape, 7, dtype.np)
                assert_bits(out.to_host(), expect, f"im2col_rows_pairs {shape} {kh}x{kw} s{stride} p{pad} d{dil} "
                                                   f"{launch_shape}")
    cases1 = [((2, 150, 300), 3, 1, 1, 1), ((1, 5, 90), 4, 2, 4, 3), ((2, 7, 33), 1, 1, 0, 1), ((1, 2, 700), 300, 1, 2, 1)]
    # contiguous, an even length: the 16-bit pair fill (odd and even padding, strides 2 and 3, dilation 2)
    pairs1 = [((2, 70, 130), 3, 1, 1, 1), ((1, 9, 64), 4, 2, 2, 2), ((2, 5, 40), 3, 3, 1, 1)]
    for n, (shape, k, stride, pad, dil) in enumerate(cases1 + pairs1):
        x = values(dtype, shape)
        want = im2col_ref(x, (k,), stride, pad, dil)
        xd = view(dev, x, LAYOUTS[(n + 1) % 3] if n % 2 and n < len(cases1) else "contiguous")
        l_out = want.shape[1]
        assert conv.im2col_rows_ok(xd, 1, l_out, 1, k, stride, pad, dil), (shape, k)
        threads = shape[0] * l_out * shape[1]
        own = conv.im2col_rows_launch(shape[0], shape[1], 1, l_out, 1, k, stride, dil, dtype, dev, one_d=True)
        for launch_shape in (own, (3, 288), (2, 96), (5, 32)):
            out = dev.empty(want.shape, dtype)
            launch(dev, f"im2col1d_rows_{dtype.tag}", threads, threads, l_out, k, stride, pad, dil, info_of(dev, xd),
                   xd, out, shape=launch_shape)
            assert_bits(out.to_host(), want, f"im2col1d_rows {shape} k{k} s{stride} p{pad} d{dil} {launch_shape}")
        # the 16-bit pair fill (im2col1d_rows_pairs_*): where its host test holds, and nothing written elsewhere
        pairs = conv.im2col_rows_pairs_ok(xd, 1, l_out, 1, k, stride, pad, dil)
        assert pairs or n < len(cases1) or dtype not in conv.ROWS_PAIRS_DTYPES, (shape, n)
        if dtype in conv.ROWS_PAIRS_DTYPES:
            own = conv.im2col_rows_launch(shape[0], shape[1], 1, l_out, 1, k, stride, dil, dtype, dev, one_d=True,
                                          pairs=True)
            one_stage_all = conv.im2col_rows_params(dtype, dev.target, True, True)[0]["extra"] == 0
            for launch_shape in (own, (3, 288), (2, 96), (5, 32)):
                out = dev.to_device(np.full(want.shape, 7, dtype.np))
                launch(dev, f"im2col1d_rows_pairs_{dtype.tag}", threads, threads, l_out, k, stride, pad, dil,
                       info_of(dev, xd), xd, out, shape=launch_shape)
                expect = want if pairs or one_stage_all else np.full(want.shape, 7, dtype.np)
                assert_bits(out.to_host(), expect, f"im2col1d_rows_pairs {shape} k{k} s{stride} p{pad} d{dil} "
                                                   f"{launch_shape}")


@pytest.mark.parametrize("dtype", conv.ROWS_IM2COL_DTYPES, ids=ROWS_IDS)
def test_im2col_rows_outside_its_domain(wave_device, dtype):
    """Where ``im2col_rows_ok`` (the host's copy of the kernels' test) fails, ``im2col1d_rows_*`` writes
    nothing (a 1x3000 window: a run past the column table) and the wrapper takes candle's kernel."""
    dev = wave_device
    x = values(dtype, (1, 2, 3100))
    xd = dev.to_device(x)
    want = im2col_ref(x, (3000,), 1, 0, 1)
    assert not conv.im2col_rows_ok(xd, 1, want.shape[1], 1, 3000, 1, 0, 1)
    out = dev.to_device(np.full(want.shape, 7, dtype.np))
    threads = want.shape[1] * 2
    launch(dev, f"im2col1d_rows_{dtype.tag}", threads, threads, want.shape[1], 3000, 1, 0, 1, info_of(dev, xd), xd,
           out, shape=(2, 288))
    assert (out.to_host() == np.full(want.shape, 7, dtype.np)).all()
    w = values(dtype, (3, 2, 3000))
    got = cl.conv1d(xd, dev.to_device(w))
    check_sum(got.to_host(), conv_ref(x, w, 1, 0, 1), conv_ref(absolute(x), absolute(w), 1, 0, 1), 6000, dtype,
              "conv1d through candle's im2col1d")


def col2im1d_ref(col, stride):
    """candle CPU's Col2Im1D: a sum in T over l_in ascending."""
    b, l_in, c_out, k = col.shape
    l_out = (l_in - 1) * stride + k
    im = np.zeros((b, c_out, l_out), col.dtype)
    for li in range(l_in):
        im[:, :, li * stride: li * stride + k] += col[:, li]
    return im


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_col2im1d(wave_device, dtype):
    run_col2im1d(wave_device, dtype)


def run_col2im1d(dev, dtype, module=CONV, name="col2im1d"):
    for n, (b, l_in, c_out, k, stride) in enumerate([(2, 5, 3, 3, 1), (1, 4, 2, 2, 3), (2, 7, 2, 4, 2), (1, 1, 3, 5, 2),
                                                       (1, 6, 2, 1, 1)]):
        col = values(dtype, (b, l_in, c_out, k))
        want = col2im1d_ref(col, stride)
        out = dev.empty(want.shape, dtype)
        launch(dev, f"{name}_{dtype.tag}", out.size, out.size, want.shape[2], l_in, c_out, k, stride,
               dev.to_device(col), out, small=n % 2 == 1, module=module)
        assert_bits(out.to_host(), want, f"col2im1d case {n}")


@pytest.mark.parametrize("dtype", conv.STAGED_COL2IM_DTYPES, ids=[t.tag for t in conv.STAGED_COL2IM_DTYPES])
def test_col2im1d_staged(wave_device, dtype):
    """The wrappers' own ``col2im1d_staged_*`` (candle's col2im1d semantics), first on test_col2im1d's
    cases, then its staged path over several work items: source positions past one item's span (about
    250 for a 4-tap kernel) with the overlap rows (k - 1) // stride between items, channels past one
    chunk (a partial last chunk), stride larger than the kernel (outputs with no tap), a one-tap
    kernel, source positions an exact multiple of the span (the last item owns the outputs past its
    span); the wrappers' grid (``col2im1d_launch``), fewer blocks than items, candle's launch, one block
    of 64; and a kernel too long for a staged tile (the loop path)."""
    dev = wave_device
    run_col2im1d(dev, dtype, name="col2im1d_staged")
    chunk = min(6, max(conv.COL_ROW_BYTES // dtype.nbytes // 4, 1))
    span = conv.COL_STAGE_BYTES // dtype.nbytes // (chunk * 4 | 1) - 1  # (b, l_in, 6, 4, 3)'s: l_in a multiple of it
    for n, (b, l_in, c_out, k, stride) in enumerate([(2, 600, 10, 4, 2), (1, 530, 3, 3, 1), (1, 700, 5, 2, 5),
                                                       (2, 520, 9, 1, 1), (1, 2 * span, 6, 4, 3), (1, 40, 2, 200, 1)]):
        col = values(dtype, (b, l_in, c_out, k))
        want = col2im1d_ref(col, stride)
        src = dev.to_device(col)
        launches = [conv.col2im1d_launch(b, l_in, c_out, k, stride, dtype), (3, 256), None, (1, 64)]
        for shape in launches:
            out = dev.empty(want.shape, dtype)
            launch(dev, f"col2im1d_staged_{dtype.tag}", out.size, out.size, want.shape[2], l_in, c_out, k, stride, src,
                   out, shape=shape)
            assert_bits(out.to_host(), want, f"col2im1d staged case {n} launch {shape}")


@pytest.mark.parametrize("dtype", conv.ROWS_COL2IM_DTYPES, ids=[t.tag for t in conv.ROWS_COL2IM_DTYPES])
def test_col2im1d_rows(wave_device, dtype):
    """The wrappers' own ``col2im1d_rows_*`` (candle's col2im1d semantics), where ``col2im1d_rows_ok``
    holds: source positions past one item's span with the overlap rows (k - 1) // stride between
    items, channels past one chunk (a partial last chunk), stride larger than the kernel (outputs
    with no tap), one- and two-tap outputs, source positions an exact multiple of the span (the last
    item owns the outputs past it), output rows starting and ending off an 8-byte word (the outputs
    before and after the whole words), dst itself off a word (every output one at a time);
    under the wrappers' grid (``col2im1d_rows_launch``), fewer blocks than items and one block of 64.
    Outputs poisoned with NaN first: every one must be written."""
    dev = wave_device
    _, span = conv.col2im1d_rows_plan(6, 4, 3, dtype, **conv.col2im1d_rows_params(dtype, dev.target))
    for n, (b, l_in, c_out, k, stride) in enumerate([(2, 300, 10, 4, 2), (1, 130, 6, 2, 5), (1, 5, 2, 2, 1),
                                                       (2, 200, 40, 4, 2), (1, 2 * span, 6, 4, 3), (1, 7, 4, 3, 2),
                                                       (3, 90, 12, 2, 2)]):
        col = values(dtype, (b, l_in, c_out, k))
        want = col2im1d_ref(col, stride)
        src = dev.to_device(col)
        assert conv.col2im1d_rows_ok(src, l_in, c_out, k, stride, want.shape[2]), (n, dtype)
        for shape in (conv.col2im1d_rows_launch(b, l_in, c_out, k, stride, dtype, dev.target), (3, 256), (1, 64)):
            out = dev.to_device(np.full(want.shape, np.nan, dtype.np))
            launch(dev, f"col2im1d_rows_{dtype.tag}", out.size, out.size, want.shape[2], l_in, c_out, k, stride, src,
                   out, shape=shape)
            assert_bits(out.to_host(), want, f"col2im1d rows case {n} launch {shape}")
        # dst one element past an 8-byte boundary: every output by the one-at-a-time path
        buf = dev.to_device(np.full(want.size + 1, np.nan, dtype.np))
        out = buf.as_strided(want.shape, tuple(int(np.prod(want.shape[d + 1:])) for d in range(3)), offset=1)
        launch(dev, f"col2im1d_rows_{dtype.tag}", out.size, out.size, want.shape[2], l_in, c_out, k, stride, src,
               storage(out), shape=(3, 256))
        assert_bits(buf.to_host()[1:].reshape(want.shape), want, f"col2im1d rows case {n}, dst off a word")


@pytest.mark.parametrize("dtype", conv.ROWS_COL2IM_DTYPES, ids=[t.tag for t in conv.ROWS_COL2IM_DTYPES])
def test_col2im1d_rows_outside_its_domain(wave_device, dtype):
    """Where ``col2im1d_rows_ok`` fails (an output of more taps than COLR_TAPS, a source row not whole
    8-byte words, a source off an 8-byte boundary, an l_out not candle's), the kernel writes nothing."""
    dev = wave_device
    for n, (b, l_in, c_out, k, stride, off, extra) in enumerate([(1, 20, 4, 5, 2, 0, 0), (1, 20, 3, 1, 1, 0, 0),
                                                                 (1, 20, 4, 4, 2, 1, 0), (1, 20, 4, 4, 2, 0, 1)]):
        col = values(dtype, (b, l_in, c_out, k))
        buf = dev.to_device(np.concatenate([np.zeros(off, col.dtype), col.reshape(-1)]))
        src = buf.as_strided(col.shape, tuple(int(np.prod(col.shape[d + 1:])) for d in range(4)), offset=off)
        l_out = (l_in - 1) * stride + k + extra
        assert not conv.col2im1d_rows_ok(src, l_in, c_out, k, stride, l_out), n
        out = dev.to_device(np.full((b, c_out, l_out), np.nan, dtype.np))
        launch(dev, f"col2im1d_rows_{dtype.tag}", out.size, out.size, l_out, l_in, c_out, k, stride, src, out,
               shape=conv.col2im1d_rows_launch(b, l_in, c_out, k, stride, dtype, dev.target))
        assert np.isnan(out.to_host().astype(np.float32)).all(), n


# ---- pools ------------------------------------------------------------------------------------------
POOL_CASES = [  # (shape, (k2, k3), (s2, s3)): windows meeting the edges, strides past the window, 1x1
    ((2, 3, 7, 9), (2, 3), (2, 3)),
    ((1, 2, 6, 5), (3, 2), (1, 1)),
    ((2, 1, 9, 8), (2, 2), (4, 3)),
    ((1, 2, 5, 4), (1, 1), (2, 1)),
    ((2, 3, 10, 20), (2, 2), (2, 2)),  # the rows path's 2x2 and 3x3 windows (several tiles a row)
    ((1, 2, 9, 23), (3, 3), (2, 1)),
    ((2, 2, 8, 12), (2, 2), (2, 2)),  # contiguous: the 2x2 windows read as words
    ((1, 1, 7, 7), (3, 3), (1, 3)),
    ((1, 2, 3, 4), (4, 2), (1, 1)),  # window taller than the input: empty
]


def pool_windows(x, k, s):
    """(b, c, o2, o3, k2*k3) windows in the kernels' order (dim-2 offset outer)."""
    o2 = (x.shape[2] - k[0]) // s[0] + 1 if x.shape[2] >= k[0] else 0
    o3 = (x.shape[3] - k[1]) // s[1] + 1 if x.shape[3] >= k[1] else 0
    out = np.zeros(x.shape[:2] + (o2, o3, k[0] * k[1]), x.dtype)
    for a in range(k[0]):
        for c in range(k[1]):
            out[..., a * k[1] + c] = x[:, :, a: a + s[0] * (o2 - 1) + 1: s[0], c: c + s[1] * (o3 - 1) + 1: s[1]][:, :, :o2, :o3]
    return out


def avg_pool_ref(x, k, s, dtype):
    win = pool_windows(x, k, s)
    acc_t = np.float32 if dtype in (f16, bf16) else x.dtype.type
    acc = np.zeros(win.shape[:-1], acc_t)
    for j in range(win.shape[-1]):
        acc = (acc + win[..., j].astype(acc_t)).astype(acc_t)
    count = k[0] * k[1]
    if dtype.is_int:
        return (acc // acc_t(count)).astype(x.dtype)
    return (acc * (acc_t(1.0) / acc_t(count))).astype(x.dtype)


def max_pool_ref(x, k, s):
    win = pool_windows(x, k, s)
    best = win[..., 0]
    with np.errstate(invalid="ignore"):  # NaN < v is False, as in the kernels' fold
        for j in range(1, win.shape[-1]):
            best = np.where(best < win[..., j], win[..., j], best)
    return best


@pytest.mark.parametrize("op", ["avg_pool2d", "max_pool2d"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_pools(wave_device, dtype, op):
    run_pools(wave_device, dtype, op)


def run_pools(dev, dtype, op, module=CONV):
    for n, (shape, k, s) in enumerate(POOL_CASES):
        x = values(dtype, shape)
        if dtype.is_float:
            x.reshape(-1)[3] = np.nan  # max: a NaN in the middle of a window is skipped; first in a window kept
            x.reshape(-1)[0] = np.nan
        want = avg_pool_ref(x, k, s, dtype) if op == "avg_pool2d" else max_pool_ref(x, k, s)
        xd = view(dev, x, LAYOUTS[n % 3])
        out = dev.empty(want.shape, dtype)
        # candle's Pool2D{w_k: k.0, h_k: k.1, w_stride: s.0, h_stride: s.1}: its "w" is dim 2
        launch(dev, f"{op}_{dtype.tag}", max(1, out.size), x.size, k[0], k[1], s[0], s[1], info_of(dev, xd), xd, out,
               small=n % 2 == 1, module=module)
        assert_bits(out.to_host(), want, f"{op} case {n}")


@pytest.mark.parametrize("op", ["avg_pool2d", "max_pool2d"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_pool_2x2_adjacent_windows(wave_device, dtype, op):
    """2x2 windows with stride 2 along dim 3 over contiguous rows (``pool_rows_vec`` for 16- and 32-bit
    types, each output's window rows read as words of a vector tile): widths around the tiles, odd
    widths (the last column unused), rows 0 or 2 elements past an aligned address, strides 1-3 along
    dim 2, NaNs first in a window and inside one; candle's launch and one block of 64."""
    dev = wave_device
    for n, (shape, s2, start) in enumerate([((1, 1, 2, 2), 2, 0), ((2, 3, 4, 16), 2, 0), ((1, 2, 5, 33), 1, 2),
                                            ((2, 1, 7, 64), 3, 0), ((1, 2, 6, 18), 2, 2), ((1, 1, 3, 130), 2, 0)]):
        x = values(dtype, shape)
        if dtype.is_float:
            x.reshape(-1)[0] = np.nan
            x.reshape(-1)[shape[3] + 1] = np.nan
        buf = np.zeros(start + x.size, x.dtype)
        buf[start:] = x.reshape(-1)
        xd = dev.to_device(buf).as_strided(shape, [int(np.prod(shape[d + 1:])) for d in range(4)], offset=start)
        want = avg_pool_ref(x, (2, 2), (s2, 2), dtype) if op == "avg_pool2d" else max_pool_ref(x, (2, 2), (s2, 2))
        for small in (False, True):
            out = dev.empty(want.shape, dtype)
            launch(dev, f"{op}_{dtype.tag}", max(1, out.size), x.size, 2, 2, s2, 2, info_of(dev, xd), xd, out,
                   small=small)
            assert_bits(out.to_host(), want, f"{op} adjacent case {n} small={small}")
        if not conv.pool_vec_ok(xd, (2, 2), (s2, 2), want.size):  # 16- and 32-bit types; rows of even pitch
            assert dtype not in conv.VEC_POOL_DTYPES or shape[3] % 2, f"case {n}"
            continue
        # the wrappers' own kernel of this path: under the wrappers' grid, one block of 64, three of 32
        rows = (shape[0] * shape[1] * want.shape[2], want.shape[3])
        for grid in (conv.rows_launch(*rows, dtype, dev), (1, 64), (3, 32)):
            out = dev.empty(want.shape, dtype)
            launch(dev, f"{op}_vec_{dtype.tag}", 0, x.size, 2, 2, s2, 2, info_of(dev, xd), xd, out, shape=grid)
            assert_bits(out.to_host(), want, f"{op}_vec adjacent case {n} grid {grid}")
        assert_bits(getattr(cl, op)(xd, 2, stride=(s2, 2)).to_host(), want, f"{op} wrapper adjacent case {n}")


@pytest.mark.parametrize("op", ["avg_pool2d", "max_pool2d"])
@pytest.mark.parametrize("dtype", conv.VEC_POOL_DTYPES, ids=[t.tag for t in conv.VEC_POOL_DTYPES])
def test_pool_vec_outside_its_domain(wave_device, dtype, op):
    """``{op}_vec_*`` writes nothing where ``pool_vec_ok`` (the host's copy of its test) fails, and the
    wrappers then take candle's kernel: a 3-wide window, a stride of 1 along dim 3, a row starting an
    odd element past an aligned address, and rows not contiguous along dim 3."""
    dev = wave_device
    x = values(dtype, (2, 3, 8, 12))
    base = dev.to_device(np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)]))
    odd = base.as_strided(x.shape, [288, 96, 12, 1], offset=1)
    for n, (xd, k, s) in enumerate([(dev.to_device(x), (2, 3), (2, 3)), (dev.to_device(x), (2, 2), (2, 1)),
                                    (odd, (2, 2), (2, 2)), (view(dev, x, "permuted"), (2, 2), (2, 2))]):
        want = avg_pool_ref(x, k, s, dtype) if op == "avg_pool2d" else max_pool_ref(x, k, s)
        assert not conv.pool_vec_ok(xd, k, s, want.size)
        poison = np.full(want.shape, 7, dtype.np)
        out = dev.to_device(poison)
        launch(dev, f"{op}_vec_{dtype.tag}", 0, x.size, k[0], k[1], s[0], s[1], info_of(dev, xd), xd, out,
               shape=(2, 64))
        assert_bits(out.to_host(), poison, f"{op}_vec case {n}: nothing written")
        assert_bits(getattr(cl, op)(xd, k, stride=s).to_host(), want, f"{op} wrapper case {n}")


# ---- upsampling -------------------------------------------------------------------------------------
UPSAMPLE_CASES = [((2, 3, 4, 5), (8, 10)), ((1, 2, 5, 3), (7, 4)), ((1, 1, 6, 6), (3, 4)), ((2, 1, 1, 3), (1, 7)),
                  ((1, 2, 3, 3), (3, 3)), ((2, 2, 5, 9), (11, 37))]


def nearest_ref(x, out2, out3):
    s2, s3 = x.shape[2] / out2, x.shape[3] / out3
    i2 = np.minimum(x.shape[2] - 1, (np.arange(out2) * s2).astype(np.int64))
    i3 = np.minimum(x.shape[3] - 1, (np.arange(out3) * s3).astype(np.int64))
    return x[:, :, i2][:, :, :, i3]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_upsample_nearest2d(wave_device, dtype):
    run_upsample_nearest2d(wave_device, dtype)


def run_upsample_nearest2d(dev, dtype, module=CONV):
    for n, (shape, (o2, o3)) in enumerate(UPSAMPLE_CASES):
        x = values(dtype, shape)
        want = nearest_ref(x, o2, o3)
        xd = view(dev, x, LAYOUTS[n % 3])
        out = dev.empty(want.shape, dtype)
        launch(dev, f"upsample_nearest2d_{dtype.tag}", out.size, o2, o3, shape[2] / o2, shape[3] / o3,
               info_of(dev, xd), xd, out, small=n % 2 == 0, module=module)
        assert_bits(out.to_host(), want, f"upsample_nearest2d case {n}")


@pytest.mark.parametrize("factor", (2, 4))
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_upsample_nearest2d_exact_factor(wave_device, dtype, factor):
    """The exact-factor path (``nearest_int_rows``: rows contiguous along dim 3, both scales 1 / factor):
    widths around the 16-byte tiles, rows starting 0-3 elements past an aligned address (the tiles'
    unaligned loop), a non-unit row stride, candle's launch and one block of 64; a case whose dim 3 is
    strided, which takes the table path; and the wrapper's launch (``nearest_launch``)."""
    dev = wave_device
    for n, (shape, start) in enumerate([((1, 1, 1, 1), 0), ((2, 3, 3, 8), 0), ((1, 2, 4, 17), 1), ((2, 1, 5, 64), 3),
                                        ((1, 3, 2, 33), 2), ((1, 1, 3, 40), 0)]):
        x = values(dtype, shape)
        xd = pitched(dev, x, shape[3] + (n % 2) * 3, start)  # every other case: rows farther apart than wide
        o2, o3 = factor * shape[2], factor * shape[3]
        want = nearest_ref(x, o2, o3)
        for small in (False, True):
            out = dev.empty(want.shape, dtype)
            launch(dev, f"upsample_nearest2d_{dtype.tag}", out.size, o2, o3, 1 / factor, 1 / factor, info_of(dev, xd),
                   xd, out, small=small)
            assert_bits(out.to_host(), want, f"upsample_nearest2d {factor}x case {n} small={small}")
        assert_bits(cl.upsample_nearest2d(xd, (o2, o3)).to_host(), want, f"wrapper {factor}x case {n}")
    x = values(dtype, (2, 2, 3, 5))
    xd = view(dev, x, "offset")
    out = dev.empty((2, 2, 3 * factor, 5 * factor), dtype)
    launch(dev, f"upsample_nearest2d_{dtype.tag}", out.size, 3 * factor, 5 * factor, 1 / factor, 1 / factor,
           info_of(dev, xd), xd, out)
    assert_bits(out.to_host(), nearest_ref(x, 3 * factor, 5 * factor), f"upsample_nearest2d {factor}x strided")


def bilinear_axis(n_in, n_out, align_corners, scale_factor):
    """PyTorch's source indices and weights along one axis (area_pixel_compute_scale / source_index)."""
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else n_in / n_out
    o = np.arange(n_out, dtype=np.float64)
    src = scale * o if align_corners else np.maximum(scale * (o + 0.5) - 0.5, 0.0)
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = np.clip(src - i0, 0.0, 1.0)
    return i0, i1, lam


def bilinear_ref(x, oh, ow, align_corners, scale_h=None, scale_w=None):
    h0, h1, lh = bilinear_axis(x.shape[2], oh, align_corners, scale_h)
    w0, w1, lw = bilinear_axis(x.shape[3], ow, align_corners, scale_w)
    v = x.astype(np.float64)
    lh, lw = lh[:, None], lw[None, :]
    top = (1.0 - lw) * v[:, :, h0][:, :, :, w0] + lw * v[:, :, h0][:, :, :, w1]
    bottom = (1.0 - lw) * v[:, :, h1][:, :, :, w0] + lw * v[:, :, h1][:, :, :, w1]
    return from_f64((1.0 - lh) * top + lh * bottom, x.dtype)


def from_f64(r: np.ndarray, dtype) -> np.ndarray:
    """f64 rounded once to ``dtype`` (NumPy's f64 -> bf16 goes through f32 and may round twice): f32
    by round-to-odd first, whose one rounding to the narrow type is then exact."""
    if dtype not in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
        return r.astype(dtype)
    f = r.astype(np.float32)
    toward_zero = np.where(np.abs(f.astype(np.float64)) > np.abs(r), np.nextafter(f, np.float32(0)), f)
    odd = np.where(toward_zero.astype(np.float64) != r, (toward_zero.view(np.uint32) | 1).view(np.float32), toward_zero)
    return odd.astype(dtype)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_upsample_bilinear2d(wave_device, dtype, align_corners):
    run_upsample_bilinear2d(wave_device, dtype, align_corners)


def run_upsample_bilinear2d(dev, dtype, align_corners, module=CONV):
    for n, (shape, (oh, ow)) in enumerate(UPSAMPLE_CASES):
        for scales in ((None, None), (2.5, None), (None, 0.75), (1.5, 3.0)):
            x = values(dtype, shape)
            want = bilinear_ref(x, oh, ow, align_corners, *scales)
            xd = view(dev, x, LAYOUTS[n % 3])
            out = dev.empty(want.shape, dtype)
            sh, sw = scales
            launch(dev, f"upsample_bilinear2d_{dtype.tag}", out.size, ow, oh, align_corners, sh is not None, sh or 0.0,
                   sw is not None, sw or 0.0, info_of(dev, xd), xd, out, small=n % 2 == 1, module=module)
            assert_bits(out.to_host(), want, f"upsample_bilinear2d case {n} scales {scales}")


@pytest.mark.parametrize("factor", [2, 4])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_upsample_bilinear2d_exact_factor(wave_device, dtype, factor):
    """The wrappers' kernels for exactly 2x and 4x (``upsample_bilinear2d_{2,4}x_*``,
    ``bilinear_int_rows``: scales 1 / F, half-pixel centres, rows contiguous along w in whole words of
    16 / F bytes) beside candle's kernel on the same inputs: one source row and one column word, two
    rows, odd heights (units of 2 and 4 source rows cut short), widths of one to several words a lane,
    rows farther apart than their width, an offset source, infinities and NaN at the edges (the
    clamped first and last columns and rows still multiply their zero weights), under the wrappers'
    grid and one block of 64, and the wrapper; the kernel on a dst off 16 bytes writes nothing; and 2x
    cases outside the path (a width not whole words, a scale factor not exactly 2, aligned corners),
    which the wrapper sends to candle's kernel."""
    from stdlib_kernels import conv_launch as cl
    dev = wave_device
    per = max(1, 16 // factor // dtype.nbytes)
    own = dtype in conv.BILINEAR_INT_DTYPES
    f = factor
    for n, (b, c, h, w, start) in enumerate([(1, 1, 1, per, 0), (2, 3, 2, 2 * per, 0), (1, 2, 5, 3 * per, per),
                                             (2, 1, 7, 8 * per, 0), (1, 1, 3, 16 * per + per, 2 * per)]):
        x = values(dtype, (b, c, h, w))
        if not dtype.is_int and n >= 3:
            x[0, 0, 0, 0], x[0, 0, -1, -1], x[-1, -1, 1, 0] = np.inf, -np.inf, np.nan
        xd = pitched(dev, x, w + (n % 2) * per, start)  # every other case: rows farther apart than wide
        want = bilinear_ref(x, f * h, f * w, False)
        assert conv.bilinear_int_factor(xd, f * h, f * w, (None, float(f)), False) == (f if own else 0)
        for name in [f"upsample_bilinear2d_{dtype.tag}"] + ([f"upsample_bilinear2d_{f}x_{dtype.tag}"] if own else []):
            for shape in ((1, 64), conv.bilinear_int_launch(xd, f)):
                out = dev.to_device(np.full(want.shape, 7, dtype.np))
                launch(dev, name, out.size, f * w, f * h, False, False, 0.0, False, 0.0, info_of(dev, xd), xd, out,
                       shape=shape)
                assert_bits(out.to_host(), want, f"{name} case {n} launch {shape}")
        assert_bits(cl.upsample_bilinear2d(xd, scale_factor=float(f)).to_host(), want, f"bilinear wrapper {f}x case {n}")
        if own:  # dst one element past a 16-byte boundary: outside the kernel's domain
            buf_out = dev.to_device(np.full(want.size + 1, 7, dtype.np))
            out = buf_out.as_strided(want.shape, tuple(int(np.prod(want.shape[d + 1:])) for d in range(4)), offset=1)
            launch(dev, f"upsample_bilinear2d_{f}x_{dtype.tag}", out.size, f * w, f * h, False, False, 0.0, False, 0.0,
                   info_of(dev, xd), xd, storage(out), shape=(1, 64))
            assert (buf_out.to_host() == np.array(7, dtype.np)).all(), f"{f}x kernel wrote outside its domain {n}"
    if factor != 2:
        return
    per = max(1, 8 // dtype.nbytes)
    x = values(dtype, (2, 2, 3, 2 * per + 1))
    for align, scales in ((False, (None, None)), (False, (2.0000001, 2.0)), (True, (None, None))):
        want = bilinear_ref(x, 6, 4 * per + 2, align, *((None, None) if align else scales))
        out = dev.empty(want.shape, dtype)
        sh, sw = scales
        launch(dev, f"upsample_bilinear2d_{dtype.tag}", out.size, 4 * per + 2, 6, align, sh is not None, sh or 0.0,
               sw is not None, sw or 0.0, info_of(dev, dev.to_device(x)), dev.to_device(x), out)
        assert_bits(out.to_host(), want, f"bilinear 2x outside the path align={align} scales={scales}")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_upsample_bilinear2d_down2x(wave_device, dtype):
    """The wrappers' kernel for exactly half (``upsample_bilinear2d_down2x_*``, ``bilinear_down2x_rows``:
    both scales 2, half-pixel centres, rows contiguous along w in whole pairs) beside candle's kernel on
    the same inputs: 2x2 to wide sources, odd output widths (the tiles' last elements one at a time),
    rows farther apart than their width, an offset source, infinities and NaN, under the wrappers' grid
    and one block of 64, and the wrapper (by size and by scale factor 0.5); then inputs outside the
    path (an odd offset, an odd source width, aligned corners, a scale factor not exactly 0.5), where
    the kernel writes nothing and the wrapper takes candle's kernel."""
    from stdlib_kernels import conv_launch as cl
    dev = wave_device
    own = dtype in conv.BILINEAR_INT_DTYPES
    for n, (b, c, h, w, start) in enumerate([(1, 1, 2, 2, 0), (2, 3, 4, 6, 0), (1, 2, 6, 18, 2), (2, 1, 8, 34, 0),
                                             (1, 1, 4, 66, 4)]):
        x = values(dtype, (b, c, h, w))
        if not dtype.is_int and n >= 3:
            x[0, 0, 0, 0], x[0, 0, -1, -1], x[-1, -1, 1, 0] = np.inf, -np.inf, np.nan
        xd = pitched(dev, x, w + (n % 2) * 2, start)  # every other case: rows farther apart than wide
        want = bilinear_ref(x, h // 2, w // 2, False)
        assert conv.bilinear_down2x_ok(xd, h // 2, w // 2, (None, None), False) == own
        for name in [f"upsample_bilinear2d_{dtype.tag}"] + ([f"upsample_bilinear2d_down2x_{dtype.tag}"] if own else []):
            for shape in ((1, 64), conv.rows_launch(b * c * (h // 2), w // 2, dtype, dev)):
                out = dev.to_device(np.full(want.shape, 7, dtype.np))
                launch(dev, name, out.size, w // 2, h // 2, False, False, 0.0, False, 0.0, info_of(dev, xd), xd, out,
                       shape=shape)
                assert_bits(out.to_host(), want, f"{name} case {n} launch {shape}")
        assert_bits(cl.upsample_bilinear2d(xd, size=(h // 2, w // 2)).to_host(), want, f"bilinear wrapper /2 case {n}")
        assert_bits(cl.upsample_bilinear2d(xd, scale_factor=0.5).to_host(), want, f"bilinear wrapper x0.5 case {n}")
    x = values(dtype, (2, 2, 6, 10))
    odd = dev.to_device(np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)])).as_strided(x.shape, (120, 60, 10, 1),
                                                                                          offset=1)
    for xd, align, scales, size in ((odd, False, (None, None), (3, 5)), (dev.to_device(x), True, (None, None), (3, 5)),
                                    (dev.to_device(x), False, (0.5000001, 0.5), None),
                                    (dev.to_device(values(dtype, (1, 2, 4, 9))), False, (None, None), (2, 4))):
        oh, ow = size or (3, 5)
        ref = bilinear_ref(xd.to_host(), oh, ow, align, *((None, None) if size else scales))
        if own:
            assert not conv.bilinear_down2x_ok(xd, oh, ow, scales, align)
            out = dev.to_device(np.full(ref.shape, 7, dtype.np))
            sh, sw = scales
            launch(dev, f"upsample_bilinear2d_down2x_{dtype.tag}", out.size, ow, oh, align, sh is not None, sh or 0.0,
                   sw is not None, sw or 0.0, info_of(dev, xd), xd, out, shape=(1, 64))
            assert (out.to_host() == np.array(7, dtype.np)).all(), f"down2x wrote outside its domain {align} {scales}"
        got = (cl.upsample_bilinear2d(xd, size=size, align_corners=align) if size
               else cl.upsample_bilinear2d(xd, scale_factor=scales))
        assert_bits(got.to_host(), ref, f"bilinear wrapper outside the down2x path {align} {scales} {size}")


@pytest.mark.parametrize("align_corners", [False, True])
def test_upsample_bilinear2d_row_tiles(wave_device, align_corners):
    """Upscales by 1.3 to 4.5 and a downscale (``bilinear_row_tiles``: 16, 4, 1 and 2 tiles a thread,
    and so 1 to 4 threads a row) and a source taller than the tables, under the wrappers' launch and
    candle's."""
    from stdlib_kernels import conv_launch as cl
    cases = (((2, 3, 7, 8), (31, 12)), ((1, 2, 10, 4), (13, 8)), ((1, 2, 30, 8), (11, 4)), ((1, 1, 1100, 3), (1201, 8)))
    for n, (shape, (oh, ow)) in enumerate(cases):
        for dtype in (f32, bf16):
            x = values(dtype, shape)
            want = bilinear_ref(x, oh, ow, align_corners)
            xd = view(wave_device, x, LAYOUTS[n % 2])
            out = wave_device.empty(want.shape, dtype)
            launch(wave_device, f"upsample_bilinear2d_{dtype.tag}", out.size, ow, oh, align_corners, False, 0.0, False,
                   0.0, info_of(wave_device, xd), xd, out)
            assert_bits(out.to_host(), want, f"bilinear {shape} -> {oh}x{ow} {dtype}")
            assert_bits(cl.upsample_bilinear2d(xd, size=(oh, ow), align_corners=align_corners).to_host(), want,
                        f"bilinear wrapper {shape} -> {oh}x{ow} {dtype}")


# ---- the module -------------------------------------------------------------------------------------
def test_abi():
    """candle's 66 names with candle's sizes, plus the wrappers' own ``col2im1d_staged_*``,
    ``col2im1d_rows_*``, ``{max,avg}_pool2d_vec_*``, ``im2col_rows_*`` / ``im2col1d_rows_*``,
    ``im2col_rows_pairs_*`` / ``im2col1d_rows_pairs_*``, ``im2col_3x3_*`` / ``im2col1d_k3[_narrow]_*``,
    ``upsample_bilinear2d_{2,4}x_*`` and ``upsample_bilinear2d_down2x_*`` (each with its candle kernel's
    signature)."""
    assert abi_mismatches(CONV) == []
    own = [("col2im1d_staged", "col2im1d", t) for t in conv.STAGED_COL2IM_DTYPES]
    own += [(f"{op}_vec", op, t) for op in ("max_pool2d", "avg_pool2d") for t in conv.VEC_POOL_DTYPES]
    own += [(f"{op}_rows", op, t) for op in ("im2col", "im2col1d") for t in conv.ROWS_IM2COL_DTYPES]
    own += [("col2im1d_rows", "col2im1d", t) for t in conv.ROWS_COL2IM_DTYPES]
    own += [(f"{op}_rows_pairs", op, t) for op in ("im2col", "im2col1d") for t in conv.ROWS_PAIRS_DTYPES]
    own += [(name, op, t) for name, op in (("im2col_3x3", "im2col"), ("im2col1d_k3", "im2col1d"),
                                           ("im2col1d_k3_narrow", "im2col1d")) for t in conv.VEC_DTYPES]
    own += [(f"upsample_bilinear2d_{f}x", "upsample_bilinear2d", t) for f in conv.BILINEAR_INT_FACTORS
            for t in conv.BILINEAR_INT_DTYPES]
    own += [("upsample_bilinear2d_down2x", "upsample_bilinear2d", t) for t in conv.BILINEAR_INT_DTYPES]
    names = sorted(kernel_name(name, t) for name, _, t in own)
    assert sorted(CONV.names()) == sorted(list(json.loads(ABI.read_text())["modules"]["conv"]) + names)
    assert len(CONV) == 66 + len(own)
    target = pk.device("cpu").target
    for name, candle, t in own:
        sizes = [ty.nbytes for _, ty in CONV.get(kernel_name(name, t)).typed(target).params]
        assert sizes == [ty.nbytes for _, ty in CONV.get(kernel_name(candle, t)).typed(target).params]


# ---- the wrappers (stdlib_kernels/conv_launch.py) -------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_wrapper_convolutions(wave_device, dtype):
    """conv1d/conv2d through im2col + GEMM + the permuting copy (direct kernels for f64/u8/u32),
    conv_transpose1d through GEMM + col2im1d or the direct kernel, conv_transpose2d direct."""
    dev = wave_device
    for n, (b, ci, s, co, k, stride, pad, dil) in enumerate(CONV_CASES[:5]):
        x, w = values(dtype, (b, ci, s)), values(dtype, (co, ci, k))
        got = cl.conv1d(view(dev, x, LAYOUTS[n % 3]), view(dev, w, LAYOUTS[(n + 1) % 3]), stride, pad, dil)
        check_sum(got.to_host(), conv_ref(x, w, stride, pad, dil),
                  conv_ref(absolute(x), absolute(w), stride, pad, dil), ci * k, dtype, f"conv1d wrapper case {n}")
        x2, w2 = values(dtype, (b, ci, s, s + 1)), values(dtype, (co, ci, k, k))
        got = cl.conv2d(view(dev, x2, LAYOUTS[(n + 1) % 3]), view(dev, w2, LAYOUTS[n % 3]), stride, pad, dil)
        check_sum(got.to_host(), conv_ref(x2, w2, stride, pad, dil),
                  conv_ref(absolute(x2), absolute(w2), stride, pad, dil), ci * k * k, dtype, f"conv2d wrapper case {n}")
    for n, (b, ci, s, co, k, stride, pad, opad, dil) in enumerate(CONVT_CASES + [(2, 3, 6, 2, 3, 2, 0, 0, 1)]):
        x, w = values(dtype, (b, ci, s)), values(dtype, (ci, co, k))
        w_layout = LAYOUTS[n % 2 * 2]
        got = cl.conv_transpose1d(view(dev, x, LAYOUTS[n % 3]), view(dev, w, w_layout), stride, pad, opad, dil)
        # the GEMM + col2im1d path rounds each tap's sum to T and adds at most ceil(k / stride) of them in T
        col2im = dtype in GEMM_DTYPES and w_layout == "contiguous" and (pad, opad, dil) == (0, 0, 1)
        check_sum(got.to_host(), conv_transpose_ref(x, w, stride, pad, opad, dil),
                  conv_transpose_ref(absolute(x), absolute(w), stride, pad, opad, dil), ci * k, dtype,
                  f"conv_transpose1d wrapper case {n}", narrow_steps=-(-k // stride) + 1 if col2im else 0)
        x2, w2 = values(dtype, (b, ci, s, s + 1)), values(dtype, (ci, co, k, 2))
        got = cl.conv_transpose2d(view(dev, x2, LAYOUTS[n % 3]), dev.to_device(w2), stride, pad, opad, dil)
        check_sum(got.to_host(), conv_transpose_ref(x2, w2, stride, pad, opad, dil),
                  conv_transpose_ref(absolute(x2), absolute(w2), stride, pad, opad, dil), ci * k * 2, dtype,
                  f"conv_transpose2d wrapper case {n}")


def check_wrappers_take(dev, dtype, ok, case2, case1, label):
    """conv2d on ``case2`` and conv1d on ``case1`` ((x shape, weight shape, stride, padding), contiguous
    inputs; None: none) where ``ok`` (the wrappers' test for the kernel under test) holds, against the
    reference."""
    for case, conv_fn in ((case2, cl.conv2d), (case1, cl.conv1d)):
        if case is None:
            continue
        xs, ws, stride, pad = case
        x, w = values(dtype, xs), values(dtype, ws)
        xd = dev.to_device(x)
        geo = [out_size(xs[-1], ws[-1], stride, pad, 1), ws[-1], stride, pad, 1]
        if len(xs) == 4:
            geo = [out_size(xs[2], ws[2], stride, pad, 1), geo[0], ws[2], *geo[1:]]
        else:
            geo = [1, geo[0], 1, *geo[1:]]
        assert ok(xd, *geo), (label, xs)
        check_sum(conv_fn(xd, dev.to_device(w), stride, pad, 1).to_host(), conv_ref(x, w, stride, pad, 1),
                  conv_ref(absolute(x), absolute(w), stride, pad, 1), int(np.prod(ws[1:])), dtype,
                  f"conv{len(xs) - 2}d wrapper, {label}")


@pytest.mark.parametrize("dtype", conv.ROWS_PAIRS_DTYPES, ids=[t.tag for t in conv.ROWS_PAIRS_DTYPES])
def test_wrapper_pair_fill(wave_device, dtype):
    """conv2d / conv1d on contiguous 16-bit inputs of an even width: the wrappers take
    ``im2col_rows_pairs_*`` / ``im2col1d_rows_pairs_*`` (odd padding: the staged rows start a column
    before the windows' first; 7 channels: not the channels-last kernels)."""
    check_wrappers_take(wave_device, dtype, conv.im2col_rows_pairs_ok, ((2, 5, 6, 10), (4, 5, 3, 3), 1, 1),
                        ((2, 7, 24), (3, 7, 3), 2, 1), "pair fill")


@pytest.mark.parametrize("dtype", conv.VEC_DTYPES, ids=VEC_IDS)
def test_wrapper_vec(wave_device, dtype):
    """conv2d 3x3 / conv1d k3 on contiguous 16-bit inputs with channels in 8s and rows in 4s: the
    wrappers take ``im2col_3x3_*`` / ``im2col1d_k3_narrow_*`` (stride 2 and padding 1: an odd alignment
    shift), and ``im2col1d_k3_*`` past 64 channels."""
    check_wrappers_take(wave_device, dtype, conv.im2col_vec_ok, ((2, 16, 6, 12), (4, 16, 3, 3), 2, 1),
                        ((2, 8, 24), (3, 8, 3), 1, 1), "channels-last")
    check_wrappers_take(wave_device, dtype, conv.im2col_vec_ok, None, ((1, 72, 16), (2, 72, 3), 1, 1),
                        "channels-last, 72 channels")


def test_wrapper_unbatched_and_gemm_paths(device):
    """An unbatched input; the fast conv_transpose1d path (contiguous weight, no padding or dilation)
    and the direct one agree with the reference."""
    x, w = values(f32, (3, 10)), values(f32, (4, 3, 3))
    got = cl.conv1d(device.to_device(x), device.to_device(w), padding=1)
    check_sum(got.to_host(), conv_ref(x[None], w, 1, 1, 1)[0], conv_ref(np.abs(x[None]), np.abs(w), 1, 1, 1)[0], 9, f32,
              "unbatched conv1d")
    xt, wt = values(f32, (2, 3, 7)), values(f32, (3, 2, 4))
    for args in ((3, 0, 0, 1), (3, 1, 0, 1), (2, 0, 1, 1), (1, 0, 0, 2)):
        got = cl.conv_transpose1d(device.to_device(xt), device.to_device(wt), *args)
        check_sum(got.to_host(), conv_transpose_ref(xt, wt, *args), conv_transpose_ref(np.abs(xt), np.abs(wt), *args),
                  12, f32, f"conv_transpose1d {args}", narrow_steps=3)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_wrapper_pools_and_upsampling(wave_device, dtype):
    dev = wave_device
    x = values(dtype, (2, 3, 9, 7))
    xd = view(dev, x, "permuted")
    assert_bits(cl.max_pool2d(xd, 2).to_host(), max_pool_ref(x, (2, 2), (2, 2)), "max_pool2d 2")
    assert_bits(cl.max_pool2d(xd, (3, 2), stride=(2, 1)).to_host(), max_pool_ref(x, (3, 2), (2, 1)), "max_pool2d 3x2")
    assert_bits(cl.avg_pool2d(xd, (2, 3)).to_host(), avg_pool_ref(x, (2, 3), (2, 3), dtype), "avg_pool2d 2x3")
    assert_bits(cl.avg_pool2d(xd, 3, stride=1).to_host(), avg_pool_ref(x, (3, 3), (1, 1), dtype), "avg_pool2d 3 s1")
    assert_bits(cl.upsample_nearest2d(xd, (20, 5)).to_host(), nearest_ref(x, 20, 5), "upsample_nearest2d")
    for align in (False, True):
        assert_bits(cl.upsample_bilinear2d(xd, size=(13, 16), align_corners=align).to_host(),
                    bilinear_ref(x, 13, 16, align), f"bilinear size align={align}")
        assert_bits(cl.upsample_bilinear2d(xd, scale_factor=(1.7, 2.0), align_corners=align).to_host(),
                    bilinear_ref(x, 15, 14, align, *((None, None) if align else (1.7, 2.0))),
                    f"bilinear scale align={align}")


def test_wrapper_errors(device):
    x = device.to_device(np.ones((1, 3, 8, 8), np.float32))
    w = device.to_device(np.ones((4, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="input has 3 channels, weight expects 2"):
        cl.conv2d(x, device.to_device(np.ones((4, 2, 3, 3), np.float32)))
    with pytest.raises(ValueError, match="stride must be a positive int, got 0"):
        cl.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="padding must be a non-negative int, got -1"):
        cl.conv2d(x, w, padding=-1)
    with pytest.raises(ValueError, match="dilation must be a positive int"):
        cl.conv1d(device.to_device(np.ones((1, 3, 8), np.float32)), device.to_device(np.ones((2, 3, 3), np.float32)),
                  dilation=0)
    with pytest.raises(ValueError, match="larger than the padded input"):
        cl.conv2d(device.to_device(np.ones((1, 3, 2, 2), np.float32)), w)
    with pytest.raises(TypeError, match="input is f32 and weight is f16"):
        cl.conv2d(x, device.to_device(np.ones((4, 3, 3, 3), np.float16)))
    with pytest.raises(TypeError, match="no kernel for i64"):
        cl.conv1d(device.to_device(np.ones((1, 3, 8), np.int64)), device.to_device(np.ones((2, 3, 3), np.int64)))
    with pytest.raises(ValueError, match="input must be"):
        cl.conv2d(device.to_device(np.ones((3, 8), np.float32)), w)
    with pytest.raises(ValueError, match="output_padding 2 must be smaller"):
        cl.conv_transpose2d(x, device.to_device(np.ones((3, 2, 3, 3), np.float32)), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="kernel_size must be a positive int"):
        cl.max_pool2d(x, 0)
    with pytest.raises(ValueError, match="larger than the input"):
        cl.avg_pool2d(x, 9)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        cl.avg_pool2d(x, 2, stride=(1, 0))
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        cl.upsample_bilinear2d(x)
    with pytest.raises(ValueError, match="scale_factor must be positive"):
        cl.upsample_bilinear2d(x, scale_factor=-2.0)
    with pytest.raises(ValueError, match="size must be a positive int"):
        cl.upsample_nearest2d(x, (0, 4))


# ---- index arithmetic ---------------------------------------------------------------------------------
@pk.kernel
def divide_all(n: usize, nums: ConstPtr[u32], divs: ConstPtr[u32], out: Ptr[u32]):
    for i in pk.grid_stride(n):
        out[i] = conv.div_by(nums[i], divs[i], conv.divisor_magic(usize(divs[i])))


def test_division_by_multiplication(device):
    """``div_by``'s 32-bit path against integer division: divisors 1, 2, powers of two, their
    neighbours, 2**31 + 1 and 2**32 - 1, with dividends at 0, the divisor's multiples +-1 and 2**32 - 1."""
    divisors = sorted({1, 2, 3, 5, 6, 7, 9, 10, 25, 56, 112, 641, 2304, 3 * 5 ** 9, 2 ** 31 + 1, 2 ** 32 - 1}
                      | {2 ** e + d for e in range(1, 32) for d in (-1, 0, 1)} | set(RNG.integers(1, 2 ** 32, 200).tolist()))
    nums, divs = [], []
    for d in divisors:
        picks = [0, 1, d - 1, d, d + 1, 2 ** 32 - 1, 2 ** 32 - 2, (2 ** 32 - 1) // d * d, (2 ** 32 - 1) // d * d - 1]
        picks += RNG.integers(0, 2 ** 32, 20).tolist()
        for n in picks:
            if 0 <= n < 2 ** 32:
                nums.append(n)
                divs.append(d)
    nums, divs = np.array(nums, np.uint32), np.array(divs, np.uint32)
    out = device.empty(len(nums), pk.u32)
    divide_all[8, 256](len(nums), device.to_device(nums), device.to_device(divs), out)
    np.testing.assert_array_equal(out.to_host(), nums // divs)


#: the data-movement kernels with 64-bit index arithmetic forced (NARROW = 0): the path outputs of
#: 2**32 elements or more take
WIDE = pk.Module("conv_wide_indices")
for _op in ("im2col1d", "im2col", "col2im1d", "avg_pool2d", "max_pool2d", "upsample_nearest2d", "upsample_bilinear2d"):
    for _t in DTYPES:
        WIDE.add(conv.OPS[_op][0].instance(kernel_name(_op, _t), **conv.instance_params(_op, _t, NARROW=0)))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_wide_index_path(dtype):
    dev = pk.device("cpu")
    run_im2col1d(dev, dtype, WIDE)
    run_im2col(dev, dtype, WIDE)
    run_col2im1d(dev, dtype, WIDE)
    run_pools(dev, dtype, "avg_pool2d", WIDE)
    run_pools(dev, dtype, "max_pool2d", WIDE)
    run_upsample_nearest2d(dev, dtype, WIDE)
    run_upsample_bilinear2d(dev, dtype, True, WIDE)




@pytest.mark.parametrize("dtype", conv.VEC_DTYPES, ids=VEC_IDS)
def test_im2col_vec(wave_device, dtype):
    """The wrappers' ``im2col_3x3_*`` / ``im2col1d_k3_*`` / ``im2col1d_k3_narrow_*`` (the source staged
    channels-last; each 3-tap kernel on every input, the wrappers' choice under their grid) where
    ``im2col_vec_ok`` holds, and nothing written where it does not (permuted and offset sources, a width
    not a multiple of 4, channels not a multiple of 8): several channel groups (a partial last one; 3 taps:
    groups of 128 channels past 64, else of 64),
    several items a row, stride, dilation, padding of the window's size and more, odd ``sh`` (the fill's
    alignment shift), batch 2; under the wrappers' grid, fewer blocks than items (a block loops), blocks
    of one wave and of 128 threads; blocks that are not whole waves write nothing."""
    dev = wave_device
    cases = [((2, 16, 5, 8), 1, 1, 1, "contiguous"), ((1, 24, 6, 12), 2, 1, 1, "contiguous"),
             ((1, 72, 4, 64), 1, 3, 2, "contiguous"), ((1, 8, 3, 4), 1, 4, 1, "contiguous"),
             ((2, 16, 5, 7), 1, 1, 1, "contiguous"), ((1, 24, 6, 12), 1, 1, 1, "permuted"),
             ((1, 12, 4, 8), 1, 1, 1, "contiguous"),
             ((2, 16, 36), 1, 1, 1, "contiguous"), ((1, 24, 52), 2, 2, 1, "contiguous"),
             ((1, 72, 400), 1, 1, 2, "contiguous"), ((2, 8, 8), 1, 4, 1, "contiguous"), ((1, 16, 40), 3, 2, 1, "offset"),
             ((1, 8, 38), 1, 1, 1, "contiguous"), ((1, 264, 20), 1, 1, 1, "contiguous"),
             ((1, 136, 12), 1, 1, 1, "contiguous")]
    taken = 0
    for shape, stride, pad, dil, lay in cases:
        one_d = len(shape) == 3
        x = values(dtype, shape)
        want = im2col_ref(x, (3,) if one_d else (3, 3), stride, pad, dil)
        xd = view(dev, x, lay)
        geo = (1, want.shape[1], 1, 3) if one_d else (*want.shape[1:3], 3, 3)
        n = shape[0] * want.shape[1] * shape[1] if one_d else want.size
        scalars = (want.shape[1], 3, stride, pad, dil) if one_d else (*geo, stride, pad, dil)
        pick = conv.vec_kernel(3 if one_d else 9, shape[1])[0]
        ok = conv.im2col_vec_ok(xd, *geo, stride, pad, dil)
        taken += ok
        own = conv.im2col_vec_launch(shape[0], shape[1], *geo, stride, dil)
        for base in ("im2col1d_k3", "im2col1d_k3_narrow") if one_d else ("im2col_3x3",):
            name = f"{base}_{dtype.tag}"
            for launch_shape in ((own, (1, 64), (3, 128)) if base == pick else ((2, 64),)):
                out = dev.to_device(np.full(want.shape, 7, dtype.np))
                launch(dev, name, n, n, *scalars, info_of(dev, xd), xd, out, shape=launch_shape)
                assert_bits(out.to_host(), want if ok else np.full(want.shape, 7, dtype.np),
                            f"{name} {shape} s{stride} p{pad} d{dil} {lay} {launch_shape}")
    assert taken == 10  # the contiguous cases with whole chunks and channel vectors
    if dev.target.name == "cpu" and dev.target.wave_size == 64:  # a block of 96: not whole waves
        x = dev.to_device(values(dtype, (1, 8, 4, 4)))
        out = dev.to_device(np.full((1, 4, 4, 8, 3, 3), 7, dtype.np))
        launch(dev, f"im2col_3x3_{dtype.tag}", out.size, out.size, 4, 4, 3, 3, 1, 1, 1, info_of(dev, x), x, out,
               shape=(1, 96))
        assert (out.to_host() == 7).all()
