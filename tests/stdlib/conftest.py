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
