"""pykern's AMD code objects executed on tinygrad's AMD emulator, compared with the CPU target: the
cases of candle's elementwise families (affine, binary, cast, fill, ternary, unary), reduce and the
language's own features. ``test_emulator_families.py`` runs those of indexing, sort, conv (with the
matmul module) and quantized the same way; two files, which tests/conftest.py's scheduler starts on two
xdist workers before any other file (test_the_halves_start_on_two_workers).

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


def test_the_halves_start_on_two_workers(request):
    """Under ``--dist loadfile`` (pyproject.toml's addopts) the layer's two files go to two xdist
    workers before any other file is handed out (tests/conftest.py's scheduler), even where they hold
    the fewest tests and are collected last, which is where plain loadfile let one worker take both."""
    pytest.importorskip("xdist")
    import types

    from tests.amd._emulator import REPO
    conftest = request.config.pluginmanager.get_plugin(str(REPO / "tests" / "conftest.py"))
    layer = {f"tests/amd/{path.name}" for path in (REPO / "tests" / "amd").glob("test_*.py")}
    assert set(conftest.LONG_FILES) == layer, "tests/conftest.py's LONG_FILES must name every file of the layer"

    class Config:
        option = types.SimpleNamespace(loadscopereorder=True)

        def getvalue(self, name):
            return {"dist": "loadfile", "tx": ["3*popen"]}[name]

    class Node:
        shutting_down = False
        gateway = types.SimpleNamespace(id="gw")

        def __init__(self):
            self.sent: list[int] = []

        def send_runtest_some(self, indices):
            self.sent += indices

        def shutdown(self):
            self.shutting_down = True

    small = [f"tests/stdlib/test_{n}.py::test_{i}" for n in ("a", "b", "c") for i in range(50)]
    collection = small + [f"{path}::test_{i}" for path in sorted(layer) for i in range(3)]
    scheduler = conftest.pytest_xdist_make_scheduler(config=Config(), log=None)
    nodes = [Node() for _ in range(3)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    files = [{collection[i].split("::")[0] for i in node.sent} for node in nodes]
    assert files[:2] == [{path} for path in conftest.LONG_FILES] and not files[2] & layer, files
