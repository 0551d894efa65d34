"""Issue 25: a cache entry that is intact but filed under another kernel's key is found out.

Before the entry header carried its key, an artifact copied over another kernel's entry passed its
checksum, loaded, and the missing kernel symbol crashed the process on every later run.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import pykern as pk
from pykern import Ptr, cache, config, f32, usize
from pykern.compiler import compile_kernels, source_key


@pk.kernel
def k_twice(n: usize, y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = 2.0 * y[i]


@pk.kernel
def k_thrice(n: usize, y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = 3.0 * y[i]


def _entry(root: Path, k: str) -> Path:
    return root / cache.NAMESPACE / k[:2] / f"{k}.bin"


def _plant_foreign_entries(root: Path, target) -> None:
    """Compile both kernels, then overwrite k_thrice's entries (source and IR keys) with k_twice's."""
    twice, thrice = k_twice.instance(), k_thrice.instance()
    before = set(cache.entries())
    compile_kernels([twice], target, "twice")
    mid = set(cache.entries())
    compile_kernels([thrice], target, "thrice")
    after = set(cache.entries())
    s_twice, s_thrice = source_key([twice], target, "twice"), source_key([thrice], target, "thrice")
    (ir_twice,), (ir_thrice,) = mid - before - {s_twice}, after - mid - {s_thrice}
    for src, dst in ((s_twice, s_thrice), (ir_twice, ir_thrice)):
        _entry(root, dst).write_bytes(_entry(root, src).read_bytes())


def _run_thrice(dev, target) -> np.ndarray:
    artifact, sigs = compile_kernels([k_thrice.instance()], target, "thrice")
    fn = dev.get_function(dev.load_artifact(artifact, sigs), "k_thrice")
    y = np.ones(16, np.float32)
    dev.launch_packed(fn, (1, 1, 1), (16, 1, 1), 0, None, bytearray(np.array([16, y.ctypes.data], np.uint64).tobytes()),
                      sigs[0])
    return y


def test_an_entry_of_another_kernel_is_discarded_and_rebuilt(tmp_path, caplog):
    dev = pk.device("cpu")
    with config.override(cache_dir=tmp_path, cache=None):
        _plant_foreign_entries(tmp_path, dev.target)
        with caplog.at_level(logging.WARNING, logger="pykern.cache"):
            y = _run_thrice(dev, dev.target)
        assert (y == 3.0).all()
        assert "intact but belongs to key" in caplog.text
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pykern.cache"):  # rebuilt: the next run hits cleanly
            assert (_run_thrice(dev, dev.target) == 3.0).all()
        assert "belongs to key" not in caplog.text


def test_a_read_only_cache_with_a_foreign_entry_still_works(tmp_path, caplog, monkeypatch):
    dev = pk.device("cpu")
    with config.override(cache_dir=tmp_path, cache=None):
        _plant_foreign_entries(tmp_path, dev.target)

        def refuse(self, *args, **kwargs):
            raise PermissionError(13, "Read-only file system", str(self))
        monkeypatch.setattr(Path, "unlink", refuse)  # as on a read-only mount (root ignores chmod)
        monkeypatch.setattr("tempfile.mkstemp", lambda *a, **k: (_ for _ in ()).throw(PermissionError(13, "read-only")))
        with caplog.at_level(logging.WARNING, logger="pykern.cache"):
            y = _run_thrice(dev, dev.target)
        assert (y == 3.0).all()
        assert "could not remove cache entry" in caplog.text and "could not write cache entry" in caplog.text


def test_an_entry_of_the_previous_format_is_a_quiet_miss(tmp_path, caplog):
    with config.override(cache_dir=tmp_path, cache=None):
        k = cache.key("old format")
        path = _entry(tmp_path, k)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"PYKC" + bytes(40) + b"payload")
        with caplog.at_level(logging.WARNING, logger="pykern.cache"):
            assert cache.get(k) is None
        assert not caplog.text
        cache.put(k, b"new")
        assert cache.get(k) == b"new"
