"""candle's INDEXING module: ``is`` (index_select), ``gather``, ``ia`` (index_add), ``s`` (scatter) and
``sa`` (scatter_add), ``{op}_{I}_{T}`` for every index type ``I`` and value type ``T``.

Semantics follow candle's CPU backend where its CUDA kernels differ (docs/compat.md, "indexing"):

* an index equal to the index type's largest value is the *sentinel* (no element): ``is``/``gather``
  write 0 for it, ``ia``/``s``/``sa`` skip it;
* any other index outside the dim is never followed: ``is``/``gather`` write 0, the others skip it
  (candle's CUDA kernels trap on a device assert; its f8 ``ia``/``sa`` write out of bounds). The host
  wrappers below raise ``ValueError`` for such indices before launching;
* ``is`` reads its ids through the ids layout in ``info`` (candle's CUDA kernel applies those
  strides to the *source* offset instead);
* ``ia``/``s``/``sa`` give each thread one (pre, post) column and walk the indexed dim in order, as
  candle does: no atomics, the same result on every run; ``s`` keeps the last write of a duplicate.

The wrappers (below the kernels) also have kernels of their own that candle never asks for:
``is_tiles_*``/``is_words_*``/``is_rows_*`` copy whole rows, ``gather_shared_*`` gathers from a row staged in
shared memory, ``ia_sorted_*``/``sa_sorted_*`` add in candle's order with the ids' positions
(``ids_positions_*``) argsorted on the device, ``sa_atomic_*``/``ia_atomic_*`` add with one
thread per source element where the order of the adds cannot matter (integers) or the caller allows
it, and ``s_rows_*`` / ``s_tiles_*`` / ``s_sort_*`` + ``s_runs_*`` / ``s_winners_*`` (+
``s_winners_flat``) + ``s_from_winners_*`` scatter with candle's last writer found by atomic maxima
of the source index (in shared memory a range of a row or of a tile of columns at a time, a long
row's sources sorted by range first, or in a table the size of the output), which any order of the
atomics leaves the same.
"""
from __future__ import annotations

import math

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, usize

from pykern.runtime.array import DeviceArray

from . import INDEXING, kernel_name, sort
from ._common import STREAM_BLOCK, as_device_array, is_contiguous, launch_1d, launch_stream, strided_index
from .conv import div_by, divisor_magic
from .fill import const_set
from .unary import copy as contiguous_copy

I = pk.TypeVar("I")
T = pk.TypeVar("T")
W = pk.TypeVar("W")

#: candle's index dtypes and value dtypes; its f8 kernels (``_f8_e4m3``) take two more index types
INDICES = (pk.u8, pk.u32, pk.i64)
VALUES = (pk.f32, pk.f64, pk.f16, pk.bf16, pk.u8, pk.u32, pk.i64)
F8_INDICES = (pk.i16, pk.i32, pk.i64, pk.u32, pk.u8)
#: a grid-stride index below this fits 32 bits: its divisions are 32-bit (several times cheaper on GPUs)
U32_LIMIT = 0xFFFFFFFF
#: gather along the last dim divides by multiplication (``conv.div_by``) where each thread has this many
#: elements or more: its magic number costs about as much as a few divisions (candle's one element a
#: thread keeps the divisions); the wrappers launch GATHER_TILES tiles a thread
GATHER_MAGIC_MIN = 8
GATHER_TILES = 4
#: u64 words a thread of ``select_words`` moves per row it visits
ROW_WORDS = 8
#: ``is_tiles_*`` stores its output ``evict_first`` (``copy_row_tiles``)
SELECT_EVICT = True



@pk.func
def position(idx: I, size: usize) -> usize:
    """``idx`` as a position along a dim of ``size`` entries, or ``size`` (no position) for the
    sentinel (the index type's largest value) and for any index outside the dim, negative ones
    included (they convert to huge unsigned values, as in candle's ``size_t`` comparison)."""
    k = usize(idx)
    return pk.select(idx != I(I.int_range[1]) and k < size, k, size)


