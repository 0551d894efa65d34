"""The block reduction, written once: a lane butterfly inside each wave, the waves' results through
shared memory, merged again by the waves — parameterised at compile time by a small merge function
(Triton's ``reduce(x, axis, combine_fn)`` is the model), for every family that reduces.

A thread's state is a primary value (passed and returned by value, so a one-value reduction
compiles to plain registers) and ``merge.extras`` further values in a local array ``w`` (an
argmin's u32 index, softmax's running sum). A :class:`Merge` names the ``@pk.func`` that merges
another lane's state into this one's: SUM, MAX (f32::max, NaN-skipping), FIRST_MIN / FIRST_MAX
(candle-cpu's fold: the earlier element wins ties, NaNs are never taken), ARG_MIN / ARG_MAX (value
and index, ties to the lower index), SOFTMAX (a running max and sum of e**(x - max)); a block's
(count, mean, M2) triples merge by Chan's formula (``chan_mean_m2``). Lanes past the block's end
are left out of each merge, so any block size works (blocks narrower than a wave included).

Below the skeleton (``wave_merge``, ``block_merge``): rows held in registers as words (softmax and
the norms), softmax's row math, rows placed on a grid (``spread_*``) and in candle's ``info``
layout (``row_*``), and a wave per row (``wave_rows``, the ``fast_*`` reductions' short rows, of
any layout under candle's grid); several sums at once (``block_sums``,
value t of the block's totals on thread t: the quantized products' rows x columns).
"""
from __future__ import annotations

import dataclasses

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, f64, i32, u16, u32, u64, usize

from ._common import offset_of

T = pk.TypeVar("T")
V = pk.TypeVar("V")
W = pk.TypeVar("W")
S = pk.TypeVar("S")
R = pk.TypeVar("R")
U = pk.TypeVar("U")

#: the most waves a block of 1024 threads has (at the narrowest wave width, 32): a shared plane's size
MAX_WAVES = 32
_LOG2E = 1.4426950408889634

#: how the waves' results come back from shared memory (``block_merge``)
EVERY_WAVE = "every wave"    # every wave merges them, guarded; the result on lane 0 of each wave
WHOLE_WAVES = "whole waves"  # blocks of whole waves skip the guards; the result on every thread
FIRST_WAVE = "first wave"    # wave 0 alone merges them, from the merge's identity; the result on thread 0


@dataclasses.dataclass(frozen=True)
class Merge:
    """A reduction's merge, a compile-time argument of ``wave_merge`` / ``block_merge``.

    ``combine(a, b, w, theirs_w, op) -> V`` merges another lane's state into this lane's: ``a`` /
    ``b`` the two primary values, ``w`` / ``theirs_w`` the ``extras`` further values (updated in
    place in ``w``), ``op`` this merge's ``op``, passed at run time: one function serves a pair of
    ops (sum or max, min or max), which gives the PTX of the hand-written reductions it replaced (a
    compile-time switch let ptxas spill rmsnorm_f32; docs/targets/cuda.md, "Reductions written
    once"). ``ascending``: the butterfly's offsets grow from 1, so lane 0 always merges the lanes
    below its partner's first (a fold whose ties keep the earlier element); otherwise they shrink
    from half a wave. ``identity``: the state of a lane with none (``FIRST_WAVE``, ``WHOLE_WAVES``);
    None for an idempotent merge, padded with the first wave's result. ``wave``: a whole-wave
    built-in (``pk.wave.sum``) that replaces the butterfly where it is set."""
    combine: object
    op: int = 0
    extras: int = 0
    ascending: bool = False
    identity: object = None
    wave: object = None

    def with_identity(self, identity) -> "Merge":
        return dataclasses.replace(self, identity=identity)


@pk.func
def exp_diff(a: V, b: V) -> V:
    """e**(a - b) for a <= b (NaN propagates, -inf gives 0): f32 through the hardware 2**x
    (``pk.fast_exp2``, ~2 ulp, flushes below 2**-126); f64: ``pk.math.exp``."""
    if V is f64:
        return pk.math.exp(a - b)
    else:
        return pk.fast_exp2((a - b) * _LOG2E)


