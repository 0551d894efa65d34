"""The amdgpu target, for every arch in the table, without a GPU.

Kernels are built by driving ``AmdgpuFrame`` directly with llvmlite (what the shared lowering does),
linked into HSACO, and checked through the code-object reader, the generated assembly, and LLVM's
own ``llvm-readobj``/``llvm-objdump`` where an installed version knows the arch.
"""
from __future__ import annotations

import glob
import os
import re
import stat
import subprocess

import pytest
from llvmlite import ir

from pykern.errors import CompileError
from pykern.ir import types as T
from pykern.targets import linker
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.amdgpu_archs import ARCHS
from pykern.targets.base import I32, I64, KernelSignature
from pykern.targets.codeobject import CodeObject

F32, F64, PTR = ir.FloatType(), ir.DoubleType(), ir.PointerType()
ALL_ARCHS = list(ARCHS)

SAXPY = KernelSignature("saxpy", (("n", 4, 4, "value"), ("a", 4, 4, "value"), ("x", 8, 8, "ptr"),
                                  ("y", 8, 8, "ptr")), max_block_size=256)
REDUCE = KernelSignature("block_reduce", (("x", 8, 8, "ptr"), ("out", 8, 8, "ptr"), ("count", 8, 8, "ptr")))
DYN = KernelSignature("dyn_copy", (("x", 8, 8, "ptr"), ("flag", 1, 1, "value"), ("scale", 8, 8, "value")),
                      max_block_size=128)


def build_saxpy(t: AmdgpuTarget, m: ir.Module) -> None:
    """y[i] = a*x[i] + y[i] with i from block_idx*block_dim + thread_idx: the elementwise shape."""
    f = t.begin_kernel(m, SAXPY, [I32, F32, PTR, PTR], False)
    b = f.builder
    i = b.add(b.mul(f.block_idx(0), f.block_dim(0)), f.thread_idx(0))
    n, a, x, y = f.args
    with b.if_then(b.icmp_signed("<", i, n)):
        py = b.gep(y, [i], source_etype=F32)
        b.store(b.fadd(b.fmul(a, b.load(b.gep(x, [i], source_etype=F32), typ=F32)), b.load(py, typ=F32)), py)
    f.ret()


def build_reduce(t: AmdgpuTarget, m: ir.Module) -> None:
    """Shared tile + global store + barrier + all four shuffles + ballot + global atomics (i32 add, f32 add)."""
    f = t.begin_kernel(m, REDUCE, [PTR, PTR, PTR], True)
    b = f.builder
    tile = f.shared_array("tile", F32, 256, 16)
    assert f.shared_array("tile", F32, 256, 16) is tile  # one global per name
    tid = f.thread_idx(0)
    gid = b.add(b.mul(f.block_idx(0), f.block_dim(0)), tid)
    px = b.gep(f.args[0], [gid], source_etype=F32)
    b.store(b.load(px, typ=F32), b.gep(tile, [tid], source_etype=F32))
    b.store(F32(0.0), px)  # a global store the barrier must make visible to the block
    f.barrier(None)
    v = b.bitcast(b.load(b.gep(tile, [b.xor(tid, I32(1))], source_etype=F32), typ=F32), I32)
    for kind, arg in (("down", 1), ("up", 2), ("xor", 4), ("idx", 0)):
        v = f.shuffle(kind, v, I32(arg), None)
    mask = f.ballot(b.icmp_signed(">", v, I32(0)), None)
    f.atomic_rmw("add", f.args[2], b.trunc(mask, I32), "global")
    f.atomic_rmw("fadd", f.args[1], b.bitcast(v, F32), "global")
    f.ret()


