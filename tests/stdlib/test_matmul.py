"""pykern's GEMM (``stdlib_kernels/matmul.py``) against float64 NumPy: every dtype, edge tiles,
transposed / sliced / offset / broadcast-batched operands, both wave widths.

Each output is a sum of k products accumulated in f32 by fused multiply-adds (the products of f16
and bf16 inputs are exact in f32), then rounded to T: ``|got - exact| <= k u_f32 sum|a||b| + u_T |exact|``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pykern import f32
from stdlib_kernels import matmul as mm
from _elementwise import RNG

DTYPES = mm.DTYPES
IDS = [t.tag for t in DTYPES]


def data(dtype, shape):
    return RNG.uniform(-2, 2, size=shape).astype(dtype.np)


def check(got, a, b, dtype, what=""):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    k = a.shape[-1]
    u_out = float(ml_dtypes.finfo(dtype.np).eps) / 2
    bound = k * 2.0 ** -24 * 1.01 * mag + u_out * np.abs(exact) + float(ml_dtypes.finfo(dtype.np).smallest_subnormal)
    assert got.shape == exact.shape and got.dtype == dtype.np, (what, got.shape, exact.shape, got.dtype)
    err = np.abs(got.astype(np.float64) - exact)
    if err.size and (err > bound).any():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(f"{what}: |{got[i]} - {exact[i]}| = {err[i]} > {bound[i]} at {i}")


SHAPES = [(1, 1, 1), (5, 7, 3), (130, 20, 140), (64, 33, 257), (3, 129, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_shapes(wave_device, dtype):
    dev = wave_device
    for m, k, n in SHAPES:
        a, b = data(dtype, (m, k)), data(dtype, (k, n))
        check(mm.matmul(dev.to_device(a), dev.to_device(b)).to_host(), a, b, dtype, f"{m}x{k}x{n}")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_layouts(wave_device, dtype):
    dev = wave_device
    m, k, n = 67, 45, 131
    a, b = data(dtype, (m, k)), data(dtype, (k, n))
    at = dev.to_device(np.ascontiguousarray(a.T)).transpose()  # m-contiguous a
    bt = dev.to_device(np.ascontiguousarray(b.T)).transpose()  # k-contiguous b
    check(mm.matmul(at, bt).to_host(), a, b, dtype, "both transposed")
    check(mm.matmul(dev.to_device(a), bt).to_host(), a, b, dtype, "b transposed")
    # a window of a wider buffer, starting 3 rows and 2 columns in; b read with a column stride of 2
    wide = data(dtype, (m + 5, k + 9))
    window = dev.to_device(wide).as_strided((m, k), (k + 9, 1), offset=3 * (k + 9) + 2)
    spaced = data(dtype, (k, 2 * n))
    every_other = dev.to_device(spaced).as_strided((k, n), (2 * n, 2), offset=1)
    check(mm.matmul(window, every_other).to_host(), wide[3:3 + m, 2:2 + k], spaced[:, 1::2], dtype, "strided")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_batched(wave_device, dtype):
    dev = wave_device
    a, b = data(dtype, (3, 1, 20, 9)), data(dtype, (4, 9, 17))
    got = mm.matmul(dev.to_device(a), dev.to_device(b)).to_host()  # broadcast batch dims: (3, 4, 20, 17)
    check(got, np.broadcast_to(a, (3, 4, 20, 9)), np.broadcast_to(b, (3, 4, 9, 17)), dtype, "broadcast")
    # batch dims that don't flatten to one stride: every other batch of a (2, 6, ...) stack, permuted
    base = data(dtype, (6, 2, 11, 7))
    x = dev.to_device(base).as_strided((2, 3, 11, 7), (7 * 11, 2 * 2 * 7 * 11, 7, 1))
    hx = np.lib.stride_tricks.as_strided(base, (2, 3, 11, 7), [s * base.itemsize for s in (7 * 11, 2 * 2 * 7 * 11, 7, 1)])
    y = data(dtype, (2, 3, 7, 5))
    check(mm.matmul(x, dev.to_device(y)).to_host(), hx, y, dtype, "non-flat batch")


def test_empty_and_zero_k(device):
    z = mm.matmul(device.to_device(np.zeros((4, 0), np.float32)), device.to_device(np.zeros((0, 6), np.float32)))
    assert z.shape == (4, 6) and (z.to_host() == 0).all()
    e = mm.matmul(device.to_device(np.zeros((0, 3), np.float32)), device.to_device(np.ones((3, 6), np.float32)))
    assert e.shape == (0, 6)


def test_errors(device):
    a32 = device.to_device(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="dtypes"):
        mm.matmul(a32, device.to_device(np.ones((3, 2), np.float16)))
    with pytest.raises(TypeError, match="no kernel for f64"):
        mm.matmul(device.to_device(np.ones((2, 3))), device.to_device(np.ones((3, 2))))
    with pytest.raises(ValueError, match="inner dims"):
        mm.matmul(a32, device.to_device(np.ones((4, 2), np.float32)))
    with pytest.raises(ValueError, match="at least 2 dims"):
        mm.matmul(device.to_device(np.ones(3, np.float32)), a32)
    with pytest.raises(ValueError, match="out must be"):
        mm.matmul(a32, device.to_device(np.ones((3, 2), np.float32)), out=device.empty((3, 3), f32))


def test_extra_module_keeps_candles_registry():
    import stdlib_kernels as sk
    assert mm.MATMUL.index is None and mm.MATMUL not in sk.MODULES and len(sk.MODULES) == 11
    assert sorted(mm.MATMUL.names()) == ["gemm_bf16", "gemm_f16", "gemm_f32"]


def test_batches_beyond_one_grid(device, monkeypatch):
    """Batches past grid.z's limit go in several launches (the limit lowered to 2 here)."""
    monkeypatch.setattr(mm, "MAX_BATCH", 2)
    a, b = data(f32, (5, 9, 4)), data(f32, (5, 4, 6))
    check(mm.matmul(device.to_device(a), device.to_device(b)).to_host(), a, b, f32, "5 batches in launches of 2")
    base = data(f32, (3, 5, 9, 4))  # batch dims that don't flatten, each row split too
    x = device.to_device(base).transpose(0, 1)
    check(mm.matmul(x, device.to_device(np.ascontiguousarray(b[:, None].repeat(3, 1)))).to_host(),
          base.transpose(1, 0, 2, 3), b[:, None].repeat(3, 1), f32, "non-flat batches in launches of 2")
    with pytest.raises(ValueError, match="exceed one launch's grid"):
        mm.gemm_launch(4, 128 * 3, 1, device.target)


