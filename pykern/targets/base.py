"""The target interface: everything the shared lowering needs to know about a code-generation target.

The lowering (``pykern.lower.llvm``) is written once. What differs between AMDGPU, NVPTX and the host
CPU sits behind two small classes:

* ``Target`` — one per (target, arch): triple, data layout, address spaces, wave size, capability
  checks, module set-up and the back half of the pipeline (optimise, emit, link).
* ``KernelFrame`` — one per kernel being lowered: how the kernel function is declared, how the
  built-ins (ids, barriers, shuffles, atomics, shared memory) are spelled in LLVM IR, and how the
  kernel returns. The built-ins' lowerings (``pykern.lang.builtins``) call these hooks. The CPU target's frame turns barriers into coroutine suspends; the GPU frames emit
  intrinsics.

Adding a target is one subclass of each, registered in ``pykern.targets.registry``.
"""
from __future__ import annotations

import contextlib
import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.nodes import Loc
from .llvm_ext import alloca, atomic_rmw, cmpxchg
from .matrix import MatrixUnit, PortableMatrixUnit

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))


@functools.cache
def init_llvm() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # Machine LICM hoists every constant a loop materialises (polynomial coefficients of inlined
    # math) out of grid-stride loops; on AMDGPU wave64 that took uerf_* from 22 VGPRs to 128 plus
    # 158 spilled. The IR-level LICM still hoists real work. Set once, for every target alike.
    llvm.set_option("", "-disable-machine-licm")


@dataclass(frozen=True)
class KernelSignature:
    """What a runtime needs to launch a compiled kernel: its name and explicit parameters.

    ``params`` holds (name, size in bytes, alignment, kind) with kind ``"ptr"`` or ``"value"``;
    offsets follow natural alignment, which is also what the AMDGPU metadata reports.
    """

    name: str
    params: tuple[tuple[str, int, int, str], ...]
    max_block_size: int = 1024
    #: blocks of max_block_size that should fit on one SM/CU at once (0: no hint). Targets turn it
    #: into a register budget (nvvm.minctasm, amdgpu-waves-per-eu).
    min_blocks_per_sm: int = 0

    @property
    def offsets(self) -> tuple[int, ...]:
        out, off = [], 0
        for _, size, align, _ in self.params:
            off = (off + align - 1) // align * align
            out.append(off)
            off += size
        return tuple(out)

    @property
    def kernarg_size(self) -> int:
        if not self.params:
            return 0
        return self.offsets[-1] + self.params[-1][1]


