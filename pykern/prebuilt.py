"""Prebuilt code objects: what ``pykern build`` writes, and the run-time lookup that loads them.

Layout of a prebuilt directory (``pykern build --out DIR``)::

    DIR/manifest.json
    DIR/<arch>/<module>.hsaco        (amdgpu; cuda: <module>.ptx)

``find_prebuilt(module, target)`` looks in ``$PYKERN_PREBUILT`` and then in the directory packaged
with the installation (``pykern/_prebuilt``, if present) and returns ``(artifact bytes, signatures)``
only when every check passes:

* the manifest's versions (pykern, llvmlite, LLVM, and a hash of the compiler's own sources) equal
  the running ones;
* its entry for the module was built for the same target key (target, arch, wave size, code
  object version) and has the same *fingerprint*: the kernels' names, compile-time parameters and
  source hashes, plus the contents of the source files they and their device functions live in;
* the file's sha256 and size equal the manifest's.

Anything else — a missing file, a damaged manifest, an edited kernel, another LLVM — returns None,
and the caller compiles. A stale object is never loaded.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from . import config
from .fingerprint import fingerprint, versions
from .targets.base import KernelSignature, signature_from_json, signature_to_json

log = logging.getLogger("pykern.prebuilt")

FORMAT = "pykern-prebuilt/1"
MANIFEST = "manifest.json"
PACKAGED_DIR = Path(__file__).resolve().parent / "_prebuilt"


# ---- manifests ---------------------------------------------------------------------------------
def artifact_path(directory: Path, target, module_name: str) -> Path:
    return Path(directory) / target.arch / f"{module_name}{target.binary_ext}"


def make_entry(module, target, data: bytes, sigs: list[KernelSignature], directory: Path) -> dict:
    """The manifest entry of one built module (``data`` already written to its path)."""
    return {"module": module.name, "index": module.index, "target": target.name, "arch": target.arch,
            "target_key": target.cache_key(),
            "file": artifact_path(Path("."), target, module.name).as_posix(),
            "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            "fingerprint": fingerprint(module),
            "kernels": [signature_to_json(s) for s in sigs]}


def read_manifest(directory: Path) -> dict | None:
    """The parsed manifest of ``directory``, or None when missing or unreadable."""
    try:
        data = json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("modules"), list):
        return None
    return data


def write_manifest(directory: Path, entries: list[dict]) -> dict:
    """Merge ``entries`` into ``directory``'s manifest (an entry replaces the one for the same
    module, target and arch; entries of another pykern/LLVM build are dropped) and write it
    atomically."""
    directory = Path(directory)
    now = versions()
    old = read_manifest(directory)
    keep = old["modules"] if old and old.get("versions") == now else []
    fresh = {(e["module"], e["target"], e["arch"]) for e in entries}
    merged = [e for e in keep if (e["module"], e["target"], e["arch"]) not in fresh] + list(entries)
    merged.sort(key=lambda e: (e["target"], e["arch"], e["index"] if e["index"] is not None else 1 << 30,
                               e["module"]))
    manifest = {"format": FORMAT, "versions": now, "modules": merged}
    tmp = directory / f".{MANIFEST}.tmp{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, directory / MANIFEST)
    return manifest


def check_entry(directory: Path, manifest: dict, module, target) -> tuple[bytes, list[KernelSignature]] | str:
    """The artifact and signatures of ``module`` for ``target`` in ``directory``, or why not."""
    if manifest.get("versions") != versions():
        return "built by another pykern/LLVM"
    path = artifact_path(directory, target, module.name)
    rel = artifact_path(Path("."), target, module.name).as_posix()
    entry = next((e for e in manifest["modules"] if e.get("file") == rel and e.get("module") == module.name), None)
    if entry is None:
        return f"no manifest entry for {rel}"
    if entry.get("target_key") != target.cache_key():
        return f"built for {entry.get('target_key')}, not {target.cache_key()}"
    if entry.get("fingerprint") != fingerprint(module):
        return "the module's kernels changed since it was built"
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    if len(data) != entry.get("bytes") or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        return f"{path} does not match its sha256"
    try:
        sigs = [signature_from_json(k) for k in entry["kernels"]]
    except (KeyError, TypeError, ValueError) as exc:
        return f"damaged kernel list ({exc})"
    if sorted(s.name for s in sigs) != sorted(module.names()):
        return "kernel names differ from the module's"
    return data, sigs


def search_dirs() -> list[Path]:
    """Where ``find_prebuilt`` looks, in order: ``$PYKERN_PREBUILT``, then the packaged directory."""
    dirs = [d for d in (config.prebuilt_dir(), PACKAGED_DIR) if d is not None and (d / MANIFEST).is_file()]
    return dirs


def find_prebuilt(module, target) -> tuple[bytes, list[KernelSignature]] | None:
    """A prebuilt artifact of ``module`` (a ``pykern.Module``) for ``target``, with its kernel
    signatures, or None (then compile). Never raises for a bad or stale directory."""
    if target.name == "cpu" or not len(module):
        return None
    for directory in search_dirs():
        try:
            manifest = read_manifest(directory)
            found = "unreadable manifest" if manifest is None else check_entry(directory, manifest, module, target)
        except Exception as exc:  # a prebuilt directory must never break loading: compile instead
            found = f"{type(exc).__name__}: {exc}"
        if isinstance(found, tuple):
            log.info("prebuilt: %s for %s from %s", module.name, target, directory)
            return found
        log.info("prebuilt: not using %s for %s from %s: %s", module.name, target, directory, found)
    return None
