"""Content-addressed on-disk cache of compiled artifacts.

Layout: ``<cache_dir>/v1/<key[:2]>/<key>.bin``. Bumping ``NAMESPACE`` orphans old entries
instead of misreading them when the entry format or the compiler's output changes.

Each entry is a header (magic, payload length, sha256 of payload, the entry's own key) followed
by the payload, so a truncated or bit-flipped file, from a crash or a full disk, is detected on
read, deleted and reported as a miss: the caller recompiles instead of loading garbage. The key in
the header is checked against the key asked for: an intact entry filed under another key (copied,
restored or synced into the wrong place) would otherwise load another kernel's code, whose missing
symbols crash every later run. Such an entry is discarded with a warning and rebuilt; a read-only
cache directory keeps it but still reports a miss.

Writes go to a temp file in the entry's directory, are fsynced, then ``os.replace``d into
place: readers see either no entry or a whole one, and two processes writing the same key
both succeed (the last rename wins; both wrote the same content anyway).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import Iterator

from . import config

log = logging.getLogger("pykern.cache")

NAMESPACE = "v1"
MAGIC = b"PYK2"
_OLD_MAGIC = b"PYKC"  # entries written before the header carried their key: a quiet miss, overwritten
_HEADER = struct.Struct("<4sQ32s32s")  # magic, payload length, sha256(payload), the entry's key
_HEX = frozenset("0123456789abcdef")


def key(*parts: str | bytes | int) -> str:
    """sha256 over the parts; each is type-tagged and length-prefixed so ("ab","c") != ("a","bc")."""
    h = hashlib.sha256(NAMESPACE.encode())
    for part in parts:
        if isinstance(part, str):
            tag, data = b"s", part.encode()
        elif isinstance(part, (bytes, bytearray, memoryview)):
            tag, data = b"b", bytes(part)
        elif isinstance(part, int):
            tag, data = b"i", str(part).encode()
        else:
            raise TypeError(f"cache key parts must be str, bytes or int, not {type(part).__name__}")
        h.update(tag + struct.pack("<Q", len(data)) + data)
    return h.hexdigest()


def _root() -> Path:
    return config.cache_dir() / NAMESPACE


def _path(k: str) -> Path:
    if len(k) != 64 or not _HEX.issuperset(k):
        raise ValueError(f"not a cache key: {k!r}")
    return _root() / k[:2] / f"{k}.bin"


def _discard(path: Path) -> None:
    """Remove a bad entry; where the cache is read-only it stays (every read is still a miss)."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("could not remove cache entry %s: %s", path, e)


def get(k: str) -> bytes | None:
    """The payload stored under ``k``, or None (missing, disabled, or found damaged and removed)."""
    if not config.cache_enabled():
        return None
    path = _path(k)
    try:
        blob = path.read_bytes()
    except OSError:  # usually FileNotFoundError; an unreadable cache is a miss, not a failure
        log.debug("miss %s", k)
        return None
    n = _HEADER.size
    if len(blob) >= 4 and blob[:4] == _OLD_MAGIC:
        log.debug("miss %s (an entry of the older format)", k)
        return None
    if len(blob) >= n:
        magic, length, digest, owner = _HEADER.unpack_from(blob)
        payload = blob[n:]
        if magic == MAGIC and length == len(payload) and hashlib.sha256(payload).digest() == digest:
            if owner == bytes.fromhex(k):
                log.debug("hit %s (%d bytes)", k, length)
                _touch(path)
                return payload
            log.warning("discarding cache entry %s: it is intact but belongs to key %s", path, owner.hex())
            _discard(path)
            return None
    log.warning("discarding damaged cache entry %s", path)
    _discard(path)
    return None


def _touch(path: Path) -> None:
    """Mark an entry used now: pruning removes the least recently used entries first."""
    with contextlib.suppress(OSError):  # a read-only cache still serves hits
        os.utime(path)