@pk.func
def better(want_min: bool, b: V, bi: u32, a: V, ai: u32) -> bool:
    """Is (b, bi) preferred to (a, ai): smaller (larger), or equal with a lower index. ``a`` is a
    running best that starts at the identity: a NaN never compares better, so ``a`` is never NaN (a
    NaN first element is candle-cpu's answer, settled apart). No short-circuits: no branches, and
    the parallel_range copies' loads can merge (docs/targets/cuda.md, "Reductions")."""
    return (b < a if want_min else b > a) | ((b == a) & (bi < ai))


# ------------------------------------------------------------------------------------------- merges
#: the ops a merge function serves, told apart by a run-time ``op`` argument (a constant once inlined);
#: the arg ops' codes follow (``fast_*``'s op codes)
SUM_OP, MIN_OP, MAX_OP, ARGMIN_OP, ARGMAX_OP = range(5)


@pk.func
def sum_or_max(a: V, b: V, w: Ptr[W], theirs_w: Ptr[W], op: i32) -> V:
    """a + b, or f32::max (NaN-skipping)."""
    if op == SUM_OP:
        return a + b
    return pk.fmax(a, b)


@pk.func
def first_min_or_max(a: V, b: V, w: Ptr[W], theirs_w: Ptr[W], op: i32) -> V:
    """candle-cpu's fold with ``a`` the earlier elements: ``b`` only when strictly smaller (larger)."""
    if op == MIN_OP:
        return pk.select(b < a, b, a)
    return pk.select(b > a, b, a)


@pk.func
def arg_min_or_max(a: V, b: V, w: Ptr[W], theirs_w: Ptr[W], op: i32) -> V:
    """(value, index in ``w[0]``) pairs: the smaller (larger) value, ties to the lower index."""
    if better(op == MIN_OP, b, theirs_w[0], a, w[0]):
        w[0] = theirs_w[0]
        return b
    return a


@pk.func
def online_softmax(a: V, b: V, w: Ptr[W], theirs_w: Ptr[W], op: i32) -> V:
    """(max, sum of e**(x - max) in ``w[0]``) pairs: the larger max, each sum rescaled to it."""
    m = pk.fmax(a, b)
    w[0] = w[0] * exp_diff(a, m) + theirs_w[0] * exp_diff(b, m)
    return m


def identity(t, op):
    """The identity of op (SUM_OP ... ARGMAX_OP) over dtype ``t``: what a lane with no elements holds."""
    if op == SUM_OP:
        return 0 if t.is_int else 0.0
    lo, hi = (float("-inf"), float("inf")) if t.is_float else t.int_range
    return hi if op in (MIN_OP, ARGMIN_OP) else lo


SUM = Merge(sum_or_max, SUM_OP, identity=0)
WAVE_SUM = Merge(sum_or_max, SUM_OP, identity=0, wave=pk.wave.sum)  # the lowering's own pk.wave.sum
MAX = Merge(sum_or_max, MAX_OP)
FIRST_MIN = Merge(first_min_or_max, MIN_OP, ascending=True)
FIRST_MAX = Merge(first_min_or_max, MAX_OP, ascending=True)
ARG_MIN = Merge(arg_min_or_max, MIN_OP, extras=1)
ARG_MAX = Merge(arg_min_or_max, MAX_OP, extras=1)
SOFTMAX = Merge(online_softmax, extras=1)


