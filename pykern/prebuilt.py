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

import functools
import hashlib
import json
import logging
import os
import weakref
from pathlib import Path
from typing import Any

from . import config
from .targets.base import KernelSignature

log = logging.getLogger("pykern.prebuilt")

FORMAT = "pykern-prebuilt/1"
MANIFEST = "manifest.json"
PACKAGED_DIR = Path(__file__).resolve().parent / "_prebuilt"
#: the sources whose changes change an artifact (the lowering and the back ends)
_COMPILER_PARTS = ("compiler.py", "ir", "lang", "lower", "targets")


# ---- versions and fingerprints -----------------------------------------------------------------
@functools.cache
def compiler_hash() -> str:
    """sha256 over pykern's compiler sources, so a rebuilt pykern never loads another one's objects."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for part in _COMPILER_PARTS:
        p = root / part
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            if f.name == "registry.py":
                continue
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def versions() -> dict[str, str]:
    """What a manifest records and ``find_prebuilt`` compares."""
    import llvmlite
    import llvmlite.binding as llvm

    from .compiler import __version__
    return {"pykern": __version__, "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "compiler": compiler_hash()}


def _file_digest(path: str, memo: dict[str, str]) -> str:
    if path not in memo:
        try:
            memo[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            memo[path] = "unreadable"
    return memo[path]


_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _is_source(value: Any) -> bool:
    source = getattr(value, "source", None)  # FuncDef / KernelDef
    return source is not None and hasattr(source, "source_hash") and hasattr(source, "tree")


def _value_token(value: Any, files: set[str], seen: set[int], values: list[str]) -> str | None:
    """A stable token for a value a kernel can see (a compile-time parameter, a global or closure
    variable it names), recursing into pykern functions; None for what the file and compiler hashes
    already cover (modules, classes, Python callables)."""
    if _is_source(value):
        _collect(value.source, files, seen, values)
        return f"{type(value).__name__}:{value.name}:{value.source.source_hash}"
    if isinstance(value, _SCALARS):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        inner = [_value_token(v, files, seen, values) for v in value]
        return f"{type(value).__name__}({','.join(t or '?' for t in inner)})"
    if type(value).__module__.startswith("pykern.ir"):  # dtypes, pointer types, type variables
        return f"{type(value).__name__}:{value!r}"
    return None


def _param_token(value: Any, files: set[str], seen: set[int], values: list[str]) -> str:
    return _value_token(value, files, seen, values) or repr(value)


_REFERENCED: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()


def _referenced(source) -> list[tuple[str, tuple[str, ...]]]:
    """The free names a function's body reads and the attribute chains read from them, sorted
    (``pkm.exp`` gives ``("pkm", ())`` and ``("pkm", ("exp",))``). Remembered per function."""
    found = _REFERENCED.get(source)
    if found is not None:
        return found
    import ast
    out: set[tuple[str, tuple[str, ...]]] = set()
    claimed: set[int] = set()
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Attribute) and id(node) not in claimed:
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                claimed.add(id(cur))
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                claimed.add(id(cur))
                out.add((cur.id, ()))
                out.add((cur.id, tuple(reversed(chain))))
        elif isinstance(node, ast.Name) and id(node) not in claimed:
            out.add((node.id, ()))
    found = sorted(out)
    try:
        _REFERENCED[source] = found
    except TypeError:  # not weak-referenceable: recompute next time
        pass
    return found


def _collect(source, files: set[str], seen: set[int], values: list[str]) -> None:
    """The files of ``source`` and of every pykern function it can reach through its globals,
    closure and the same package's modules (one level), and tokens for the values of the global
    and closure names its body reads (a constant imported from another file, or changed at run
    time, changes the fingerprint)."""
    if id(source) in seen:
        return
    seen.add(id(source))
    files.add(source.file)
    scans = [source.closure]
    if id(source.globals) not in seen:  # a module's globals are scanned once
        seen.add(id(source.globals))
        scans.append(source.globals)
    package = str(source.globals.get("__name__", "")).split(".")[0]
    for scope in scans:
        for value in list(scope.values()):
            if _is_source(value):
                _collect(value.source, files, seen, values)
            elif type(value).__name__ == "module" and package and \
                    getattr(value, "__name__", "").split(".")[0] == package and getattr(value, "__file__", None):
                files.add(value.__file__)
    for name, chain in _referenced(source):
        scope = source.closure if name in source.closure else source.globals
        if name not in scope:
            continue  # a local, a parameter or a builtin
        value = scope[name]
        for attr in chain:
            value = getattr(value, attr, None)
        token = _value_token(value, files, seen, values)
        if token is not None:
            values.append(f"{source.name}:{'.'.join((name, *chain))}={token}")


def fingerprint(module) -> str:
    """A cheap hash of everything in ``module`` (a ``pykern.Module`` or a list of kernel instances)
    that decides its kernels' code (no lowering): each kernel's name, compile-time parameters, max
    block size and source hash; the values of the globals and closure variables they and the device
    functions they reach read; and the contents of the files holding all of those and of the package
    modules they use. (The compiler's own sources are in ``versions()``.)"""
    h = hashlib.sha256()
    files: set[str] = set()
    seen: set[int] = set()
    values: list[str] = []
    lines = []
    for inst in getattr(module, "kernels", module):
        src = inst.kdef.source
        params = ",".join(f"{k}={_param_token(v, files, seen, values)}" for k, v in sorted(inst.params.items()))
        lines.append(f"{inst.name}|{src.source_hash}|{inst.max_block_size}|{params}\n")
        _collect(src, files, seen, values)
    for line in sorted(lines):  # the order kernels were added in does not change what they are
        h.update(line.encode())
    for v in sorted(set(values)):
        h.update(f"{v}\n".encode())
    memo: dict[str, str] = {}
    for f in sorted(files):
        h.update(f"{os.path.basename(f)}:{_file_digest(f, memo)}\n".encode())
    return h.hexdigest()


# ---- signatures <-> JSON -----------------------------------------------------------------------
def signature_to_json(sig: KernelSignature) -> dict:
    return {"name": sig.name, "max_block_size": sig.max_block_size, "kernarg_size": sig.kernarg_size,
            "args": [{"name": n, "offset": off, "size": size, "align": align, "kind": kind}
                     for (n, size, align, kind), off in zip(sig.params, sig.offsets)]}


def signature_from_json(d: dict) -> KernelSignature:
    sig = KernelSignature(d["name"], tuple((a["name"], int(a["size"]), int(a["align"]), a["kind"])
                                           for a in d["args"]), int(d["max_block_size"]))
    if list(sig.offsets) != [a["offset"] for a in d["args"]]:
        raise ValueError(f"kernel {sig.name}: recorded offsets disagree with the layout")
    return sig


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
