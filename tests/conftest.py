"""Test configuration: every kernel test runs on the CPU, and on a CUDA GPU when one is present."""
from __future__ import annotations

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


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Tests compile into a per-session cache, never the user's."""
    monkeypatch.setenv("PYKERN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "pykern-cache"))
