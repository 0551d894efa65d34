"""The host CPU target: kernels run through llvmlite's JIT with GPU semantics.

Each kernel becomes a *thread function* (the body, one GPU thread) and a *grid driver*
``i32 K(ptr args, ptr launch, i64 b0, i64 b1)`` that runs blocks ``[b0, b1)``; the runtime splits
the grid over host cores by calling drivers concurrently on disjoint ranges.

* Kernels without barriers or wave operations: the driver loops over a block's threads and calls
  the (inlined) body; LLVM vectorises what it can.
* Kernels with them: every thread is an LLVM coroutine (``presplitcoroutine``), each barrier or wave
  exchange a ``coro.suspend``. ``pykern.schedule`` (``_SCHEDULER`` below) resumes a wave once all its
  lanes wait at a wave operation and the block once all threads wait at the same barrier; anything
  else is divergence and ends the launch with an error naming the source line.

Shared memory is a per-block buffer the driver allocates; wave operations exchange values through a
per-block word buffer; the emulated wave width (32 or 64) is a compile-time constant of the target.
"""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from ..ir import types as T
from ..ir.nodes import Loc
from .llvm_ext import TOKEN, TOKEN_NONE, alloca, fn_attr, intrinsic
from .base import I1, I8, I32, I64, KernelFrame, KernelSignature, Target, init_llvm
from .matrix import MatrixUnit, PortableMatrixUnit, get, put

PTR = ir.PointerType()
# struct layouts shared by the frame, the driver and the scheduler (field numbers below)
BLOCK = ir.LiteralStructType([ir.ArrayType(I32, 3)] * 3 + [I32, PTR, PTR, PTR, PTR, I64])
B_BID, B_BDIM, B_GDIM, B_NTHREADS, B_SHARED, B_WAVEBUF, B_CTXS, B_LAUNCH, B_SHARED_BYTES = range(9)
THREAD = ir.LiteralStructType([ir.ArrayType(I32, 3), I32, I32, I32, PTR, PTR])
T_TID, T_LINEAR, T_KIND, T_SITE, T_BLOCK, T_HANDLE = range(6)
THREAD_SIZE = 40
LAUNCH = ir.LiteralStructType([ir.ArrayType(I32, 3), ir.ArrayType(I32, 3), I32, I32, I32, I32, PTR, I64])
L_GRID, L_BLOCK, L_DYN_SHARED, L_ERR_CODE, L_ERR_SITE, L_PAD, L_RANGES, L_NRANGES = range(8)
WAIT_BARRIER, WAIT_WAVE, WAIT_DONE = 1, 2, 3
ERR_BARRIER, ERR_WAVE, ERR_BOUNDS, ERR_SHARED = 1, 2, 3, 4
#: shared memory a block may have, static and dynamic together: a GPU's bound (64 KiB of LDS on AMD,
#: CUDA's default), so a kernel that runs here fits there, and a huge request is refused, not malloc'd
SHARED_LIMIT = 64 * 1024

# Bounds-checked mode: is [addr, addr+size) inside the block's shared memory or one of the launch's
# argument buffers (launch->ranges: nranges pairs of [lo, hi))? If not, record the line and refuse.
_CHECKER = r"""
define linkonce_odr i1 @pykern.check(ptr %block, ptr %addr, i64 %size, i32 %line) {
entry:
  %a = ptrtoint ptr %addr to i64
  %e = add i64 %a, %size
  %sp = getelementptr {[3 x i32], [3 x i32], [3 x i32], i32, ptr, ptr, ptr, ptr, i64}, ptr %block, i32 0, i32 4
  %s0 = load ptr, ptr %sp
  %s = ptrtoint ptr %s0 to i64
  %sbp = getelementptr {[3 x i32], [3 x i32], [3 x i32], i32, ptr, ptr, ptr, ptr, i64}, ptr %block, i32 0, i32 8
  %sb = load i64, ptr %sbp
  %send = add i64 %s, %sb
  %in0 = icmp uge i64 %a, %s
  %in1 = icmp ule i64 %e, %send
  %insh = and i1 %in0, %in1
  br i1 %insh, label %ok, label %scan.pre
scan.pre:
  %lp = getelementptr {[3 x i32], [3 x i32], [3 x i32], i32, ptr, ptr, ptr, ptr, i64}, ptr %block, i32 0, i32 7
  %launch = load ptr, ptr %lp
  %rp = getelementptr {[3 x i32], [3 x i32], i32, i32, i32, i32, ptr, i64}, ptr %launch, i32 0, i32 6
  %ranges = load ptr, ptr %rp
  %np = getelementptr {[3 x i32], [3 x i32], i32, i32, i32, i32, ptr, i64}, ptr %launch, i32 0, i32 7
  %n = load i64, ptr %np
  br label %scan
scan:
  %i = phi i64 [ 0, %scan.pre ], [ %i.next, %next ]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %test, label %fail
test:
  %i2 = shl i64 %i, 1
  %lop = getelementptr i64, ptr %ranges, i64 %i2
  %lo = load i64, ptr %lop
  %hip = getelementptr i64, ptr %lop, i64 1
  %hi = load i64, ptr %hip
  %r0 = icmp uge i64 %a, %lo
  %r1 = icmp ule i64 %e, %hi
  %r = and i1 %r0, %r1
  br i1 %r, label %ok, label %next
next:
  %i.next = add i64 %i, 1
  br label %scan
fail:
  %cp = getelementptr {[3 x i32], [3 x i32], i32, i32, i32, i32, ptr, i64}, ptr %launch, i32 0, i32 3
  store i32 3, ptr %cp
  %lnp = getelementptr {[3 x i32], [3 x i32], i32, i32, i32, i32, ptr, i64}, ptr %launch, i32 0, i32 4
  store i32 %line, ptr %lnp
  ret i1 false
ok:
  ret i1 true
}
"""

