"""The compiler's source-level cache key: a hit skips lowering, and any change that can change the
code — a kernel or device function edited, a compile-time parameter, a global the kernel reads, the
target — misses."""
from __future__ import annotations

import importlib.util
import logging
import sys
import textwrap

import pytest

import pykern as pk
from pykern import Ptr, cache, compiler, config, f32, prebuilt, usize
from pykern.targets import registry

SRC = '''
import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize

SCALE = {scale}

@pk.func
def twice(v: f32) -> f32:
    return v * {factor}

@pk.kernel
def k(n: usize, x: ConstPtr[f32], y: Ptr[f32], *, add):
    for i in pk.grid_stride(n):
        y[i] = twice(x[i]) * SCALE + add

MOD = pk.Module("srccache")
MOD.add(k.instance("k_a", add=1.0))
'''

_COUNT = [0]


def load(tmp_path, scale="2.0", factor="2.0", add=None):
    """A fresh import of the kernel file (edited in place, as a user would)."""
    path = tmp_path / "srckernels.py"
    path.write_text(textwrap.dedent(SRC.format(scale=scale, factor=factor)))
    _COUNT[0] += 1
    name = f"_srccache_{_COUNT[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    if add is not None:
        import pykern as pk
        m = pk.Module("srccache")
        m.add(mod.k.instance("k_a", add=add))
        return mod, m
    return mod, mod.MOD


@pytest.fixture
def own_cache(tmp_path):
    with config.override(cache_dir=tmp_path / "cache", cache=None):
        yield


@pytest.fixture
def lowering_counter(monkeypatch):
    calls = []
    real = compiler.lower_module

    def counting(*a, **kw):
        calls.append(a[2])
        return real(*a, **kw)
    monkeypatch.setattr(compiler, "lower_module", counting)
    return calls


@pytest.mark.parametrize("target_name,arch", [("amdgpu", "gfx90a"), ("cuda", "sm_90"), ("cpu", None)])
def test_hit_skips_lowering_and_returns_the_same(own_cache, tmp_path, lowering_counter, target_name, arch,
                                                 caplog):
    _, m = load(tmp_path)
    target = registry.make_target(target_name, arch)
    art, sigs = compiler.build_module(m, target)
    assert lowering_counter == ["srccache"]
    with caplog.at_level(logging.INFO, logger="pykern.compiler"):
        art2, sigs2 = compiler.build_module(m, registry.make_target(target_name, arch))
    assert lowering_counter == ["srccache"]  # no second lowering
    assert art2 == art and sigs2 == sigs
    assert any("cache hit" in r.getMessage() and "source key" in r.getMessage() for r in caplog.records)
    assert compiler.lookup(m.kernels, target, m.name) == (art, sigs)


def test_changes_miss(own_cache, tmp_path, lowering_counter):
    target = registry.make_target("amdgpu", "gfx90a")
    _, m = load(tmp_path)
    base = compiler.build_module(m, target)
    keys = {compiler.source_key(m.kernels, target, m.name)}
    variants = {
        "device function edited": dict(factor="3.0"),
        "global constant changed": dict(scale="4.0"),
        "compile-time parameter changed": dict(add=5.0),
    }
    for why, kw in variants.items():
        _, m2 = load(tmp_path, **kw)
        n = len(lowering_counter)
        key = compiler.source_key(m2.kernels, target, m2.name)
        assert key not in keys, why
        keys.add(key)
        assert compiler.lookup(m2.kernels, target, m2.name) is None, why
        art, _ = compiler.build_module(m2, target)
        assert len(lowering_counter) == n + 1, why
        assert art != base[0], why
    # the original source again: a hit, no lowering
    _, m3 = load(tmp_path)
    n = len(lowering_counter)
    assert compiler.build_module(m3, target) == base
    assert len(lowering_counter) == n


def test_global_changed_at_run_time_misses(own_cache, tmp_path):
    target = registry.make_target("cuda", "sm_90")
    mod, m = load(tmp_path)
    before = compiler.source_key(m.kernels, target, m.name)
    mod.SCALE = 3.0
    assert compiler.source_key(m.kernels, target, m.name) != before


def test_target_and_versions_are_in_the_key(own_cache, tmp_path, monkeypatch):
    _, m = load(tmp_path)
    keys = {compiler.source_key(m.kernels, registry.make_target(t, a), m.name)
            for t, a in [("amdgpu", "gfx90a"), ("amdgpu", "gfx1100"), ("cuda", "sm_80"), ("cuda", "sm_90")]}
    assert len(keys) == 4
    t = registry.make_target("amdgpu", "gfx90a")
    k = compiler.source_key(m.kernels, t, m.name)
    monkeypatch.setattr(compiler, "versions", lambda: {"pykern": "other"})
    assert compiler.source_key(m.kernels, t, m.name) != k