def build_dyn(t: AmdgpuTarget, m: ir.Module) -> None:
    """Dynamic shared memory, a private array, a fence, 64-bit and float shuffles, grid_dim."""
    f = t.begin_kernel(m, DYN, [PTR, ir.IntType(8), F64], False)
    b = f.builder
    dyn = f.dynamic_shared(16)
    tid = f.thread_idx(0)
    priv = f.alloca(ir.ArrayType(F32, 4), "priv")
    slot = b.gep(priv, [I32(0), b.and_(tid, I32(3))], source_etype=ir.ArrayType(F32, 4))
    b.store(b.sitofp(f.grid_dim(0), F32), slot)
    b.store(b.load(slot, typ=F32), b.gep(dyn, [tid], source_etype=F32))
    f.fence("device")
    d = f.shuffle("down", f.args[2], I32(1), None)
    w = f.shuffle("xor", b.fpext(b.load(b.gep(dyn, [I32(0)], source_etype=F32), typ=F32), F64), I32(1), None)
    b.store(b.fadd(d, w), b.gep(f.args[0], [tid], source_etype=F64))
    f.ret()


def build(arch: str, **kw) -> tuple[AmdgpuTarget, ir.Module, bytes]:
    t = AmdgpuTarget(arch, **kw)
    m = t.new_module("test")
    for fn in (build_saxpy, build_reduce, build_dyn):
        fn(t, m)
    return t, m, t.finalize(m, [SAXPY, REDUCE, DYN])


@pytest.fixture(scope="module", params=ALL_ARCHS)
def built(request):
    t, m, hsaco = build(request.param)
    return t, m, hsaco, CodeObject(hsaco), t.assembly(m)


# ---- the code object ----------------------------------------------------------------------------
def test_code_object_identity(built):
    t, _, _, co, _ = built
    assert (co.machine, co.elf_type, co.osabi) == (224, 3, 64)
    assert co.e_flags & 0xFF == ARCHS[t.arch].mach
    assert co.arch == t.arch and co.target_id == f"amdgcn-amd-amdhsa--{t.arch}"
    # v5 for each arch; LLVM's generic targets need v6 (the same metadata 1.2, and the generic
    # version in e_flags' top byte)
    if ARCHS[t.arch].is_generic:
        assert co.code_object_version == 6 and co.metadata["amdhsa.version"] == [1, 2]
        assert co.e_flags >> 24 == 1
    else:
        assert co.code_object_version == 5 and co.metadata["amdhsa.version"] == [1, 2]
    for name in ("saxpy", "block_reduce", "dyn_copy"):
        kd = co.symbols[name + ".kd"]
        assert (kd.type, kd.size, kd.section) == (1, 64, ".rodata")  # STT_OBJECT, 64-byte descriptor
        assert co.symbols[name].type == 2  # STT_FUNC
        assert co.kernels[name].symbol == name + ".kd"


@pytest.mark.parametrize("sig", [SAXPY, REDUCE, DYN], ids=lambda s: s.name)
def test_args_match_signature(built, sig):
    k = built[3].kernels[sig.name]
    args = k.explicit_args
    assert [(a.name, a.offset, a.size) for a in args] == \
        [(p[0], off, p[1]) for p, off in zip(sig.params, sig.offsets)]
    for a, p in zip(args, sig.params):
        if p[3] == "ptr":
            assert (a.value_kind, a.address_space) == ("global_buffer", "global")
        else:
            assert a.value_kind == "by_value"


def test_wave_size_and_workgroup_limits(built):
    t, _, _, co, _ = built
    expect = 64 if t.arch in ("gfx90a", "gfx942", "gfx950", "gfx9-4-generic") else 32  # CDNA: wave64
    assert t.wave_size == expect
    for k in co.kernels.values():
        assert k.wavefront_size == k.descriptor.wave_size == expect
    assert co.kernels["saxpy"].max_flat_workgroup_size == 256
    assert co.kernels["block_reduce"].max_flat_workgroup_size == 1024
    assert co.kernels["dyn_copy"].max_flat_workgroup_size == 128


def test_lds_sizes(built):
    co = built[3]
    assert co.kernels["block_reduce"].lds == 256 * 4 == co.kernels["block_reduce"].descriptor.group_segment_fixed_size
    assert co.kernels["dyn_copy"].lds == 0  # the dynamic array is sized at launch