_SCHEDULER = r"""
declare void @llvm.coro.resume(ptr)

; Resume whatever may run next. Returns 1 (resumed some), 0 (block finished), -1 (error, written to
; launch->err). A wave runs on once all its lanes wait at a wave operation of the same line (a lane
; that has returned is divergence too: a GPU would read its stale registers); the block runs on once
; every thread waits at the same barrier.
define linkonce_odr i32 @pykern.schedule(ptr %ctxs, i32 %n, i32 %ws, ptr %launch) {
entry:
  br label %wave.loop
wave.loop:
  %w0 = phi i32 [ 0, %entry ], [ %w0.next, %wave.next ]
  %progress = phi i1 [ false, %entry ], [ %progress.next, %wave.next ]
  %more.w = icmp ult i32 %w0, %n
  br i1 %more.w, label %wave.body, label %wave.done
wave.body:
  %wend.0 = add i32 %w0, %ws
  %wend.c = icmp ult i32 %wend.0, %n
  %wend = select i1 %wend.c, i32 %wend.0, i32 %n
  br label %scan
scan:
  %t = phi i32 [ %w0, %wave.body ], [ %t.next, %scan ]
  %nwave = phi i32 [ 0, %wave.body ], [ %nwave.n2, %scan ]
  %nlive = phi i32 [ 0, %wave.body ], [ %nlive.next, %scan ]
  %site = phi i32 [ -1, %wave.body ], [ %site.next, %scan ]
  %bad = phi i1 [ false, %wave.body ], [ %bad.next, %scan ]
  %pk = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %t, i32 2
  %k = load i32, ptr %pk
  %ps = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %t, i32 3
  %s = load i32, ptr %ps
  %isw = icmp eq i32 %k, 2
  %isl = icmp ne i32 %k, 3
  %nwave.inc = zext i1 %isw to i32
  %nwave.n2 = add i32 %nwave, %nwave.inc
  %nlive.inc = zext i1 %isl to i32
  %nlive.next = add i32 %nlive, %nlive.inc
  %first = icmp eq i32 %site, -1
  %differs = icmp ne i32 %site, %s
  %mismatch0 = and i1 %isw, %differs
  %notfirst = xor i1 %first, true
  %mismatch = and i1 %mismatch0, %notfirst
  %bad.next = or i1 %bad, %mismatch
  %take = and i1 %isw, %first
  %site.next = select i1 %take, i32 %s, i32 %site
  %t.next = add i32 %t, 1
  %scan.more = icmp ult i32 %t.next, %wend
  br i1 %scan.more, label %scan, label %scan.end
scan.end:
  %nw = phi i32 [ %nwave.n2, %scan ]
  %any = icmp ne i32 %nw, 0
  br i1 %any, label %wave.check, label %wave.next
wave.check:                                   ; every lane of the wave, returned ones included, must be there
  %nlanes = sub i32 %wend, %w0
  %partial = icmp ne i32 %nw, %nlanes
  %err = or i1 %partial, %bad.next
  br i1 %err, label %fail, label %wave.resume
wave.resume:
  %r = phi i32 [ %w0, %wave.check ], [ %r.next, %wave.resume.next ]
  %rk = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %r, i32 2
  %rkind = load i32, ptr %rk
  %rwaits = icmp eq i32 %rkind, 2
  br i1 %rwaits, label %wave.resume.one, label %wave.resume.next
wave.resume.one:                              ; lanes that already returned stay finished
  store i32 0, ptr %rk
  %rh = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %r, i32 5
  %h = load ptr, ptr %rh
  call void @llvm.coro.resume(ptr %h)
  br label %wave.resume.next
wave.resume.next:
  %r.next = add i32 %r, 1
  %r.more = icmp ult i32 %r.next, %wend
  br i1 %r.more, label %wave.resume, label %wave.next
wave.next:
  %progress.next = phi i1 [ %progress, %scan.end ], [ true, %wave.resume.next ]
  %w0.next = phi i32 [ %wend, %scan.end ], [ %wend, %wave.resume.next ]
  br label %wave.loop
wave.done:
  br i1 %progress, label %ret.more, label %bar.scan
bar.scan:
  %u = phi i32 [ 0, %wave.done ], [ %u.next, %bar.scan ]
  %ndone = phi i32 [ 0, %wave.done ], [ %ndone.next, %bar.scan ]
  %bsite = phi i32 [ -1, %wave.done ], [ %bsite.next, %bar.scan ]
  %bbad = phi i1 [ false, %wave.done ], [ %bbad.next, %bar.scan ]
  %uk.p = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %u, i32 2
  %uk = load i32, ptr %uk.p
  %us.p = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %u, i32 3
  %us = load i32, ptr %us.p
  %udone = icmp eq i32 %uk, 3
  %udone.i = zext i1 %udone to i32
  %ndone.next = add i32 %ndone, %udone.i
  %ubar = icmp eq i32 %uk, 1
  %bfirst = icmp eq i32 %bsite, -1
  %bdiff = icmp ne i32 %bsite, %us
  %bnotfirst = xor i1 %bfirst, true
  %bmis0 = and i1 %ubar, %bdiff
  %bmis = and i1 %bmis0, %bnotfirst
  %bbad.next = or i1 %bbad, %bmis
  %btake = and i1 %ubar, %bfirst
  %bsite.next = select i1 %btake, i32 %us, i32 %bsite
  %u.next = add i32 %u, 1
  %u.more = icmp ult i32 %u.next, %n
  br i1 %u.more, label %bar.scan, label %bar.end
bar.end:
  %alldone = icmp eq i32 %ndone.next, %n
  br i1 %alldone, label %ret.done, label %bar.check
bar.check:
  %somedone = icmp ne i32 %ndone.next, 0
  %berr = or i1 %somedone, %bbad.next
  br i1 %berr, label %fail, label %bar.resume
bar.resume:
  %v = phi i32 [ 0, %bar.check ], [ %v.next, %bar.resume ]
  %vk = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %v, i32 2
  store i32 0, ptr %vk
  %vh.p = getelementptr {[3 x i32], i32, i32, i32, ptr, ptr}, ptr %ctxs, i32 %v, i32 5
  %vh = load ptr, ptr %vh.p
  call void @llvm.coro.resume(ptr %vh)
  %v.next = add i32 %v, 1
  %v.more = icmp ult i32 %v.next, %n
  br i1 %v.more, label %bar.resume, label %ret.more
fail:
  %fcode = phi i32 [ 2, %wave.check ], [ 1, %bar.check ]
  %fsite = phi i32 [ %site.next, %wave.check ], [ %bsite.next, %bar.check ]
  %fc = getelementptr {[3 x i32], [3 x i32], i32, i32, i32, i32}, ptr %launch, i32 0, i32 3
  store i32 %fcode, ptr %fc
  %fs = getelementptr {[3 x i32], [3 x i32], i32, i32, i32, i32}, ptr %launch, i32 0, i32 4
  store i32 %fsite, ptr %fs
  ret i32 -1
ret.more:
  ret i32 1
ret.done:
  ret i32 0
}
"""