# ---------------------------------------------------------------------------------------- the skeleton
@pk.func
def wave_merge(x: V, w: Ptr[W], lane: u32, count: u32, *, merge, whole) -> V:
    """``merge`` over the wave's first ``count`` lanes (every lane when ``whole``: no guards), by an
    xor butterfly: the primary value returned, the extras in ``w``; the result on lane 0 (on every
    lane of a whole wave). All lanes must call it."""
    if merge.wave is not None:
        return merge.wave(x)
    else:  # (an else: the butterfly is not compiled for a built-in)
        theirs_w = pk.local.array(max(1, merge.extras), W)
        off: u32 = 1 if merge.ascending else pk.wave_size // 2
        while (off < pk.wave_size) if merge.ascending else (off > 0):
            o = pk.wave.shuffle_xor(x, off)
            for k in pk.static_range(merge.extras):
                theirs_w[k] = pk.wave.shuffle_xor(w[k], off)
            if whole:
                x = merge.combine(x, o, w, theirs_w, merge.op)
            elif (lane ^ off) < count:
                x = merge.combine(x, o, w, theirs_w, merge.op)
            off = off * 2 if merge.ascending else off // 2
        return x


@pk.func
def wave_step(x: V, w: Ptr[W], lane: u32, count: u32, present: u32, *, merge, gather) -> V:
    """``block_merge``'s wave step over ``count`` lanes: no guards where WHOLE_WAVES finds the thread's
    wave full (``present`` lanes), else guarded. (Nested ifs: an ``and`` with a compile-time operand
    adds blocks, and LLVM then lays the code out otherwise.)"""
    if gather == WHOLE_WAVES:
        if present == pk.wave_size:
            x = wave_merge(x, w, lane, count, merge=merge, whole=True)
        else:
            x = wave_merge(x, w, lane, count, merge=merge, whole=False)
    else:
        x = wave_merge(x, w, lane, count, merge=merge, whole=False)
    return x


@pk.func
def block_merge(x: V, w: Ptr[W], sv: Ptr[S], sw: Ptr[R], t: u32, nt: u32, *, merge, gather, free) -> V:
    """``merge`` over the ``nt`` threads of a block (``t`` this thread's index): each wave's butterfly,
    its result into shared memory (``sv``: MAX_WAVES primary values; ``sw``: a plane of MAX_WAVES
    for each extra), one barrier, then the waves' results merged as ``gather`` says (EVERY_WAVE,
    WHOLE_WAVES, FIRST_WAVE). ``free``: a second barrier frees the planes for the caller's next use.
    Returns the primary value; the extras are in ``w``. All threads call it. Any block size works:
    a partial last wave with fewer lanes than the block has waves (33 threads at a wave of 32) cannot
    hold a wave's result a lane, so it takes wave 0's (two more barriers, in such blocks alone)."""
    lane = t % pk.wave_size
    wid = t // pk.wave_size
    present = min(nt - wid * pk.wave_size, pk.u32(pk.wave_size))
    x = wave_step(x, w, lane, present, present, merge=merge, gather=gather)
    if nt > pk.wave_size:
        if lane == 0:
            sv[wid] = x
            for k in pk.static_range(merge.extras):
                sw[k * MAX_WAVES + wid] = w[k]
        pk.syncthreads()
        nw = (nt + pk.wave_size - 1) // pk.wave_size
        if gather == FIRST_WAVE:
            if t < pk.wave_size:
                x = merge.identity
                if t < nw:
                    x = sv[t]
                    for k in pk.static_range(merge.extras):
                        w[k] = sw[k * MAX_WAVES + t]
                x = wave_merge(x, w, lane, nw, merge=merge, whole=False)
        else:
            if gather == WHOLE_WAVES:
                x = V(0)
            if lane < nw:
                x = sv[lane]
                for k in pk.static_range(merge.extras):
                    w[k] = sw[k * MAX_WAVES + lane]
            elif gather == WHOLE_WAVES and merge.identity is None:
                x = sv[0]  # an idempotent merge's neutral value: one of the operands
            x = wave_step(x, w, lane, nw, present, merge=merge, gather=gather)
            if nt % pk.wave_size != 0 and nt % pk.wave_size < nw:
                # the partial last wave has fewer lanes than the block has waves (33 threads at a wave
                # of 32) and merged only some: it takes wave 0's result (a full wave's) through slot 0
                pk.syncthreads()
                if t == 0:
                    sv[0] = x
                    for k in pk.static_range(merge.extras):
                        sw[k * MAX_WAVES] = w[k]
                pk.syncthreads()
                x = sv[0]  # every thread: the same total as the full waves have
                for k in pk.static_range(merge.extras):
                    w[k] = sw[k * MAX_WAVES]
        if free:
            pk.syncthreads()
    if gather == WHOLE_WAVES:
        if present == pk.wave_size:
            return x
        return pk.wave.shuffle(x, 0)
    return x


