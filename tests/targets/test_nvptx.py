"""The NVPTX target, driven through the frame API directly: the PTX it emits and ptxas's verdict."""
import re

import pytest
from llvmlite import ir

import pykern as pk
from pykern import Ptr, bf16, f16, f32, f64, u32, usize

from pykern.errors import CompileError
from pykern.ir import types as T
from pykern.targets.base import I1, I32, I64, KernelSignature
from pykern.targets.nvptx import ARCHS, NvptxTarget, arch_for_capability, ptxas_check, ptxas_path

F32, F16 = ir.FloatType(), ir.HalfType()
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas not on PATH")


def compile_kernel(body, params=("p",), arch="sm_90", block=256, name="k"):
    """PTX of a kernel whose parameters are global pointers (names) or i32 values ("name:i32")."""
    target = NvptxTarget(arch)
    module = target.new_module("t")
    specs = [(p.split(":")[0], 4, 4, "value") if ":" in p else (p, 8, 8, "ptr") for p in params]
    sig = KernelSignature(name, tuple(specs), block)
    frame = target.begin_kernel(module, sig, [I32 if s[3] == "value" else ir.PointerType() for s in specs], True)
    body(frame, frame.builder)
    frame.ret()
    return target.finalize(module, [sig]).decode()


def at(b, ptr, i, ty=I32):
    return b.gep(ptr, [i if isinstance(i, ir.Value) else ir.Constant(I32, i)], source_etype=ty)


def full_kernel(fr, b):
    """Everything at once: ids, static and dynamic shared memory, barrier, fences, all shuffles,
    ballot, global and shared atomics (native, CAS-loop and partword), a private array."""
    out = fr.args[0]
    tid, lane = fr.thread_idx(0), fr.lane_id()
    tile = fr.shared_array("tile", I32, 256, 4)
    slot = at(b, tile, tid)
    b.store(tid, slot)
    dyn = fr.dynamic_shared(16)
    b.store(lane, b.gep(dyn, [tid], source_etype=I32))
    fr.barrier(None)
    for scope in ("block", "device", "system"):
        fr.fence(scope)
    v = b.load(slot, typ=I32)
    for i, kind in enumerate(("idx", "xor", "up", "down")):
        b.store(fr.shuffle(kind, v, ir.Constant(I32, 3), None), at(b, out, i))
    mask = fr.ballot(b.icmp_unsigned("<", v, ir.Constant(I32, 7)), None)
    b.store(mask, at(b, out, 4, I64))
    b.store(fr.atomic_rmw("add", slot, v, "shared"), at(b, out, 6))
    b.store(fr.atomic_rmw("max", at(b, out, 7), v, "global"), at(b, out, 8))
    b.store(fr.cmpxchg(at(b, out, 9), v, tid, "global"), at(b, out, 10))
    b.store(fr.cmpxchg(at(b, out, 11, F32), ir.Constant(F32, 0), ir.Constant(F32, 1), "global"), at(b, out, 12, F32))
    b.store(fr.atomic_rmw("fadd", at(b, out, 13, F16), ir.Constant(F16, 1), "global"), at(b, out, 14, F16))
    i16 = ir.IntType(16)
    b.store(fr.atomic_rmw("add", at(b, out, 30, i16), ir.Constant(i16, 1), "global"), at(b, out, 31, i16))
    priv = fr.alloca(ir.ArrayType(I32, 8))
    b.store(tid, at(b, priv, b.and_(tid, ir.Constant(I32, 7))))
    b.store(b.load(at(b, priv, b.and_(lane, ir.Constant(I32, 7))), typ=I32), at(b, out, 16))
    b.store(fr.block_idx(1), at(b, out, 17))
    b.store(fr.block_dim(2), at(b, out, 18))
    b.store(fr.grid_dim(0), at(b, out, 19))


def lines(ptx, pattern):
    return [l.strip() for l in ptx.splitlines() if re.search(pattern, l.strip())]


def test_target_identity():
    t = NvptxTarget()
    assert (t.name, t.triple, t.arch, t.wave_size, t.binary_ext) == ("cuda", "nvptx64-nvidia-cuda", "sm_90", 32, ".ptx")
    assert (t.global_as, t.shared_as, t.private_as) == (1, 3, 0)
    # no "A5"-style alloca address space in the NVPTX datalayout: allocas belong in AS0
    assert not re.search(r"(^|-)A\d", str(t.target_machine.target_data))
    assert t.cache_key() != NvptxTarget("sm_80").cache_key()
    with pytest.raises(CompileError, match="sm_75"):
        NvptxTarget("sm_75")


