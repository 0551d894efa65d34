"""The stdlib's kernel tests also run on the CPU with the GPU's grid-stride tiles (``tile_bytes=16``,
``pykern/lower/tiles.py``), so the code path the cuda target takes is checked on every layout here."""
from __future__ import annotations

import pytest

import pykern as pk
from tests.conftest import GPU_KINDS


@pytest.fixture(params=["cpu", "cpu-tiles"] + GPU_KINDS)
def device(request):
    if request.param == "cpu-tiles":
        return pk.device("cpu", tile_bytes=16)
    return pk.device(request.param)


@pytest.fixture(params=[("cpu", 32, 0), ("cpu", 64, 0), ("cpu", 32, 16)] + [(k, None, 0) for k in GPU_KINDS],
                ids=lambda p: f"{p[0]}{p[1] or ''}{'-tiles' if p[2] else ''}")
def wave_device(request):
    """The CPU at wave widths 32 and 64, the CPU with the GPU's tiles at width 32 (NVIDIA's), any GPU."""
    kind, width, tiles = request.param
    if kind != "cpu":
        return pk.device(kind)
    return pk.device(kind, wave_size=width, tile_bytes=tiles) if tiles else pk.device(kind, wave_size=width)
