"""REDUCE: candle's ``reduce`` module — ``fast_*`` reductions, the atomic ``sum``, softmax, rmsnorm,
layernorm and the three rotary-embedding layouts (64 kernels, candle's names and parameter sizes).

Every cross-lane step is written once against ``pk.wave_size`` (32 or 64): a guarded xor butterfly
inside each wave (a partner lane outside the block is ignored, so any block size works, including
blocks smaller than a wave, up to each kernel's max_block_size), then the per-wave results through
shared memory. Semantics follow
candle's CPU backend where its CUDA kernels differ:

* min/max/argmin/argmax: candle-cpu's fold ``if f(val, s) { val = s }`` starting from the first
  element: the lowest index wins ties, NaNs are skipped, except that a NaN first element is the
  result (index 0). f16/bf16 behave like f32 (CUDA propagates NaN for halves, skips it for floats).
* f16/bf16 sums, softmax, rmsnorm and layernorm accumulate in f32; f64 rmsnorm/layernorm in f64
  (candle's CUDA kernels use f32 there); softmax/rmsnorm/layernorm for halves compute in f32 and
  round once (candle-cpu rounds after every half operation).
* argmin/argmax return the index along the last reordered dim (candle's ``idx % dims[last]``); the
  wrappers accept one dim, as candle-cpu does.
"""
from __future__ import annotations

import math

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, f64, i32, i64, u8, u16, u32, u64, usize

from . import REDUCE, kernel_name
from ._common import BLOCK, as_device_array, is_contiguous, launch_1d, storage, strided_index

T = pk.TypeVar("T")
V = pk.TypeVar("V")
S = pk.TypeVar("S")
U = pk.TypeVar("U")
W = pk.TypeVar("W")

FAST_DTYPES = (f32, f64, u32, i64, u8, f16, bf16)
SUM_DTYPES = (f32, f64, u32, f16, bf16)
NN_DTYPES = (f32, f64, f16, bf16)
#: the most waves a block of 1024 threads has (at the narrowest wave width, 32)
MAX_WAVES = 32
#: compile-time op codes of ``fast_reduce``
SUM, MIN, MAX, ARGMIN, ARGMAX = range(5)
INF = float("inf")


def _acc(t):
    """What ``t`` is computed in: f32 for the half types, else itself."""
    return f32 if t in (f16, bf16) else t


def _identity(t, op):
    if op == SUM:
        return 0 if t.is_int else 0.0
    lo, hi = (float("-inf"), float("inf")) if t.is_float else t.int_range
    return hi if op in (MIN, ARGMIN) else lo


# ---------------------------------------------------------------------------------------------------
# device helpers
# ---------------------------------------------------------------------------------------------------
_LOG2E = 1.4426950408889634
#: the most negative finite value: a running max that starts there keeps exp(-inf - max) at 0
_LOWEST = {f32: -3.4028234663852886e38, f64: -1.7976931348623157e308}


@pk.func
def exp_diff(a: V, b: V) -> V:
    """e**(a - b) for a <= b (NaN propagates, -inf gives 0): f32 through the hardware 2**x
    (``pk.fast_exp2``, ~2 ulp, flushes below 2**-126); f64: ``pk.math.exp``."""
    if V is f64:
        return pk.math.exp(a - b)
    else:
        return pk.fast_exp2((a - b) * _LOG2E)


@pk.func
def merge(a: V, b: V, op: i32) -> V:
    """The cross-lane step of a sum (SUM) or of softmax's max (MAX: NaN-skipping, as f32::max)."""
    if op == SUM:
        return a + b
    return pk.fmax(a, b)


@pk.func
def wave_sum_n(v: V, lane: u32, count: u32, op: i32) -> V:
    """``merge`` over the first ``count`` lanes of the wave, exact on lane 0 (every lane of a full
    wave). Partners at or past ``count`` (outside the block) are ignored. All lanes must call it."""
    off: u32 = pk.wave_size // 2
    while off > 0:
        o = pk.wave.shuffle_xor(v, off)
        if (lane ^ off) < count:
            v = merge(v, o, op)
        off = off // 2
    return v


@pk.func
def wave_sum_full(v: V, op: i32) -> V:
    """``merge`` over a whole wave (every lane present), on every lane: the unguarded xor butterfly."""
    off: u32 = pk.wave_size // 2
    while off > 0:
        v = merge(v, pk.wave.shuffle_xor(v, off), op)
        off = off // 2
    return v


