"""Shared arrays whose first use is not at the kernel's top level: inside a device function reached
through a pointer (``sm + 0``), inside a branch of a compile-time unrolled loop, and two arrays first
used on different paths. The reduce family once read ``touch = sm[0]`` at the top of each kernel to
dodge a dominance error here (the CPU target computed a shared array's address where it was first
used; fixed in ``CpuFrame.shared_array``); these kernels are the pattern it now relies on, run on
every device and compiled for every GPU target."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import Ptr, f32, u32
from pykern.compiler import compile_kernels
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.nvptx import NvptxTarget


@pk.func
def put_reversed(sm: Ptr[f32], t: u32, nt: u32, v: f32):
    sm[nt - 1 - t] = v


@pk.kernel
def first_use_in_callee(out: Ptr[f32]):
    sm = pk.shared.array(64, f32)
    t = pk.thread_idx.x
    put_reversed(sm + 0, t, pk.block_dim.x, f32(t))
    pk.syncthreads()
    out[t] = sm[t]


@pk.kernel
def first_use_in_unrolled_branch(out: Ptr[u32]):
    a = pk.shared.array(64, u32)
    b = pk.shared.array(64, u32)
    t = pk.thread_idx.x
    for level in range(2):  # unrolled at compile time: the arrays' first uses are in its copies
        if level == 1:
            if t % 2 == 0:
                a[t] = t * u32(3)
            else:
                b[t] = t + u32(100)
            pk.syncthreads()
    out[t] = a[t - t % 2] + b[t | 1]


def test_first_use_in_a_callee(device):
    out = device.to_device(np.zeros(64, np.float32))
    first_use_in_callee.launch(1, 64, out, device=device)
    np.testing.assert_array_equal(out.to_host(), np.arange(63, -1, -1, dtype=np.float32))


def test_first_use_in_an_unrolled_branch(device):
    out = device.to_device(np.zeros(64, np.uint32))
    first_use_in_unrolled_branch.launch(1, 64, out, device=device)
    t = np.arange(64)
    np.testing.assert_array_equal(out.to_host(), (t - t % 2) * 3 + (t | 1) + 100)


@pytest.mark.parametrize("target", [NvptxTarget("sm_90"), pytest.param(AmdgpuTarget("gfx90a"), marks=pytest.mark.needs_lld),
                                    pytest.param(AmdgpuTarget("gfx1100"), marks=pytest.mark.needs_lld)], ids=lambda t: t.arch)
def test_first_use_compiles_for_gpus(target, monkeypatch):
    monkeypatch.setenv("PYKERN_CACHE", "0")
    kernels = [first_use_in_callee.instance("first_use_in_callee"),
               first_use_in_unrolled_branch.instance("first_use_in_unrolled_branch")]
    artifact, sigs = compile_kernels(kernels, target, "shared_first_use")
    assert artifact and [s.name for s in sigs] == ["first_use_in_callee", "first_use_in_unrolled_branch"]
