"""pykern's own matrix multiply: a tiled GEMM written in pykern (``docs/matmul.md``).

candle has no matmul module (it calls cuBLAS), so this is an extra module, ``MATMUL``, outside
candle's eleven ``Id``s: it has no index, is not in ``stdlib_kernels.MODULES`` and is never asked for
by a candle backend; ``abi_check`` and the module index are unaffected.

``gemm_{T}(m, n, k, a, a_batch, a_row, a_col, b, b_batch, b_row, b_col, c)`` computes, for batch
``z = block_idx.z``, ``c[z] = a[z] @ b[z]`` with ``a[z][i, l] = a[z*a_batch + i*a_row + l*a_col]`` (and
likewise b), so transposed, sliced and broadcast (zero batch stride) operands need no copy; ``c`` is
contiguous ``(batch, m, n)``. f32, f16 and bf16 in and out, products accumulated in f32 by fused
multiply-adds.

The structure is the classic one for SIMT cores, written once with its tile sizes as compile-time
parameters: a block of ``THREADS`` threads owns a ``BLOCK_M x BLOCK_N`` tile of c; each step it
stages a ``BLOCK_M x BLOCK_K`` slice of a and a ``BLOCK_K x BLOCK_N`` slice of b in shared memory
(``BLOCK_K`` chosen per target with ``pk.per_target``: 16 on CUDA, 8 elsewhere; converted to f32, a stored k-major so a thread reads its rows as one vector), and each thread
accumulates an ``8 x 8`` register block: per ``k`` it reads 8 values of a and 8 of b from shared memory
and does 64 fused multiply-adds. The thread's rows and columns are two groups of 4, half a tile
apart, so the lanes of a wave read adjacent 16-byte groups (no bank conflicts). Two shared buffers
let the next slice's global loads be in flight while the current one is multiplied: one barrier a
step. Moving it onto matrix cores replaces the register block's update (``mma_block``) and the shared
layout; the staging and the epilogue stay.
"""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, usize

from ._common import operands

T = pk.TypeVar("T")

#: not one of candle's modules: no index (``docs/matmul.md``)
MATMUL = pk.Module("matmul")
DTYPES = (f32, f16, bf16)

