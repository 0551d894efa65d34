"""Exchanging arrays with NumPy, torch and CuPy: ``pk.from_dlpack`` / ``Device.from_dlpack`` view a
framework's array in place (DLPack, or CUDA's array interface), device arrays export DLPack, and the
stdlib's wrappers take framework arrays as they are. The GPU cases run on the GPU machine."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
from pykern.runtime import dlpack
from pykern.runtime.devices import _available


@pk.kernel
def twice(n: usize, x: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.grid_stride(n):
        out[i] = x[i] * 2.0


def test_from_dlpack_views_numpy_memory_in_place():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = pk.from_dlpack(a)
    assert v.device is pk.device("cpu") and v.shape == (3, 4) and v.dtype is pk.f32 and v.ptr == a.ctypes.data
    out = np.zeros(12, np.float32)
    twice[1, 32](12, v, out)
    assert (out == 2 * a.ravel()).all()
    t = pk.from_dlpack(a.T)                     # strides travel: a view, not a copy
    assert t.strides == (1, 4) and (t.to_host() == a.T).all()
    with pytest.raises(ValueError, match="negative strides"):
        pk.from_dlpack(a[::-1])
    with pytest.raises(TypeError, match="neither __dlpack__"):
        pk.from_dlpack([1, 2, 3])


def test_stdlib_wrappers_take_framework_arrays_in_place():
    from stdlib_kernels import unary
    a = np.arange(6, dtype=np.float32)
    out = pk.from_dlpack(np.zeros(6, np.float32))
    unary.neg(a, out=out)
    assert (out.to_host() == -a).all()


def test_dlpack_dtype_codes():
    assert dlpack.dtype_of(dlpack.KDL_BFLOAT, 16) is pk.bf16
    assert dlpack.dtype_of(dlpack.KDL_FLOAT8_E4M3FN, 8) is pk.f8e4m3
    assert dlpack.dtype_of(dlpack.KDL_UINT, 8) is pk.u8
    assert dlpack.accepts(pk.f8e4m3, dlpack.KDL_FLOAT8_E4M3FN, 8) and dlpack.accepts(pk.f8e4m3, dlpack.KDL_UINT, 8)
    assert not dlpack.accepts(pk.f32, dlpack.KDL_INT, 32)
    with pytest.raises(TypeError, match="type code 5"):
        dlpack.dtype_of(5, 64)  # complex


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not (_available("cuda") and torch.cuda.is_available()):
        pytest.skip("no CUDA GPU")
    return torch


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float16", "float8_e4m3fn", "int64"])
def test_torch_cuda_tensors_both_ways(name):
    torch = _torch_cuda()
    ty = getattr(torch, name)
    x = torch.arange(64, device="cuda").to(ty)
    v = pk.from_dlpack(x)
    assert v.device is pk.device("cuda") and v.shape == (64,) and v.ptr == x.data_ptr()
    want = {"float32": pk.f32, "bfloat16": pk.bf16, "float16": pk.f16, "float8_e4m3fn": pk.f8e4m3, "int64": pk.i64}
    assert v.dtype is want[name]
    back = torch.from_dlpack(v)                      # and out again (fp8 leaves as u8 bytes)
    assert back.data_ptr() == x.data_ptr()
    if name != "float8_e4m3fn":
        assert torch.equal(back, x)
    else:
        assert torch.equal(back, x.view(torch.uint8))


def test_stdlib_on_torch_tensors_and_cuda_array_interface():
    torch = _torch_cuda()
    from stdlib_kernels import unary
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    unary.neg(x, out=pk.from_dlpack(y))
    torch.cuda.synchronize()
    assert torch.equal(y, -x)

    class OnlyCai:  # Numba's device arrays speak only CUDA's array interface
        def __init__(self, t):
            self.t, self.__cuda_array_interface__ = t, t.__cuda_array_interface__

    v = pk.device("cuda").from_dlpack(OnlyCai(x))
    assert v.ptr == x.data_ptr() and v.dtype is pk.f32 and v.shape == (1000,)


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    if not _available("cuda"):
        pytest.skip("no CUDA GPU")
    x = cupy.arange(10, dtype=cupy.float32)
    v = pk.from_dlpack(x)
    out = cupy.zeros(10, cupy.float32)
    twice[1, 32](10, v, out)
    cupy.cuda.get_current_stream().synchronize()
    assert (cupy.asnumpy(out) == 2 * np.arange(10)).all()
