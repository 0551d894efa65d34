"""``pk.load`` / ``pk.store`` with a cache policy: the same values as ``p[i]``, the policy in the code.

NVIDIA (sm_89, sm_90) takes ``L2::cache_hint`` accesses under a ``createpolicy``; AMDGPU makes
``evict_first`` non-temporal (``glc slc``) and ``evict_last`` a plain access; the CPU ignores both.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, f64, u8, u32, usize
from pykern.compiler import compile_kernels, lower_module
from pykern.targets.registry import make_target

T = pk.TypeVar("T")


@pk.kernel
def k_twice(n: usize, x: ConstPtr[T], y: Ptr[T], *, T):
    i = pk.global_id()
    if i < n:
        v = pk.load(x, i, eviction="evict_last")
        pk.store(y, i, v + v, eviction="evict_first")


@pk.kernel
def k_two_passes(n: usize, x: Ptr[f32]):
    """In place: a pass that keeps the row, then one that lets it go (softmax's shape)."""
    s = f32(0)
    for i in range(pk.u64(0), n):
        s += pk.load(x, i, eviction="evict_last")
    for i in range(pk.u64(0), n):
        pk.store(x, i, pk.load(x, i, eviction="evict_first") / s, eviction="evict_first")


@pk.kernel
def k_stream(n: usize, x: ConstPtr[f32], y: ConstPtr[f32], out: Ptr[f32]):
    """A grid-stride body mixing a policy load with plain ones: the tiles take x and out (vector
    accesses), y stays one element wide."""
    for i in pk.grid_stride(n):
        out[i] = x[i] + pk.load(y, i, eviction="evict_first")


TWICE = {t: k_twice.instance(f"twice_{t}", T=t) for t in (f32, f16, bf16, f64, u8, u32)}


@pytest.mark.parametrize("dtype", list(TWICE), ids=str)
def test_values_are_plain_accesses(device, dtype):
    x = (np.arange(1000) % 23).astype(dtype.np)
    dx, dy = device.to_device(x), device.zeros(1000, dtype)
    TWICE[dtype].launch(8, 128, 1000, dx, dy, device=device)
    np.testing.assert_array_equal(dy.to_host(), (x.astype(np.float64) * 2).astype(dtype.np))


def test_in_place_passes(device):
    x = np.random.default_rng(0).uniform(1, 2, 777).astype(np.float32)
    dx = device.to_device(x)
    k_two_passes.launch(1, 1, 777, dx, device=device)
    np.testing.assert_allclose(dx.to_host(), x / x.sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 4, 1001])
def test_grid_stride_tiles_keep_policy_loads_whole(n):
    dev = pk.device("cpu", tile_bytes=16)  # the cuda target's tiles, on the host
    rng = np.random.default_rng(n)
    x, y = rng.uniform(-1, 1, n + 1).astype(np.float32), rng.uniform(-1, 1, n + 1).astype(np.float32)
    for off in (0, 1):
        out = dev.zeros(n, f32)
        k_stream.launch(2, 64, n, dev.to_device(x[off:off + n]), dev.to_device(y[off:off + n]), out, device=dev)
        np.testing.assert_array_equal(out.to_host(), x[off:off + n] + y[off:off + n])
    ptx = compile_kernels([k_stream.instance("k_stream")], make_target("cuda"), "policy")[0].decode()
    assert "ld.global.nc.v4.b32" in ptx and "ld.global.L2::cache_hint.b32" in ptx


@pytest.mark.parametrize("arch,hinted", [("sm_90", True), ("sm_89", True), ("sm_86", False), ("sm_80", False)])
def test_ptx_carries_l2_policies(arch, hinted):
    """createpolicy needs PTX 7.4; LLVM writes 7.0 / 7.1 for sm_80 / sm_86, which keep plain accesses."""
    ptx = compile_kernels([TWICE[f32]], make_target("cuda", arch), "policy")[0].decode()
    found = re.findall(r"createpolicy\.fractional\.L2::(\w+)\.b64|(ld|st)\.global\.L2::cache_hint\.b32", ptx)
    want = [("evict_last", ""), ("", "ld"), ("evict_first", ""), ("", "st")] if hinted else []
    assert found == want


@pytest.mark.parametrize("dtype,bits", [(f16, 16), (f64, 64)], ids=str)
def test_ptx_widths(dtype, bits):
    ptx = compile_kernels([TWICE[dtype]], make_target("cuda", "sm_90"), "policy")[0].decode()
    assert f"ld.global.L2::cache_hint.b{bits}" in ptx and f"st.global.L2::cache_hint.b{bits}" in ptx


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_amdgpu_evict_first_is_non_temporal(arch):
    target = make_target("amdgpu", arch)
    asm = target.assembly(lower_module([TWICE[f32]], target, "policy")[0])
    loads = [ln.split() for ln in asm.splitlines() if re.match(r"\s*global_load", ln)]
    stores = [ln.split() for ln in asm.splitlines() if re.match(r"\s*global_store", ln)]
    assert loads and all("slc" not in ld for ld in loads)      # evict_last: a plain load
    assert stores and all("slc" in st for st in stores)         # evict_first: streaming
