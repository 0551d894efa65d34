"""candle's SORT module: ``asort_{asc,desc}_{T}(x, dst, ncols, ncols_pad)``, the argsort of each row.

Every kernel orders elements by a **total order**: the element's *sort key* (an unsigned integer
``K`` whose order is the value order, ``sort_key``), then its column index. So the result is unique:
ties, and -0.0 against 0.0, keep their index order (candle-cpu's stable ``sort_by``; candle's CUDA
bitonic network leaves them in any order), NaN sorts as the largest value (last ascending, first
descending, as torch), and a bitonic network over that order is a stable sort under any launch.

candle's launch (one block a row, ``min(ncols_pad, 1024)`` threads, ``ncols_pad * 4`` bytes of dynamic
shared memory holding the row's indices, each comparison reading its keys from ``x``) is served by
``asort``. The wrappers (``argsort``, ``sort``, ``topk``) launch their own kernels: ``sort_rows_*``
sorts rows of up to ``max_run`` columns (8192 for keys of up to 32 bits, 4096 for 64-bit keys) held
``HELD`` a thread in registers, as u64 *words* (key above column for keys of up to 32 bits; 64-bit
keys travel beside their columns). A row within one wave is sorted by a bitonic network (pairs closer
than ``HELD`` within a thread, the others by lane shuffles: ``held_sort``), several rows a block; a
row of several waves by merging (``merge_sort_held``): each thread's words sorted in registers, then
rounds that merge pairs of sorted sequences through shared memory, each thread placing ``HELD``
words found by a binary search along its diagonal (merge path). Longer rows are sorted in runs
(``sort_runs_*``) and merged pairwise, one pass per doubling: ``merge_tiles_*`` (a block a tile of
the merged words, read into shared memory and merged as a block round does) for keys of up to 32
bits, ``merge_runs_*`` (each element placed by a binary search in the other run) for 64-bit keys and
short runs (any length, any row count).
"""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, f64, f16, bf16, i32, i64, u8, u32, u64, usize

from . import SORT, kernel_name, unary
from ._common import as_device_array, launch_stream

T = pk.TypeVar("T")
K = pk.TypeVar("K")

#: the dtypes candle has argsort kernels for
DTYPES = (f32, f64, f16, bf16, u8, u32, i64)


def key_type(t):
    """The unsigned integer a dtype's sort keys take: as wide as the value, at least 32 bits."""
    return u64 if t.nbytes == 8 else u32


# ---------------------------------------------------------------------------------------------------
# device helpers
# ---------------------------------------------------------------------------------------------------
@pk.func
def sort_key(v: T, *, K, descending) -> K:
    """``v`` as an unsigned integer in the sort order: floats by their bits with the sign folded in
    (-0.0 made +0.0, every NaN the largest key), signed integers with the sign bit flipped; the
    complement for a descending sort (then NaN comes first)."""
    top = K(1) << (K.nbytes * 8 - 1)
    k = K(0)
    if T.is_float:
        F = f64 if T is f64 else f32  # f16/bf16 widen to f32 exactly
        f = F(v)
        b = pk.bitcast(f, K)
        k = pk.select(pk.isnan(f), ~K(0), pk.select(f == 0, top, pk.select((b & top) != 0, ~b, b | top)))
    elif T.is_signed:
        k = pk.bitcast(v, K) ^ top
    else:
        k = K(v)
    if descending:
        k = ~k
    return k


@pk.func
def precedes(ka: K, ia: u32, kb: K, ib: u32) -> bool:
    """(key, index) order: the whole order every kernel sorts by."""
    return ka < kb or (ka == kb and ia < ib)


@pk.func
def pair_low(q: u32, j: u32) -> u32:
    """The lower element of bitonic pair ``q`` at distance ``j`` (a power of two): ``q`` with a zero
    bit inserted at ``j``, so that ``nt`` threads cover the ``n/2`` pairs of a stage with no idle one."""
    return ((q & ~(j - 1)) << 1) | (q & (j - 1))


@pk.func
def column_key(row: ConstPtr[T], c: u32, ncols: u32, *, K, descending) -> K:
    """Column ``c``'s key, the largest for padding (``c >= ncols``: it sorts after every column)."""
    if c < ncols:
        return sort_key(row[c], K=K, descending=descending)
    return ~K(0)


#: elements a thread of the wrappers' block sort holds in registers (thread ``t``: positions ``t * HELD + s``)
HELD = 8
HELD_BITS = HELD.bit_length() - 1


@pk.func
def sort_word(k: K, c: u32, *, packed) -> u64:
    """An element as the wrappers' kernels sort it: key above column for keys of up to 32 bits (one u64
    comparison orders both; ``packed``), the key alone for 64-bit keys (the column travels beside)."""
    if packed:
        return (u64(k) << 32) | u64(c)
    return u64(k)


@pk.func
def held_column(w: Ptr[u64], c: Ptr[u32], *, s, packed) -> u32:
    """The column of the thread's word ``s``."""
    if packed:
        return u32(w[s] & 0xFFFFFFFF)
    return c[s]


@pk.func
def word_precedes(wa: u64, ca: u32, wb: u64, cb: u32, *, packed) -> bool:
    """``precedes`` on sort words (``ca``/``cb`` are read only for 64-bit keys)."""
    if packed:
        return wa < wb
    return wa < wb or (wa == wb and ca < cb)