class CpuTarget(Target):
    name = "cpu"
    binary_ext = ".o"
    bf16_atomics_in_llvm = False  # without AVX512-BF16, LLVM rounds through __truncsfbf2

    def __init__(self, arch: str = "host", wave_size: int = 64, check_bounds: bool = False, tile_bytes: int = 0):
        if wave_size not in (32, 64):
            raise ValueError(f"the CPU target emulates waves of 32 or 64 lanes, not {wave_size}")
        super().__init__(arch)
        self.wave_size = wave_size
        self.check_bounds = check_bounds
        self.tile_bytes = tile_bytes  # GPU-style tiles on the host: only to test the GPU lowering here
        init_llvm()
        self.triple = llvm.get_process_triple()

    def artifact_key(self) -> str:
        return (f"cpu:{llvm.get_host_cpu_name()}:{self.wave_size}:{self.check_bounds}:"
                f"{llvm.get_host_cpu_features().flatten()}:unroll<={self.unroll_limit}")

    def _make_target_machine(self):
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                            features=llvm.get_host_cpu_features().flatten(),
                                            opt=3, codemodel="jitdefault", jit=True)

    def matrix_unit(self, dtype) -> MatrixUnit:
        return CpuMatrixUnit(dtype, self.wave_size)

    def check(self, feature, dtype, loc):
        # bf16 and fp8 live in integer registers: an integer atomic add on their bits would be wrong;
        # bf16 add/sub go through LLVM's bfloat (a CAS loop here), fp8 has no LLVM type
        op = feature.split(".")[1] if feature.startswith("atomic.") else None
        bf16_arith = dtype is T.bf16 and op in ("add", "sub")
        if op not in (None, "exchange", "cas") and dtype.is_storage_float and dtype is not T.f16 and not bf16_arith:
            raise self.unsupported(f"atomic {op} on {dtype!r}", loc)

    def begin_kernel(self, module, sig, param_types, uses_sync):
        return CpuFrame(self, module, sig, param_types, uses_sync)

    def finalize(self, module: ir.Module, kernels: list[KernelSignature]) -> bytes:
        ref = self.optimize(module)
        return self.target_machine.emit_object(ref)

    def optimize(self, module: ir.Module, level: int = 3) -> llvm.ModuleRef:
        init_llvm()
        ref = llvm.parse_assembly(str(module))
        for name, text in (("pykern.schedule", _SCHEDULER), ("pykern.check", _CHECKER)):
            if name in module.globals:  # runtime support, linked only where a kernel uses it
                support = llvm.parse_assembly(text)
                support.triple, support.data_layout = ref.triple, ref.data_layout
                ref.link_in(support)
        ref.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        if not self.unrolls_loops(module):
            pto.loop_unrolling = False
        pb = llvm.create_pass_builder(self.target_machine, pto)
        pb.getModulePassManager().run(ref, pb)
        return ref

    #: IR text a kernel may have (on average over its module) for LLVM's loop unroller to run on the
    #: host. The quantized MMQ kernels (``mul_mat_q*``: 1.3-2.5 MB each, their tiles already unrolled
    #: by ``pk.static_range``) had the unroller triple their machine code, and code generation was
    #: then half of their first call (docs/cli.md); every other stdlib kernel is below it.
    unroll_limit = 1 << 20

    def unrolls_loops(self, module: ir.Module) -> bool:
        """Whether ``optimize`` lets LLVM unroll ``module``'s loops (a kernel's own ``pk.static_range``
        is unrolled by the front end either way): not for kernels of more than ``unroll_limit``."""
        kernels = sum(1 for name in module.globals if name.endswith(".thread")) or 1
        return len(str(module)) <= self.unroll_limit * kernels


