"""``pk.mma``: a wave's matrix multiply-accumulate through opaque fragments, 16x16x16 f16/bf16 -> f32 and
16x16x32 i8 -> i32.

Values against NumPy in float64 on every device (the CPU at wave 32 and 64, a GPU where present): a
single tile read from global memory with leading dimensions other than 16, both B layouts, and a
K-loop GEMM (64 x 48 x 80) staged through shared memory. The products of f16/bf16 inputs are exact
in f32; only the order of the additions may differ by target, so each result must lie within
``BOUND_ULPS`` units of 2^-24 of ``Σ|a_k b_k| + |c|`` per 16-deep step (docs/language.md); i8 is
exact. The
instructions each target lowers to are checked in its assembly; the errors with their carets.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, i8, i32
from pykern.compiler import compile_kernels, lower_module
from pykern.errors import CompileError
from pykern.targets.nvptx import ptxas_check, ptxas_path
from pykern.targets.registry import make_target

T = pk.TypeVar("T")
C = pk.TypeVar("C")
DTYPES = [f16, bf16, i8]
#: per 16-deep step, the documented bound: 32 units of 2^-24 (the portable lowering's sequential sum
#: needs 16; hardware that truncates its partial sums, twice that)
BOUND_ULPS = 32


def bound(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    steps = a.shape[1] // 16
    return BOUND_ULPS * steps * 2.0 ** -24 * (np.abs(a) @ np.abs(b) + np.abs(c))


def inputs(dtype, shape, gen) -> np.ndarray:
    """Random values of ``dtype`` (f16 / bf16 as NumPy's float16 / ml_dtypes' bfloat16; every i8)."""
    if dtype is i8:
        return gen.integers(-128, 128, size=shape).astype(np.int8)
    return gen.standard_normal(shape).astype(np.float32).astype(dtype.np)


def accumulator(dtype):
    return i32 if dtype is i8 else f32


def depth(dtype) -> int:
    return 32 if dtype is i8 else 16


def agree(got: np.ndarray, a64: np.ndarray, b64: np.ndarray, c: np.ndarray, dtype) -> None:
    ref = a64 @ b64 + c
    if dtype is i8:
        np.testing.assert_array_equal(got, ref.astype(np.int64).astype(np.int32))
    else:
        assert np.all(np.abs(got - ref) <= bound(a64, b64, c.astype(np.float64)))


@pk.kernel
def k_tile(a: ConstPtr[T], lda: i32, b: ConstPtr[T], ldb: i32, c: Ptr[C], ldc: i32, *, T, C, layout):
    """c = a @ b + c for one 16x16 tile (16 or 32 deep), every wave of the block doing the same tile."""
    fa = pk.mma.load_a(a, lda)
    fb = pk.mma.load_b(b, ldb, layout=layout)
    acc = pk.mma.load_c(c, ldc)
    acc = pk.mma.mma(fa, fb, acc)
    if pk.thread_idx.x < pk.wave_size:  # one wave writes (uniform across the wave)
        pk.mma.store(c, ldc, acc)


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_single_tile(wave_device, dtype, layout):
    dev = wave_device
    gen = np.random.default_rng(26)
    kd = depth(dtype)
    lda, ldb, ldc = kd + 8, 40, 20
    a = inputs(dtype, (16, lda), gen)
    bmem = inputs(dtype, (kd, ldb) if layout == "row" else (16, ldb), gen)  # col: B[k][n] at n*ldb+k
    c = (gen.integers(-1000, 1000, (16, ldc)) if dtype is i8 else gen.standard_normal((16, ldc))).astype(
        accumulator(dtype).np)
    out = dev.to_device(c)
    k_tile.instance(T=dtype, C=accumulator(dtype), layout=layout).launch(1, 64, dev.to_device(a), lda,
                                                                         dev.to_device(bmem), ldb, out, ldc, device=dev)
    got = out.to_host()
    a64 = a[:, :kd].astype(np.float64 if dtype is not i8 else np.int64)
    b64 = (bmem[:, :16] if layout == "row" else bmem[:, :kd].T).astype(a64.dtype)
    agree(got[:, :16], a64, b64, c[:, :16].astype(a64.dtype), dtype)
    np.testing.assert_array_equal(got[:, 16:], c[:, 16:])  # columns beyond the tile untouched


@pk.kernel
def k_gemm(m: i32, n: i32, k: i32, a: ConstPtr[T], lda: i32, b: ConstPtr[T], ldb: i32, c: Ptr[C], ldc: i32,
           *, T, C, KS, col):
    """C = A @ B: a block of four waves computes a 32x32 block of C, one 16x16 tile a wave, staging
    KS-deep slices of A and B through shared memory (m, n multiples of 16, k of KS)."""
    sa = pk.shared.array(32 * KS, T)              # 32 rows of A x KS k
    sb = pk.shared.array(KS * 32, T)              # row: KS k x 32 n; col: 32 n x KS k
    t = i32(pk.thread_idx.x)
    wave = t // pk.wave_size
    tm = (wave // 2) * 16
    tn = (wave % 2) * 16
    m0 = i32(pk.block_idx.y) * 32
    n0 = i32(pk.block_idx.x) * 32
    acc = pk.mma.zeros(C)
    for k0 in range(0, k, KS):
        for e in range(t, 32 * KS, i32(pk.block_dim.x)):
            r = e // KS
            kk = e % KS
            sa[e] = T(0)
            if m0 + r < m:
                sa[e] = a[(m0 + r) * lda + k0 + kk]
            if not col:
                kr = e // 32
                nn = e % 32
                sb[e] = T(0)
                if n0 + nn < n:
                    sb[e] = b[(k0 + kr) * ldb + n0 + nn]
            else:
                sb[e] = T(0)
                if n0 + r < n:
                    sb[e] = b[(n0 + r) * ldb + k0 + kk]
        pk.syncthreads()
        fa = pk.mma.load_a(sa + tm * KS, KS)
        if not col:
            fb = pk.mma.load_b(sb + tn, 32)
        else:
            fb = pk.mma.load_b(sb + tn * KS, KS, layout="col")
        acc = pk.mma.mma(fa, fb, acc)
        pk.syncthreads()
    if m0 + tm < m and n0 + tn < n:
        pk.mma.store(c + ((m0 + tm) * ldc + n0 + tn), ldc, acc)


def gemm(dtype, col: bool, name: str | None = None):
    args = dict(T=dtype, C=accumulator(dtype), KS=depth(dtype), col=col)
    return k_gemm.instance(name, **args) if name else k_gemm.instance(**args)


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_gemm_through_shared_memory(wave_device, dtype, layout):
    dev = wave_device
    gen = np.random.default_rng(28)
    m, n, k = 64, 48, 80 if dtype is not i8 else 96
    lda, ldb, ldc = k + 8, (n + 16 if layout == "row" else k + 8), n + 4
    a = inputs(dtype, (m, lda), gen)
    bmem = inputs(dtype, (k, ldb) if layout == "row" else (n, ldb), gen)
    out = dev.zeros((m, ldc), accumulator(dtype))
    width = dev.target.wave_size  # four waves a block
    gemm(dtype, layout == "col").launch(((n + 31) // 32, m // 32), 4 * width, m, n, k, dev.to_device(a), lda,
                                        dev.to_device(bmem), ldb, out, ldc, device=dev)
    got = out.to_host()
    wide = np.float64 if dtype is not i8 else np.int64
    a64 = a[:, :k].astype(wide)
    b64 = (bmem[:, :n] if layout == "row" else bmem[:, :k].T).astype(wide)
    agree(got[:, :n], a64, b64, np.zeros((m, n), wide), dtype)
    assert not got[:, n:].any()


# ---- fragments at any address: wide loads where aligned, element loads elsewhere ---------------------
@pk.kernel
def k_tile_at(a: ConstPtr[T], oa: i32, lda: i32, b: ConstPtr[T], ob: i32, ldb: i32, c: Ptr[C], oc: i32, ldc: i32,
              *, T, C, layout, shared):
    """k_tile with each operand ``o*`` elements past its buffer's start; ``shared``: A and B first
    copied, as they are in memory, into shared arrays (ldmatrix's path on CUDA where aligned)."""
    if shared:
        sa = pk.shared.array(2048, T)
        sb = pk.shared.array(2048, T)
        for e in range(i32(pk.thread_idx.x), 2048, i32(pk.block_dim.x)):
            sa[e] = a[e]
            sb[e] = b[e]
        pk.syncthreads()
        fa = pk.mma.load_a(sa + oa, lda)
        fb = pk.mma.load_b(sb + ob, ldb, layout=layout)
    else:
        fa = pk.mma.load_a(a + oa, lda)
        fb = pk.mma.load_b(b + ob, ldb, layout=layout)
    acc = pk.mma.load_c(c + oc, ldc)
    acc = pk.mma.mma(fa, fb, acc)
    if pk.thread_idx.x < pk.wave_size:
        pk.mma.store(c + oc, ldc, acc)


#: (offset, extra stride): 16-byte aligned rows (ldmatrix, 16-byte loads), a base one element off, an
#: odd stride, 4-byte but not 16-byte aligned rows (pairs of f16 but no ldmatrix)
PLACES = [(0, 16), (1, 16), (0, 9), (2, 10)]


@pytest.mark.parametrize("shared", [False, True], ids=["global", "shared"])
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_any_alignment(wave_device, dtype, layout, shared):
    """Every fragment load and store is right at every offset and stride: the wide path (one branch
    a fragment, folded where the alignment is known) and the element path give the same values."""
    dev = wave_device
    gen = np.random.default_rng(2626)
    kd = depth(dtype)
    kern = k_tile_at.instance(T=dtype, C=accumulator(dtype), layout=layout, shared=shared)
    for off, extra in PLACES:
        lda, ldb, ldc = kd + extra, (16 if layout == "row" else kd) + extra, 16 + extra
        a = inputs(dtype, 2048, gen)
        bmem = inputs(dtype, 2048, gen)
        c = (gen.integers(-1000, 1000, 16 * ldc + off) if dtype is i8 else gen.standard_normal(16 * ldc + off)).astype(
            accumulator(dtype).np)
        out = dev.to_device(c)
        kern.launch(1, 64, dev.to_device(a), off, lda, dev.to_device(bmem), off, ldb, out, off, ldc, device=dev)
        got = out.to_host()
        wide = np.float64 if dtype is not i8 else np.int64
        a64 = a[off:off + 16 * lda].reshape(16, lda)[:, :kd].astype(wide)
        bm = bmem[off:off + (kd if layout == "row" else 16) * ldb].reshape(-1, ldb)
        b64 = (bm[:, :16] if layout == "row" else bm[:, :kd].T).astype(wide)
        c2 = c[off:].reshape(16, ldc)
        agree(got[off:].reshape(16, ldc)[:, :16], a64, b64, c2[:, :16].astype(wide), dtype)
        np.testing.assert_array_equal(got[off:].reshape(16, ldc)[:, 16:], c2[:, 16:])
        np.testing.assert_array_equal(got[:off], c[:off])


# ---- scale_add and outer_add: block-scaled integer products into an f32 accumulator -----------------
S = pk.TypeVar("S")


@pk.kernel
def k_scaled(a: ConstPtr[i8], b: ConstPtr[i8], rs: ConstPtr[S], cs: ConstPtr[S], rv: ConstPtr[f32],
             cv: ConstPtr[S], c: Ptr[f32], ldc: i32, *, S):
    """Two 32-deep i8 blocks (A 16 x 64 row-major, B 16 x 64 column-major), each product scaled by its
    block's 16 row and 16 column scales into c, then one rank-1 update rv cv^T."""
    acc = pk.mma.load_c(c, ldc)
    for blk in pk.static_range(2):
        p = pk.mma.mma(pk.mma.load_a(a + 32 * blk, 64), pk.mma.load_b(b + 32 * blk, 64, layout="col"),
                       pk.mma.zeros(i32))
        acc = pk.mma.scale_add(acc, p, rs + 16 * blk, cs + 16 * blk)
    acc = pk.mma.outer_add(acc, rv, cv)
    if pk.thread_idx.x < pk.wave_size:
        pk.mma.store(c, ldc, acc)


def fma32(x, y, z) -> np.float32:
    """``x * y + z`` rounded once to f32 (to nearest, ties to even), from the exact rational value."""
    from fractions import Fraction
    e = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    f = np.float32(float(e))
    near = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(near, key=lambda v: (abs(Fraction(float(v)) - e), int(np.array(v).view(np.int32)) & 1))


@pytest.mark.parametrize("scale", [f32, f16], ids=lambda d: d.name)
def test_scale_add_outer_add(wave_device, scale):
    """Bit-exact against the documented order: per block ``fma(f32(rs[r] * cs[c]), f32(p), acc)``, then
    ``fma(rv[r], cv[c], acc)`` (f16 scales widened exactly)."""
    dev = wave_device
    gen = np.random.default_rng(2628)
    a = gen.integers(-128, 128, (16, 64)).astype(np.int8)
    bm = gen.integers(-128, 128, (16, 64)).astype(np.int8)
    rs, cs, cv = (gen.standard_normal(32).astype(scale.np) for _ in range(3))
    rv = gen.standard_normal(16).astype(np.float32)
    ldc = 17
    c = gen.standard_normal((16, ldc)).astype(np.float32)
    out = dev.to_device(c)
    k_scaled.instance(S=scale).launch(1, 64, dev.to_device(a), dev.to_device(bm), dev.to_device(rs),
                                      dev.to_device(cs), dev.to_device(rv), dev.to_device(cv), out, ldc, device=dev)
    got = out.to_host()
    ref = c[:, :16].copy()
    for blk in range(2):
        ks = slice(32 * blk, 32 * blk + 32)
        p = a[:, ks].astype(np.int64) @ bm[:, ks].astype(np.int64).T
        for r in range(16):
            for col in range(16):
                s = np.float32(rs[16 * blk + r]) * np.float32(cs[16 * blk + col])
                ref[r, col] = fma32(s, np.float32(p[r, col]), ref[r, col])
    for r in range(16):
        for col in range(16):
            ref[r, col] = fma32(rv[r], np.float32(cv[col]), ref[r, col])
    np.testing.assert_array_equal(got[:, :16], ref)
    np.testing.assert_array_equal(got[:, 16:], c[:, 16:])


# ---- the instructions each target uses -------------------------------------------------------------
TILE = {d.name: k_tile.instance(f"tile_{d.name}", T=d, C=accumulator(d), layout="row") for d in DTYPES}


@pytest.mark.parametrize("arch,f16_instr,bf16_instr,i8_instr", [
    ("gfx90a", "v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16bf16_1k", "v_mfma_i32_16x16x16i8"),
    ("gfx942", "v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16", "v_mfma_i32_16x16x32_i8"),
    ("gfx950", "v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16", "v_mfma_i32_16x16x32_i8"),
    ("gfx1100", "v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16", "v_wmma_i32_16x16x16_iu8"),
    ("gfx1201", "v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16", "v_wmma_i32_16x16x16_iu8"),
    ("gfx1030", None, None, None), ("gfx11-generic", None, None, None)])
def test_amdgpu_instructions(arch, f16_instr, bf16_instr, i8_instr):
    """MFMA on CDNA, WMMA on RDNA3/4 (wave32); RDNA2 and the generic targets: the portable lowering
    (ds_bpermute shuffles, no matrix instruction)."""
    target = make_target("amdgpu", arch)
    for name, want in (("f16", f16_instr), ("bf16", bf16_instr), ("i8", i8_instr)):
        asm = target.assembly(lower_module([TILE[name]], target, "mma")[0])
        found = set(re.findall(r"^\s*(v_(?:mfma|wmma)\w*)", asm, re.M))
        assert found == ({want} if want else set()), (arch, name, found)
        if want is None:
            assert "ds_bpermute_b32" in asm
        else:  # the matrix instruction's kernels keep everything in registers
            assert re.search(r"^\s+\.private_segment_fixed_size:\s+0$", asm, re.M), f"{arch} {name} uses scratch"


@pytest.mark.parametrize("arch,instructions", [
    ("gfx90a", ["v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16bf16_1k", "v_mfma_i32_16x16x16i8"]),
    ("gfx942", ["v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16", "v_mfma_i32_16x16x32_i8"]),
    ("gfx1100", ["v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16", "v_wmma_i32_16x16x16_iu8"]),
    ("gfx1201", ["v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16", "v_wmma_i32_16x16x16_iu8"])])
def test_code_object_disassembly(arch, instructions, tmp_path):
    """The linked code object, disassembled by LLVM 19's llvm-objdump (not LLVM 22's own printer)."""
    tool = shutil.which("llvm-objdump-19")
    if tool is None:
        pytest.skip("llvm-objdump-19 is not installed (apt-get install llvm-19)")
    obj = tmp_path / f"{arch}.hsaco"
    obj.write_bytes(compile_kernels(list(TILE.values()), make_target("amdgpu", arch), "mma")[0])
    r = subprocess.run([tool, "-d", f"--mcpu={arch}", str(obj)], capture_output=True, text=True)
    assert r.returncode == 0 and "<unknown>" not in r.stdout, r.stderr
    for instr in instructions:
        assert re.search(rf"^\s*{instr}\b", r.stdout, re.M), (arch, instr)


def test_rdna_wave64_is_portable():
    """RDNA3's WMMA in wave64 holds other layouts: wave64 takes the portable lowering."""
    target = make_target("amdgpu", "gfx1100", wave64=True)
    asm = target.assembly(lower_module([TILE["f16"]], target, "mma")[0])
    assert "v_wmma" not in asm and "ds_bpermute_b32" in asm


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_mma_sync(arch):
    for name, form in (("f16", r"m16n8k16\.row\.col\.f32\.f16\.f16\.f32"),
                       ("bf16", r"m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32"),
                       ("i8", r"m16n8k32\.row\.col\.s32\.s8\.s8\.s32")):
        ptx = compile_kernels([TILE[name]], make_target("cuda", arch), "mma")[0].decode()
        assert len(re.findall(rf"mma\.sync\.aligned\.{form}", ptx)) == 2, name
        assert ".extern" not in ptx  # an intrinsic LLVM did not know would be a call
        if ptxas_path():
            ptxas_check(ptx, arch)


def test_ptx_wide_fragments():
    """sm_90: fragments from shared memory are one ldmatrix.x4 each (.trans for a row-major f16 B; an
    i8 row-major B stays element loads), from global memory pairs / quads of elements (one branch a
    fragment on the run-time alignment, and the element loads behind it)."""
    def ptx(kern):
        return compile_kernels([kern], make_target("cuda", "sm_90"), "mma")[0].decode()
    for dtype, col, trans in ((f16, True, 0), (f16, False, 1), (bf16, False, 1), (i8, True, 0), (i8, False, 0)):
        text = ptx(gemm(dtype, col, f"g_{dtype.name}_{col}"))
        assert len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", text)) == (2 if col else 1)
        assert len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16", text)) == trans
    text = ptx(k_tile_at.instance("t_f16", T=f16, C=f32, layout="col", shared=False))
    assert re.search(r"ld\.global\.(nc\.)?b32", text) and re.search(r"st\.global\.v2\.(b32|f32)", text)
    text = ptx(k_tile_at.instance("t_i8", T=i8, C=i32, layout="col", shared=False))
    assert re.search(r"ld\.global\.(nc\.)?b32", text)
    if ptxas_path():
        ptxas_check(text, "sm_90")


def test_cpu_is_shuffles():
    ir_text = str(lower_module([TILE["f16"]], make_target("cpu"), "mma")[0])
    assert "llvm.amdgcn" not in ir_text and "llvm.nvvm" not in ir_text
    assert len(re.findall(r"fmul float", ir_text)) >= 16 * 4
    ir_text = str(lower_module([TILE["i8"]], make_target("cpu"), "mma")[0])
    assert len(re.findall(r"= mul i32", ir_text)) >= 32 * 4


# ---- errors, each at its argument ------------------------------------------------------------------
def _error(src_kernel) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_kernels([src_kernel.instance(src_kernel.name)], make_target("cpu"), "bad")
    return info.value


def test_errors_with_source_and_caret():
    @pk.kernel
    def wrong_dtype(a: ConstPtr[f32], c: Ptr[f32]):
        fa = pk.mma.load_a(a, 16)

    @pk.kernel
    def swapped(a: ConstPtr[f16], c: Ptr[f32]):
        fa = pk.mma.load_a(a, 16)
        fb = pk.mma.load_b(a, 16)
        acc = pk.mma.mma(fb, fa, pk.mma.zeros(f32))

    @pk.kernel
    def mixed(a: ConstPtr[f16], b: ConstPtr[bf16], c: Ptr[f32]):
        acc = pk.mma.mma(pk.mma.load_a(a, 16), pk.mma.load_b(b, 16), pk.mma.zeros(f32))

    @pk.kernel
    def arity(a: ConstPtr[f16], c: Ptr[f32]):
        fa = pk.mma.load_a(a)

    @pk.kernel
    def store_input(a: ConstPtr[f16], c: Ptr[f32]):
        pk.mma.store(c, 16, pk.mma.load_a(a, 16))

    @pk.kernel
    def store_const(a: ConstPtr[f16], c: ConstPtr[f32]):
        pk.mma.store(c, 16, pk.mma.zeros(f32))

    @pk.kernel
    def bad_layout(a: ConstPtr[f16], c: Ptr[f32]):
        fb = pk.mma.load_b(a, 16, layout="diagonal")

    @pk.kernel
    def zeros_type(c: Ptr[f32]):
        acc = pk.mma.zeros(f16)

    @pk.kernel
    def arithmetic(a: ConstPtr[f16], c: Ptr[f32]):
        acc = pk.mma.zeros(f32)
        c[0] = acc + 1.0

    @pk.kernel
    def reassigned(a: ConstPtr[f16], c: Ptr[f32]):
        acc = pk.mma.zeros(f32)
        acc = pk.mma.load_a(a, 16)

    @pk.kernel
    def int_float(a: ConstPtr[i8], c: Ptr[f32]):
        acc = pk.mma.mma(pk.mma.load_a(a, 32), pk.mma.load_b(a, 16), pk.mma.zeros(f32))

    @pk.kernel
    def unsigned(a: ConstPtr[pk.u8], c: Ptr[f32]):
        fa = pk.mma.load_a(a, 16)

    @pk.kernel
    def scale_int(a: ConstPtr[i8], s: ConstPtr[f32], c: Ptr[f32]):
        p = pk.mma.zeros(i32)
        acc = pk.mma.scale_add(p, p, s, s)

    @pk.kernel
    def scale_float_product(a: ConstPtr[i8], s: ConstPtr[f32], c: Ptr[f32]):
        acc = pk.mma.zeros(f32)
        acc = pk.mma.scale_add(acc, acc, s, s)

    @pk.kernel
    def scale_vector_type(a: ConstPtr[i8], s: ConstPtr[i32], c: Ptr[f32]):
        acc = pk.mma.outer_add(pk.mma.zeros(f32), s, s)

    cases = [
        (scale_int, "pk.mma.scale_add()'s first argument is an f32 accumulator, got an accumulator", "p, p"),
        (scale_float_product, "second argument is an i32 accumulator (pk.mma.mma on i8), got an accumulator "
                              "(pk.mma.zeros, load_c or mma) of f32", "acc, s"),
        (scale_vector_type, "pk.mma.outer_add() takes a pointer (or shared array) of f32, f16, got ConstPtr[i32]",
         "s, s"),
        (wrong_dtype, "pk.mma.load_a() takes a pointer (or shared array) of f16, bf16, i8, got ConstPtr[f32]", "a, 16"),
        (swapped, "pk.mma.mma()'s first argument is an A fragment (pk.mma.load_a), got a B fragment", "fb"),
        (mixed, "multiplies fragments of one type, got A of f16 and B of bf16", "pk.mma.mma("),
        (arity, "pk.mma.load_a() takes 2 arguments", "pk.mma.load_a(a)"),
        (store_input, "pk.mma.store() stores an accumulator", "pk.mma.load_a(a, 16)"),
        (store_const, "cannot write through a ConstPtr", "c, 16"),
        (bad_layout, "layout= is 'row'", '"diagonal"'),
        (zeros_type, "pk.mma.zeros() takes the accumulator's type (f32, i32), got f16", "f16"),
        (int_float, "pk.mma.mma() on i8 accumulates in i32, got an accumulator of f32", "pk.mma.zeros(f32)"),
        (unsigned, "takes a pointer (or shared array) of f16, bf16, i8, got ConstPtr[u8]", "a, 16"),
        (arithmetic, "mma.fragment[acc, f32]", "acc + 1.0"),
        (reassigned, "mma.fragment[a, f16]", ""),
    ]
    for kern, msg, snippet in cases:
        err = _error(kern)
        text = str(err)
        assert msg in text, (kern.name, text)
        assert "^" in text, (kern.name, text)            # the source line and its caret
        if snippet:
            assert snippet in text, (kern.name, text)