def test_block_and_grid_dim_read_hidden_args(built):
    _, m, _, co, _ = built
    assert "llvm.amdgcn.implicitarg.ptr" in str(m)
    hidden = {a.value_kind: a for a in co.kernels["saxpy"].args if a.is_hidden}
    base = 24  # explicit arguments end at 24 (already 8-aligned)
    assert hidden["hidden_block_count_x"].offset == base
    assert hidden["hidden_group_size_x"].offset == base + 12
    assert "hidden_block_count_x" in {a.value_kind for a in co.kernels["dyn_copy"].args}
    assert co.kernels["saxpy"].kernarg_segment_size == base + 256  # the whole v5 hidden block


def test_elementwise_kernel_has_no_scratch_or_spills(built):
    k = built[3].kernels["saxpy"]
    assert (k.scratch, k.vgpr_spill_count, k.sgpr_spill_count, k.uses_dynamic_stack) == (0, 0, 0, False)


def test_private_array_lives_in_scratch_address_space(built):
    assert "alloca [4 x float], addrspace(5)" in str(built[1])


# ---- instructions -------------------------------------------------------------------------------
def _body(asm: str, kernel: str) -> str:
    return asm.split(f"{kernel}:", 1)[1].split("s_endpgm", 1)[0]


def test_barrier_has_workgroup_fences(built):
    t, m, _, _, asm = built
    text = str(m)
    assert 'fence syncscope("workgroup") release' in text and 'fence syncscope("workgroup") acquire' in text
    body = _body(asm, "block_reduce")
    assert "s_barrier" in body
    # on RDNA a bare s_barrier would not order global memory; the fences add a store wait and an
    # L0 invalidate (gfx10/11) or global_inv (gfx12) around it
    need = {"rdna2": ("s_waitcnt_vscnt", "buffer_gl0_inv"), "rdna3": ("s_waitcnt_vscnt", "buffer_gl0_inv"),
            "rdna4": ("s_wait_storecnt", "global_inv")}.get(t.info.generation, ())
    for insn in need:
        assert insn in body, insn


def test_shuffles_use_true_wave_width(built):
    t, m, _, _, asm = built
    w = t.wave_size
    text = str(m)
    assert f"sub i32 {w}, " in text  # down: the source lane must stay below the wave width
    assert re.search(rf'icmp ult i32 %"?[\w.]+"?, {w}\n', text)  # xor: out-of-wave sources keep own value
    assert f"and i32 0, {w - 1}" in text  # idx wraps modulo the wave width
    body = _body(asm, "block_reduce")
    assert body.count("ds_bpermute_b32") >= 3  # idx 0 may fold to a readlane
    assert ("v_mbcnt_hi_u32_b32" in body) == (w == 64)  # the high half of the lane mask exists on wave64 only


def test_ballot_is_i64_on_every_wave_size(built):
    assert 'call i64 @"llvm.amdgcn.ballot.i64"(i1 ' in str(built[1])


def test_i32_atomic_add_on_global_is_native(built):
    body = _body(built[4], "block_reduce")
    assert re.search(r"global_atomic_add(_u32)?\s", body)
    assert "cmpswap" not in body.split("global_atomic_add", 1)[0]


def _atomic_asm(arch: str, op: str, ty: ir.Type, space: str) -> str:
    t = AmdgpuTarget(arch)
    m = t.new_module("atomic")
    sig = KernelSignature("k", (("p", 8, 8, "ptr"),))
    f = t.begin_kernel(m, sig, [PTR], False)
    ptr = f.args[0] if space == "global" else f.shared_array("s", ty, 64, 8)
    old = f.atomic_rmw(op, ptr, ir.Constant(ty, 1), space)
    if space == "shared":
        f.builder.store(old, f.args[0])
    f.ret()
    return t.assembly(m)


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_arch_table_atomic_columns(arch):
    """The table's native-vs-CAS-loop columns are what LLVM really emits with our metadata."""
    info = ARCHS[arch]
    cases = [("fadd", F32, "global", 32 in info.native_fadd_global),
             ("fadd", F64, "global", 64 in info.native_fadd_global),
             ("fadd", F32, "shared", 32 in info.native_fadd_shared),
             ("fadd", F64, "shared", 64 in info.native_fadd_shared),
             ("fmax", F32, "global", 32 in info.native_fminmax_global),
             ("fmin", F64, "global", 64 in info.native_fminmax_global)]
    cases += [(op, ty, "global", True) for op in ("add", "sub", "max", "umin", "xchg") for ty in (I32, I64)]
    for op, ty, space, native in cases:
        asm = _atomic_asm(arch, op, ty, space)
        looped = bool(re.search(r"cmpswap|cmpst", asm))
        assert looped != native, f"{arch} {op} {ty} {space}: expected {'native' if native else 'CAS loop'}"