class Target(ABC):
    """A code-generation target for one architecture."""

    name: str = ""  # "cpu", "amdgpu", "cuda"
    triple: str = ""
    wave_size: int = 32
    global_as = 0
    shared_as = 0
    private_as = 0
    #: file extension of the artifact ``finalize`` returns (".hsaco", ".ptx", ".o")
    binary_ext = ""
    #: static shared memory a kernel may declare (GPU targets narrow it per arch)
    max_shared_bytes = 1 << 20
    #: bytes of each array a thread takes per step of a ``grid_stride`` loop (``lower/tiles.py``):
    #: GPUs need several loads in flight per thread to reach their memory bandwidth; 0 = one element
    tile_bytes = 0
    #: bf16 atomic add/sub as LLVM's ``atomicrmw fadd bfloat`` (one instruction where the arch has
    #: it, else LLVM's CAS loop); False where LLVM would round to bf16 through a runtime routine the
    #: JIT may lack (the host): the lowering then writes the CAS loop with its own rounding
    bf16_atomics_in_llvm = True
    #: whether ``finalize`` writes a kernel under a second name without compiling it twice (the
    #: ``kernel_aliases`` attribute ``compiler.lower_module`` sets on the module: ``{alias: primary}``);
    #: where False the compiler lowers every name as a kernel of its own
    emits_aliases = False

    def __init__(self, arch: str):
        self.arch = arch

    # ---- identity -------------------------------------------------------------------------------
    def cache_key(self) -> str:
        """Everything about this target that changes a kernel source's artifact (the source key)."""
        return f"{self.artifact_key()}:{self.tile_bytes}"

    def artifact_key(self) -> str:
        """What changes the artifact of a given LLVM IR text (the IR key): not what only the front end
        and the lowering read (``tile_bytes``; it shows in the IR), so a kernel whose IR comes out the
        same under another such setting (one without grid-stride tiles) is optimised and compiled once."""
        return f"{self.name}:{self.arch}:{self.wave_size}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.arch} wave{self.wave_size}>"

    # ---- capabilities ---------------------------------------------------------------------------
    def check(self, feature: str, dtype, loc: Loc | None) -> None:
        """Raise ``CompileError`` at ``loc`` if ``feature`` on ``dtype`` is unsupported here.

        Features: ``"atomic.<op>.<space>"`` (op = add sub min max xchg cas; space = global shared).
        Called by the lowering *before* LLVM sees the operation: some LLVM failures end the process.
        """

    def unsupported(self, what: str, loc: Loc | None) -> CompileError:
        return CompileError(f"{what} is not supported on {self.name} {self.arch}", loc)

    def round_f32_to_bf16(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value | None:
        """``v`` (an f32) rounded to bf16 bits (an i16) by an instruction of this target, or None:
        the lowering then rounds with integer arithmetic (lower/convert.py), the same bits everywhere."""
        return None

    def round_f64_to_half(self, b: ir.IRBuilder, v: ir.Value, bf16: bool) -> ir.Value | None:
        """``v`` (an f64) rounded once to f16 (``bf16`` false: an LLVM half) or to bf16 bits (an i16)
        by an instruction of this target, or None: the lowering then rounds to f32 by round-to-odd
        and from there to the 16-bit float (lower/convert.py), the same value in more steps."""
        return None

    def dot4(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value, x_signed: bool) -> ir.Value | None:
        """``pk.dot4_i8``/``pk.dot4_u8i8`` (i32 operands: four bytes each, ``y``'s signed) by an
        instruction of this target, or None: the lowering then adds the four products in i32
        arithmetic (``dot4_bytes`` in ``lang/builtins/math.py``), the same wrapping sum."""
        return None

    def matrix_unit(self, dtype) -> MatrixUnit:
        """``pk.mma`` on ``dtype`` inputs (f16, bf16, i8): the target's matrix instruction where it has one
        (``targets/matrix.py``), else the portable lowering through wave shuffles (the same products,
        added in order of k)."""
        return PortableMatrixUnit(dtype, self.wave_size)

    def fragment_unit(self, frag) -> MatrixUnit:
        """The unit that holds an ``ir.types.FragmentType`` value: an accumulator's is that of the inputs
        it accumulates (f32: f16's, whose C layout bf16 shares on every target; i32: i8's)."""
        if frag.role == "acc":
            return self.matrix_unit(T.i8 if frag.elem is T.i32 else T.f16)
        return self.matrix_unit(frag.elem)

    def fragment_type(self, frag) -> ir.Type:
        """The LLVM type of an ``ir.types.FragmentType`` value on this target (one lane's share)."""
        return self.fragment_unit(frag).fragment_type(frag.role, frag.layout)

    def policy_load(self, b: ir.IRBuilder, ptr: ir.Value, ty: ir.Type, eviction: str) -> ir.Value:
        """``pk.load``: a global load whose cache line follows ``eviction`` (``N.EVICTION_POLICIES``)
        where this target can say so; a plain load where it cannot (the value is the same)."""
        return b.load(ptr, typ=ty)

    def policy_store(self, b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, eviction: str) -> None:
        """``pk.store``: ``policy_load``'s counterpart."""
        b.store(value, ptr)

    # ---- module ---------------------------------------------------------------------------------
    @functools.cached_property
    def target_machine(self) -> llvm.TargetMachine:
        init_llvm()
        return self._make_target_machine()

    @abstractmethod
    def _make_target_machine(self) -> llvm.TargetMachine: ...

    def new_module(self, name: str) -> ir.Module:
        """An empty module with triple, data layout and module flags set."""
        mod = ir.Module(name=name)
        mod.triple = self.triple
        mod.data_layout = str(self.target_machine.target_data)
        return mod

    @abstractmethod
    def begin_kernel(self, module: ir.Module, sig: KernelSignature, param_types: list[ir.Type],
                     uses_sync: bool) -> "KernelFrame":
        """Declare the kernel in ``module`` and return a frame positioned at its body."""

    @abstractmethod
    def finalize(self, module: ir.Module, kernels: list[KernelSignature]) -> bytes:
        """Verify, optimise and emit the artifact that the runtime loads (code object, PTX, object)."""

    def assembly(self, module: ir.Module) -> str:
        """The target assembly of a (fresh) module, for ``pykern show --stage asm``."""
        ref = self.optimize(module)
        with self.codegen_options(module):
            return self.target_machine.emit_assembly(ref)

    @contextlib.contextmanager
    def codegen_options(self, module: ir.Module):
        """LLVM's code-generator options for emitting ``module``: loop strength reduction off where
        its kernels chose so for this target (``module.loop_strength_reduction``, from ``@pk.kernel``'s
        option). LLVM's options are process-wide and a build worker compiles several modules, so the
        option is set before each emission and put back to LLVM's default after it."""
        lsr = getattr(module, "loop_strength_reduction", True)
        if lsr:
            yield
            return
        init_llvm()
        llvm.set_option("", "-disable-lsr=true")
        try:
            yield
        finally:
            llvm.set_option("", "-disable-lsr=false")

    def optimize(self, module: ir.Module, level: int = 3) -> llvm.ModuleRef:
        """Parse, verify and run the O-level pipeline; returns the optimised module."""
        init_llvm()
        ref = llvm.parse_assembly(str(module))
        ref.verify()
        ref.triple = self.triple
        ref.data_layout = str(self.target_machine.target_data)
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pb = llvm.create_pass_builder(self.target_machine, pto)
        pb.getModulePassManager().run(ref, pb)
        return ref


class KernelFrame(ABC):
    """The lowering's view of one kernel under construction.

    ``builder`` is positioned in the body; ``args`` are the explicit parameters as LLVM values
    (pointers in the target's global address space). All id built-ins return i32.
    """

    builder: ir.IRBuilder
    args: list[ir.Value]
    target: Target

    @abstractmethod
    def thread_idx(self, axis: int) -> ir.Value: ...
    @abstractmethod
    def block_idx(self, axis: int) -> ir.Value: ...
    @abstractmethod
    def block_dim(self, axis: int) -> ir.Value: ...
    @abstractmethod
    def grid_dim(self, axis: int) -> ir.Value: ...
    @abstractmethod
    def lane_id(self) -> ir.Value: ...

    @abstractmethod
    def barrier(self, loc: Loc | None) -> None:
        """A block-wide barrier that also orders shared *and* global memory within the block."""

    @abstractmethod
    def fence(self, scope: str) -> None:
        """A memory fence at scope ``"block"``, ``"device"`` or ``"system"``."""

    @abstractmethod
    def shuffle(self, kind: str, value: ir.Value, arg: ir.Value, loc: Loc | None) -> ir.Value:
        """Exchange an i32 across the wave. ``kind`` is idx, xor, up or down (CUDA semantics: a
        source lane outside the wave yields the caller's own value; idx wraps modulo the width)."""

    @abstractmethod
    def ballot(self, pred: ir.Value, loc: Loc | None) -> ir.Value:
        """An i64 mask of the lanes whose ``pred`` (i1) is true; bit i = lane i."""

    def atomic_rmw(self, op: str, ptr: ir.Value, value: ir.Value, space: str) -> ir.Value:
        """``op`` is an LLVM atomicrmw operation (add sub min max umin umax xchg fadd fsub fmin fmax)."""
        return atomic_rmw(self.builder, op, ptr, value, "monotonic", self.sync_scope(space))

    def cmpxchg(self, ptr: ir.Value, expected: ir.Value, new: ir.Value, space: str) -> ir.Value:
        pair = cmpxchg(self.builder, ptr, expected, new, "monotonic", self.sync_scope(space))
        return self.builder.extract_value(pair, 0)

    def sync_scope(self, space: str) -> str | None:
        return None

    def grid_dependency(self, op: str) -> None:
        """``pk.grid_dependency_wait()`` (``op`` "wait") and ``pk.launch_dependents()``
        ("launch_dependents"): nothing here, which is their meaning wherever a launch never overlaps
        the kernel before it (``lang/builtins/dependent.py``); NVPTX sm_90+ emits ``griddepcontrol``."""

    def alloca(self, ty: ir.Type, name: str = "") -> ir.Value:
        """A private variable, placed in the entry block."""
        return alloca(self.entry_builder, ty, self.target.private_as, name)

    @abstractmethod
    def shared_array(self, name: str, elem: ir.Type, count: int, align: int) -> ir.Value: ...
    @abstractmethod
    def dynamic_shared(self, align: int) -> ir.Value: ...

    def guard(self, address: ir.Value, nbytes: int, loc: Loc | None) -> ir.Value | None:
        """An i1 that is true when an access may go ahead (bounds-checked mode), or None."""
        return None

    @abstractmethod
    def ret(self) -> None:
        """Return from the kernel (the builder's block is then terminated)."""

    def finish(self) -> None:
        """Called once the body is lowered."""


# ---- signatures <-> JSON (cache entries and prebuilt manifests) ----------------------------------
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
