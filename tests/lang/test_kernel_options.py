"""``@pk.kernel``'s launch bounds reach each target's code: ``max_block_size`` and ``min_blocks_per_sm``
(an int for every target, or a mapping that bounds only the targets it names)."""
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
