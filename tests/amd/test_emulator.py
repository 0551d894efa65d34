"""pykern's AMD code objects executed on tinygrad's AMD emulator, compared with the CPU target.

How it works (``_capture.py``, ``_session.py``, ``_worker.py``): every case of the table runs once on
a capturing CPU device at the wave width of each ISA family (32 for RDNA, 64 for CDNA); every launch it
makes is recorded with the bytes of the memory it touches before and after. The launched modules are
built for gfx1100 (RDNA3), gfx1201 (RDNA4), gfx942 and gfx90a (CDNA; one emulator process runs both);
each family's launches run in one child process, which writes each result as it goes (a launch that
takes the process down is reported, and a new worker carries on after it). A test is one case on one
arch: every launch's memory afterwards must match the CPU's, bit for bit (NaN matches NaN) or within
the ulps the case documents; a launch the emulator cannot run is an expected failure only when a row
of ``_limits.py`` names the instruction.

Adding a family (indexing, sort, conv, quantized):

* candle's elementwise ABI (``numel, num_dims, info, ...``): one line in ``_stdlib_cases.py``,
  ``sweep(sk.FAMILY)``, gives every kernel candle's launch, a contiguous ``info`` and a strided one;
* any other ABI: a case function that calls the family's wrappers on arrays made on ``dev``::

      @case("sort/wrappers")
      def _sort(dev):
          x = dev.to_device(values(pk.f32, 7 * 33, rng("sort/wrappers")).reshape(7, 33))
          sort.argsort(x, ascending=True)

* then add the module to ``COVERED_MODULES``, so test_every_kernel_is_launched demands a launch of
  each of its kernels.

Environment: ``PYKERN_AMD_EMU`` (the amd_emu folder; default ``../shared/tools/amd_emu``), ``CACHEDB``
(the emulator's compiled instruction runners; default ``/tmp/amd_emu_tinygrad_cache.db``),
``PYKERN_AMD_EMU_TIMEOUT`` (seconds for a family's batch, default 2400).
"""
from __future__ import annotations

import pytest

from tests.amd._compare import launch_problems
from tests.amd._emulator import ARCHS
from tests.amd._limits import known_limit, known_mismatch
from tests.amd._registry import CASES
from tests.amd import _language_cases, _stdlib_cases  # noqa: F401 - they fill CASES

ARCH_LIST = list(ARCHS)


@pytest.mark.parametrize("arch", ARCH_LIST)
@pytest.mark.parametrize("name", list(CASES))
def test_case(emulator, name, arch):
    case = CASES[name]
    result = emulator.result(name, arch)
    if result.capture_error:
        pytest.fail(f"the case fails on the CPU target itself: {result.capture_error}")
    assert result.launches, f"{name} launched nothing"
    failures, limited = [], []
    for launch, outcome in zip(result.launches, result.outcomes):
        if outcome.status == "ok":
            problems = launch_problems(launch, outcome.buffers, case.tolerance(launch.kernel))
            mismatch = known_mismatch(arch, launch.kernel) if problems else None
            if mismatch is not None:
                limited.append(f"{launch.kernel}: {mismatch.instruction} ({problems[0][:160]})")
            elif problems:
                failures.append(f"{launch.describe()} on {arch}:\n  " + "\n  ".join(problems))
            continue
        limit = known_limit(arch, launch.kernel, outcome.detail)
        if limit is not None:
            limited.append(f"{launch.kernel}: {limit.instruction} ({limit.why})")
        else:
            failures.append(f"{launch.describe()} on {arch}: {outcome.status}: {outcome.detail}")
    if failures:
        pytest.fail(f"{len(failures)} of {len(result.launches)} launches disagree with the CPU target:\n"
                    + "\n".join(failures[:12]))
    if limited:
        pytest.xfail("emulator limit: " + "; ".join(sorted(set(limited))))


@pytest.mark.parametrize("wave_size", [32, 64])
@pytest.mark.parametrize("module", _stdlib_cases.COVERED_MODULES, ids=lambda m: m.name)
def test_every_kernel_is_launched(emulator, module, wave_size):
    launches, _ = emulator.launches(wave_size)
    launched = {launch.kernel for launch in launches if launch.instance.module is module}
    missing = [name for name in module.names() if name not in launched]
    assert not missing, f"no case launches {len(missing)} {module.name} kernels: {missing[:20]}"


def test_docs_list_every_limit():
    """Each known emulator limit is listed, by its instruction, in docs/targets/amdgpu.md."""
    from tests.amd._emulator import REPO
    from tests.amd._limits import LIMITS, MISMATCHES
    page = (REPO / "docs" / "targets" / "amdgpu.md").read_text()
    missing = [lim.instruction for lim in LIMITS + MISMATCHES if f"`{lim.instruction}`" not in page]
    assert not missing, f"docs/targets/amdgpu.md does not list the emulator limits {missing}"
