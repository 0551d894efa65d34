"""Several GPUs: ``pk.device("cuda", i)`` is its own device — memory, module store, launches — and a
launch runs on the device its arrays live on. Needs a machine with two CUDA GPUs (the GPU machine's
two-GPU kind); the device-index rules are checked everywhere."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
from pykern.errors import DeviceError
from pykern.runtime.devices import _available


@pk.kernel
def scale(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * x[i]


def test_device_takes_a_kind_and_an_index():
    assert pk.device("cpu", 0) is pk.device("cpu:0") is pk.device("cpu")
    with pytest.raises(DeviceError, match="without an index"):
        pk.device("cuda:0", 1)
    with pytest.raises(DeviceError, match="non-negative int"):
        pk.device("cuda", -1)


def _cuda_count() -> int:
    if not _available("cuda"):
        return 0
    from pykern.runtime.cuda import device_count
    return device_count()


@pytest.mark.skipif(_cuda_count() < 2, reason="needs two CUDA GPUs")
def test_each_gpu_has_its_own_store_and_launches_follow_the_arrays():
    d0, d1 = pk.device("cuda", 0), pk.device("cuda", 1)
    assert d0 is not d1 and d1 is pk.device("cuda:1")
    x = np.arange(1 << 20, dtype=np.float32)
    outs = []
    for dev, a in ((d0, 2.0), (d1, 3.0)):
        xd, yd = dev.to_device(x), dev.empty(x.shape, pk.f32)
        assert xd.device is dev
        scale[64, 256](x.size, a, xd, yd)     # runs where xd and yd live
        outs.append((dev, a, yd))
    for dev, a, yd in outs:
        np.testing.assert_array_equal(yd.to_host(), a * x)
    f0 = d0.get_or_load_func("scale", scale.instance().module)
    f1 = d1.get_or_load_func("scale", scale.instance().module)
    assert f0 is not f1 and f0.device is d0 and f1.device is d1
    with pytest.raises(pk.LaunchError, match="lives on"):
        scale[1, 32](4, 1.0, d0.to_device(x[:4]), d1.empty(4, pk.f32))
