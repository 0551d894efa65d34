"""A shared array passed to a device function's ``Ptr[T]`` parameter: the callee is typed for shared
memory, so one helper serves global and shared buffers alike."""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize


@pk.func
def tree_sum(buf: Ptr[f32], n: usize) -> f32:
    t = usize(pk.thread_idx.x)
    s = n // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        pk.syncthreads()
        s //= 2
    return buf[0]


@pk.kernel
def block_sums(x: ConstPtr[f32], out: Ptr[f32]):
    sm = pk.shared.array(128, f32)
    t = pk.thread_idx.x
    sm[t] = x[pk.global_id()]
    pk.syncthreads()
    total = tree_sum(sm, 128)
    if t == 0:
        out[pk.block_idx.x] = total


@pk.kernel
def global_sum(x: Ptr[f32], out: Ptr[f32]):
    total = tree_sum(x, 128)   # the same helper on global memory
    if pk.thread_idx.x == 0:
        out[0] = total


def test_shared_array_to_device_function(wave_device):
    x = np.random.default_rng(3).random(512).astype(np.float32)
    out = wave_device.zeros(4, pk.f32)
    block_sums.launch(4, 128, wave_device.to_device(x), out, device=wave_device)
    np.testing.assert_allclose(out.to_host(), x.reshape(4, 128).sum(1), rtol=1e-5)
    g, o = wave_device.to_device(x[:128]), wave_device.zeros(1, pk.f32)
    global_sum.launch(1, 128, g, o, device=wave_device)
    np.testing.assert_allclose(o.to_host()[0], x[:128].sum(), rtol=1e-5)
