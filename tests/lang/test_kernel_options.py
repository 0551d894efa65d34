"""``@pk.kernel``'s launch bounds reach each target's code: ``max_block_size`` and ``min_blocks_per_sm``
(an int for every target, or a mapping that bounds only the targets it names); and its
``loop_strength_reduction`` choice, per target and per module."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
from pykern.compiler import lower_module
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.nvptx import NvptxTarget


def _scale(n: usize, x: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.grid_stride(n):
        out[i] = x[i] * 2.0


def _ir(kdef: pk.KernelDef, target) -> str:
    module, _ = lower_module([kdef._only_instance()], target, "options")
    return str(module)


@pytest.mark.parametrize("bound, cuda, amdgpu", [
    (0, None, None),
    (2, '"nvvm.minctasm"="2"', '"amdgpu-waves-per-eu"="8"'),  # 2 blocks of 1024 = 32 waves of 64 over 4 SIMDs
    ({"cuda": 2}, '"nvvm.minctasm"="2"', None),
    ({"amdgpu": 1}, None, '"amdgpu-waves-per-eu"="4"'),
])
def test_min_blocks_per_sm_per_target(bound, cuda, amdgpu):
    kdef = pk.kernel(min_blocks_per_sm=bound)(_scale)
    for target, want, absent in ((NvptxTarget("sm_90"), cuda, "nvvm.minctasm"),
                                 (AmdgpuTarget("gfx90a"), amdgpu, "amdgpu-waves-per-eu")):
        text = _ir(kdef, target)
        assert (want in text) if want else (absent not in text), (bound, target.name)


def test_a_per_target_bound_launches_on_the_cpu():
    kdef = pk.kernel(min_blocks_per_sm={"cuda": 2, "amdgpu": 1})(_scale)
    x = np.arange(37, dtype=np.float32)
    out = np.zeros_like(x)
    kdef[2, 32](x.size, x, out)
    assert np.array_equal(out, x * 2)


@pytest.mark.parametrize("bad", [-1, True, 1.5, {"rocm": 2}, {"cuda": -2}])
def test_bad_min_blocks_per_sm_is_refused(bad):
    with pytest.raises(ValueError, match="min_blocks_per_sm"):
        pk.kernel(min_blocks_per_sm=bad)(_scale)


def _lsr(kdefs, target) -> bool:
    module, _ = lower_module([k.instance(f"k{i}") for i, k in enumerate(kdefs)], target, "options")
    return module.loop_strength_reduction


@pytest.mark.parametrize("option, cuda, amdgpu", [
    (True, True, True),
    (False, False, False),
    ({"cuda": False}, False, True),
    ({"amdgpu": False, "cuda": True}, True, False),
])
def test_loop_strength_reduction_per_target(option, cuda, amdgpu):
    kdef = pk.kernel(loop_strength_reduction=option)(_scale)
    assert _lsr([kdef], NvptxTarget("sm_90")) is cuda
    assert _lsr([kdef], AmdgpuTarget("gfx90a")) is amdgpu


def test_loop_strength_reduction_stays_on_unless_every_kernel_opts_out():
    """LLVM's switch is per module: one kernel that keeps LSR keeps it for the module's code."""
    off = pk.kernel(loop_strength_reduction={"cuda": False})(_scale)
    on = pk.kernel(_scale)
    cuda = NvptxTarget("sm_90")
    assert _lsr([off, pk.kernel(loop_strength_reduction=False)(_scale)], cuda) is False
    assert _lsr([off, on], cuda) is True


def test_loop_strength_reduction_changes_the_code_and_the_cache_key():
    """The option reaches LLVM (the PTX of a strided loop differs) and the source-level cache key, so
    a cached artifact built with LSR is not answered for a kernel that turned it off."""
    from pykern.fingerprint import fingerprint

    on = pk.kernel(_strided)
    off = pk.kernel(loop_strength_reduction={"cuda": False})(_strided)
    cuda = NvptxTarget("sm_90")
    asm = [cuda.assembly(lower_module([k._only_instance()], cuda, "options")[0]) for k in (on, off)]
    assert asm[0] != asm[1]
    assert fingerprint([on._only_instance()]) != fingerprint([off._only_instance()])


def _strided(n: usize, x: ConstPtr[f32], out: Ptr[f32]):
    """A loop over several arrays whose addresses LSR rewrites into one induction variable."""
    s = f32(0.0)
    for i in range(n):
        s += x[i * 3] * x[i * 3 + 1]
        out[i * 2] = s


@pytest.mark.parametrize("bad", [0, 1, "no", None, {"rocm": False}, {"cuda": 0}])
def test_bad_loop_strength_reduction_is_refused(bad):
    with pytest.raises(ValueError, match="loop_strength_reduction"):
        pk.kernel(loop_strength_reduction=bad)(_scale)


def test_the_stdlib_elementwise_families_opt_out_on_cuda_only():
    """affine, binary, cast, fill, ternary and unary were measured as fast without LSR on an H100
    (docs/cli.md); reduce (fast_argmax) and the rest keep it; no target lists module names."""
    import stdlib_kernels

    cuda, amdgpu = NvptxTarget("sm_90"), AmdgpuTarget("gfx90a")
    for name in ("affine", "binary", "cast", "fill", "ternary", "unary", "reduce", "quantized"):
        kernels = stdlib_kernels.module(name).kernels
        off = name not in ("reduce", "quantized")
        assert all(k.kdef.lsr_for("cuda") is not off for k in kernels), name
        assert all(k.kdef.lsr_for("amdgpu") for k in kernels), name
    assert not hasattr(cuda, "no_lsr_modules") and not hasattr(amdgpu, "no_lsr_modules")