def put(k: str, data: bytes, label: str = "") -> None:
    """Store ``data`` under ``k`` atomically; a no-op when the cache is disabled. ``label`` (what
    was compiled, for which target) is what ``pykern cache ls`` shows for the entry.

    Best effort: an unwritable cache (read-only home, full disk) logs a warning rather than
    failing the compile that produced ``data``. Every so often a put prunes the cache back under
    its size cap (``PYKERN_CACHE_MAX``).
    """
    if not config.cache_enabled():
        return
    path = _path(k)
    if label:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.with_suffix(".label").write_text(label)
    data = bytes(data)
    header = _HEADER.pack(MAGIC, len(data), hashlib.sha256(data).digest(), bytes.fromhex(k))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        log.warning("could not write cache entry %s: %s", path, e)
        return
    finally:
        if tmp is not None:  # failed or interrupted: leave no stray temp file
            _discard(Path(tmp))
    log.debug("put %s (%d bytes)", k, len(data))
    global _puts
    _puts += 1
    if (_puts - 1) % _PRUNE_EVERY == 0:  # the first put of a process, then every _PRUNE_EVERY-th
        prune()


#: puts between two size checks in one process (a check stats every entry: ~1 ms per 100)
_PRUNE_EVERY = 64
_puts = 0


def prune(max_bytes: int | None = None) -> tuple[int, int]:
    """Remove the least recently used entries (by their last hit or write) until the cache holds at
    most ``max_bytes`` (default: ``PYKERN_CACHE_MAX``) — down to 90% of it, so the next puts do not
    prune again at once. Returns (entries removed, bytes freed)."""
    cap = config.cache_max_bytes() if max_bytes is None else max_bytes
    found = []
    for p in _files():
        with contextlib.suppress(FileNotFoundError):
            st = p.stat()
            found.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in found)
    if total <= cap:
        return 0, 0
    removed = freed = 0
    for _, size, p in sorted(found, key=lambda f: f[0]):
        if total - freed <= cap * 0.9:
            break
        _discard(p)
        _discard(p.with_suffix(".label"))
        removed, freed = removed + 1, freed + size
    log.info("pruned %d entries (%d bytes) to stay under %d bytes", removed, freed, cap)
    return removed, freed


def label(k: str) -> str:
    """What an entry holds (its kernels and target), as recorded when it was written; "" if unknown."""
    try:
        return _path(k).with_suffix(".label").read_text()
    except OSError:
        return ""


def _files() -> Iterator[Path]:
    root = _root()
    if root.is_dir():
        yield from root.glob("??/*.bin")


def entries() -> list[str]:
    """Keys of every entry on disk (sorted), without validating them."""
    return sorted(p.stem for p in _files())


def stats() -> tuple[int, int]:
    """(number of entries, bytes they take on disk, headers included)."""
    count = total = 0
    for p in _files():
        with contextlib.suppress(FileNotFoundError):  # another process may clear concurrently
            total += p.stat().st_size
            count += 1
    return count, total


#: how long a process waits for another one's compile of the same key before compiling it itself
#: (a holder that hangs must not hang everyone; one that dies releases its lock with its descriptor)
COMPILE_WAIT_S = 600.0


@contextlib.contextmanager
def compiling(k: str, wait_s: float | None = None) -> Iterator[None]:
    """Hold the compile of ``k`` for this process: another process (an xdist worker, a second user
    script, a ``pykern build`` worker) asking for the same key waits here, then finds the entry the
    first one wrote instead of compiling it again on the same cores. An advisory ``flock`` on
    ``<cache_dir>/locks/<key[:2]>/<key>.lock``, released by the kernel if the holder dies; where
    there is no ``flock`` (Windows) or the lock file cannot be made (read-only cache), no lock:
    both compile, as before, and the atomic writes keep the entry whole."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    if not config.cache_enabled():
        yield
        return
    path = config.cache_dir() / "locks" / k[:2] / f"{k}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        fd = None
    if fd is None:  # (outside the handler: an error of the caller's body is not chained to this one)
        yield
        return
    try:
        deadline = time.monotonic() + (COMPILE_WAIT_S if wait_s is None else wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    log.warning("compiling %s although another process has held its lock for %.0f s", k,
                                COMPILE_WAIT_S if wait_s is None else wait_s)
                    break
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def clear() -> None:
    """Remove every entry of this namespace (other namespaces and unrelated files are left alone)."""
    shutil.rmtree(_root(), ignore_errors=True)
    shutil.rmtree(config.cache_dir() / "locks", ignore_errors=True)
    log.debug("cleared %s", _root())
