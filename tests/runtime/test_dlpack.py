"""DLPack both ways: launches take any ``__dlpack__`` producer on the device, device arrays export one."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
from pykern.errors import LaunchError


@pk.kernel
def twice(n: usize, x: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.grid_stride(n):
        out[i] = x[i] * 2.0


class Producer:
    """A third-party array seen only through DLPack (NumPy's export underneath)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_launch_reads_a_dlpack_producer_without_copying():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    twice[1, 64](100, Producer(x), out)
    assert (out == 2 * x).all()
    x[:] = 1  # the kernel saw this very buffer: a second launch sees the change
    twice[1, 64](100, Producer(x), out)
    assert (out == 2).all()


def test_dlpack_dtype_mismatch_names_the_parameter():
    with pytest.raises(LaunchError, match=r"argument 'x' expects f32 data, got DLPack type code 0 with 64 bits"):
        twice[1, 64](3, Producer(np.arange(3, dtype=np.int64)), np.zeros(3, np.float32))


def test_device_arrays_export_dlpack_to_numpy():
    dev = pk.device("cpu")
    a = dev.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = np.from_dlpack(a)
    assert view.shape == (3, 4) and (view == np.arange(12).reshape(3, 4)).all()
    assert view.ctypes.data == a.ptr  # the same memory, no copy
    t = np.from_dlpack(a.transpose())
    assert (t == a.to_host().T).all()
    del view, t
    gc.collect()


def test_unconsumed_capsules_are_released():
    from pykern.runtime import dlpack
    dev = pk.device("cpu")
    a = dev.to_device(np.arange(4, dtype=np.float32))
    gc.collect()
    before = len(dlpack._exports)
    for _ in range(10):
        a.__dlpack__()
    gc.collect()
    assert len(dlpack._exports) == before


@pk.kernel
def twice_bf16(n: usize, x: ConstPtr[pk.bf16], out: Ptr[pk.bf16]):
    for i in pk.grid_stride(n):
        out[i] = x[i] * 2.0


def test_torch_bf16_tensors_on_the_gpu():
    from pykern.runtime.devices import _available
    torch = pytest.importorskip("torch")
    if not (_available("cuda") and torch.cuda.is_available()):
        pytest.skip("no CUDA GPU")
    dev = pk.device("cuda")
    x = torch.arange(1000, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    twice_bf16.launch(4, 256, 1000, x, out, device=dev)
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2)
    back = torch.from_dlpack(dev.to_device(np.arange(8, dtype=np.float32)))
    assert back.device.type == "cuda" and back.tolist() == list(range(8))