def test_slice_depth_per_target():
    """16-deep slices where they fit (CUDA), 8-deep on AMD (16 spills there) and on the CPU (16 took
    60% more CPU to compile and ran no faster): docs/matmul.md."""
    inst = mm.MATMUL.get("gemm_f32")
    assert [inst.params_for(t)["BK"] for t in ("cuda", "amdgpu", "cpu")] == [16, 8, 8]
    assert all(mm.MATMUL.get(f"gemm_{t.tag}").params["BK"] == inst.params["BK"] for t in DTYPES)


@pytest.mark.parametrize("width", [32, 64])
def test_cuda_tile_on_the_cpu(width):
    """The CPU compiles 8-deep slices; CUDA's 16-deep kernel is checked here too, through an instance
    of the same kernel with CUDA's parameters and CUDA's launch shape."""
    import pykern as pk
    from pykern.runtime.launch import storage
    dev = pk.device("cpu", wave_size=width)
    params = mm.MATMUL.get("gemm_f32").params_for("cuda")
    module = pk.Module(f"gemm_cuda_tile_{width}").add(mm.gemm.instance("gemm_f32_cuda_tile", **params))
    fn = dev.get_or_load_func("gemm_f32_cuda_tile", module)
    for m, k, n, a_t, b_t in ((130, 45, 140, False, False), (64, 33, 257, True, True), (5, 16, 3, False, True)):
        a, b = data(f32, (m, k)), data(f32, (k, n))
        da = dev.to_device(np.ascontiguousarray(a.T)).transpose() if a_t else dev.to_device(a)
        db = dev.to_device(np.ascontiguousarray(b.T)).transpose() if b_t else dev.to_device(b)
        c = dev.empty((1, m, n), f32)
        fn[mm.gemm_launch(m, n, 1, "cuda")](m, n, k, storage(da), 0, *da.strides, storage(db), 0, *db.strides, c)
        check(c.to_host()[0], a, b, f32, f"cuda tile {m}x{k}x{n}")