def test_cmpxchg_on_floats_compares_bits():
    t = AmdgpuTarget("gfx1100")
    m = t.new_module("cas")
    f = t.begin_kernel(m, KernelSignature("k", (("p", 8, 8, "ptr"),)), [PTR], False)
    old = f.cmpxchg(f.args[0], F32(1.0), F32(2.0), "global")
    assert old.type == F32
    f.builder.store(old, f.args[0])
    f.ret()
    assert "global_atomic_cmpswap_b32" in t.assembly(m)


# ---- capability checks ----------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_unsupported_atomics_are_compile_errors_naming_the_arch(arch):
    t = AmdgpuTarget(arch)
    for dtype in (T.i8, T.u16, T.bool_, T.f8e4m3):
        for space in ("global", "shared"):
            with pytest.raises(CompileError, match=rf"amdgpu {arch}"):
                t.check(f"atomic.add.{space}", dtype, None)
    for dtype in (T.f16, T.bf16):  # add/sub only, as LLVM's CAS loop (tests/lang/test_atomic_dtypes.py)
        for space in ("global", "shared"):
            t.check(f"atomic.add.{space}", dtype, None)
            with pytest.raises(CompileError, match=rf"amdgpu {arch}"):
                t.check(f"atomic.max.{space}", dtype, None)
    with pytest.raises(CompileError, match=arch):
        t.check("atomic.xor.global", T.f32, None)
    for dtype in (T.i32, T.u32, T.i64, T.u64, T.f32, T.f64):
        for op in ("add", "sub", "min", "max", "xchg", "cas"):
            t.check(f"atomic.{op}.global", dtype, None)
            t.check(f"atomic.{op}.shared", dtype, None)


def test_static_lds_over_the_arch_limit_is_a_compile_error():
    t = AmdgpuTarget("gfx942")
    f = t.begin_kernel(t.new_module("big"), KernelSignature("k", ()), [], True)
    f.shared_array("a", F32, 16384, 16)  # exactly the 64 KiB a workgroup has
    with pytest.raises(CompileError, match="gfx942"):
        f.shared_array("b", F32, 1, 4)


def test_signature_mismatch_fails_the_build():
    t = AmdgpuTarget("gfx90a")
    m = t.new_module("bad")
    sig = KernelSignature("k", (("x", 8, 8, "value"),))
    f = t.begin_kernel(m, sig, [I32], False)  # an i32 where the signature promises 8 bytes
    f.ret()
    with pytest.raises(CompileError, match="offset, size"):
        t.finalize(m, [sig])


def test_wave_and_version_options():
    with pytest.raises(CompileError, match="wave32"):
        AmdgpuTarget("gfx90a", wave64=False)
    with pytest.raises(CompileError, match="supports"):
        AmdgpuTarget("gfx906")
    with pytest.raises(CompileError, match="code object version"):
        AmdgpuTarget("gfx1100", code_object_version=3)
    t64 = AmdgpuTarget("gfx1100", wave64=True)
    assert t64.wave_size == 64 and t64.cache_key() != AmdgpuTarget("gfx1100").cache_key()
    m = t64.new_module("w64")
    build_reduce(t64, m)
    co = CodeObject(t64.finalize(m, [REDUCE]))
    k = co.kernels["block_reduce"]
    assert k.wavefront_size == k.descriptor.wave_size == 64
    assert "v_mbcnt_hi_u32_b32" in t64.assembly(m)