BLOCK_M = 128
BLOCK_N = 128
#: slice depth per target: 16 runs faster than 8 on NVIDIA, but on AMD spills VGPRs to scratch on
#: RDNA and takes AGPRs on CDNA, where 8 fits; the CPU compiles 8 in less time and runs it as fast
#: (docs/matmul.md)
BLOCK_K = pk.per_target(cuda=16, default=8)
#: each thread's register block: REG x REG outputs, as two groups of REG // 2 rows (and columns)
REG = 8
THREADS = (BLOCK_M // REG) * (BLOCK_N // REG)
#: shared rows padded by 4 f32: the transposing stores of a k-contiguous a hit distinct banks, rows stay 16-byte aligned
PAD = 4
#: a k-contiguous b is read in runs of KRUN adjacent k (32 bytes of f32, a whole sector) by adjacent
#: threads, so a wave's 32 transposing shared stores span 8 k x 4 columns: 32 distinct banks with rows
#: of 4 mod 32 floats. With 16-deep slices, runs of 16 put k and k + 8 of a column on one bank (2-way
#: conflicts, measured slower); a k-contiguous a keeps runs of BK, which measured faster than runs of 8
#: despite its conflicts (docs/matmul.md)
KRUN = 8


@pk.func
def run_k(e: usize, *, major, bk) -> usize:
    """The k of element ``e`` of a ``bk x major`` slice of b staged along k in runs of ``KRUN``."""
    if bk > KRUN:
        return (e // (major * KRUN)) * KRUN + e % KRUN
    return e % bk


@pk.func
def run_row(e: usize, *, major, bk) -> usize:
    """The column of b of element ``e`` of a slice staged along k in runs of ``KRUN`` (as ``run_k``)."""
    if bk > KRUN:
        return (e // KRUN) % major
    return e // bk


@pk.func
def stage_a(a: ConstPtr[T], m: usize, k: usize, row0: usize, k0: usize, a_row: usize, a_col: usize, t: usize,
            regs: Ptr[f32], *, bm, bk, threads):
    """This thread's ``bm * bk // threads`` elements of the a slice into ``regs`` (zero outside the
    matrix). A k-contiguous a is read along k by adjacent threads, any other layout along m."""
    k_fast = a_col == 1
    for r in pk.static_range(bm * bk // threads):
        e = t + r * threads
        kk = pk.select(k_fast, e % bk, e // bm)
        row = pk.select(k_fast, e // bk, e % bm)
        ok = row0 + row < m and k0 + kk < k
        v = a[pk.select(ok, (row0 + row) * a_row + (k0 + kk) * a_col, usize(0))]
        regs[r] = pk.select(ok, f32(v), f32(0))


@pk.func
def stage_b(b: ConstPtr[T], n: usize, k: usize, col0: usize, k0: usize, b_row: usize, b_col: usize, t: usize,
            regs: Ptr[f32], *, bn, bk, threads):
    """As ``stage_a`` for the b slice: read along n when b is n-contiguous, else along k."""
    n_fast = b_col == 1
    for r in pk.static_range(bn * bk // threads):
        e = t + r * threads
        kk = pk.select(n_fast, e // bn, run_k(e, major=bn, bk=bk))
        col = pk.select(n_fast, e % bn, run_row(e, major=bn, bk=bk))
        ok = col0 + col < n and k0 + kk < k
        v = b[pk.select(ok, (k0 + kk) * b_row + (col0 + col) * b_col, usize(0))]
        regs[r] = pk.select(ok, f32(v), f32(0))


@pk.func
def mma_block(acc: Ptr[f32], sa: Ptr[f32], sb: Ptr[f32], base_a: usize, base_b: usize, tm: usize, tn: usize, *, bk,
              reg, half_m, half_n, row_a, row_b):
    """acc (reg x reg) += this thread's rows of the a slice times its columns of the b slice, one k at a
    time: 2 * reg shared reads, reg * reg fused multiply-adds."""
    fa = pk.local.array(reg, f32)
    fb = pk.local.array(reg, f32)
    for kk in pk.static_range(bk):
        for i in pk.static_range(reg // 2):
            fa[i] = sa[base_a + kk * row_a + tm * (reg // 2) + i]
            fa[reg // 2 + i] = sa[base_a + kk * row_a + half_m + tm * (reg // 2) + i]
            fb[i] = sb[base_b + kk * row_b + tn * (reg // 2) + i]
            fb[reg // 2 + i] = sb[base_b + kk * row_b + half_n + tn * (reg // 2) + i]
        for i in pk.static_range(reg):
            for j in pk.static_range(reg):
                acc[i * reg + j] = pk.fma(fa[i], fb[j], acc[i * reg + j])


@pk.kernel(max_block_size=THREADS)
def gemm(m: usize, n: usize, k: usize, a: ConstPtr[T], a_batch: usize, a_row: usize, a_col: usize, b: ConstPtr[T],
         b_batch: usize, b_row: usize, b_col: usize, c: Ptr[T], *, T, BM, BN, BK, RG, NT, RA, RB):
    """``NT`` threads, ``RA``/``RB`` the padded shared row lengths (all derived from the tile sizes in
    ``gemm_params``)."""
    sa = pk.shared.array(2 * BK * RA, f32)  # two buffers of BK rows (one per k) of BM values
    sb = pk.shared.array(2 * BK * RB, f32)
    ra = pk.local.array(BM * BK // NT, f32)  # this thread's elements of the next slices
    rb = pk.local.array(BN * BK // NT, f32)
    acc = pk.local.array(RG * RG, f32)
    for i in pk.static_range(RG * RG):
        acc[i] = 0.0
    t = usize(pk.thread_idx.x)
    tn = t % (BN // RG)
    tm = t // (BN // RG)
    z = usize(pk.block_idx.z)
    row0 = usize(pk.block_idx.x) * BM  # x: the dimension without the 65535-block limit
    col0 = usize(pk.block_idx.y) * BN
    pa = a + z * a_batch
    pb = b + z * b_batch
    k_fast = a_col == 1
    n_fast = b_col == 1
    steps = (k + (BK - 1)) // BK
    if steps > 0:
        stage_a(pa, m, k, row0, usize(0), a_row, a_col, t, ra, bm=BM, bk=BK, threads=NT)
        stage_b(pb, n, k, col0, usize(0), b_row, b_col, t, rb, bn=BN, bk=BK, threads=NT)
        store_slices(sa, sb, ra, rb, t, k_fast, n_fast, usize(0), bm=BM, bn=BN, bk=BK, threads=NT, row_a=RA,
                     row_b=RB)
        pk.syncthreads()
    for step in range(steps):
        cur = step % 2
        more = step + 1 < steps
        if more:  # the next slice's loads are in flight during the multiply below
            stage_a(pa, m, k, row0, (step + 1) * BK, a_row, a_col, t, ra, bm=BM, bk=BK, threads=NT)
            stage_b(pb, n, k, col0, (step + 1) * BK, b_row, b_col, t, rb, bn=BN, bk=BK, threads=NT)
        mma_block(acc, sa, sb, cur * (BK * RA), cur * (BK * RB), tm, tn, bk=BK, reg=RG, half_m=BM // 2,
                  half_n=BN // 2, row_a=RA, row_b=RB)
        if more:
            store_slices(sa, sb, ra, rb, t, k_fast, n_fast, 1 - cur, bm=BM, bn=BN, bk=BK, threads=NT, row_a=RA,
                         row_b=RB)
        pk.syncthreads()
    pc = c + z * m * n
    for i in pk.static_range(RG):
        row = row0 + (i // (RG // 2)) * (BM // 2) + tm * (RG // 2) + i % (RG // 2)
        if row < m:
            for j in pk.static_range(RG):
                col = col0 + (j // (RG // 2)) * (BN // 2) + tn * (RG // 2) + j % (RG // 2)
                if col < n:
                    pc[row * n + col] = T(acc[i * RG + j])


@pk.func
def store_slices(sa: Ptr[f32], sb: Ptr[f32], ra: Ptr[f32], rb: Ptr[f32], t: usize, k_fast: bool, n_fast: bool,
                 buf: usize, *, bm, bn, bk, threads, row_a, row_b):
    """The staged registers into shared buffer ``buf``: a as ``sa[kk][row]``, b as ``sb[kk][col]``."""
    for r in pk.static_range(bm * bk // threads):
        e = t + r * threads
        kk = pk.select(k_fast, e % bk, e // bm)
        row = pk.select(k_fast, e // bk, e % bm)
        sa[buf * (bk * row_a) + kk * row_a + row] = ra[r]
    for r in pk.static_range(bn * bk // threads):
        e = t + r * threads
        kk = pk.select(n_fast, e // bn, run_k(e, major=bn, bk=bk))
        col = pk.select(n_fast, e % bn, run_row(e, major=bn, bk=bk))
        sb[buf * (bk * row_b) + kk * row_b + col] = rb[r]


def gemm_params(bm: int, bn: int, bk: int | pk.PerTarget, reg: int) -> dict:
    """The compile-time parameters of a ``bm x bn`` tile with ``bk``-deep slices (an int, or a
    ``pk.per_target`` table of them) and ``reg x reg`` blocks."""
    threads = (bm // reg) * (bn // reg)
    for depth in bk.choices.values() if isinstance(bk, pk.PerTarget) else (bk,):
        if (bm * depth) % threads or (bn * depth) % threads or reg % 2 or (depth > KRUN and depth % KRUN):
            raise ValueError(f"gemm tile {bm}x{bn}x{depth} with {reg}x{reg} blocks: slices don't divide among "
                             f"{threads} threads")
    return dict(BM=bm, BN=bn, BK=bk, RG=reg, NT=threads, RA=bm + PAD, RB=bn + PAD)


for _t in DTYPES:
    MATMUL.add(gemm.instance(f"gemm_{_t.tag}", T=_t, **gemm_params(BLOCK_M, BLOCK_N, BLOCK_K, REG)))


# ---- host wrapper -----------------------------------------------------------------------------------
#: the most batches one launch takes (grid.z's limit on NVIDIA)
MAX_BATCH = 65535


def gemm_launch(m: int, n: int, batch: int, target) -> tuple[tuple[int, int, int], int]:
    """One block per ``BM x BN`` tile of each batch's c: row tiles along x (up to 2**31 - 1 blocks),
    column tiles along y and the batch along z (up to 65535 each). The tile is the one the kernels
    are compiled with for ``target`` (a target or its name: ``device.target``), read from the same
    parameters, so a per-target tile size cannot leave the grid behind."""
    p = MATMUL.get("gemm_f32").params_for(target)  # every dtype's instance has the same tile
    bm, bn = p["BM"], p["BN"]
    if -(-n // bn) > MAX_BATCH or batch > MAX_BATCH:
        raise ValueError(f"gemm: {n} columns or {batch} batches exceed one launch's grid; split the call")
    return (max(1, -(-m // bm)), max(1, -(-n // bn)), batch), p["NT"]


def _batch_stride(shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """The one stride that walks the flattened batch dims, or None when they don't collapse."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    if all(s == 0 for _, s in dims):
        return 0
    for (n_outer, s_outer), (n_inner, s_inner) in zip(dims, dims[1:]):
        if s_outer != s_inner * n_inner:
            return None
    return dims[-1][1]


def matmul(a, b, out=None):
    """``a @ b`` with NumPy's rules: ``(..., m, k) @ (..., k, n)``, batch dims broadcast, any strides
    (transposed, sliced, broadcast operands are read in place). f32, f16, bf16; f32 accumulation."""
    from pykern.runtime.launch import storage
    a, b = operands("matmul", DTYPES, a, b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: operands need at least 2 dims, got shapes {a.shape} and {b.shape}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: inner dims differ: a is {a.shape} (k={k}), b is {b.shape} (k={k2})")
    if any(s < 0 for s in a.strides + b.strides):
        raise ValueError("matmul: negative strides are not supported")
    batch_shape = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = a.broadcast_to(batch_shape + (m, k))
    b = b.broadcast_to(batch_shape + (k, n))
    shape = batch_shape + (m, n)
    if out is None:
        out = a.device.empty(shape, a.dtype)
    elif out.shape != shape or out.dtype is not a.dtype or not out.is_contiguous or out.device is not a.device:
        raise ValueError(f"matmul: out must be a contiguous {a.dtype} array of shape {shape} on {a.device}, got {out!r}")
    if out.size == 0:
        return out
    if k == 0:
        from .fill import fill
        fill(out, 0)
        return out
    fn = a.device.get_or_load_func(f"gemm_{a.dtype.tag}", MATMUL)
    sa, sb = _batch_stride(batch_shape, a.strides[:-2]), _batch_stride(batch_shape, b.strides[:-2])
    batches = int(np.prod(batch_shape)) if batch_shape else 1
    if sa is not None and sb is not None:
        groups = [((), batches, sa, sb)]
    else:  # batch dims that don't flatten: one launch per index of all but the last batch dim
        last = batch_shape[-1]
        groups = [(idx, last, a.strides[-3], b.strides[-3]) for idx in np.ndindex(*batch_shape[:-1])]
    for idx, count, stride_a, stride_b in groups:
        base_a = sum(i * s for i, s in zip(idx, a.strides))
        base_b = sum(i * s for i, s in zip(idx, b.strides))
        base_c = sum(i * s for i, s in zip(idx, out.strides))
        for z0 in range(0, count, MAX_BATCH):
            nz = min(MAX_BATCH, count - z0)
            va = a.as_strided((nz, m, k), (stride_a, a.strides[-2], a.strides[-1]), base_a + z0 * stride_a)
            vb = b.as_strided((nz, k, n), (stride_b, b.strides[-2], b.strides[-1]), base_b + z0 * stride_b)
            vc = out.as_strided((nz, m, n), (m * n, n, 1), base_c + z0 * m * n)
            fn[gemm_launch(m, n, nz, a.device.target)](m, n, k, storage(va), stride_a, a.strides[-2], a.strides[-1], storage(vb),
                                      stride_b, b.strides[-2], b.strides[-1], vc)
    return out


__all__ = ["MATMUL", "gemm", "matmul", "gemm_launch"]