@pk.func
def held_sort(w: Ptr[u64], c: Ptr[u32], sw: Ptr[u64], sc: Ptr[u32], t: u32, nt: u32, *, packed):
    """Sort the ``nt * HELD`` words a row's ``nt`` threads hold, ``HELD`` each (``w``, and the columns
    ``c`` for 64-bit keys). A row within one wave by a bitonic network: pairs closer than ``HELD``
    within the thread's registers, the others by lane shuffles (no barrier, no shared memory); a row
    of several waves by merging through shared memory (``merge_sort_held``; ``sw``, ``sc``: ``nt *
    HELD`` each). Every thread of the block calls it; a row's threads are consecutive lanes
    (``block_dim.x`` of them)."""
    if nt > u32(pk.wave_size):
        merge_sort_held(w, c, sw, sc, t, nt, packed=packed)
        return
    k: u32 = 2
    while k <= nt * HELD:
        lane_stages(w, c, t, k, k // 2, HELD, packed=packed)
        thread_stages(w, c, t, k, HELD, packed=packed)
        k *= 2


@pk.func
def exchange_held(w: Ptr[u64], c: Ptr[u32], ascending: bool, *, a, b, packed):
    """Order registers ``a < b`` of the thread's words for a merge in the given direction."""
    swap = word_precedes(w[b], c[b], w[a], c[a], packed=packed) == ascending
    wa = w[a]
    w[a] = pk.select(swap, w[b], wa)
    w[b] = pk.select(swap, wa, w[b])
    if not packed:
        ca = c[a]
        c[a] = pk.select(swap, c[b], ca)
        c[b] = pk.select(swap, ca, c[b])


@pk.func
def lane_stages(w: Ptr[u64], c: Ptr[u32], t: u32, k: u32, j: u32, held: u32, *, packed):
    """Stages ``j, j/2, ... >= held`` of merge ``k`` over words held ``held`` a thread (thread ``t``:
    positions ``t * held + s``, registers ``s < held`` of ``HELD``): the partner is register ``s`` of
    lane ``t ^ (j / held)``."""
    while j >= held:
        d = j // held
        lower = (t & d) == 0
        ascending = ((t * held) & k) == 0
        for s in pk.static_range(HELD):
            if s < held:
                ow = pk.wave.shuffle_xor(w[s], d)
                oc = c[s]
                if not packed:
                    oc = pk.wave.shuffle_xor(c[s], d)
                keep = word_precedes(w[s], c[s], ow, oc, packed=packed) == (lower == ascending)
                w[s] = pk.select(keep, w[s], ow)
                if not packed:
                    c[s] = pk.select(keep, c[s], oc)
        j //= 2


@pk.func
def thread_stages(w: Ptr[u64], c: Ptr[u32], t: u32, k: u32, held: u32, *, packed):
    """Stages ``held/2 ... 1`` of merge ``k`` (those below ``k``): both words in the thread's registers."""
    for h in pk.static_range(HELD_BITS):
        if (HELD >> (h + 1)) < min(held, k):
            for s in pk.static_range(HELD):
                if (s & (HELD >> (h + 1))) == 0:
                    if s < held:
                        exchange_held(w, c, ((t * held + s) & k) == 0, a=s, b=s + (HELD >> (h + 1)), packed=packed)


#: the largest word (no element's): an exhausted sequence's head in a merge. Elements' words are
#: smaller: packed words have a column below 2**31 in their low half; 64-bit keys pair it with LAST_COLUMN
NO_WORD = 0xFFFFFFFFFFFFFFFF
LAST_COLUMN = 0xFFFFFFFF


@pk.func
def slot(p: u32) -> u32:
    """Where position ``p`` of a row's words lives in shared memory: bits 0-2 swizzled with bits 4-6,
    a permutation within each aligned group of ``HELD``, so that the ``HELD`` words of consecutive
    threads (a thread stride of ``HELD`` words) meet no bank twice in a half-wave's 64-bit access,
    with no padding."""
    return p ^ ((p >> 4) & u32(HELD - 1))


@pk.func
def sort_thread(w: Ptr[u64], c: Ptr[u32], *, packed):
    """The thread's ``HELD`` words sorted ascending in its registers (a bitonic network)."""
    for kb in pk.static_range(HELD_BITS):
        for jb in pk.static_range(HELD_BITS):
            if jb <= kb:
                for s in pk.static_range(HELD):
                    if (s & ((1 << kb) >> jb)) == 0:
                        exchange_held(w, c, kb == HELD_BITS - 1 or (s & (2 << kb)) == 0, a=s,
                                      b=s + ((1 << kb) >> jb), packed=packed)


@pk.func
def merge_step(w: Ptr[u64], c: Ptr[u32], sw: Ptr[u64], sc: Ptr[u32], a0: u32, na: u32, b0: u32, nb: u32,
               diag: u32, *, packed):
    """Words ``diag .. diag + HELD - 1`` of the merge of the sorted sequences at positions ``a0 .. a0 +
    na`` and ``b0 .. b0 + nb`` of shared ``sw`` (``slot``-placed; ``sc`` their columns for 64-bit
    keys) into ``w``/``c``: how many come from the first, by a binary search along the diagonal
    (merge path), then ``HELD`` steps of a serial merge. Words are distinct, so the merge is exact
    and, ordered by (key, column), stable; past both sequences it yields ``NO_WORD``."""
    lo = diag - min(diag, nb)
    hi = min(diag, na)
    while lo < hi:
        mid = (lo + hi) // 2
        pa = slot(a0 + mid)
        pb = slot(b0 + diag - 1 - mid)
        qa: u32 = 0
        qb: u32 = 0
        if not packed:
            qa = sc[pa]
            qb = sc[pb]
        if word_precedes(sw[pa], qa, sw[pb], qb, packed=packed):
            lo = mid + 1
        else:
            hi = mid
    ia = a0 + lo
    ib = b0 + diag - lo
    ea = a0 + na
    eb = b0 + nb
    pa = slot(min(ia, ea - 1))
    pb = slot(min(ib, eb - 1))
    wa = pk.select(ia < ea, sw[pa], u64(NO_WORD))
    wb = pk.select(ib < eb, sw[pb], u64(NO_WORD))
    ca: u32 = LAST_COLUMN
    cb: u32 = LAST_COLUMN
    if not packed:
        ca = pk.select(ia < ea, sc[pa], ca)
        cb = pk.select(ib < eb, sc[pb], cb)
    for s in pk.static_range(HELD):
        take = word_precedes(wa, ca, wb, cb, packed=packed)
        w[s] = pk.select(take, wa, wb)
        if not packed:
            c[s] = pk.select(take, ca, cb)
        if s < HELD - 1:  # the next head of the sequence taken from
            ia = pk.select(take, ia + 1, ia)
            ib = pk.select(take, ib, ib + 1)
            q = pk.select(take, ia, ib)
            e = pk.select(take, ea, eb)
            p = slot(min(q, e - 1))
            v = pk.select(q < e, sw[p], u64(NO_WORD))
            wa = pk.select(take, v, wa)
            wb = pk.select(take, wb, v)
            if not packed:
                vc = pk.select(q < e, sc[p], u32(LAST_COLUMN))
                ca = pk.select(take, vc, ca)
                cb = pk.select(take, cb, vc)


@pk.func
def store_held(w: Ptr[u64], c: Ptr[u32], sw: Ptr[u64], sc: Ptr[u32], t: u32, *, packed):
    """The thread's words (positions ``t * HELD + s``) into shared memory at their slots."""
    for s in pk.static_range(HELD):
        p = slot(t * HELD + s)
        sw[p] = w[s]
        if not packed:
            sc[p] = c[s]


@pk.func
def merge_sort_held(w: Ptr[u64], c: Ptr[u32], sw: Ptr[u64], sc: Ptr[u32], t: u32, nt: u32, *, packed):
    """``held_sort`` by merging, for rows of several waves: each thread's ``HELD`` words sorted in its
    registers, then rounds through shared memory (``sw``, ``sc``: ``nt * HELD`` each) that merge
    pairs of sorted sequences of ``width`` words into ``2 * width``, thread ``t`` producing positions
    ``t * HELD ...`` of its pair (``merge_step``). n log n comparisons where the bitonic network
    makes n log² n / 2, and a round's exchanges are in shared memory rather than lane shuffles."""
    sort_thread(w, c, packed=packed)
    size = nt * HELD
    width: u32 = HELD
    while width < size:
        pk.syncthreads()  # every thread has read the last round's words
        store_held(w, c, sw, sc, t, packed=packed)
        pk.syncthreads()
        base = (t * HELD) & ~(2 * width - 1)
        merge_step(w, c, sw, sc, base, width, base + width, width, t * HELD - base, packed=packed)
        width *= 2


# ---------------------------------------------------------------------------------------------------
# candle's kernels
# ---------------------------------------------------------------------------------------------------
@pk.func
def index_stages(row: ConstPtr[T], idx: Ptr[u32], n: u32, k: u32, j: u32, last: u32, npad: u32, t: u32, nt: u32,
                 *, K, descending):
    """candle's network on the row's index array ``idx`` (shared): stages ``j, j/2, ... > last`` of merge
    ``k``, each comparison reading its two keys from the row, a barrier after each stage."""
    while j > last:
        for q in range(t, npad // 2, nt):
            a = pair_low(q, j)
            b = a + j
            ia = idx[a]
            ib = idx[b]
            ka = column_key(row, ia, n, K=K, descending=descending)
            kb = column_key(row, ib, n, K=K, descending=descending)
            if precedes(kb, ib, ka, ia) == ((a & k) == 0):  # out of order for this half's direction
                idx[a] = ib
                idx[b] = ia
        pk.syncthreads()
        j //= 2


@pk.func
def asort_held(row: ConstPtr[T], out: Ptr[u32], idx: Ptr[u32], n: u32, npad: u32, held: u32, t: u32, nt: u32, *, K,
               descending, packed):
    """candle's argsort under candle's launch (``npad == held * nt``, ``held`` at most ``HELD``): each
    thread holds ``held`` words (key and column) in registers, pairs within a wave are ordered by lane
    shuffles and in registers, and only pairs across waves go through the index array in shared
    memory, their keys read from the row as in candle's network (the ``npad * 4`` bytes candle gives
    hold no keys)."""
    w = pk.local.array(HELD, u64)
    c = pk.local.array(HELD, u32)
    for s in pk.static_range(HELD):
        if s < held:
            w[s] = sort_word(column_key(row, t * held + s, n, K=K, descending=descending), t * held + s,
                             packed=packed)
            c[s] = t * held + s
    span = min(nt, u32(pk.wave_size)) * held  # pairs closer than this are within one wave
    k: u32 = 2
    while k <= npad:
        j = k // 2
        if j >= span:
            pk.syncthreads()  # every thread has read the last merge's columns
            for s in pk.static_range(HELD):
                if s < held:
                    idx[t * held + s] = held_column(w, c, s=s, packed=packed)
            pk.syncthreads()
            index_stages(row, idx, n, k, j, span // 2, npad, t, nt, K=K, descending=descending)
            j = span // 2
            for s in pk.static_range(HELD):
                if s < held:
                    col = idx[t * held + s]
                    w[s] = sort_word(column_key(row, col, n, K=K, descending=descending), col, packed=packed)
                    c[s] = col
        lane_stages(w, c, t, k, j, held, packed=packed)
        thread_stages(w, c, t, k, held, packed=packed)
        k *= 2
    pk.syncthreads()
    for s in pk.static_range(HELD):
        if s < held:
            idx[t * held + s] = held_column(w, c, s=s, packed=packed)
    pk.syncthreads()
    for i in range(t, n, nt):  # contiguous stores
        out[i] = idx[i]


@pk.kernel
def asort(x: ConstPtr[T], dst: Ptr[u32], ncols: i32, ncols_pad: i32, *, T, K, descending, packed):
    """candle's argsort of row ``block_idx.x`` by a bitonic network, with ``ncols_pad * 4`` bytes of
    dynamic shared memory (an index a column). Under candle's launch (``min(ncols_pad, 1024)``
    threads: 1, 2, 4 or 8 columns a thread up to 8192) the columns are held in registers
    (``asort_held``); any other block runs candle's network on the index array alone, each
    comparison reading its keys from ``x``."""
    idx = pk.shared.dynamic(u32)
    n = u32(ncols)
    npad = u32(ncols_pad)
    row = x + usize(pk.block_idx.x) * usize(n)
    out = dst + usize(pk.block_idx.x) * usize(n)
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    held = npad // nt
    if held * nt == npad and 0 < held <= HELD and held & (held - 1) == 0:
        asort_held(row, out, idx, n, npad, held, t, nt, K=K, descending=descending, packed=packed)
    else:
        for c in range(t, npad, nt):
            idx[c] = c
        pk.syncthreads()
        k: u32 = 2
        while k <= npad:
            index_stages(row, idx, n, k, k // 2, 0, npad, t, nt, K=K, descending=descending)
            k *= 2
        for c in range(t, n, nt):
            out[c] = idx[c]


for _t in DTYPES:
    for _desc in (False, True):
        SORT.add(asort.instance(kernel_name("asort_desc" if _desc else "asort_asc", _t), T=_t, K=key_type(_t),
                                descending=_desc, packed=key_type(_t) is u32))


# ---------------------------------------------------------------------------------------------------
# the wrappers' kernels (extra names, see SORT_EXTRAS)
# ---------------------------------------------------------------------------------------------------
@pk.func
def load_held(x: ConstPtr[T], w: Ptr[u64], c: Ptr[u32], stage: Ptr[u32], start: usize, first: u32, m: u32, t: u32,
              nt: u32, *, K, descending, packed):
    """Thread ``t``'s ``HELD`` words of a run of ``m`` columns at ``x[start]`` (column ``first`` of its
    row); positions past ``m`` are padding (the largest key: they sort last). 32-bit keys arrive
    through shared ``stage`` (``nt * HELD * 9 / 8`` u32), so that a wave's loads are contiguous: a
    thread's ``HELD`` keys at a stride of ``HELD + 1`` (no two lanes of a read in one bank). Every
    thread of the block calls it."""
    if packed:
        for i in range(t, nt * HELD, nt):
            k = ~K(0)
            if i < m:
                k = sort_key(x[start + usize(i)], K=K, descending=descending)
            stage[i // HELD * (HELD + 1) + i % HELD] = k
        pk.syncthreads()
        for s in pk.static_range(HELD):
            w[s] = sort_word(stage[t * (HELD + 1) + s], first + t * HELD + s, packed=packed)
    else:
        for s in pk.static_range(HELD):
            p = t * HELD + s
            k = ~K(0)
            if p < m:
                k = sort_key(x[start + usize(p)], K=K, descending=descending)
            w[s] = sort_word(k, first + p, packed=packed)
            c[s] = first + p


@pk.kernel
def sort_rows_kernel(x: ConstPtr[T], rows: usize, ncols: u32, dst: Ptr[u32], *, T, K, descending, packed):
    """The argsort of rows of up to ``HELD * block_dim.x`` columns, held in registers: ``block_dim.y``
    rows a block (row ``block_idx.x * block_dim.y + thread_idx.y``), ``block_dim.x`` threads a row.
    Dynamic shared memory: ``block_dim.y * HELD * block_dim.x`` u64 words (exchanges across waves,
    then the sorted columns on their way out), then as many u32 columns for 64-bit keys."""
    nt = pk.block_dim.x
    size = usize(nt * HELD)
    y = usize(pk.thread_idx.y)
    sm = pk.shared.dynamic(u64)
    sc = pk.bitcast(sm + usize(pk.block_dim.y) * size, Ptr[u32]) + y * size
    g = usize(pk.block_idx.x) * usize(pk.block_dim.y) + y
    m: u32 = 0  # a block's spare rows past the last sort padding
    if g < rows:
        m = ncols
    t = pk.thread_idx.x
    w = pk.local.array(HELD, u64)
    c = pk.local.array(HELD, u32)
    load_held(x, w, c, pk.bitcast(sm + y * size, Ptr[u32]), g * usize(ncols), 0, m, t, nt, K=K,
              descending=descending, packed=packed)
    held_sort(w, c, sm + y * size, sc, t, nt, packed=packed)
    # the columns leave through shared memory, so that a wave's stores are contiguous: a thread's
    # HELD columns at a stride of HELD + 1 u32 (no two lanes of a store in one bank)
    stage = pk.bitcast(sm + y * size, Ptr[u32])
    pk.syncthreads()  # every thread has read its last words from shared memory
    for s in pk.static_range(HELD):
        stage[t * (HELD + 1) + s] = held_column(w, c, s=s, packed=packed)
    pk.syncthreads()
    out = dst + g * usize(ncols)
    for i in range(t, m, nt):
        out[i] = stage[i // HELD * (HELD + 1) + i % HELD]


@pk.func
def sort_run(x: ConstPtr[T], w: Ptr[u64], c: Ptr[u32], ncols: u32, run: u32, *, K, descending, packed) -> u32:
    """Load run ``block_idx.x`` of ``x`` (run ``g % per_row`` of row ``g // per_row``; ``run`` a power of
    two up to ``HELD * block_dim.x`` columns) into the block's registers ``w``/``c`` and sort it by
    merge rounds (shared memory as in ``sort_rows_kernel``: ``HELD * block_dim.x`` u64 words, then as
    many u32 columns for 64-bit keys); returns its length. Always by merging, also for a run within
    one wave: the wrappers' runs are of several waves (``max_run``), so ``held_sort``'s shuffle
    network would serve only an explicit short ``run``, and on the CPU target its shuffles (each a
    coroutine suspension) made up two thirds of these kernels' compile time."""
    nt = pk.block_dim.x
    sm = pk.shared.dynamic(u64)
    first = run_first(usize(pk.block_idx.x), ncols, run)
    m = min(run, u32(usize(ncols) - first))
    load_held(x, w, c, pk.bitcast(sm, Ptr[u32]), run_start(usize(pk.block_idx.x), ncols, run), u32(first), m,
              pk.thread_idx.x, nt, K=K, descending=descending, packed=packed)
    merge_sort_held(w, c, sm, pk.bitcast(sm + usize(nt * HELD), Ptr[u32]), pk.thread_idx.x, nt, packed=packed)
    return m


@pk.func
def run_first(g: usize, ncols: u32, run: u32) -> usize:
    """Run ``g``'s first column in its row."""
    return (g % usize((ncols + run - 1) // run)) * usize(run)


@pk.func
def run_start(g: usize, ncols: u32, run: u32) -> usize:
    """Run ``g``'s first element in the array."""
    return (g // usize((ncols + run - 1) // run)) * usize(ncols) + run_first(g, ncols, run)


@pk.kernel
def sort_runs_words(x: ConstPtr[T], ncols: u32, run: u32, words_out: Ptr[u64], *, T, K, descending):
    """The first pass over rows longer than a run, keys of up to 32 bits: each run sorted (one a
    block), its words (key above column) written at the run's place for ``merge_words``."""
    w = pk.local.array(HELD, u64)
    c = pk.local.array(HELD, u32)
    m = sort_run(x, w, c, ncols, run, K=K, descending=descending, packed=True)
    out = words_out + run_start(usize(pk.block_idx.x), ncols, run)
    for s in pk.static_range(HELD):
        if pk.thread_idx.x * HELD + s < m:
            out[pk.thread_idx.x * HELD + s] = w[s]


@pk.kernel
def sort_runs_pairs(x: ConstPtr[T], ncols: u32, run: u32, keys_out: Ptr[u64], cols_out: Ptr[u32], *, T, K,
                    descending):
    """``sort_runs_words`` for 64-bit keys: each sorted run's keys and columns, for ``merge_pairs``."""
    w = pk.local.array(HELD, u64)
    c = pk.local.array(HELD, u32)
    m = sort_run(x, w, c, ncols, run, K=K, descending=descending, packed=False)
    start = run_start(usize(pk.block_idx.x), ncols, run)
    for s in pk.static_range(HELD):
        if pk.thread_idx.x * HELD + s < m:
            keys_out[start + usize(pk.thread_idx.x * HELD + s)] = w[s]
            cols_out[start + usize(pk.thread_idx.x * HELD + s)] = c[s]


@pk.func
def merged_place(i: usize, ncols: u32, run: u32, words: ConstPtr[u64], cols: ConstPtr[u32], *, packed) -> usize:
    """Where element ``i`` goes when runs ``2p`` and ``2p + 1`` of its row (``run`` columns each,
    sorted) merge into one: its rank in its own run plus the number of elements of the other run that
    precede it (a binary search). (key, column) pairs are distinct, so the places are a permutation
    and the merge is stable. ``cols`` is read only for 64-bit keys (not ``packed``)."""
    base = (i // usize(ncols)) * usize(ncols)
    c = u32(i - base)
    own = c // run
    pair = (own & ~u32(1)) * run  # the merged run's first column
    lo = pair
    if own % 2 == 0:
        lo = pair + run
    hi = min(lo + run, ncols)
    lo = min(lo, ncols)
    first = lo
    w = words[i]
    wc: u32 = 0
    if not packed:
        wc = cols[i]
    while lo < hi:
        mid = lo + (hi - lo) // 2
        mc: u32 = 0
        if not packed:
            mc = cols[base + usize(mid)]
        if word_precedes(words[base + usize(mid)], mc, w, wc, packed=packed):
            lo = mid + 1
        else:
            hi = mid
    return base + usize(pair + (c - own * run) + (lo - first))


@pk.kernel
def merge_words(total: usize, ncols: u32, run: u32, words_in: ConstPtr[u64], words_out: Ptr[u64]):
    """One merge pass over words (keys of up to 32 bits): runs of ``run`` columns into ``2 * run``."""
    for i in pk.grid_stride(total):  # (the column view is never read for words)
        words_out[merged_place(i, ncols, run, words_in, pk.bitcast(words_in, ConstPtr[u32]), packed=True)] = \
            words_in[i]


@pk.kernel
def merge_words_last(total: usize, ncols: u32, run: u32, words_in: ConstPtr[u64], dst: Ptr[u32]):
    """The last merge pass (``2 * run >= ncols``): only the columns, the argsort's result."""
    for i in pk.grid_stride(total):
        dst[merged_place(i, ncols, run, words_in, pk.bitcast(words_in, ConstPtr[u32]), packed=True)] = \
            u32(words_in[i] & 0xFFFFFFFF)


@pk.kernel
def merge_pairs(total: usize, ncols: u32, run: u32, keys_in: ConstPtr[u64], cols_in: ConstPtr[u32],
                keys_out: Ptr[u64], cols_out: Ptr[u32]):
    """``merge_words`` for 64-bit keys, which travel with their columns."""
    for i in pk.grid_stride(total):
        dest = merged_place(i, ncols, run, keys_in, cols_in, packed=False)
        keys_out[dest] = keys_in[i]
        cols_out[dest] = cols_in[i]


@pk.kernel
def merge_pairs_last(total: usize, ncols: u32, run: u32, keys_in: ConstPtr[u64], cols_in: ConstPtr[u32],
                     dst: Ptr[u32]):
    """``merge_words_last`` for 64-bit keys."""
    for i in pk.grid_stride(total):
        dst[merged_place(i, ncols, run, keys_in, cols_in, packed=False)] = cols_in[i]


#: threads a block of ``merge_tiles``; each places HELD words of the merged runs
MERGE_THREADS = 256
#: merged words a block of ``merge_tiles`` places
TILE = MERGE_THREADS * HELD


@pk.func
def split(words: ConstPtr[u64], a0: usize, na: u32, b0: usize, nb: u32, diag: u32) -> u32:
    """How many of the first ``diag`` words of the merge of the sorted (distinct) ``words[a0 .. a0 +
    na]`` and ``words[b0 .. b0 + nb]`` come from the first (merge path: a binary search along the
    diagonal)."""
    lo = diag - min(diag, nb)
    hi = min(diag, na)
    while lo < hi:
        mid = (lo + hi) // 2
        if words[a0 + usize(mid)] < words[b0 + usize(diag - 1 - mid)]:
            lo = mid + 1
        else:
            hi = mid
    return lo


@pk.kernel
def merge_tiles(ncols: u32, run: u32, words_in: ConstPtr[u64], words_out: Ptr[u64], dst: Ptr[u32], *, last):
    """One merge pass over words (keys of up to 32 bits) with ``2 * run >= TILE``: runs of ``run``
    columns merged pairwise into ``2 * run``, ``TILE`` merged words a block of ``MERGE_THREADS``
    (block ``b``: tile ``b % tiles`` of row ``b // tiles``). Two threads find where the tile's first
    and last merged words come from (``split``, in global memory); the block reads those stretches of
    both runs into shared memory (contiguous loads), each thread merges ``HELD`` of them
    (``merge_step``) and the tile leaves through shared memory (contiguous stores): the words, or for
    the ``last`` pass only their columns, into ``dst``. Dynamic shared memory: ``TILE`` words and two
    u32."""
    tiles = (ncols + u32(TILE - 1)) // u32(TILE)
    b = pk.block_idx.x
    row = usize(b // tiles)
    o0 = (b % tiles) * u32(TILE)
    n = min(u32(TILE), ncols - o0)
    base = o0 & ~(2 * run - 1)  # the merged pair's first column
    na = min(run, ncols - base)
    nb = min(run, ncols - base - na)
    a0 = row * usize(ncols) + usize(base)
    b0 = a0 + usize(na)
    sm = pk.shared.dynamic(u64)
    splits = pk.bitcast(sm + usize(TILE), Ptr[u32])
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    if t < 2:
        splits[t] = split(words_in, a0, na, b0, nb, o0 - base + pk.select(t == 0, u32(0), n))
    pk.syncthreads()
    i0 = splits[0]
    la = splits[1] - i0  # the tile's words from the first run; n - la from the second
    from_a = a0 + usize(i0)
    from_b = b0 + usize(o0 - base - i0)
    for q in range(t, n, nt):
        sm[slot(q)] = words_in[from_a + usize(q)] if q < la else words_in[from_b + usize(q - la)]
    pk.syncthreads()
    w = pk.local.array(HELD, u64)
    c = pk.local.array(HELD, u32)
    merge_step(w, c, sm, pk.bitcast(sm, Ptr[u32]), 0, la, la, n - la, min(t * HELD, n), packed=True)
    pk.syncthreads()
    store_held(w, c, sm, pk.bitcast(sm, Ptr[u32]), t, packed=True)
    pk.syncthreads()
    out = row * usize(ncols) + usize(o0)
    for q in range(t, n, nt):
        if last:
            dst[out + usize(q)] = u32(sm[slot(q)] & 0xFFFFFFFF)
        else:
            words_out[out + usize(q)] = sm[slot(q)]


@pk.kernel(moves=("T",))
def take_rows(total: usize, ncols: u32, k: u32, x: ConstPtr[T], order: ConstPtr[u32], values: Ptr[T], *, T):
    """``values[r, c] = x[r, order[r, c]]`` for the first ``k`` columns of each row of ``order`` (rows
    of ``ncols``): ``sort``'s and ``topk``'s values."""
    for i in pk.grid_stride(total):
        r = i // usize(k)
        values[i] = x[r * usize(ncols) + usize(order[r * usize(ncols) + (i - r * usize(k))])]


@pk.kernel
def take_columns(total: usize, ncols: u32, k: u32, order: ConstPtr[u32], out: Ptr[u32]):
    """The first ``k`` columns of each row of ``order``: ``topk``'s indices."""
    for i in pk.grid_stride(total):
        r = i // usize(k)
        out[i] = order[r * usize(ncols) + (i - r * usize(k))]


#: the wrappers' kernels, exported beside candle's names (a candle backend never asks for them):
#: ``sort_runs_*`` and the merges by key width (``merge_*_u32``: words; ``merge_*_u64``: key and column)
SORT_EXTRAS = []
for _t in DTYPES:
    _packed = key_type(_t) is u32
    for _desc in (False, True):
        _dir = "desc" if _desc else "asc"
        SORT_EXTRAS.append(kernel_name(f"sort_rows_{_dir}", _t))
        SORT.add(sort_rows_kernel.instance(SORT_EXTRAS[-1], T=_t, K=key_type(_t), descending=_desc, packed=_packed))
        SORT_EXTRAS.append(kernel_name(f"sort_runs_{_dir}", _t))
        SORT.add((sort_runs_words if _packed else sort_runs_pairs).instance(
            SORT_EXTRAS[-1], T=_t, K=key_type(_t), descending=_desc))
    SORT_EXTRAS.append(kernel_name("take_rows", _t))
    SORT.add(take_rows.instance(SORT_EXTRAS[-1], T=_t))
for _name, _kernel in (("merge_runs_u32", merge_words), ("merge_last_u32", merge_words_last),
                       ("merge_runs_u64", merge_pairs), ("merge_last_u64", merge_pairs_last)):
    SORT_EXTRAS.append(_name)
    SORT.add(_kernel.instance(_name))
for _last in (False, True):
    SORT_EXTRAS.append("merge_tiles_last_u32" if _last else "merge_tiles_u32")
    SORT.add(merge_tiles.instance(SORT_EXTRAS[-1], last=_last))
SORT_EXTRAS.append("take_columns_u32")
SORT.add(take_columns.instance(SORT_EXTRAS[-1]))


# ---------------------------------------------------------------------------------------------------
# host wrappers
# ---------------------------------------------------------------------------------------------------
#: the longest row (or run of a longer row) one block sorts: 1024 threads holding HELD each, 64 KiB of
#: shared memory for keys of up to 32 bits (u64 words), 4096 for 64-bit keys (48 KiB of words and
#: columns): what every target lets a block have (CUDA past 48 KiB by the runtime's opt-in)
MAX_RUN = 8192
MAX_RUN_WIDE = 4096


def max_run(dtype) -> int:
    """The longest row one block of the wrappers sorts for this dtype."""
    return MAX_RUN if key_type(dtype) is u32 else MAX_RUN_WIDE


#: threads a block of ``sort_rows_*`` holding several short rows (one row per ``block_dim.x`` threads)
ROW_BLOCK = 256
#: indices are u32 (candle's); a row longer than this cannot be described
MAX_COLS = 1 << 31


def next_power_of_two(v: int) -> int:
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


def _check(x, dim: int, what: str):
    """``x`` as a device array and ``dim`` made non-negative, or a clear error."""
    x = as_device_array(x)
    if x.dtype not in DTYPES:
        raise TypeError(f"{what}: no sort kernel for dtype {x.dtype}; dtypes: {', '.join(map(str, DTYPES))}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{what}: dim must be an int, got {dim!r}")
    ndim = max(x.ndim, 1)
    if not -ndim <= dim < ndim:
        raise ValueError(f"{what}: dim {dim} out of range for a {x.ndim}-d array (expected -{ndim} <= dim < {ndim})")
    dim = int(dim) % ndim
    if x.ndim and x.shape[dim] >= MAX_COLS:
        raise ValueError(f"{what}: {x.shape[dim]} elements along dim {dim}; u32 indices allow at most {MAX_COLS - 1}")
    return x, dim


def _rows_last(x, dim: int):
    """``x`` with ``dim`` swapped with the last dim, contiguous (candle's argsort sorts contiguous rows)."""
    if x.ndim == 0:
        return x.reshape(1)
    if dim != x.ndim - 1:
        x = x.transpose(dim, -1)
    if not x.is_contiguous:
        x = unary.copy(x)
    return x


def _restore(a, dim: int, shape: tuple):
    """Undo ``_rows_last`` on a result ``a`` (whose last dim may be shorter): contiguous, in ``x``'s order."""
    if not shape:
        return a.reshape(()) if a.size == 1 else a
    if dim != len(shape) - 1:
        a = unary.copy(a.transpose(dim, -1))
    return a


def asort_launch(x, descending: bool = False):
    """candle-core's ``arg_sort_last_dim`` launch of ``asort_*``: contiguous ``x``, one block a row of
    ``min(ncols_pad, 1024)`` threads, ``ncols_pad * 4`` bytes of dynamic shared memory, ``ncols_pad``
    the next power of two. On a GPU the row's indices must fit one block's shared memory (candle opts in
    to no more than 48 KiB: rows of up to 8192; pykern's CUDA runtime opts in up to the GPU's limit);
    the CPU runs any row."""
    x = as_device_array(x)
    if not x.is_contiguous or x.ndim == 0:
        raise ValueError(f"asort: candle's launch takes a contiguous array of at least one dim, got {x!r}")
    if x.dtype not in DTYPES:
        raise TypeError(f"asort: no kernel for dtype {x.dtype}; dtypes: {', '.join(map(str, DTYPES))}")
    out = x.device.empty(x.shape, u32)
    ncols = x.shape[-1]
    if x.size == 0:
        return out
    ncols_pad = next_power_of_two(ncols)
    fn = x.device.get_or_load_func(kernel_name("asort_desc" if descending else "asort_asc", x.dtype), SORT)
    fn[(x.size // ncols, 1, 1), (min(ncols_pad, 1024), 1, 1), None, ncols_pad * 4](x, out, ncols, ncols_pad)
    return out


def shared_bytes(key) -> int:
    """Shared memory a held element takes: its u64 word, and its u32 column beside it for 64-bit keys."""
    return 8 if key is u32 else 12


def rows_launch(rows: int, ncols: int, dtype) -> tuple[tuple, tuple, None, int]:
    """``sort_rows_*``'s launch for ``rows`` rows of ``ncols`` (up to ``HELD * 1024``): ``HELD`` columns
    a thread, rows of fewer than ROW_BLOCK threads several a block; (grid, block, stream, shared)."""
    threads = max(1, next_power_of_two(ncols) // HELD)
    per_block = max(1, min(ROW_BLOCK // threads, next_power_of_two(rows)))
    shared = per_block * threads * HELD * shared_bytes(key_type(dtype))  # the columns leave through it too
    return (-(-rows // per_block), 1, 1), (threads, per_block, 1), None, shared


def sort_rows(x, descending: bool = False, run: int | None = None):
    """The wrappers' argsort of the rows of contiguous ``x`` (any length): rows of up to ``run`` columns
    (a power of two; ``max_run`` by default) by ``sort_rows_*`` (several a block when short), longer
    ones sorted in runs of ``run`` by ``sort_runs_*`` and merged pairwise, one pass per doubling:
    ``merge_tiles`` (a block a tile of merged words) for keys of up to 32 bits and runs of at least
    half a tile, else ``merge_runs`` (a thread an element)."""
    if run is not None and (run < 1 or run & (run - 1) or run > HELD * 1024):
        raise ValueError(f"sort_rows: run must be a power of two up to {HELD * 1024} (a block's {HELD} "
                         f"elements a thread), got {run}")
    x = as_device_array(x)
    if x.dtype not in DTYPES:
        raise TypeError(f"sort_rows: no sort kernel for dtype {x.dtype}; dtypes: {', '.join(map(str, DTYPES))}")
    if not x.is_contiguous or x.ndim == 0:
        raise ValueError(f"sort_rows: takes a contiguous array of at least one dim (rows along the last), got {x!r}")
    dev = x.device
    out = dev.empty(x.shape, u32)
    ncols = x.shape[-1]
    if x.size == 0:
        return out
    rows = x.size // ncols
    key = key_type(x.dtype)
    direction = "desc" if descending else "asc"
    if run is None:
        run = max_run(x.dtype)
    if ncols <= run:
        fn = dev.get_or_load_func(kernel_name(f"sort_rows_{direction}", x.dtype), SORT)
        fn[rows_launch(rows, ncols, x.dtype)](x, rows, ncols, out)
        return out
    packed = key is u32
    words = [dev.empty(x.shape, u64), dev.empty(x.shape, u64)]  # key above column, or the 64-bit key
    cols = [dev.empty(x.shape, u32), dev.empty(x.shape, u32)] if not packed else [None, None]
    outs = lambda: [words[0]] if packed else [words[0], cols[0]]  # noqa: E731  (a pass's input)
    threads = max(1, run // HELD)
    shared = threads * HELD * shared_bytes(key)  # the keys arrive through it too
    fn = dev.get_or_load_func(kernel_name(f"sort_runs_{direction}", x.dtype), SORT)
    fn[(rows * -(-ncols // run), 1, 1), (threads, 1, 1), None, shared](x, ncols, run, *outs())
    grid, block = launch_stream(x.size, words[0])
    tiles = ((rows * -(-ncols // TILE), 1, 1), (MERGE_THREADS, 1, 1), None, TILE * 8 + 8)
    while True:
        last = 2 * run >= ncols
        if packed and 2 * run >= TILE:
            merge = dev.get_or_load_func("merge_tiles_last_u32" if last else "merge_tiles_u32", SORT)
            merge[tiles](ncols, run, words[0], words[1], out)
        elif last:
            dev.get_or_load_func(kernel_name("merge_last", key), SORT)[grid, block](x.size, ncols, run, *outs(), out)
        else:
            merge = dev.get_or_load_func(kernel_name("merge_runs", key), SORT)
            merge[grid, block](x.size, ncols, run, *outs(), *([words[1]] if packed else [words[1], cols[1]]))
        if last:
            return out
        words.reverse()
        cols.reverse()
        run *= 2


def _argsort_rows(x, dim: int, descending: bool, candle_shape: bool, what: str):
    x, dim = _check(x, dim, what)
    rows = _rows_last(x, dim)
    order = asort_launch(rows, descending) if candle_shape else sort_rows(rows, descending)
    return x, dim, rows, order


def argsort(x, dim: int = -1, descending: bool = False, candle_shape: bool = False):
    """Indices (u32) that sort ``x`` along ``dim``, stably: equal values (and -0.0, 0.0) keep their order,
    NaN is the largest value (last ascending, first descending). Any dtype of ``DTYPES``, any layout,
    any length. ``candle_shape`` launches candle's ``asort_*`` as candle does (rows it can hold)."""
    x, dim, _, order = _argsort_rows(x, dim, descending, candle_shape, "argsort")
    return _restore(order, dim, x.shape)


def _take(rows, order, k: int):
    """The values of ``rows`` at the first ``k`` columns of ``order`` (``take_rows``)."""
    values = rows.device.empty(rows.shape[:-1] + (k,), rows.dtype)
    if values.size:
        fn = rows.device.get_or_load_func(kernel_name("take_rows", rows.dtype), SORT)
        fn[launch_stream(values.size, rows, order)](values.size, rows.shape[-1], k, rows, order, values)
    return values


def sort(x, dim: int = -1, descending: bool = False, candle_shape: bool = False):
    """``(values, indices)`` of ``x`` sorted along ``dim`` (the order of ``argsort``)."""
    x, dim, rows, order = _argsort_rows(x, dim, descending, candle_shape, "sort")
    values = _take(rows, order, rows.shape[-1])
    return _restore(values, dim, x.shape), _restore(order, dim, x.shape)


def topk(x, k: int, dim: int = -1, largest: bool = True):
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) elements along ``dim``,
    in sorted order; ties go to the lower index, NaN counts as the largest value (torch's ``topk``)."""
    x, dim = _check(x, dim, "topk")
    n = x.shape[dim] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
        raise ValueError(f"topk: k must be an int in [0, {n}] (the size of dim {dim}), got {k!r}")
    rows = _rows_last(x, dim)
    order = sort_rows(rows, descending=largest)
    k = int(k)
    values = _take(rows, order, k)
    indices = order
    if k < rows.shape[-1]:
        indices = x.device.empty(values.shape, u32)
        if indices.size:
            x.device.get_or_load_func("take_columns_u32", SORT)[launch_stream(indices.size, order)](
                indices.size, rows.shape[-1], k, order, indices)
    return _restore(values, dim, x.shape), _restore(indices, dim, x.shape)


__all__ = ["argsort", "sort", "topk", "asort_launch", "sort_rows", "rows_launch", "sort_key", "asort",
           "sort_rows_kernel", "sort_runs_words", "sort_runs_pairs", "merge_words", "merge_words_last", "merge_pairs",
           "merge_pairs_last", "take_rows", "take_columns", "DTYPES", "SORT_EXTRAS", "MAX_RUN", "HELD"]