@pk.func
def select_element(i: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], src_dim: usize, ids_dim: usize,
                   right: usize, *, W):
    """``out[i]`` of an index_select with dense ids; the decomposition of ``i`` in ``W`` arithmetic."""
    right_i = W(i) % W(right)
    rest = W(i) // W(right)
    k = position(ids[usize(rest % W(ids_dim))], src_dim)
    out[i] = inp[(usize(rest // W(ids_dim)) * src_dim + k) * right + usize(right_i)] if k < src_dim else T(0)


@pk.kernel(moves=("T",))
def index_select(numel: usize, num_dims: usize, info: ConstPtr[usize], ids: ConstPtr[I], inp: ConstPtr[T],
                 out: Ptr[T], left_size: usize, src_dim_size: usize, ids_dim_size: usize, right_size: usize,
                 *, I, T):
    if info is None or is_contiguous(num_dims, info, info + num_dims):  # dense ids: no loop in the body
        if numel <= U32_LIMIT:
            for i in pk.grid_stride(numel):
                select_element(i, ids, inp, out, src_dim_size, ids_dim_size, right_size, W=pk.u32)
        else:
            for i in pk.grid_stride(numel):
                select_element(i, ids, inp, out, src_dim_size, ids_dim_size, right_size, W=usize)
        return
    for i in pk.grid_stride(numel):  # ids element (i / right) % ids_dim through the ids layout
        k = position(ids[strided_index((i // right_size) % ids_dim_size, num_dims, info, info + num_dims)], src_dim_size)
        src = ((i // (right_size * ids_dim_size)) * src_dim_size + k) * right_size + i % right_size
        out[i] = inp[src] if k < src_dim_size else T(0)


@pk.func
def gather_element(i: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], src_dim: usize, ids_dim: usize,
                   right: usize, *, W):
    """``out[i]`` of a gather: ``ids`` has the output's shape; ``W`` arithmetic as in select_element."""
    k = position(ids[i], src_dim)
    pre = W(i) // (W(right) * W(ids_dim))
    out[i] = inp[(usize(pre) * src_dim + k) * right + usize(W(i) % W(right))] if k < src_dim else T(0)


@pk.func
def gather_last(i: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], src_dim: usize, ids_dim: pk.u32,
                magic: pk.u64):
    """gather_element along the last dim (``right`` 1) in u32: the row by a multiplication (``div_by``)."""
    k = position(ids[i], src_dim)
    out[i] = inp[usize(div_by(pk.u32(i), ids_dim, magic)) * src_dim + k] if k < src_dim else T(0)


@pk.kernel(moves=("T",))
def gather(numel: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], left_size: usize, src_dim_size: usize,
           ids_dim_size: usize, right_size: usize, *, I, T):
    threads = usize(pk.block_dim.x) * usize(pk.grid_dim.x)
    if numel <= U32_LIMIT and right_size == 1 and ids_dim_size > 0 and numel >= threads * GATHER_MAGIC_MIN:
        # along the last dim, 8 elements a thread or more (the wrappers' launch): the magic number pays
        m = divisor_magic(ids_dim_size)
        for i in pk.grid_stride(numel):
            gather_last(i, ids, inp, out, src_dim_size, pk.u32(ids_dim_size), m)
    elif numel <= U32_LIMIT:
        for i in pk.grid_stride(numel):
            gather_element(i, ids, inp, out, src_dim_size, ids_dim_size, right_size, W=pk.u32)
    else:
        for i in pk.grid_stride(numel):
            gather_element(i, ids, inp, out, src_dim_size, ids_dim_size, right_size, W=usize)


@pk.kernel
def index_add(ids: ConstPtr[I], ids_dim_size: usize, inp: ConstPtr[T], out: Ptr[T], left_size: usize,
              src_dim_size: usize, dst_dim_size: usize, right_size: usize, *, I, T):
    for c in pk.grid_stride(left_size * right_size):  # one (pre, post) column a thread, ids in order
        pre = c // right_size
        post = c % right_size
        for j in range(ids_dim_size):
            k = position(ids[j], dst_dim_size)
            if k < dst_dim_size:
                dst = (pre * dst_dim_size + k) * right_size + post
                out[dst] = out[dst] + inp[(pre * ids_dim_size + j) * right_size + post]


@pk.kernel
def scatter(ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], left_size: usize, src_dim_size: usize,
            dst_dim_size: usize, right_size: usize, *, I, T, accumulate):
    for c in pk.grid_stride(left_size * right_size):  # one (pre, post) column a thread, src in order
        pre = c // right_size
        post = c % right_size
        for j in range(src_dim_size):
            src = (pre * src_dim_size + j) * right_size + post
            k = position(ids[src], dst_dim_size)
            if k < dst_dim_size:
                dst = (pre * dst_dim_size + k) * right_size + post
                if accumulate:
                    out[dst] = out[dst] + inp[src]
                else:
                    out[dst] = inp[src]  # a later j overwrites: the last duplicate wins


@pk.func
def copy_rows(rows: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], src_dim: usize, ids_dim: usize,
              right: usize, *, W, per_tile):
    """Output rows r, r + groups, ... by groups of ``per_row`` workers, one per ``per_tile`` elements of a
    row (a 16-byte tile on GPUs), copy2d's scheme: the row's source found once, ``W`` arithmetic."""
    total = W(pk.block_dim.x) * W(pk.grid_dim.x)
    per_row = min((W(right) + (per_tile - 1)) // per_tile, total)
    groups = total // per_row
    r = W(pk.global_id()) // per_row
    w = usize(W(pk.global_id()) - r * per_row)
    if r >= groups:
        return
    while r < W(rows):
        k = position(ids[usize(r % W(ids_dim))], src_dim)
        dst = out + usize(r) * right
        if k < src_dim:
            src = inp + (usize(r // W(ids_dim)) * src_dim + k) * right
            for j in pk.parallel_range(usize(0), right, w, usize(per_row)):
                dst[j] = src[j]
        else:
            for j in pk.parallel_range(usize(0), right, w, usize(per_row)):
                dst[j] = T(0)
        r += groups


@pk.kernel(moves=("T",))
def select_rows(rows: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], src_dim: usize, ids_dim: usize,
                right: usize, *, I, T, per_tile):
    """index_select as whole-row copies (the wrappers' launch for rows of ``ROW_BYTES`` or more, dense
    ids): one division per row, not per element, and vector accesses where the rows are aligned.
    Threads past the last whole group idle."""
    if rows <= U32_LIMIT and usize(pk.block_dim.x) * usize(pk.grid_dim.x) <= U32_LIMIT:
        copy_rows(rows, ids, inp, out, src_dim, ids_dim, right, W=pk.u32, per_tile=per_tile)
    else:
        copy_rows(rows, ids, inp, out, src_dim, ids_dim, right, W=usize, per_tile=per_tile)


@pk.kernel
def add_atomic(numel: usize, ids: ConstPtr[I], ids_dim_size: usize, inp: ConstPtr[T], out: Ptr[T],
               src_dim_size: usize, dst_dim_size: usize, right_size: usize, *, I, T, per_element):
    """scatter_add (``per_element``: ids has src's shape) or index_add (ids along the dim) with one
    thread per source element and an atomic add: the wrappers' launch where the order of the adds
    cannot change the result (integers), or where the caller allows it (``deterministic=False``)."""
    for i in pk.grid_stride(numel):
        j = i if per_element else (i // right_size) % ids_dim_size
        k = position(ids[j], dst_dim_size)
        if k < dst_dim_size:
            pre = i // (src_dim_size * right_size)
            pk.atomic.add(out, (pre * dst_dim_size + k) * right_size + i % right_size, inp[i])


@pk.kernel
def index_add_segments(order: ConstPtr[usize], starts: ConstPtr[usize], rows: ConstPtr[usize], segments: usize,
                       ids_dim_size: usize, inp: ConstPtr[T], out: Ptr[T], left_size: usize, dst_dim_size: usize,
                       right_size: usize, *, T):
    """index_add with the ids grouped by destination row on the host (a stable sort: ``order[starts[s]:
    starts[s + 1]]`` are the j, ascending, that add into row ``rows[s]``): one thread per (pre, row,
    post) adds its sources in the order of j, each add rounded to T as candle's column walk does, so
    the sums are candle's bit for bit with every destination row in parallel."""
    for c in pk.grid_stride(left_size * segments * right_size):
        post = c % right_size
        s = (c // right_size) % segments
        pre = c // (right_size * segments)
        dst = (pre * dst_dim_size + rows[s]) * right_size + post
        acc = out[dst]
        for t in range(starts[s], starts[s + 1]):
            acc = T(acc + inp[(pre * ids_dim_size + order[t]) * right_size + post])
        out[dst] = acc


@pk.func
def move_row_words(g: W, ids: ConstPtr[I], inp: ConstPtr[pk.u64], out: Ptr[pk.u64], src_dim: usize, ids_dim: W,
                   row_words: pk.u32, per_row: W, *, W):
    """Chunk ``g`` of an index_select by u64 words: output row ``g / per_row``, its words ``w, w +
    per_row, ...`` (``w = g % per_row``; ``ROW_WORDS`` of them), all loaded before any is stored."""
    r = g // per_row
    w = pk.u32(g - r * per_row)
    k = position(ids[usize(r % ids_dim)], src_dim)
    src = inp + (usize(r // ids_dim) * src_dim + pk.select(k < src_dim, k, usize(0))) * usize(row_words)
    dst = out + usize(r) * usize(row_words)
    v = pk.local.array(ROW_WORDS, pk.u64)
    for s in pk.static_range(ROW_WORDS):
        j = w + pk.u32(s) * pk.u32(per_row)
        v[s] = src[j] if j < row_words and k < src_dim else pk.u64(0)
    for s in pk.static_range(ROW_WORDS):
        j = w + pk.u32(s) * pk.u32(per_row)
        if j < row_words:
            dst[j] = v[s]


@pk.kernel
def select_words(rows: usize, ids: ConstPtr[I], inp: ConstPtr[pk.u64], out: Ptr[pk.u64], src_dim: usize,
                 ids_dim: usize, row_words: pk.u32, *, I):
    """index_select of whole rows moved as u64 words (the wrappers' launch for dense ids and rows of a
    multiple of 8 bytes at 8-byte aligned addresses): ``per_row`` threads a row, each moving
    ``ROW_WORDS`` words at a stride of ``per_row`` (a wave's accesses contiguous) with every load in
    flight before the first store; the row's id read once by each of its threads. A grid-stride loop
    over (row, thread) chunks, in 32-bit arithmetic where they fit."""
    per_row = (row_words + pk.u32(ROW_WORDS - 1)) // pk.u32(ROW_WORDS)
    chunks = rows * usize(per_row)
    step = usize(pk.block_dim.x) * usize(pk.grid_dim.x)
    g = pk.global_id()
    if chunks + step <= U32_LIMIT and ids_dim <= U32_LIMIT:
        g32 = pk.u32(g)
        while g32 < pk.u32(chunks):
            move_row_words(g32, ids, inp, out, src_dim, pk.u32(ids_dim), row_words, per_row, W=pk.u32)
            g32 += pk.u32(step)
    else:
        while g < chunks:
            move_row_words(g, ids, inp, out, src_dim, ids_dim, row_words, usize(per_row), W=usize)
            g += step


@pk.func
def copy_row_tiles(r: W, rows: W, ids: ConstPtr[I], inp: ConstPtr[pk.u64], out: Ptr[pk.u64], src_dim: usize,
                   ids_dim: W, row_words: pk.u32, t: pk.u32, nt: pk.u32, *, W, evict):
    """Output row ``r`` of ``select_tiles`` by its ``nt`` threads (``t`` this one): the id, then the row
    through ``pk.parallel_range`` over u64 words, so each thread moves 16-byte tiles (one vector load
    and one vector store a tile) where the row's two addresses are 16-byte aligned. The division by
    ``ids_dim`` only where there are several ids lists (``left > 1``). With ``evict`` the stores are
    ``evict_first`` (NVIDIA: an L2 cache hint, the stores then 8 bytes wide; AMDGPU: non-temporal):
    the output is not read again, and the table's lines it would push out of the L2 serve later rows
    (docs/targets/cuda.md)."""
    pre = W(0)
    q = r
    if rows > ids_dim:
        pre = r // ids_dim
        q = r - pre * ids_dim
    k = position(ids[usize(q)], src_dim)
    dst = out + usize(r) * usize(row_words)
    if k < src_dim:
        src = inp + (usize(pre) * src_dim + k) * usize(row_words)
        for j in pk.parallel_range(pk.u32(0), row_words, t, nt):
            if evict:
                pk.store(dst, j, src[j], eviction="evict_first")
            else:
                dst[j] = src[j]
    else:
        for j in pk.parallel_range(pk.u32(0), row_words, t, nt):
            if evict:
                pk.store(dst, j, pk.u64(0), eviction="evict_first")
            else:
                dst[j] = pk.u64(0)


@pk.kernel
def select_tiles(rows: usize, ids: ConstPtr[I], inp: ConstPtr[pk.u64], out: Ptr[pk.u64], src_dim: usize,
                 ids_dim: usize, row_words: pk.u32, *, I, evict):
    """index_select of whole rows as torch's vectorized gather moves them (the wrappers' launch for
    dense ids and rows of a multiple of 16 bytes at 16-byte aligned addresses): ``block_dim.x`` threads
    a row, ``block_dim.y`` rows a block (row ``block_idx.x * block_dim.y + thread_idx.y``, then a
    grid-stride step in rows where the grid is smaller), each thread a 16-byte load and store per
    tile. 32-bit row arithmetic where the rows fit.

    The wrappers launch it programmatically (``SELECT_PROGRAMMATIC``; CUDA sm_90+): its blocks may be
    scheduled before the kernel ahead of it on the stream has finished, which hides most of the kernel
    boundary of each call (the figures: docs/targets/cuda.md). So nothing is read or written before
    ``pk.grid_dependency_wait()``: the ids and the table may be that kernel's output, and the output
    buffer may be memory it still uses. Plain launches and other targets: the wait is nothing."""
    pk.grid_dependency_wait()
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    r = usize(pk.block_idx.x) * usize(pk.block_dim.y) + usize(pk.thread_idx.y)
    step = usize(pk.grid_dim.x) * usize(pk.block_dim.y)
    if rows + step <= U32_LIMIT:
        r32 = pk.u32(r)
        while r32 < pk.u32(rows):
            copy_row_tiles(r32, pk.u32(rows), ids, inp, out, src_dim, pk.u32(ids_dim), row_words, t, nt, W=pk.u32,
                           evict=evict)
            r32 += pk.u32(step)
    else:
        while r < rows:
            copy_row_tiles(r, rows, ids, inp, out, src_dim, ids_dim, row_words, t, nt, W=usize, evict=evict)
            r += step


@pk.kernel(moves=("T",))
def gather_shared(rows: usize, ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], src_dim: pk.u32, ids_dim: pk.u32,
                  *, I, T):
    """gather along the last dim (``right`` 1) of source rows that fit in shared memory (``src_dim``
    elements of dynamic shared memory): block ``b`` takes rows ``b, b + grid, ...``, reads the source
    row into shared memory (contiguous loads), then each output element's id (contiguous) and its
    element from shared memory, not from the caches (whose random 4-byte reads cost a line each)."""
    row = pk.shared.dynamic(T)
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    r = usize(pk.block_idx.x)
    while r < rows:
        src = inp + r * usize(src_dim)
        for j in pk.parallel_range(pk.u32(0), src_dim, t, nt):
            row[j] = src[j]
        pk.syncthreads()
        base = r * usize(ids_dim)
        for j in pk.parallel_range(pk.u32(0), ids_dim, t, nt):
            k = position(ids[base + usize(j)], usize(src_dim))
            out[base + usize(j)] = row[k] if k < usize(src_dim) else T(0)
        pk.syncthreads()  # every thread has read the row before the next overwrites it
        r += usize(pk.grid_dim.x)


@pk.kernel
def id_positions(n: usize, ids: ConstPtr[I], size: usize, pos: Ptr[pk.u32], *, I):
    """Each id as its position along a dim of ``size`` (< 2**32), or ``size`` for the sentinel and any
    id outside the dim: the u32 sort keys of the deterministic scatter_add/index_add."""
    for i in pk.grid_stride(n):
        pos[i] = pk.u32(position(ids[i], size))


@pk.kernel
def index_add_sorted(order: ConstPtr[pk.u32], pos: ConstPtr[pk.u32], ids_dim: usize, inp: ConstPtr[T], out: Ptr[T],
                     left: usize, dst_dim: usize, right: usize, *, T):
    """index_add with the ids' positions ``pos`` argsorted stably (``order``) on the device: block
    iteration ``(pre, p)`` where sorted entry ``p`` starts a run of equal positions adds the run's
    source rows into destination row ``pos[order[p]]``, each element in order of j with each add
    rounded to T (candle's column walk, bit for bit), the block's threads along the row; every
    destination row in parallel."""
    n = left * ids_dim
    b = usize(pk.block_idx.x)
    while b < n:
        pre = b // ids_dim
        p = b - pre * ids_dim
        k = pos[order[p]]
        if usize(k) < dst_dim and (p == 0 or pos[order[p - 1]] != k):
            end = p + 1
            while end < ids_dim and pos[order[end]] == k:
                end += 1
            dst = out + (pre * dst_dim + usize(k)) * right
            for post in pk.parallel_range(usize(0), right, usize(pk.thread_idx.x), usize(pk.block_dim.x)):
                acc = dst[post]
                for q in range(p, end):
                    acc = T(acc + inp[(pre * ids_dim + usize(order[q])) * right + post])
                dst[post] = acc
        b += usize(pk.grid_dim.x)


@pk.func
def add_sorted_run(c: W, order: ConstPtr[pk.u32], pos: ConstPtr[pk.u32], inp: ConstPtr[T], out: Ptr[T], src_dim: W,
                   dst_dim: usize, right: W, *, W):
    """``scatter_add_sorted``'s element ``c`` (sorted entry ``(pre, p, post)``) in ``W`` arithmetic."""
    pre = c // (right * src_dim)
    rest = c - pre * (right * src_dim)
    p = rest // right
    post = rest - p * right
    line = usize(pre * src_dim * right + post)  # element (pre, 0, post)
    k = pos[line + usize(order[usize(c)]) * usize(right)]
    if usize(k) < dst_dim and (p == 0 or pos[line + usize(order[usize(c - right)]) * usize(right)] != k):
        dst = (usize(pre) * dst_dim + usize(k)) * usize(right) + usize(post)
        acc = out[dst]
        q = usize(p)
        while q < usize(src_dim):
            j = line + usize(order[line + q * usize(right)]) * usize(right)
            if pos[j] != k:
                break
            acc = T(acc + inp[j])
            q += 1
        out[dst] = acc


@pk.kernel
def scatter_add_sorted(order: ConstPtr[pk.u32], pos: ConstPtr[pk.u32], inp: ConstPtr[T], out: Ptr[T], left: usize,
                       src_dim: usize, dst_dim: usize, right: usize, *, T):
    """scatter_add with the positions ``pos`` (src's shape) argsorted stably along the dim (``order``):
    the thread of sorted entry ``(pre, p, post)`` that starts a run of equal positions adds the
    run's sources in order of j, each add rounded to T (candle's column walk, bit for bit)."""
    n = left * src_dim * right
    if n <= U32_LIMIT:
        for c in pk.grid_stride(n):
            add_sorted_run(pk.u32(c), order, pos, inp, out, pk.u32(src_dim), dst_dim, pk.u32(right), W=pk.u32)
    else:
        for c in pk.grid_stride(n):
            add_sorted_run(c, order, pos, inp, out, src_dim, dst_dim, right, W=usize)


@pk.func
def bit_count(m: pk.u64) -> pk.u32:
    """The set bits of ``m`` (SWAR: a dozen integer operations, no loop)."""
    m = m - ((m >> pk.u64(1)) & pk.u64(0x5555555555555555))
    m = (m & pk.u64(0x3333333333333333)) + ((m >> pk.u64(2)) & pk.u64(0x3333333333333333))
    m = (m + (m >> pk.u64(4))) & pk.u64(0x0F0F0F0F0F0F0F0F)
    return pk.u32((m * pk.u64(0x0101010101010101)) >> pk.u64(56))


@pk.func
def lane_position(ids: ConstPtr[I], j: usize, src_dim: usize, dst_dim: pk.u32) -> pk.u32:
    """Source ``j``'s destination in its row, ``dst_dim`` for none (past the row, sentinel, out of range)."""
    return pk.u32(position(ids[j], usize(dst_dim))) if j < src_dim else dst_dim


@pk.func
def lane_value(inp: ConstPtr[T], j: usize, src_dim: usize) -> T:
    return inp[j] if j < src_dim else T(0)


@pk.func
def add_chunk(row: Ptr[T], k: pk.u32, v: T, below: pk.u64, bits: pk.u32, dst_dim: pk.u32):
    """One wave's chunk of sources into the shared ``row`` in lane order: each lane finds the lanes with
    its destination ``k`` by one ballot per bit (``SA_BALLOTS`` a step, issued back to back), its
    rank among them is how many come before it, and rounds of the lanes of rank 0, 1, ... add (a
    barrier after each: the block is one wave) while a vote finds a lane of a higher rank."""
    same = ~pk.u64(0)
    b: pk.u32 = 0
    while b < bits:
        for s in pk.static_range(SA_BALLOTS):
            one = ((k >> (b + pk.u32(s))) & pk.u32(1)) != pk.u32(0)  # bits past ``bits`` are 0 in every lane
            votes = pk.wave.ballot(one)
            same = same & pk.select(one, votes, ~votes)
        b += pk.u32(SA_BALLOTS)
    rank = pk.select(k < dst_dim, bit_count(same & below), pk.u32(0))  # no extra rounds for lanes adding nothing
    q: pk.u32 = 0
    more = True
    while more:
        if rank == q and k < dst_dim:
            row[k] = T(row[k] + v)
        pk.syncthreads()
        q += 1
        more = pk.wave.any(rank >= q)


@pk.func
def add_chunk_tagged(row: Ptr[T], tag: Ptr[pk.u8], k: pk.u32, v: T, below: pk.u64, bits: pk.u32, dst_dim: pk.u32,
                     lane: pk.u32, *, tags):
    """``add_chunk`` with a shortcut for chunks whose destinations are all distinct (about 8 in 9 of 32
    random ids among 4096): each lane writes its lane number into ``tag`` at its destination's hash
    (``tags`` buckets), and where after a barrier every lane reads back its own, no two lanes share a
    bucket, hence no two a destination, and one round adds them all without the ballots. A chunk
    with a shared bucket (a real duplicate, or two destinations of one hash) takes ``add_chunk``."""
    ok = k < dst_dim
    h = k & pk.u32(tags - 1)  # in range for the lanes adding nothing too (their reads decide nothing)
    if ok:
        tag[h] = pk.u8(lane)
    pk.syncthreads()
    if pk.wave.all(pk.select(ok, tag[h] == pk.u8(lane), True)):
        if ok:
            row[k] = T(row[k] + v)
        pk.syncthreads()  # the adds are seen, and the tags read, before the next chunk writes either
    else:
        add_chunk(row, k, v, below, bits, dst_dim)


@pk.kernel
def scatter_add_rows(ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], left: usize, src_dim: usize, dst_dim: pk.u32,
                     *, I, T, tags, row_loads):
    """scatter_add along the last dim (``right`` 1) in candle's order, one wave a block and a row at a
    time (rows ``block_idx.x, + grid_dim.x, ...``), the destination row held in shared memory
    (``dst_dim`` elements of dynamic shared memory). The row comes in with ``row_loads`` of a lane's
    elements in flight at a time (0: one ``pk.parallel_range`` step at a time, each waiting for its
    load). The row's sources go by chunks of a wave, in order (``add_chunk``, or
    ``add_chunk_tagged`` with ``tags`` buckets), the next three chunks' ids and values in flight
    while one is added: every destination gets its sources in order of j, each add rounded to T,
    which is candle's column walk bit for bit, without a sort and without atomics. (Scalars, not a
    local array, carry the chunks in flight: an array indexed in a loop lives in local memory on
    GPUs, and unrolled, its copies of the ballots and barriers make the CPU target's coroutines slow
    to compile.)"""
    row = pk.shared.dynamic(T)
    tag = pk.shared.array(max(tags, 1), pk.u8)
    lane = pk.thread_idx.x
    ws = usize(pk.block_dim.x)
    below = (pk.u64(1) << pk.u64(lane)) - pk.u64(1)
    bits: pk.u32 = 0
    while (dst_dim >> bits) != pk.u32(0):  # positions and the no-position dst_dim fit these bits
        bits += 1
    r = usize(pk.block_idx.x)
    while r < left:
        dst = out + r * usize(dst_dim)
        if row_loads:
            e0 = pk.u32(0)
            while e0 < dst_dim:
                held = pk.local.array(row_loads, T)
                for s in pk.static_range(row_loads):
                    e = e0 + lane + pk.u32(s) * pk.block_dim.x
                    held[s] = dst[e] if e < dst_dim else T(0)
                for s in pk.static_range(row_loads):
                    e = e0 + lane + pk.u32(s) * pk.block_dim.x
                    if e < dst_dim:
                        row[e] = held[s]
                e0 += pk.u32(row_loads) * pk.block_dim.x
        else:
            for c in pk.parallel_range(pk.u32(0), dst_dim, lane, pk.block_dim.x):
                row[c] = dst[c]
        pk.syncthreads()
        ri = ids + r * src_dim
        rv = inp + r * src_dim
        j = usize(lane)
        k1 = lane_position(ri, j, src_dim, dst_dim)
        v1 = lane_value(rv, j, src_dim)
        k2 = lane_position(ri, j + ws, src_dim, dst_dim)
        v2 = lane_value(rv, j + ws, src_dim)
        k3 = lane_position(ri, j + 2 * ws, src_dim, dst_dim)
        v3 = lane_value(rv, j + 2 * ws, src_dim)
        c0 = usize(0)
        while c0 < src_dim:
            k = k1
            v = v1
            k1 = k2
            v1 = v2
            k2 = k3
            v2 = v3
            k3 = lane_position(ri, j + c0 + 3 * ws, src_dim, dst_dim)
            v3 = lane_value(rv, j + c0 + 3 * ws, src_dim)
            if tags:
                add_chunk_tagged(row, tag, k, v, below, bits, dst_dim, lane, tags=tags)
            else:
                add_chunk(row, k, v, below, bits, dst_dim)
            c0 += ws
        for c in pk.parallel_range(pk.u32(0), dst_dim, lane, pk.block_dim.x):
            dst[c] = row[c]
        pk.syncthreads()  # the row is stored before the next row overwrites it
        r += usize(pk.grid_dim.x)


@pk.func
def copy_winners(win: Ptr[pk.u32], rv: ConstPtr[T], dst: Ptr[T], count: pk.u32):
    """A range's sources copied to their destinations along the last dim: ``win[e]`` holds the
    winning source index + 1 (0: no source, the destination keeps its value), adjacent threads take
    adjacent destinations, and each entry is cleared behind it for the block's next range."""
    for e in pk.parallel_range(pk.u32(0), count, pk.thread_idx.x, pk.block_dim.x):
        w = win[e]
        if w != pk.u32(0):
            dst[e] = rv[w - pk.u32(1)]
            win[e] = pk.u32(0)


@pk.kernel(moves=("T",))
def scatter_rows(ids: ConstPtr[I], inp: ConstPtr[T], out: Ptr[T], left: usize, src_dim: usize, dst_dim: pk.u32,
                 right: usize, span: pk.u32, cols_log2: pk.u32, *, I, T, tiled):
    """scatter along any dim with candle's last-writer result and no walk in order, a block a unit
    at a time (units ``block_idx.x, + grid_dim.x, ...``). A unit is ``pre``, a tile of ``C = 2 **
    cols_log2`` adjacent columns (``post``; 1 along the last dim) and a range of ``span`` destinations
    along the dim (``ceil(dst_dim / span)`` ranges; a tile's ranges adjacent, so their blocks share its
    ids in the caches). Each source ``(j, c)`` of the tile whose destination lies in the range takes an
    atomic max of ``j + 1`` there in a shared table of ``span x C`` u32 (dynamic shared memory, 0: no
    source), which leaves the last ``j`` of every destination whatever order the atomics land in;
    after a barrier each destination with a winner copies its source (adjacent threads, adjacent
    stores; destinations without one keep their value) and clears its entry for the next unit. The
    tile's ids are read a row segment at a time (``C`` adjacent ids), so along other dims the reads
    stay contiguous where a thread per source would scatter its stores. ``src_dim * C``, ``src_dim *
    right`` and ``dst_dim * right`` below 2**32 - 1 (the wrapper's check).

    ``tiled`` False (``s_rows_*``) is the last dim alone (``right`` 1, ``cols_log2`` 0) without the
    tiles' arithmetic: in one kernel with it, a runtime branch, sm_90 gave the rows 62 registers
    against 32, one block of 1024 threads an SM instead of two (docs/targets/cuda.md)."""
    win = pk.shared.dynamic(pk.u32)
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    cols = pk.u32(1) << cols_log2
    for e in pk.parallel_range(pk.u32(0), span << cols_log2, t, nt):
        win[e] = pk.u32(0)
    pk.syncthreads()
    ranges = (dst_dim + span - pk.u32(1)) // span
    tiles = (right + usize(cols) - 1) >> usize(cols_log2) if tiled else usize(1)
    units = left * tiles * usize(ranges)
    u = usize(pk.block_idx.x)
    while u < units:
        q = u
        lo = pk.u32(0)
        if ranges > pk.u32(1):
            q = u // usize(ranges)
            lo = pk.u32(u - q * usize(ranges)) * span
        pre = q
        c0 = usize(0)
        if tiles > usize(1):
            pre = q // tiles
            c0 = (q - pre * tiles) << usize(cols_log2)
        count = min(span, dst_dim - lo)
        if not tiled:  # along the last dim (``right`` 1): a row's ids and sources contiguous, no tile arithmetic
            ri = ids + pre * src_dim
            for j in pk.parallel_range(pk.u32(0), pk.u32(src_dim), t, nt):
                d = pk.u32(position(ri[j], usize(dst_dim))) - lo  # wraps past count below the range
                if d < count:
                    pk.atomic.max(win, d, j + pk.u32(1))
            pk.syncthreads()
            copy_winners(win, inp + pre * src_dim, out + pre * usize(dst_dim) + usize(lo), count)
        else:  # offsets inside a unit in u32: ``src_dim * right`` and ``dst_dim * right`` below 2**32
            stride = pk.u32(right)
            width = pk.u32(min(usize(cols), right - c0))
            ri = ids + pre * src_dim * right + c0
            for e in pk.parallel_range(pk.u32(0), pk.u32(src_dim) << cols_log2, t, nt):
                c = e & (cols - pk.u32(1))
                j = e >> cols_log2
                if c < width:
                    d = pk.u32(position(ri[j * stride + c], usize(dst_dim))) - lo
                    if d < count:
                        pk.atomic.max(win, (d << cols_log2) | c, j + pk.u32(1))
            pk.syncthreads()
            rv = inp + pre * src_dim * right + c0
            dst = out + (pre * usize(dst_dim) + usize(lo)) * right + c0
            for e in pk.parallel_range(pk.u32(0), count << cols_log2, t, nt):
                w = win[e]
                if w != pk.u32(0):
                    c = e & (cols - pk.u32(1))
                    dst[(e >> cols_log2) * stride + c] = rv[(w - pk.u32(1)) * stride + c]
                    win[e] = pk.u32(0)
        pk.syncthreads()  # the table is clear before the next unit's atomics
        u += usize(pk.grid_dim.x)


@pk.kernel
def scatter_winners(n: usize, ids: ConstPtr[I], win: Ptr[pk.u32], src_dim: pk.u32, dst_dim: pk.u32,
                    right: pk.u32, lo: pk.u32, width: pk.u32, flat: Ptr[pk.u32], *, I):
    """scatter's first pass along any dim, one thread a source element ``i``: each valid id whose flat
    destination ``f`` lies in the window ``[lo, lo + width)`` takes an atomic max of ``i + 1`` at
    ``win[f]`` (a zeroed u32 per element of ``x``). A destination's sources share ``pre`` and
    ``post``, so the largest ``i`` is the last ``j`` along the dim whatever order the atomics land in.
    The window keeps the atomics of one launch inside a slice of the table that the L2 holds, where
    the destinations of the sources in flight spread over all of ``x`` (dim 0): the wrapper walks
    ``x`` in windows. ``flat`` (or None): each source's ``f`` is stored there too (all ones for a
    skipped id), which the later windows read (``s_winners_flat``) in place of the ids and their
    divisions. Sizes below 2**32 - 1 (the wrapper's check): 32-bit divisions."""
    for i in pk.grid_stride(n):
        e = pk.u32(i)
        q = e // right
        post = e - q * right
        pre = q // src_dim
        k = position(ids[i], usize(dst_dim))
        f = pk.select(k < usize(dst_dim), (pre * dst_dim + pk.u32(k)) * right + post, pk.u32(0xFFFFFFFF))
        if flat is not None:
            flat[i] = f
        if f - lo < width:  # wraps past width below the window; all ones is past every window
            pk.atomic.max(win, f, e + pk.u32(1))


@pk.kernel
def scatter_winners_flat(n: usize, flat: ConstPtr[pk.u32], win: Ptr[pk.u32], lo: pk.u32, width: pk.u32):
    """``s_winners_*`` for the windows after the first, from the flat destinations it stored: 4 bytes
    a source read instead of the id's (8 for i64) and no divisions."""
    for i in pk.grid_stride(n):
        f = flat[i]
        if f - lo < width:
            pk.atomic.max(win, f, pk.u32(i) + pk.u32(1))


@pk.kernel(moves=("T",))
def scatter_from_winners(n: usize, win: ConstPtr[pk.u32], inp: ConstPtr[T], out: Ptr[T], *, T):
    """scatter's second pass, one thread an element of ``x``: where ``win`` names a source (its flat
    index + 1), copy it (adjacent threads, adjacent stores); elsewhere ``x`` keeps its value."""
    for e in pk.grid_stride(n):
        w = win[e]
        if w != pk.u32(0):
            out[e] = inp[w - pk.u32(1)]


@pk.kernel
def scatter_sort(ids: ConstPtr[I], pairs: Ptr[pk.u32], offs: Ptr[pk.u32], left: usize, src_dim: usize,
                 dst_dim: pk.u32, span: pk.u32, ranges: pk.u32, *, I, per):
    """scatter along the last dim, first of two passes for rows of more ranges than re-reading the
    row's ids a range pays for (``s_rows_*``): a block a *chunk* of ``per * block_dim.x`` adjacent
    sources of a row (block ``pre * chunks + c``; one chunk a block: a loop over chunks kept ~20 lane
    masks live across it, SGPR spills on gfx90a/gfx942) sorts them in shared memory by the range of ``span`` destinations
    their id falls in (a counting sort: a shared counter a range hands out slots, a wave's scan of the
    counts gives each range its start; dynamic shared memory of ``ranges + chunk`` u32) and stores
    the chunk back in its own place in ``pairs``, range after range, each entry ``d << chunk_bits | jl`` (``d`` the destination's offset
    in its range, ``jl`` the source's in the chunk; skipped ids leave no entry), and the ranges'
    starts in ``offs`` (``ranges + 1`` a chunk). The order inside a range is free: the second pass
    keeps the largest source of each destination. So ``pairs`` is written in runs, where scattering
    each source to a bucket of its range would cost a random store a source (docs/targets/cuda.md).
    ``span << chunk_bits`` below 2**32 (the wrapper's check)."""
    buf = pk.shared.dynamic(pk.u32)  # ranges counters, then the chunk's sorted entries
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    ws = pk.u32(pk.wave_size)
    chunk = nt * pk.u32(per)
    bits = pk.u32(0)
    while (pk.u32(1) << bits) < chunk:
        bits += pk.u32(1)
    chunks = (src_dim + usize(chunk) - 1) // usize(chunk)
    u = usize(pk.block_idx.x)
    if u < left * chunks:
        pre = u // chunks
        base = (u - pre * chunks) * usize(chunk)
        row = ids + pre * src_dim + base
        have = pk.u32(min(usize(chunk), src_dim - base))
        for e in pk.parallel_range(pk.u32(0), ranges, t, nt):
            buf[e] = pk.u32(0)
        pk.syncthreads()
        rs = pk.local.array(per, pk.u32)
        es = pk.local.array(per, pk.u32)
        vs = pk.local.array(per, pk.u32)
        for q in pk.static_range(per):
            jl = pk.u32(q) * nt + t
            rs[q] = ranges  # no entry
            es[q] = pk.u32(0)
            vs[q] = pk.u32(0)
            if jl < have:
                k = pk.u32(position(row[jl], usize(dst_dim)))
                if k < dst_dim:
                    r = k // span
                    rs[q] = r
                    vs[q] = ((k - r * span) << bits) | jl
                    es[q] = pk.atomic.add(buf, r, pk.u32(1))
        pk.syncthreads()
        if t < ws:  # the counts' exclusive scan by the first wave: a lane sums a run of counts, then the lanes scan
            per_lane = (ranges + ws - pk.u32(1)) // ws
            a = min(ranges, t * per_lane)
            b = min(ranges, a + per_lane)
            total = pk.u32(0)
            for r in range(a, b):
                total += buf[r]
            inc = total
            step = pk.u32(1)
            while step < ws:
                v = pk.wave.shuffle_up(inc, step)
                if t >= step:
                    inc += v
                step <<= pk.u32(1)
            run = inc - total
            ob = offs + u * usize(ranges + pk.u32(1))
            for r in range(a, b):
                c = buf[r]
                buf[r] = run
                ob[r] = run
                run += c
            if t == ws - pk.u32(1):
                ob[ranges] = inc
        pk.syncthreads()
        for q in pk.static_range(per):
            if rs[q] < ranges:
                buf[ranges + buf[rs[q]] + es[q]] = vs[q]
        pk.syncthreads()
        out = pairs + pre * src_dim + base
        for e in pk.parallel_range(pk.u32(0), offs[u * usize(ranges + pk.u32(1)) + usize(ranges)], t, nt):
            out[e] = buf[ranges + e]  # the entries alone (the barrier orders the scan's store of the total)


@pk.kernel(moves=("T",))
def scatter_runs(pairs: ConstPtr[pk.u32], offs: ConstPtr[pk.u32], inp: ConstPtr[T], out: Ptr[T], left: usize,
                 src_dim: usize, dst_dim: pk.u32, span: pk.u32, ranges: pk.u32, chunk_log2: pk.u32, *, T):
    """scatter along the last dim, second pass after ``scatter_sort``: a block a range of a row at a
    time (units ``pre * ranges + r``) reads the range's run of every chunk of the row (a wave a chunk:
    contiguous u32 entries), takes the atomic max of ``j + 1`` at the entry's destination in a shared
    table of ``span`` u32, and after a barrier copies each winner's source into ``x`` (adjacent
    threads, adjacent stores), clearing the table for the next unit: ``s_rows_*``'s result with each
    entry read once instead of once a range."""
    win = pk.shared.dynamic(pk.u32)
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    ws = pk.u32(pk.wave_size)
    lane = t & (ws - pk.u32(1))
    wave = t // ws
    waves = nt // ws
    chunk = pk.u32(1) << chunk_log2
    for e in pk.parallel_range(pk.u32(0), span, t, nt):
        win[e] = pk.u32(0)
    pk.syncthreads()
    chunks = pk.u32((src_dim + usize(chunk) - 1) >> usize(chunk_log2))
    units = left * usize(ranges)
    u = usize(pk.block_idx.x)
    while u < units:
        pre = u // usize(ranges)
        r = pk.u32(u - pre * usize(ranges))
        lo = r * span
        count = min(span, dst_dim - lo)
        pr = pairs + pre * src_dim
        ob = offs + pre * usize(chunks) * usize(ranges + pk.u32(1)) + usize(r)
        c = wave
        while c < chunks:
            o = ob + usize(c) * usize(ranges + pk.u32(1))
            base = c << chunk_log2
            for q in pk.parallel_range(o[0], o[1], lane, ws):
                v = pr[usize(base + q)]
                pk.atomic.max(win, v >> chunk_log2, base + (v & (chunk - pk.u32(1))) + pk.u32(1))
            c += waves
        pk.syncthreads()
        copy_winners(win, inp + pre * src_dim, out + pre * usize(dst_dim) + usize(lo), count)
        pk.syncthreads()  # the table is clear before the next unit's atomics
        u += usize(pk.grid_dim.x)


@pk.kernel
def count_out_of_range(n: usize, ids: ConstPtr[I], size: usize, bad: Ptr[pk.u32], *, I):
    """How many of ``ids`` are neither a position in ``[0, size)`` nor the sentinel: the wrappers' check
    on a GPU, where copying every id to the host would cost more than the kernel it guards."""
    for i in pk.grid_stride(n):
        if position(ids[i], size) == size and ids[i] != I(I.int_range[1]):
            pk.atomic.add(bad, 0, pk.u32(1))


#: scatter without accumulation only moves its values (``pk.kernel``'s ``moves``): one compiled kernel
#: a value size, where scatter_add computes on them
scatter_values = pk.kernel(moves=("T",))(scatter.__wrapped__)
#: candle's symbols: op -> (generic kernel, compile-time parameters)
OPS = {"is": (index_select, {}), "gather": (gather, {}), "ia": (index_add, {}),
       "s": (scatter_values, {"accumulate": False}), "sa": (scatter, {"accumulate": True})}
#: (op, index, value, value tag) for every kernel candle exports: no ``s_*_f8_e4m3``
TABLE = ([(op, i, v, v.tag) for op in OPS for i in INDICES for v in VALUES]
         + [(op, i, pk.f8e4m3, "f8_e4m3") for op in ("is", "gather", "ia", "sa") for i in F8_INDICES])
#: the ``f8e4m3`` spellings candle's Rust side requests (``DType::F8E4M3.as_str()``; u8/u32/i64
#: indices), scatter's included: candle's CPU backend scatters f8 too. Exported in addition.
F8_EXTRAS = [kernel_name(op, i, "f8e4m3") for op in OPS for i in INDICES]
for _op, _i, _t, _tag in TABLE:
    INDEXING.add(OPS[_op][0].instance(kernel_name(_op, _i, _tag), I=_i, T=_t, **OPS[_op][1]))
for _op in OPS:
    for _i in INDICES:
        INDEXING.add(OPS[_op][0].instance(kernel_name(_op, _i, "f8e4m3"), I=_i, T=pk.f8e4m3, **OPS[_op][1]))
#: the wrappers' own kernels (candle never asks for them): ``is_rows_*`` for every ``is_*`` pair,
#: ``ia_segments_*`` for every value dtype, ``ids_out_of_range_*`` for every index dtype, and atomic
#: scatter_add/index_add for the dtypes every target has an atomic add for
ATOMIC_VALUES = (pk.f32, pk.f64, pk.f16, pk.bf16, pk.u32, pk.i64)
for _op, _i, _t, _tag in TABLE:
    if _op == "is":
        INDEXING.add(select_rows.instance(kernel_name("is_rows", _i, _tag), I=_i, T=_t, per_tile=max(1, 16 // _t.nbytes)))
for _t in VALUES + (pk.f8e4m3,):
    INDEXING.add(index_add_segments.instance(kernel_name("ia_segments", _t), T=_t))
for _i in F8_INDICES:
    INDEXING.add(count_out_of_range.instance(kernel_name("ids_out_of_range", _i), I=_i))
for _i in INDICES:
    for _t in ATOMIC_VALUES:
        INDEXING.add(add_atomic.instance(kernel_name("sa_atomic", _i, _t), I=_i, T=_t, per_element=True),
                     add_atomic.instance(kernel_name("ia_atomic", _i, _t), I=_i, T=_t, per_element=False))
#: ``is_words_*`` (index_select by u64 words) and ``ids_positions_*`` for every index dtype,
#: ``gather_shared_*`` for every ``gather_*`` pair, ``ia_sorted_*``/``sa_sorted_*`` for every value dtype
for _i in F8_INDICES:
    INDEXING.add(select_words.instance(kernel_name("is_words", _i), I=_i),
                 select_tiles.instance(kernel_name("is_tiles", _i), I=_i, evict=SELECT_EVICT),
                 id_positions.instance(kernel_name("ids_positions", _i), I=_i))
for _op, _i, _t, _tag in TABLE:
    if _op == "gather":
        INDEXING.add(gather_shared.instance(kernel_name("gather_shared", _i, _tag), I=_i, T=_t))
for _t in VALUES + (pk.f8e4m3,):
    INDEXING.add(index_add_sorted.instance(kernel_name("ia_sorted", _t), T=_t),
                 scatter_add_sorted.instance(kernel_name("sa_sorted", _t), T=_t))
#: ``sa_rows_*``'s hash buckets for its shortcut past the ballots (0: none; a power of two of u8 tags
#: in shared memory beside the row) and a lane's row elements in flight as the row comes in
SA_TAGS = 2048
SA_ROW_LOADS = 16
#: ``sa_rows_*`` for every index dtype and float value dtype (integers take the atomic adds)
ROWS_VALUES = (pk.f32, pk.f64, pk.f16, pk.bf16)
for _i in INDICES:
    for _t in ROWS_VALUES:
        INDEXING.add(scatter_add_rows.instance(kernel_name("sa_rows", _i, _t), I=_i, T=_t, tags=SA_TAGS,
                                               row_loads=SA_ROW_LOADS))

#: ``s_rows_*`` (scatter along the last dim, a block a range of a row) and ``s_tiles_*`` (along other
#: dims, a block a range of a tile of columns) for every ``s_*`` pair, the f8e4m3 extras too
for _i, _t, _tag in ([(i, t, tag) for op, i, t, tag in TABLE if op == "s"]
                     + [(i, pk.f8e4m3, "f8e4m3") for i in INDICES]):
    INDEXING.add(scatter_rows.instance(kernel_name("s_rows", _i, _tag), I=_i, T=_t, tiled=False),
                 scatter_rows.instance(kernel_name("s_tiles", _i, _tag), I=_i, T=_t, tiled=True))
#: scatter's two passes elsewhere: ``s_winners_*`` for every index dtype, ``s_from_winners_*`` for every
#: value dtype
for _i in INDICES:
    INDEXING.add(scatter_winners.instance(kernel_name("s_winners", _i), I=_i))
INDEXING.add(scatter_winners_flat.instance("s_winners_flat"))
for _t in VALUES + (pk.f8e4m3,):
    INDEXING.add(scatter_from_winners.instance(kernel_name("s_from_winners", _t), T=_t))
#: sources a thread of ``s_sort_*`` sorts (in registers: a compile-time count)
S_SORT_PER = 8
#: long rows by a counting sort: ``s_sort_*`` for every index dtype, ``s_runs_*`` for every value dtype
for _i in INDICES:
    INDEXING.add(scatter_sort.instance(kernel_name("s_sort", _i), I=_i, per=S_SORT_PER))
for _t in VALUES + (pk.f8e4m3,):
    INDEXING.add(scatter_runs.instance(kernel_name("s_runs", _t), T=_t))


# ---- host wrappers: index_select, embedding, gather, scatter, scatter_add, index_add -----------------
#: threads a block for the column kernels (ia/s/sa): each thread walks a whole column
COLUMN_BLOCK = 256
#: index_select rows at least this long are copied row by row (``is_tiles_*`` where rows are whole
#: 16-byte tiles at 16-byte aligned addresses, ``is_words_*`` where they are whole u64 words at 8-byte
#: aligned ones, else ``is_rows_*``): a division per row at most
ROW_BYTES = 256
#: blocks of STREAM_BLOCK threads an SM a grid-stride row copy (``is_words_*``) launches at most
SELECT_BLOCKS_PER_SM = 8
#: ``is_tiles_*``: 16-byte tiles a thread along a row, threads a block, and a cap on the blocks an SM
#: (None: a block for each group of rows, as torch launches)
SELECT_THREAD_TILES = 2
SELECT_BLOCK = 256
SELECT_TILE_BLOCKS_PER_SM = None
#: ``is_tiles_*`` launched on CUDA as a programmatic dependent launch (``Function.launch(programmatic=True)``:
#: sm_90+; a plain launch on older archs), its start overlapping the end of the kernel before it; other
#: runtimes launch it plainly, as quantized_api's MMVQ
SELECT_PROGRAMMATIC = True
#: gather along the last dim stages source rows of up to this many bytes in shared memory
#: (``gather_shared_*``, no opt-in needed on any target), one block a row
GATHER_SHARED_BYTES = 48 * 1024
#: a dim this long or longer has positions that do not fit the u32 sort keys of the sorted adds
U32_POSITIONS = 0xFFFFFFFF
#: deterministic float scatter_add: candle's column kernel where ``right`` is at least this (a warp's
#: columns adjacent in memory), the sorted adds (``sa_sorted_*``) below it
SORTED_MAX_RIGHT = 32
#: deterministic float scatter_add along the last dim by ``sa_rows_*`` (a wave a row, the destination
#: row in shared memory) for at least this many rows (fewer leave most of a GPU idle: one wave walks
#: a whole row) with destination rows of at most this many bytes (more leave fewer waves an SM)
SA_ROWS_MIN = 1024
SA_ROWS_BYTES = 16 * 1024
#: scatter by ``s_rows_*`` / ``s_tiles_*`` in ranges of destinations whose u32 winner table fits this
#: many bytes of dynamic shared memory (no opt-in on any target) where that takes at most
#: ``S_ROWS_GROW`` ranges, with this many threads a block and at most this many blocks (units beyond
#: them are walked grid-stride)
S_ROWS_BYTES = 48 * 1024
#: past ``S_ROWS_GROW`` ranges of ``S_ROWS_BYTES``, a range's table takes what the device lets a block
#: have (``Device.max_shared_per_block``: the kernels have no static shared memory), at most
#: ``S_ROWS_MAX_BYTES``: fewer ranges, each of which reads all of its row's or tile's ids again
#: (the crossovers: docs/targets/cuda.md)
S_ROWS_GROW = 6
S_ROWS_MAX_BYTES = 96 * 1024
S_ROWS_BLOCK = 1024
S_ROWS_GRID = 1 << 20
#: ``s_rows_*`` / ``s_tiles_*`` launch blocks of about a unit's sources over this many (a wave at
#: least, then whole waves up to ``S_ROWS_BLOCK``)
S_ROWS_PER_THREAD = 4
#: elsewhere scatter keeps candle's column kernel only for at least this many (pre, post) columns
#: (about the threads an H100 keeps resident) of at least this many adjacent elements (a warp's
#: loads and stores coalesced); fewer take the winner table in global memory
S_COLUMNS_MIN = 1 << 17
S_COLUMNS_MIN_RIGHT = 32
#: ``s_rows_*`` / ``s_tiles_*`` split a row's or tile's destinations into at most this many ranges of
#: ``S_ROWS_BYTES`` of winners (each range's block reads all its ids); more take the global table
S_ROWS_RANGES = 16
#: ``s_tiles_*`` (not the last dim) takes up to this many ranges where a tile's ids are at most this
#: many bytes: a tile's ranges run side by side, so its ids are read again from the L2; along dim 0
#: the global table is slow enough that more ranges still win (the crossover: docs/targets/cuda.md)
S_TILES_RANGES = 64
S_TILES_RANGE_IDS = 4 << 20
#: ``s_tiles_*`` takes tiles of at most this many adjacent columns (a power of two) along dims other
#: than the last; where its table grows past ``S_ROWS_BYTES`` and would still take more than
#: ``S_TILE_NARROW_RANGES`` ranges, at most ``S_TILE_COLS_GROWN`` (twice the destinations a range,
#: half the ids a tile)
S_TILE_COLS = 16
S_TILE_COLS_GROWN = 8
S_TILE_NARROW_RANGES = 16
#: rows past ``S_ROWS_RANGES`` ranges take the counting sort (``s_sort_*`` then ``s_runs_*``: each id
#: read once, whatever the ranges) up to this many ranges a row (a chunk's run a range shrinks as
#: they grow), in chunks of ``S_SORT_PER`` sources a thread of blocks of a power of two from
#: ``S_SORT_MIN_BLOCK`` to ``S_SORT_BLOCK`` threads, the least that gives a range ``S_SORT_RUN``
#: entries of a chunk on average (the crossovers: docs/targets/cuda.md)
S_SORT_RANGES = 256
S_SORT_BLOCK = 1024
S_SORT_MIN_BLOCK = 256
S_SORT_RUN = 40
#: the global winner table takes its atomics in windows of this many destinations (a u32 each: a
#: slice the L2 holds) where a ``pre``'s destinations (``m * right``) are more: each window's launch
#: reads all the ids again (the crossover: docs/targets/cuda.md)
S_TABLE_WINDOW = 4 << 20
#: ... the first window storing each source's flat destination (u32) for the others to read
S_TABLE_FLAT = True
#: ... each window's slice of the table zeroed just before its pass and its winners copied just after
S_TABLE_SLICES = True
#: ballots a step of ``sa_rows_*``'s search for the lanes of the same destination: a step's ballots
#: issue back to back on GPUs; unrolled further, the CPU target's coroutines take seconds to compile
SA_BALLOTS = 4
#: index_add takes the sorted adds (``ia_sorted_*``) for rows (``right``) of at least this many
#: elements whatever the dtype, since they beat atomics there (docs/targets/cuda.md)
SORTED_MIN_ROW = 32


def _resident_blocks(device, block: int, per_sm: int) -> int | None:
    """``per_sm`` blocks of ``block`` threads for each multiprocessor the device reports (None where it
    reports none: the CPU)."""
    sms = getattr(device, "multiprocessors", None)
    return sms * per_sm if sms else None


def _tiles_launch(device, rows: int, tiles: int) -> tuple[tuple, tuple]:
    """``is_tiles_*``'s launch for ``rows`` rows of ``tiles`` 16-byte tiles: about
    ``SELECT_THREAD_TILES`` tiles a thread along the row (a power of two of threads below a wave, else
    whole waves, at most 1024), rows side by side in blocks of about ``SELECT_BLOCK`` threads, a block
    for each group of rows (``SELECT_TILE_BLOCKS_PER_SM`` caps the grid where it is set). Two tiles a
    thread rather than torch's one: the row's setup (its id, the alignment test) is then paid once for
    two tiles (docs/targets/cuda.md)."""
    per = -(-tiles // SELECT_THREAD_TILES)
    x = min(1024, sort.next_power_of_two(per) if per < 32 else -(-per // 32) * 32)
    y = max(1, SELECT_BLOCK // x)
    grid = -(-rows // y)
    cap = _resident_blocks(device, x * y, SELECT_TILE_BLOCKS_PER_SM) if SELECT_TILE_BLOCKS_PER_SM else None
    return (min(grid, cap) if cap else min(grid, (1 << 31) - 1), 1, 1), (x, y, 1)


def _words(a):
    """A contiguous array's memory as u64 words (its size in bytes a multiple of 8)."""
    return DeviceArray(a.device, a.ptr, (a.size * a.dtype.nbytes // 8,), pk.u64, owner=a)


def _kernel(op: str, ids, values, what: str) -> str:
    """The kernel for ``op`` on these index and value dtypes, or a TypeError naming what exists."""
    tag = "f8_e4m3" if values.dtype is pk.f8e4m3 and op != "s" else (
        "f8e4m3" if values.dtype is pk.f8e4m3 else values.dtype.tag)
    name = kernel_name(op, ids.dtype, tag)
    if name not in INDEXING:
        have = sorted({str(i) for o, i, v, _ in TABLE if o == op and v is values.dtype} |
                      ({str(i) for i in INDICES} if values.dtype is pk.f8e4m3 else set()))  # f8 scatter: extras
        if not have:
            raise TypeError(f"{what}: no kernel for values of dtype {values.dtype}; "
                            f"dtypes: {', '.join(str(v) for v in VALUES + (pk.f8e4m3,))}")
        raise TypeError(f"{what}: index dtype {ids.dtype} is not supported for {values.dtype} values; "
                        f"index dtypes: {', '.join(have)}")
    return name


def _dim(dim: int, ndim: int, what: str) -> int:
    if ndim == 0:
        raise ValueError(f"{what}: x must have at least one dim, got a scalar")
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or not -ndim <= dim < ndim:
        raise ValueError(f"{what}: dim must be an int in [{-ndim}, {ndim}), got {dim!r}")
    return int(dim) % ndim


def _check_ids(ids, size: int, what: str, on_device: bool | None = None) -> None:
    """Every index a position in ``[0, size)`` or the sentinel. On a GPU (``on_device`` by default)
    a kernel counts the bad ones and only that count comes back; the host looks for the first bad
    index only to name it."""
    if ids.size == 0:
        return
    if on_device is None:
        on_device = ids.device.kind != "cpu"
    if on_device:
        dense = _dense(ids)
        bad = ids.device.zeros(1, pk.u32)
        ids.device.get_or_load_func(kernel_name("ids_out_of_range", ids.dtype), INDEXING)[
            launch_stream(dense.size, dense)](dense.size, dense, size, bad)
        if not bad.to_host()[0]:
            return
    host = ids.to_host().astype(np.int64)
    bad = (host != ids.dtype.int_range[1]) & ((host < 0) | (host >= size))
    if bad.any():
        at = tuple(int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"{what}: index {host[at]} at {at} is out of range for a dim of size {size} "
                         f"(valid: 0..{size - 1}, or {ids.dtype.int_range[1]} for no element)")


def _dense(x):
    """``x`` contiguous: itself, or a copy by candle's ``ucopy``."""
    return x if x.is_contiguous else contiguous_copy(x)


def _sizes(shape: tuple[int, ...], dim: int) -> tuple[int, int]:
    return math.prod(shape[:dim]), math.prod(shape[dim + 1:])


def _same_except(a: tuple[int, ...], b: tuple[int, ...], dim: int, what: str, names: str) -> None:
    if len(a) != len(b) or any(m != n for d, (m, n) in enumerate(zip(a, b)) if d != dim):
        raise ValueError(f"{what}: {names} must have the same shape except along dim {dim}, got {a} and {b}")


def _ids_storage(ids):
    """The memory a (possibly strided) ids view covers, for a kernel given its layout in ``info``."""
    if ids.is_contiguous:
        return ids
    span = 1 + sum((n - 1) * s for n, s in zip(ids.shape, ids.strides))
    return ids.as_strided((span,), (1,))


def _select(x, ids, dim: int, out_shape: tuple[int, ...], check_ids: bool, what: str):
    name = _kernel("is", ids, x, what)
    if check_ids:
        _check_ids(ids, x.shape[dim], what)
    x = _dense(x)
    out = x.device.empty(out_shape, x.dtype)
    if out.size:
        left, right = _sizes(x.shape, dim)
        info = None
        if not ids.is_contiguous:
            if any(s < 0 for s in ids.strides):
                ids = _dense(ids)
            else:
                info = x.device.to_device(np.array(list(ids.shape) + list(ids.strides), np.uint64))
        grid, block = launch_stream(out.size, x, out)
        row_bytes = right * x.dtype.nbytes
        if (info is None and row_bytes >= ROW_BYTES and row_bytes % 16 == 0 and x.ptr % 16 == 0
                and out.ptr % 16 == 0):
            rows = left * ids.size
            grid, block = _tiles_launch(x.device, rows, row_bytes // 16)
            x.device.get_or_load_func(kernel_name("is_tiles", ids.dtype), INDEXING).launch(
                grid, block, rows, ids, _words(x), _words(out), x.shape[dim], ids.size, row_bytes // 8,
                programmatic=SELECT_PROGRAMMATIC)
        elif info is None and row_bytes >= ROW_BYTES and row_bytes % 8 == 0 and x.ptr % 8 == 0 and out.ptr % 8 == 0:
            chunks = left * ids.size * -(-row_bytes // (8 * ROW_WORDS))
            grid = -(-chunks // STREAM_BLOCK)
            cap = _resident_blocks(x.device, STREAM_BLOCK, SELECT_BLOCKS_PER_SM)
            grid = min(grid, cap) if cap else grid
            x.device.get_or_load_func(kernel_name("is_words", ids.dtype), INDEXING)[grid, STREAM_BLOCK](
                left * ids.size, ids, _words(x), _words(out), x.shape[dim], ids.size, row_bytes // 8)
        elif info is None and row_bytes >= ROW_BYTES:
            x.device.get_or_load_func(name.replace("is_", "is_rows_", 1), INDEXING)[grid, block](
                left * ids.size, ids, x, out, x.shape[dim], ids.size, right)
        else:
            x.device.get_or_load_func(name, INDEXING)[grid, block](
                out.size, ids.ndim, info, _ids_storage(ids), x, out, left, x.shape[dim], ids.size, right)
    return out


def index_select(x, ids, dim: int = 0, *, check_ids: bool = True):
    """``x`` indexed by the 1-D ``ids`` along ``dim`` (torch.index_select), with candle's ``is_*``.

    ``x`` and ``ids`` may be strided; the sentinel index (the index type's largest value) gives a
    slice of zeros. ``check_ids=False`` skips the host check of the ids' range (the kernel still
    never reads outside ``x``: it writes zeros for such an index)."""
    x = as_device_array(x)
    ids = as_device_array(ids, x.device)
    dim = _dim(dim, x.ndim, "index_select")
    if ids.ndim != 1:
        raise ValueError(f"index_select: ids must be 1-D, got shape {ids.shape}")
    return _select(x, ids, dim, x.shape[:dim] + ids.shape + x.shape[dim + 1:], check_ids, "index_select")


def embedding(ids, table, *, check_ids: bool = True):
    """The rows of ``table`` (vocab, hidden) for ``ids`` of any shape: shape ``ids.shape + (hidden,)``.

    The ids' own layout goes to ``is_*`` through ``info``, so strided ids are read in place."""
    table = as_device_array(table)
    ids = as_device_array(ids, table.device)
    if table.ndim != 2:
        raise ValueError(f"embedding: table must be 2-D (vocab, hidden), got shape {table.shape}")
    return _select(table, ids, 0, ids.shape + table.shape[1:], check_ids, "embedding")


def gather(x, dim: int, ids, *, check_ids: bool = True):
    """``out[..., j, ...] = x[..., ids[..., j, ...], ...]`` along ``dim`` (torch.gather), with candle's
    ``gather_*``: ``ids`` has ``x``'s shape except along ``dim``; the output has the ids' shape."""
    x = as_device_array(x)
    ids = as_device_array(ids, x.device)
    dim = _dim(dim, x.ndim, "gather")
    _same_except(x.shape, ids.shape, dim, "gather", "x and ids")
    name = _kernel("gather", ids, x, "gather")
    if check_ids:
        _check_ids(ids, x.shape[dim], "gather")
    x, ids = _dense(x), _dense(ids)
    out = x.device.empty(ids.shape, x.dtype)
    if out.size:
        left, right = _sizes(x.shape, dim)
        if right == 1 and x.shape[dim] * x.dtype.nbytes <= GATHER_SHARED_BYTES:
            x.device.get_or_load_func(name.replace("gather_", "gather_shared_", 1), INDEXING)[
                min(left, 1 << 30), STREAM_BLOCK, None, x.shape[dim] * x.dtype.nbytes](left, ids, x, out, x.shape[dim], ids.shape[dim])
            return out
        grid, block = launch_stream(out.size, ids, x, out, tiles=GATHER_TILES)
        x.device.get_or_load_func(name, INDEXING)[grid, block](
            out.size, ids, x, out, left, x.shape[dim], ids.shape[dim], right)
    return out


def _columns(op: str, x, dim: int, ids, src, check_ids: bool, what: str):
    """The checks and operands shared by the in-place column kernels (``ia``, ``s``, ``sa``)."""
    x = as_device_array(x)
    ids, src = as_device_array(ids, x.device), as_device_array(src, x.device)
    dim = _dim(dim, x.ndim, what)
    if src.dtype is not x.dtype:
        raise TypeError(f"{what}: src has dtype {src.dtype}, x has {x.dtype}")
    if not x.is_contiguous:
        raise ValueError(f"{what}: x is updated in place and must be contiguous, got strides {x.strides} "
                         f"for shape {x.shape}")
    _same_except(x.shape, src.shape, dim, what, "x and src")
    name = _kernel(op, ids, x, what)
    if check_ids:
        _check_ids(ids, x.shape[dim], what)
    return name, x, dim, _dense(ids), _dense(src)


def _launch_columns(x, name: str, args: tuple, left: int, right: int):
    if left * right and x.size:
        grid, block = launch_1d(left * right, COLUMN_BLOCK)
        x.device.get_or_load_func(name, INDEXING)[grid, block](*args)


def scatter(x, dim: int, ids, src, *, check_ids: bool = True):
    """In place: ``x[..., ids[..., j, ...], ...] = src[..., j, ...]`` along ``dim`` (torch ``scatter_``,
    candle ``scatter_set``); ``ids`` has ``src``'s shape. Of duplicate indices the last along ``dim``
    wins. Returns ``x``.

    Where candle's columns are few (``S_COLUMNS_MIN``) or a warp's are not adjacent
    (``S_COLUMNS_MIN_RIGHT``, the last dim included), ``s_rows_*`` (along the last dim) or
    ``s_tiles_*``: a block a unit of a row, or of a tile of up to ``S_TILE_COLS`` adjacent columns,
    and a range of destinations along the dim whose u32 winner table fits ``S_ROWS_BYTES`` (past
    ``S_ROWS_GROW`` such ranges, what the device gives a block up to ``S_ROWS_MAX_BYTES``:
    ``_scatter_table_bytes``), at most ``S_ROWS_RANGES`` ranges a row or tile (``S_TILES_RANGES`` a
    tile whose ids fit ``S_TILES_RANGE_IDS``: re-read from the L2), finds each destination's last
    source by shared-memory atomic maxima and then copies the winners: candle's result, with a
    column's work spread over a block where candle's column kernel gives it to one thread. Past
    those ranges, along the last dim up to ``S_SORT_RANGES`` ranges a counting sort of each chunk of
    a row's sources by range (``s_sort_*``) so that each range's block reads only its own entries
    (``s_runs_*``: ``_scatter_sorted``); else the same two passes through a zeroed u32 table the size
    of ``x`` in global memory (``s_winners_*``, one thread a source, in windows of ``S_TABLE_WINDOW``
    destinations that the L2 holds where a ``pre`` has more; ``s_from_winners_*``, one thread an
    element of ``x``). Elsewhere candle's column kernel."""
    name, x, dim, ids, src = _columns("s", x, dim, ids, src, check_ids, "scatter")
    if ids.shape != src.shape:
        raise ValueError(f"scatter: ids must have src's shape {src.shape}, got {ids.shape}")
    left, right = _sizes(src.shape, dim)
    if not (src.size and x.size):
        return x
    n, m = src.shape[dim], x.shape[dim]
    few = right < S_COLUMNS_MIN_RIGHT or left * right < S_COLUMNS_MIN
    if few and _scatter_tiles(x, name, ids, src, left, n, m, right):
        return x
    if few and right == 1 and _scatter_sorted(x, ids, src, left, n, m):
        return x
    if few and max(src.size, x.size) < U32_LIMIT:
        _scatter_table(x, ids, src, n, m, right)
    else:
        _launch_columns(x, name, (ids, src, x, left, n, m, right), left, right)
    return x


def _scatter_table(x, ids, src, n: int, m: int, right: int) -> None:
    """scatter through a u32 winner table the size of ``x`` (sizes below 2**32 - 1), zeroed on the
    device by ``const_set`` (``zeros`` would copy from the host): ``s_winners_*`` then
    ``s_from_winners_*``. Where a ``pre``'s destinations pass ``S_TABLE_WINDOW``, the winners in
    windows of that many, the first storing the flat destinations for the others (``S_TABLE_FLAT``:
    ``s_winners_flat``); a window's winners are final after its pass, so with ``S_TABLE_SLICES`` each
    window's slice of the table is zeroed just before its pass and its winners copied just after,
    while the L2 still holds the slice (neither the zeros nor the winners make a trip to DRAM)."""
    dev = x.device
    win = dev.empty(x.size, pk.u32)
    window = S_TABLE_WINDOW if m * right > S_TABLE_WINDOW else x.size
    slices = S_TABLE_SLICES and window < x.size
    flat = dev.empty(src.size, pk.u32) if S_TABLE_FLAT and window < x.size else None
    if not slices:
        const_set(win, 0)
    gather = kernel_name("s_from_winners", x.dtype)
    for lo in range(0, x.size, window):
        width = min(window, x.size - lo)
        part = win.as_strided((width,), (1,), lo)
        if slices:
            const_set(part, 0)
        if lo and flat is not None:
            dev.get_or_load_func("s_winners_flat", INDEXING)[launch_stream(src.size, flat)](
                src.size, flat, win, lo, width)
        else:
            dev.get_or_load_func(kernel_name("s_winners", ids.dtype), INDEXING)[launch_stream(src.size, ids)](
                src.size, ids, win, n, m, right, lo, width, None if lo else flat)
        if slices:
            dev.get_or_load_func(gather, INDEXING)[launch_stream(width, x)](
                width, part, src, x.as_strided((width,), (1,), lo))
    if not slices:
        dev.get_or_load_func(gather, INDEXING)[launch_stream(x.size, x)](x.size, win, src, x)


def _scatter_sorted(x, ids, src, left: int, n: int, m: int) -> bool:
    """Along the last dim, rows of more than ``S_ROWS_RANGES`` ranges and at most ``S_SORT_RANGES``:
    ``s_sort_*`` sorts each chunk of a row's sources by range, then ``s_runs_*`` takes a block a range
    (the table as ``s_rows_*``'s); False where that does not apply."""
    dev = x.device
    ws = dev.target.wave_size
    span = _scatter_table_bytes(dev, m, 1) // 4
    if not span:
        return False
    ranges = -(-m // span)
    want = max(S_SORT_MIN_BLOCK, -(-ranges * S_SORT_RUN // S_SORT_PER))
    block = max(ws, min(S_SORT_BLOCK, sort.next_power_of_two(want), sort.next_power_of_two(-(-n // S_SORT_PER))))
    chunk = block * S_SORT_PER
    bits = (chunk - 1).bit_length()
    chunks = -(-n // chunk)
    if (ranges > S_SORT_RANGES or ranges + chunk > dev.max_shared_per_block // 4 or left * chunks >= 1 << 31
            or span << bits >= 1 << 32 or max(n, m) >= U32_LIMIT):
        return False
    pairs, offs = dev.empty(src.size, pk.u32), dev.empty(left * chunks * (ranges + 1), pk.u32)
    dev.get_or_load_func(kernel_name("s_sort", ids.dtype), INDEXING)[
        (left * chunks, 1, 1), (block, 1, 1), None, (ranges + chunk) * 4](
        ids, pairs, offs, left, n, m, span, ranges)
    run = min(S_ROWS_BLOCK, max(ws, -(-max(-(-n // ranges), span) // (S_ROWS_PER_THREAD * ws)) * ws))
    dev.get_or_load_func(kernel_name("s_runs", x.dtype), INDEXING)[
        (min(left * ranges, S_ROWS_GRID), 1, 1), (run, 1, 1), None, span * 4](
        pairs, offs, src, x, left, n, m, span, ranges, bits)
    return True


def _scatter_tiles(x, name: str, ids, src, left: int, n: int, m: int, right: int, *,
                   tiles_last: bool = False) -> bool:
    """``s_rows_*``'s or ``s_tiles_*``'s launch where their units fit (see ``scatter``); False where
    they do not. ``tiles_last``: ``s_tiles_*`` (tiles of one column) along the last dim too, where
    the wrapper takes ``s_rows_*``: the benchmark's comparison of the two (docs/targets/cuda.md)."""
    cols = 1 if right == 1 else min(S_TILE_COLS, sort.next_power_of_two(right))
    table = _scatter_table_bytes(x.device, m, cols)
    cols = _grown_tile_cols(m, cols, table)
    per_range = table // (4 * cols)
    if not per_range:
        return False
    ranges = -(-m // per_range)
    rows = right == 1 and not tiles_last
    most = S_TILES_RANGES if right > 1 and n * cols * ids.dtype.nbytes <= S_TILES_RANGE_IDS else S_ROWS_RANGES
    if ranges > most or max(n * cols, n * right, m * right) >= U32_LIMIT:
        return False
    span = -(-m // ranges)
    units = left * -(-right // cols) * ranges
    ws = x.device.target.wave_size
    block = min(S_ROWS_BLOCK, max(ws, -(-max(n, span) * cols // (S_ROWS_PER_THREAD * ws)) * ws))
    x.device.get_or_load_func(name.replace("s_", "s_rows_" if rows else "s_tiles_", 1), INDEXING)[
        (min(units, S_ROWS_GRID), 1, 1), (block, 1, 1), None, span * cols * 4](
        ids, src, x, left, n, m, right, span, cols.bit_length() - 1)
    return True


def _scatter_table_bytes(device, m: int, cols: int) -> int:
    """The bytes of winners a unit of ``s_rows_*`` / ``s_tiles_*`` may hold for a dim of ``m``
    destinations in tiles of ``cols`` columns: ``S_ROWS_BYTES`` where that takes at most ``S_ROWS_GROW``
    ranges, else all the device lets a block have up to ``S_ROWS_MAX_BYTES`` (0: no table fits). A
    bigger table costs resident blocks and L1 (it shares the SM's memory with shared memory), so it
    pays only where it saves ranges, each of which reads all of its row's or tile's ids."""
    limit = min(S_ROWS_MAX_BYTES, device.max_shared_per_block)
    small = min(S_ROWS_BYTES, limit)
    if small < 4 * cols:
        return 0
    return max(small, limit) if -(-m // (small // (4 * cols))) > S_ROWS_GROW else small


def _grown_tile_cols(m: int, cols: int, table: int) -> int:
    """The columns of ``s_tiles_*``'s tiles under a ``table`` of winners grown past ``S_ROWS_BYTES``:
    ``S_TILE_COLS_GROWN`` where ``cols`` would take more than ``S_TILE_NARROW_RANGES`` ranges (fewer
    re-reads of the tile's ids outweigh the narrower loads), else ``cols``."""
    if table <= S_ROWS_BYTES or cols <= S_TILE_COLS_GROWN or -(-m // (table // (4 * cols))) <= S_TILE_NARROW_RANGES:
        return cols
    return S_TILE_COLS_GROWN


def _atomic(op: str, ids, x, deterministic: bool) -> str | None:
    """The atomic kernel for ``op`` where the wrappers may take it: integers (any order of adds gives
    the same sum), or floats when the caller gave up a fixed order; else None (candle's column kernel)."""
    name = kernel_name(op + "_atomic", ids.dtype, x.dtype)
    if name in INDEXING and (x.dtype.is_int or not deterministic):
        return name
    return None


def _launch_atomic(x, name: str, src, args: tuple) -> None:
    if src.size:
        x.device.get_or_load_func(name, INDEXING)[launch_stream(src.size, src, x)](src.size, *args)


def scatter_add(x, dim: int, ids, src, *, check_ids: bool = True, deterministic: bool = True):
    """In place: ``x[..., ids[..., j, ...], ...] += src[..., j, ...]`` (torch ``scatter_add_``, candle
    ``scatter_add_set``), added in order along ``dim``: candle's sums, bit for bit. Returns ``x``.

    u32/i64 values take an atomic add per element (exact in any order); floats too with
    ``deterministic=False`` (torch's way: the rounding then depends on the order the adds land in).
    Otherwise, along the last dim of many rows whose destination row fits ``SA_ROWS_BYTES``, a wave a
    row adds each chunk of sources into the row in shared memory in lane order (``sa_rows_*``); where
    a warp's columns are adjacent (``right >= SORTED_MAX_RIGHT``) candle's column kernel walks each
    (pre, post) column, and elsewhere the ids' positions are argsorted along ``dim`` on the device and
    each destination adds its run of sources in order (``sa_sorted_*``)."""
    name, x, dim, ids, src = _columns("sa", x, dim, ids, src, check_ids, "scatter_add")
    if ids.shape != src.shape:
        raise ValueError(f"scatter_add: ids must have src's shape {src.shape}, got {ids.shape}")
    left, right = _sizes(src.shape, dim)
    atomic = _atomic("sa", ids, x, deterministic)
    rows = kernel_name("sa_rows", ids.dtype, x.dtype)
    if atomic:
        _launch_atomic(x, atomic, src, (ids, src.shape[dim], src, x, src.shape[dim], x.shape[dim], right))
    elif (right == 1 and rows in INDEXING and left >= SA_ROWS_MIN and x.shape[dim] * x.dtype.nbytes <= SA_ROWS_BYTES
          and src.size and x.size):
        x.device.get_or_load_func(rows, INDEXING)[(min(left, (1 << 31) - 1), 1, 1), (x.device.target.wave_size, 1, 1),
                                                   None, x.shape[dim] * x.dtype.nbytes](
            ids, src, x, left, src.shape[dim], x.shape[dim])
    elif right < SORTED_MAX_RIGHT and x.shape[dim] < U32_POSITIONS and src.size and x.size:
        order, pos = _sorted_positions(ids, x.shape[dim], dim)
        x.device.get_or_load_func(kernel_name("sa_sorted", x.dtype), INDEXING)[launch_stream(src.size, src, x)](
            order, pos, src, x, left, src.shape[dim], x.shape[dim], right)
    else:
        _launch_columns(x, name, (ids, src, x, left, src.shape[dim], x.shape[dim], right), left, right)
    return x


def _sorted_positions(ids, size: int, dim: int):
    """``(order, pos)``: each id's position along a dim of ``size`` as u32 (``size`` for the sentinel
    and ids outside it: they sort last and add nothing), and their stable argsort along ``dim``."""
    pos = ids.device.empty(ids.shape, pk.u32)
    ids.device.get_or_load_func(kernel_name("ids_positions", ids.dtype), INDEXING)[launch_stream(ids.size, ids, pos)](
        ids.size, ids, size, pos)
    return sort.argsort(pos, dim), pos


def index_add(x, dim: int, ids, src, *, check_ids: bool = True, deterministic: bool = True):
    """In place: ``x[..., ids[j], ...] += src[..., j, ...]`` along ``dim`` for the 1-D ``ids`` (torch
    ``index_add_``), added in order of ``j``. Returns ``x``; candle's out-of-place ``index_add`` is
    ``index_add(unary.copy(x), ...)``. The ids' positions are argsorted stably on the device and every
    destination row adds its run of source rows in parallel, in order of j (``ia_sorted_*``): candle's
    sums, bit for bit. Where rows are shorter than ``SORTED_MIN_ROW`` (a block's threads along a row
    mostly idle) atomics serve as in ``scatter_add`` (integers; floats with ``deterministic=False``)."""
    name, x, dim, ids, src = _columns("ia", x, dim, ids, src, check_ids, "index_add")
    if ids.ndim != 1 or ids.size != src.shape[dim]:
        raise ValueError(f"index_add: ids must be 1-D with src.shape[{dim}] = {src.shape[dim]} entries, "
                         f"got shape {ids.shape}")
    left, right = _sizes(src.shape, dim)
    atomic = _atomic("ia", ids, x, deterministic) if right < SORTED_MIN_ROW else None
    if atomic:
        _launch_atomic(x, atomic, src, (ids, ids.size, src, x, src.shape[dim], x.shape[dim], right))
    elif src.size and x.size and x.shape[dim] < U32_POSITIONS:
        order, pos = _sorted_positions(ids, x.shape[dim], 0)
        block = min(COLUMN_BLOCK, max(32, sort.next_power_of_two(-(-right // 4))))  # threads along a row
        x.device.get_or_load_func(kernel_name("ia_sorted", x.dtype), INDEXING)[min(left * ids.size, 1 << 30), block](
            order, pos, ids.size, src, x, left, x.shape[dim], right)
    elif src.size:
        _index_add_segments(x, dim, ids, src, left, right)
    return x


def _index_add_segments(x, dim: int, ids, src, left: int, right: int) -> None:
    """index_add through ``ia_segments_*``: the valid ids sorted stably on the host, for dims whose
    positions do not fit the u32 keys of ``ia_sorted_*`` (candle's column kernel would give only
    ``left * right`` threads, each walking every id)."""
    host = ids.to_host().astype(np.int64)
    js = np.nonzero((host != ids.dtype.int_range[1]) & (host >= 0) & (host < x.shape[dim]))[0]
    order = js[np.argsort(host[js], kind="stable")]
    rows, starts = np.unique(host[order], return_index=True)
    if not len(rows):
        return
    segments = len(rows)
    dev = x.device
    order, starts, rows = (dev.to_device(a.astype(np.uint64)) for a in (order, np.append(starts, len(order)), rows))
    grid, block = launch_stream(left * segments * right, src, x)
    dev.get_or_load_func(kernel_name("ia_segments", x.dtype), INDEXING)[grid, block](
        order, starts, rows, segments, ids.size, src, x, left, x.shape[dim], right)


__all__ = ["index_select", "embedding", "gather", "scatter", "scatter_add", "index_add", "position", "TABLE",
           "OPS", "INDICES", "VALUES", "F8_INDICES", "F8_EXTRAS"]
