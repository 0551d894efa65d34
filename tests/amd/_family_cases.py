"""The four families that came after candle's elementwise ones: INDEXING, SORT, CONV (with the MATMUL
module its wrappers multiply with) and QUANTIZED, on the emulator.

None of them has candle's elementwise ABI, so each kernel is launched by name with the arguments its
candle signature takes (``get_or_load_func(name, MODULE)[grid, block](...)``), on inputs sized to reach
its paths and no larger (every launch is replayed on four archs by an emulator that runs a few hundred
thousand elements a second):

* indexing: every ``is``/``gather``/``ia``/``s``/``sa`` kernel under candle's launch with ids that
  include the sentinel, an index past the dim and (signed types) a negative one; ``is`` with strided
  ids through ``info``, ``gather`` along the last dim with 8 elements a thread (its division by
  multiplication); the wrappers' own kernels (row copies, ``ia_segments``, the atomic adds, the ids
  check) through the wrappers or by name;
* sort: candle's ``asort`` under candle's launch (columns held in registers, pairs across waves through
  the dynamic shared index array, 2 columns a thread past 1024) and under another block (candle's
  network alone); the wrappers' row sort (several rows a block, rows across waves), runs and their
  merges (a small run, so two merge passes reach the last), ``sort`` and ``topk``;
* conv: every kernel under candle's launch with permuted and offset operands through ``info``, under a
  small grid-stride launch, and through the wrappers (im2col + GEMM + permuting copy, the direct
  kernels for the dtypes the GEMM lacks, col2im, the pools' and upsamplings' row paths); the GEMM on
  transposed, broadcast-batch and partial tiles;
* quantized: every kernel at the smallest shapes it accepts (one 256-element super-block a row, three
  weight rows: a partial row pair; nine activation columns), on random block bytes with finite
  scales, under candle's launch and the wrappers', MMQ's staged and per-thread paths included.
"""
from __future__ import annotations

import numpy as np

import pykern as pk
import stdlib_kernels as sk
from pykern.runtime.base import DeviceArray
from pykern.runtime.launch import storage
from stdlib_kernels import conv, conv_launch, indexing, kernel_name, matmul, quantized as qk, quantized_api, sort
from stdlib_kernels._common import launch_1d

from tests.amd._registry import case, rng
from tests.amd._stdlib_cases import values


def _launch(dev, module, name: str, grid, block, *args, shared: int = 0) -> None:
    fn = dev.get_or_load_func(name, module)
    args = [storage(a) if isinstance(a, DeviceArray) else a for a in args]
    if shared:
        fn[grid, block, None, shared](*args)
    else:
        fn[grid, block](*args)


# ---- indexing ---------------------------------------------------------------------------------------
def _ids(dtype, count: int, size: int, gen) -> np.ndarray:
    """``count`` ids into a dim of ``size``: valid positions led by the sentinel, one past the dim and,
    for signed types, -1 (the kernels write 0 for / skip each of them)."""
    out = gen.integers(0, size, size=count).astype(dtype.np)
    lead = [dtype.int_range[1], size] + ([-1] if dtype.is_signed else [])
    out[1:1 + len(lead)] = np.array(lead, dtype=object).astype(dtype.np)
    return out


def _index_values(dtype, count: int, gen) -> np.ndarray:
    """Values the adds keep exact in any order (small integers), specials left out of the sums."""
    if dtype.is_float:
        return gen.integers(-8, 9, size=count).astype(dtype.np)
    return gen.integers(0, 50, size=count).astype(dtype.np)


#: (left, src dim, right) of the indexed arrays, ids along the dim: 5 (a block of 256 covers all)
LEFT, SRC, RIGHT, NIDS = 3, 6, 5, 7


def _indexing_candle(dev, op: str, index, value, tag: str, gen) -> None:
    name = kernel_name(op, index, tag)
    if op == "is":
        x = dev.to_device(values(value, LEFT * SRC * RIGHT, gen))
        ids = dev.to_device(_ids(index, NIDS, SRC, gen))
        numel = LEFT * NIDS * RIGHT
        out = dev.to_device(values(value, numel, gen))
        _launch(dev, sk.INDEXING, name, *launch_1d(numel), numel, 1, None, ids, x, out, LEFT, SRC, NIDS, RIGHT)
        # strided ids through info: every other id of a longer buffer, at an offset (a grid-stride launch)
        base = dev.to_device(_ids(index, 3 + 2 * NIDS, SRC, gen))
        view = base.as_strided((NIDS,), (2,), offset=3)
        info = dev.to_device(np.array([NIDS, 2], np.uint64))
        _launch(dev, sk.INDEXING, name, 1, 32, numel, 1, info, view, x, out, LEFT, SRC, NIDS, RIGHT)
    elif op == "gather":
        x = dev.to_device(values(value, LEFT * SRC * RIGHT, gen))
        ids = dev.to_device(_ids(index, LEFT * NIDS * RIGHT, SRC, gen))
        numel = ids.size
        out = dev.to_device(values(value, numel, gen))
        _launch(dev, sk.INDEXING, name, *launch_1d(numel), numel, ids, x, out, LEFT, SRC, NIDS, RIGHT)
        # along the last dim, 8+ elements a thread: the row by a multiplication (rows of 37, one block of 32)
        x2 = dev.to_device(values(value, 9 * 11, gen))
        ids2 = dev.to_device(_ids(index, 9 * 37, 11, gen))
        out2 = dev.to_device(values(value, 9 * 37, gen))
        _launch(dev, sk.INDEXING, name, 1, 32, 9 * 37, ids2, x2, out2, 9, 11, 37, 1)
    elif op == "ia":  # index_add(ids, ids_dim, inp, out, left, src_dim, dst_dim, right)
        ids = dev.to_device(_ids(index, NIDS, SRC, gen))
        src = dev.to_device(_index_values(value, LEFT * NIDS * RIGHT, gen))
        out = dev.to_device(_index_values(value, LEFT * SRC * RIGHT, gen))
        _launch(dev, sk.INDEXING, name, *launch_1d(LEFT * RIGHT, indexing.COLUMN_BLOCK), ids, NIDS, src, out,
                LEFT, NIDS, SRC, RIGHT)
    else:  # s / sa: scatter(ids, inp, out, left, src_dim, dst_dim, right), ids of src's shape; duplicates
        ids = dev.to_device(_ids(index, LEFT * NIDS * RIGHT, SRC, gen))
        src = dev.to_device(_index_values(value, LEFT * NIDS * RIGHT, gen))
        out = dev.to_device(_index_values(value, LEFT * SRC * RIGHT, gen))
        _launch(dev, sk.INDEXING, name, 1, 8, ids, src, out, LEFT, NIDS, SRC, RIGHT)  # grid-stride columns


