"""What decides a compiled artifact, as hashes: pykern's version and compiler sources, and a kernel
set's *fingerprint* (names, compile-time parameters, source hashes, the globals they read and the
files they live in), computed without lowering. The disk cache's source key and the prebuilt
manifests both compare these.
"""
from __future__ import annotations

import functools
import hashlib
import os
import weakref
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from .lang.builtins.core import PerTarget
from .version import __version__

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
    if isinstance(value, PerTarget):  # every target's value: one fingerprint serves all targets
        inner = [f"{k}={_value_token(v, files, seen, values) or repr(v)}" for k, v in value.choices.items()]
        return f"per_target({','.join(inner)})"
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
    that decides its kernels' code (no lowering): each kernel's name, compile-time parameters, launch
    bounds, loop-strength-reduction choice and source hash; the values of the globals and closure
    variables they and the device functions they reach read; and the contents of the files holding
    all of those and of the package modules they use. (The compiler's own sources are in ``versions()``.)"""
    h = hashlib.sha256()
    files: set[str] = set()
    seen: set[int] = set()
    values: list[str] = []
    lines = []
    for inst in getattr(module, "kernels", module):
        src = inst.kdef.source
        params = ",".join(f"{k}={_param_token(v, files, seen, values)}" for k, v in sorted(inst.params.items()))
        bounds = f"{inst.max_block_size}|{inst.kdef.min_blocks_per_sm}|lsr={inst.kdef.loop_strength_reduction}"
        lines.append(f"{inst.name}|{src.source_hash}|{bounds}|{params}\n")
        _collect(src, files, seen, values)
    for line in sorted(lines):  # the order kernels were added in does not change what they are
        h.update(line.encode())
    for v in sorted(set(values)):
        h.update(f"{v}\n".encode())
    memo: dict[str, str] = {}
    for f in sorted(files):
        h.update(f"{os.path.basename(f)}:{_file_digest(f, memo)}\n".encode())
    return h.hexdigest()
