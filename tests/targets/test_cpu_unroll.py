"""The CPU target turns LLVM's loop unroller off for very large kernels (``CpuTarget.unrolls_loops``,
issue 29: the MMQ kernels' first use), and the result must not change."""
import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, u32
from pykern.compiler import lower_module
from pykern.runtime.cpu import CpuDevice
from pykern.targets.cpu import CpuTarget


@pk.kernel
def row_sums(n: u32, cols: u32, x: ConstPtr[f32], out: Ptr[f32]):
    r = pk.block_idx.x * pk.block_dim.x + pk.thread_idx.x
    if r < n:
        acc = f32(0)
        for c in range(cols):
            acc += x[r * cols + c] * f32(c % 7)
        out[r] = acc


def test_small_kernels_keep_the_unroller():
    target = CpuTarget()
    module, _ = lower_module([row_sums._only_instance()], target, "row_sums")
    assert target.unrolls_loops(module)
    big = CpuTarget()
    big.unroll_limit = 100  # as if the kernel were larger than the limit
    module, _ = lower_module([row_sums._only_instance()], big, "row_sums")
    assert not big.unrolls_loops(module)
    assert big.cache_key() != target.cache_key()  # the IR cache key tells the two apart


def test_a_kernel_over_the_limit_computes_the_same(monkeypatch, tmp_path):
    monkeypatch.setenv("PYKERN_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((37, 29)).astype(np.float32)
    want = (x * (np.arange(29) % 7).astype(np.float32)).sum(axis=1)
    results = []
    for limit in (CpuTarget.unroll_limit, 0):
        monkeypatch.setattr(CpuTarget, "unroll_limit", limit)
        dev = CpuDevice()  # a fresh device: its own loaded kernels, so each limit compiles
        out = dev.to_device(np.zeros(37, np.float32))
        row_sums.launch(2, 32, 37, 29, dev.to_device(x), out, device=dev)
        assert dev.kernel_load_count + dev.load_count == 1
        results.append(out.to_host())
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(results[0], results[1])  # no reassociation: the same bits
