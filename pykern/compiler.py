"""Compile a module of kernels for a target: typed IR -> LLVM IR -> artifact, through the disk cache.

Every stage's output is reachable for inspection (``lower_module`` for the LLVM IR,
``Target.optimize`` for the optimised IR, ``Target.assembly`` for the GPU assembly), which is what
``pykern show`` prints.

The disk cache is consulted under two keys:

* the *source key* — cheap, no lowering: the kernels' names in order and ``fingerprint.fingerprint``
  (their compile-time parameters, the source hashes of the kernels and the device functions they
  reach, the values of the globals they read, the contents of their files), the target's key and
  the versions (pykern, llvmlite, LLVM and a hash of the compiler's own sources). Its entry holds
  the kernel signatures (a JSON header) and the artifact, so a hit skips lowering entirely — which
  for a 100-kernel module is most of a warm build;
* on a miss, the *IR key* — the LLVM IR text itself plus the target (``Target.cache_key``: its
  arch and whatever else decides the object made from the same IR, such as the CPU target's unroll
  limit) and the versions: honest by construction (whatever changed the kernel changed the IR); it
  saves LLVM's optimiser, code generation and linking when an edit did not change the IR (a
  comment, a renamed local).

A compile stores its artifact under both keys.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import struct
import time

import llvmlite
from llvmlite import ir

from . import cache, config
from .fingerprint import compiler_hash, fingerprint, versions
from .ir import printer
from .lower.llvm import lower_kernel
from .lower.render import function_text, module_text
from .targets.base import KernelSignature, Target, signature_from_json, signature_to_json
from .version import __version__
log = logging.getLogger("pykern.compiler")

#: source-key entries: magic, then the JSON header's length, the header, the artifact
_SOURCE_MAGIC = b"PKSRC1\0\0"
_SOURCE_HEAD = struct.Struct("<8sI")


class _Rendered(ir.Module):
    """An ``ir.Module`` whose text is rendered once: rendering a stdlib module takes seconds (3.4 s of
    CPU for reduce's 76 kernels), and a compile needs it twice, for the IR key and in the target's
    ``optimize`` (which parses it). Set only once lowering is done; nothing adds to the module after."""

    def __repr__(self) -> str:
        return self._pykern_text


def rendered(module: ir.Module) -> str:
    """``str(module)``, kept with the module for the later ``str`` calls of the same compile (written
    by ``lower.render``: the same text in about 60% of llvmlite's time)."""
    with collector_paused():
        text = module_text(module) if type(module) is ir.Module else str(module)
    module.__class__ = _Rendered
    module._pykern_text = text
    return text


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for a while. Typing and lowering allocate millions of
    small objects (AST visits, typed IR, llvmlite values) that live until the module is rendered, and
    each allocation burst set off collections that walked all of them again: half the CPU time of
    lowering reduce's module, a quarter of rendering it (docs/cli.md). Refcounting still frees what
    dies young; the collector resumes afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _same_params(a, b) -> bool:
    """Whether two instances' compile-time parameters are the same values (identity first: a
    parameter may be a function or an object whose ``==`` is not a truth value)."""
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if v is w:
            continue
        try:
            if type(v) is not type(w) or not bool(v == w):
                return False
        except Exception:  # noqa: BLE001 — an ambiguous comparison is "not the same"
            return False
    return True


def kernel_aliases(kernels, target: Target) -> dict[str, str]:
    """Second names: ``{alias: primary}`` for each instance of ``kernels`` that is the same kernel
    definition with the same compile-time parameters and launch bounds as an earlier one (candle's
    ``upowf_fp8_e4m3`` / ``upowf_f8e4m3``: 72 of the stdlib's 1,103 kernels). Empty where the target
    cannot write one compiled kernel under two names (``Target.emits_aliases``)."""
    if not target.emits_aliases:
        return {}
    seen: dict[tuple, list] = {}
    aliases = {}
    for inst in kernels:
        key = (id(inst.kdef), inst.max_block_size, inst.kdef.min_blocks_for(target.name))
        group = seen.setdefault(key, [])
        primary = next((p for p in group if _same_params(p.params, inst.params)), None)
        if primary is None:
            group.append(inst)
        else:
            aliases[inst.name] = primary.name
    return aliases


def lower_module(kernels, target: Target, name: str) -> tuple[ir.Module, list[KernelSignature]]:
    """The LLVM IR module holding every kernel instance of ``kernels`` for ``target``. A second name
    of an earlier instance (``kernel_aliases``) is not lowered again: its signature is the earlier
    one's under its own name, and ``module.kernel_aliases`` tells ``Target.finalize`` to write the
    compiled kernel under both names (the same code, compiled once)."""
    kernels = list(kernels)
    aliases = kernel_aliases(kernels, target)
    with collector_paused():
        module = target.new_module(name)
        by_name = {}
        sigs = []
        for inst in kernels:
            if inst.name in aliases:
                sig = dataclasses.replace(by_name[aliases[inst.name]], name=inst.name)
            else:
                sig = lower_kernel(target, module, inst.body(target), inst.max_block_size,
                                   inst.kdef.min_blocks_for(target.name))
            by_name[inst.name] = sig
            sigs.append(sig)
        if target.emits_aliases:
            aliases = identical_kernels(module, [k.name for k in kernels if k.name not in aliases], aliases)
    module.kernel_aliases = aliases
    module.loop_strength_reduction = loop_strength_reduction(kernels, target)
    return module, sigs


def identical_kernels(module: ir.Module, names: list[str], aliases: dict[str, str]) -> dict[str, str]:
    """``aliases`` with a second name for each kernel of ``names`` whose LLVM IR is an earlier one's
    with only the kernel's name changed, and that kernel taken out of ``module``: twins that
    ``kernel_aliases`` cannot see because they are other definitions or other compile-time
    parameters that lower alike (``fill_f8_e4m3`` / ``fill_u8``, ``cast_i32_i32`` / ``cast_u32_u32``,
    ``gather_u8_f8_e4m3`` / ``gather_u8_u8``: one byte type is another in LLVM). What LLVM makes of a
    function depends only on its IR, so the primary's compiled code is what the twin's would have been,
    as the targets' alias copies already assume. Compared: the defining text (attributes such as the
    launch bounds, the parameters' names: AMDGPU's metadata carries them) and the kernel's own globals
    (``<kernel>.<name>``: shared arrays), the kernel's name masked. Each function's text is kept for
    ``lower.render``, which would otherwise render it again."""
    own: dict[str, list] = {}
    for g in module.globals.values():
        head, dot, _ = g.name.partition(".")
        if dot and type(g) is not ir.Function:
            own.setdefault(head, []).append(g)
    seen: dict[str, str] = {}
    merged: dict[str, str] = {}
    for name in names:
        fn = module.globals.get(name)
        if type(fn) is not ir.Function or not fn.blocks:
            continue
        text = fn._pykern_text = function_text(fn)
        mine = [g for g in own.get(name, ()) if g.name.startswith(name + ".")]
        key = (text + "".join(str(g) for g in mine)).replace(f'@"{name}"', '@"<kernel>"').replace(f'@"{name}.', '@"<kernel>.')
        primary = seen.setdefault(key, name)
        if primary != name:
            merged[name] = primary
            del module.globals[name]
            for g in mine:
                del module.globals[g.name]
    if not merged:
        return aliases
    # a second name of a kernel that is itself now a twin names the twin's primary
    out = {alias: merged.get(primary, primary) for alias, primary in aliases.items()}
    out.update(merged)
    return out


def loop_strength_reduction(kernels, target: Target) -> bool:
    """Whether LLVM's loop strength reduction runs on the module of ``kernels`` for ``target``: each
    kernel declares it (``@pk.kernel(loop_strength_reduction={"cuda": False})``), LLVM's switch is
    per module, so it stays on unless every kernel opts out. Decided by the kernels themselves, so
    a kernel compiled alone (the runtime's first use, ``unary.uexp_f32``) gets its module build's code."""
    return any(inst.kdef.lsr_for(target.name) for inst in kernels)


# ---- the source-level cache ------------------------------------------------------------------------
def source_key(kernels, target: Target, name: str) -> str:
    """The cache key of ``kernels`` compiled for ``target`` computed from their sources (no lowering)."""
    kernels = list(kernels)
    return cache.key("pykern-source", json.dumps(versions(), sort_keys=True), target.cache_key(),
                     name, "\n".join(k.name for k in kernels), fingerprint(kernels))


def _pack(artifact: bytes, sigs: list[KernelSignature]) -> bytes:
    head = json.dumps([signature_to_json(s) for s in sigs], separators=(",", ":")).encode()
    return _SOURCE_HEAD.pack(_SOURCE_MAGIC, len(head)) + head + artifact


def _unpack(blob: bytes, kernels) -> tuple[bytes, list[KernelSignature]] | None:
    """The artifact and signatures of a source-key entry, or None if it does not fit ``kernels``."""
    try:
        magic, n = _SOURCE_HEAD.unpack_from(blob)
        if magic != _SOURCE_MAGIC:
            return None
        start = _SOURCE_HEAD.size
        sigs = [signature_from_json(d) for d in json.loads(blob[start:start + n])]
        artifact = blob[start + n:]
    except (struct.error, ValueError, KeyError, TypeError):
        return None
    if [s.name for s in sigs] != [k.name for k in kernels] or not artifact:
        return None
    return artifact, sigs


def lookup(kernels, target: Target, name: str) -> tuple[bytes, list[KernelSignature]] | None:
    """The cached artifact and signatures of ``kernels`` for ``target`` found by source key, or None
    (cache disabled, never built, or built from other sources)."""
    if not config.cache_enabled():
        return None
    kernels = list(kernels)
    return _lookup(source_key(kernels, target, name), kernels, target, name)


def _lookup(skey: str, kernels: list, target: Target, name: str) -> tuple[bytes, list[KernelSignature]] | None:
    start = time.perf_counter()
    blob = cache.get(skey)
    found = None if blob is None else _unpack(blob, kernels)
    if found is not None:
        log.info("cache hit: %s for %s (source key) in %.3fs", name, target, time.perf_counter() - start)
    return found


# ---- compiling -------------------------------------------------------------------------------------
def compile_kernels(kernels, target: Target, name: str) -> tuple[bytes, list[KernelSignature]]:
    kernels = list(kernels)
    dump = config.dump_dir()
    if not config.cache_enabled():
        return _compile(kernels, target, name, None, dump)
    skey = source_key(kernels, target, name)
    found = None if dump else _lookup(skey, kernels, target, name)  # dumping lowers every time
    if found is not None:
        return found
    with cache.compiling(skey):  # one process compiles a key; the others wait and take its entry
        found = None if dump else _lookup(skey, kernels, target, name)
        if found is not None:
            return found
        log.info("cache miss: %s for %s (source key)", name, target)
        return _compile(kernels, target, name, skey, dump)


def _compile(kernels: list, target: Target, name: str, skey: str | None, dump) -> tuple[bytes, list[KernelSignature]]:
    # The collector stays off from lowering to the artifact, so the module's millions of objects are
    # garbage, and still in the youngest generation, when it comes back on: the next collection of
    # that generation frees them. Switched on between the stages, it moved them, alive, to the oldest
    # generation, where only a full collection, walking every live object of the process, freed them
    # (12.9 s of CPU at the end of unary's lowering when the other stdlib modules went first).
    with collector_paused():
        artifact, sigs = _lower_and_finalize(kernels, target, name, dump)
    if skey is not None:
        cache.put(skey, _pack(artifact, sigs), f"{name} {target.name} {target.arch}")
    return artifact, sigs


def _lower_and_finalize(kernels: list, target: Target, name: str, dump) -> tuple[bytes, list[KernelSignature]]:
    start = time.perf_counter()
    module, sigs = lower_module(kernels, target, name)
    text = rendered(module)
    if dump:
        dump_stages(dump, kernels, target, name, module)
    # the back end's own sources too: a fix in what runs after the IR (passes, alias copies, linking)
    # must not be answered from an artifact the unfixed code made of the same IR
    key = cache.key("pykern", __version__, llvmlite.__version__, compiler_hash(), target.artifact_key(), text,
                    json.dumps(module.kernel_aliases, sort_keys=True), f"lsr={module.loop_strength_reduction}")
    artifact = cache.get(key)
    if artifact is None:
        artifact = target.finalize(module, sigs)
        cache.put(key, artifact, f"{name} {target.name} {target.arch} (IR key)")
        log.info("compiled %s for %s in %.3fs", name, target, time.perf_counter() - start)
    else:
        log.info("cache hit: %s for %s (IR key) in %.3fs", name, target, time.perf_counter() - start)
    return artifact, sigs


def dump_stages(root, kernels, target: Target, name: str, module: ir.Module) -> None:
    """``PYKERN_DUMP``: write each stage of one compile into ``root/<name>.<target>/``: the typed IR
    (``1-typed.py``), the LLVM IR (``2-llvm.ll``), the optimised IR (``3-opt.ll``) and the assembly
    (``4-asm.s``; PTX for cuda)."""
    from pathlib import Path

    folder = Path(root) / "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{name}.{target.name}-{target.arch}")
    folder.mkdir(parents=True, exist_ok=True)
    typed = "\n".join(printer.function(k.body(target)) for k in kernels)
    (folder / "1-typed.py").write_text(typed)
    (folder / "2-llvm.ll").write_text(str(module))
    (folder / "3-opt.ll").write_text(str(target.optimize(module)))
    (folder / "4-asm.s").write_text(target.assembly(module))
    log.info("dumped the stages of %s for %s into %s", name, target, folder)


def build_module(module, target: Target) -> tuple[bytes, list[KernelSignature]]:
    """The artifact of a whole ``pykern.Module`` (candle loads modules, not single kernels)."""
    return compile_kernels(module.kernels, target, module.name)
