"""The disk cache stays under its size cap, dropping the least recently used entries first, and
``pykern cache ls`` says what each entry holds."""
from __future__ import annotations

import io
import os
import time

import pytest

from pykern import cache, config
from pykern.cli import commands


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYKERN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYKERN_CACHE", raising=False)
    monkeypatch.delenv("PYKERN_CACHE_MAX", raising=False)
    return tmp_path


def _age(k: str, seconds_ago: float) -> None:
    path = config.cache_dir() / cache.NAMESPACE / k[:2] / f"{k}.bin"
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def test_prune_removes_the_least_recently_used_first(own_cache):
    keys = [cache.key("entry", i) for i in range(6)]
    for i, k in enumerate(keys):
        cache.put(k, bytes(1000), label=f"k{i} cuda sm_90")
        _age(k, 600 - 100 * i)           # keys[0] oldest ... keys[5] newest
    _age(keys[0], 0)                      # keys[0] just used (as a hit does)
    assert cache.get(keys[1]) is not None  # a hit marks keys[1] used now too
    removed, freed = cache.prune(4 * 1100)
    left = set(cache.entries())
    assert keys[0] in left and keys[1] in left and keys[5] in left
    assert keys[2] not in left and keys[3] not in left
    assert removed == len(keys) - len(left) and freed > 0
    assert cache.stats()[1] <= 4 * 1100 * 0.9 + 200


def test_puts_prune_to_the_configured_cap(own_cache, monkeypatch):
    monkeypatch.setenv("PYKERN_CACHE_MAX", "20K")
    monkeypatch.setattr(cache, "_PRUNE_EVERY", 1)
    for i in range(40):
        cache.put(cache.key("many", i), bytes(2000))
    assert cache.stats()[1] <= 20 * 1024


def test_sizes_parse():
    assert config.parse_size("4G") == 4 << 30 and config.parse_size("500M") == 500 << 20
    assert config.parse_size("1.5k") == 1536 and config.parse_size("123") == 123 and config.parse_size("2GiB") == 2 << 30
    for bad in ("lots", "-1G", ""):
        with pytest.raises(ValueError):
            config.parse_size(bad)


def test_cache_ls_is_a_table_of_what_entries_hold(own_cache):
    cache.put(cache.key("a"), b"x" * 3000, label="unary.uexp_f32 amdgpu gfx90a")
    cache.put(cache.key("b"), b"y" * 10, label="")
    out = io.StringIO()
    commands.cmd_cache("ls", out)
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:4] == ["kernels", "target", "/", "arch"]
    row = next(line for line in lines if line.startswith("unary.uexp_f32"))
    assert "amdgpu gfx90a" in row and "KiB" in row
    assert lines[-1].startswith("2 entries") and "PYKERN_CACHE_MAX" in lines[-1]
    out = io.StringIO()
    commands.cmd_cache("prune", out, max_size="1K")
    assert "removed 1 least recently used" in out.getvalue() or "removed 2" in out.getvalue()
    with pytest.raises(commands.UsageError, match="not a size"):
        commands.cmd_cache("prune", io.StringIO(), max_size="1X")
