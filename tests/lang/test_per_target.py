"""``pk.per_target``: a compile-time parameter whose value depends on the target. Each target's code
is typed with its own value, the host reads the same value through ``params_for``, the typed-IR
cache and the source fingerprint tell the values apart, and misuse is refused with a clear error."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import CompileError, ConstPtr, Ptr, f32, u32, usize
from pykern.compiler import lower_module, source_key
from pykern.fingerprint import fingerprint
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.cpu import CpuTarget
from pykern.targets.nvptx import NvptxTarget

#: a value per target no optimiser could produce from anything else in the kernel
MARKS = {"cuda": 1000003, "amdgpu": 2000003, "cpu": 3000003}


@pk.func
def weighted(x: ConstPtr[f32], i: usize, *, width) -> f32:
    """A device function sized by a compile-time argument the kernel passes on."""
    s = f32(0)
    for j in pk.static_range(width):
        s += x[i * width + j] * f32(j + 1)
    return s


@pk.kernel
def tagged(n: usize, x: ConstPtr[f32], out: Ptr[f32], tag: Ptr[u32], *, W, MARK):
    """``out[i]`` = the weighted sum of ``x``'s ``i``-th group of ``W``; ``tag[0]`` = ``MARK``."""
    for i in pk.grid_stride(n):
        out[i] = weighted(x, i, width=W)
    if pk.global_id() == 0:
        tag[0] = u32(MARK)


def _instance(name: str, **params) -> pk.KernelInstance:
    return tagged.instance(name, **params)


def _ir(inst: pk.KernelInstance, target) -> str:
    module, _ = lower_module([inst], target, "per_target")
    return str(module)


def _run_cpu(inst: pk.KernelInstance, wave_size: int = 32) -> tuple[np.ndarray, int, int]:
    """Launch on the CPU target; the width it used is read back from the results."""
    dev = pk.device("cpu", wave_size=wave_size)
    width = inst.params_for(dev.target)["W"]
    n = 37
    x = np.random.default_rng(0).standard_normal(n * width).astype(np.float32)
    out = np.zeros(n, np.float32)
    tag = np.zeros(1, np.uint32)
    inst.launch(2, 32, n, x, out, tag, device=dev)
    want = (x.reshape(n, width).astype(np.float64) * np.arange(1, width + 1)).sum(1)
    assert np.allclose(out, want, rtol=1e-5, atol=1e-5)
    return out, width, int(tag[0])


def test_each_target_compiles_its_own_value():
    inst = _instance("tagged_marks", W=pk.per_target(cuda=4, amdgpu=2, cpu=3), MARK=pk.per_target(**MARKS))
    _, width, tag = _run_cpu(inst)
    assert (width, tag) == (3, MARKS["cpu"])
    for target in (NvptxTarget("sm_90"), AmdgpuTarget("gfx90a"), AmdgpuTarget("gfx1100")):
        text = _ir(inst, target)
        assert str(MARKS[target.name]) in text, target
        assert not any(str(v) in text for k, v in MARKS.items() if k != target.name), target


def test_default_serves_the_targets_not_named():
    inst = _instance("tagged_default", W=pk.per_target(cuda=4, default=2), MARK=7)
    assert inst.params_for("cuda") == {"W": 4, "MARK": 7}
    assert inst.params_for(AmdgpuTarget("gfx942")) == {"W": 2, "MARK": 7}
    assert _run_cpu(inst, wave_size=64)[1:] == (2, 7)
    assert inst.params["W"] == pk.per_target(default=2, cuda=4)  # the instance keeps the table


def test_typed_ir_is_cached_per_value_not_per_target():
    # the CPU target with 64 lanes and gfx90a agree on wave size and tile bytes: only the values differ
    cpu, gfx90a, gfx942 = CpuTarget(wave_size=64), AmdgpuTarget("gfx90a"), AmdgpuTarget("gfx942")
    inst = _instance("tagged_cache", W=pk.per_target(cpu=3, default=2), MARK=1)
    assert inst.typed(cpu) is not inst.typed(gfx90a)
    assert inst.typed(gfx90a) is inst.typed(gfx942)
    same = _instance("tagged_same", W=pk.per_target(cpu=2, default=2), MARK=1)
    assert same.typed(cpu) is same.typed(gfx90a)


def test_fingerprint_and_cache_key_follow_every_targets_value():
    keys = {}
    for name, w in (("a", pk.per_target(cuda=4, default=2)), ("b", pk.per_target(cuda=8, default=2)),
                    ("c", pk.per_target(cuda=4, default=2))):
        inst = _instance("tagged_fp", W=w, MARK=1)
        keys[name] = (fingerprint([inst]), source_key([inst], AmdgpuTarget("gfx90a"), "fp"))
    # changing cuda's value changes the key for amdgpu too: the key covers the whole table
    assert keys["a"][0] != keys["b"][0] and keys["a"][1] != keys["b"][1]
    assert keys["a"] == keys["c"]


@pk.kernel
def reads_a_global(out: Ptr[f32]):
    out[0] = f32(GLOBAL_WIDTH)


GLOBAL_WIDTH = pk.per_target(cuda=16, default=8)


def test_a_per_target_global_read_in_a_kernel_is_refused():
    with pytest.raises(CompileError, match="GLOBAL_WIDTH' is a pk.per_target value: pass it"):
        reads_a_global[1, 1](np.zeros(1, np.float32))


@pytest.mark.parametrize("choices", [
    {"rocm": 2, "default": 1},          # not a target name
    {"cuda": 16, "amdgpu": 8},          # cpu has no value and there is no default
    {"default": 8},                     # nothing chosen per target
    {"cuda": pk.per_target(amdgpu=1, default=2), "default": 3},
])
def test_bad_per_target_is_refused(choices):
    with pytest.raises(ValueError, match="per_target"):
        pk.per_target(**choices)
