"""Building modules for archs into a prebuilt directory: what ``pykern build`` does, as a library.

``build(...)`` skips what the directory's manifest already holds up to date, takes what the disk
cache holds by source key in this process (no lowering, no worker), and compiles the rest in a
process pool, biggest modules first; then it writes ``manifest.json``. It reports each finished
module through a callback, so a caller (the CLI) can show progress; it prints nothing itself.

Workers find their module again by a *spec* and a ``resolve`` function (both picklable: a
process started by ``spawn`` shares nothing with its parent), which is the caller's: the CLI
resolves stdlib names and ``path.py::module`` specs of a user's file.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable, Sequence

from . import prebuilt
from .compiler import build_module, lookup
from .targets import registry

log = logging.getLogger("pykern.build")


@dataclasses.dataclass
class Built:
    """One module built for one arch: its manifest entry, how long it took, and whether it came
    from the disk cache (``cached``) or was already in the output directory (``up_to_date``)."""
    entry: dict
    seconds: float
    cached: bool
    up_to_date: bool = False

    @property
    def kernels(self) -> int:
        return len(self.entry["kernels"])


@dataclasses.dataclass
class BuildReport:
    """What ``build`` did: every module × arch (``built``), the manifest written, the wall time."""
    built: list[Built]
    manifest: dict
    seconds: float

    @property
    def compiled(self) -> int:
        return sum(not b.cached for b in self.built)

    @property
    def up_to_date(self) -> int:
        return sum(b.up_to_date for b in self.built)

    @property
    def from_cache(self) -> int:
        return len(self.built) - self.compiled - self.up_to_date

    @property
    def kernels(self) -> int:
        return sum(b.kernels for b in self.built)


def write_artifact(module, target, out_dir: Path, data: bytes, sigs) -> dict:
    """Write ``data`` to its place under ``out_dir`` (atomically) and return its manifest entry."""
    path = prebuilt.artifact_path(out_dir, target, module.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return prebuilt.make_entry(module, target, data, sigs, out_dir)


def from_cache(module, target, out_dir: Path) -> Built | None:
    """``module`` for ``target`` from the disk cache's source-key entry, written to ``out_dir`` in
    this process: what ``build_one`` would give, or None on a miss."""
    start = time.perf_counter()
    try:
        found = lookup(module.kernels, target, module.name)
    except Exception as exc:  # noqa: BLE001 — a cache problem is a miss; the worker compiles
        log.debug("source-cache lookup of %s failed: %s", module.name, exc)
        return None
    if found is None:
        return None
    entry = write_artifact(module, target, out_dir, *found)
    return Built(entry, time.perf_counter() - start, cached=True)


class _CacheHits(logging.Handler):
    """Counts the compiler's cache-hit records: an IR-key hit still lowers, but compiles nothing."""

    def __init__(self):
        super().__init__()
        self.hits = 0

    def emit(self, record):
        if record.getMessage().startswith("cache hit"):
            self.hits += 1


def build_one(resolve: Callable, spec: str, target_name: str, arch: str, out_dir: str) -> Built:
    """Compile the module ``resolve(spec)`` for one arch (in a worker process) and write its artifact."""
    spy = _CacheHits()
    clog = logging.getLogger("pykern.compiler")
    clog.addHandler(spy)
    old_level = clog.level
    if not clog.isEnabledFor(logging.INFO):
        clog.setLevel(logging.INFO)  # unhandled INFO records stop at logging's last resort (WARNING+)
    start = time.perf_counter()
    try:
        module = resolve(spec)
        target = registry.make_target(target_name, arch)
        data, sigs = build_module(module, target)
    finally:
        clog.removeHandler(spy)
        clog.setLevel(old_level)
    entry = write_artifact(module, target, Path(out_dir), data, sigs)
    return Built(entry, time.perf_counter() - start, cached=bool(spy.hits))


def _pool_context():
    """fork where there is one (no re-import of the stdlib in each worker), else the default."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def build(modules: Sequence[tuple[object, str]], target: str, archs: Sequence[str], out_dir: Path, *,
          resolve: Callable, jobs: int | None = None, force: bool = False,
          on_start: Callable[[int, list[Built]], None] | None = None,
          on_built: Callable[[Built], None] | None = None) -> BuildReport:
    """Build each ``(module, spec)`` of ``modules`` (non-empty ``pykern.Module``s; ``spec`` is what
    ``resolve`` takes in a worker to find it again) for each arch of ``target`` into ``out_dir``
    (which must exist), and write its manifest. Modules the manifest holds up to date are kept
    (unless ``force``). ``on_start(total_kernels, up_to_date)`` is called once before any work,
    ``on_built(b)`` as each module × arch finishes. ``jobs``: worker processes (default: the
    cores)."""
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be a positive number of worker processes, got {jobs}")
    start = time.perf_counter()
    out_dir = Path(out_dir)
    old = prebuilt.read_manifest(out_dir)
    tasks, built = [], []
    for m, spec in modules:
        for arch in archs:
            tgt = registry.make_target(target, arch)
            if not force and old is not None and isinstance(prebuilt.check_entry(out_dir, old, m, tgt), tuple):
                entry = next(e for e in old["modules"] if e["module"] == m.name and e["target"] == target
                             and e["arch"] == arch)
                built.append(Built(entry, 0.0, cached=True, up_to_date=True))
                continue
            tasks.append((m, spec, arch, tgt))
    if on_start is not None:
        on_start(sum(len(m) for m, _, _, _ in tasks) + sum(b.kernels for b in built), list(built))

    def done(b: Built) -> None:
        built.append(b)
        if on_built is not None:
            on_built(b)

    misses = []
    for m, spec, arch, tgt in tasks:  # source-key cache hits are written here: no lowering, no worker
        b = from_cache(m, tgt, out_dir)
        if b is None:
            misses.append((m, spec, arch))
        else:
            done(b)
    misses.sort(key=lambda t: -len(t[0]))  # biggest first: the pool finishes sooner
    n_jobs = max(1, min(jobs or os.cpu_count() or 1, len(misses)))
    if n_jobs == 1:
        for m, spec, arch in misses:
            done(build_one(resolve, spec, target, arch, str(out_dir)))
    elif misses:
        with ProcessPoolExecutor(n_jobs, mp_context=_pool_context()) as pool:
            pending = {pool.submit(build_one, resolve, spec, target, arch, str(out_dir)) for _, spec, arch in misses}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    done(f.result())
    manifest = prebuilt.write_manifest(out_dir, [b.entry for b in built])
    return BuildReport(built, manifest, time.perf_counter() - start)


__all__ = ["Built", "BuildReport", "build", "build_one", "from_cache", "write_artifact"]