@pytest.mark.parametrize("version,abi", [(4, 2), (6, 4)])
def test_other_code_object_versions(version, abi):
    t = AmdgpuTarget("gfx1100", code_object_version=version)
    m = t.new_module("cov")
    build_saxpy(t, m)
    build_dyn(t, m)
    co = CodeObject(t.finalize(m, [SAXPY, DYN]))
    assert (co.abi_version, co.code_object_version) == (abi, version)
    if version == 4:  # v4 reads block_dim/grid_dim from the dispatch packet, not the v5 hidden block
        assert "llvm.amdgcn.dispatch.ptr" in str(m) and "implicitarg" not in str(m)


def test_assembly_names_the_arch_and_version():
    t = AmdgpuTarget("gfx1201")
    m = t.new_module("asm")
    build_saxpy(t, m)
    asm = t.assembly(m)
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx1201"' in asm
    assert ".amdhsa_code_object_version 5" in asm


# ---- LLVM's own tools -------------------------------------------------------------------------------


def _newest_tool(name: str) -> tuple[str, int] | None:
    found = []
    for path in glob.glob(f"/usr/lib/llvm-*/bin/{name}") + [f"/usr/bin/{name}"]:
        if os.path.exists(path):
            out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
            ver = re.search(r"LLVM version (\d+)", out)
            if ver:
                found.append((int(ver.group(1)), path))
    return (max(found)[1], max(found)[0]) if found else None