def _register_indexing() -> None:
    for op in indexing.OPS:
        def run(dev, op=op):
            gen = rng(f"indexing/{op}")
            for _, index, value, tag in (t for t in indexing.TABLE if t[0] == op):
                _indexing_candle(dev, op, index, value, tag, gen)
            for index in indexing.INDICES:  # the f8e4m3 spellings candle's Rust side asks for
                _indexing_candle(dev, op, index, pk.f8e4m3, "f8e4m3", gen)
        case(f"indexing/{op}")(run)


_register_indexing()


@case("indexing/rows")
def _indexing_rows(dev):
    """index_select's whole-row kernels: ``is_words_*`` and ``is_tiles_*`` through the wrapper (aligned
    rows of a multiple of 8 or of 16 bytes), ``is_rows_*`` by name for every pair (the wrapper takes it only for unaligned rows),
    ``gather_shared_*`` (source rows staged in dynamic shared memory) through the gather wrapper along
    the last dim for every pair."""
    gen = rng("indexing/rows")
    for index in indexing.F8_INDICES:  # f8 takes every index type: rows of 264 bytes as 33 words
        for row in (264, 272):         # (is_words_*), of 272 as 17 16-byte tiles (is_tiles_*)
            x = dev.to_device(values(pk.f8e4m3, 7 * row, gen).reshape(7, row))
            ids = dev.to_device(np.array([6, 0, 3, 3, index.int_range[1]], dtype=object).astype(index.np))
            indexing.index_select(x, ids, 0)
    for _, index, value, tag in (t for t in indexing.TABLE if t[0] == "is"):
        right = max(1, 260 // value.nbytes)  # rows of 260 bytes: several tiles a row
        x = dev.to_device(values(value, 5 * right, gen))
        ids = dev.to_device(_ids(index, 4, 5, gen))
        out = dev.to_device(values(value, 4 * right, gen))
        _launch(dev, sk.INDEXING, kernel_name("is_rows", index, tag), 1, 64, 4, ids, x, out, 5, 4, right)
    for _, index, value, tag in (t for t in indexing.TABLE if t[0] == "gather"):
        x = dev.to_device(values(value, 3 * 40, gen).reshape(3, 40))
        indexing.gather(x, 1, dev.to_device(gen.integers(0, 40, size=(3, 50)).astype(index.np)))
    # candle's index_select over strided ids in place (embedding: the ids' layout through info)
    table = dev.to_device(values(pk.bf16, 20 * 8, gen).reshape(20, 8))
    indexing.embedding(dev.to_device(gen.integers(0, 20, size=(6, 5)).astype(np.uint32)).transpose(), table)


@case("indexing/adds")
def _indexing_adds(dev):
    """The wrappers' adds: ``ids_positions_*`` and the stable argsort behind ``ia_sorted_*`` /
    ``sa_sorted_*`` (candle's order, deterministic), ``sa_rows_*`` (two blocks over three rows), the atomic adds (one thread an element: integers,
    or floats with ``deterministic=False``; small integer values keep every order exact),
    ``ia_segments_*`` (the host-sorted fallback), scatter's ``s_rows_*`` (shared-memory winners along the
    last dim, a row in ranges; ``s_tiles_*`` along dim 0 in tiles of columns), ``s_sort_*`` / ``s_runs_*``
    (long rows' counting sort) and ``s_winners_*`` / ``s_winners_flat`` / ``s_from_winners_*`` (a global
    winner table, whole and in windows), and the GPU's ids check."""
    gen = rng("indexing/adds")
    for value in indexing.VALUES + (pk.f8e4m3,):
        ids = dev.to_device(np.array([2, 0, 2, 5, 2, 1, 7], np.uint32))  # one past the dim: skipped
        x = dev.to_device(_index_values(value, 2 * 6 * 33, gen).reshape(2, 6, 33))
        src = dev.to_device(_index_values(value, 2 * 7 * 33, gen).reshape(2, 7, 33))
        indexing.index_add(x, 1, ids, src, check_ids=False)  # rows of 33: ia_sorted whatever the dtype
        order, pos = indexing._sorted_positions(dev.to_device(gen.integers(0, 6, size=(4, 5)).astype(np.int64)), 6, 0)
        src = dev.to_device(_index_values(value, 4 * 5, gen).reshape(4, 5))
        x = dev.to_device(_index_values(value, 6 * 5, gen).reshape(6, 5))
        _launch(dev, sk.INDEXING, kernel_name("sa_sorted", value), 1, 64, order, pos, src, x, 1, 4, 6, 5)
        x = dev.to_device(_index_values(value, 4 * 6 * 3, gen).reshape(4, 6, 3))
        src = dev.to_device(_index_values(value, 4 * 5 * 3, gen).reshape(4, 5, 3))
        indexing._index_add_segments(x, 1, dev.to_device(np.array([2, 0, 2, 5, 2], np.uint32)), src, 4, 3)
    for index in indexing.INDICES:  # sa_rows_* by name (the wrapper takes it for 1024+ rows): rows
        for value in indexing.ROWS_VALUES:  # of 100 sources, chunks of a wave, into rows of 6
            ids = dev.to_device(_ids(index, 3 * 100, 6, gen).reshape(3, 100))
            src = dev.to_device(_index_values(value, 3 * 100, gen).reshape(3, 100))
            x = dev.to_device(_index_values(value, 3 * 6, gen).reshape(3, 6))
            _launch(dev, sk.INDEXING, kernel_name("sa_rows", index, value), 2, dev.target.wave_size, ids, src, x,
                    3, 100, 6, shared=6 * value.nbytes)
    for index in indexing.F8_INDICES:  # every index type's positions: scatter_add's sorted path (f32
        # takes u8/u32/i64 ids; i16/i32, f8's own, by the wrappers' helper)
        x = dev.to_device(_index_values(pk.f32, 6 * 5, gen).reshape(6, 5))
        ids = dev.to_device(_ids(index, 4 * 5, 6, gen).reshape(4, 5))
        if index in indexing.INDICES:
            indexing.scatter_add(x, 0, ids, dev.to_device(_index_values(pk.f32, 4 * 5, gen).reshape(4, 5)),
                                 check_ids=False)
        else:
            indexing._sorted_positions(ids, 6, 0)
        bad = dev.zeros(1, pk.u32)  # the GPU wrappers' ids check (the CPU checks on the host)
        _launch(dev, sk.INDEXING, kernel_name("ids_out_of_range", index), 1, 64, ids.size, ids, 6, bad)
    for index in indexing.INDICES:
        for value in indexing.ATOMIC_VALUES:
            x = dev.to_device(_index_values(value, 5 * 4, gen).reshape(5, 4))
            src = dev.to_device(_index_values(value, 7 * 4, gen).reshape(7, 4))
            indexing.index_add(x, 0, dev.to_device(gen.integers(0, 5, size=7).astype(index.np)), src,
                               deterministic=False)
            indexing.scatter_add(x, 0, dev.to_device(gen.integers(0, 5, size=(7, 4)).astype(index.np)), src,
                                 deterministic=False)
    indexing.scatter(dev.to_device(values(pk.u8, 5 * 9, gen).reshape(5, 9)), 1,  # s_rows_u8_u8 (wrapper)
                     dev.to_device(gen.integers(0, 9, size=(5, 4)).astype(np.uint8)),
                     dev.to_device(values(pk.u8, 5 * 4, gen).reshape(5, 4)))
    for index, value, tag in ([(i, v, tag) for o, i, v, tag in indexing.TABLE if o == "s"]
                              + [(i, pk.f8e4m3, "f8e4m3") for i in indexing.INDICES]):
        # s_rows_* by name for every pair: 3 rows of 50 sources (duplicates, the sentinel, one past the
        # dim) into rows of 20 in ranges of 7 (the last short), two blocks of two waves (the winner
        # table cleared between units)
        ids = dev.to_device(_ids(index, 3 * 50, 20, gen).reshape(3, 50))
        src = dev.to_device(values(value, 3 * 50, gen).reshape(3, 50))
        x = dev.to_device(values(value, 3 * 20, gen).reshape(3, 20))
        _launch(dev, sk.INDEXING, kernel_name("s_rows", index, tag), 2, 2 * dev.target.wave_size, ids, src, x,
                3, 50, 20, 1, 7, 0, shared=7 * 4)
        ids = dev.to_device(_ids(index, 4 * 5, 6, gen).reshape(4, 5))  # dim 0, columns of 5: s_tiles_* in
        src = dev.to_device(values(value, 4 * 5, gen).reshape(4, 5))    # tiles of 2 columns (the last
        _launch(dev, sk.INDEXING, kernel_name("s_tiles", index, tag), 2, dev.target.wave_size, ids, src,  # narrow)
                dev.to_device(values(value, 6 * 5, gen).reshape(6, 5)), 1, 4, 6, 5, 6, 1, shared=6 * 2 * 4)
        ids = dev.to_device(_ids(index, 4 * 5, 6, gen).reshape(4, 5))  # and the global winner table
        indexing._scatter_table(dev.to_device(values(value, 6 * 5, gen).reshape(6, 5)), ids, src, 4, 6, 5)
        # long rows' counting sort by name, 2 rows of two chunks of a wave's block (8 sources a thread;
        # the last chunk short) into ranges of 7 of 20 destinations. s_sort_* on ids whose chunks hold
        # at most one valid id a range (the order inside a range is the shared atomics' and free, so
        # denser ids store other, equally valid, chunks on other targets), the rest skipped;
        # s_runs_* in two blocks of two waves (the table cleared between units) on pairs sorted on the
        # host from dense ids with duplicates
        _counting_sort(dev, index, value, gen)
    # the global table in windows of 12 destinations (x of 30: three), the later ones from the flat
    # destinations the first stored (s_winners_flat) or from the ids again
    keep = indexing.S_TABLE_WINDOW, indexing.S_TABLE_FLAT
    try:
        for index in indexing.INDICES:
            indexing.S_TABLE_WINDOW, indexing.S_TABLE_FLAT = 12, index is pk.u8
            indexing._scatter_table(dev.to_device(values(pk.f32, 6 * 5, gen).reshape(6, 5)),
                                    dev.to_device(_ids(index, 4 * 5, 6, gen).reshape(4, 5)),
                                    dev.to_device(values(pk.f32, 4 * 5, gen).reshape(4, 5)), 4, 6, 5)
    finally:
        indexing.S_TABLE_WINDOW, indexing.S_TABLE_FLAT = keep


def _counting_sort(dev, index, value, gen) -> None:
    """``s_sort_*`` and ``s_runs_*`` by name (see ``_indexing_adds``)."""
    ws = dev.target.wave_size
    n, chunk = 8 * ws + 5, 8 * ws
    bits = (chunk - 1).bit_length()
    sparse = np.full((2, n), 20, np.int64)  # one past the dim
    sparse[:, 1::3] = index.int_range[1]  # the sentinel
    if index.is_signed:
        sparse[:, 2::5] = -1
    for r, j, k in ((0, 3, 2), (0, 40, 9), (0, 100, 19), (0, chunk + 1, 15), (1, 7, 13), (1, chunk + 4, 0)):
        sparse[r, j] = k
    _launch(dev, sk.INDEXING, kernel_name("s_sort", index), 4, ws, dev.to_device(sparse.astype(index.np)),
            dev.empty(2 * n, pk.u32), dev.empty(2 * 2 * 4, pk.u32), 2, n, 20, 7, 3, shared=(3 + chunk) * 4)
    dense = _ids(index, 2 * n, 20, gen).reshape(2, n)
    pairs, offs = np.zeros((2, n), np.uint32), []
    for r in range(2):
        for c in range(2):
            j = np.arange(c * chunk, min(n, (c + 1) * chunk))
            k = dense[r, j].astype(np.int64)
            ok = (k >= 0) & (k < 20) & (dense[r, j] != index.int_range[1])
            at = k[ok] // 7
            entries = (((k[ok] - at * 7) << bits) | (j[ok] - c * chunk))[np.argsort(at, kind="stable")]
            pairs[r, c * chunk:c * chunk + len(entries)] = entries
            offs += [0] + np.cumsum(np.bincount(at, minlength=3)).tolist()
    _launch(dev, sk.INDEXING, kernel_name("s_runs", value), 2, 2 * ws, dev.to_device(pairs),
            dev.to_device(np.array(offs, np.uint32)), dev.to_device(values(value, 2 * n, gen).reshape(2, n)),
            dev.to_device(values(value, 2 * 20, gen).reshape(2, 20)), 2, n, 20, 7, 3, bits, shared=7 * 4)


# ---- sort -------------------------------------------------------------------------------------------
def _sort_rows(dtype, rows: int, n: int, gen) -> np.ndarray:
    """Rows with ties: values of the dtype (specials first) mixed with a small pool."""
    x = values(dtype, rows * n, gen)
    pool = x[:7].copy()
    ties = gen.random(rows * n) < 0.3
    x[ties] = pool[gen.integers(0, len(pool), size=int(ties.sum()))]
    return x.reshape(rows, n)


@case("sort/asort")
def _asort(dev):
    gen = rng("sort/asort")
    for dtype in sort.DTYPES:
        for descending in (False, True):
            # candle's launch: 100 columns -> 128 threads a row holding one each, four (wave32) or two
            # (wave64) waves: pairs across waves through the dynamic shared index array
            x = dev.to_device(_sort_rows(dtype, 3, 100, gen))
            sort.asort_launch(x, descending)
            # another block (48 threads for 64 padded columns): candle's network on the index array alone
            x = dev.to_device(_sort_rows(dtype, 2, 37, gen))
            _launch(dev, sk.SORT, kernel_name("asort_desc" if descending else "asort_asc", dtype), 2, 48, x,
                    dev.empty((2, 37), pk.u32), 37, 64, shared=64 * 4)
    for dtype, descending in ((pk.f32, False), (pk.i64, True)):  # past 1024 columns: 2 held a thread
        sort.asort_launch(dev.to_device(_sort_rows(dtype, 1, 1100, gen)), descending)
    # runs of 1024 merged a tile of 2048 words a block (merge_tiles, 32-bit keys): 2100 columns are
    # three runs, merged twice (the second the last pass)
    sort.sort_rows(dev.to_device(_sort_rows(pk.f32, 1, 2100, gen)), descending=True, run=1024)


@case("sort/wrappers")
def _sort_wrappers(dev):
    gen = rng("sort/wrappers")
    for dtype in sort.DTYPES:
        # short rows, several a block; along dim 0 of a transposed array (the wrappers copy it)
        sort.argsort(dev.to_device(_sort_rows(dtype, 20, 6, gen)), dim=0)
        # rows spanning several waves (600 columns: 80 threads), values taken
        sort.sort(dev.to_device(_sort_rows(dtype, 2, 600, gen)), descending=True)
        sort.topk(dev.to_device(_sort_rows(dtype, 3, 50, gen)), 7, largest=False)
        # runs of 64 and their merges: 64 -> 128 (merge_runs) -> 256 (merge_last) over rows of 200
        x = dev.to_device(_sort_rows(dtype, 2, 200, gen))
        sort.sort_rows(x, descending=False, run=64)
        sort.sort_rows(x, descending=True, run=64)


# ---- conv and matmul --------------------------------------------------------------------------------
def _conv_values(dtype, shape, gen) -> np.ndarray:
    """Small integers for u8/u32 (products wrap the same everywhere), uniform [-2, 2) for floats."""
    if dtype.is_int:
        return gen.integers(0, 255 if dtype is pk.u8 else 70000, size=shape, endpoint=True).astype(dtype.np)
    return gen.uniform(-2, 2, size=shape).astype(dtype.np)


def _view(dev, host: np.ndarray, layout: str):
    """``host`` on ``dev``: contiguous, dims stored in reverse order, or every other element from 5 in."""
    if layout == "contiguous":
        return dev.to_device(host)
    if layout == "permuted":
        base = dev.to_device(np.ascontiguousarray(host.transpose(tuple(reversed(range(host.ndim))))))
        strides, acc = [], 1
        for n in host.shape:
            strides.append(acc)
            acc *= n
        return base.as_strided(host.shape, strides)
    strides = [int(np.prod(host.shape[d + 1:])) * 2 for d in range(host.ndim)]
    buf = np.zeros(5 + 2 * host.size + 3, host.dtype)
    np.lib.stride_tricks.as_strided(buf[5:], host.shape, [s * host.itemsize for s in strides])[...] = host
    return dev.to_device(buf).as_strided(host.shape, strides, offset=5)


def _info(dev, *arrays):
    return dev.to_device(np.array([v for a in arrays for v in (*a.shape, *a.strides)], np.uint64))


def _candle_or_small(numel: int, small: bool):
    """candle's launch (blocks of 1024) or one block of 64 threads looping."""
    return (1, 64) if small else (max(1, -(-numel // 1024)), 1024)


def _out_size(size, k, stride, padding, dilation) -> int:
    return max(0, (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1)


@case("conv/direct")
def _conv_direct(dev):
    gen = rng("conv/direct")
    for dtype in conv.DTYPES:
        t = dtype.tag
        for n, (b, ci, size, co, k, stride, pad, dil) in enumerate(((2, 3, 9, 2, 3, 2, 1, 2), (1, 2, 6, 3, 2, 1, 0, 1))):
            small = n == 1
            x = _view(dev, _conv_values(dtype, (b, ci, size), gen), ("permuted", "offset")[n])
            w = _view(dev, _conv_values(dtype, (co, ci, k), gen), ("offset", "contiguous")[n])
            l_out = _out_size(size, k, stride, pad, dil)
            out = dev.empty((b, co, l_out), dtype)
            _launch(dev, sk.CONV, f"conv1d_{t}", *_candle_or_small(out.size, small), x.size, l_out, stride, pad, dil,
                    _info(dev, x, w), x, w, out)
            x = _view(dev, _conv_values(dtype, (b, ci, size, size - 2), gen), ("offset", "permuted")[n])
            w = _view(dev, _conv_values(dtype, (co, ci, k, k + 1), gen), ("permuted", "contiguous")[n])
            h_out, w_out = _out_size(size, k, stride, pad, dil), _out_size(size - 2, k + 1, stride, pad, dil)
            out = dev.empty((b, co, h_out, w_out), dtype)
            _launch(dev, sk.CONV, f"conv2d_{t}", *_candle_or_small(out.size, not small), x.size, w_out, h_out, stride,
                    pad, dil, _info(dev, x, w), x, w, out)
        for n, (b, ci, size, co, k, stride, pad, opad, dil) in enumerate(((2, 2, 6, 2, 3, 2, 1, 1, 2),
                                                                          (1, 3, 4, 2, 2, 3, 2, 2, 1))):
            small = n == 1
            x = _view(dev, _conv_values(dtype, (b, ci, size), gen), ("offset", "permuted")[n])
            w = _view(dev, _conv_values(dtype, (ci, co, k), gen), ("permuted", "contiguous")[n])
            l_out = (size - 1) * stride - 2 * pad + dil * (k - 1) + opad + 1
            out = dev.empty((b, co, l_out), dtype)
            _launch(dev, sk.CONV, f"conv_transpose1d_{t}", *_candle_or_small(out.size, small), x.size, l_out, stride,
                    pad, opad, dil, _info(dev, x, w), x, w, out)
            x = _view(dev, _conv_values(dtype, (b, ci, size, size + 1), gen), ("permuted", "offset")[n])
            w = _view(dev, _conv_values(dtype, (ci, co, k, k + 1), gen), ("contiguous", "offset")[n])
            h_out = (size - 1) * stride - 2 * pad + dil * (k - 1) + opad + 1
            w_out = size * stride - 2 * pad + dil * k + opad + 1
            out = dev.empty((b, co, h_out, w_out), dtype)
            _launch(dev, sk.CONV, f"conv_transpose2d_{t}", *_candle_or_small(out.size, not small), x.size, w_out,
                    h_out, stride, pad, opad, dil, _info(dev, x, w), x, w, out)


@case("conv/im2col")
def _im2col(dev):
    gen = rng("conv/im2col")
    for dtype in conv.DTYPES:
        t = dtype.tag
        b, c, size, k, stride, pad, dil = 2, 3, 10, 3, 2, 1, 2
        x = _view(dev, _conv_values(dtype, (b, c, size), gen), "permuted")
        l_out = _out_size(size, k, stride, pad, dil)
        out = dev.empty((b, l_out, c, k), dtype)
        threads = b * l_out * c
        for shape in (_candle_or_small(threads, False), (3, 16), conv.im2col_launch(b, c, 1, l_out, 1, k, dtype)):
            _launch(dev, sk.CONV, f"im2col1d_{t}", *shape, threads, l_out, k, stride, pad, dil, _info(dev, x), x, out)
        if dtype in conv.ROWS_IM2COL_DTYPES:  # the wrappers' own rows path
            for shape in ((3, 32), conv.im2col_rows_launch(b, c, 1, l_out, 1, k, stride, dil, dtype, dev, one_d=True)):
                _launch(dev, sk.CONV, f"im2col1d_rows_{t}", *shape, threads, l_out, k, stride, pad, dil, _info(dev, x),
                        x, out)
        if dtype in conv.ROWS_PAIRS_DTYPES:  # the 16-bit pair fill's kernel: contiguous rows of an even length
            xp = dev.to_device(_conv_values(dtype, (b, c, size), gen))
            outp = dev.empty((b, l_out, c, k), dtype)
            for shape in ((3, 32), conv.im2col_rows_launch(b, c, 1, l_out, 1, k, stride, dil, dtype, dev, one_d=True,
                                                          pairs=True)):
                _launch(dev, sk.CONV, f"im2col1d_rows_pairs_{t}", *shape, threads, l_out, k, stride, pad, dil,
                        _info(dev, xp), xp, outp)
        x = _view(dev, _conv_values(dtype, (1, 2, 5, 7), gen), "offset")
        kh, kw, stride, pad, dil = 2, 3, 1, 1, 1
        h_out, w_out = _out_size(5, kh, stride, pad, dil), _out_size(7, kw, stride, pad, dil)
        out = dev.empty((1, h_out, w_out, 2, kh, kw), dtype)
        for shape in (_candle_or_small(out.size, False), (3, 16), conv.im2col_launch(1, 2, h_out, w_out, kh, kw, dtype)):
            _launch(dev, sk.CONV, f"im2col_{t}", *shape, out.size, h_out, w_out, kh, kw, stride, pad, dil,
                    _info(dev, x), x, out)
        if dtype in conv.ROWS_IM2COL_DTYPES:
            for shape in ((3, 32), conv.im2col_rows_launch(1, 2, h_out, w_out, kh, kw, stride, dil, dtype, dev)):
                _launch(dev, sk.CONV, f"im2col_rows_{t}", *shape, out.size, h_out, w_out, kh, kw, stride, pad, dil,
                        _info(dev, x), x, out)
        if dtype in conv.ROWS_PAIRS_DTYPES:  # the 16-bit pair fill's kernel: contiguous rows of an even width
            x = dev.to_device(_conv_values(dtype, (1, 3, 5, 8), gen))
            h_out, w_out = _out_size(5, kh, stride, pad, dil), _out_size(8, kw, stride, pad, dil)
            out = dev.empty((1, h_out, w_out, 3, kh, kw), dtype)
            for shape in ((3, 32), conv.im2col_rows_launch(1, 3, h_out, w_out, kh, kw, stride, dil, dtype, dev,
                                                          pairs=True)):
                _launch(dev, sk.CONV, f"im2col_rows_pairs_{t}", *shape, out.size, h_out, w_out, kh, kw, stride, pad,
                        dil, _info(dev, x), x, out)
        if dtype in conv.VEC_DTYPES:  # the 16-bit 3x3 / 3-tap kernels: channels in 8s, contiguous rows in 4s
            x = dev.to_device(_conv_values(dtype, (1, 8, 5, 8), gen))
            out = dev.empty((1, 5, 8, 8, 3, 3), dtype)
            for shape in ((2, 64), conv.im2col_vec_launch(1, 8, 5, 8, 3, 3, 1, 1)):
                _launch(dev, sk.CONV, f"im2col_3x3_{t}", *shape, out.size, 5, 8, 3, 3, 1, 1, 1, _info(dev, x), x, out)
            x = dev.to_device(_conv_values(dtype, (2, 8, 12), gen))
            out = dev.empty((2, 12, 8, 3), dtype)
            for shape in ((2, 64), conv.im2col_vec_launch(2, 8, 1, 12, 1, 3, 1, 1)):
                for name in ("im2col1d_k3", "im2col1d_k3_narrow"):
                    _launch(dev, sk.CONV, f"{name}_{t}", *shape, 2 * 12 * 8, 12, 3, 1, 1, 1, _info(dev, x), x, out)
        # col2im1d (b, l_in, c_out, k) -> (b, c_out, l_out): a sum in T over l_in
        col = dev.to_device(_conv_values(dtype, (2, 5, 3, 3), gen))
        l_out = (5 - 1) * 2 + 3
        out = dev.empty((2, 3, l_out), dtype)
        for small in (False, True):
            _launch(dev, sk.CONV, f"col2im1d_{t}", *_candle_or_small(out.size, small), out.size, l_out, 5, 3, 3, 2,
                    col, out)
        if dtype in conv.ROWS_COL2IM_DTYPES:  # the wrappers' own col2im1d kernels by name (two items, a batch each)
            col = dev.to_device(_conv_values(dtype, (2, 9, 4, 4), gen))
            l_out = (9 - 1) * 2 + 4
            out = dev.empty((2, 4, l_out), dtype)
            for shape in ((3, 32), conv.col2im1d_rows_launch(2, 9, 4, 4, 2, dtype, dev.target)):
                _launch(dev, sk.CONV, f"col2im1d_rows_{t}", *shape, out.size, l_out, 9, 4, 4, 2, col, out)
            _launch(dev, sk.CONV, f"col2im1d_staged_{t}", *conv.col2im1d_launch(2, 9, 4, 4, 2, dtype), out.size, l_out,
                    9, 4, 4, 2, col, out)


@case("conv/pool_upsample")
def _pool_upsample(dev):
    gen = rng("conv/pool_upsample")
    for dtype in conv.DTYPES:
        t = dtype.tag
        for n, (shape, k, s) in enumerate((((2, 2, 7, 9), (2, 3), (2, 3)), ((1, 2, 8, 12), (2, 2), (2, 2)),
                                           ((1, 1, 7, 7), (3, 3), (1, 3)))):
            host = _conv_values(dtype, shape, gen)
            if dtype.is_float:
                host.reshape(-1)[[0, 3]] = np.nan  # max: NaN first in a window is kept, later ones skipped
            x = _view(dev, host, ("permuted", "contiguous", "offset")[n])
            o2, o3 = (shape[2] - k[0]) // s[0] + 1, (shape[3] - k[1]) // s[1] + 1
            for op in ("avg_pool2d", "max_pool2d"):
                out = dev.empty(shape[:2] + (o2, o3), dtype)
                _launch(dev, sk.CONV, f"{op}_{t}", *_candle_or_small(out.size, n == 2), x.size, k[0], k[1], s[0],
                        s[1], _info(dev, x), x, out)
                getattr(conv_launch, op)(x, k, s)  # the wrappers' rows path
        for n, (shape, (o2, o3)) in enumerate((((2, 2, 4, 5), (8, 11)), ((1, 2, 6, 6), (3, 4)),
                                                ((1, 2, 3, 5), (6, 10)),  # exact 2x: nearest_int_rows
                                                ((1, 2, 3, 5), (12, 20)))):  # exact 4x
            x = _view(dev, _conv_values(dtype, shape, gen), ("offset", "permuted", "contiguous")[min(n, 2)])
            out = dev.empty(shape[:2] + (o2, o3), dtype)
            _launch(dev, sk.CONV, f"upsample_nearest2d_{t}", *_candle_or_small(out.size, n == 1), o2, o3,
                    shape[2] / o2, shape[3] / o3, _info(dev, x), x, out)
            conv_launch.upsample_nearest2d(x, (o2, o3))
            if n == 3:  # the 4x shape is for nearest_int_rows; bilinear's 4x is below
                continue
            for align, (sh, sw) in ((False, (None, None)), (True, (2.5, None)), (False, (None, 0.75))):
                _launch(dev, sk.CONV, f"upsample_bilinear2d_{t}", *_candle_or_small(out.size, n == 0), o3, o2, align,
                        sh is not None, sh or 0.0, sw is not None, sw or 0.0, _info(dev, x), x, out)
            conv_launch.upsample_bilinear2d(x, (o2, o3), align_corners=n == 1)
            conv_launch.upsample_bilinear2d(x, scale_factor=1.5)
        if dtype in conv.BILINEAR_INT_DTYPES:  # exactly 2x and 4x of whole words: upsample_bilinear2d_{2,4}x
            for factor in conv.BILINEAR_INT_FACTORS:
                conv_launch.upsample_bilinear2d(_view(dev, _conv_values(dtype, (1, 2, 5, 8), gen), "contiguous"),
                                                scale_factor=float(factor))
            # exactly half: upsample_bilinear2d_down2x
            conv_launch.upsample_bilinear2d(_view(dev, _conv_values(dtype, (1, 2, 6, 10), gen), "contiguous"),
                                            scale_factor=0.5)


@case("conv/wrappers")
def _conv_wrappers(dev):
    gen = rng("conv/wrappers")
    for dtype in conv.DTYPES:  # im2col + GEMM + ucopy for f32/f16/bf16, the direct kernels for the rest
        x = _view(dev, _conv_values(dtype, (2, 3, 11), gen), "permuted")
        w = _view(dev, _conv_values(dtype, (4, 3, 3), gen), "offset")
        conv_launch.conv1d(x, w, stride=2, padding=1)
        x = dev.to_device(_conv_values(dtype, (1, 2, 6, 7), gen))
        w = dev.to_device(_conv_values(dtype, (3, 2, 3, 2), gen))
        conv_launch.conv2d(x, w, padding=1, dilation=2)
        x = dev.to_device(_conv_values(dtype, (2, 3, 5), gen))
        conv_launch.conv_transpose1d(x, dev.to_device(_conv_values(dtype, (3, 2, 3), gen)), stride=2)  # col2im
        conv_launch.conv_transpose1d(x, dev.to_device(_conv_values(dtype, (3, 2, 3), gen)), padding=1)  # direct
        conv_launch.conv_transpose2d(dev.to_device(_conv_values(dtype, (1, 2, 3, 4), gen)),
                                     dev.to_device(_conv_values(dtype, (2, 2, 2, 3), gen)), stride=2)


@case("matmul/gemm")
def _gemm(dev):
    gen = rng("matmul/gemm")
    for dtype in matmul.DTYPES:
        a = dev.to_device(_conv_values(dtype, (5, 20), gen))  # 3 slices of k (the double buffer turns)
        b = dev.to_device(_conv_values(dtype, (20, 9), gen))
        matmul.matmul(a, b)
        bt = dev.to_device(_conv_values(dtype, (9, 20), gen)).transpose()  # b read along k
        at = dev.to_device(_conv_values(dtype, (20, 5), gen)).transpose()  # a read along m
        matmul.matmul(at, bt)
        # a batch of 2 against one broadcast b; 130 rows: a second, partial tile of rows
        matmul.matmul(dev.to_device(_conv_values(dtype, (2, 130, 3), gen)), dev.to_device(_conv_values(dtype, (3, 4), gen)))


# ---- quantized --------------------------------------------------------------------------------------
#: byte offsets of each format's f16 scale fields (q8_K's d is an f32 at 0), as tests/stdlib/test_quantized.py
SCALE_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q2_K": [80, 82],
                "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208], "q8_K": []}
#: the smallest row every format takes: one super-block (eight blocks of the 32-element formats)
QK_COLS = 256


def random_blocks(gen, name: str, rows: int, cols: int = QK_COLS) -> np.ndarray:
    """Random block bytes (every quant bit pattern) with finite scales of both signs: (rows * bytes,) u8."""
    q = qk.QTYPES[name]
    raw = gen.integers(0, 256, size=(rows, cols // q.qk, q.nbytes), dtype=np.uint8)
    for off in SCALE_FIELDS[name]:
        v = gen.uniform(0.5, 1.5, raw.shape[:2]) * 1e-2 * gen.choice([-1.0, 1.0], raw.shape[:2])
        raw[..., off:off + 2] = v.astype(np.float16)[..., None].view(np.uint8)
    if name == "q8_K":
        raw[..., 0:4] = (gen.standard_normal(raw.shape[:2]) * 1e-2).astype(np.float32)[..., None].view(np.uint8)
    return raw.reshape(-1)


@case("quantized/dequantize_get_rows")
def _dequantize(dev):
    gen = rng("quantized/dequantize_get_rows")
    for name, q in qk.QTYPES.items():
        # 32-element formats: a row of 288 ends in a partial block of candle's launch; K formats: two rows
        shape = (1, 288) if q.qk == 32 else (2, QK_COLS)
        el = shape[0] * shape[1]
        blocks = dev.to_device(random_blocks(gen, name, *shape))
        per, threads, unit = qk.DEQUANTIZE_LAUNCH[name]
        for dtype in (pk.f32, pk.f16):
            out = dev.to_device(values(dtype, el, gen))
            _launch(dev, sk.QUANTIZED, kernel_name("dequantize_block", name, dtype), -(-el // per), threads, blocks,
                    out, *(() if unit is None else (el // unit,)))  # candle's launch
            quantized_api.dequantize(blocks, name, shape, dtype)  # the wrappers'
    for q in qk.MATMUL_TYPES:  # rows 2 and 0 of a 3-row table
        cols = 1024 if q.qk == 32 else QK_COLS
        quantized_api.get_rows(dev.to_device(random_blocks(gen, q.name, 3, cols)), q.name, (3, cols), [2, 0])
    for dtype in qk.FLOAT_ROWS:
        table = dev.to_device(values(dtype, 3 * 300, gen))
        quantized_api.get_rows(table, dtype.tag, (3, 300), [1, 2, 1])


def _activations(gen, rows: int, cols: int = QK_COLS) -> np.ndarray:
    return gen.standard_normal((rows, cols)).astype(np.float32)


#: candle's MMQ kernel on a 32 x 32 tile (candle's own are 64-128 wide): both of its paths on few threads
MMQ_SMALL_TILE = pk.Module("quantized_mmq_small_tile").add(
    *(qk.mul_mat_q.instance(kernel_name("mul_mat", q.name), Q=q, tile_x=32, tile_y=32) for q in qk.MATMUL_TYPES))


@case("quantized/products")
def _products(dev):
    gen = rng("quantized/products")
    x8 = _activations(gen, 9)
    vy, k_padded = quantized_api.quantize_q8_1(dev.to_device(x8))  # nine q8_1 columns, rows padded to 512
    for q in qk.MATMUL_TYPES:
        w = dev.to_device(random_blocks(gen, q.name, 3))  # three rows: MMVQ's row pairs end with a half
        for batch in qk.MMVQ_WIDTHS:  # candle's MMVQ launch for 1 to 8 columns
            rows = qk.mmvq_rows(batch)
            out = dev.zeros((batch, 3), pk.f32)
            _launch(dev, sk.QUANTIZED, f"mul_mat_vec_{q.name}_q8_1_cuda{batch}", -(-3 // rows),
                    (32, 4 if batch <= 4 else 2), w, vy, out, QK_COLS, 3, k_padded, 3)
        # MMQ: candle's tile and block (the staged path); a 32 x 32 tile, staged and per thread
        out = dev.zeros((9, 3), pk.f32)
        for module, block in ((sk.QUANTIZED, (32, 4)), (MMQ_SMALL_TILE, (32, 4)), (MMQ_SMALL_TILE, (32, 2))):
            _launch(dev, module, kernel_name("mul_mat", q.name), (1, 1), block, w, vy, out, QK_COLS, 3, 9, k_padded, 3)
        # the wrappers: one column, nine (planar q8_1: two groups of 8, the second partly past the
        # matrix), and candle's forced DMMV
        for batch in (1, 9):
            quantized_api.matmul(w, q.name, dev.to_device(x8[:batch]))
        quantized_api.matmul(w, q.name, dev.to_device(x8[:1]), dmmv=True)
    for name in qk.MOE_NAMES:  # 2 experts of 3 rows; (batch 2, topk 2), shared and per-task inputs
        w = dev.to_device(random_blocks(gen, name, 2 * 3))
        ids = np.array([[1, 0], [1, 1]], np.uint32)
        quantized_api.moe_matmul(w, name, (2, 3, QK_COLS), dev.to_device(_activations(gen, 2).reshape(2, 1, -1)), ids)
        quantized_api.moe_matmul(w, name, (2, 3, QK_COLS), dev.to_device(_activations(gen, 4).reshape(2, 2, -1)), ids)


@case("quantized/mma")
def _mma(dev):
    """The wrappers' MMQ on pk.mma (q4_0, q8_0, q4_K, q6_K above 16 columns), every tile under the
    wrappers' launch: 21 rows (a partial 16- and 32-row tile), 288 columns (a partial last stage of 8
    blocks; the K formats 256, one superblock), 19 activation columns (a partial tile), then matmul
    at 19 columns (its dispatch)."""
    gen = rng("quantized/mma")
    cols, nrows, ncols_y = 288, 21, 19
    x = _activations(gen, ncols_y, cols)
    for q in qk.MMQ_MMA_TYPES:
        qcols = cols if qk.QTYPES[q].qk == 32 else 256
        vy, k_padded = quantized_api.quantize_q8_1(dev.to_device(np.ascontiguousarray(x[:, :qcols])))
        w = dev.to_device(random_blocks(gen, q, nrows, qcols))
        for wr, wc, kw in qk.mmq_mma_tiles(q):
            out = dev.zeros((ncols_y, nrows), pk.f32)
            _launch(dev, sk.QUANTIZED, f"mul_mat_mma_{q}_{wr}x{wc}x{kw}",
                    (-(-nrows // (16 * wr)), -(-ncols_y // (16 * wc))), qk.MMQ_MMA_WAVES * dev.target.wave_size,
                    w, vy, out, qcols, nrows, ncols_y, k_padded, nrows)
        quantized_api.matmul(w, q, dev.to_device(np.ascontiguousarray(x[:, :qcols])))
