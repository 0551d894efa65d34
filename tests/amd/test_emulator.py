"""pykern's AMD code objects executed on tinygrad's AMD emulator, compared with the CPU target: the
cases of candle's elementwise families (affine, binary, cast, fill, ternary, unary), reduce and the
language's own features. ``test_emulator_families.py`` runs those of indexing, sort, conv (with the
matmul module) and quantized the same way; two files, so that xdist's ``loadfile`` gives the layer two
workers.

How it works (``_capture.py``, ``_session.py``, ``_worker.py``): every case of the file's half runs once
on a capturing CPU device at the wave width of each ISA family (32 for RDNA, 64 for CDNA); every launch
it makes is recorded with the bytes of the memory it touches before and after. The launched modules are
built for gfx1100 (RDNA3), gfx1201 (RDNA4), gfx942 and gfx90a (CDNA; one emulator process runs both);
each family's launches run in one child process, which writes each result as it goes (a launch that
takes the process down is reported, and a new worker carries on after it). A test is one case on one
arch: every launch's memory afterwards must match the CPU's, bit for bit (NaN matches NaN) or within
the ulps the case documents; a launch the emulator cannot run, or an instruction it computes wrongly,
is an expected failure only when a row of ``_limits.py`` names the instruction (``_checks.py``).

Adding a family:

* candle's elementwise ABI (``numel, num_dims, info, ...``): one line in ``_stdlib_cases.py``,
  ``sweep(sk.FAMILY)``, gives every kernel candle's launch, a contiguous ``info`` and a strided one;
* any other ABI: case functions (``_family_cases.py`` has indexing's, sort's, conv's and quantized's)
  that launch each kernel by name under candle's launch and call the family's wrappers, on arrays made
  on ``dev``::

      @case("sort/wrappers")
      def _sort(dev):
          x = dev.to_device(values(pk.f32, 7 * 33, rng("sort/wrappers")).reshape(7, 33))
          sort.argsort(x, ascending=True)

  (a case's name prefix, ``_registry.FAMILY_PREFIXES``, puts it in one file's half or the other);
* then add the module to ``_stdlib_cases.COVERED_MODULES``, so test_every_kernel_is_launched demands
  a launch of each of its kernels.

Environment: ``PYKERN_AMD_EMU`` (the amd_emu folder; default ``../shared/tools/amd_emu``), ``CACHEDB``
(the emulator's compiled instruction runners; default ``/tmp/amd_emu_tinygrad_cache.db``),
``PYKERN_AMD_EMU_TIMEOUT`` (seconds for a family's batch, default 2400), ``PYKERN_AMD_TEST_CACHE``
(pykern's build cache for the layer; default the session's).
"""
from __future__ import annotations

import pytest

from tests.amd._checks import cases_of, check_case, check_every_kernel_launched, modules_of
from tests.amd._emulator import ARCHS
from tests.amd._session import start_selected

GROUP = "core"
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


def test_docs_list_every_limit():
    """Each known emulator limit is listed, by its instruction, in docs/targets/amdgpu.md."""
    from tests.amd._emulator import REPO
    from tests.amd._limits import LIMITS, MISMATCHES
    page = (REPO / "docs" / "targets" / "amdgpu.md").read_text()
    missing = [lim.instruction for lim in LIMITS + MISMATCHES if f"`{lim.instruction}`" not in page]
    assert not missing, f"docs/targets/amdgpu.md does not list the emulator limits {missing}"