@pk.func
def block_total(x: V, sm: Ptr[S], t: u32, nt: u32, *, merge, gather, free) -> V:
    """``block_merge`` of a merge with no extras (sums, max, min)."""
    no_extras = pk.local.array(1, V)
    return block_merge(x, no_extras, sm, sm, t, nt, merge=merge, gather=gather, free=free)


@pk.func
def wave_total(x: V, lane: u32, count: u32, *, merge, whole) -> V:
    """``wave_merge`` of a merge with no extras."""
    no_extras = pk.local.array(1, V)
    return wave_merge(x, no_extras, lane, count, merge=merge, whole=whole)


# ------------------------------------------------------------------------------- rows in registers
#: what one load of a row held in registers reads (16-bit elements four at a time: a warp then reads
#: 256 bytes a load); a thread's words of a row are ``cache_load``'s layout
ROW_WORD = {2: u64, 4: f32, 8: f64}


@pk.func
def row_total(v: V, sm: S, t: u32, nt: u32, *, merge, by_wave) -> V:
    """``merge`` of ``v`` over the row's threads, on each of them: a wave (no barrier; ``by_wave``, a
    compile-time flag), or the block, through slots of ``sm`` that the caller does not use again (one
    barrier, not two)."""
    if by_wave or nt <= pk.wave_size:
        return one_wave_total(v, t % pk.wave_size, min(nt, pk.u32(pk.wave_size)), merge=merge)
    else:  # (an else: with ``by_wave`` the block's code is not compiled)
        return block_total(v, sm, t, nt, merge=merge, gather=WHOLE_WAVES, free=False)


@pk.func
def one_wave_total(v: V, lane: u32, count: u32, *, merge) -> V:
    """``block_total``'s WHOLE_WAVES over a block of one wave's first ``count`` lanes, without the
    blocks of several waves (LLVM removes them for such a block; the front end would compile them
    first: most of a norm kernel's IR on the CPU)."""
    no_extras = pk.local.array(1, V)
    x = wave_step(v, no_extras, lane, count, count, merge=merge, gather=WHOLE_WAVES)
    if count == pk.wave_size:
        return x
    return pk.wave.shuffle(x, 0)


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
def word_pair(xw: ConstPtr[u64], wv: Ptr[u64], first: usize, second: usize, has_second: bool, pad: u64):
    """Words ``first`` and ``second`` of a row of 8-byte words into ``wv``; ``pad`` for a second word
    that is not in the row."""
    wv[0] = xw[first]
    wv[1] = xw[second] if has_second else pad


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
def whole_wave_sum(x: V) -> V:
    """The sum over a whole wave (every lane present), on every lane."""
    return wave_total(x, pk.u32(0), pk.u32(pk.wave_size), merge=SUM, whole=True)


