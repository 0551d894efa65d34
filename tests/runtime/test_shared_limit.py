"""``Device.max_shared_per_block``: the shared memory a block may take on the device at hand, which
wrappers size their shared tables from (scatter's ranges). Each runtime's value must be one a launch
really gets: all of it launches and keeps what was stored, one byte more is refused. The HIP value
is tested against a fake hip-python in test_hip.py."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import Ptr, usize
from pykern.errors import LaunchError
from pykern.runtime import cuda as C
from pykern.runtime.cpu import CpuDevice
from pykern.targets.cpu import SHARED_LIMIT


@pk.kernel
def k_fill_shared(words: usize, out: Ptr[pk.u32]):
    """Every word of the dynamic shared memory written by one thread and read back by another, then
    summed per thread into ``out``: a table shorter than ``words`` would lose or alias entries."""
    table = pk.shared.dynamic(pk.u32)
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    for e in pk.parallel_range(pk.u32(0), pk.u32(words), t, nt):
        table[e] = e * pk.u32(3) + pk.u32(1)
    pk.syncthreads()
    acc = pk.u32(0)
    for e in pk.parallel_range(pk.u32(0), pk.u32(words), (t + pk.u32(1)) % nt, nt):
        acc += table[e]
    out[t] = acc


def check_whole_limit(dev, limit: int) -> None:
    threads = 128
    words = limit // 4
    out = dev.zeros(threads, np.uint32)
    k_fill_shared[(1, 1, 1), (threads, 1, 1), None, limit](words, out)
    e = np.arange(words, dtype=np.uint64)
    per = (e * 3 + 1) % (1 << 32)
    want = np.array([per[(np.arange(words) % threads) == (t + 1) % threads].sum() % (1 << 32)
                     for t in range(threads)], np.uint32)
    np.testing.assert_array_equal(out.to_host(), want)
    with pytest.raises(LaunchError):
        k_fill_shared[(1, 1, 1), (threads, 1, 1), None, limit + 4](words, out)
        dev.synchronize()


def test_cpu_max_shared_per_block_is_the_targets_bound():
    dev = CpuDevice(threads=1)
    assert dev.max_shared_per_block == SHARED_LIMIT
    check_whole_limit(dev, dev.max_shared_per_block)


@pytest.mark.skipif(not C.cuda_available(), reason="no CUDA GPU")
def test_cuda_max_shared_per_block_is_the_opt_in_limit():
    """The driver's opt-in limit (past CUDA's 48 KiB: 227 KiB on an H100), which a launch reaches by
    opting the function in itself; a kernel without static shared memory gets all of it."""
    dev = C.cuda_device(0)
    drv = dev._drv
    optin = C._check(drv, drv.cuDeviceGetAttribute(
        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev._dev), "attr")
    assert dev.max_shared_per_block == optin >= C.DEFAULT_DYNAMIC_SHARED
    check_whole_limit(dev, dev.max_shared_per_block)