@pytest.mark.parametrize("cc, arch", [((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 7), "sm_86"), ((8, 9), "sm_89"),
                                      ((9, 0), "sm_90"), ((10, 0), "sm_90"), ((12, 0), "sm_90"), ((7, 5), None)])
def test_arch_for_capability(cc, arch):
    assert arch_for_capability(*cc) == arch


def test_entry_params_and_maxntid():
    def body(fr, b):
        b.store(fr.args[2], at(b, fr.args[0], fr.thread_idx(0)))
    ptx = compile_kernel(body, ("x", "y", "n:i32"), block=128, name="saxpy")
    assert ".visible .entry saxpy(" in ptx
    assert ".maxntid 128" in ptx
    assert len(lines(ptx, r"\.param \.u64 \.ptr \.global")) == 2 and lines(ptx, r"\.param \.u32 saxpy_param_2")
    assert lines(ptx, r"st\.global")


def test_special_registers():
    ptx = compile_kernel(full_kernel)
    for reg in ("%tid.x", "%laneid", "%ctaid.y", "%ntid.z", "%nctaid.x"):
        assert reg in ptx, reg


def test_barrier_and_fences():
    ptx = compile_kernel(full_kernel)
    assert lines(ptx, r"^barrier\.sync\s+0;")  # the non-.aligned form, see NvptxFrame.barrier
    assert lines(ptx, r"fence\.sc\.cta;") and lines(ptx, r"fence\.sc\.gpu;") and lines(ptx, r"fence\.sc\.sys;")


def test_shuffles_and_ballot():
    ptx = compile_kernel(full_kernel)
    # shfl.sync.<mode>.b32 d, a, b, c, membermask: clamp 31 except for up (0), full mask
    for mode, clamp in (("idx", 31), ("bfly", 31), ("down", 31), ("up", 0)):
        found = lines(ptx, rf"shfl\.sync\.{mode}\.b32")
        assert found and all(re.search(rf", 3, {clamp}, (-1|%r\d+);$", l) for l in found), (mode, found)
    assert lines(ptx, r"vote\.sync\.ballot\.b32 .*, (-1|%r\d+);")


def test_atomics_and_scopes():
    ptx = compile_kernel(full_kernel)
    assert lines(ptx, r"atom\.shared\.add\.u32")
    assert lines(ptx, r"atom\.global\.max\.s32")
    assert lines(ptx, r"atom\.relaxed\.gpu\.global\.cas\.b32")  # device scope for global memory
    assert lines(ptx, r"atom\.global\.add\.noftz\.f16")

    def shared_cas(fr, b):
        tile = fr.shared_array("t", F32, 32, 4)
        b.store(ir.Constant(F32, 0), tile)
        b.store(fr.cmpxchg(tile, ir.Constant(F32, 0), ir.Constant(F32, 2), "shared"), at(b, fr.args[0], 0, F32))
        b.store(fr.atomic_rmw("fmax", tile, ir.Constant(F32, 3), "shared"), at(b, fr.args[0], 1, F32))
    ptx = compile_kernel(shared_cas)
    assert lines(ptx, r"atom\.relaxed\.cta\.shared\.cas\.b32")  # block scope for shared memory
    assert not lines(ptx, r"atom\..*\.(gpu|sys)\..*shared")


def test_shared_memory_declarations():
    ptx = compile_kernel(full_kernel)
    assert lines(ptx, r"\.shared \.align 4 \.b8 k_\$_tile\[1024\]")
    assert lines(ptx, r"\.extern \.shared \.align 16 \.b8 pk_dynamic_shared\[\]")


def test_two_kernels_share_dynamic_shared_and_name_tiles_apart():
    target = NvptxTarget()
    module = target.new_module("two")
    sigs = []
    for name in ("a", "b"):
        sig = KernelSignature(name, (("p", 8, 8, "ptr"),), 64)
        fr = target.begin_kernel(module, sig, [ir.PointerType()], False)
        b = fr.builder
        tile = fr.shared_array("tile", I32, 64, 4)
        dyn = fr.dynamic_shared(32)
        b.store(fr.thread_idx(0), at(b, tile, fr.thread_idx(0)))
        b.store(fr.thread_idx(0), at(b, dyn, fr.thread_idx(0)))
        fr.barrier(None)
        b.store(b.load(at(b, tile, 5), typ=I32), fr.args[0])
        assert fr.shared_array("tile", I32, 64, 4) is tile  # one array per name per kernel
        fr.ret()
        sigs.append(sig)
    ptx = target.finalize(module, sigs).decode()
    assert ".entry a(" in ptx and ".entry b(" in ptx
    assert len(lines(ptx, r"\.extern \.shared \.align 32 \.b8 pk_dynamic_shared\[\]")) == 1


