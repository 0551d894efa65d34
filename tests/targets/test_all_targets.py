"""Every primitive the lowering emits compiles for every target and arch (a process-killing LLVM
failure here would take the test run down with it, which is the point: none may exist)."""
from __future__ import annotations

import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, usize
from pykern.compiler import compile_kernels
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.amdgpu_archs import ARCHS
from pykern.targets.nvptx import NvptxTarget

T = pk.TypeVar("T")
U = pk.TypeVar("U")


@pk.kernel
def primitives(n: usize, x: ConstPtr[T], y: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        a = x[i]
        b = pk.sqrt(pk.fabs(a)) + pk.floor(a) - pk.ceil(a) * pk.trunc(a) + pk.rint(a)
        b = pk.fma(a, b, pk.copysign(a, b)) + pk.fmin(a, b) + pk.fmax(a, b)
        b = pk.minimum(a, b) - pk.maximum(a, b) + a % b + a // b - (-a) / b
        if pk.isnan(b) or pk.isinf(b) or a != b:
            b = abs(b)
        y[i] = b


@pk.kernel
def convert(n: usize, x: ConstPtr[T], y: Ptr[U], *, T, U):
    for i in pk.grid_stride(n):
        y[i] = U(x[i])


@pk.kernel
def integer(n: usize, x: ConstPtr[T], y: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        a = x[i]
        y[i] = (a // (a - 3)) % (a + 7) + (a << 3) + (a >> 1) + (a & 5 | 2 ^ a) + abs(a) + min(a, a * 2) + max(a, 1)


@pk.kernel
def atomics(x: Ptr[T], v: T, *, T):
    pk.atomic.add(x, 0, v)
    pk.atomic.max(x, 1, v)
    pk.atomic.min(x, 2, v)
    pk.atomic.exchange(x, 3, v)
    pk.atomic.cas(x, 4, v, v)
    sm = pk.shared.array(64, T)
    pk.atomic.add(sm, pk.thread_idx.x, v)
    pk.syncthreads()
    x[5] = pk.wave.sum(sm[pk.thread_idx.x]) + pk.wave.shuffle_down(v, 1)


def _module():
    mod = pk.Module("all_targets")
    floats = (pk.f16, pk.bf16, pk.f32, pk.f64, pk.f8e4m3)
    for t in floats:
        mod.add(primitives.instance(f"prim_{t.tag}", T=t))
    for t in (pk.i8, pk.u8, pk.i16, pk.u16, pk.i32, pk.u32, pk.i64, pk.u64):
        mod.add(integer.instance(f"int_{t.tag}", T=t))
    everything = floats + (pk.bool_, pk.i8, pk.u8, pk.i16, pk.i32, pk.u32, pk.i64, pk.u64)
    for a in everything:
        for b in everything:
            if a is not b:
                mod.add(convert.instance(f"cvt_{a.tag}_{b.tag}", T=a, U=b))
    for t in (pk.i32, pk.u32, pk.i64, pk.u64, pk.f32, pk.f64):
        mod.add(atomics.instance(f"atomic_{t.tag}", T=t))
    return mod


MODULE = _module()
TARGETS = [AmdgpuTarget(a) for a in sorted(ARCHS)] + [NvptxTarget(a) for a in ("sm_80", "sm_90")]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.arch)
def test_every_primitive_compiles(target, monkeypatch):
    monkeypatch.setenv("PYKERN_CACHE", "0")
    artifact, sigs = compile_kernels(MODULE.kernels, target, MODULE.name)
    assert len(sigs) == len(MODULE) and artifact
