"""REDUCE: candle's ``reduce`` module — ``fast_*`` reductions, the atomic ``sum``, softmax, rmsnorm,
layernorm and the three rotary-embedding layouts (64 kernels, candle's names and parameter sizes,
plus the wrappers' own ``*_rows_*``).

Every cross-lane step is ``_reduction.py``'s block reduction, so any block size works up to each
kernel's max_block_size. Tuning tables, launch heuristics and the host wrappers (re-exported here)
are in ``reduce_launch.py``, their measurements in ``docs/targets/cuda.md``. Semantics follow
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

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, i32, u16, u32, u64, usize

from . import REDUCE, kernel_name
from ._common import compute_type, is_contiguous, strided_index
from ._reduction import (ARGMAX_OP, ARGMIN_OP, ARG_MAX, ARG_MIN, EVERY_WAVE, FIRST_MAX, FIRST_MIN, FIRST_WAVE, LOWEST,
                         MAX_OP, MAX_WAVES, MIN_OP, NEG_INF_WORD, ROW_WORD, SOFTMAX, SUM, SUM_OP, WAVE_SUM, WHOLE_WAVES,
                         better, block_merge, block_total, cache_load, chan_mean_m2, combine, exp_diff, hold_words,
                         identity, online_softmax_step, param_word, row_fits, row_offset, row_total, rows_contiguous,
                         softmax_row_cached, spread_idle, spread_row, store_softmax_words, store_word, wave_rows,
                         word_element, word_pair)
from .reduce_launch import (REDUCE_HOST, FAST_DTYPES, GROUP_MIN_THREADS, NARROW_GROUP_COLS, NARROW_GROUP_THREADS, NARROW_LONG_COLS,
                            NARROW_LONG_GROUP_THREADS, NN_DTYPES, NORM_BLOCK_THREADS, NORM_CACHE, SOFTMAX_CACHE,
                            SOFTMAX_CACHED_LANES, SOFTMAX_CANDLE_BLOCK, SOFTMAX_CHUNK, SOFTMAX_HELD, SOFTMAX_WARP_DTYPES,
                            SUM_DTYPES, WAVE_NORM_PER_THREAD, WAVE_ROWS, norm_kernels)
from .reduce_launch import (argmax, argmin, fast_reduce_launch, layer_norm, next_power_of_two,  # the wrappers
                            reduce_max, reduce_min, reduce_sum, rms_norm, rope, rope_i, rope_thd, softmax_last_dim,
                            sum_atomic_launch)

T = pk.TypeVar("T")
V = pk.TypeVar("V")
S = pk.TypeVar("S")
W = pk.TypeVar("W")

#: ``fast_reduce``'s compile-time op codes, names and merges
FAST_OPS = ((SUM_OP, "fast_sum", WAVE_SUM), (MIN_OP, "fast_min", FIRST_MIN), (MAX_OP, "fast_max", FIRST_MAX),
            (ARGMIN_OP, "fast_argmin", ARG_MIN), (ARGMAX_OP, "fast_argmax", ARG_MAX))


# -- fast_* : one block per output, reduced dims last in info ---------------------------------------------------------
@pk.kernel(min_blocks_per_sm=2)
def fast_reduce(src_numel: usize, el_to_sum_per_block: usize, num_dims: usize, info: ConstPtr[usize],
                src: ConstPtr[T], dst: Ptr[O], *, T, O, A, K, M):
    """Contiguous rows of up to WAVE_ROWS go one per wave (``wave_rows``) in blocks of several waves;
    longer rows take the block (pk.parallel_range, 16-byte tiles), then ``M``, the op's merge; other
    layouts read through strided_index. Under candle's grid (a block per row) the blocks without a
    row of ``spread_row`` leave before anything reads ``info``, and the rows of other layouts go a wave
    a row too (``wave_rows``, strided). Two blocks of 1024 an SM (32 registers)."""
    sv = pk.shared.array(MAX_WAVES, A)
    si = pk.shared.array(MAX_WAVES, u32)
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    lane = t % pk.wave_size
    if 0 < el_to_sum_per_block <= WAVE_ROWS and nt % pk.wave_size == 0 and nt > pk.wave_size:
        # candle's grid (a block per row) below 2**32 elements: the blocks without a row leave first
        spread = pk.u64(pk.grid_dim.x) * el_to_sum_per_block >= src_numel and src_numel <= pk.u64(0xFFFFFFFF)
        if spread:
            if spread_idle(nt // pk.wave_size, pk.block_idx.x):  # before anything reads info
                return
        if rows_contiguous(el_to_sum_per_block, num_dims, info):
            wave_rows(src_numel, el_to_sum_per_block, num_dims, info, src, dst, t, nt, lane, A(M.identity), op=K,
                      merge=M, strided=False)
            return
        if spread:  # the idle blocks have left: this block's waves take its rows, strided
            wave_rows(src_numel, el_to_sum_per_block, num_dims, info, src, dst, t, nt, lane, A(M.identity), op=K,
                      merge=M, strided=True)
            return
    row = pk.u64(pk.block_idx.x)
    start = row * el_to_sum_per_block
    n = min(start + el_to_sum_per_block, src_numel) - min(start, src_numel)
    base = row_offset(row, el_to_sum_per_block, num_dims, info)
    fast = base != ~pk.u64(0) and n < pk.u64(0x7FFFF000)
    if K <= MAX_OP:
        acc: A = M.identity
        first: A = 0  # candle-cpu: a NaN first element is never replaced (min/max)
        if fast:
            p = src + base
            for j in pk.parallel_range(pk.u32(0), pk.u32(n), t, nt):
                acc = combine(acc, A(p[j]), K)
            if K != SUM_OP and t == 0 and n > 0:
                first = A(p[0])
        else:
            k = pk.u64(t)
            while k < n:
                x = A(src[strided_index(start + k, num_dims, info, info + num_dims)])
                if K != SUM_OP and k == 0:
                    first = x
                acc = combine(acc, x, K)
                k += pk.u64(nt)
        acc = block_total(acc, sv + 0, t, nt, merge=M, gather=FIRST_WAVE, free=False)
        if t == 0:
            if first != first:
                acc = first
            dst[pk.block_idx.x] = O(acc)
    else:
        want_min = K == ARGMIN_OP
        f0: A = 0
        if t == 0 and n > 0:  # candle-cpu: a NaN first element is never replaced
            f0 = A(src[base] if fast else src[strided_index(start, num_dims, info, info + num_dims)])
        last: u32 = 0
        if info is not None and num_dims > 0:
            last = pk.u32(info[num_dims - 1])
        b0: A = M.identity
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
        index = pk.local.array(1, u32)
        index[0] = i0
        block_merge(b0, index, sv + 0, si + 0, t, nt, merge=M, gather=EVERY_WAVE, free=False)
        if t == 0:
            if f0 != f0:
                index[0] = 0
            dst[pk.block_idx.x] = O(index[0] % last if last != 0 else index[0])


#: the 64-bit types keep the default register budget (at 32 registers their loops would spill)
_fast_reduce_wide = pk.kernel(fast_reduce.__wrapped__)
for _t in FAST_DTYPES:
    for _op, _name, _merge in FAST_OPS:
        REDUCE.add((_fast_reduce_wide if _t.nbytes == 8 else fast_reduce).instance(
            kernel_name(_name, _t), T=_t, O=u32 if _op >= ARGMIN_OP else _t, A=compute_type(_t), K=_op,
            M=_merge.with_identity(identity(compute_type(_t) if _op != SUM_OP else _t, _op))))


# -- sum_dt: atomic sum into a pre-zeroed out (not launched by candle) ------------------------------------------------
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


# -- softmax over the last dim: row = block_idx.x * block_dim.x + thread_idx.x, lanes along y -------------------------
@pk.kernel
def softmax_kernel(src: ConstPtr[T], dst: Ptr[T], n_cols: i32, *, T, A, HELD):
    """Rows in registers (``softmax_row_cached``), else one online pass for the max and sum of exp
    (walking down the row, its elements kept in the L2) and one for the output (walking up: the L2's
    likeliest lines first), SOFTMAX_CHUNK elements a lane in flight and the row's first ``HELD``
    bytes a lane in registers for both. Any block (1, n <= max_block_size, 1)."""
    sm = pk.shared.array(2 * MAX_WAVES, A)  # two planes: (max, sum) pairs, or the cached row's totals
    t = pk.thread_idx.y
    nt = pk.block_dim.y
    row = pk.u64(pk.block_idx.x) * pk.u64(pk.block_dim.x) + pk.u64(pk.thread_idx.x)
    n = pk.u64(n_cols)
    x = src + row * n
    y = dst + row * n
    step = pk.u64(nt)
    if nt <= SOFTMAX_CACHED_LANES and row_fits(x, y, pk.u32(n_cols), nt, cache=SOFTMAX_CACHE[T.nbytes]):
        softmax_row_cached(x, y, pk.u32(n_cols), sm + 0, t, nt, cache=SOFTMAX_CACHE[T.nbytes])
        return
    ms = pk.local.array(2, A)  # the lane's running (max, sum of e**(x - max))
    ms[0] = LOWEST[A]
    ms[1] = 0.0
    c = pk.u64(t)
    chunk = pk.local.array(SOFTMAX_CHUNK[T.nbytes], A)
    # 16-bit rows of whole 8-byte words: a chunk is two words, c and c + step (a warp's loads adjacent),
    # the second -inf past the row's end (it adds nothing); other rows: elements c + k * step
    words = T.nbytes == 2 and n % 4 == 0 and pk.is_aligned(x, 8) and pk.is_aligned(y, 8)
    xw = pk.bitcast(x, ConstPtr[u64])
    nw = n // 4
    wv = pk.local.array(2, u64)
    # the row's first HELD bytes a lane (half of them for a shorter row, where HALF) stay in registers
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
    # this pass walks the rest of the row from its end down (index top - c)
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
    sums = pk.local.array(1, A)  # the running sum: the merge's extra
    sums[0] = s
    m = block_merge(m, sums, sm + 0, sm + MAX_WAVES, t, nt, merge=SOFTMAX, gather=EVERY_WAVE, free=False)
    m = pk.wave.shuffle(m, 0)
    inv = 1.0 / pk.wave.shuffle(sums[0], 0)
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
    REDUCE.add(_kern.instance(kernel_name("softmax", _t), T=_t, A=compute_type(_t), HELD=SOFTMAX_HELD[_t.nbytes]))
    REDUCE.add(softmax_kernel.instance(kernel_name("softmax_rows", _t), T=_t, A=compute_type(_t),
                                       HELD=SOFTMAX_CACHE[_t.nbytes] // 2 if _t.nbytes >= 4 else 0))


# -- rmsnorm / layernorm: one row per block (row = block_idx.x * block_dim.y + thread_idx.y) --------------------------
@pk.func
def norm_row_cached(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, sm: S, t: u32,
                    nt: u32, *, spec, full, by_wave):
    """norm_row for a row in its threads' registers (``row_fits``), read and unpacked once (``e``);
    alpha and beta a word at a time where aligned. Bound by instructions issued: guards a word at a
    time, written out where used (docs/targets/cuda.md), fused multiply-adds for 16-bit rows."""
    W = ROW_WORD[T.nbytes]
    v = pk.local.array(spec.cache // W.nbytes, W)
    cache_load(x, v, n, t, nt, W(0), cache=spec.cache, full=full)
    zero = V(0)
    e = pk.local.array(spec.cache // T.nbytes, V)
    for w in pk.static_range(spec.cache // W.nbytes):
        for k in pk.static_range(W.nbytes // T.nbytes):
            e[w * (W.nbytes // T.nbytes) + k] = word_element(x, v[w], k, zero)
    mean = zero
    q = zero
    stats = pk.local.array(2, V)
    if spec.layernorm and T.nbytes >= 4 and not by_wave and nt > pk.wave_size and nt % pk.wave_size == 0:
        chan_mean_m2(x, e, n, sm, t, nt, stats, cache=spec.cache, full=full)
        mean = stats[0]
        q = stats[1]
    else:
        if spec.layernorm:
            s = zero
            for i in pk.static_range(spec.cache // T.nbytes):
                s += e[i]
            mean = row_total(s, sm + MAX_WAVES, t, nt, merge=SUM, by_wave=by_wave) / V(n)
        for w in pk.static_range(spec.cache // W.nbytes):
            part = zero
            for k in pk.static_range(W.nbytes // T.nbytes):
                d = e[w * (W.nbytes // T.nbytes) + k] - mean
                part = pk.fma(d, d, part) if W.nbytes > T.nbytes else d * d
            q += part if full else pk.select((w * nt + t) * (W.nbytes // T.nbytes) < n, part, zero)
        q = row_total(q, sm, t, nt, merge=SUM, by_wave=by_wave)
    r = 1.0 / pk.sqrt(q / V(n) + eps)
    wide = pk.is_aligned(alpha, W.nbytes) and (not spec.layernorm or pk.is_aligned(beta, W.nbytes))
    o = pk.local.array(4, V)
    for w in pk.static_range(spec.cache // W.nbytes):
        p = w * nt + t
        for k in pk.static_range(W.nbytes // T.nbytes):
            o[k] = (e[w * (W.nbytes // T.nbytes) + k] - mean) * r
        if W.nbytes == T.nbytes:  # f32/f64: separate products and sums (measured faster there)
            if alpha is not None and (full or p < n):
                o[0] = o[0] * V(alpha[p])
            if spec.layernorm and beta is not None and (full or p < n):
                o[0] = o[0] + V(beta[p])
        elif full or p * (W.nbytes // T.nbytes) < n:
            if spec.layernorm and alpha is not None and beta is not None:
                a = param_word(alpha, p, wide, v[w])
                b = param_word(beta, p, wide, v[w])
                for k in pk.static_range(W.nbytes // T.nbytes):
                    o[k] = pk.fma(o[k], word_element(x, a, k, q), word_element(x, b, k, q))
            elif alpha is not None:
                a = param_word(alpha, p, wide, v[w])
                for k in pk.static_range(W.nbytes // T.nbytes):
                    o[k] = o[k] * word_element(x, a, k, q)
            elif spec.layernorm and beta is not None:
                b = param_word(beta, p, wide, v[w])
                for k in pk.static_range(W.nbytes // T.nbytes):
                    o[k] = o[k] + word_element(x, b, k, q)
        store_word(y, o, p, n, v[w], full=full)


@pk.func
def norm_row(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, sm: S, t: u32,
             nt: u32, *, spec, by_wave):
    """One row, shared by ``nt`` threads (``t`` this one's): the block's x threads, or one wave
    (``by_wave``: no barrier). In registers (``norm_row_cached``), half held (``norm_row_held``),
    or read in each pass (``norm_row_passes``)."""
    if row_fits(x, y, n, nt, cache=spec.cache):
        if spec.own and T.nbytes == 2 and n == nt * pk.u32(spec.cache // T.nbytes):  # every word full: no guards
            norm_row_cached(x, y, alpha, beta, n, eps, sm, t, nt, spec=spec, full=True, by_wave=by_wave)
        else:
            norm_row_cached(x, y, alpha, beta, n, eps, sm, t, nt, spec=spec, full=False, by_wave=by_wave)
        return
    if spec.held and T.nbytes >= 4 and not by_wave and n <= 2 * pk.u32(spec.cache // T.nbytes) * nt:
        norm_row_held(x, y, alpha, beta, n, eps, sm, t, nt, spec=spec)
        return
    norm_row_passes(x, y, alpha, beta, n, eps, sm, t, nt, True, spec=spec, by_wave=by_wave)


@pk.func
def norm_row_held(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, sm: S, t: u32,
                  nt: u32, *, spec):
    """An f32/f64 row longer than its threads hold, up to twice that: the first ``cache`` bytes a
    thread stay in registers, the rest is read from memory in each pass (the f32/f64 ``*_rows_*``
    kernels and candle's rmsnorm_f32)."""
    per = spec.cache // T.nbytes
    h = pk.u32(per) * nt
    e = pk.local.array(spec.cache // T.nbytes, V)
    for i in pk.static_range(spec.cache // T.nbytes):
        e[i] = V(x[i * nt + t])
    zero = V(0)
    mean = zero
    if spec.layernorm:
        s = zero
        for i in pk.static_range(spec.cache // T.nbytes):
            s += e[i]
        for j in pk.parallel_range(h, n, t, nt):
            s += V(x[j])
        mean = row_total(s, sm + MAX_WAVES, t, nt, merge=SUM, by_wave=False) / V(n)
    q = zero
    for i in pk.static_range(spec.cache // T.nbytes):
        d = e[i] - mean
        q += d * d
    for j in pk.parallel_range(h, n, t, nt, descending=True):
        d = V(x[j]) - mean
        q += d * d
    q = row_total(q, sm, t, nt, merge=SUM, by_wave=False)
    r = 1.0 / pk.sqrt(q / V(n) + eps)
    for i in pk.static_range(spec.cache // T.nbytes):
        p = i * nt + t
        o = (e[i] - mean) * r
        if alpha is not None:
            o = o * V(alpha[p])
        if spec.layernorm and beta is not None:
            o = o + V(beta[p])
        y[p] = T(o)
    store_norm(x, y, alpha, beta, h, n, mean, r, t, nt, spec=spec, down=False)


@pk.func
def median3(a: V, b: V, c: V) -> V:
    return max(min(a, b), min(max(a, b), c))


@pk.func
def norm_row_passes(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n: u32, eps: V, sm: S, t: u32,
                    nt: u32, store: bool, *, spec, by_wave):
    """``norm_row`` for a row read from memory in each pass; without ``store``, the statistics alone
    (every barrier, no output). The output pass walks down the row (``descending``), so it first
    meets what the pass before read last."""
    zero = V(0)
    mean = zero
    tq = zero
    if T.nbytes == 2 and spec.layernorm:
        # 16-bit rows: the statistics in one pass over memory, not two. Each thread sums x, and d*d for
        # d = x - k, k an element of the row that differs from thread to thread; the row's sum, then
        # its sum of (x - mean)**2 = s2 + (k - mean) * (2 * (s1 - c * k) + c * (k - mean)) per thread,
        # are two scalar reductions. The cancellation there is ~c * eps of the row's M2 (c: a
        # thread's count), far below a 16-bit result's rounding (docs/targets/cuda.md). k is the median
        # of the thread's first three elements: an outlier as k would scale that error by (k - mean)**2
        shift = median3(V(x[min(t, n - 1)]), V(x[min(t + nt, n - 1)]), V(x[min(t + 2 * nt, n - 1)])) if n > 0 else zero
        count = pk.u32(0)  # an integer: a tile's increments fold into one add
        e1 = zero
        s2 = zero
        for j in pk.parallel_range(pk.u32(0), n, t, nt):
            d = V(x[j]) - shift
            count += 1
            e1 += d
            s2 = pk.fma(d, d, s2)
        c = V(count)
        mean = row_total(pk.fma(c, shift, e1), sm + MAX_WAVES, t, nt, merge=SUM, by_wave=by_wave) / V(n)
        dk = shift - mean
        tq = row_total(pk.fma(dk, pk.fma(c, dk, e1 + e1), s2), sm, t, nt, merge=SUM, by_wave=by_wave)
    else:
        if spec.layernorm:
            s = zero
            for j in pk.parallel_range(pk.u32(0), n, t, nt):
                s += V(x[j])
            if by_wave:
                s = pk.wave.sum(s)
            else:
                s = pk.wave.shuffle(block_total(s, sm, t, nt, merge=SUM, gather=EVERY_WAVE, free=True), 0)
            mean = s / V(n)
        q = zero
        for j in pk.parallel_range(pk.u32(0), n, t, nt):
            d = V(x[j])
            if spec.layernorm:
                d = d - mean
            q = pk.fma(d, d, q) if T.nbytes == 2 else q + d * d
        # rmsnorm: WHOLE_WAVES (measured faster); layernorm keeps EVERY_WAVE (the other spills there)
        if by_wave:
            tq = pk.wave.sum(q)
        elif spec.layernorm:
            tq = pk.wave.shuffle(block_total(q, sm, t, nt, merge=SUM, gather=EVERY_WAVE, free=True), 0)
        else:
            tq = block_total(q, sm, t, nt, merge=SUM, gather=WHOLE_WAVES, free=True)
    r = 1.0 / pk.sqrt(tq / V(n) + eps)
    if not store:
        return
    store_norm(x, y, alpha, beta, pk.u32(0), n, mean, r, t, nt, spec=spec, down=True)


@pk.func
def store_norm(x: ConstPtr[T], y: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], lo: u32, n: u32, mean: V, r: V,
               t: u32, nt: u32, *, spec, down):
    """The output of elements [lo, n) of a row read from memory, (x - mean) * r * alpha + beta
    (rmsnorm: mean 0, no beta), each thread's part from the top down where ``down``."""
    if alpha is None:
        for j in pk.parallel_range(lo, n, t, nt, descending=down):
            o = V(x[j])
            if spec.layernorm:
                o = o - mean
            y[j] = T(o * r)
    elif spec.layernorm and beta is not None:
        for j in pk.parallel_range(lo, n, t, nt, descending=down):
            y[j] = T((V(x[j]) - mean) * r * V(alpha[j]) + V(beta[j]))
    else:
        for j in pk.parallel_range(lo, n, t, nt, descending=down):
            o = V(x[j])
            if spec.layernorm:
                o = o - mean
            y[j] = T(o * r * V(alpha[j]))


@pk.func
def norm_by_wave(n_cols: i32) -> bool:
    """A block of whole waves on one short row (block_dim.y == 1): its waves take a row each instead
    (``spread_row``: grid_dim.x is the row count of such a launch)."""
    nt = pk.block_dim.x
    return pk.block_dim.y == 1 and nt % pk.wave_size == 0 and nt > pk.wave_size and \
        pk.u32(n_cols) <= nt * WAVE_NORM_PER_THREAD


@pk.func
def row_group(x: ConstPtr[T], y: Ptr[T], n_cols: i32, *, cache) -> u32:
    """Threads that take a row each when a block of whole waves has one row (block_dim.y == 1) that
    fills the registers of GROUP_MIN_THREADS or more, but fewer than the block has: a power of two
    that divides the block (found by doubling); 0 otherwise. Every row of a launch is aligned like
    the first, so the whole grid agrees."""
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
def narrow_groups(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n_cols: i32, eps: V,
                  sm: S, block: u32, *, spec, group):
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
    norm_row_passes(src + off, dst + off, alpha, beta, pk.u32(n_cols), eps, sm + k * (g // pk.wave_size),
                    pk.thread_idx.x % g, g, r < rows, spec=spec, by_wave=False)


@pk.func
def norm_rows(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n_cols: i32, eps: V, sm: S, *,
              spec):
    """This thread's part: a wave per row (``norm_by_wave``, told apart first: its idle blocks are
    most of such a launch), ``row_group`` threads a row held in registers (f32/f64; 16-bit rows go to
    ``narrow_groups`` instead), or the block's x threads on row ``block_idx.x * block_dim.y +
    thread_idx.y``. Waves and groups take rows under candle's grid (``spread_row``); a group past the
    last row repeats it (same values; in place too: rows are read before any group's stores).
    ``spec.host`` (the CPU wrappers' kernels) takes the last alone, read in each pass: a CPU runs a
    block's threads in turn and its registers are memory, so the GPU's strategies buy nothing there
    but compile time (the host kernels are a sixth of a GPU one's code; docs/targets/cpu.md, "First use")."""
    block = pk.block_idx.x  # one read, shared by every path
    if not spec.host:
        by_wave = norm_by_wave(n_cols)
        if not spec.own and T.nbytes >= 4:  # a wave's long rows go to groups (row_group always takes them)
            by_wave = by_wave and pk.u32(n_cols) < pk.u32(NORM_CACHE[T.nbytes] // T.nbytes * GROUP_MIN_THREADS)
        if not spec.own and T.nbytes == 2 and pk.block_dim.y == 1 and pk.u32(n_cols) > NARROW_GROUP_COLS:
            if by_wave:
                narrow_groups(src, dst, alpha, beta, n_cols, eps, sm, block, spec=spec, group=NARROW_GROUP_THREADS)
                return
            g = pk.u32(NARROW_LONG_GROUP_THREADS)
            if pk.u32(n_cols) <= NARROW_LONG_COLS and pk.block_dim.x > g and pk.block_dim.x % g == 0:
                narrow_groups(src, dst, alpha, beta, n_cols, eps, sm, block, spec=spec, group=NARROW_LONG_GROUP_THREADS)
                return
        if by_wave:
            if spread_idle(pk.block_dim.x // pk.wave_size, block):
                return
            r = spread_row(pk.block_dim.x // pk.wave_size, pk.thread_idx.x // pk.wave_size, block)
            if r < pk.u64(pk.grid_dim.x):
                off = r * pk.u64(n_cols)
                norm_row(src + off, dst + off, alpha, beta, pk.u32(n_cols), eps, sm, pk.thread_idx.x % pk.wave_size,
                         pk.u32(pk.wave_size), spec=spec, by_wave=True)
            return
        if not spec.own and T.nbytes >= 4:
            g = row_group(src, dst, n_cols, cache=spec.cache)
            if g != 0:
                groups = pk.block_dim.x // g
                if spread_idle(groups, block):
                    return
                rows = pk.u64(pk.grid_dim.x)
                k = pk.thread_idx.x // g
                off = min(spread_row(groups, k, block), rows - 1) * pk.u64(n_cols)
                norm_row_cached(src + off, dst + off, alpha, beta, pk.u32(n_cols), eps, sm + k * (g // pk.wave_size),
                                pk.thread_idx.x % g, g, spec=spec, full=False, by_wave=False)
                return
    row = (pk.u64(block) * pk.u64(pk.block_dim.y) + pk.u64(pk.thread_idx.y)) * pk.u64(n_cols)
    row_sm = sm + pk.thread_idx.y * ((pk.block_dim.x + pk.wave_size - 1) // pk.wave_size)  # its waves' slots
    if spec.host:
        norm_row_passes(src + row, dst + row, alpha, beta, pk.u32(n_cols), eps, row_sm, pk.thread_idx.x,
                        pk.block_dim.x, True, spec=spec, by_wave=False)
    else:
        norm_row(src + row, dst + row, alpha, beta, pk.u32(n_cols), eps, row_sm, pk.thread_idx.x, pk.block_dim.x,
                 spec=spec, by_wave=False)


@pk.kernel
def rmsnorm_kernel(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], n_cols: i32, block_size: i32, eps: f32,
                   *, T, A, NORM):
    sm = pk.shared.array(2 * MAX_WAVES, A)  # two planes: one a row total
    norm_rows(src, dst, alpha, alpha, n_cols, A(eps), sm + 0, spec=NORM)


@pk.kernel
def layernorm_kernel(src: ConstPtr[T], dst: Ptr[T], alpha: ConstPtr[T], beta: ConstPtr[T], n_cols: i32,
                     block_size: i32, eps: f32, *, T, A, NORM):
    sm = pk.shared.array(3 * MAX_WAVES, A)  # three planes: two row totals, or chan_mean_m2's triples
    norm_rows(src, dst, alpha, beta, n_cols, A(eps), sm + 0, spec=NORM)


#: each norm kernel's register budgets: the default (64 registers at 1024 threads); two blocks of 1024
#: an SM (NORM_TWO_BLOCKS); the wrappers' 16-bit ``*_rows_*``, four blocks of at most 256 threads an SM
_NORM_KERNELS = {name: {"default": kern, "two_blocks": pk.kernel(min_blocks_per_sm=2)(kern.__wrapped__),
                        "rows": pk.kernel(max_block_size=NORM_BLOCK_THREADS, min_blocks_per_sm=4)(kern.__wrapped__)}
                 for name, kern in (("rmsnorm", rmsnorm_kernel), ("layernorm", layernorm_kernel))}
for _name, _suffix, _budget, _t, _spec in norm_kernels():
    (REDUCE_HOST if _spec.host else REDUCE).add(_NORM_KERNELS[_name][_budget].instance(
        kernel_name(_name + _suffix, _t), T=_t, A=compute_type(_t), NORM=_spec))


# -- rotary embeddings: one thread per rotated pair (1D/1024 over el/2); computed in f32 for halves -------------------
@pk.func
def cs_batch(p: usize, stride_b: u32, half_plane: usize) -> usize:
    """The cos/sin offset of pair ``p``'s batch when cos/sin are (b, t, d/2) (stride_b > 0)."""
    if stride_b > 0:
        return (2 * p // pk.u64(stride_b)) * half_plane
    return pk.u64(0)


@pk.func
def rotate(src: ConstPtr[T], cos: ConstPtr[T], sin: ConstPtr[T], dst: Ptr[T], i1: usize, i2: usize, cs: usize, *, A):
    """The pair (x[i1], x[i2]) rotated by the angle at ``cs`` (computed in ``A``)."""
    c = A(cos[cs])
    s = A(sin[cs])
    x1 = A(src[i1])
    x2 = A(src[i2])
    dst[i1] = T(x1 * c - x2 * s)
    dst[i2] = T(x1 * s + x2 * c)


@pk.kernel
def rope_i_kernel(src: ConstPtr[T], cos: ConstPtr[T], sin: ConstPtr[T], dst: Ptr[T], bh: u32, td: u32,
                  stride_b: u32, *, T, A):
    half = pk.u64(td) // 2
    for p in pk.grid_stride(pk.u64(bh) * half):
        cs = p % half + cs_batch(p, stride_b, half)
        rotate(src, cos, sin, dst, 2 * p, 2 * p + 1, cs, A=A)


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
        rotate(src, cos, sin, dst, i1, i1 + hd, ti * hd + j + cs_batch(p, stride_b, half), A=A)


@pk.kernel
def rope_thd_kernel(src: ConstPtr[T], cos: ConstPtr[T], sin: ConstPtr[T], dst: Ptr[T], b: u32, t: u32, h: u32,
                    d: u32, stride_b: u32, *, T, A):
    hd = pk.u64(d) // 2
    for p in pk.grid_stride(pk.u64(b) * pk.u64(t) * pk.u64(h) * hd):
        bth = p // hd
        j = p % hd
        ti = (bth // pk.u64(h)) % pk.u64(t)
        i1 = bth * pk.u64(d) + j
        rotate(src, cos, sin, dst, i1, i1 + hd, ti * hd + j + cs_batch(p, stride_b, pk.u64(t) * hd), A=A)


for _t in NN_DTYPES:
    REDUCE.add(rope_i_kernel.instance(kernel_name("rope_i", _t), T=_t, A=compute_type(_t)))
    REDUCE.add(rope_kernel.instance(kernel_name("rope", _t), T=_t, A=compute_type(_t)))
    REDUCE.add(rope_thd_kernel.instance(kernel_name("rope_thd", _t), T=_t, A=compute_type(_t)))


def __getattr__(name: str):
    """``reduce.sum``, ``reduce.max``, ``reduce.min``: not module globals, so that the kernels' ``min``
    and ``max`` (looked up in this module's globals first) stay the built-ins."""
    try:
        return {"sum": reduce_sum, "max": reduce_max, "min": reduce_min}[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin", "softmax_last_dim", "rms_norm", "layer_norm",
           "rope", "rope_i", "rope_thd", "sum_atomic_launch", "fast_reduce_launch", "next_power_of_two"]
