"""The AMDGPU target: kernels for CDNA and RDNA GPUs as HSACO code objects.

``AmdgpuTarget`` sets up modules for ``amdgcn-amd-amdhsa`` (code object v5 unless asked otherwise),
checks what an arch can do before LLVM sees it, and runs the back half of the pipeline: the O3
pipeline (its AMDGPU attributor drops the hidden arguments a kernel does not use), object emission,
``ld.lld -shared``, and a read-back of the code object's metadata against the Python signature.

``AmdgpuFrame`` spells the built-ins in AMDGPU IR. Facts behind the choices (all verified with
llvmlite 0.50 / LLVM 22, see ``shared/spec/lowering_notes.md``):

* LLVM 22 defaults to code object v6, which only ROCm >= 6.3 loads; the module flag selects v5.
* ``blockDim``/``gridDim`` come from the v5 hidden-argument block (the dispatch packet for v4).
* A bare ``s_barrier`` does not order global memory on gfx11/12; the workgroup fences around it do.
* Without ``!amdgpu.no.fine.grained.memory``/``!amdgpu.no.remote.memory`` most global atomics become
  CAS loops. pykern's global memory is ``hipMalloc``'d device memory, so the metadata is truthful.
* LDS globals must have an ``undef`` initialiser (``zeroinitializer`` ends the process), allocas
  live in address space 5, and ``ballot.i32`` aborts on wave64, so the ballot is always ``.i64``.
"""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir
from llvmlite.ir.values import FunctionAttributes

from ..errors import CompileError
from ..ir.nodes import Loc
from .aliases import object_with_aliases
from .llvm_ext import atomic_rmw, cmpxchg, intrinsic
from .amdgpu_archs import ArchInfo, arch_info
from .base import I1, I8, I16, I32, I64, KernelFrame, KernelSignature, Target
from .matrix import MatrixUnit, mfma_16x16x16, mfma_i8, wmma_i8, wmma_rdna3, wmma_rdna4
from .codeobject import CodeObject
from .linker import link_shared

_AXES = "xyz"
#: the LLVM module-flag value of each code object version
_COV_FLAG = {4: 400, 5: 500, 6: 600}
#: atomic operations pykern's front end may ask for, by operand class
_INT_ATOMICS = frozenset({"add", "sub", "min", "max", "xchg", "exchange", "cas", "and", "or", "xor"})
_FLOAT_ATOMICS = frozenset({"add", "sub", "min", "max", "xchg", "exchange", "cas"})


class _KernelAttributes(FunctionAttributes):
    """llvmlite's function attributes plus string attributes (``"key"="value"``), which
    AMDGPU needs for ``amdgpu-flat-work-group-size`` and llvmlite's set rejects."""

    def add(self, name):
        if name.startswith('"'):
            return set.add(self, name)
        return super().add(name)


