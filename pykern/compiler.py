"""Compile a module of kernels for a target: typed IR -> LLVM IR -> artifact, through the disk cache.

Every stage's output is reachable for inspection (``lower_module`` for the LLVM IR,
``Target.optimize`` for the optimised IR, ``Target.assembly`` for the GPU assembly), which is what
``pykern show`` prints. The cache key is the LLVM IR text itself plus the target and the versions:
honest by construction (whatever changed the kernel changed the IR), and the expensive part —
LLVM's optimiser, code generation and linking — is what it saves.
"""
from __future__ import annotations

import logging
import time

import llvmlite
from llvmlite import ir

from . import cache
from .lower.llvm import lower_kernel
from .targets.base import KernelSignature, Target

__version__ = "0.1.0"
log = logging.getLogger("pykern.compiler")


def lower_module(kernels, target: Target, name: str) -> tuple[ir.Module, list[KernelSignature]]:
    """The LLVM IR module holding every kernel instance of ``kernels`` for ``target``."""
    module = target.new_module(name)
    sigs = [lower_kernel(target, module, inst.typed(target), inst.max_block_size) for inst in kernels]
    return module, sigs


def compile_kernels(kernels, target: Target, name: str) -> tuple[bytes, list[KernelSignature]]:
    start = time.perf_counter()
    module, sigs = lower_module(kernels, target, name)
    text = str(module)
    key = cache.key("pykern", __version__, llvmlite.__version__, target.cache_key(), text)
    artifact = cache.get(key)
    if artifact is None:
        artifact = target.finalize(module, sigs)
        cache.put(key, artifact)
        log.info("compiled %s for %s in %.3fs", name, target, time.perf_counter() - start)
    else:
        log.info("cache hit: %s for %s", name, target)
    return artifact, sigs


def build_module(module, target: Target) -> tuple[bytes, list[KernelSignature]]:
    """The artifact of a whole ``pykern.Module`` (candle loads modules, not single kernels)."""
    return compile_kernels(module.kernels, target, module.name)
