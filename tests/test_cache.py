"""The on-disk artifact cache: roundtrip, configuration, damage detection, concurrent writers."""
from __future__ import annotations

import logging
import multiprocessing as mp
import sys

import pytest

from pykern import cache, config


@pytest.fixture(autouse=True)
def cache_dir(tmp_path):
    """Every test gets its own empty, enabled cache."""
    with config.override(cache_dir=tmp_path / "cache", cache=None):
        yield tmp_path / "cache"


def entry_file(cache_dir, k):
    return cache_dir / "v1" / k[:2] / f"{k}.bin"


def test_roundtrip(cache_dir):
    k = cache.key("gfx942", b"\x00ir", 3)
    cache.put(k, b"code object")
    assert cache.get(k) == b"code object"
    assert entry_file(cache_dir, k).is_file()


def test_miss():
    assert cache.get(cache.key("never stored")) is None


def test_empty_payload_roundtrips():
    k = cache.key("empty")
    cache.put(k, b"")
    assert cache.get(k) == b""


def test_key_is_stable_and_unambiguous():
    assert cache.key("a", b"b") == cache.key("a", b"b")
    assert cache.key("ab", "c") != cache.key("a", "bc")
    assert cache.key("1") != cache.key(1) != cache.key(b"1")
    assert len(cache.key()) == 64
    with pytest.raises(TypeError):
        cache.key(1.5)


def test_rejects_non_keys():
    with pytest.raises(ValueError):
        cache.get("../../etc/passwd")


def test_cache_dir_knob_moves_it(tmp_path):
    k = cache.key("moved")
    cache.put(k, b"one")
    other = tmp_path / "elsewhere"
    with config.override(PYKERN_CACHE_DIR=other):
        assert cache.get(k) is None
        cache.put(k, b"two")
        assert entry_file(other, k).is_file()
        assert cache.get(k) == b"two"
    assert cache.get(k) == b"one"


def test_default_dir_is_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("PYKERN_CACHE_DIR")
    if sys.platform.startswith("linux"):
        assert config.cache_dir() == tmp_path / "xdg" / "pykern"


def test_disabled(cache_dir):
    k = cache.key("off")
    cache.put(k, b"kept")
    with config.override(cache=False):
        assert not config.cache_enabled()
        assert cache.get(k) is None
        cache.put(cache.key("other"), b"dropped")
    assert cache.entries() == [k]


def test_truncated_entry_is_discarded_and_rebuilt(cache_dir):
    k = cache.key("truncated")
    cache.put(k, b"x" * 1000)
    path = entry_file(cache_dir, k)
    path.write_bytes(path.read_bytes()[:500])
    assert cache.get(k) is None
    assert not path.exists()
    cache.put(k, b"x" * 1000)
    assert cache.get(k) == b"x" * 1000


@pytest.mark.parametrize("cut", [0, 3, 20])
def test_entry_shorter_than_header_is_a_miss(cache_dir, cut):
    k = cache.key("short", cut)
    cache.put(k, b"payload")
    path = entry_file(cache_dir, k)
    path.write_bytes(path.read_bytes()[:cut])
    assert cache.get(k) is None
    assert not path.exists()


def test_corrupted_payload_byte_is_detected(cache_dir):
    k = cache.key("flipped")
    cache.put(k, b"abcdefgh" * 64)
    path = entry_file(cache_dir, k)
    blob = bytearray(path.read_bytes())
    blob[-10] ^= 0x01
    path.write_bytes(bytes(blob))
    assert cache.get(k) is None
    assert not path.exists()


def test_bad_magic_is_detected(cache_dir):
    k = cache.key("magic")
    cache.put(k, b"data")
    path = entry_file(cache_dir, k)
    path.write_bytes(b"XXXX" + path.read_bytes()[4:])
    assert cache.get(k) is None


def _writer(barrier, k, payload, rounds):
    for _ in range(rounds):
        barrier.wait(30)  # a crashed peer breaks the barrier instead of hanging the test
        cache.put(k, payload)


def _reader(barrier, k, payload, rounds):
    """Once the entry exists, every read must see it whole: a torn write would read as a miss."""
    for _ in range(rounds):
        barrier.wait(30)  # a crashed peer breaks the barrier instead of hanging the test
        for _ in range(50):
            assert cache.get(k) == payload


def test_concurrent_writers_of_one_key(cache_dir):
    """Processes released together by a barrier rewrite one key while another reads it."""
    k = cache.key("contended")
    payload = bytes(range(256)) * 8192  # 2 MiB: a wide window for a torn write to show
    cache.put(k, payload)
    ctx = mp.get_context("spawn")  # children read PYKERN_CACHE_DIR from the inherited env
    writers, rounds = 4, 5
    barrier = ctx.Barrier(writers + 1)
    procs = [ctx.Process(target=_writer, args=(barrier, k, payload, rounds), daemon=True)
             for _ in range(writers)]
    procs.append(ctx.Process(target=_reader, args=(barrier, k, payload, rounds), daemon=True))
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        if p.is_alive():
            p.terminate()
    assert [p.exitcode for p in procs] == [0] * len(procs)
    assert cache.get(k) == payload
    assert cache.entries() == [k]
    assert not list(cache_dir.rglob(".tmp-*")), "temp files left behind"


def test_entries_stats_clear(cache_dir):
    assert cache.stats() == (0, 0)
    keys = sorted(cache.key("e", i) for i in range(3))
    for i, k in enumerate(keys):
        cache.put(k, b"z" * (10 * i))
    assert cache.entries() == keys
    count, total = cache.stats()
    assert count == 3
    assert total == sum(entry_file(cache_dir, k).stat().st_size for k in keys)
    assert total > 30  # payloads plus headers
    cache.clear()
    assert cache.stats() == (0, 0)
    assert cache.entries() == []
    assert cache.get(keys[0]) is None
    cache.clear()  # clearing an empty cache is fine


def test_hits_and_misses_are_logged(caplog):
    k = cache.key("logged")
    with caplog.at_level(logging.DEBUG, logger="pykern.cache"):
        cache.get(k)
        cache.put(k, b"1")
        cache.get(k)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("miss") for m in messages)
    assert any(m.startswith("hit") for m in messages)


def test_config_override_validates_and_restores(monkeypatch):
    monkeypatch.setenv("PYKERN_WAVE_SIZE", "32")
    assert config.wave_size() == 32
    with config.override(wave_size=64, check_bounds=True):
        assert config.wave_size() == 64 and config.check_bounds()
    assert config.wave_size() == 32 and not config.check_bounds()
    with pytest.raises(KeyError):
        with config.override(wave_sise=32):
            pass
    with config.override(wave_size=48), pytest.raises(ValueError):
        config.wave_size()