@pytest.mark.parametrize("tool", ["llvm-readobj", "llvm-objdump"])
def test_llvm_tools_accept_the_code_object(built, tool, tmp_path):
    t, _, hsaco, co, _ = built
    found = _newest_tool(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (apt-get install llvm)")
    path, major = found
    if tool == "llvm-objdump" and major < ARCHS[t.arch].llvm_tools_since:
        pytest.skip(f"{tool} is LLVM {major}, which cannot disassemble {t.arch} "
                    f"(needs LLVM >= {ARCHS[t.arch].llvm_tools_since})")
    obj = tmp_path / f"{t.arch}.hsaco"
    obj.write_bytes(hsaco)
    if tool == "llvm-readobj":
        r = subprocess.run([path, "--notes", str(obj)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "NT_AMDGPU_METADATA" in r.stdout and f"amdgcn-amd-amdhsa--{t.arch}" in r.stdout
        for name in co.kernels:
            assert f".symbol:         {name}.kd" in r.stdout
    else:
        r = subprocess.run([path, "-d", f"--mcpu={t.arch}", str(obj)], capture_output=True, text=True)
        assert r.returncode == 0 and "error" not in r.stderr, r.stderr
        assert "<unknown>" not in r.stdout
        for name in co.kernels:
            assert f"<{name}>:" in r.stdout
        assert "s_barrier" in r.stdout and "ds_bpermute_b32" in r.stdout


# ---- the linker -------------------------------------------------------------------------------------
def _fake_exe(path) -> str:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_linker_search_order(monkeypatch, tmp_path):
    monkeypatch.delenv("PYKERN_LLD", raising=False)
    rocm_lld = tmp_path / "rocm" / "llvm" / "bin" / "ld.lld"
    rocm_lld.parent.mkdir(parents=True)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    assert linker.find_lld()[-1] == "ld.lld" and any("ziglang" in p for p in linker.find_lld())  # ROCm lld absent yet
    _fake_exe(rocm_lld)
    assert linker.find_lld() == [str(rocm_lld)]
    explicit = _fake_exe(tmp_path / "my-lld")
    monkeypatch.setenv("PYKERN_LLD", explicit)
    assert linker.find_lld() == [explicit]
    monkeypatch.setenv("PYKERN_LLD", str(tmp_path / "missing"))
    with pytest.raises(linker.LinkerError, match="PYKERN_LLD"):
        linker.find_lld()


def test_linker_path_then_ziglang_then_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("PYKERN_LLD", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "nothing"))
    on_path = _fake_exe(tmp_path / "ld.lld")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert linker.find_lld() == [on_path]
    versioned = tmp_path / "versioned"
    versioned.mkdir()
    _fake_exe(versioned / "ld.lld-18")
    newest = _fake_exe(versioned / "ld.lld-20")
    (versioned / "ld.lld-x").write_text("")
    monkeypatch.setenv("PATH", str(versioned))
    assert linker.find_lld() == [newest], "a distribution's ld.lld-NN, the newest first"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(linker.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(linker.LinkerError) as info:
        linker.find_lld()
    for fix in ("ROCm", "apt-get install lld", "pip install 'pykern[amdgpu]'", "PYKERN_LLD"):
        assert fix in str(info.value)


def test_link_failure_reports_command_and_stderr():
    with pytest.raises(linker.LinkerError, match=r"ld\.lld failed .*-shared"):
        linker.link_shared(b"this is not an object file")


# ---- shuffle lane arithmetic, executed on the host ------------------------------------------------------
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("kind", ["idx", "xor", "up", "down"])
def test_shuffle_source_lane_semantics(kind, width):
    """JIT ``source_lane`` for the host and compare it with CUDA's rules on every lane."""
    import ctypes

    import llvmlite.binding as llvm

    from pykern.targets.amdgpu import source_lane
    from pykern.targets.base import init_llvm

    init_llvm()
    m = ir.Module("lanes")
    fn = ir.Function(m, ir.FunctionType(I32, [I32, I32]), "src")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(source_lane(b, kind, fn.args[0], fn.args[1], width))
    tm = llvm.Target.from_default_triple().create_target_machine()
    mod = llvm.parse_assembly(str(m))
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    src = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)(engine.get_function_address("src"))

    def expect(lane, arg):
        if kind == "idx":
            return arg % width
        other = {"xor": lane ^ arg, "up": lane - arg, "down": lane + arg}[kind]
        return other if 0 <= other < width else lane

    for lane in range(width):
        for arg in [*range(2 * width + 2), 0x7FFFFFFF, 0xFFFFFFFF]:
            assert src(lane, arg) == expect(lane, arg), (lane, arg)


# ---- real pykern kernels through the front end and shared lowering -----------------------------------
# (module level: the front end resolves names in the kernel's module globals)
import pykern as pk  # noqa: E402
from pykern import Ptr, f16, f32, u32, usize  # noqa: E402
from pykern.compiler import compile_kernels  # noqa: E402


@pk.kernel
def scale(n: usize, a: f32, x: Ptr[f32]):
    for i in pk.grid_stride(n):
        x[i] = a * x[i]


@pk.kernel(max_block_size=256)
def tile_sum(n: usize, x: Ptr[f32], out: Ptr[f32], count: Ptr[u32]):
    tile = pk.shared.array(256, f32)
    t = pk.thread_idx.x
    i = pk.global_id()
    v = f32(0)
    if i < n:
        v = x[i]
    tile[t] = v
    pk.syncthreads()
    s = tile[t ^ 1]
    s += pk.wave.shuffle_down(s, 1)
    pk.atomic.add(out, 0, s)
    pk.atomic.add(count, 0, u32(1))


@pk.kernel
def half_atomic(x: Ptr[f16]):
    pk.atomic.add(x, 0, f16(1))


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_pykern_kernels_build_for_every_arch(arch):
    t = AmdgpuTarget(arch)
    hsaco, sigs = compile_kernels([scale.instance(), tile_sum.instance()], t, "e2e")
    co = CodeObject(hsaco)
    for sig in sigs:
        k = co.kernels[sig.name]
        assert [(a.offset, a.size) for a in k.explicit_args] == [(o, p[1]) for o, p in zip(sig.offsets, sig.params)]
    ks = co.kernels[sigs[0].name]
    assert (ks.scratch, ks.spills) == (0, 0)
    kt = co.kernels[sigs[1].name]
    assert (kt.lds, kt.max_flat_workgroup_size, kt.wavefront_size) == (1024, 256, ARCHS[arch].wave_size)
    half, _ = compile_kernels([half_atomic.instance()], t, "half_atomic")  # f16 add: a CAS loop or native
    assert "half_atomic" in CodeObject(half).kernels