class CpuFrame(KernelFrame):
    """One kernel on the host: a thread function plus, at ``finish``, its grid driver."""

    def __init__(self, target: CpuTarget, module: ir.Module, sig: KernelSignature, param_types, uses_sync: bool):
        self.target, self.module, self.sig, self.param_types = target, module, sig, param_types
        self.coro = uses_sync
        ret = PTR if uses_sync else ir.VoidType()
        self.fn = ir.Function(module, ir.FunctionType(ret, [PTR] + list(param_types)), f"{sig.name}.thread")
        self.fn.linkage = "internal"
        fn_attr(self.fn, "presplitcoroutine" if uses_sync else "alwaysinline")
        self.thr = self.fn.args[0]
        self.args = list(self.fn.args[1:])
        entry = self.fn.append_basic_block("entry")
        self.entry_builder = ir.IRBuilder(entry)
        body = self.fn.append_basic_block("body")
        self.builder = ir.IRBuilder(body)
        self.static_shared = 0
        self.shared_offsets: dict[str, int] = {}
        #: 32-bit words of the block's wave buffer each thread owns (``reserve_wave_words``)
        self.wave_words = 1
        if uses_sync:
            self._begin_coroutine()
        self.entry_term = self.entry_builder.branch(body)
        self.entry_builder.position_before(self.entry_term)

    # ---- plumbing
    def _field(self, base, struct, *idx):
        return self.builder.gep(base, [ir.Constant(I32, 0)] + [ir.Constant(I32, i) for i in idx], source_etype=struct)

    def _block(self):
        return self.builder.load(self._field(self.thr, THREAD, T_BLOCK), typ=PTR)

    def _block_i32(self, field, axis):
        return self.builder.load(self._field(self._block(), BLOCK, field, axis), typ=I32)

    def _begin_coroutine(self):
        m, b = self.module, self.entry_builder
        null = ir.Constant(PTR, None)
        cid = b.call(intrinsic(m, "llvm.coro.id", TOKEN, [I32, PTR, PTR, PTR]), [ir.Constant(I32, 0), null, null, null])
        size = b.call(intrinsic(m, "llvm.coro.size.i64", I64, []), [])
        mem = b.call(intrinsic(m, "malloc", PTR, [I64]), [size])
        self.handle = b.call(intrinsic(m, "llvm.coro.begin", PTR, [TOKEN, PTR]), [cid, mem])
        self.coro_id = cid
        fb = ir.IRBuilder(self.fn.append_basic_block("coro.final"))
        self.final_block = fb.block
        self.cleanup = self.fn.append_basic_block("coro.cleanup")
        self.suspend_ret = self.fn.append_basic_block("coro.ret")
        trap = self.fn.append_basic_block("coro.trap")
        s = fb.call(intrinsic(m, "llvm.coro.suspend", I8, [TOKEN, I1]), [TOKEN_NONE, ir.Constant(I1, 1)])
        sw = fb.switch(s, self.suspend_ret)
        sw.add_case(ir.Constant(I8, 0), trap)
        sw.add_case(ir.Constant(I8, 1), self.cleanup)
        ir.IRBuilder(trap).unreachable()
        cb = ir.IRBuilder(self.cleanup)
        freed = cb.call(intrinsic(m, "llvm.coro.free", PTR, [TOKEN, PTR]), [cid, self.handle])
        cb.call(intrinsic(m, "free", ir.VoidType(), [PTR]), [freed])
        cb.branch(self.suspend_ret)
        rb = ir.IRBuilder(self.suspend_ret)
        rb.call(intrinsic(m, "llvm.coro.end", ir.VoidType(), [PTR, I1, TOKEN]), [self.handle, ir.Constant(I1, 0), TOKEN_NONE])
        rb.ret(self.handle)

    def suspend(self, kind: int, loc: Loc | None) -> None:
        b = self.builder
        b.store(ir.Constant(I32, kind), self._field(self.thr, THREAD, T_KIND))
        b.store(ir.Constant(I32, loc.line if loc else 0), self._field(self.thr, THREAD, T_SITE))
        s = b.call(intrinsic(self.module, "llvm.coro.suspend", I8, [TOKEN, I1]), [TOKEN_NONE, ir.Constant(I1, 0)])
        go = self.fn.append_basic_block("resume")
        sw = b.switch(s, self.suspend_ret)
        sw.add_case(ir.Constant(I8, 0), go)
        sw.add_case(ir.Constant(I8, 1), self.cleanup)
        b.position_at_end(go)

    # ---- ids
    def thread_idx(self, axis):
        return self.builder.load(self._field(self.thr, THREAD, T_TID, axis), typ=I32)

    def block_idx(self, axis):
        return self._block_i32(B_BID, axis)

    def block_dim(self, axis):
        return self._block_i32(B_BDIM, axis)

    def grid_dim(self, axis):
        return self._block_i32(B_GDIM, axis)

    def _linear(self):
        return self.builder.load(self._field(self.thr, THREAD, T_LINEAR), typ=I32)

    def lane_id(self):
        return self.builder.urem(self._linear(), ir.Constant(I32, self.target.wave_size))

    # ---- synchronisation
    def barrier(self, loc):
        self.suspend(WAIT_BARRIER, loc)

    def fence(self, scope):
        self.builder.fence("seq_cst")

    def _wave_slot(self, index):
        buf = self.builder.load(self._field(self._block(), BLOCK, B_WAVEBUF), typ=PTR)
        return self.builder.gep(buf, [index], source_etype=I32)

    def reserve_wave_words(self, words: int) -> None:
        """Give each thread ``words`` words of the wave buffer (thread ``t``'s from ``words * t``); the
        driver sizes the buffer by the kernel's largest request. One word is every shuffle and ballot's."""
        self.wave_words = max(self.wave_words, words)

    def shuffle(self, kind, value, arg, loc):
        b, ws = self.builder, self.target.wave_size
        lin = self._linear()
        b.store(value, self._wave_slot(lin))
        self.suspend(WAIT_WAVE, loc)
        lin = self._linear()
        lane = b.urem(lin, ir.Constant(I32, ws))
        base = b.sub(lin, lane)
        src = {"idx": lambda: b.urem(arg, ir.Constant(I32, ws)), "xor": lambda: b.xor(lane, arg),
               "up": lambda: b.sub(lane, arg), "down": lambda: b.add(lane, arg)}[kind]()
        inside = b.icmp_unsigned("<", src, ir.Constant(I32, ws))
        if kind == "up":
            inside = b.icmp_unsigned("<=", arg, lane)
        n = b.load(self._field(self._block(), BLOCK, B_NTHREADS), typ=I32)
        src_lin = b.add(base, b.select(inside, src, ir.Constant(I32, 0)))
        valid = b.and_(b.and_(inside, b.icmp_unsigned("<", src_lin, n)), self._running(b.select(inside, src_lin, lin)))
        got = b.load(self._wave_slot(b.select(valid, src_lin, lin)), typ=I32)
        result = b.select(valid, got, value)
        self.suspend(WAIT_WAVE, loc)
        return result

    def _running(self, lin):
        """False for a thread of the block that has already returned (its exchange slot is stale)."""
        ctxs = self.builder.load(self._field(self._block(), BLOCK, B_CTXS), typ=PTR)
        kind = self.builder.load(self.builder.gep(ctxs, [lin, ir.Constant(I32, T_KIND)], source_etype=THREAD), typ=I32)
        return self.builder.icmp_unsigned("!=", kind, ir.Constant(I32, WAIT_DONE))

    def ballot(self, pred, loc):
        b, ws = self.builder, self.target.wave_size
        b.store(b.zext(pred, I32), self._wave_slot(self._linear()))
        self.suspend(WAIT_WAVE, loc)
        lin = self._linear()
        base = b.sub(lin, b.urem(lin, ir.Constant(I32, ws)))
        n = b.load(self._field(self._block(), BLOCK, B_NTHREADS), typ=I32)
        mask = ir.Constant(I64, 0)
        for j in range(ws):  # unrolled: ws loads and ors, no loop state across blocks
            idx = b.add(base, ir.Constant(I32, j))
            ok = b.icmp_unsigned("<", idx, n)
            ok = b.and_(ok, self._running(b.select(ok, idx, lin)))
            bit = b.load(self._wave_slot(b.select(ok, idx, lin)), typ=I32)
            bit = b.and_(b.zext(b.and_(ok, b.icmp_unsigned("!=", bit, ir.Constant(I32, 0))), I64), ir.Constant(I64, 1))
            mask = b.or_(mask, b.shl(bit, ir.Constant(I64, j)))
        self.suspend(WAIT_WAVE, loc)
        return mask

    # ---- memory
    def shared_array(self, name, elem, count, align):
        off = (self.static_shared + align - 1) // align * align
        self.static_shared = off + count * _size(elem)
        return self.entry_builder.gep(self._shared_base(), [ir.Constant(I64, off)], source_etype=I8)

    def _shared_base(self):
        """The block's shared buffer, read once in the entry block so every use is dominated."""
        if not hasattr(self, "_shared_ptr"):
            e = self.entry_builder
            block = e.load(e.gep(self.thr, [ir.Constant(I32, 0), ir.Constant(I32, T_BLOCK)], source_etype=THREAD), typ=PTR)
            self._shared_ptr = e.load(e.gep(block, [ir.Constant(I32, 0), ir.Constant(I32, B_SHARED)], source_etype=BLOCK), typ=PTR)
        return self._shared_ptr

    def dynamic_shared(self, align):
        base, self.builder, saved = self._shared_base(), self.entry_builder, self.builder
        # placed after the static arrays; their total is only known at finish(), so read it from a global
        g = self.module.globals.get(f"{self.sig.name}.static_shared")
        if g is None:
            g = ir.GlobalVariable(self.module, I64, f"{self.sig.name}.static_shared")
            g.linkage = "internal"
            g.global_constant = True
        ptr = self.builder.gep(base, [self.builder.load(g)], source_etype=I8)
        self.builder = saved
        return ptr

    def guard(self, address, nbytes, loc):
        if not self.target.check_bounds:
            return None
        check = self.module.globals.get("pykern.check") or ir.Function(
            self.module, ir.FunctionType(I1, [PTR, PTR, I64, I32]), "pykern.check")
        return self.builder.call(check, [self._block(), address, ir.Constant(I64, nbytes),
                                         ir.Constant(I32, loc.line if loc else 0)])

    def ret(self):
        if self.coro:
            self.builder.store(ir.Constant(I32, WAIT_DONE), self._field(self.thr, THREAD, T_KIND))
            self.builder.branch(self.final_block)
        else:
            self.builder.ret_void()

    # ---- the grid driver
    def finish(self):
        total_static = (self.static_shared + 15) // 16 * 16
        g = self.module.globals.get(f"{self.sig.name}.static_shared")
        if g is not None:
            g.initializer = ir.Constant(I64, total_static)
        DriverBuilder(self, total_static).build()