@pk.func
def chan_mean_m2(x: ConstPtr[T], e: Ptr[V], n: u32, sm: S, t: u32, nt: u32, out: Ptr[V], *, cache, full):
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
    s = whole_wave_sum(s)
    c = whole_wave_sum(c)
    mean_w = s / max(c, V(1))
    m2 = zero
    for i in pk.static_range(cache // T.nbytes):
        d = e[i] - mean_w
        m2 += d * d if full else pk.select(i * nt + t < n, d * d, zero)
    m2 = whole_wave_sum(m2)
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
    mean = whole_wave_sum(sw) / V(n)
    d = sw / max(cw, V(1)) - mean
    out[0] = mean
    out[1] = whole_wave_sum(pk.fma(cw * d, d, mw))


# ---------------------------------------------------------------------------------- softmax's rows
INF = float("inf")
#: a ROW_WORD of -inf elements: what softmax reads past a row's end (it changes neither max nor sum)
NEG_INF_WORD = {bf16: 0xFF80FF80FF80FF80, f16: 0xFC00FC00FC00FC00, f32: -INF, f64: -INF}
#: the most negative finite value: a running max that starts there keeps exp(-inf - max) at 0
LOWEST = {f32: -3.4028234663852886e38, f64: -1.7976931348623157e308}


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


@pk.func
def hold_words(x: ConstPtr[T], hv: Ptr[W], ms: Ptr[V], n: u32, t: u32, nt: u32, *, cache):
    """The row's first ``cache`` bytes a lane (all there) into ``hv``, and their (max, sum of exp)."""
    cache_load(x, hv, n, t, nt, W(0), cache=cache, full=True)
    ms[0] = words_max(x, hv, V(LOWEST[V]), cache=cache)
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


@pk.func
def softmax_row_cached(x: ConstPtr[T], y: Ptr[T], n: u32, sm: Ptr[V], t: u32, nt: u32, *, cache):
    """softmax of a row that fits in its threads' registers (``row_fits``), read once: the max, the
    sum of e**(x - max), the output. Past the row's end the words hold -inf, which changes neither
    the max nor the sum, so only the loads and stores are guarded."""
    W = ROW_WORD[T.nbytes]
    v = pk.local.array(cache // W.nbytes, W)
    cache_load(x, v, n, t, nt, W(NEG_INF_WORD[T]), cache=cache, full=False)
    m = row_total(words_max(x, v, V(LOWEST[V]), cache=cache), sm, t, nt, merge=MAX, by_wave=False)
    inv = 1.0 / row_total(words_exp_sum(x, v, m, cache=cache), sm + MAX_WAVES, t, nt, merge=SUM, by_wave=False)
    store_softmax_words(x, y, v, m, inv, n, t, nt, cache=cache, full=False)


# ---------------------------------------------------------------------------------- rows on the grid
@pk.func
def spread_idle(per_block: u32, block: u32) -> bool:
    """Has ``block`` no row under ``spread_row`` (grid_dim.x rows at most)? Every thread of every
    block of such a launch runs this first, on values its whole block shares (no thread index to wait
    for): idle blocks are most of the launch (31 of 32 for a wave per row), and how soon they exit
    bounds it (docs/targets/cuda.md, "Reductions")."""
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


# ------------------------------------------------------------------------------------ a wave per row
@pk.func
def combine(a: V, b: V, op: i32) -> V:
    """SUM a + b; MIN/MAX ``b`` only when strictly smaller/larger: with ``a`` the earlier elements,
    candle-cpu's fold exactly (NaNs never taken, ties keep the first, -0 and +0 included)."""
    if op == SUM_OP:
        return a + b
    if op == MIN_OP:
        return pk.select(b < a, b, a)
    return pk.select(b > a, b, a)


@pk.func
def row_element(src: ConstPtr[T], start: usize, k: u32, num_dims: usize, info: ConstPtr[usize],
                strides: ConstPtr[usize], *, strided) -> T:
    """Element ``k`` of the row at ``start`` of a layout that is not contiguous (``strided``, through
    ``offset_of``'s u32 divisions), or of a contiguous one."""
    if strided:
        return src[offset_of(start + usize(k), num_dims, info, strides, IDX=u32)]
    p = src + start
    return p[k]


@pk.func
def wave_rows(numel: usize, el: usize, num_dims: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[U],
              t: u32, nt: u32, lane: u32, ident: V, *, op, merge, strided):
    """Rows of at most WAVE_ROWS elements, one per wave, its lanes sharing the row, then one xor
    butterfly. Contiguous rows: a grid with a block for every row (candle's) gives them to every
    waves-th block (``spread_row``); a smaller one (the wrappers') to block after block, ``block *
    waves + w``, stepping by the grid's waves; the lanes read through parallel_range (16-byte loads).

    ``strided``: rows that are not contiguous, under a grid with a block for every row and below
    2**32 elements: the wave's row of ``spread_row`` (its block is not ``spread_idle``), element by
    element through ``offset_of`` (u32 divisions). The idle blocks can then leave before anything
    reads ``info``, whatever the layout: under candle's grid they are 31 blocks in 32 at 1024 threads,
    and a round of loads of ``info`` in each cost a 1024-column ``fast_sum`` 30 % of its time
    (docs/targets/cuda.md, "candle's info"). Still a loop over the wave's rows (one row under that
    grid): its store then precedes the loop's step, and LLVM does not merge it with the caller's last
    store (one 64-bit row index live across the caller's block path, spilled)."""
    if strided:
        r = spread_row(nt // pk.wave_size, t // pk.wave_size, pk.block_idx.x)
    else:
        waves = pk.u64(nt // pk.wave_size)
        r = pk.u64(pk.block_idx.x) * waves + pk.u64(t // pk.wave_size)
        if pk.u64(pk.grid_dim.x) * el >= numel:  # a block for every row
            if spread_idle(nt // pk.wave_size, pk.block_idx.x):
                return
            r = spread_row(nt // pk.wave_size, t // pk.wave_size, pk.block_idx.x)
    strides = info + num_dims
    while r * el < numel:  # row r starts below numel (no 64-bit division: every idle thread runs this)
        start = r * el
        n = min(start + el, numel) - start  # at most WAVE_ROWS
        p = src + start
        best: V = ident
        i0: u32 = 0xFFFFFFFF  # argmin/argmax: the index of ``best``, ties to the lower index
        if strided:
            k = lane
            while k < u32(n):
                x = V(row_element(src, start, k, num_dims, info, strides, strided=True))
                if op <= MAX_OP:
                    best = combine(best, x, op)
                elif better(op == ARGMIN_OP, x, k, best, i0):
                    best = x
                    i0 = k
                k += u32(pk.wave_size)
        else:
            for j in pk.parallel_range(u32(0), u32(n), lane, u32(pk.wave_size)):
                x = V(p[j])
                if op <= MAX_OP:
                    best = combine(best, x, op)
                elif better(op == ARGMIN_OP, x, j, best, i0):
                    best = x
                    i0 = j
        index = pk.local.array(1, u32)
        index[0] = i0
        if op <= MAX_OP:
            best = wave_total(best, lane, u32(pk.wave_size), merge=merge, whole=False)
        else:
            best = wave_merge(best, index, lane, u32(pk.wave_size), merge=merge, whole=True)
        if lane == 0:
            first = V(row_element(src, start, u32(0), num_dims, info, strides, strided=strided))
            if op <= MAX_OP:
                if op != SUM_OP and first != first:  # candle-cpu: a NaN first element is never replaced
                    best = first
                dst[r] = U(best)
            else:
                if first != first:
                    index[0] = 0
                if strided:
                    last = u32(info[num_dims - 1])  # candle: the index along the last reduced dim
                    dst[r] = U(index[0] % last if last != 0 else index[0])
                else:
                    dst[r] = U(index[0])
        r += pk.u64(pk.grid_dim.x) * pk.u64(nt // pk.wave_size)


# -- several sums at once: value t of the block's totals on thread t ---------------------------------------------------
@pk.func
def halve(v: Ptr[f32], lane: u32, present: u32, *, off):
    """One step of ``wave_scatter``: lanes with bit ``off`` keep the upper half of ``v[0 .. 2 off)``
    (moved down to ``v[0 .. off)``), the others the lower, each adding its partner's copy of the half
    it keeps (none from a lane past ``present``)."""
    upper = (lane & off) != 0
    ok = (lane ^ off) < present
    for i in pk.static_range(off):
        theirs = pk.wave.shuffle_xor(pk.select(upper, v[i], v[i + off]), off)
        v[i] = pk.select(upper, v[i + off], v[i]) + pk.select(ok, theirs, f32(0))


@pk.func
def wave_scatter(v: Ptr[f32], lane: u32, present: u32, *, count) -> f32:
    """The wave's sums of ``v[0 .. count)`` (at most 32; ``v`` zero from ``count`` to the next power
    of two m), value ``lane % m`` on each lane: recursive halving (m - 1 shuffles, where a butterfly
    a value takes count log2(wave) of them: MMQ's 32 sums compiled to 160 coroutine suspends on the
    CPU target), then a butterfly over the lanes that hold the same value."""
    if count > 16:
        halve(v, lane, present, off=16)
    if count > 8:
        halve(v, lane, present, off=8)
    if count > 4:
        halve(v, lane, present, off=4)
    if count > 2:
        halve(v, lane, present, off=2)
    if count > 1:
        halve(v, lane, present, off=1)
    x = v[0]
    off: u32 = 1
    while off < count:
        off = off * 2
    while off < pk.wave_size:
        theirs = pk.wave.shuffle_xor(x, off)
        if (lane ^ off) < present:
            x += theirs
        off = off * 2
    return x


#: block_sums up to this many values a thread takes wave_scatter; more go through shared memory
SCATTER_MAX = 4


def block_sums_shared(count: int, max_waves: int) -> int:
    """The floats of shared memory ``block_sums`` of ``count`` values takes in blocks of at most
    ``max_waves`` waves: a slot a wave and value, or above SCATTER_MAX a wave's lanes x (count + 1)
    at the widest wave, 64."""
    return max_waves * count if count <= SCATTER_MAX else 64 * (count + 1)


@pk.func
def block_sums(acc: Ptr[f32], sm: Ptr[f32], t: u32, nt: u32, *, count) -> f32:
    """``acc[0 .. count)`` (count <= 32) summed over the block's ``nt`` threads: value ``t`` on
    thread ``t < count``. ``sm``: ``block_sums_shared(count, waves)`` floats. Every thread calls it;
    ``acc`` is overwritten. One value: the skeleton above (``block_total``). Up to SCATTER_MAX:
    each wave's ``wave_scatter``, then thread t adds value t of every wave (one barrier). More (MMQ's
    4 x 8): no shuffles at all (each is a coroutine suspend on the CPU target, where 32 butterflies
    made most of an 8-column MMQ's compile time): the waves in turn add their lanes' values into a plane
    of a wave's lanes x ``count`` (rows padded by one word: lanes write, and threads read down, along
    distinct banks), then thread t adds value t of every lane."""
    lane = t % pk.wave_size
    wave = t // pk.wave_size
    waves = (nt + pk.wave_size - 1) // pk.wave_size
    if count == 1:
        return block_total(acc[0], sm, t, nt, merge=SUM, gather=FIRST_WAVE, free=False)
    elif count <= SCATTER_MAX:
        for i in pk.static_range(count, SCATTER_MAX):  # the padding to a power of two
            acc[i] = 0.0
        x = wave_scatter(acc, lane, min(nt - wave * pk.wave_size, u32(pk.wave_size)), count=count)
        if waves > 1:
            if lane < count:
                sm[wave * count + lane] = x
            pk.syncthreads()
            if t < count:
                x = sm[t]
                for other in range(u32(1), waves):
                    x += sm[other * count + t]
        return x
    else:
        row = sm + lane * (count + 1)
        for w in range(u32(0), waves):
            if wave == w:
                for i in pk.static_range(count):
                    row[i] = acc[i] if w == 0 else row[i] + acc[i]
            pk.syncthreads()
        x = f32(0)
        if t < count:
            for other in range(u32(0), min(nt, u32(pk.wave_size))):
                x += sm[other * (count + 1) + t]
        return x