def test_settings_only_the_lowering_reads_share_the_artifact(own_cache, monkeypatch):
    """``tile_bytes`` is in the source key (the grid-stride tiles' IR depends on it) but not in the IR
    key: a kernel without tiles lowers to the same IR under both and is optimised and compiled once,
    one with tiles twice (the test suite's CPU-with-tiles device compiled every kernel again)."""
    from pykern.targets.cpu import CpuTarget

    @pk.kernel
    def no_tiles(n: usize, x: Ptr[f32]):
        i = pk.global_id()
        if i < n:
            x[i] = x[i] * 2.0

    @pk.kernel
    def tiles(n: usize, x: Ptr[f32]):
        for i in pk.grid_stride(n):
            x[i] = x[i] * 2.0

    finalized = []
    real = CpuTarget.finalize
    monkeypatch.setattr(CpuTarget, "finalize", lambda self, *a: finalized.append(self.tile_bytes) or real(self, *a))
    plain, tiled = CpuTarget(wave_size=32), CpuTarget(wave_size=32, tile_bytes=16)
    assert plain.cache_key() != tiled.cache_key() and plain.artifact_key() == tiled.artifact_key()
    for k in (no_tiles, tiles):
        for target in (plain, tiled):
            compiler.compile_kernels([k._only_instance()], target, k.name)
    assert finalized == [0, 0, 16]


def test_damaged_or_foreign_entry_is_a_miss(own_cache, tmp_path, lowering_counter):
    target = registry.make_target("cuda", "sm_90")
    _, m = load(tmp_path)
    art, sigs = compiler.build_module(m, target)
    key = compiler.source_key(m.kernels, target, m.name)
    cache.put(key, b"not a source entry")
    assert compiler.lookup(m.kernels, target, m.name) is None
    assert compiler.build_module(m, target) == (art, sigs)  # recompiled (IR key hit), entry rewritten
    assert compiler.lookup(m.kernels, target, m.name) == (art, sigs)


def test_disabled_cache_always_lowers(tmp_path, lowering_counter):
    with config.override(cache_dir=tmp_path / "cache", cache=False):
        _, m = load(tmp_path)
        target = registry.make_target("cuda", "sm_90")
        compiler.build_module(m, target)
        compiler.build_module(m, target)
        assert len(lowering_counter) == 2
        assert compiler.lookup(m.kernels, target, m.name) is None


def test_device_load_module_uses_it(own_cache, tmp_path, lowering_counter):
    import pykern as pk
    _, m = load(tmp_path)
    pk.device("cpu").load_module(m)
    assert len(lowering_counter) == 1
    pk.device("cpu").load_module(m)  # a new device: a new slot, but the source key hits
    assert len(lowering_counter) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="the compile lock is POSIX flock; Windows compiles twice")
def test_a_second_process_waits_for_the_first_compile(own_cache, tmp_path, lowering_counter):
    """While another process holds a key's compile (here: a child holding ``cache.compiling``, then
    writing the entry as a compile would), this process waits, then takes the entry: no lowering."""
    import multiprocessing as mp
    import time

    _, m = load(tmp_path)
    target = registry.make_target("cuda", "sm_90")
    art, sigs = compiler.build_module(m, target)  # the entry the child will put back
    skey = compiler.source_key(m.kernels, target, m.name)
    blob = cache.get(skey)
    cache.clear()
    lowering_counter.clear()
    ctx = mp.get_context("fork")
    held = ctx.Event()
    child = ctx.Process(target=_hold_then_put, args=(str(tmp_path / "cache"), skey, blob, held))
    child.start()
    try:
        assert held.wait(30)
        start = time.monotonic()
        assert compiler.build_module(m, target) == (art, sigs)
        assert time.monotonic() - start >= 0.5  # it waited for the child's put ...
        assert lowering_counter == []            # ... and compiled nothing itself
    finally:
        child.join(30)
    assert child.exitcode == 0


def _hold_then_put(cache_dir: str, skey: str, blob: bytes, held) -> None:
    import time
    with config.override(cache_dir=cache_dir, cache=None), cache.compiling(skey):
        held.set()
        time.sleep(1.0)
        cache.put(skey, blob)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX flock")
def test_a_held_compile_lock_times_out(own_cache):
    """A holder that never lets go (hung, stopped in a debugger) costs a bounded wait, then this
    process compiles anyway."""
    import fcntl
    import os
    import time

    k = cache.key("held")
    path = config.cache_dir() / "locks" / k[:2] / f"{k}.lock"
    path.parent.mkdir(parents=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: it conflicts even in-process
    try:
        start = time.monotonic()
        with cache.compiling(k, wait_s=0.3):
            pass
        assert 0.3 <= time.monotonic() - start < 5
    finally:
        os.close(fd)