class AmdgpuTarget(Target):
    """Code generation for one AMDGPU arch (a row of ``amdgpu_archs.ARCHS``)."""

    name = "amdgpu"
    triple = "amdgcn-amd-amdhsa"
    global_as = 1
    shared_as = 3
    private_as = 5
    binary_ext = ".hsaco"
    emits_aliases = True

    def __init__(self, arch: str, code_object_version: int | None = None, wave64: bool | None = None):
        try:
            self.info: ArchInfo = arch_info(arch)
        except KeyError as exc:
            raise CompileError(exc.args[0]) from None
        super().__init__(self.info.name)
        if code_object_version is None:  # v5 is what ROCm 6.x loads; generic targets exist from v6
            code_object_version = 6 if self.info.is_generic else 5
        if code_object_version not in _COV_FLAG:
            raise CompileError(f"code object version {code_object_version} is not supported "
                               f"(choose one of {', '.join(map(str, _COV_FLAG))})")
        if self.info.is_generic and code_object_version < 6:
            raise CompileError(f"{self.arch} is a generic target: it needs code object version 6 or later")
        self.code_object_version = code_object_version
        wave = self.info.wave_size if wave64 is None else (64 if wave64 else 32)
        if not self.info.supports_wave(wave):
            raise CompileError(f"wave{wave} is not supported on amdgpu {self.arch} "
                               f"({self.info.generation} runs wave{self.info.wave_size} only)")
        self.wave_size = wave

    @property
    def features(self) -> str:
        """LLVM target features. xnack/sramecc stay unset ("any") so one object loads whichever
        mode the device runs in; RDNA wave64 is the only opt-in."""
        return "+wavefrontsize64" if self.wave_size == 64 and not self.info.is_cdna else ""

    def artifact_key(self) -> str:
        return f"{super().artifact_key()}:cov{self.code_object_version}"

    def _make_target_machine(self) -> llvm.TargetMachine:
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.arch, features=self.features, opt=3, reloc="pic", codemodel="default")

    # ---- capabilities ---------------------------------------------------------------------------
    #: one element per thread and step: the NVIDIA-measured tiles spilled scalar registers on wave64
    #: (where_*), and with no AMD GPU to measure them on, no-spill code wins

    def check(self, feature: str, dtype, loc: Loc | None) -> None:
        """Reject atomics AMDGPU cannot do on ``dtype``; every other 32/64-bit atomic compiles on
        every listed arch (natively or as a CAS loop, see ``ArchInfo.native_*``)."""
        parts = feature.split(".")
        if parts[0] != "atomic":
            return
        if len(parts) != 3 or parts[2] not in ("global", "shared"):
            raise CompileError(f"unknown atomic feature {feature!r}", loc)
        op, space = parts[1], parts[2]
        kind, bits = getattr(dtype, "kind", None), getattr(dtype, "bits", 0)
        allowed = _FLOAT_ATOMICS if kind == "float" else _INT_ATOMICS
        if getattr(dtype, "name", None) in ("f16", "bf16") and op in ("add", "sub"):
            return  # LLVM's AtomicExpand: a CAS loop on the enclosing 32-bit word
        if kind not in ("int", "uint", "float") or bits not in (32, 64):
            raise self.unsupported(
                f"atomic {op} on {dtype} in {space} memory (AMDGPU atomics take 32- and 64-bit "
                "integers and f32/f64, and add/sub of f16/bf16; fp8, bool and 8/16-bit integers have none)", loc)
        if op not in allowed:
            raise self.unsupported(f"atomic {op} on {dtype} in {space} memory", loc)

    def dot4(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value, x_signed: bool) -> ir.Value:
        """``v_dot4_i32_i8``/``v_dot4c_i32_i8`` (``llvm.amdgcn.sdot4``, every listed arch) and, for
        unsigned x signed bytes, ``v_dot4_i32_iu8`` (``llvm.amdgcn.sudot4``) where the arch has it
        (``ArchInfo.dot4_mixed_sign``); elsewhere two signed dots: x's bytes below 128, then its top
        bits times 128. No clamp: the sum wraps like the integer arithmetic."""
        no_clamp = ir.Constant(I1, 0)
        sdot4 = intrinsic(b.module, "llvm.amdgcn.sdot4", I32, [I32, I32, I32, I1])
        if x_signed:
            return b.call(sdot4, [x, y, acc, no_clamp])
        if self.info.dot4_mixed_sign:
            sudot4 = intrinsic(b.module, "llvm.amdgcn.sudot4", I32, [I1, I32, I1, I32, I32, I1])
            return b.call(sudot4, [no_clamp, x, ir.Constant(I1, 1), y, acc, no_clamp])
        low = b.call(sdot4, [b.and_(x, I32(0x7F7F7F7F)), y, acc, no_clamp])
        top = b.call(sdot4, [b.and_(b.lshr(x, I32(7)), I32(0x01010101)), y, I32(0), no_clamp])
        return b.add(low, b.shl(top, I32(7)))

    def matrix_unit(self, dtype) -> MatrixUnit:
        """MFMA on CDNA, WMMA on RDNA3/RDNA4 in wave32 (their wave64 forms hold other layouts: those
        take the portable lowering, like RDNA2 and the generic targets)."""
        core, i8 = self.info.matrix_core, dtype.name == "i8"
        if core == "mfma":
            cdna3 = self.info.generation != "cdna2"
            return mfma_i8(dtype, cdna3) if i8 else mfma_16x16x16(dtype, gfx942_names=cdna3)
        if core in ("wmma_rdna3", "wmma_rdna4") and self.wave_size == 32:
            rdna4 = core == "wmma_rdna4"
            return wmma_i8(dtype, rdna4) if i8 else (wmma_rdna4 if rdna4 else wmma_rdna3)(dtype)
        return super().matrix_unit(dtype)

    def policy_load(self, b: ir.IRBuilder, ptr: ir.Value, ty: ir.Type, eviction: str) -> ir.Value:
        """``evict_first`` as LLVM's ``!nontemporal`` (the ISA's non-temporal / streaming bits);
        AMDGPU has no way to ask that a line stay longer, so ``evict_last`` loads plainly."""
        return self._nontemporal(b.load(ptr, typ=ty), eviction)

    def policy_store(self, b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, eviction: str) -> None:
        self._nontemporal(b.store(value, ptr), eviction)

    @staticmethod
    def _nontemporal(instr, eviction: str):
        if eviction == "evict_first":
            instr.set_metadata("nontemporal", instr.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return instr

    # ---- module ---------------------------------------------------------------------------------
    def new_module(self, name: str) -> ir.Module:
        mod = super().new_module(name)
        flag = mod.add_metadata([I32(1), "amdhsa_code_object_version",
                                 I32(_COV_FLAG[self.code_object_version])])
        mod.add_named_metadata("llvm.module.flags", flag)
        return mod

    def begin_kernel(self, module: ir.Module, sig: KernelSignature, param_types: list[ir.Type],
                     uses_sync: bool) -> "AmdgpuFrame":
        """Define ``sig.name`` as an ``amdgpu_kernel``. Pointer parameters are moved to the global
        address space: that gives ``.address_space: global`` metadata and ``global_*`` access.
        ``uses_sync`` changes nothing here — barriers are plain intrinsics on AMDGPU."""
        if not 1 <= sig.max_block_size <= 1024:
            raise CompileError(f"kernel {sig.name}: max_block_size {sig.max_block_size} is outside "
                               f"1..1024 on amdgpu {self.arch}")
        types = [ir.PointerType(addrspace=self.global_as) if isinstance(t, ir.PointerType) else t
                 for t in param_types]
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), sig.name)
        fn.calling_convention = "amdgpu_kernel"
        fn.attributes = _KernelAttributes()
        fn.attributes.add(f'"amdgpu-flat-work-group-size"="1,{sig.max_block_size}"')
        if sig.min_blocks_per_sm:  # blocks per CU -> waves per SIMD (4 SIMDs a CU, 4 per WGP half)
            waves = sig.min_blocks_per_sm * -(-sig.max_block_size // self.wave_size)
            fn.attributes.add(f'"amdgpu-waves-per-eu"="{max(1, -(-waves // 4))}"')
        for arg, (pname, *_rest) in zip(fn.args, sig.params):
            arg.name = pname
        return AmdgpuFrame(self, module, fn, sig)

    def finalize(self, module: ir.Module, kernels: list[KernelSignature]) -> bytes:
        """O3, verify, emit, link; then read the code object back and check every kernel's explicit
        arguments against its signature, so an ABI slip fails the build, not a launch."""
        ref = self.optimize(module)
        with self.codegen_options(module):
            obj = self.target_machine.emit_object(ref)
        hsaco = link_shared(object_with_aliases(obj, getattr(module, "kernel_aliases", {})))
        self.check_abi(hsaco, kernels)
        return hsaco

    def check_abi(self, hsaco: bytes, kernels: list[KernelSignature]) -> None:
        co = CodeObject(hsaco)
        for sig in kernels:
            k = co.kernels.get(sig.name)
            if k is None:
                raise CompileError(f"kernel {sig.name} is missing from the {self.arch} code object")
            got = [(a.offset, a.size) for a in k.explicit_args]
            want = [(off, p[1]) for off, p in zip(sig.offsets, sig.params)]
            if got != want:
                raise CompileError(f"kernel {sig.name}: {self.arch} code object lays out arguments "
                                   f"as (offset, size) {got}, the signature as {want}")


class AmdgpuFrame(KernelFrame):
    """One kernel under construction.

    ``entry_builder`` sits before the entry block's branch to the body: allocas and the loads of
    ids and hidden arguments go there once, so a cached value dominates every use.
    """

    def __init__(self, target: AmdgpuTarget, module: ir.Module, fn: ir.Function, sig: KernelSignature):
        self.target, self.module, self.function, self.sig = target, module, fn, sig
        self.args = list(fn.args)
        entry, body = fn.append_basic_block("entry"), fn.append_basic_block("body")
        self.entry_builder = ir.IRBuilder(entry)
        self.entry_builder.position_before(self.entry_builder.branch(body))
        self.builder = ir.IRBuilder(body)
        self._cache: dict = {}
        self._shared: dict[str, ir.GlobalVariable] = {}
        self._static_lds = 0
        self._empty_md = module.add_metadata([])

    # ---- ids --------------------------------------------------------------------------------------
    def _once(self, key, make):
        """Emit ``make(entry_builder)`` once per kernel, in the entry block."""
        if key not in self._cache:
            self._cache[key] = make(self.entry_builder)
        return self._cache[key]

    def _call(self, b: ir.IRBuilder, name: str, ret: ir.Type, args=(), types=None):
        fn = intrinsic(self.module, name, ret, types if types is not None else [a.type for a in args])
        return b.call(fn, list(args))

    def thread_idx(self, axis: int) -> ir.Value:
        def make(b):
            v = self._call(b, f"llvm.amdgcn.workitem.id.{_AXES[axis]}", I32)
            v.set_metadata("range", self.module.add_metadata([I32(0), I32(self.sig.max_block_size)]))
            return v
        return self._once(("tid", axis), make)

    def block_idx(self, axis: int) -> ir.Value:
        return self._once(("bid", axis),
                          lambda b: self._call(b, f"llvm.amdgcn.workgroup.id.{_AXES[axis]}", I32))

    def _const_load(self, b: ir.IRBuilder, base: ir.Value, offset: int, ty: ir.IntType) -> ir.Value:
        ptr = b.gep(base, [I64(offset)], source_etype=I8)
        v = b.load(ptr, typ=ty, align=min(ty.width // 8, offset & -offset or 8))
        v.set_metadata("invariant.load", self._empty_md)
        return v

    def _implicit_args(self, b: ir.IRBuilder) -> ir.Value:
        return self._once("implicitarg", lambda b: self._call(
            b, "llvm.amdgcn.implicitarg.ptr", ir.PointerType(addrspace=4)))

    def _dispatch_ptr(self, b: ir.IRBuilder) -> ir.Value:
        return self._once("dispatch", lambda b: self._call(
            b, "llvm.amdgcn.dispatch.ptr", ir.PointerType(addrspace=4)))

    def block_dim(self, axis: int) -> ir.Value:
        """v5/v6: ``hidden_group_size_{x,y,z}`` (u16 at 12/14/16 of the implicit block). v4 has
        another implicit layout, so it reads the HSA dispatch packet's ``workgroup_size``."""
        def make(b):
            if self.target.code_object_version >= 5:
                size = self._const_load(b, self._implicit_args(b), 12 + 2 * axis, I16)
            else:
                size = self._const_load(b, self._dispatch_ptr(b), 4 + 2 * axis, I16)
            size.set_metadata("range", self.module.add_metadata(
                [I16(1), I16(self.sig.max_block_size + 1)]))
            return b.zext(size, I32)
        return self._once(("bdim", axis), make)

    def grid_dim(self, axis: int) -> ir.Value:
        """v5/v6: ``hidden_block_count_{x,y,z}`` (u32 at 0/4/8). v4: the dispatch packet's
        ``grid_size`` counts work-items, so divide by the group size, rounding up."""
        def make(b):
            if self.target.code_object_version >= 5:
                return self._const_load(b, self._implicit_args(b), 4 * axis, I32)
            items = self._const_load(b, self._dispatch_ptr(b), 12 + 4 * axis, I32)
            group = self.block_dim(axis)
            return b.udiv(b.add(items, b.sub(group, I32(1))), group)
        return self._once(("gdim", axis), make)

    def lane_id(self) -> ir.Value:
        """``mbcnt`` counts the set mask bits below this lane; the high half exists on wave64 only."""
        def make(b):
            lane = self._call(b, "llvm.amdgcn.mbcnt.lo", I32, [I32(-1), I32(0)])
            if self.target.wave_size == 64:
                lane = self._call(b, "llvm.amdgcn.mbcnt.hi", I32, [I32(-1), lane])
            return lane
        return self._once("lane", make)

    # ---- synchronisation ----------------------------------------------------------------------------
    def barrier(self, loc: Loc | None) -> None:
        b = self.builder
        b.fence("release", "workgroup")
        self._call(b, "llvm.amdgcn.s.barrier", ir.VoidType())
        b.fence("acquire", "workgroup")

    def fence(self, scope: str) -> None:
        scopes = {"block": "workgroup", "device": "agent", "system": None}
        if scope not in scopes:
            raise CompileError(f"unknown fence scope {scope!r} (block, device or system)")
        self.builder.fence("seq_cst", scopes[scope])

    # ---- wave operations ----------------------------------------------------------------------------
    def shuffle(self, kind: str, value: ir.Value, arg: ir.Value, loc: Loc | None) -> ir.Value:
        """A pull through ``ds_bpermute`` (byte address = 4 * source lane). The source lane is
        computed with the arch's true wave width; out-of-wave sources fall back to the own lane."""
        lane, arg = self.lane_id(), self._to_i32(arg)
        src = source_lane(self.builder, kind, lane, arg, self.target.wave_size)
        if src is None:
            raise CompileError(f"unknown shuffle kind {kind!r} (idx, xor, up or down)", loc)
        return self._permute(value, self.builder.shl(src, I32(2)), loc)

    def _to_i32(self, v: ir.Value) -> ir.Value:
        w = v.type.width
        return v if w == 32 else (self.builder.trunc(v, I32) if w > 32 else self.builder.zext(v, I32))

    def _permute(self, value: ir.Value, addr: ir.Value, loc: Loc | None) -> ir.Value:
        """``ds_bpermute`` moves 32 bits; wider values go in two halves, narrower ones widened."""
        b, ty = self.builder, value.type
        perm = lambda v: self._call(b, "llvm.amdgcn.ds.bpermute", I32, [addr, v])  # noqa: E731
        if ty == I32:
            return perm(value)
        if isinstance(ty, (ir.FloatType, ir.HalfType)):
            as_int = ir.IntType(32 if isinstance(ty, ir.FloatType) else 16)
            return b.bitcast(self._permute(b.bitcast(value, as_int), addr, loc), ty)
        if isinstance(ty, ir.DoubleType):
            return b.bitcast(self._permute(b.bitcast(value, I64), addr, loc), ty)
        if isinstance(ty, ir.IntType) and ty.width == 64:
            lo = perm(b.trunc(value, I32))
            hi = perm(b.trunc(b.lshr(value, I64(32)), I32))
            return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), I64(32)))
        if isinstance(ty, ir.IntType) and ty.width < 32:
            return b.trunc(perm(b.zext(value, I32)), ty)
        raise CompileError(f"cannot shuffle a value of LLVM type {ty} on amdgpu", loc)

    def ballot(self, pred: ir.Value, loc: Loc | None) -> ir.Value:
        """``ballot.i64`` on every wave size: zero-extended on wave32, and ``.i32`` cannot be
        selected on wave64 (an abort, not an exception)."""
        b = self.builder
        if pred.type != I1:
            pred = b.icmp_unsigned("!=", pred, ir.Constant(pred.type, 0))
        return self._call(b, "llvm.amdgcn.ballot.i64", I64, [pred])

    # ---- atomics ------------------------------------------------------------------------------------
    def sync_scope(self, space: str) -> str | None:
        return {"global": "agent", "shared": "workgroup"}.get(space)

    def _atomic_metadata(self, op: str, ty: ir.Type, space: str) -> dict:
        """Truthful for pykern's memory (device-local ``hipMalloc``), and what turns most global
        atomics from CAS loops into single instructions. ``ignore.denormal.mode`` lets gfx90a use
        ``global_atomic_add_f32``, which flushes f32 denormals."""
        if space != "global":
            return {}
        md = {"amdgpu.no.fine.grained.memory": self._empty_md, "amdgpu.no.remote.memory": self._empty_md}
        if op in ("fadd", "fsub") and isinstance(ty, ir.FloatType):
            md["amdgpu.ignore.denormal.mode"] = self._empty_md
        return md

    def atomic_rmw(self, op: str, ptr: ir.Value, value: ir.Value, space: str) -> ir.Value:
        return atomic_rmw(self.builder, op, ptr, value, "monotonic", self.sync_scope(space),
                          self._atomic_metadata(op, value.type, space))

    def cmpxchg(self, ptr: ir.Value, expected: ir.Value, new: ir.Value, space: str) -> ir.Value:
        """LLVM's cmpxchg takes integers only, so floats compare and swap by their bits."""
        b, ty = self.builder, expected.type
        as_int = ir.IntType(64) if isinstance(ty, ir.DoubleType) else I32
        is_float = isinstance(ty, (ir.FloatType, ir.DoubleType))
        if is_float:
            expected, new = b.bitcast(expected, as_int), b.bitcast(new, as_int)
        pair = cmpxchg(b, ptr, expected, new, "monotonic", self.sync_scope(space),
                       self._atomic_metadata("cas", expected.type, space))
        old = b.extract_value(pair, 0)
        return b.bitcast(old, ty) if is_float else old

    # ---- memory -------------------------------------------------------------------------------------
    def shared_array(self, name: str, elem: ir.Type, count: int, align: int) -> ir.Value:
        """A static LDS array: an internal addrspace(3) global with an ``undef`` initialiser (LLVM
        has no LDS initialisers), one per name per kernel. Like every pointer the frame hands out
        it is an *opaque* ``ptr addrspace(3)`` (llvmlite would otherwise give the global a typed
        pointer type that its ``store`` rejects after a GEP), so GEPs need ``source_etype``. The static total is checked against the
        arch's LDS here, where it is a CompileError rather than a fatal LLVM diagnostic."""
        g = self._shared.get(name)
        if g is not None:
            return g
        ty = ir.ArrayType(elem, count)
        nbytes = count * elem.get_abi_size(self.target.target_machine.target_data)
        self._static_lds = -(-self._static_lds // align) * align + nbytes
        limit = self.target.info.lds_per_workgroup
        if self._static_lds > limit:
            raise CompileError(f"kernel {self.sig.name}: {self._static_lds} bytes of shared memory "
                               f"exceed the {limit} bytes of LDS a workgroup has on amdgpu {self.target.arch}")
        g = ir.GlobalVariable(self.module, ty, self.module.get_unique_name(f"{self.sig.name}.{name}"),
                              addrspace=self.target.shared_as)
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, ir.Undefined)
        g.align = align
        g.type = ir.PointerType(addrspace=self.target.shared_as)
        self._shared[name] = g
        return g

    def dynamic_shared(self, align: int) -> ir.Value:
        """The launch-sized LDS array: an external ``[0 x i8]`` in addrspace(3), shared by the kernels
        of a module (LLVM places it after each kernel's static LDS)."""
        g = self.module.globals.get("pykern.dynamic_shared")
        if g is None:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0), "pykern.dynamic_shared",
                                  addrspace=self.target.shared_as)
            g.type = ir.PointerType(addrspace=self.target.shared_as)
        g.align = max(g.align or 1, align)
        return g

    def ret(self) -> None:
        self.builder.ret_void()



def source_lane(b: ir.IRBuilder, kind: str, lane: ir.Value, arg: ir.Value, width: int) -> ir.Value | None:
    """The lane a shuffle reads from (i32), with CUDA's rules for a wave of ``width`` lanes: ``idx``
    wraps modulo the width; ``up``/``down``/``xor`` read their own lane when the source falls outside
    the wave. Plain integer IR, so the tests check it by running it on the host."""
    if kind == "idx":
        return b.and_(arg, I32(width - 1))
    if kind == "xor":
        cand = b.xor(lane, arg)
        return b.select(b.icmp_unsigned("<", cand, I32(width)), cand, lane)
    if kind == "up":
        return b.select(b.icmp_unsigned("<=", arg, lane), b.sub(lane, arg), lane)
    if kind == "down":
        return b.select(b.icmp_unsigned("<", arg, b.sub(I32(width), lane)), b.add(lane, arg), lane)
    return None