def test_private_array_goes_to_local_memory():
    ptx = compile_kernel(full_kernel)
    assert lines(ptx, r"\.local \.align \d+ \.b8\s+__local_depot")


@pytest.mark.parametrize("dtype", [T.i8, T.u8, T.i16, T.u16, T.i32, T.u64, T.f16, T.f32, T.f64])
def test_check_allows_every_op(dtype):
    for op in ("add", "sub", "min", "max", "exchange", "cas"):
        for space in ("global", "shared"):
            NvptxTarget().check(f"atomic.{op}.{space}", dtype, None)


@pytest.mark.parametrize("dtype", [T.bf16, T.f8e4m3])
def test_check_integer_stored_floats_only_exchange(dtype):
    """fp8 has exchange and CAS only; bf16 also add/sub, through LLVM's bfloat (test_atomic_dtypes.py)."""
    t = NvptxTarget()
    t.check("atomic.exchange.global", dtype, None)
    t.check("atomic.cas.shared", dtype, None)
    with pytest.raises(CompileError, match="not supported on cuda"):
        t.check("atomic.max.global", dtype, None)
    if dtype is T.bf16:
        t.check("atomic.add.global", dtype, None)
        t.check("atomic.sub.shared", dtype, None)
    else:
        with pytest.raises(CompileError, match="not supported on cuda"):
            t.check("atomic.add.global", dtype, None)


@pytest.mark.parametrize("feature, dtype", [("atomic.add.global", T.bool_), ("atomic.cas.shared", T.bool_),
                                            ("atomic.add.local", T.i32), ("atomic.nand.global", T.i32)])
def test_check_rejects(feature, dtype):
    with pytest.raises(CompileError):
        NvptxTarget().check(feature, dtype, None)


def test_check_ignores_other_features():
    NvptxTarget().check("math.sqrt", T.f32, None)


def test_finalize_names_missing_kernel():
    target = NvptxTarget()
    with pytest.raises(CompileError, match="ghost"):
        target.finalize(target.new_module("empty"), [KernelSignature("ghost", ())])


@needs_ptxas
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_ptxas_accepts(arch):
    ptx = compile_kernel(full_kernel, arch=arch)
    assert f".target {arch}" in ptx
    report = ptxas_check(ptx, arch)
    assert "Compiling entry function 'k'" in report


@needs_ptxas
def test_ptxas_rejects_with_its_message():
    bad = compile_kernel(full_kernel).replace("barrier.sync", "barrier.snyc")
    with pytest.raises(CompileError, match="(?s)ptxas rejected.*snyc"):
        ptxas_check(bad, "sm_90")


def test_ballot_accepts_wider_predicates():
    def body(fr, b):
        b.store(fr.ballot(fr.thread_idx(0), None), at(b, fr.args[0], 0, I64))
    assert lines(compile_kernel(body), r"vote\.sync\.ballot\.b32")
    assert I1  # the frame compares non-i1 predicates against zero itself