def _size(ty: ir.Type) -> int:
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(ty)]


class DriverBuilder:
    """Builds ``i32 K(ptr args, ptr launch, i64 b0, i64 b1)`` for one kernel."""

    def __init__(self, frame: CpuFrame, static_shared: int):
        self.f, self.static_shared = frame, static_shared
        m = frame.module
        self.fn = ir.Function(m, ir.FunctionType(I32, [PTR, PTR, I64, I64]), frame.sig.name)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.malloc = intrinsic(m, "malloc", PTR, [I64])
        self.free = intrinsic(m, "free", ir.VoidType(), [PTR])

    def field(self, base, struct, *idx):
        return self.b.gep(base, [ir.Constant(I32, 0)] + [ir.Constant(I32, i) for i in idx], source_etype=struct)

    def loop(self, start, stop, body, name):
        """for i in [start, stop): body(i) -- i of start's type."""
        b = self.b
        pre = b.block
        head, loop, done = (self.fn.append_basic_block(f"{name}.{n}") for n in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(start.type)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_unsigned("<", i, stop), loop, done)
        b.position_at_end(loop)
        body(i)
        nxt = b.add(i, ir.Constant(start.type, 1))
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)

    def build(self):
        f, b = self.f, self.b
        args_buf, launch, b0, b1 = self.fn.args
        grid = [b.load(self.field(launch, LAUNCH, L_GRID, i), typ=I32) for i in range(3)]
        bdim = [b.load(self.field(launch, LAUNCH, L_BLOCK, i), typ=I32) for i in range(3)]
        nthreads = b.mul(b.mul(bdim[0], bdim[1]), bdim[2])
        dyn = b.zext(b.load(self.field(launch, LAUNCH, L_DYN_SHARED), typ=I32), I64)
        # a block's shared memory is bounded like a GPU's: refuse (err_site = the static bytes) before any block runs
        too_big = b.icmp_unsigned(">", b.add(dyn, ir.Constant(I64, self.static_shared)), ir.Constant(I64, SHARED_LIMIT))
        with b.if_then(too_big, likely=False):
            b.store(ir.Constant(I32, ERR_SHARED), self.field(launch, LAUNCH, L_ERR_CODE))
            b.store(ir.Constant(I32, self.static_shared), self.field(launch, LAUNCH, L_ERR_SITE))
            b.ret(ir.Constant(I32, -1))
        shared = b.call(self.malloc, [b.add(dyn, ir.Constant(I64, self.static_shared + 16))])
        wavebuf = b.call(self.malloc, [b.mul(b.zext(nthreads, I64), ir.Constant(I64, 4 * f.wave_words))])
        block = alloca(b, BLOCK, 0)
        for i in range(3):
            b.store(bdim[i], self.field(block, BLOCK, B_BDIM, i))
            b.store(grid[i], self.field(block, BLOCK, B_GDIM, i))
        shared_bytes = b.add(dyn, ir.Constant(I64, self.static_shared))
        for idx, v in ((B_NTHREADS, nthreads), (B_SHARED, shared), (B_WAVEBUF, wavebuf), (B_LAUNCH, launch),
                       (B_SHARED_BYTES, shared_bytes)):
            b.store(v, self.field(block, BLOCK, idx))
        args = [b.load(b.gep(args_buf, [ir.Constant(I64, off)], source_etype=I8), typ=ty)
                for off, ty in zip(f.sig.offsets, f.param_types)]
        status = alloca(b, I32, 0)
        b.store(ir.Constant(I32, 0), status)
        gxy = b.mul(grid[0], grid[1])

        def per_block(blin):
            lin = b.trunc(blin, I32)
            bid = [b.urem(lin, grid[0]), b.urem(b.udiv(lin, grid[0]), grid[1]), b.udiv(lin, gxy)]
            for i in range(3):
                b.store(bid[i], self.field(block, BLOCK, B_BID, i))
            with b.if_then(b.icmp_signed("==", b.load(status), ir.Constant(I32, 0))):  # stop after an error
                (self.coroutine_block if f.coro else self.simple_block)(block, bdim, nthreads, args, status, launch)

        if f.coro:
            ctxs = b.call(self.malloc, [b.mul(b.zext(nthreads, I64), ir.Constant(I64, THREAD_SIZE))])
            b.store(ctxs, self.field(block, BLOCK, B_CTXS))
        self.loop(b0, b1, per_block, "blocks")
        if f.coro:
            b.call(self.free, [ctxs])
        b.call(self.free, [shared])
        b.call(self.free, [wavebuf])
        b.ret(b.load(status))

    def simple_block(self, block, bdim, nthreads, args, status, launch):
        b = self.b
        thr = self.thread_alloca
        b.store(block, self.field(thr, THREAD, T_BLOCK))

        def z(tz):
            b.store(tz, self.field(thr, THREAD, T_TID, 2))
            self.loop(ir.Constant(I32, 0), bdim[1], lambda ty: y(tz, ty), "ty")

        def y(tz, ty):
            b.store(ty, self.field(thr, THREAD, T_TID, 1))
            self.loop(ir.Constant(I32, 0), bdim[0], lambda tx: x(tz, ty, tx), "tx")

        def x(tz, ty, tx):
            b.store(tx, self.field(thr, THREAD, T_TID, 0))
            lin = b.add(b.mul(b.add(b.mul(tz, bdim[1]), ty), bdim[0]), tx)
            b.store(lin, self.field(thr, THREAD, T_LINEAR))
            b.call(self.f.fn, [thr] + args)

        self.loop(ir.Constant(I32, 0), bdim[2], z, "tz")

    @property
    def thread_alloca(self):
        if not hasattr(self, "_thr"):
            with self.b.goto_entry_block():
                self._thr = alloca(self.b, THREAD, 0)
        return self._thr

    def coroutine_block(self, block, bdim, nthreads, args, status, launch):
        b = self.b
        ctxs = b.load(self.field(block, BLOCK, B_CTXS), typ=PTR)
        bxy = b.mul(bdim[0], bdim[1])

        def start(t):
            c = b.gep(ctxs, [t], source_etype=THREAD)
            tid = [b.urem(t, bdim[0]), b.urem(b.udiv(t, bdim[0]), bdim[1]), b.udiv(t, bxy)]
            for i in range(3):
                b.store(tid[i], self.field(c, THREAD, T_TID, i))
            b.store(t, self.field(c, THREAD, T_LINEAR))
            b.store(ir.Constant(I32, 0), self.field(c, THREAD, T_KIND))
            b.store(block, self.field(c, THREAD, T_BLOCK))
            h = b.call(self.f.fn, [c] + args)
            b.store(h, self.field(c, THREAD, T_HANDLE))

        self.loop(ir.Constant(I32, 0), nthreads, start, "start")
        sched = ir.Function(self.f.module, ir.FunctionType(I32, [PTR, I32, I32, PTR]), "pykern.schedule") \
            if "pykern.schedule" not in self.f.module.globals else self.f.module.globals["pykern.schedule"]
        head, done = self.fn.append_basic_block("sched"), self.fn.append_basic_block("sched.done")
        b.branch(head)
        b.position_at_end(head)
        r = b.call(sched, [ctxs, nthreads, ir.Constant(I32, self.f.target.wave_size), launch])
        b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, 1)), head, done)
        b.position_at_end(done)
        destroy = intrinsic(self.f.module, "llvm.coro.destroy", ir.VoidType(), [PTR])

        def kill(t):
            c = b.gep(ctxs, [t], source_etype=THREAD)
            b.call(destroy, [b.load(self.field(c, THREAD, T_HANDLE), typ=PTR)])

        self.loop(ir.Constant(I32, 0), nthreads, kill, "destroy")
        with b.if_then(b.icmp_signed("<", r, ir.Constant(I32, 0))):
            b.store(ir.Constant(I32, -1), status)  # the caller reads launch->err


