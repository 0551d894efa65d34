"""The NVPTX target: pykern kernels as PTX text that the CUDA driver JIT-compiles at load time.

PTX is the artifact rather than a cubin because the driver compiles it for whatever GPU it finds
(PTX for sm_90 runs on sm_100/sm_120 too), and because it needs no NVIDIA tool on the compiling
machine. ``ptxas_check`` runs NVIDIA's assembler where one is installed, so CI can reject PTX the
driver would refuse. Facts this file relies on are in ``shared/spec/lowering_notes.md`` §8.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import llvmlite.binding as llvm
from llvmlite import ir

from ..errors import CompileError
from .aliases import ptx_with_aliases
from .llvm_ext import BFLOAT, intrinsic
from .base import I1, I32, I64, KernelFrame, KernelSignature, Target
from .matrix import MatrixUnit, MmaSyncMatrixUnit

#: Supported architectures and the oldest compute capability each one covers. LLVM picks the PTX
#: ISA version (7.0 for sm_80 … 7.8 for sm_89/sm_90), which every CUDA 12+ driver loads.
ARCHS = {"sm_80": (8, 0), "sm_86": (8, 6), "sm_89": (8, 9), "sm_90": (9, 0)}
DEFAULT_ARCH = "sm_90"


def arch_for_capability(major: int, minor: int) -> str | None:
    """The newest supported arch a device of compute capability ``major.minor`` can run.

    PTX is forward compatible, so sm_90a, sm_100 or sm_120 devices get sm_90 and sm_87 gets sm_86;
    devices older than sm_80 get None (their PTX lacks what the lowering emits, e.g. bf16).
    """
    fits = [a for a, cc in ARCHS.items() if cc <= (major, minor)]
    return max(fits, key=ARCHS.__getitem__) if fits else None


#: pykern shuffle kind -> (PTX shfl mode, the ``c`` operand). c packs the segment mask (bits 12:8,
#: 0 = one 32-lane segment) and the clamp lane (bits 4:0): 31 for idx/bfly/down, 0 for up, which
#: makes an out-of-range source lane return the caller's own value, as CUDA's __shfl_*_sync do.
_SHFL = {"idx": ("idx", 31), "xor": ("bfly", 31), "down": ("down", 31), "up": ("up", 0)}
_ATOMIC_OPS = ("add", "sub", "min", "max", "exchange", "xchg", "cas")


class NvptxTarget(Target):
    name = "cuda"
    triple = "nvptx64-nvidia-cuda"
    wave_size = 32
    tile_bytes = 16  # one ld.global.v4 per array and thread (lower/tiles.py)
    global_as, shared_as = 1, 3
    #: The NVPTX datalayout has no ``A`` entry, so allocas live in the generic space 0; the
    #: backend's NVPTXLowerAlloca pass moves them to .local itself.
    private_as = 0
    binary_ext = ".ptx"
    emits_aliases = True

    def __init__(self, arch: str = DEFAULT_ARCH):
        if arch not in ARCHS:
            raise CompileError(f"unknown CUDA arch {arch!r}; supported: {', '.join(ARCHS)}")
        super().__init__(arch)

    def _make_target_machine(self) -> llvm.TargetMachine:
        # NVPTX fuses a*b+c into fma on its own (nvptx-fma-level=2); pykern keeps IEEE semantics on
        # every target, so results match the CPU and AMDGPU: fusing is what pk.fma is for
        llvm.set_option("", "--nvptx-fma-level=0")
        return llvm.Target.from_triple(self.triple).create_target_machine(cpu=self.arch, opt=3)

    def round_f32_to_bf16(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        # LLVM's own fptrunc to bfloat: sm_80's cvt.rn.bf16.f32, one instruction for the integer
        # rounding's eight, which bound bf16 math kernels; a plain instruction to LLVM (inline asm
        # was opaque: it kept loads and stores from being combined). The same value, but a NaN
        # comes out canonical (as from candle's __float2bfloat16), its payload not kept
        return b.bitcast(b.fptrunc(v, BFLOAT), ir.IntType(16))

    def round_f64_to_half(self, b: ir.IRBuilder, v: ir.Value, bf16: bool) -> ir.Value | None:
        # cvt.rn.f16.f64 (every arch) and cvt.rn.bf16.f64 (sm_90, PTX 7.8): one conversion where the
        # round-to-odd path takes two and two f64 compares, which bound f64 -> 16-bit kernels such as
        # bilinear upsampling; below sm_90 LLVM would expand the bf16 one as convert.py does
        if not bf16:
            return b.fptrunc(v, ir.HalfType())
        return b.bitcast(b.fptrunc(v, BFLOAT), ir.IntType(16)) if ARCHS[self.arch] >= (9, 0) else None

    def dot4(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value, x_signed: bool) -> ir.Value:
        # dp4a.{s32,u32}.s32 (sm_61+, so every supported arch): one instruction, wrapping like C's int
        name = "llvm.nvvm.idp4a." + ("s.s" if x_signed else "u.s")
        return b.call(intrinsic(b.module, name, I32, [I32, I32, I32]), [x, y, acc])

    def matrix_unit(self, dtype) -> MatrixUnit:
        # mma.sync m16n8k16 f16/bf16 and m16n8k32 s8: sm_80+, so every arch this target lists
        return MmaSyncMatrixUnit(dtype)

    def _policy_bits(self, ty: ir.Type) -> int | None:
        """The width of a value ``L2::cache_hint`` accesses can move, or None: ``createpolicy`` needs
        PTX 7.4, and LLVM writes 7.0 / 7.1 for sm_80 / sm_86 (those keep plain accesses)."""
        bits = ty.width if isinstance(ty, ir.IntType) else {ir.HalfType: 16, ir.FloatType: 32,
                                                              ir.DoubleType: 64}.get(type(ty))
        return bits if bits in (16, 32, 64) and ARCHS[self.arch] >= (8, 9) else None

    @staticmethod
    def _policy_asm(eviction: str, access: str) -> str:
        return ("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::" + eviction + ".b64 pol, 1.0;\n\t"
                + access + "\n}")

    def policy_load(self, b: ir.IRBuilder, ptr: ir.Value, ty: ir.Type, eviction: str) -> ir.Value:
        """``ld.global.L2::cache_hint`` with an L2 policy of ``eviction`` (inline PTX: LLVM has no
        intrinsic for it)."""
        bits = self._policy_bits(ty)
        if bits is None:
            return b.load(ptr, typ=ty)
        ity = ir.IntType(bits)
        reg = {16: "h", 32: "r", 64: "l"}[bits]
        # a call that only reads memory (stores before it stay before it) and returns: the plain
        # accesses around it still merge into vector ones, which a side effect or a memory clobber
        # would stop. llvmlite's attribute list predates willreturn, hence set.add
        asm = ir.InlineAsm(ir.FunctionType(ity, [I64]), self._policy_asm(
            eviction, f"ld.global.L2::cache_hint.b{bits} $0, [$1], pol;"), f"={reg},l")
        raw = b.call(asm, [b.ptrtoint(ptr, I64)], attrs=("readonly", "nounwind"))
        set.add(raw.attributes, "willreturn")
        return raw if ty == ity else b.bitcast(raw, ty)

    def policy_store(self, b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, eviction: str) -> None:
        bits = self._policy_bits(value.type)
        if bits is None:
            b.store(value, ptr)
            return
        ity = ir.IntType(bits)
        reg = {16: "h", 32: "r", 64: "l"}[bits]
        b.asm(ir.FunctionType(ir.VoidType(), [I64, ity]), self._policy_asm(
            eviction, f"st.global.L2::cache_hint.b{bits} [$0], $1, pol;"), f"l,{reg},~{{memory}}",
            [b.ptrtoint(ptr, I64), value if value.type == ity else b.bitcast(value, ity)], True)

    def check(self, feature: str, dtype, loc) -> None:
        """Atomics: every op on 8- to 64-bit integers and on f16/f32/f64 compiles (LLVM turns what
        PTX lacks, 8/16-bit ints and float min/max/sub, into CAS loops on the enclosing 32-bit word,
        ptxas accepts them for sm_80..sm_90). bf16 and fp8 live in integer registers in the
        lowering, so only exchange and CAS exist for them; bool has none."""
        parts = feature.split(".")
        if parts[0] != "atomic":
            return
        if len(parts) != 3 or parts[1] not in _ATOMIC_OPS or parts[2] not in ("global", "shared"):
            raise CompileError(f"unknown atomic feature {feature!r}", loc)
        op, space = parts[1], parts[2]
        kind, bits = getattr(dtype, "kind", None), getattr(dtype, "bits", 0)
        if kind not in ("int", "uint", "float") or bits not in (8, 16, 32, 64):
            raise self.unsupported(f"atomic {op} on {dtype!r} in {space} memory", loc)
        if kind == "float" and dtype.name == "bf16" and op in ("add", "sub"):
            return  # LLVM's bfloat atomic: sm_90's atom.add.noftz.bf16, a CAS loop before sm_90
        if kind == "float" and dtype.name not in ("f16", "f32", "f64") and op not in ("exchange", "xchg", "cas"):
            raise self.unsupported(f"atomic {op} on {dtype!r} in {space} memory (only exchange and cas "
                                   "exist for it)", loc)

    def begin_kernel(self, module: ir.Module, sig: KernelSignature, param_types: list[ir.Type],
                     uses_sync: bool) -> "NvptxFrame":
        # Pointer parameters must be global (AS1): PTX passes them as .u64 in the param space and
        # loads through them become ld.global, not generic loads with an address-space test.
        params = [ir.PointerType(addrspace=self.global_as) if isinstance(t, ir.PointerType) else t
                  for t in param_types]
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), sig.name)
        fn.calling_convention = "ptx_kernel"
        # llvmlite only knows enum attributes; a string attribute goes into the set unvalidated.
        set.add(fn.attributes, f'"nvvm.maxntid"="{int(sig.max_block_size)}"')
        if sig.min_blocks_per_sm:
            set.add(fn.attributes, f'"nvvm.minctasm"="{int(sig.min_blocks_per_sm)}"')
        for arg, (pname, *_rest) in zip(fn.args, sig.params):
            arg.name = pname
        return NvptxFrame(self, module, fn)

    def finalize(self, module: ir.Module, kernels: list[KernelSignature]) -> bytes:
        ref = self.optimize(module, 3)
        with self.codegen_options(module):
            ptx = self.target_machine.emit_assembly(ref)
        ptx = ptx_with_aliases(ptx, getattr(module, "kernel_aliases", {}))
        for k in kernels:
            if f".entry {k.name}(" not in ptx:
                raise CompileError(f"kernel {k.name} missing from the PTX for {self.arch}")
        return ptx.encode()


class NvptxFrame(KernelFrame):
    """One kernel under construction: intrinsics for ids, barriers, cross-lane ops and shared memory."""

    def __init__(self, target: NvptxTarget, module: ir.Module, fn: ir.Function):
        self.target, self.module, self.function = target, module, fn
        self.args = list(fn.args)
        self._shared: dict[str, ir.GlobalVariable] = {}
        entry, body = fn.append_basic_block("entry"), fn.append_basic_block("body")
        self.entry_builder = ir.IRBuilder(entry)
        self.entry_builder.position_before(self.entry_builder.branch(body))  # allocas go above the br
        self.builder = ir.IRBuilder(body)

    def _call(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        fn = intrinsic(self.module, name, ret, [a.type for a in args])
        return self.builder.call(fn, args)

    def _sreg(self, reg: str, axis: int | None = None) -> ir.Value:
        suffix = "" if axis is None else "." + "xyz"[axis]
        return self._call(f"llvm.nvvm.read.ptx.sreg.{reg}{suffix}", I32, [])

    def thread_idx(self, axis: int) -> ir.Value:
        return self._sreg("tid", axis)

    def block_idx(self, axis: int) -> ir.Value:
        return self._sreg("ctaid", axis)

    def block_dim(self, axis: int) -> ir.Value:
        return self._sreg("ntid", axis)

    def grid_dim(self, axis: int) -> ir.Value:
        return self._sreg("nctaid", axis)

    def lane_id(self) -> ir.Value:
        return self._sreg("laneid")

    def barrier(self, loc) -> None:
        """``barrier.sync 0`` (not ``bar.sync``, the ``.aligned`` form).

        ``.aligned`` promises ptxas that every thread of a warp executes the *same* barrier
        instruction; under sm_70+ independent thread scheduling that does not hold when the
        lowering's structured control flow lets a warp reach a uniform barrier from different
        branches (a barrier in a loop with a divergent ``continue``, after a divergent early exit),
        and then the result is undefined. The non-aligned form only needs every thread of the block
        to arrive; the barrier orders shared and global memory within the block either way, and
        the intrinsic has no memory attributes, so LLVM keeps loads and stores on their side of it.
        """
        self._call("llvm.nvvm.barrier.cta.sync.all", ir.VoidType(), [ir.Constant(I32, 0)])

    def fence(self, scope: str) -> None:
        """seq_cst like CUDA's __threadfence_block/__threadfence/__threadfence_system
        (fence.sc.cta / .gpu / .sys)."""
        llvm_scope = {"block": "block", "device": "device", "system": None}[scope]
        self.builder.fence("seq_cst", llvm_scope)

    def shuffle(self, kind: str, value: ir.Value, arg: ir.Value, loc) -> ir.Value:
        mode, clamp = _SHFL[kind]
        suffix = "f32" if isinstance(value.type, ir.FloatType) else "i32"
        return self._call(f"llvm.nvvm.shfl.sync.{mode}.{suffix}", value.type,
                          [self._active(), value, arg, ir.Constant(I32, clamp)])

    def grid_dependency(self, op: str) -> None:
        """``griddepcontrol.wait`` / ``griddepcontrol.launch_dependents`` (PTX 7.8, sm_90+; nothing on
        older archs, whose launches never overlap). Inline PTX with a memory clobber, as CUDA's own
        ``cudaGridDependencySynchronize``: no load written after the wait may be hoisted above it."""
        if ARCHS[self.target.arch] < (9, 0):
            return
        self.builder.asm(ir.FunctionType(ir.VoidType(), []), f"griddepcontrol.{op};", "~{memory}", [], True)

    def _active(self) -> ir.Value:
        """The lanes taking part: a partial warp (block size not a multiple of 32) has fewer than 32,
        and naming absent lanes in a ``.sync`` mask is undefined behaviour."""
        return self._call("llvm.nvvm.activemask", I32, [])

    def ballot(self, pred: ir.Value, loc) -> ir.Value:
        if pred.type != I1:
            pred = self.builder.icmp_unsigned("!=", pred, ir.Constant(pred.type, 0))
        mask = self._call("llvm.nvvm.vote.ballot.sync", I32, [self._active(), pred])
        return self.builder.zext(mask, I64)

    def sync_scope(self, space: str) -> str | None:
        # Shared memory is visible to one block only, so block scope is enough there; global
        # atomics must be coherent across the whole GPU.
        return "block" if space == "shared" else "device"

    def cmpxchg(self, ptr: ir.Value, expected: ir.Value, new: ir.Value, space: str) -> ir.Value:
        """cmpxchg takes only integers: floats go through an integer of the same width."""
        if not isinstance(expected.type, (ir.HalfType, ir.FloatType, ir.DoubleType)):
            return super().cmpxchg(ptr, expected, new, space)
        ity = ir.IntType({ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(expected.type)])
        b = self.builder
        old = super().cmpxchg(ptr, b.bitcast(expected, ity), b.bitcast(new, ity), space)
        return b.bitcast(old, expected.type)

    def shared_array(self, name: str, elem: ir.Type, count: int, align: int) -> ir.Value:
        """A static ``.shared`` array, one per name per kernel, as an opaque ``ptr addrspace(3)``
        (GEPs take ``source_etype``), like every pointer the frames hand out. Its initialiser is
        undef: an initialised shared variable is a fatal LLVM error."""
        gv = self._shared.get(name)
        if gv is None:
            ty = ir.ArrayType(elem, count)
            gv = ir.GlobalVariable(self.module, ty, self.module.get_unique_name(f"{self.function.name}.{name}"),
                                   addrspace=self.target.shared_as)
            gv.linkage, gv.initializer, gv.align = "internal", ir.Constant(ty, ir.Undefined), align
            gv.type = ir.PointerType(addrspace=self.target.shared_as)
            self._shared[name] = gv
        return gv

    def dynamic_shared(self, align: int) -> ir.Value:
        """The block's dynamic shared memory (``.extern .shared``, sized at launch); one symbol per
        module, shared by its kernels, like CUDA's ``extern __shared__``."""
        gv = self.module.globals.get("pk_dynamic_shared")
        if gv is None:
            gv = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 0), "pk_dynamic_shared",
                                   addrspace=self.target.shared_as)
            gv.linkage, gv.align = "external", 16
            gv.type = ir.PointerType(addrspace=self.target.shared_as)
        gv.align = max(gv.align, align)
        return gv

    def ret(self) -> None:
        self.builder.ret_void()


def ptxas_path() -> str | None:
    return shutil.which("ptxas")


def ptxas_check(ptx: bytes | str, arch: str = DEFAULT_ARCH) -> str:
    """Assemble ``ptx`` with NVIDIA's ptxas for ``arch``; returns ptxas's ``-v`` report.

    Raises CompileError carrying ptxas's messages when it rejects the PTX, and RuntimeError when
    ptxas is not installed (callers decide whether that is a skip or a failure).
    """
    exe = ptxas_path()
    if exe is None:
        raise RuntimeError("ptxas is not on PATH")
    if isinstance(ptx, str):
        ptx = ptx.encode()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "wb") as f:
            f.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                           capture_output=True, text=True)
    if r.returncode:
        raise CompileError(f"ptxas rejected the PTX for {arch}:\n{r.stderr.strip()}")
    return r.stderr + r.stdout
