"""The emulator layer's second half: indexing, sort, conv (with the matmul module its wrappers
multiply with) and quantized, whose kernels have their own ABIs (``_family_cases.py``), on the same
archs and by the same rules as ``test_emulator.py`` (whose docstring says how the layer works). A file
of its own, so that xdist runs it beside the first half on another worker (tests/conftest.py's
scheduler hands the two out first)."""
from __future__ import annotations

import pytest

from tests.amd._checks import cases_of, check_case, check_every_kernel_launched, modules_of
from tests.amd._emulator import ARCHS
from tests.amd._session import start_selected

GROUP = "families"
ARCH_LIST = list(ARCHS)


@pytest.fixture(scope="module", autouse=True)
def _started(request):
    start_selected(request, GROUP)


@pytest.mark.parametrize("arch", ARCH_LIST)
@pytest.mark.parametrize("name", cases_of(GROUP))
def test_case(emulator, name, arch):
    check_case(emulator, name, arch)


@pytest.mark.parametrize("wave_size", [32, 64])
@pytest.mark.parametrize("module", modules_of(GROUP), ids=lambda m: m.name)
def test_every_kernel_is_launched(emulator, module, wave_size):
    check_every_kernel_launched(emulator, module, wave_size)
