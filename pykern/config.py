"""Every PYKERN_* knob, declared once.

Knobs are read from the environment each time an accessor is called, never at import time,
so a test, a CLI flag or a child process sees the value in force at the moment of use.
`override` sets them in ``os.environ`` (so subprocesses inherit them too) and restores them after.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator

#: name -> one-line description; the single list of knobs pykern understands.
KNOBS: dict[str, str] = {
    "PYKERN_CACHE_DIR": "root of the compiled-artifact cache (default: the user cache dir)",
    "PYKERN_CACHE": '"0" disables the on-disk cache',
    "PYKERN_CACHE_MAX": 'the cache\'s size cap, e.g. "4G" (default), "500M" or bytes: least recently used entries go first',
    "PYKERN_LLD": "path to ld.lld (default: the one shipped by ziglang)",
    "PYKERN_PREBUILT": "directory of prebuilt code objects, consulted before compiling",
    "PYKERN_CHECK_BOUNDS": '"1" turns on the bounds-checked CPU mode',
    "PYKERN_WAVE_SIZE": "wave width the CPU target emulates: 32 or 64 (default 64)",
    "PYKERN_DUMP": "a directory: every compile writes its stages there (typed IR, LLVM IR, optimised IR, "
                   "assembly), one folder per kernel set and target",
    "PYKERN_VERBOSE": '"1" logs each compile with its time and cache hit or miss, and prebuilt lookups, to stderr',
    "PYKERN_CUDA_POOL": '"0" allocates CUDA memory with cuMemAlloc/cuMemFree instead of the stream-ordered pool',
}

_FALSE = {"", "0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    assert name in KNOBS, name
    value = os.environ.get(name)
    return value.strip() if value is not None else None


def _flag(name: str, default: bool = False) -> bool:
    value = _raw(name)
    return default if value is None else value.lower() not in _FALSE


def _path(name: str) -> Path | None:
    value = _raw(name)
    return Path(value).expanduser() if value else None


def _user_cache_root() -> Path:
    """The platform's per-user cache directory (XDG on Linux)."""
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else Path.home() / ".cache"


def cache_dir() -> Path:
    """Where compiled artifacts live: PYKERN_CACHE_DIR, else <user cache dir>/pykern."""
    return _path("PYKERN_CACHE_DIR") or _user_cache_root() / "pykern"


def cache_enabled() -> bool:
    """False when PYKERN_CACHE=0: every compile starts from scratch and nothing is written."""
    return _flag("PYKERN_CACHE", default=True)


def lld() -> Path | None:
    """An explicit ld.lld to link HSACO with, or None to use the bundled one."""
    return _path("PYKERN_LLD")


def prebuilt_dir() -> Path | None:
    """A directory of prebuilt code objects (lets machines without LLVM tooling run kernels)."""
    return _path("PYKERN_PREBUILT")


def cuda_pool() -> bool:
    """CUDA arrays come from the device's stream-ordered memory pool (default on)."""
    return _flag("PYKERN_CUDA_POOL", True)


def check_bounds() -> bool:
    """Whether the CPU target checks every memory access (slow, but catches out-of-bounds bugs)."""
    return _flag("PYKERN_CHECK_BOUNDS")


def wave_size() -> int:
    """Wave width the CPU target emulates, so kernels written for wave32 or wave64 can be tested."""
    value = _raw("PYKERN_WAVE_SIZE") or "64"
    if value not in ("32", "64"):
        raise ValueError(f"PYKERN_WAVE_SIZE must be 32 or 64, not {value!r}")
    return int(value)


def dump_dir() -> Path | None:
    """Where every compile writes its stages (PYKERN_DUMP), or None."""
    return _path("PYKERN_DUMP")


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"4G"``, ``"500M"``, ``"1.5G"``, ``"123456"`` (bytes) -> bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise ValueError(f"not a size: {text!r} (bytes, or a number with K, M, G or T)") from None
    if value < 0:
        raise ValueError(f"a size cannot be negative: {text!r}")
    return int(value * _UNITS[unit])


def cache_max_bytes() -> int:
    """The disk cache's size cap (PYKERN_CACHE_MAX, default 4 GiB)."""
    raw = _raw("PYKERN_CACHE_MAX")
    return parse_size(raw) if raw else 4 << 30


def verbose() -> bool:
    """Log compiler and cache activity (PYKERN_VERBOSE; ``pykern -v``)."""
    return _flag("PYKERN_VERBOSE")


_LOGGERS = ("pykern.compiler", "pykern.cache", "pykern.prebuilt")


def enable_logging() -> None:
    """Send pykern's compile, cache and prebuilt log lines to stderr (once, however often called).
    ``import pykern`` calls it when PYKERN_VERBOSE is set; ``pykern -v`` calls it."""
    import logging
    for name in _LOGGERS:
        lg = logging.getLogger(name)
        if any(getattr(h, "_pykern", False) for h in lg.handlers):
            continue
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler._pykern = True  # type: ignore[attr-defined]
        lg.setLevel(logging.INFO)
        lg.addHandler(handler)
        lg.propagate = False


def _knob_name(key: str) -> str:
    name = key if key.startswith("PYKERN_") else "PYKERN_" + key.upper()
    if name not in KNOBS:
        raise KeyError(f"unknown knob {key!r}; known: {', '.join(KNOBS)}")
    return name


def _encode(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


@contextlib.contextmanager
def override(**knobs: object) -> Iterator[None]:
    """Set knobs for the duration of a ``with`` block; ``None`` unsets one.

    Accepts ``cache_dir=...`` or ``PYKERN_CACHE_DIR=...``; bools become "1"/"0".
    Unknown names raise KeyError, so a typo can't silently test the default.
    """
    names = {_knob_name(k): v for k, v in knobs.items()}
    saved = {name: os.environ.get(name) for name in names}
    try:
        for name, value in names.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = _encode(value)
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