# ---- real kernels through the front end and the shared lowering --------------------------------------
def pk_block_sum():
    """A pykern kernel using every GPU feature the frame provides (tests/runtime/test_cuda.py
    launches it on the GPU). The front end resolves names in the module's globals."""
    @pk.kernel(max_block_size=256)
    def block_sum(n: usize, x: Ptr[f32], out: Ptr[f32], total: Ptr[f32], hits: Ptr[u32]):
        tile = pk.shared.array(256, f32)
        t = pk.thread_idx.x
        i = pk.block_idx.x * pk.block_dim.x + t
        v = f32(0)
        if i < n:
            v = x[i]
        tile[t] = v
        pk.syncthreads()
        s = pk.block_dim.x // 2
        while s >= 32:
            if t < s:
                tile[t] = tile[t] + tile[t + s]
            pk.syncthreads()
            s = s // 2
        if t < 32:
            w = tile[t]
            d = 16
            while d >= 1:
                w = w + pk.wave.shuffle_down(w, d)
                d = d // 2
            if t == 0:
                out[pk.block_idx.x] = w
                pk.atomic.add(total, 0, w)
        if pk.wave.any(v > f32(0.5)):
            if pk.lane_id() == 0:
                pk.atomic.add(hits, 0, u32(1))
    return block_sum


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_front_end_kernel(arch):
    from pykern.compiler import compile_kernels
    ptx, (sig,) = compile_kernels([pk_block_sum()._only_instance()], NvptxTarget(arch), "block_sum")
    text = ptx.decode()
    assert sig.name == "block_sum" and ".maxntid 256" in text
    for pattern in (r"^barrier\.sync\s+0;", r"shfl\.sync\.down\.b32 .*, 31, (-1|%r\d+);", r"vote\.sync\.ballot\.b32",
                    r"atom\.global\.add\.f32", r"atom\.global\.add\.u32", r"\.shared \.align 16 \.b8 block_sum_\$_tile\[1024\]"):
        assert lines(text, pattern), pattern
    if ptxas_path():
        ptxas_check(ptx, arch)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_bf16_rounding_and_fast_reciprocal_use_the_instructions(arch):
    """bf16 results come from cvt.rn.bf16.f32 (paired into bf16x2 where LLVM merges two), not from
    integer rounding; pk.fast_rcp is rcp.approx, and a tile of f32 tanh has no IEEE division."""
    from pykern.compiler import compile_kernels
    from pykern import bf16
    from pykern import math as pkm

    @pk.kernel
    def to_bf16(n: usize, x: pk.ConstPtr[f32], y: Ptr[bf16], r: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = bf16(x[i] * 3.0)
            r[i] = pk.fast_rcp(x[i]) + pkm.tanh(x[i])

    ptx, _ = compile_kernels([to_bf16._only_instance()], NvptxTarget(arch), "to_bf16")
    text = ptx.decode()
    assert lines(text, r"cvt\.rn\.bf16(x2)?\.f32") and lines(text, r"rcp\.approx\.f32")
    assert not lines(text, r"div\.rn\.f32")
    if ptxas_path():
        ptxas_check(ptx, arch)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_f64_to_16_bit_floats_is_one_conversion(arch):
    """f64 -> f16 is cvt.rn.f16.f64 on every arch and f64 -> bf16 cvt.rn.bf16.f64 from sm_90 (one
    rounding, as the portable round-to-odd path gives); below sm_90 bf16 keeps that path."""
    from pykern.compiler import compile_kernels

    @pk.kernel
    def narrow(n: usize, x: pk.ConstPtr[f64], y: Ptr[bf16], z: Ptr[f16]):
        for i in pk.grid_stride(n):
            y[i] = bf16(x[i])
            z[i] = f16(x[i])

    ptx, _ = compile_kernels([narrow._only_instance()], NvptxTarget(arch), "narrow")
    text = ptx.decode()
    assert lines(text, r"cvt\.rn\.f16\.f64") and not lines(text, r"cvt\.rn\.f16\.f32")
    native = ARCHS[arch] >= (9, 0)
    assert bool(lines(text, r"cvt\.rn\.bf16\.f64")) == native
    assert bool(lines(text, r"cvt\.rn\.f32\.f64")) != native  # round-to-odd's first rounding
    if ptxas_path():
        ptxas_check(ptx, arch)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_bf16_widening_is_a_pack_not_a_shift(arch):
    """A bf16 read as f32 is the pair (0, h) packed into 32 bits (``mov.b32 {0, h}``: one byte
    permute in SASS), not zext + shl, which ptxas made two instructions for a bf16 in the high half
    of a vector word; the values stay exact (tests of every target)."""
    from pykern.compiler import compile_kernels

    @pk.kernel
    def widen(n: usize, x: pk.ConstPtr[bf16], y: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = f32(x[i]) * 2.0

    ptx, _ = compile_kernels([widen._only_instance()], NvptxTarget(arch), "widen")
    text = ptx.decode()
    assert lines(text, r"mov\.b32\s+%r\d+, \{%rs\d+, %rs\d+\}")
    assert not lines(text, r"shl\.b32\s+%r\d+, %r\d+, 16")
    if ptxas_path():
        ptxas_check(ptx, arch)