class CpuMatrixUnit(PortableMatrixUnit):
    """``PortableMatrixUnit`` (its layouts, loads, stores and sums in order of k) with the product's
    exchange done in one step: each lane writes its whole A and B fragments to its words of the wave
    buffer, the wave waits once, and each lane reads the elements its rows and column need. A shuffle
    per element suspends every lane twice, 2 (1 + E) K times a product (576 for an i8 product at
    wave32), and LLVM's coroutine split of the resulting thread function was most of the compile of
    a kernel with several products (docs/targets/cpu.md: ``mul_mat_mma_*`` 27-61 s at wave32, now a
    tenth). The values are the shuffles': a source lane past the block gives the lane its own
    element, as a shuffle does. GPU targets keep ``PortableMatrixUnit`` (no wave buffer there)."""

    def mma(self, frame, a, bv, c, b_layout):
        b, e, f, ws = frame.builder, self.per_lane, self.per_lane_in, frame.target.wave_size
        words = 2 * f  # A's f words, then B's
        frame.reserve_wave_words(words)
        word_of = (lambda v: v) if self.int else (lambda v: b.bitcast(v, I32))
        own = {0: [word_of(get(b, a, i)) for i in range(f)], f: [word_of(get(b, bv, i)) for i in range(f)]}
        mine = b.mul(frame._linear(), I32(words))
        for off, vals in own.items():
            for i, v in enumerate(vals):
                b.store(v, frame._wave_slot(b.add(mine, I32(off + i))))
        frame.suspend(WAIT_WAVE, None)
        lin = frame._linear()
        lane = b.urem(lin, I32(ws))
        base = b.sub(lin, lane)
        n = b.load(frame._field(frame._block(), BLOCK, B_NTHREADS), typ=I32)
        lo, hi = b.urem(lane, I32(16)), b.udiv(lane, I32(16))
        sources: dict = {}

        def source(key, src):
            """(valid, the first wave-buffer word read) for source lane ``src`` of this wave."""
            if key not in sources:
                src_lin = b.add(base, src)
                inside = b.icmp_unsigned("<", src_lin, n)
                valid = b.and_(inside, frame._running(b.select(inside, src_lin, lin)))
                sources[key] = (valid, b.mul(b.select(valid, src_lin, lin), I32(words)))
            return sources[key]

        def pull(off, i, key, src):
            valid, first = source(key, src)
            got = b.load(frame._wave_slot(b.add(first, I32(off + i))), typ=I32)
            word = b.select(valid, got, own[off][i])
            return word if self.int else b.bitcast(word, ir.FloatType())

        # the order of PortableMatrixUnit.mma: k outermost, B[k][lane % 16], then A[m][k] for the
        # lane's rows m = E (lane // 16) + i
        mul, add = (b.mul, b.add) if self.int else (b.fmul, b.fadd)
        acc = [get(b, c, i) for i in range(e)]
        rows = [b.add(b.mul(hi, I32(e)), I32(i)) for i in range(e)]
        for k in range(self.k):
            j = k // f
            bk = pull(f, k % f, ("b", j), b.add(lo, I32(16 * j)))
            for i in range(e):
                acc[i] = add(acc[i], mul(pull(0, k % f, ("a", i, j), b.add(rows[i], I32(16 * j))), bk))
        frame.suspend(WAIT_WAVE, None)  # no lane writes its next exchange before the wave has read this one
        out = c
        for i in range(e):
            out = put(b, out, acc[i], i)
        return out

