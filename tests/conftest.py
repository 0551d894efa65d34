"""Test configuration: every kernel test runs on the CPU, and on a CUDA GPU when one is present."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import pykern as pk
from pykern.runtime.devices import _available

GPU_KINDS = [k for k in ("cuda", "hip") if _available(k)]


def _lld_missing() -> str | None:
    from pykern.targets.linker import LinkerError, find_lld
    try:
        find_lld()
    except LinkerError as exc:
        return f"no ld.lld to link AMDGPU code objects here ({exc.args[0][:60]}...; CI installs the amdgpu extra)"
    return None


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.needs_lld`` (tests that link AMDGPU code objects): skip, with the reason, where
    no ld.lld is installed."""
    marked = [item for item in items if item.get_closest_marker("needs_lld")]
    reason = _lld_missing() if marked else None
    for item in marked if reason else ():
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(params=["cpu"] + GPU_KINDS)
def device(request):
    """Each available device kind; the CPU emulates wave64."""
    return pk.device(request.param)


@pytest.fixture(params=[("cpu", 32), ("cpu", 64)] + [(k, None) for k in GPU_KINDS], ids=lambda p: f"{p[0]}{p[1] or ''}")
def wave_device(request):
    """Devices for wave-width-sensitive tests: the CPU at widths 32 and 64, and any GPU."""
    kind, width = request.param
    return pk.device(kind, wave_size=width) if width else pk.device(kind)


@pytest.fixture(scope="session")
def run_cache_dir(tmp_path_factory):
    """The pykern disk cache of this test run, one for all its xdist workers: the stdlib tests and the
    AMD emulator layer (tests/amd) compile the same stdlib kernels for the CPU at wave widths 32 and
    64, and with a cache per worker each compiled them again. Sharing is safe: an entry is keyed by
    the whole compile key and written to a temporary file then renamed into place (pykern/cache.py),
    so workers writing the same key at once each leave a whole entry. ``PYKERN_TEST_CACHE`` names a
    folder to use instead, kept across runs (a warm rerun, or a measurement of what a warm cache saves)."""
    if os.environ.get("PYKERN_TEST_CACHE"):
        return Path(os.environ["PYKERN_TEST_CACHE"])
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # xdist gives each worker <the run's basetemp>/popen-gwN
    return base / "pykern-cache"


@pytest.fixture(autouse=True)
def _isolated_cache(run_cache_dir, monkeypatch):
    """Tests compile into the test run's cache, never the user's."""
    monkeypatch.setenv("PYKERN_CACHE_DIR", str(run_cache_dir))


#: the longest test files, the AMD emulator layer's two halves (most of a CI run): with
#: ``--dist loadfile`` each goes to a worker of its own before any other file is handed out
LONG_FILES = ("tests/amd/test_emulator.py", "tests/amd/test_emulator_families.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, except that the files of ``LONG_FILES`` are handed out first. xdist's
    scheduler gives each worker one file to start with, then the next queued file (queued by test
    count) whenever a worker has two tests left; the second half of the emulator layer came up late
    in that queue and went to the worker that had run the first, so the layer ran serially on one
    worker while the other was idle. Handed out first, the two halves start on two workers (when
    there are two)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            first = next((scope for scope in self.workqueue if scope in LONG_FILES), None)
            if first is not None:
                self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return LongFilesFirst(config, log)