@pk.func
def block_sum(v: V, sm: S, t: u32, nt: u32) -> V:
    """The sum of ``v`` over the ``nt`` threads of the block (``t`` = this thread's index), on every
    thread. ``sm`` holds at least one V per wave; it is free again on return. All threads call it."""
    lane = t % pk.wave_size
    wid = t // pk.wave_size
    v = wave_sum_n(v, lane, min(nt - wid * pk.wave_size, pk.u32(pk.wave_size)), SUM)
    if nt > pk.wave_size:
        if lane == 0:
            sm[wid] = v
        pk.syncthreads()
        if lane < (nt + pk.wave_size - 1) // pk.wave_size:
            v = sm[lane]
        v = wave_sum_n(v, lane, (nt + pk.wave_size - 1) // pk.wave_size, SUM)
        pk.syncthreads()
    return pk.wave.shuffle(v, 0)


@pk.func
def block_sum_whole(v: V, sm: S, t: u32, nt: u32, op: i32, free: bool) -> V:
    """block_sum (same contract, any ``merge``) with fewer instructions per thread: whole waves
    (every candle launch but blocks narrower than a wave) skip the partner guards; the per-thread
    instruction count, not bandwidth, bounds rows of a few elements per thread. ``free`` false: the
    caller never uses ``sm`` again, and the barrier that frees it is left out."""
    lane = t % pk.wave_size
    wid = t // pk.wave_size
    present = min(nt - wid * pk.wave_size, pk.u32(pk.wave_size))
    if present == pk.wave_size:
        v = wave_sum_full(v, op)
    else:
        v = wave_sum_n(v, lane, present, op)
    if nt > pk.wave_size:
        if lane == 0:
            sm[wid] = v
        pk.syncthreads()
        nw = (nt + pk.wave_size - 1) // pk.wave_size
        v = V(0)
        if lane < nw:
            v = sm[lane]
        elif op != SUM:
            v = sm[0]  # fmax's neutral value here: one of the operands
        if present == pk.wave_size:
            v = wave_sum_full(v, op)
        else:
            v = wave_sum_n(v, lane, nw, op)
        if free:
            pk.syncthreads()
    if present == pk.wave_size:
        return v
    return pk.wave.shuffle(v, 0)


@pk.func
def better(want_min: bool, b: V, bi: u32, a: V, ai: u32) -> bool:
    """Is (b, bi) preferred to (a, ai): smaller (larger), or equal with a lower index. ``a`` is a
    running best that starts at the identity: a NaN never compares better, so ``a`` is never NaN (a
    NaN first element is candle-cpu's answer, settled apart). No short-circuits: no branches, and
    the parallel_range copies' loads can merge (H100, candle's fast_argmax f32 4096 columns with
    the NaN term 0.90x torch, without it 1.01)."""
    return (b < a if want_min else b > a) | ((b == a) & (bi < ai))


@pk.func
def row_base(row: usize, el: usize, num_dims: usize, info: ConstPtr[usize]) -> usize:
    """The memory offset of block ``row``'s first element when its ``el`` elements (the reduced dims,
    last in ``info``) are contiguous in memory, else all bits set (read through strided_index)."""
    if info is None:
        return row * el
    acc: usize = 1
    d = num_dims
    while d > 0 and acc < el:
        d -= 1
        if info[d] != 1 and info[num_dims + d] != acc:
            return ~pk.u64(0)
        acc *= info[d]
    if acc != el:
        return ~pk.u64(0)
    offset: usize = 0
    while d > 1:  # the kept dims; the outermost needs no division (row < its size)
        d -= 1
        offset += (row % info[d]) * info[num_dims + d]
        row //= info[d]
    if d == 1:
        offset += row * info[num_dims]
    return offset


@pk.func
def rows_contiguous(el: usize, num_dims: usize, info: ConstPtr[usize]) -> bool:
    """Row r's elements are [r*el, r*el + el) for every r: no info, or a contiguous 1-D or 2-D layout,
    told apart by four independent loads (no loop of dependent ones: under candle's launch every
    thread of every block runs this preamble, and the block's first data load waits on it)."""
    if info is None:
        return True
    if num_dims == 1 or num_dims == 2:
        d_last = info[num_dims - 1]
        s_last = info[2 * num_dims - 1]
        d_first = info[0]
        s_first = info[num_dims]
        return (d_last == el) & (s_last == 1) & ((num_dims == 1) | (s_first == el) | (d_first == 1))
    return False


@pk.func
def row_offset(row: usize, el: usize, num_dims: usize, info: ConstPtr[usize]) -> usize:
    """row_base, with the usual layouts (``rows_contiguous``) first."""
    if rows_contiguous(el, num_dims, info):
        return row * el
    return row_base(row, el, num_dims, info)


@pk.func
def combine(a: V, b: V, op: i32) -> V:
    """SUM a + b; MIN/MAX ``b`` only when strictly smaller/larger: with ``a`` the earlier elements,
    candle-cpu's fold exactly (NaNs never taken, ties keep the first, -0 and +0 included)."""
    if op == SUM:
        return a + b
    if op == MIN:
        return pk.select(b < a, b, a)
    return pk.select(b > a, b, a)


@pk.func
def wave_op(v: V, op: i32, lane: u32, present: u32) -> V:
    """The combine of the wave's first ``present`` lanes, on lane 0. SUM: ``pk.wave.sum``. MIN/MAX: a
    xor butterfly from the nearest lanes out, so that lane 0's partial always holds the lanes before
    its partner's (the tie rule); partners past ``present`` are ignored."""
    if op == SUM:
        return pk.wave.sum(v)
    off: u32 = 1
    while off < pk.wave_size:
        o = pk.wave.shuffle_xor(v, off)
        if (lane ^ off) < present:
            v = combine(v, o, op)
        off = off * 2
    return v


@pk.func
def block_reduce(v: V, sm: S, t: u32, nt: u32, ident: V, op: i32) -> V:
    """``combine`` over the ``nt`` threads of a 1-D block in thread order, on thread 0: each wave,
    then the waves' results in wave 0 (one barrier). All threads call it."""
    lane = t % pk.wave_size
    v = wave_op(v, op, lane, min(nt - (t - lane), pk.u32(pk.wave_size)))
    if nt > pk.wave_size:
        if lane == 0:
            sm[t // pk.wave_size] = v
        pk.syncthreads()
        if t < pk.wave_size:
            nw = (nt + pk.wave_size - 1) // pk.wave_size
            v = ident
            if t < nw:
                v = sm[t]
            v = wave_op(v, op, lane, nw)
    return v


@pk.func
def spread_idle(per_block: u32, block: u32) -> bool:
    """Has ``block`` no row under ``spread_row`` (grid_dim.x rows at most)? Every thread of every
    block of such a launch runs this first, on values its whole block shares (no thread index to wait
    for): idle blocks are most of the launch (31 of 32 for a wave per row), and how soon they exit
    bounds it (H100, candle's launches at 1024 columns: fast_* 0.42-0.45 -> 0.44-0.48x torch,
    rmsnorm f32 0.80 -> 0.83, bf16 0.67 -> 0.72, layernorm f32 0.84 -> 0.89, bf16 0.94 -> 1.01)."""
    if per_block & (per_block - 1) != 0:
        return pk.u64(block) * pk.u64(per_block) >= pk.u64(pk.grid_dim.x)
    return block & (per_block - 1) != 0


@pk.func
def spread_row(per_block: u32, k: u32, block: u32) -> usize:
    """Row of part ``k`` of a block that is not ``spread_idle`` (each of ``per_block`` parts takes a
    row) when the grid has a block per row (candle's launches of fast_* and the norms on short rows):
    rows go to every ``per_block``-th block, ``block + k``, so that the blocks with rows are spread
    over the grid and the idle ones run beside them, not after them. A part count that is no power of
    two (no candle launch) gives block b rows ``b * per_block + k`` instead."""
    if per_block & (per_block - 1) != 0:
        return pk.u64(block) * pk.u64(per_block) + pk.u64(k)
    return pk.u64(block) + pk.u64(k)


#: rows up to this long go one per wave in fast_* (no barrier, no shared memory)
WAVE_ROWS = 4096


@pk.func
def wave_rows(numel: usize, el: usize, src: ConstPtr[T], dst: Ptr[U], t: u32, nt: u32, lane: u32, ident: V,
              op: i32):
    """Contiguous rows of at most WAVE_ROWS elements, one per wave: a grid with a block for every row
    (candle's) gives them to every waves-th block (``spread_row``); a smaller one (the wrappers')
    to block after block, ``block * waves + w``, stepping by the grid's waves. A wave's lanes share
    the row through parallel_range (16-byte loads), then one xor butterfly."""
    waves = pk.u64(nt // pk.wave_size)
    r = pk.u64(pk.block_idx.x) * waves + pk.u64(t // pk.wave_size)
    if pk.u64(pk.grid_dim.x) * el >= numel:  # a block for every row
        if spread_idle(nt // pk.wave_size, pk.block_idx.x):
            return
        r = spread_row(nt // pk.wave_size, t // pk.wave_size, pk.block_idx.x)
    while r * el < numel:  # row r starts below numel (no 64-bit division: every idle thread runs this)
        start = r * el
        n = min(start + el, numel) - start
        p = src + start
        if op <= MAX:
            acc: V = ident
            for j in pk.parallel_range(pk.u32(0), pk.u32(n), lane, pk.u32(pk.wave_size)):
                acc = combine(acc, V(p[j]), op)
            acc = wave_op(acc, op, lane, pk.u32(pk.wave_size))
            if lane == 0:
                first = V(p[0])
                if op != SUM and first != first:  # candle-cpu: a NaN first element is never replaced
                    acc = first
                dst[r] = U(acc)
        else:  # argmin/argmax: (value, index) pairs, ties to the lower index
            want_min = op == ARGMIN
            b0: V = ident
            i0: u32 = 0xFFFFFFFF
            for j in pk.parallel_range(pk.u32(0), pk.u32(n), lane, pk.u32(pk.wave_size)):
                x = V(p[j])
                if better(want_min, x, j, b0, i0):
                    b0 = x
                    i0 = j
            off: u32 = 1
            while off < pk.wave_size:
                o = pk.wave.shuffle_xor(b0, off)
                oi = pk.wave.shuffle_xor(i0, off)
                if better(want_min, o, oi, b0, i0):
                    b0 = o
                    i0 = oi
                off = off * 2
            if lane == 0:
                first = V(p[0])
                if first != first:
                    i0 = 0
                dst[r] = U(i0)
        r += pk.u64(pk.grid_dim.x) * waves


# ---------------------------------------------------------------------------------------------------
# fast_* : one block per output, reduced dims last in info
# ---------------------------------------------------------------------------------------------------
@pk.kernel(min_blocks_per_sm=2)
def fast_reduce(src_numel: usize, el_to_sum_per_block: usize, num_dims: usize, info: ConstPtr[usize],
                src: ConstPtr[T], dst: Ptr[O], *, T, O, A, K, ident):
    """Contiguous rows of up to WAVE_ROWS elements go one per wave (``wave_rows``) when the block has
    several waves; longer rows take the block: pk.parallel_range with u32 indices (a 16-byte tile per
    thread and step on GPUs, vector loads when the row is aligned), then one block reduction. Other
    layouts go through strided_index in a separate loop.
    min_blocks_per_sm=2 (32 registers): two blocks of 1024 threads per SM, one reading while the
    other waits at its barriers."""
    sv = pk.shared.array(MAX_WAVES, A)
    si = pk.shared.array(MAX_WAVES, u32)
    touch_v = sv[0]  # noqa: F841  (workaround: first use at function level, see the tests' notes)
    touch_i = si[0]  # noqa: F841
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    lane = t % pk.wave_size
    if 0 < el_to_sum_per_block <= WAVE_ROWS and nt % pk.wave_size == 0 and nt > pk.wave_size \
            and rows_contiguous(el_to_sum_per_block, num_dims, info):
        wave_rows(src_numel, el_to_sum_per_block, src, dst, t, nt, lane, A(ident), K)
        return
    row = pk.u64(pk.block_idx.x)
    start = row * el_to_sum_per_block
    n = min(start + el_to_sum_per_block, src_numel) - min(start, src_numel)
    base = row_offset(row, el_to_sum_per_block, num_dims, info)
    fast = base != ~pk.u64(0) and n < pk.u64(0x7FFFF000)
    if K <= MAX:
        acc: A = ident
        first: A = 0  # candle-cpu: a NaN first element is never replaced (min/max)
        if fast:
            p = src + base
            for j in pk.parallel_range(pk.u32(0), pk.u32(n), t, nt):
                acc = combine(acc, A(p[j]), K)
            if K != SUM and t == 0 and n > 0:
                first = A(p[0])
        else:
            k = pk.u64(t)
            while k < n:
                x = A(src[strided_index(start + k, num_dims, info, info + num_dims)])
                if K != SUM and k == 0:
                    first = x
                acc = combine(acc, x, K)
                k += pk.u64(nt)
        acc = block_reduce(acc, sv + 0, t, nt, ident, K)
        if t == 0:
            if first != first:
                acc = first
            dst[pk.block_idx.x] = O(acc)
    else:
        want_min = K == MIN or K == ARGMIN
        f0: A = 0
        if t == 0 and n > 0:  # candle-cpu: a NaN first element is never replaced
            f0 = A(src[base] if fast else src[strided_index(start, num_dims, info, info + num_dims)])
        last: u32 = 0
        if K >= ARGMIN and info is not None and num_dims > 0:
            last = pk.u32(info[num_dims - 1])
        b0: A = ident
        i0: u32 = 0xFFFFFFFF
        if fast:
            p = src + base
            for j in pk.parallel_range(pk.u32(0), pk.u32(n), t, nt):
                x = A(p[j])
                if better(want_min, x, j, b0, i0):
                    b0 = x
                    i0 = j
        else:
            k = pk.u64(t)
            while k < n:
                x = A(src[strided_index(start + k, num_dims, info, info + num_dims)])
                if better(want_min, x, pk.u32(k), b0, i0):
                    b0 = x
                    i0 = pk.u32(k)
                k += pk.u64(nt)
        # the block's best: within each wave, then (nt > wave) the waves' bests within every wave
        count = min(nt - (t - lane), pk.u32(pk.wave_size))
        for level in range(2):
            if level == 1:
                if nt <= pk.wave_size:
                    break
                if lane == 0:
                    sv[t // pk.wave_size] = b0
                    si[t // pk.wave_size] = i0
                pk.syncthreads()
                count = (nt + pk.wave_size - 1) // pk.wave_size
                if lane < count:
                    b0 = sv[lane]
                    i0 = si[lane]
            sh: u32 = pk.wave_size // 2
            while sh > 0:
                o = pk.wave.shuffle_xor(b0, sh)
                oi = pk.wave.shuffle_xor(i0, sh)
                if (lane ^ sh) < count and better(want_min, o, oi, b0, i0):
                    b0 = o
                    i0 = oi
                sh = sh // 2
        if t == 0:
            if f0 != f0:
                b0 = f0
                i0 = 0
            if K >= ARGMIN:
                dst[pk.block_idx.x] = O(i0 % last if last != 0 else i0)
            else:
                dst[pk.block_idx.x] = O(b0)


#: the 64-bit types keep the default register budget (at 32 registers their loops would spill)
_fast_reduce_wide = pk.kernel(fast_reduce.__wrapped__)
for _t in FAST_DTYPES:
    for _op, _name in ((SUM, "fast_sum"), (MIN, "fast_min"), (MAX, "fast_max"), (ARGMIN, "fast_argmin"),
                       (ARGMAX, "fast_argmax")):
        _kern = _fast_reduce_wide if _t.nbytes == 8 else fast_reduce
        REDUCE.add(_kern.instance(kernel_name(_name, _t), T=_t, O=u32 if _op >= ARGMIN else _t, A=_acc(_t), K=_op,
                                  ident=_identity(_acc(_t) if _op != SUM else _t, _op)))


# ---------------------------------------------------------------------------------------------------
# sum_dt: atomic sum into a pre-zeroed out (not launched by candle)
# ---------------------------------------------------------------------------------------------------
@pk.kernel
def sum_atomic(numel: usize, num_dims: usize, num_sum_dims: usize, info: ConstPtr[usize], inp: ConstPtr[T],
               out: Ptr[O], *, T, O):
    dims = info
    strides = info + num_dims
    sum_lens = info + 2 * num_dims
    sum_strides = info + 2 * num_dims + num_sum_dims
    contig = is_contiguous(num_dims, dims, strides)
    for i in pk.grid_stride(numel):
        dst_index = i
        for nd in range(pk.u64(0), num_sum_dims):
            stride = sum_strides[nd]
            pre = dst_index // stride
            post = dst_index % stride
            dst_index = (pre // sum_lens[nd]) * stride + post
        x = inp[i if contig else strided_index(i, num_dims, dims, strides)]
        if T is f16 or T is bf16:
            # no 16-bit atomics: a CAS loop on the aligned 32-bit word holding the element
            word = dst_index // 2
            shift = pk.u32((dst_index % 2) * 16)
            old = out[word]
            done = False
            while not done:
                cur = T(f32(pk.bitcast(pk.u16(old >> shift), T)) + f32(x))
                new = (old & ~(pk.u32(0xFFFF) << shift)) | (pk.u32(pk.bitcast(cur, u16)) << shift)
                seen = pk.atomic.cas(out, word, old, new)
                done = seen == old
                old = seen
        else:
            pk.atomic.add(out, dst_index, x)


for _t in SUM_DTYPES:
    REDUCE.add(sum_atomic.instance(kernel_name("sum", _t), T=_t, O=u32 if _t in (f16, bf16) else _t))


# ---------------------------------------------------------------------------------------------------
# rows in registers: softmax and the norms read a row that fits in its threads' registers once
# ---------------------------------------------------------------------------------------------------
#: bytes of a row each thread keeps in registers, by element size (each kernel's choice, within its
#: register budget); ROW_WORD: what one load reads (16-bit elements four at a time: a warp then reads
#: 256 bytes a load). softmax keeps 32 elements a thread (f64: 8), a row of 1024 in candle's (1, 32, 1):
#: H100, candle's launch f32 / bf16 1024 0.74 / 1.05 -> 0.99 / 1.24x torch (bf16 512, half a cache,
#: 1.17 -> 1.06); the wrappers' rows then fit fewer lanes (f32 16384 0.98 -> 1.14, bf16 4096 / 16384
#: 1.93 / 1.06 -> 2.26 / 1.33)
SOFTMAX_CACHE = {2: 64, 4: 128, 8: 64}
NORM_CACHE = {2: 16, 4: 64, 8: 64}  # 16-bit norms: 32 registers (two blocks of 1024 an SM)
#: threads a block in the wrappers' norm launches: rows of few threads share a block (along y)
NORM_BLOCK_THREADS = 256
ROW_WORD = {2: u64, 4: f32, 8: f64}
#: a ROW_WORD of -inf elements: what softmax reads past a row's end (it changes neither max nor sum)
NEG_INF_WORD = {bf16: 0xFF80FF80FF80FF80, f16: 0xFC00FC00FC00FC00, f32: -INF, f64: -INF}


@pk.func
def row_total(v: V, sm: S, t: u32, nt: u32, by_wave: bool, op: i32) -> V:
    """``merge`` of ``v`` over the row's threads, on each of them: a wave (no barrier), or the block,
    through slots of ``sm`` that the caller does not use again (one barrier, not two)."""
    if by_wave or nt <= pk.wave_size:
        return block_sum_whole(v, sm, t % pk.wave_size, min(nt, pk.u32(pk.wave_size)), op, False)
    return block_sum_whole(v, sm, t, nt, op, False)


@pk.func
def row_fits(x: ConstPtr[T], y: Ptr[T], n: u32, nt: u32, *, cache) -> bool:
    """Does the row fit in its ``nt`` threads' registers (``cache`` bytes each)? Rows of words of
    several elements also need a length and pointers that words divide; others take two passes."""
    W = ROW_WORD[T.nbytes]
    fits = n <= pk.u32(cache // T.nbytes) * nt
    if W.nbytes > T.nbytes:
        return fits and n % (W.nbytes // T.nbytes) == 0 and pk.is_aligned(x, W.nbytes) and pk.is_aligned(y, W.nbytes)
    return fits


@pk.func
def cache_load(x: ConstPtr[T], v: Ptr[W], n: u32, t: u32, nt: u32, pad: W, *, cache, full):
    """The thread's words of the row: word w holds elements ``(w * nt + t) * K + k``, k < K, for K
    elements a word; ``pad`` past the row's end (``full``: the row fills every word, no guards)."""
    xw = pk.bitcast(x, ConstPtr[W])
    for w in pk.static_range(cache // W.nbytes):
        p = w * nt + t
        v[w] = xw[p] if full or p * (W.nbytes // T.nbytes) < n else pad


@pk.func
def word_element(x: ConstPtr[T], word: W, k: u32, like: V) -> V:
    """Element ``k`` (a constant once inlined) of a cached word, in the accumulation type (``like``'s).
    16-bit elements come out of the word's 32-bit halves: a bf16 becomes an f32 by one shift or mask
    (the 16-bit kernels are bound by instructions issued, not by memory)."""
    if W.nbytes > T.nbytes:
        half = u32(word >> W((k // 2) * 32))
        if T is bf16:
            return V(pk.bitcast(pk.select(k % 2 == 0, half << 16, half & 0xFFFF0000), f32))
        else:
            return V(pk.bitcast(u16(half >> ((k % 2) * 16)), T))
    else:
        return V(pk.bitcast(word, T))


@pk.func
def store_word(y: Ptr[T], o: Ptr[V], p: u32, n: u32, like: W, *, full):
    """Word ``p`` of the row from ``o`` (its elements rounded to T and packed)."""
    if full or p * (W.nbytes // T.nbytes) < n:
        if W.nbytes > T.nbytes:  # pairs in 32-bit halves (one cvt.rn.bf16x2.f32 a pair on NVIDIA)
            word = W(0)
            for k in pk.static_range(0, W.nbytes // T.nbytes, 2):
                pair = u32(pk.bitcast(T(o[k]), u16)) | (u32(pk.bitcast(T(o[k + 1]), u16)) << 16)
                word = word | (W(pair) << (k * 16))
            pk.bitcast(y, Ptr[W])[p] = word
        else:
            y[p] = T(o[0])


@pk.func
def words_max(x: ConstPtr[T], v: Ptr[W], m: V, *, cache) -> V:
    """The max of ``m`` and the elements of a thread's ``cache`` bytes of words (``cache_load``'s)."""
    for w in pk.static_range(cache // W.nbytes):
        for k in pk.static_range(W.nbytes // T.nbytes):
            m = pk.fmax(m, word_element(x, v[w], k, m))
    return m


@pk.func
def words_exp_sum(x: ConstPtr[T], v: Ptr[W], m: V, *, cache) -> V:
    """The sum of e**(x - m) over a thread's ``cache`` bytes of words."""
    s = V(0)
    for w in pk.static_range(cache // W.nbytes):
        for k in pk.static_range(W.nbytes // T.nbytes):
            s += exp_diff(word_element(x, v[w], k, m), m)
    return s


@pk.func
def store_softmax_words(x: ConstPtr[T], y: Ptr[T], v: Ptr[W], m: V, inv: V, n: u32, t: u32, nt: u32, *, cache, full):
    """softmax's output for a thread's ``cache`` bytes of words, e**(x - m) * inv, where they came from."""
    o = pk.local.array(4, V)
    for w in pk.static_range(cache // W.nbytes):
        for k in pk.static_range(W.nbytes // T.nbytes):
            o[k] = exp_diff(word_element(x, v[w], k, m), m) * inv
        store_word(y, o, w * nt + t, n, v[w], full=full)


# ---------------------------------------------------------------------------------------------------
# softmax over the last dim: row = block_idx.x * block_dim.x + thread_idx.x, lanes along y
# ---------------------------------------------------------------------------------------------------
@pk.func
def softmax_row_cached(x: ConstPtr[T], y: Ptr[T], n: u32, sm: Ptr[V], t: u32, nt: u32, *, cache):
    """softmax of a row that fits in its threads' registers (``row_fits``), read once: the max, the
    sum of e**(x - max), the output. Past the row's end the words hold -inf, which changes neither
    the max nor the sum, so only the loads and stores are guarded (H100, the wrappers' rows against
    guarding each element: f32 4096 1.18 -> 1.24x torch, bf16 1024 / 4096 1.06 / 1.84 -> 1.20 / 1.94)."""
    W = ROW_WORD[T.nbytes]
    v = pk.local.array(cache // W.nbytes, W)
    cache_load(x, v, n, t, nt, W(NEG_INF_WORD[T]), cache=cache, full=False)
    m = row_total(words_max(x, v, V(_LOWEST[V]), cache=cache), sm, t, nt, False, MAX)
    inv = 1.0 / row_total(words_exp_sum(x, v, m, cache=cache), sm + MAX_WAVES, t, nt, False, SUM)
    store_softmax_words(x, y, v, m, inv, n, t, nt, cache=cache, full=False)


@pk.func
def word_pair(xw: ConstPtr[u64], wv: Ptr[u64], first: usize, second: usize, has_second: bool, pad: u64):
    """Words ``first`` and ``second`` of a row of 8-byte words into ``wv``; ``pad`` for a second word
    that is not in the row."""
    wv[0] = xw[first]
    wv[1] = xw[second] if has_second else pad


@pk.func
def hold_words(x: ConstPtr[T], hv: Ptr[W], ms: Ptr[V], n: u32, t: u32, nt: u32, *, cache):
    """The row's first ``cache`` bytes a lane (all there) into ``hv``, and their (max, sum of exp)."""
    cache_load(x, hv, n, t, nt, W(0), cache=cache, full=True)
    ms[0] = words_max(x, hv, V(_LOWEST[V]), cache=cache)
    ms[1] = words_exp_sum(x, hv, ms[0], cache=cache)


@pk.func
def online_softmax_step(ms: Ptr[V], chunk: Ptr[V], *, count):
    """``count`` more elements into a running (max, sum of e**(x - max)) pair; the sum is rescaled
    when the max grows."""
    cm = ms[0]
    for k in pk.static_range(count):
        cm = pk.fmax(cm, chunk[k])
    if cm > ms[0]:  # NaN-skipping max, as f32::max
        ms[1] = ms[1] * exp_diff(ms[0], cm)
        ms[0] = cm
    part = V(0)
    for k in pk.static_range(count):
        part += exp_diff(chunk[k], ms[0])
    ms[1] += part


#: softmax rows go through registers in blocks of at most this many lanes: a block of 1024 (one an SM
#: at 64 registers) waits at its barriers with nothing in flight (H100, 16384 f32: 0.81x torch against
#: 1.02x for two passes)
SOFTMAX_CACHED_LANES = 512
#: candle launches softmax with one warp a row, block (1, 32, 1) (candle_kernels.md 9.3, "must be
#: 32"); every other block takes the wrappers' ``softmax_rows_*``
SOFTMAX_CANDLE_BLOCK = (1, 32, 1)
#: candle's kernels built for that block alone (max_block_size 32), so that a lane may take more than
#: 64 registers: candle's softmax_f32 holds 256 bytes of a long row a lane in 128 registers, 16 warps
#: an SM instead of 32 (below)
SOFTMAX_WARP_DTYPES = (f32,)
#: bytes of a long row's start that a lane holds in registers through both passes (candle's kernels;
#: the wrappers' ``softmax_rows_*`` hold SOFTMAX_CACHE / 2 of f32/f64 rows and none of 16-bit ones)
SOFTMAX_HELD = {2: 32, 4: 256, 8: 32}
#: elements a lane has in flight in the passes over the rest of a row (f32/f64, and 16-bit rows not
#: of whole words)
SOFTMAX_CHUNK = {2: 8, 4: 16, 8: 8}
# A row too long for the registers keeps its start there through both passes: read once instead of
# twice. H100, candle's (1, 32, 1), SOFTMAX_CACHE / 2 bytes a lane, f32 2048 / 4096 / 8192 / 16384
# columns 0.68 / 0.82 / 1.03 / 0.75 -> 0.74 / 0.86 / 1.08 / 0.78x torch; bf16 2048 / 4096 1.27 / 1.41
# -> 1.50 / 1.49. All of the cache (f32 0.82 / 0.90 / 1.07 / 0.77) spilled at 64 registers. With half,
# the 16-bit kernels spill 24 bytes and the wrappers' bf16 rows lost 0.03-0.10 (4096 2.27 -> 2.17): the
# wrappers' own launches take ``softmax_rows_*``, which hold no 16-bit row. candle's f32 kernel, built
# for one warp, holds 256 bytes a lane (a row of 2048; 128 for rows of 1025-2047) and has 16 f32 a lane
# in flight over the rest: H200, candle's launch, f32 1024 / 1536 / 2048 / 3072 / 4096 / 6000 / 8192 /
# 16384 columns 1.01 / 0.98 / 0.98 / 1.49 / 1.25 / 1.04 / 1.48 / 0.83 -> 1.04 / 1.01 / 1.06 / 1.78 /
# 1.51 / 1.00 / 1.66 / 0.86x torch. Without the 16 in flight (8): 1536 0.93, 8192 1.44, 16384 0.76;
# 32 in flight: 1536 0.38; 192 bytes held: 4096 1.48. Built for one warp, the 16-bit and f64 kernels
# take 71 registers and lose (bf16 16384 1.02 -> 0.95); 16 in flight make f64 spill (4096 1.06 -> 0.92).


@pk.kernel
def softmax_kernel(src: ConstPtr[T], dst: Ptr[T], n_cols: i32, *, T, A, HELD):
    """One pass for the row's max and sum of exp (online: the sum is rescaled when the max grows),
    one for the output, each with eight elements per lane in flight (16-bit rows in two 8-byte words:
    H100, bf16 16384 columns 1.02 -> 1.05x torch, 0.78 -> 0.82 under candle's launch). The first pass
    walks down the row and the output pass up, so the output pass first meets what the L2 likeliest
    still holds (candle's launch, H100: f32 2048 / 4096 / 8192 0.74 / 0.86 / 1.05 -> 0.78 / 0.89 /
    1.08x torch, bf16 4096 / 8192 1.50 / 1.75 -> 1.67 / 1.85; H200: f32 4096 1.12 -> 1.20, bf16 4096 /
    8192 1.89 / 2.08 -> 2.05 / 2.19). Elements of f32/f64 rows (and 16-bit ones not in whole words)
    tell the L2 to keep them for the output pass, which lets them and its output go first. The row's
    first ``HELD`` bytes a lane stay in registers for both (f32/f64 rows, 16-bit rows of whole words).
    Any block (1, n, 1) with n <= 1024 works, up to the kernel's max_block_size (candle's one warp for
    SOFTMAX_WARP_DTYPES)."""
    sm = pk.shared.array(2 * MAX_WAVES, A)  # two planes: (max, sum) pairs, or the cached row's totals
    touch = sm[0]  # noqa: F841
    t = pk.thread_idx.y
    nt = pk.block_dim.y
    lane = t % pk.wave_size
    row = pk.u64(pk.block_idx.x) * pk.u64(pk.block_dim.x) + pk.u64(pk.thread_idx.x)
    n = pk.u64(n_cols)
    x = src + row * n
    y = dst + row * n
    step = pk.u64(nt)
    if nt <= SOFTMAX_CACHED_LANES and row_fits(x, y, pk.u32(n_cols), nt, cache=SOFTMAX_CACHE[T.nbytes]):
        softmax_row_cached(x, y, pk.u32(n_cols), sm + 0, t, nt, cache=SOFTMAX_CACHE[T.nbytes])
        return
    ms = pk.local.array(2, A)  # the lane's running (max, sum of e**(x - max))
    ms[0] = _LOWEST[A]
    ms[1] = 0.0
    c = pk.u64(t)
    chunk = pk.local.array(SOFTMAX_CHUNK[T.nbytes], A)
    # 16-bit rows of whole 8-byte words: a chunk is two words, c and c + step (a warp's loads adjacent),
    # the second -inf past the row's end (it adds nothing); other rows: eight elements c + k * step
    words = T.nbytes == 2 and n % 4 == 0 and pk.is_aligned(x, 8) and pk.is_aligned(y, 8)
    xw = pk.bitcast(x, ConstPtr[u64])
    nw = n // 4
    wv = pk.local.array(2, u64)
    # the row's first HELD bytes a lane (half of them for a shorter row, where HALF) stay in
    # registers for both passes
    HW = ROW_WORD[T.nbytes]
    HALF = HELD > SOFTMAX_CACHE[T.nbytes] // 2
    held = pk.u64(HELD // HW.nbytes) * step  # in words
    can_hold = HELD > 0 and (HW.nbytes == T.nbytes or words)
    hold = can_hold and n >= held * (HW.nbytes // T.nbytes)
    half = HALF and can_hold and not hold and n >= held // 2 * (HW.nbytes // T.nbytes)
    hv = pk.local.array(max(1, HELD // HW.nbytes), HW)
    if hold:
        hold_words(x, hv, ms, pk.u32(n), t, nt, cache=HELD)
        c = c + held
    if HALF and half:
        hold_words(x, hv, ms, pk.u32(n), t, nt, cache=HELD // 2)
        c = c + held // 2
    pad = pk.u64(NEG_INF_WORD[T] if T.nbytes == 2 else 0)
    # this pass walks the rest of the row from its end down (index top - c), so that the output pass,
    # going up, first meets what this one read last: the part the L2 likeliest still holds
    top = (nw if words else n) - 1 + (c - pk.u64(t))
    while T.nbytes == 2 and words and c < nw:
        word_pair(xw, wv, top - c, top - c - step, c + step < nw, pad)
        for k in pk.static_range(8):
            chunk[k] = word_element(x, wv[k // 4], k % 4, ms[0])
        online_softmax_step(ms, chunk, count=8)
        c += 2 * step
    while c + (SOFTMAX_CHUNK[T.nbytes] - 1) * step < n and not words:
        for k in pk.static_range(SOFTMAX_CHUNK[T.nbytes]):
            chunk[k] = A(pk.load(x, top - (c + k * step), eviction="evict_last"))  # read again below
        online_softmax_step(ms, chunk, count=SOFTMAX_CHUNK[T.nbytes])
        c += SOFTMAX_CHUNK[T.nbytes] * step
    m = ms[0]
    s = ms[1]
    while c < n and not words:
        v = A(pk.load(x, top - c, eviction="evict_last"))
        if v > m:
            s = s * exp_diff(m, v)
            m = v
        s += exp_diff(v, m)
        c += step
    # merge the lanes' pairs: within the wave, then (nt > wave) the waves' pairs within every wave
    count = min(nt - (t - lane), pk.u32(pk.wave_size))
    for level in range(2):
        if level == 1:
            if nt <= pk.wave_size:
                break
            if lane == 0:
                sm[t // pk.wave_size] = m
                sm[MAX_WAVES + t // pk.wave_size] = s
            pk.syncthreads()
            count = (nt + pk.wave_size - 1) // pk.wave_size
            if lane < count:
                m = sm[lane]
                s = sm[MAX_WAVES + lane]
        off: u32 = pk.wave_size // 2
        while off > 0:
            om = pk.wave.shuffle_xor(m, off)
            os = pk.wave.shuffle_xor(s, off)
            if (lane ^ off) < count:
                nm = pk.fmax(m, om)
                s = s * exp_diff(m, nm) + os * exp_diff(om, nm)
                m = nm
            off = off // 2
    m = pk.wave.shuffle(m, 0)
    inv = 1.0 / pk.wave.shuffle(s, 0)
    c = pk.u64(t)
    if hold:
        store_softmax_words(x, y, hv, m, inv, pk.u32(n), t, nt, cache=HELD, full=True)
        c = c + held
    if HALF and half:
        store_softmax_words(x, y, hv, m, inv, pk.u32(n), t, nt, cache=HELD // 2, full=True)
        c = c + held // 2
    if T.nbytes == 2 and words:
        o = pk.local.array(4, A)
        while c < nw:
            word_pair(xw, wv, c, c + step, c + step < nw, pad)
            for h in pk.static_range(2):
                for k in pk.static_range(4):
                    o[k] = exp_diff(word_element(x, wv[h], k, m), m) * inv
                store_word(y, o, pk.u32(c + h * step), pk.u32(n), wv[h], full=False)
            c += 2 * step
        return
    while c + (SOFTMAX_CHUNK[T.nbytes] - 1) * step < n:  # the row's last read, and its output: neither is read again
        for k in pk.static_range(SOFTMAX_CHUNK[T.nbytes]):
            chunk[k] = A(pk.load(x, c + k * step, eviction="evict_first"))
        for k in pk.static_range(SOFTMAX_CHUNK[T.nbytes]):
            pk.store(y, c + k * step, T(exp_diff(chunk[k], m) * inv), eviction="evict_first")
        c += SOFTMAX_CHUNK[T.nbytes] * step
    while c < n:
        pk.store(y, c, T(exp_diff(A(pk.load(x, c, eviction="evict_first")), m) * inv), eviction="evict_first")
        c += step


_softmax_warp = pk.kernel(max_block_size=SOFTMAX_CANDLE_BLOCK[1])(softmax_kernel.__wrapped__)
for _t in NN_DTYPES:
    _kern = _softmax_warp if _t in SOFTMAX_WARP_DTYPES else softmax_kernel
    REDUCE.add(_kern.instance(kernel_name("softmax", _t), T=_t, A=_acc(_t), HELD=SOFTMAX_HELD[_t.nbytes]))
    REDUCE.add(softmax_kernel.instance(kernel_name("softmax_rows", _t), T=_t, A=_acc(_t),
                                       HELD=SOFTMAX_CACHE[_t.nbytes] // 2 if _t.nbytes >= 4 else 0))


# ---------------------------------------------------------------------------------------------------
# rmsnorm / layernorm: one row per block (row = block_idx.x * block_dim.y + thread_idx.y)
# ---------------------------------------------------------------------------------------------------
@pk.func
def param_word(p: ConstPtr[T], i: u32, wide: bool, like: W) -> W:
    """Word ``i`` of a row-long parameter (alpha, beta) as ``cache_load`` lays out the row: one load
    when ``wide`` (p aligned to a word), else element by element."""
    word = W(0)
    if W.nbytes == T.nbytes:
        word = W(p[i])
    elif wide:
        word = pk.bitcast(p, ConstPtr[W])[i]
    else:
        for k in pk.static_range(W.nbytes // T.nbytes):
            word = word | (W(pk.bitcast(p[i * (W.nbytes // T.nbytes) + k], u16)) << (k * 16))
    return word


@pk.func
def layernorm_stats(x: ConstPtr[T], e: Ptr[V], n: u32, sm: S, t: u32, nt: u32, out: Ptr[V], *, cache, full):
    """An f32/f64 cached row's mean and sum of squared deviations (``out``) over a block of whole waves
    in one barrier, not two: each wave's count, sum and squared deviations about its own mean, then
    Chan's merge of the waves' triples, M2 = sum(M2_w + c_w * (mean_w - mean)**2) (no cancellation).
    Element i of ``e`` is the row's element i * nt + t (one element a word)."""
    zero = V(0)
    s = zero
    c = zero
    for i in pk.static_range(cache // T.nbytes):
        s += e[i]  # elements past the row's end are 0 (cache_load's padding)
        c += V(1) if full else pk.select(i * nt + t < n, V(1), zero)
    s = wave_sum_full(s, SUM)
    c = wave_sum_full(c, SUM)
    mean_w = s / max(c, V(1))
    m2 = zero
    for i in pk.static_range(cache // T.nbytes):
        d = e[i] - mean_w
        m2 += d * d if full else pk.select(i * nt + t < n, d * d, zero)
    m2 = wave_sum_full(m2, SUM)
    lane = t % pk.wave_size
    if lane == 0:
        sm[t // pk.wave_size] = s
        sm[MAX_WAVES + t // pk.wave_size] = c
        sm[2 * MAX_WAVES + t // pk.wave_size] = m2
    pk.syncthreads()
    sw = zero
    cw = zero
    mw = zero
    if lane < nt // pk.wave_size:
        sw = sm[lane]
        cw = sm[MAX_WAVES + lane]
        mw = sm[2 * MAX_WAVES + lane]
    mean = wave_sum_full(sw, SUM) / V(n)
    d = sw / max(cw, V(1)) - mean
    out[0] = mean
    out[1] = wave_sum_full(pk.fma(cw * d, d, mw), SUM)


@pk.func
def norm_row_cached(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, ln: bool,
                    sm: S, t: u32, nt: u32, by_wave: bool, *, cache, full):
    """norm_row for a row that fits in its threads' registers (``row_fits``), read once and unpacked
    once (``e``); alpha and beta are read a word at a time too when they are aligned to one. These
    kernels are bound by instructions issued (H100 profile: 16-bit rows at ~75% issue use), so the
    guards go a word at a time and 16-bit rows' updates are fused multiply-adds. The guard (``full or
    word * K < n``) is written out where it is used: one shared function for it changed the f32
    kernels' PTX and measured slower (H100, candle's rmsnorm f32 1024 / 4096 0.79 / 1.43 -> 0.70 /
    1.35x torch)."""
    W = ROW_WORD[T.nbytes]
    v = pk.local.array(cache // W.nbytes, W)
    cache_load(x, v, n, t, nt, W(0), cache=cache, full=full)
    zero = V(0)
    e = pk.local.array(cache // T.nbytes, V)
    for w in pk.static_range(cache // W.nbytes):
        for k in pk.static_range(W.nbytes // T.nbytes):
            e[w * (W.nbytes // T.nbytes) + k] = word_element(x, v[w], k, zero)
    mean = zero
    q = zero
    stats = pk.local.array(2, V)
    if ln and T.nbytes >= 4 and not by_wave and nt > pk.wave_size and nt % pk.wave_size == 0:
        layernorm_stats(x, e, n, sm, t, nt, stats, cache=cache, full=full)
        mean = stats[0]
        q = stats[1]
    else:
        if ln:
            s = zero
            for i in pk.static_range(cache // T.nbytes):
                s += e[i]
            mean = row_total(s, sm + MAX_WAVES, t, nt, by_wave, SUM) / V(n)
        for w in pk.static_range(cache // W.nbytes):
            part = zero
            for k in pk.static_range(W.nbytes // T.nbytes):
                d = e[w * (W.nbytes // T.nbytes) + k] - mean
                part = pk.fma(d, d, part) if W.nbytes > T.nbytes else d * d
            q += part if full else pk.select((w * nt + t) * (W.nbytes // T.nbytes) < n, part, zero)
        q = row_total(q, sm, t, nt, by_wave, SUM)
    r = 1.0 / pk.sqrt(q / V(n) + eps)
    wide = pk.is_aligned(alpha, W.nbytes) and (not ln or pk.is_aligned(beta, W.nbytes))
    o = pk.local.array(4, V)
    for w in pk.static_range(cache // W.nbytes):
        p = w * nt + t
        for k in pk.static_range(W.nbytes // T.nbytes):
            o[k] = (e[w * (W.nbytes // T.nbytes) + k] - mean) * r
        if W.nbytes == T.nbytes:  # f32/f64: separate products and sums (measured faster there)
            if alpha is not None and (full or p < n):
                o[0] = o[0] * V(alpha[p])
            if ln and beta is not None and (full or p < n):
                o[0] = o[0] + V(beta[p])
        elif full or p * (W.nbytes // T.nbytes) < n:
            if alpha is not None and ln and beta is not None:
                a = param_word(alpha, p, wide, v[w])
                b = param_word(beta, p, wide, v[w])
                for k in pk.static_range(W.nbytes // T.nbytes):
                    o[k] = pk.fma(o[k], word_element(x, a, k, q), word_element(x, b, k, q))
            elif alpha is not None:
                a = param_word(alpha, p, wide, v[w])
                for k in pk.static_range(W.nbytes // T.nbytes):
                    o[k] = o[k] * word_element(x, a, k, q)
            elif ln and beta is not None:
                b = param_word(beta, p, wide, v[w])
                for k in pk.static_range(W.nbytes // T.nbytes):
                    o[k] = o[k] + word_element(x, b, k, q)
        store_word(y, o, p, n, v[w], full=full)


@pk.func
def norm_row(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, ln: bool,
             sm: S, t: u32, nt: u32, by_wave: bool, *, cache, unguarded, held):
    """One row of rmsnorm (ln false) or layernorm (ln true), shared by ``nt`` threads (``t`` this
    one's index): the block's x threads (candle passes block_size == block_dim.x: 32 or 1024), or one
    wave (``by_wave``: wave sums, no barrier). pk.parallel_range gives each thread adjacent elements
    per step, vector loads and stores when the row is aligned. Each pass reads the row again (from
    L1: the row was just read). layernorm: the mean, then the mean squared deviation (the biased
    variance, without the cancellation of candle's one-pass E[x^2] - mean^2). Rows that fit in the
    threads' registers take ``norm_row_cached``; with ``unguarded``, a second copy of it without the
    row-end guards takes the rows that fill every thread's words (H100, the wrappers' bf16 rows of
    1024 / 4096: rmsnorm 0.99 / 1.30 -> 1.02 / 1.34x torch, layernorm 1.28 / 1.08 -> 1.35 / 1.12). Only
    the 16-bit ``*_rows`` kernels have it: for f32 the copy spills (layernorm 4096 1.48 -> 1.38), and the
    four copies add ~3 s to the module's ~18 s build for one target. With ``held`` (the f32/f64
    ``*_rows`` kernels), rows of up to twice what the threads hold take ``norm_row_held``."""
    if row_fits(x, y, n, nt, cache=cache):
        if unguarded and n == nt * pk.u32(cache // T.nbytes):  # a row that fills every word: no guards
            norm_row_cached(x, y, alpha, beta, n, eps, ln, sm, t, nt, by_wave, cache=cache, full=True)
        else:
            norm_row_cached(x, y, alpha, beta, n, eps, ln, sm, t, nt, by_wave, cache=cache, full=False)
        return
    if held and T.nbytes >= 4 and not by_wave and n <= 2 * pk.u32(cache // T.nbytes) * nt:
        norm_row_held(x, y, alpha, beta, n, eps, ln, sm, t, nt, cache=cache)
        return
    norm_row_passes(x, y, alpha, beta, n, eps, ln, sm, t, nt, by_wave, True)


@pk.func
def norm_row_held(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, ln: bool,
                  sm: S, t: u32, nt: u32, *, cache):
    """An f32/f64 row longer than its threads hold, up to twice that: the first ``cache`` bytes a
    thread stay in registers, the rest is read from memory in each pass (the f32/f64 ``*_rows_*``
    kernels and candle's rmsnorm_f32: ``HELD``). Rows of 8193-16384 f32 then take blocks of 512 threads, two an SM, where holding the
    whole row takes one block of 1024 an SM whose load, reduction and store do not overlap: H200,
    rmsnorm / layernorm f32 12000 1.16 / 1.03 -> 1.27 / 1.26x torch, 16384 1.24 / 1.21 -> 1.30 / 1.21.
    In candle's 64-register kernels the path cost their short rows (a spill in layernorm_f32; 1024
    columns 0.58 / 0.79 -> 0.52 / 0.69); candle's rmsnorm_f32 at 32 registers takes it for its rows of
    8193-16384 (NORM_TWO_BLOCKS)."""
    per = cache // T.nbytes
    h = pk.u32(per) * nt
    e = pk.local.array(cache // T.nbytes, V)
    for i in pk.static_range(cache // T.nbytes):
        e[i] = V(x[i * nt + t])
    zero = V(0)
    mean = zero
    if ln:
        s = zero
        for i in pk.static_range(cache // T.nbytes):
            s += e[i]
        for j in pk.parallel_range(h, n, t, nt):
            s += V(x[j])
        mean = row_total(s, sm + MAX_WAVES, t, nt, False, SUM) / V(n)
    q = zero
    for i in pk.static_range(cache // T.nbytes):
        d = e[i] - mean
        q += d * d
    for j in pk.parallel_range(h, n, t, nt, descending=True):
        d = V(x[j]) - mean
        q += d * d
    q = row_total(q, sm, t, nt, False, SUM)
    r = 1.0 / pk.sqrt(q / V(n) + eps)
    for i in pk.static_range(cache // T.nbytes):
        p = i * nt + t
        o = (e[i] - mean) * r
        if alpha is not None:
            o = o * V(alpha[p])
        if ln and beta is not None:
            o = o + V(beta[p])
        y[p] = T(o)
    store_norm(x, y, alpha, beta, h, n, mean, r, ln, t, nt, down=False)


@pk.func
def norm_row_passes(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, ln: bool,
                    sm: S, t: u32, nt: u32, by_wave: bool, store: bool):
    """``norm_row`` for a row read from memory in each pass; without ``store``, the statistics alone
    (every barrier, no output). The output pass walks down the row (``descending``), so it first
    meets what the pass before read last, in the L2 when a pass reads more than the L2 holds (H100 /
    H200, layernorm f32 under candle's 1024 threads at 1024 columns 0.75 / 0.70 -> 0.83 / 0.78x torch,
    the wrappers' bf16 at 4096 1.16 / 1.17 -> 1.21 / 1.20; rmsnorm moved by 0.03 or less)."""
    zero = V(0)
    mean = zero
    tq = zero
    if T.nbytes == 2 and ln:
        # 16-bit rows: the statistics in one pass over memory, not two. Each thread sums x, and d*d for
        # d = x - k, k an element of the row that differs from thread to thread; the row's sum, then
        # its sum of (x - mean)**2 = s2 + (k - mean) * (2 * (s1 - c * k) + c * (k - mean)) per thread,
        # are two scalar reductions. The cancellation there is ~c * eps of the row's M2 (c: a
        # thread's count), far below a 16-bit result's rounding; one shift for the whole row, in one
        # reduction of a pair, makes it ~n * eps with an outlier there (tens of f16 ulps at 17001
        # columns), and (count, mean, M2) triples merged in one reduction cost more (H100, a block's
        # bf16 row of 16384: 1.10 -> 0.99x torch)
        shift = V(x[min(t, n - 1)]) if n > 0 else zero
        count = pk.u32(0)  # an integer: a tile's increments fold into one add
        e1 = zero
        s2 = zero
        for j in pk.parallel_range(pk.u32(0), n, t, nt):
            d = V(x[j]) - shift
            count += 1
            e1 += d
            s2 = pk.fma(d, d, s2)
        c = V(count)
        mean = row_total(pk.fma(c, shift, e1), sm + MAX_WAVES, t, nt, by_wave, SUM) / V(n)
        dk = shift - mean
        tq = row_total(pk.fma(dk, pk.fma(c, dk, e1 + e1), s2), sm, t, nt, by_wave, SUM)
    else:
        if ln:
            s = zero
            for j in pk.parallel_range(pk.u32(0), n, t, nt):
                s += V(x[j])
            if by_wave:
                s = pk.wave.sum(s)
            else:
                s = block_sum(s, sm, t, nt)
            mean = s / V(n)
        q = zero
        for j in pk.parallel_range(pk.u32(0), n, t, nt):
            d = V(x[j])
            if ln:
                d = d - mean
            q = pk.fma(d, d, q) if T.nbytes == 2 else q + d * d
        # rmsnorm: block_sum_whole (measured faster); layernorm keeps block_sum (the other spills there)
        if by_wave:
            tq = pk.wave.sum(q)
        elif ln:
            tq = block_sum(q, sm, t, nt)
        else:
            tq = block_sum_whole(q, sm, t, nt, SUM, True)
    r = 1.0 / pk.sqrt(tq / V(n) + eps)
    if not store:
        return
    store_norm(x, y, alpha, beta, pk.u32(0), n, mean, r, ln, t, nt, down=True)


@pk.func
def store_norm(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], lo: u32, n: u32, mean: V, r: V,
               ln: bool, t: u32, nt: u32, *, down):
    """The output of elements [lo, n) of a row read from memory, (x - mean) * r * alpha + beta
    (rmsnorm: mean 0, no beta), each thread's part from the top down where ``down``."""
    if alpha is None:
        for j in pk.parallel_range(lo, n, t, nt, descending=down):
            o = V(x[j])
            if ln:
                o = o - mean
            y[j] = T(o * r)
    elif ln and beta is not None:
        for j in pk.parallel_range(lo, n, t, nt, descending=down):
            y[j] = T((V(x[j]) - mean) * r * V(alpha[j]) + V(beta[j]))
    else:
        for j in pk.parallel_range(lo, n, t, nt, descending=down):
            o = V(x[j])
            if ln:
                o = o - mean
            y[j] = T(o * r * V(alpha[j]))


#: rmsnorm/layernorm rows of at most this many elements a thread go one per wave when a block of several
#: waves has one row (candle's 1024 threads on rows of 1024+): a block-wide sum per element or two costs
#: more than the wave's three passes over its row (H200, rmsnorm f32 1024 cols 0.24 -> 0.51x torch)
WAVE_NORM_PER_THREAD = 4


@pk.func
def norm_by_wave(n_cols: i32) -> bool:
    """A block of whole waves on one short row (block_dim.y == 1): its waves take a row each instead
    (``spread_row``: grid_dim.x is the row count of such a launch)."""
    nt = pk.block_dim.x
    return pk.block_dim.y == 1 and nt % pk.wave_size == 0 and nt > pk.wave_size and \
        pk.u32(n_cols) <= nt * WAVE_NORM_PER_THREAD


#: the fewest threads of a group that takes a row in a block of one row (``row_group``): rows that do
#: not fill that many threads' registers (f32 under 4096, f64 under 2048) keep a wave's passes. H100,
#: candle's 1024 threads, rmsnorm / layernorm f32 4096 0.98 / 0.77 -> 1.38 / 1.26x torch, 8192 (512
#: threads) 1.14 / 0.81 -> 1.48 / 1.25, f64 2048 1.37 / 1.06 -> 1.92 / 1.71. Groups three-quarters
#: full (f32 3072) gained on the H100 (0.96 / 0.80 -> 1.19 / 0.91) but lost on an H200 (0.97 / 0.93 ->
#: 0.84 / 0.62); groups of 128 threads measured the same or slower (f32 2048, f64 1024) on the H100
GROUP_MIN_THREADS = 256


#: 16-bit rows longer than NARROW_GROUP_COLS that a wave would take (candle's 1024 threads, up to 4096
#: columns) go to groups of NARROW_GROUP_THREADS instead, in two passes. A wave's two passes over a row
#: of 4096 read it twice from DRAM (H100 profile: 252 MB read for 134 MB of rows): 64 rows an SM in
#: flight are more than the L2 holds between the passes, 16 are not. H100, candle's launch, bf16 4096:
#: rmsnorm / layernorm 0.99 / 0.95 -> 1.43 / 1.24x torch (groups of 64: 1.08 / 0.94, 256: 1.35 / 1.06,
#: 512 holding the row: 1.15 / 0.90). Rows of 2048 lose in groups (0.98 -> 0.86), and the branch costs
#: the short rows' launches a little (bf16 1024 0.70 / 1.02 -> 0.68 / 0.96). Longer 16-bit rows, up to
#: NARROW_LONG_COLS, go to groups of NARROW_LONG_GROUP_THREADS in a larger block (candle's 1024 threads
#: on a row of 8192 wait at their barriers with one block of 1024 an SM in step): H100, bf16 rmsnorm /
#: layernorm, 8192 1.11 / 0.83 -> 1.48 / 1.32x torch, 16384 1.45 / 1.23 -> 1.51 / 1.45; H200 8192 0.85
#: / 0.66 -> 1.33 / 1.16, 16384 1.22 / 1.05 -> 1.58 / 1.48, 32768 (a block's row) unchanged. The group
#: size is a constant in each of the two calls: one call with a shift that varies cost the groups of
#: 128 (H100, 4096 1.42 / 1.27 -> 1.30 / 1.05) and the 512 ones
NARROW_GROUP_THREADS = 128
NARROW_GROUP_COLS = 2048
NARROW_LONG_GROUP_THREADS = 512
NARROW_LONG_COLS = 16384


@pk.func
def row_group(x: ConstPtr[T], y: Ptr[T], n_cols: i32, *, cache) -> u32:
    """Threads that take a row each when a block of whole waves has one row (block_dim.y == 1) that
    fills the registers of GROUP_MIN_THREADS or more, but fewer than the block has: the wrappers'
    ``row_threads``, a power of two that divides the block (found by doubling: a closed form for 256
    or 512 measured slower, rmsnorm f32 4096 1.38 -> 1.15x torch); 0 otherwise. Every row of a launch
    is aligned like the first (``row_fits`` needs the length to divide into words), so the whole grid
    agrees."""
    nt = pk.block_dim.x
    n = pk.u32(n_cols)
    per = pk.u32(cache // T.nbytes)
    if pk.block_dim.y != 1 or nt % pk.wave_size != 0 or n < per * GROUP_MIN_THREADS:
        return pk.u32(0)
    g = pk.u32(GROUP_MIN_THREADS)
    while g * per < n:
        g = g * 2
    if g < nt and nt % g == 0 and row_fits(x, y, n, g, cache=cache):
        return g
    return pk.u32(0)


@pk.func
def narrow_groups(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n_cols: i32, eps: V, ln: bool,
                  sm: S, block: u32, *, group):
    """A block of whole waves on one 16-bit row (candle's launches) split into groups of ``group``
    threads, each taking a row (``spread_row``) in two passes over memory."""
    g = pk.u32(group)
    groups = pk.block_dim.x // g
    if spread_idle(groups, block):
        return
    k = pk.thread_idx.x // g
    r = spread_row(groups, k, block)
    rows = pk.u64(pk.grid_dim.x)
    off = min(r, rows - 1) * pk.u64(n_cols)
    # a group past the last row repeats the last row's statistics (the block's barriers) but stores
    # nothing: in place, its second pass could read what the row's own group has written
    norm_row_passes(src + off, dst + off, alpha, beta, pk.u32(n_cols), eps, ln, sm + k * (g // pk.wave_size),
                    pk.thread_idx.x % g, g, False, r < rows)


@pk.func
def norm_rows(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n_cols: i32, eps: V, ln: bool,
              sm: S, *, cache, own, held):
    """This thread's part of rmsnorm/layernorm: a wave per row (``norm_by_wave``) for rows that no
    group takes, ``row_group`` threads per row held in registers, or the block's x threads on row
    ``block_idx.x * block_dim.y + thread_idx.y``. Waves and groups take rows under candle's grid
    (``spread_row``). A group past the grid's last row repeats the block's last row: the same values
    written twice, and in place too, as a group reads its row before the barrier that comes before
    any group's stores. (A length of 0 for it instead costs more than it saves: the length no longer
    lives in a register the warp shares, and rmsnorm f32's waves at 1024 columns measured 0.83 ->
    0.72x torch.) A wave's short rows are told apart first: their idle blocks (31 of 32) are most of
    such a launch. ``own``: a kernel for the wrappers' own launches only (``norm_launch``: no groups,
    no waves): 16-bit rows that fill every word take an unguarded copy. ``held``: f32/f64 rows of up to
    twice what the threads hold take ``norm_row_held``. Rows of 2-byte elements
    have no ``row_group``: their kernels for candle's launches hold 8 a thread in 32 registers, and
    groups that hold the row measured slower there (rmsnorm / layernorm bf16 4096 columns 0.97 / 0.91
    -> 0.95 / 0.63); the rows of 2049-4096 that a wave would take go to groups of NARROW_GROUP_THREADS
    instead, and rows of up to NARROW_LONG_COLS that the block would take to NARROW_LONG_GROUP_THREADS,
    in two passes (``narrow_groups``)."""
    block = pk.block_idx.x  # one read, shared by every path
    by_wave = norm_by_wave(n_cols)
    if not own and T.nbytes >= 4:  # a wave's long rows go to groups (row_group always takes them)
        by_wave = by_wave and pk.u32(n_cols) < pk.u32(NORM_CACHE[T.nbytes] // T.nbytes * GROUP_MIN_THREADS)
    if not own and T.nbytes == 2 and pk.block_dim.y == 1 and pk.u32(n_cols) > NARROW_GROUP_COLS:
        if by_wave:
            narrow_groups(src, dst, alpha, beta, n_cols, eps, ln, sm, block, group=NARROW_GROUP_THREADS)
            return
        g = pk.u32(NARROW_LONG_GROUP_THREADS)
        if pk.u32(n_cols) <= NARROW_LONG_COLS and pk.block_dim.x > g and pk.block_dim.x % g == 0:
            narrow_groups(src, dst, alpha, beta, n_cols, eps, ln, sm, block, group=NARROW_LONG_GROUP_THREADS)
            return
    if by_wave:
        if spread_idle(pk.block_dim.x // pk.wave_size, block):
            return
        r = spread_row(pk.block_dim.x // pk.wave_size, pk.thread_idx.x // pk.wave_size, block)
        if r < pk.u64(pk.grid_dim.x):
            off = r * pk.u64(n_cols)
            norm_row(src + off, dst + off, alpha, beta, pk.u32(n_cols), eps, ln, sm,
                     pk.thread_idx.x % pk.wave_size, pk.u32(pk.wave_size), True, cache=cache,
                     unguarded=own and T.nbytes == 2, held=held)
        return
    if not own and T.nbytes >= 4:
        g = row_group(src, dst, n_cols, cache=cache)
        if g != 0:
            groups = pk.block_dim.x // g
            if spread_idle(groups, block):
                return
            rows = pk.u64(pk.grid_dim.x)
            k = pk.thread_idx.x // g
            off = min(spread_row(groups, k, block), rows - 1) * pk.u64(n_cols)
            norm_row_cached(src + off, dst + off, alpha, beta, pk.u32(n_cols), eps, ln, sm + k * (g // pk.wave_size),
                            pk.thread_idx.x % g, g, False, cache=cache, full=False)
            return
    row = (pk.u64(block) * pk.u64(pk.block_dim.y) + pk.u64(pk.thread_idx.y)) * pk.u64(n_cols)
    row_sm = sm + pk.thread_idx.y * ((pk.block_dim.x + pk.wave_size - 1) // pk.wave_size)  # its waves' slots
    norm_row(src + row, dst + row, alpha, beta, pk.u32(n_cols), eps, ln, row_sm, pk.thread_idx.x, pk.block_dim.x,
             False, cache=cache, unguarded=own and T.nbytes == 2, held=held)


@pk.kernel
def rmsnorm_kernel(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], n_cols: i32, block_size: i32, eps: f32,
                   *, T, A, CACHE, OWN, HELD):
    sm = pk.shared.array(2 * MAX_WAVES, A)  # two planes: one a row total
    touch = sm[0]  # noqa: F841
    norm_rows(src, dst, alpha, alpha, n_cols, A(eps), False, sm + 0, cache=CACHE, own=OWN, held=HELD)


@pk.kernel
def layernorm_kernel(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n_cols: i32,
                     block_size: i32, eps: f32, *, T, A, CACHE, OWN, HELD):
    sm = pk.shared.array(3 * MAX_WAVES, A)  # three planes: two row totals, or layernorm_stats' triples
    touch = sm[0]  # noqa: F841
    norm_rows(src, dst, alpha, beta, n_cols, A(eps), True, sm + 0, cache=CACHE, own=OWN, held=HELD)


# layernorm f32 and the f64 norms: the default register budget (64 at 1024 threads), where their cached
# rows live; the others (NORM_TWO_BLOCKS) keep two blocks of 1024 an SM for candle's launches.
# The wrappers' own norms (``*_rows_*``, not candle's names): 16-bit ones in blocks of at most 256
# threads, four an SM at 64 registers, holding rows of up to NORM_ROWS_CACHE bytes a thread; f32/f64
# ones at the default budget, holding half of rows of up to twice NORM_CACHE a thread (``norm_row_held``)
NORM_ROWS_CACHE = {2: 32, 4: NORM_CACHE[4], 8: NORM_CACHE[8]}
#: candle's kernels built for two blocks of 1024 an SM (32 registers), holding NORM_TWO_BLOCKS_CACHE bytes
#: a thread: the 16-bit ones, and rmsnorm_f32 (half of NORM_CACHE), which holds half of rows of up to
#: 16384 (``norm_row_held``).
#: Two blocks an SM let the idle blocks of candle's grid run beside a busy one: H200, candle's launch,
#: rmsnorm f32 1024 / 2048 / 3072 / 4096 / 8192 / 12000 / 16384 columns 0.59 / 0.99 / 1.00 / 1.09 / 1.25
#: / 1.14 / 1.23 -> 0.91 / 0.97 / 0.96 / 1.13 / 1.31 / 1.24 / 1.36x torch. layernorm_f32 spills 36 bytes
#: at 32 registers and lost there (2048 / 3072 / 8192 0.92 / 0.90 / 1.16 -> 0.74 / 0.66 / 1.08, though
#: 1024 gained 0.79 -> 1.19), so it keeps 64.
NORM_TWO_BLOCKS = {("rmsnorm", f32), ("rmsnorm", f16), ("rmsnorm", bf16), ("layernorm", f16), ("layernorm", bf16)}
NORM_TWO_BLOCKS_CACHE = {2: 16, 4: 32}
_rmsnorm_narrow = pk.kernel(min_blocks_per_sm=2)(rmsnorm_kernel.__wrapped__)
_layernorm_narrow = pk.kernel(min_blocks_per_sm=2)(layernorm_kernel.__wrapped__)
_rmsnorm_rows = pk.kernel(max_block_size=NORM_BLOCK_THREADS, min_blocks_per_sm=4)(rmsnorm_kernel.__wrapped__)
_layernorm_rows = pk.kernel(max_block_size=NORM_BLOCK_THREADS, min_blocks_per_sm=4)(layernorm_kernel.__wrapped__)
for _t in NN_DTYPES:
    _narrow = _t.nbytes == 2
    for _name, _kern, _kern_narrow, _kern_rows in (("rmsnorm", rmsnorm_kernel, _rmsnorm_narrow, _rmsnorm_rows),
                                                   ("layernorm", layernorm_kernel, _layernorm_narrow, _layernorm_rows)):
        _two = (_name, _t) in NORM_TWO_BLOCKS
        REDUCE.add((_kern_narrow if _two else _kern).instance(
            kernel_name(_name, _t), T=_t, A=_acc(_t), OWN=False, HELD=_two and not _narrow,
            CACHE=NORM_TWO_BLOCKS_CACHE[_t.nbytes] if _two else NORM_CACHE[_t.nbytes]))
        REDUCE.add((_kern_rows if _narrow else _kern).instance(kernel_name(_name + "_rows", _t), T=_t, A=_acc(_t),
                                                               CACHE=NORM_ROWS_CACHE[_t.nbytes], OWN=True,
                                                               HELD=not _narrow))


# ---------------------------------------------------------------------------------------------------
# rotary embeddings: one thread per rotated pair (1D/1024 over el/2); computed in f32 for halves
# ---------------------------------------------------------------------------------------------------
@pk.func
def cs_batch(p: usize, stride_b: u32, half_plane: usize) -> usize:
    """The cos/sin offset of pair ``p``'s batch when cos/sin are (b, t, d/2) (stride_b > 0)."""
    if stride_b > 0:
        return (2 * p // pk.u64(stride_b)) * half_plane
    return pk.u64(0)


@pk.kernel
def rope_i_kernel(src: ConstPtr[T], cos: ConstPtr[T], sin: ConstPtr[T], dst: Ptr[T], bh: u32, td: u32,
                  stride_b: u32, *, T, A):
    half = pk.u64(td) // 2
    for p in pk.grid_stride(pk.u64(bh) * half):
        cs = p % half + cs_batch(p, stride_b, half)
        c = A(cos[cs])
        s = A(sin[cs])
        x0 = A(src[2 * p])
        x1 = A(src[2 * p + 1])
        dst[2 * p] = T(x0 * c - x1 * s)
        dst[2 * p + 1] = T(x0 * s + x1 * c)


@pk.kernel
def rope_kernel(src: ConstPtr[T], cos: ConstPtr[T], sin: ConstPtr[T], dst: Ptr[T], bh: u32, td: u32, d: u32,
                stride_b: u32, *, T, A):
    half = pk.u64(td) // 2
    hd = pk.u64(d) // 2
    for p in pk.grid_stride(pk.u64(bh) * half):
        i_bh = p // half
        r = p % half
        ti = r // hd
        j = r % hd
        i1 = i_bh * pk.u64(td) + ti * pk.u64(d) + j
        i2 = i1 + hd
        cs = ti * hd + j + cs_batch(p, stride_b, half)
        c = A(cos[cs])
        s = A(sin[cs])
        x1 = A(src[i1])
        x2 = A(src[i2])
        dst[i1] = T(x1 * c - x2 * s)
        dst[i2] = T(x1 * s + x2 * c)


@pk.kernel
def rope_thd_kernel(src: ConstPtr[T], cos: ConstPtr[T], sin: ConstPtr[T], dst: Ptr[T], b: u32, t: u32, h: u32,
                    d: u32, stride_b: u32, *, T, A):
    hd = pk.u64(d) // 2
    for p in pk.grid_stride(pk.u64(b) * pk.u64(t) * pk.u64(h) * hd):
        bth = p // hd
        j = p % hd
        ti = (bth // pk.u64(h)) % pk.u64(t)
        i1 = bth * pk.u64(d) + j
        i2 = i1 + hd
        cs = ti * hd + j + cs_batch(p, stride_b, pk.u64(t) * hd)
        c = A(cos[cs])
        s = A(sin[cs])
        x1 = A(src[i1])
        x2 = A(src[i2])
        dst[i1] = T(x1 * c - x2 * s)
        dst[i2] = T(x1 * s + x2 * c)


for _t in NN_DTYPES:
    REDUCE.add(rope_i_kernel.instance(kernel_name("rope_i", _t), T=_t, A=_acc(_t)))
    REDUCE.add(rope_kernel.instance(kernel_name("rope", _t), T=_t, A=_acc(_t)))
    REDUCE.add(rope_thd_kernel.instance(kernel_name("rope_thd", _t), T=_t, A=_acc(_t)))


# ---------------------------------------------------------------------------------------------------
# host wrappers: info and launch shapes as candle-core (FastReduce) and candle-nn do
# ---------------------------------------------------------------------------------------------------
def _norm_dims(dims, ndim: int) -> list[int]:
    if dims is None:
        return list(range(ndim))
    dims = [dims] if isinstance(dims, int) else list(dims)
    out = []
    for d in dims:
        d = d + ndim if d < 0 else d
        if not 0 <= d < ndim:
            raise ValueError(f"dim {d} out of range for a tensor of rank {ndim}")
        if d in out:
            raise ValueError(f"dim {d} given twice")
        out.append(d)
    return out


def next_power_of_two(v: int) -> int:
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


#: the wrappers' block for rows that go one per wave, and for one long row per block (H100, rows of
#: 1024/4096/16384 f32: 1.01-1.11x torch against 0.29-0.95x under candle's grid; benchmarks/reduce_shapes.py)
WRAPPER_BLOCK = 256


def fast_reduce_launch(op: str, x, dims=None, keepdim: bool = False, candle_shape: bool = False):
    """candle-core's ``FastReduce`` info (kept dims, then the reduced dims in the given order) and, with
    ``candle_shape``, its launch: one block of ``next_power_of_two(min(1024, E))`` threads per output.
    By default the launch is the wrappers' own: trailing dims of a contiguous tensor are passed as one
    2-D (rows, E) layout, so rows of up to WAVE_ROWS elements take the kernel's wave-per-row path on a
    grid with no idle blocks; longer or strided rows take a block of WRAPPER_BLOCK threads each."""
    x = as_device_array(x)
    sum_dims = _norm_dims(dims, x.ndim)
    if op != "fast_sum" and x.size == 0:
        raise ValueError(f"{op[5:]} of an empty tensor (candle: EmptyTensor)")
    kept = [i for i in range(x.ndim) if i not in sum_dims]
    rdims = [x.shape[i] for i in kept] + [x.shape[i] for i in sum_dims]
    rstrides = [x.strides[i] for i in kept] + [x.strides[i] for i in sum_dims]
    dst_el = int(math.prod(x.shape[i] for i in kept))
    src_el = x.size
    el = src_el // dst_el if dst_el else 0
    out_dtype = u32 if op in ("fast_argmin", "fast_argmax") else x.dtype
    shape = tuple(1 if i in sum_dims else n for i, n in enumerate(x.shape)) if keepdim else \
        tuple(x.shape[i] for i in kept)
    out = x.device.empty(shape, out_dtype)
    if dst_el == 0:
        return out
    grid, block = dst_el, next_power_of_two(min(1024, el))
    trailing = x.ndim and x.is_contiguous and sum_dims == list(range(len(kept), x.ndim))
    if not candle_shape and trailing:
        rdims, rstrides = [dst_el, el], [el, 1]  # the kernel's rows_contiguous layout
    if not candle_shape:
        ws = x.device.target.wave_size
        block = max(WRAPPER_BLOCK, 2 * ws)
        if trailing and 0 < el <= WAVE_ROWS:  # fast_reduce's wave_rows: any grid covers every row
            grid = -(-dst_el // (block // ws))
        else:
            block = min(block, next_power_of_two(el))
    info = x.device.to_device(np.array(rdims + rstrides, dtype=np.uint64)) if x.ndim else None
    fn = x.device.get_or_load_func(kernel_name(op, x.dtype), REDUCE)
    fn[(grid, 1, 1), (block, 1, 1)](src_el, el, len(rdims), info, storage(x), out)  # the layout travels in info
    return out


def reduce_sum(x, dims=None, keepdim: bool = False):
    """``Tensor::sum`` over ``dims`` (all by default) through ``fast_sum``; ints wrap."""
    return fast_reduce_launch("fast_sum", x, dims, keepdim)


def reduce_max(x, dims=None, keepdim: bool = False):
    return fast_reduce_launch("fast_max", x, dims, keepdim)


def reduce_min(x, dims=None, keepdim: bool = False):
    return fast_reduce_launch("fast_min", x, dims, keepdim)


def _single(dim) -> int:
    if not isinstance(dim, int):
        dims = list(dim)
        if len(dims) != 1:
            raise ValueError(f"argmin/argmax reduce over a single dim (candle: OnlySingleDimension), got {dims}")
        dim = dims[0]
    return dim


def argmax(x, dim, keepdim: bool = False):
    """The index (u32) of the first maximum along ``dim``."""
    return fast_reduce_launch("fast_argmax", x, [_single(dim)], keepdim)


def argmin(x, dim, keepdim: bool = False):
    return fast_reduce_launch("fast_argmin", x, [_single(dim)], keepdim)


def sum_atomic_launch(x, dims):
    """``sum_dt`` as its signature describes it (candle never launches it): 1D/1024 over the input,
    atomics into a zeroed output with the reduced dims of size 1."""
    x = as_device_array(x)
    sum_dims = sorted(_norm_dims(dims, x.ndim))
    contig = [1] * x.ndim
    for i in range(x.ndim - 2, -1, -1):
        contig[i] = contig[i + 1] * x.shape[i + 1]
    info = list(x.shape) + list(x.strides) + [x.shape[d] for d in sum_dims] + [contig[d] for d in sum_dims]
    out_shape = tuple(1 if i in sum_dims else n for i, n in enumerate(x.shape))
    out = x.device.zeros(out_shape, x.dtype)
    if x.size == 0:
        return out
    half = x.dtype in (f16, bf16)
    target = out
    if half:  # the kernel sees the halves as 32-bit words: pad to a whole word
        nwords = (out.size + 1) // 2
        target = x.device.zeros((nwords,), u32)
    fn = x.device.get_or_load_func(kernel_name("sum", x.dtype), REDUCE)
    grid, block = launch_1d(x.size)
    fn[grid, block](x.size, x.ndim, len(sum_dims), x.device.to_device(np.array(info, dtype=np.uint64)), storage(x),
                    target)
    if half:
        host = target.to_host().view(x.dtype.np)[:out.size].reshape(out_shape)
        out.copy_from_host(host)
    return out


def _contiguous(x, what: str):
    x = as_device_array(x)
    if not x.is_contiguous:
        raise ValueError(f"{what} must be contiguous")
    return x


def row_threads(n_cols: int, dtype, wave: int, cache: dict) -> int:
    """Threads per row in the wrappers' own launches: enough that each has ``cache`` bytes of the row
    or less (the row fits in their registers, ``row_fits``, for the kernels' own caches), a power of
    two from a wave up to 1024."""
    per_thread = cache[dtype.nbytes] // dtype.nbytes
    return min(1024, max(wave, next_power_of_two(-(-n_cols // per_thread))))


#: softmax lanes for rows that do not fit in 512 lanes' registers, by row size in bytes (two passes;
#: benchmarks/reduce_shapes.py tries 32-1024; H200, 16384 f32 and bf16: 1.06-1.10x torch)
SOFTMAX_LANES = ((32768, 256),)


def softmax_block(n_cols: int, dtype, wave: int) -> tuple[int, int, int]:
    """The wrappers' own softmax block: the row in registers (``row_threads``) when 512 lanes or fewer
    hold it, else SOFTMAX_LANES by the row's size (1024 past them)."""
    lanes = row_threads(n_cols, dtype, wave, SOFTMAX_CACHE)
    if lanes > SOFTMAX_CACHED_LANES:
        lanes = next((n for limit, n in SOFTMAX_LANES if n_cols * dtype.nbytes <= limit), 1024)
    return 1, lanes, 1


def softmax_kernel_name(dtype, block=None) -> str:
    """candle's kernel for candle's block, ``softmax_rows_*`` for every other and for the wrappers' own
    (``block`` None, even where ``softmax_block`` is candle's): candle's f32 kernel is built for one
    warp, and candle's 16-bit ones keep the start of a long row in registers, which makes them spill
    and slows the rows held in registers (see ``softmax_kernel``)."""
    candle = block is not None and tuple(block) == SOFTMAX_CANDLE_BLOCK
    return kernel_name("softmax" if candle else "softmax_rows", dtype)


def softmax_last_dim(x, block=None):
    """candle-nn's ``softmax_last_dim``: grid (rows, 1, 1); ``block`` None for the wrappers' own
    ``softmax_block``, candle's (1, 32, 1) for candle's kernel, or any (1, n, 1) with n <= 1024."""
    x = _contiguous(x, "softmax input")
    out = x.device.empty(x.shape, x.dtype)
    n_cols = x.shape[-1] if x.ndim else 1
    rows = x.size // n_cols if n_cols else 0
    if rows == 0 or n_cols == 0:
        return out
    fn = x.device.get_or_load_func(softmax_kernel_name(x.dtype, block), REDUCE)
    if block is None:
        block = softmax_block(n_cols, x.dtype, x.device.target.wave_size)
    fn[(rows, 1, 1), block](x, out, n_cols)
    return out


#: the wrappers' 16-bit norm launches by row length: (up to columns, kernel suffix, threads a row,
#: threads a block), candle's block of 1024 past the table. A wave takes a row while its registers hold it
#: (candle's kernels hold 8 elements a thread, two blocks of 1024 an SM; the ``*_rows`` kernels 16, at
#: 64 registers); longer rows go to candle's kernels, read twice by more threads as they grow. Against
#: the ``*_rows`` kernels holding every row up to 2048 (median of two rounds, bf16 rmsnorm / layernorm,
#: pykern/torch): H100 256 1.54 / 2.21 -> 1.87 / 2.66, 1024 1.02 / 1.36 -> 1.08 / 1.36, 1536 0.89 /
#: 0.93 -> 0.92 / 1.23, 2048 1.00 / 1.06 -> 1.04 / 1.07; H200 64 1.75 / 2.34 -> 2.49 / 2.99, 1024 0.99 /
#: 1.40 -> 1.13 / 1.45, 1536 0.78 / 0.92 -> 1.10 / 1.45, 2048 0.91 / 1.07 -> 1.04 / 1.10. Rows of 257-512
#: keep the ``*_rows`` kernel: candle's kernel reading them twice measured the same on the H200 (1.56 /
#: 2.50 against 1.45 / 2.52) but 0.98 / 2.05 against 1.22 / 2.23 on the H100. From 2049 columns as
#: measured before: H200 4096 0.90 / 0.90 -> 1.05 / 1.12 against the ``*_rows`` kernel with 256 threads;
#: four rows of 128 a block (two gained on the H200 and lost on the H100, eight the reverse). Past
#: 4096, candle's block of 1024, which the kernel splits into groups of 512 up to NARROW_LONG_COLS,
#: against a block of 512 a row: H100 bf16 8192 1.44 / 1.24 -> 1.49 / 1.33, 16384 1.42 / 1.34 -> 1.49
#: / 1.46; H200 8192 1.31 / 1.04 -> 1.33 / 1.15, 16384 1.51 / 1.36 -> 1.58 / 1.48.
NARROW_LAUNCH = ((256, "", 32, 256), (512, "_rows", 32, 256), (1536, "", 64, 256), (2048, "", 128, 256),
                 (4096, "", 128, 512))


#: f32/f64 rows longer than this many threads hold go to the ``*_rows_*`` kernels, which hold half of
#: rows of up to twice that in blocks of this many threads (two an SM) and longer ones, up to twice what
#: 1024 threads hold, in blocks of 1024 (H200, f32 rmsnorm / layernorm at 12000 columns 1.16 / 1.03 ->
#: 1.27 / 1.26x torch, 16384 1.24 / 1.21 -> 1.30 / 1.21; candle's 1024 threads holding half of rows of
#: 20000 measured 1.05 / 0.98 -> 1.21 / 1.10)
HELD_ROWS_THREADS = 512


def norm_launch(name: str, rows: int, n_cols: int, dtype, wave: int) -> tuple[str, tuple, tuple]:
    """The wrappers' own kernel, grid and block for rmsnorm/layernorm: 16-bit rows by NARROW_LAUNCH,
    f32/f64 rows held in registers by ``row_threads`` (in candle's kernel, or ``*_rows_*`` where
    candle's holds less: NORM_TWO_BLOCKS), but rows longer than HELD_ROWS_THREADS threads hold (up to
    twice what 1024 hold) half held by ``*_rows_*``. Block
    (threads a row, R), row = block * R + y: R rows a block (the block's threads over a row's) when they
    divide the row count."""
    per_thread = NORM_CACHE[dtype.nbytes] // dtype.nbytes
    if dtype.nbytes == 2:
        suffix, nt, block_threads = next(((k, t, b) for limit, k, t, b in NARROW_LAUNCH if n_cols <= limit),
                                         ("", 1024, 1024))
        kname, nt = kernel_name(name + suffix, dtype), max(nt, wave)
    elif HELD_ROWS_THREADS * per_thread < n_cols <= 2 * 1024 * per_thread:  # half the row held
        kname = kernel_name(name + "_rows", dtype)
        nt = HELD_ROWS_THREADS if n_cols <= 2 * HELD_ROWS_THREADS * per_thread else 1024
        block_threads = NORM_BLOCK_THREADS
    else:
        kname = kernel_name(name + ("_rows" if (name, dtype) in NORM_TWO_BLOCKS else ""), dtype)
        nt = row_threads(n_cols, dtype, wave, NORM_CACHE)
        block_threads = NORM_BLOCK_THREADS
    per_block = max(1, block_threads // nt)
    while rows % per_block:
        per_block //= 2
    return kname, (rows // per_block, 1, 1), (nt, per_block, 1)


def _norm_launch(name, x, params, eps, block_size=None):
    x = _contiguous(x, f"{name} input")
    out = x.device.empty(x.shape, x.dtype)
    n_cols = x.shape[-1]
    rows = x.size // n_cols if n_cols else 0
    if rows == 0:
        return out
    params = [None if p is None else _contiguous(p, f"{name} weight") for p in params]
    if block_size is None:
        kname, grid, block = norm_launch(name, rows, n_cols, x.dtype, x.device.target.wave_size)
    else:  # candle's launch: a block of block_size threads a row
        kname, grid, block = kernel_name(name, x.dtype), (rows, 1, 1), (block_size, 1, 1)
    x.device.get_or_load_func(kname, REDUCE)[grid, block](x, out, *params, n_cols, block[0], float(eps))
    return out


def rms_norm(x, alpha, eps: float, block_size=None):
    """candle-nn's ``rms_norm``: ``x / sqrt(mean(x^2) + eps) * alpha`` over the last dim (alpha may be
    None). candle launches a block of ``block_size`` threads per row (32 below 1024 columns, else
    1024); without one the wrappers' own launch is used (``_norm_launch``)."""
    return _norm_launch("rmsnorm", x, [alpha], eps, block_size)


def layer_norm(x, alpha, beta, eps: float, block_size=None):
    """candle-nn's ``layer_norm``: ``(x - mean) / sqrt(var + eps) * alpha + beta`` (biased variance)."""
    return _norm_launch("layernorm", x, [alpha, beta], eps, block_size)


#: the rotary embeddings' layouts of x and the kernels' size arguments (before stride_b)
ROPE_LAYOUTS = {"rope_i": ("bhtd", lambda b, h, t, d: (b * h, t * d)),
                "rope": ("bhtd", lambda b, h, t, d: (b * h, t * d, d)),
                "rope_thd": ("bthd", lambda b, h, t, d: (b, t, h, d))}


def _rope(name, x, cos, sin):
    """candle-nn's rotary embeddings: one thread a rotated pair (1D launch over x.size / 2); cos/sin
    (t, d/2) or (b, t, d/2), in which case ``stride_b`` steps them by batch."""
    layout, sizes = ROPE_LAYOUTS[name]
    x = _contiguous(x, f"{name} input")
    cos, sin = _contiguous(cos, "cos"), _contiguous(sin, "sin")
    if x.ndim != 4 or x.shape[-1] % 2:
        raise ValueError(f"{name}: x must be ({', '.join(layout)}) with d even, got shape {x.shape}")
    if cos.dtype is not x.dtype or sin.dtype is not x.dtype:
        raise ValueError(f"{name}: x, cos and sin must share a dtype")
    if cos.shape != sin.shape or cos.ndim not in (2, 3):
        raise ValueError(f"{name}: cos and sin must both be (t, d/2) or (b, t, d/2)")
    dims = dict(zip(layout, x.shape))
    b, h, t, d = dims["b"], dims["h"], dims["t"], dims["d"]
    if cos.shape[-1] != d // 2 or cos.shape[-2] < t or (cos.ndim == 3 and (cos.shape[0] != b or cos.shape[1] != t)):
        raise ValueError(f"{name}: cos/sin of shape {cos.shape} do not fit (b={b}, t={t}, d={d})")
    out = x.device.empty(x.shape, x.dtype)
    if x.size:
        fn = x.device.get_or_load_func(kernel_name(name, x.dtype), REDUCE)
        grid, block = launch_1d(x.size // 2)
        fn[grid, block](x, cos, sin, out, *sizes(b, h, t, d), h * t * d if cos.ndim == 3 else 0)
    return out


def rope_i(x, cos, sin):
    """Interleaved rotary embedding of x (b, h, t, d) with cos/sin (t, d/2) or (b, t, d/2)."""
    return _rope("rope_i", x, cos, sin)


def rope(x, cos, sin):
    """Rotate-half rotary embedding of x (b, h, t, d)."""
    return _rope("rope", x, cos, sin)


def rope_thd(x, cos, sin):
    """Rotate-half rotary embedding of x (b, t, h, d)."""
    return _rope("rope_thd", x, cos, sin)


def __getattr__(name: str):
    """``reduce.sum``, ``reduce.max``, ``reduce.min``: not module globals, so that the kernels' ``min``
    and ``max`` (looked up in this module's globals first) stay the built-ins."""
    try:
        return {"sum": reduce_sum, "max": reduce_max, "min": reduce_min}[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin", "softmax_last_dim", "rms_norm", "layer_norm",
           "rope", "rope_i", "rope_thd", "sum_atomic_launch", "fast_reduce_launch", "next_power_of_two", "BLOCK"]
