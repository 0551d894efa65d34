"""The emulator layer's session: one ``EmulatorSession`` per test session (per xdist worker), shared by
both test files of ``tests/amd`` (see ``test_emulator.py``); each file starts its own half."""
from __future__ import annotations

import json
import os

import pytest

from tests.amd._emulator import unavailable_reason
from tests.amd._session import EmulatorSession


@pytest.fixture(scope="session")
def emulator(tmp_path_factory, run_cache_dir):
    """The session's emulator runs; skips every test of the layer, with the reason, where the
    emulator or what it needs is absent."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as patch:
        # builds go to the test run's cache, which the stdlib tests share (tests/conftest.py; its
        # function-scoped fixture comes later); PYKERN_AMD_TEST_CACHE keeps them across sessions while
        # working on this layer
        cache = os.environ.get("PYKERN_AMD_TEST_CACHE") or str(run_cache_dir)
        patch.setenv("PYKERN_CACHE_DIR", cache)
        # each test file starts its half on its selected archs (_session.start_selected)
        session = EmulatorSession(tmp_path_factory.mktemp("amd_emu"))
        yield session
    print("\n[amd emulator] " + json.dumps({k: round(v, 1) for k, v in session.timings.items()}, indent=1))
