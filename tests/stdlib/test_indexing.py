"""INDEXING: every ``is/gather/ia/s/sa_{I}_{T}`` kernel under candle's launch against a NumPy model of
candle's CPU backend (sentinels, out-of-range and negative indices, duplicates, offset pointers),
bit-exact: ``ia``/``s``/``sa`` walk each column in order, so even float sums have one answer (each
add rounded to T, as candle's ``+=`` on T); the host wrappers on strided, offset, odd-sized and empty
inputs along every dim; the kernels never touch memory outside their buffers; bad input errors."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import pykern as pk
from pykern import f8e4m3, i16, i32, i64, u8, u32
from stdlib_kernels import INDEXING, indexing, kernel_name
from _elementwise import ABI, RNG, abi_mismatches, assert_bits, random, to_f8

#: every exported kernel: (op, index dtype, value dtype, name)
KERNELS = ([(op, i, v, kernel_name(op, i, tag)) for op, i, v, tag in indexing.TABLE]
           + [(op, i, f8e4m3, kernel_name(op, i, "f8e4m3")) for op in indexing.OPS for i in indexing.INDICES])
#: the wrappers' own kernels beside candle's names
OWN = ({kernel_name("is_rows", i, tag) for op, i, v, tag in indexing.TABLE if op == "is"}
       | {kernel_name(op, i, v) for op in ("sa_atomic", "ia_atomic") for i in indexing.INDICES for v in indexing.ATOMIC_VALUES}
       | {kernel_name("ia_segments", v) for v in indexing.VALUES + (f8e4m3,)}
       | {kernel_name("ids_out_of_range", i) for i in indexing.F8_INDICES}
       | {kernel_name(op, i) for op in ("is_words", "is_tiles", "ids_positions") for i in indexing.F8_INDICES}
       | {kernel_name("gather_shared", i, tag) for op, i, v, tag in indexing.TABLE if op == "gather"}
       | {kernel_name(op, v) for op in ("ia_sorted", "sa_sorted") for v in indexing.VALUES + (f8e4m3,)}
       | {kernel_name("sa_rows", i, v) for i in indexing.INDICES for v in indexing.ROWS_VALUES}
       | {kernel_name("s_rows", i, tag) for op, i, v, tag in indexing.TABLE if op == "s"}
       | {kernel_name("s_rows", i, "f8e4m3") for i in indexing.INDICES}
       | {kernel_name("s_tiles", i, tag) for op, i, v, tag in indexing.TABLE if op == "s"}
       | {kernel_name("s_tiles", i, "f8e4m3") for i in indexing.INDICES}
       | {kernel_name("s_winners", i) for i in indexing.INDICES} | {"s_winners_flat"}
       | {kernel_name("s_sort", i) for i in indexing.INDICES}
       | {kernel_name("s_runs", v) for v in indexing.VALUES + (f8e4m3,)}
       | {kernel_name("s_from_winners", v) for v in indexing.VALUES + (f8e4m3,)})
LEFT, SRC, DST, RIGHT = 2, 5, 4, 3  # tiny, odd, and src != dst along the indexed dim


def sentinel(idt) -> int:
    return idt.int_range[1]


def index_data(idt, n: int, size: int) -> np.ndarray:
    """Valid positions with duplicates, the sentinel, one past the end, and (signed types) -1."""
    extra = [sentinel(idt), size] + ([-1] if idt.is_signed else [])
    vals = RNG.integers(0, size, n)
    at = RNG.choice(n, min(len(extra), n // 2), replace=False)
    vals[at] = extra[: len(at)]
    return vals.astype(idt.np)


def values(dt, shape) -> np.ndarray:
    return random(dt, shape, -8.0, 8.0)


def add_as(dt, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """candle's ``a + b`` on T: ints wrap; f16/bf16/f8 add in f32 and round once; f32/f64 natively."""
    if dt.is_int:
        return (a.astype(np.int64) + b.astype(np.int64)).astype(dt.np)
    if dt.is_storage_float:
        s = a.astype(np.float32) + b.astype(np.float32)
        return to_f8(s) if dt is f8e4m3 else s.astype(dt.np)
    return a + b


def valid(ids: np.ndarray, idt, size: int) -> np.ndarray:
    k = ids.astype(np.int64)
    return (k != sentinel(idt)) & (k >= 0) & (k < size)


# ---- NumPy models of candle's CPU backend (3-D views: left, dim, right) -----------------------------
def ref_select(x, ids, idt):
    ok = valid(ids, idt, x.shape[1])
    out = x[:, np.where(ok, ids.astype(np.int64), 0), :].copy()
    out[:, ~ok, :] = 0
    return out


def ref_gather(x, ids, idt):
    ok = valid(ids, idt, x.shape[1])
    out = np.take_along_axis(x, np.where(ok, ids.astype(np.int64), 0), axis=1)
    out[~ok] = 0
    return out


def ref_scatter(out, ids, src, idt, dt, accumulate):
    """Column by column, in order along the dim: the last duplicate wins (s), or each add rounds (sa)."""
    out = out.copy()
    for j in range(src.shape[1]):
        pre, post = np.nonzero(valid(ids[:, j, :], idt, out.shape[1]))
        k = ids[pre, j, post].astype(np.int64)
        out[pre, k, post] = add_as(dt, out[pre, k, post], src[pre, j, post]) if accumulate else src[pre, j, post]
    return out


def ref_index_add(out, ids, src, idt, dt):
    return ref_scatter(out, np.broadcast_to(ids[None, :, None], src.shape), src, idt, dt, True)


def candle_launch(dev, name, numel, *args):
    """cudarc's ``for_num_elems``: ceil(n / 1024) blocks of 1024."""
    dev.get_or_load_func(name, INDEXING)[(max(1, -(-numel // 1024)), 1, 1), (1024, 1, 1)](*args)


def offset_copy(dev, host: np.ndarray, offset: int):
    """``host`` on the device ``offset`` elements into a bigger buffer (candle's pre-offset pointers)."""
    base = np.zeros(host.size + offset + 3, host.dtype)
    base[offset: offset + host.size] = host.reshape(-1)
    strides = [math.prod(host.shape[d + 1:]) for d in range(host.ndim)]
    return dev.to_device(base).as_strided(host.shape, strides, offset)


@pytest.mark.parametrize("op,idt,dt,name", KERNELS, ids=lambda p: p if isinstance(p, str) else "")
def test_kernel(wave_device, op, idt, dt, name):
    dev = wave_device
    if op == "is":
        x, ids = values(dt, (LEFT, SRC, RIGHT)), index_data(idt, 7, SRC)
        out = dev.empty((LEFT, 7, RIGHT), dt)
        n = out.size
        candle_launch(dev, name, n, n, 1, None, offset_copy(dev, ids, 5), offset_copy(dev, x, 3), out,
                      LEFT, SRC, 7, RIGHT)
        assert_bits(out.to_host(), ref_select(x, ids, idt), name)
    elif op == "gather":
        x, ids = values(dt, (LEFT, SRC, RIGHT)), index_data(idt, LEFT * 6 * RIGHT, SRC).reshape(LEFT, 6, RIGHT)
        out = dev.empty(ids.shape, dt)
        candle_launch(dev, name, out.size, out.size, offset_copy(dev, ids, 1), offset_copy(dev, x, 2), out,
                      LEFT, SRC, 6, RIGHT)
        assert_bits(out.to_host(), ref_gather(x, ids, idt), name)
    elif op == "ia":
        acc, ids, src = values(dt, (LEFT, DST, RIGHT)), index_data(idt, 9, DST), values(dt, (LEFT, 9, RIGHT))
        ids[:3] = [1, 1, 1]  # a run of duplicates: the adds to one row happen in order
        out = offset_copy(dev, acc, 4)
        candle_launch(dev, name, LEFT * RIGHT, offset_copy(dev, ids, 1), 9, offset_copy(dev, src, 2), out,
                      LEFT, 9, DST, RIGHT)
        assert_bits(out.to_host(), ref_index_add(acc, ids, src, idt, dt), name)
    else:
        acc, src = values(dt, (LEFT, DST, RIGHT)), values(dt, (LEFT, SRC, RIGHT))
        ids = index_data(idt, src.size, DST).reshape(src.shape)
        ids[:, :2, :] = 2  # every column writes row 2 twice: the last write wins / both adds count
        out = offset_copy(dev, acc, 4)
        candle_launch(dev, name, LEFT * RIGHT, offset_copy(dev, ids, 3), offset_copy(dev, src, 1), out,
                      LEFT, SRC, DST, RIGHT)
        assert_bits(out.to_host(), ref_scatter(acc, ids, src, idt, dt, op == "sa"), name)


def test_abi():
    assert abi_mismatches(INDEXING) == []
    want = json.loads(ABI.read_text())["modules"]["indexing"]
    assert len(want) == 125 and set(INDEXING.names()) - set(want) == set(indexing.F8_EXTRAS) | OWN
    target = pk.device("cpu").target
    for name in indexing.F8_EXTRAS:  # the same parameters as the u8/u32/i64 kernels they mirror
        twin = name.replace("f8e4m3", "f32")
        assert ([t.nbytes for _, t in INDEXING.get(name).typed(target).params]
                == [t.nbytes for _, t in INDEXING.get(twin).typed(target).params])


def test_is_reads_ids_through_their_layout(wave_device):
    """candle's launch passes info = ids dims + strides; strided ids are read through them (candle's
    CUDA kernel applies them to the source offset: docs/compat.md)."""
    dev = wave_device
    x, base = values(pk.f32, (3, 6, 2)), np.array([5, 1, 7, 4, 0, 9, 2, 8, 3, 255, 1], np.uint8)
    ids = base[1::2]  # 1, 4, 9, 8, 255: two out of range, the sentinel
    info = dev.to_device(np.array([5, 2], np.uint64))
    out = dev.empty((3, 5, 2), pk.f32)
    span = dev.to_device(base).as_strided((10,), (1,), 1)
    candle_launch(dev, "is_u8_f32", out.size, out.size, 1, info, span, dev.to_device(x), out, 3, 6, 5, 2)
    assert_bits(out.to_host(), ref_select(x, ids, u8))
    # 2-D ids (candle's embedding after flatten keeps rank): a transposed (2, 3) layout
    ids2 = np.array([[0, 5, 3], [2, 2, 1]], np.int64)
    info = dev.to_device(np.array([2, 3, 1, 2], np.uint64))
    out = dev.empty((3, 6, 2), pk.f32)
    candle_launch(dev, "is_i64_f32", out.size, out.size, 2, info, dev.to_device(ids2.T.copy()), dev.to_device(x),
                  out, 3, 6, 6, 2)
    assert_bits(out.to_host(), ref_select(x, ids2.reshape(-1), i64))


@pytest.mark.parametrize("op,idt", [(op, i) for op in indexing.OPS for i in indexing.INDICES]
                         + [(op, i) for op in ("is", "gather", "ia", "sa") for i in (i16, i32)], ids=str)
def test_never_outside_the_buffers(op, idt):
    """Under the host's bounds checks every access of every kernel is inside its exact-size buffers,
    with sentinels, one-past-the-end, huge and negative indices."""
    dev = pk.device("cpu", check_bounds=True)
    dt = pk.f8e4m3 if idt in (i16, i32) else pk.f32
    tag = "f8_e4m3" if dt is f8e4m3 else "f32"
    if op == "s" and dt is f8e4m3:
        tag = "f8e4m3"
    name = kernel_name(op, idt, tag)
    bad = [sentinel(idt), SRC, DST, idt.int_range[1] - 1] + ([-1, idt.int_range[0]] if idt.is_signed else [])
    ids = np.resize(np.array(bad + [0, 1], np.int64), 8).astype(idt.np)
    if op == "is":
        x, out = dev.to_device(values(dt, (LEFT, SRC, RIGHT))), dev.empty((LEFT, 8, RIGHT), dt)
        candle_launch(dev, name, out.size, out.size, 1, None, dev.to_device(ids), x, out, LEFT, SRC, 8, RIGHT)
        assert_bits(out.to_host(), ref_select(x.to_host(), ids, idt))
    elif op == "gather":
        g = np.resize(ids, LEFT * 8 * RIGHT).reshape(LEFT, 8, RIGHT)
        x, out = dev.to_device(values(dt, (LEFT, SRC, RIGHT))), dev.empty(g.shape, dt)
        candle_launch(dev, name, out.size, out.size, dev.to_device(g), x, out, LEFT, SRC, 8, RIGHT)
        assert_bits(out.to_host(), ref_gather(x.to_host(), g, idt))
    elif op == "ia":
        acc, src = values(dt, (LEFT, DST, RIGHT)), values(dt, (LEFT, 8, RIGHT))
        out = dev.to_device(acc)
        candle_launch(dev, name, LEFT * RIGHT, dev.to_device(ids), 8, dev.to_device(src), out, LEFT, 8, DST, RIGHT)
        assert_bits(out.to_host(), ref_index_add(acc, ids, src, idt, dt))
    else:
        acc, src = values(dt, (LEFT, DST, RIGHT)), values(dt, (LEFT, 8, RIGHT))
        s = np.resize(ids, src.size).reshape(src.shape)
        out = dev.to_device(acc)
        candle_launch(dev, name, LEFT * RIGHT, dev.to_device(s), dev.to_device(src), out, LEFT, 8, DST, RIGHT)
        assert_bits(out.to_host(), ref_scatter(acc, s, src, idt, dt, op == "sa"))


# ---- the wrappers ---------------------------------------------------------------------------------
def strided_views(dev, host: np.ndarray):
    """(label, device view, host array): contiguous, transposed (strided), offset into a bigger buffer."""
    yield "contiguous", dev.to_device(host), host
    t = np.ascontiguousarray(np.swapaxes(host, 0, -1))
    yield "transposed", dev.to_device(t).transpose(0, -1) if host.ndim > 1 else dev.to_device(t), np.swapaxes(t, 0, -1)
    yield "offset", offset_copy(dev, host, 7), host


def as3(x: np.ndarray, dim: int) -> np.ndarray:
    """``x`` viewed as (left, dim, right) around ``dim``."""
    return x.reshape(math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1:]))


SHAPE = (3, 5, 4)
WRAPPER_CASES = [(pk.f32, u32), (pk.bf16, i64), (pk.i64, u8), (pk.f16, u32), (pk.u8, i64), (f8e4m3, i32)]


@pytest.mark.parametrize("dt,idt", WRAPPER_CASES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select_and_embedding(wave_device, dt, idt, dim):
    dev, d = wave_device, dim % 3
    host = values(dt, SHAPE)
    ids = np.array([SHAPE[d] - 1, 0, sentinel(idt), 0, 1][: SHAPE[d] + 2], idt.np)
    for label, x, hx in strided_views(dev, host):
        for ilabel, dids in (("ids", dev.to_device(ids)), ("strided ids", dev.to_device(np.repeat(ids, 2)).as_strided(ids.shape, (2,)))):
            got = indexing.index_select(x, dids, dim)
            want = ref_select(as3(hx, d), ids, idt).reshape(SHAPE[:d] + ids.shape + SHAPE[d + 1:])
            assert_bits(got.to_host(), want, f"{label} {ilabel} dim {dim}")
    table, tok = values(dt, (7, 9)), np.array([[3, 0, 6], [6, 6, sentinel(idt)]], idt.np)
    for label, dids, hids in (("ids", dev.to_device(tok), tok), ("transposed ids", dev.to_device(tok.T.copy()).transpose(), tok)):
        got = indexing.embedding(dids, dev.to_device(table))
        assert got.shape == (2, 3, 9)
        assert_bits(got.to_host(), ref_select(table[None], hids.reshape(-1), idt).reshape(2, 3, 9), label)
    empty = indexing.index_select(dev.to_device(host), dev.to_device(np.zeros(0, idt.np)), dim)
    assert empty.shape == SHAPE[:d] + (0,) + SHAPE[d + 1:]


@pytest.mark.parametrize("dt,idt", [(pk.f32, i64), (pk.bf16, u8), (pk.u8, u32), (f8e4m3, i16)], ids=str)
def test_index_select_whole_rows(wave_device, dt, idt):
    """Rows of ROW_BYTES or more take ``is_rows_*`` (odd lengths: vector bodies and tails; an offset
    source: unaligned rows); strided ids keep candle's kernel."""
    dev = wave_device
    right = -(-indexing.ROW_BYTES // dt.nbytes) + 3
    host = values(dt, (3, 7, right))
    ids = np.array([6, 0, sentinel(idt), 6, 2, 5, 1, 3, 3], idt.np)
    for label, x in (("contiguous", dev.to_device(host)), ("offset", offset_copy(dev, host, 3))):
        got = indexing.index_select(x, dev.to_device(ids), 1)
        assert_bits(got.to_host(), ref_select(host, ids, idt), label)
    embed = indexing.embedding(dev.to_device(ids[:4].reshape(2, 2)), dev.to_device(host[0]))
    assert_bits(embed.to_host(), ref_select(host[:1], ids[:4], idt).reshape(2, 2, right))


@pytest.mark.parametrize("dt,idt", [(pk.f32, i64), (pk.f16, u8), (pk.f64, u32), (f8e4m3, i16)], ids=str)
def test_index_select_words(wave_device, dt, idt):
    """Rows of a multiple of 8 bytes at aligned addresses move as u64 words (``is_words_*``): rows of
    one, several and a partial last ``ROW_WORDS`` chunk a thread, the sentinel's row of zeros, a grid
    smaller than the chunks (each thread loops), and an odd-element offset that takes ``is_rows_*``."""
    dev = wave_device
    for row_bytes in (indexing.ROW_BYTES, 8 * indexing.ROW_WORDS * 5 + 24):
        right = row_bytes // dt.nbytes
        host = values(dt, (2, 9, right))
        ids = np.array([8, 0, sentinel(idt), 8, 3, 5, 1, 2, 2, 7, 4], idt.np)
        for label, x in (("contiguous", dev.to_device(host)), ("offset", offset_copy(dev, host, 8 // dt.nbytes)),
                         ("odd offset", offset_copy(dev, host, 1) if dt.nbytes < 8 else dev.to_device(host))):
            got = indexing.index_select(x, dev.to_device(ids), 1)
            assert_bits(got.to_host(), ref_select(host, ids, idt), f"{row_bytes} B rows, {label}")
        words = row_bytes // 8
        out = dev.empty((2, len(ids), right), dt)
        x = dev.to_device(host)
        for grid, block in ((1, 32), (3, 64)):
            dev.get_or_load_func(kernel_name("is_words", idt), INDEXING)[grid, block](
                2 * len(ids), dev.to_device(ids), indexing._words(x), indexing._words(out), 9, len(ids), words)
            assert_bits(out.to_host(), ref_select(host, ids, idt), f"{row_bytes} B rows, launch {grid}x{block}")


@pytest.mark.parametrize("dt,idt", [(pk.f32, i64), (pk.bf16, u32), (pk.f64, u8), (f8e4m3, i16)], ids=str)
def test_index_select_tiles(wave_device, dt, idt):
    """Rows of a multiple of 16 bytes at 16-byte aligned addresses move as 16-byte tiles
    (``is_tiles_*``): rows narrower than a wave of threads, of several threads' tiles and of more tiles than
    the launch has threads along a row, one and several ids lists (the division by ``ids_dim``), the
    sentinel's row of zeros, 16- and 8-byte aligned addresses (the u64 loop) and an odd-element offset
    (``is_rows_*``) through the wrapper; by name, launches whose rows do not divide among the blocks
    (a grid-stride step in rows) and threads along a row past the row's tiles."""
    dev = wave_device
    for row_bytes, left in ((indexing.ROW_BYTES, 1), (indexing.ROW_BYTES + 16 * 37, 2),
                            (16 * (32 * indexing.SELECT_THREAD_TILES + 3), 3)):
        right = row_bytes // dt.nbytes
        host = values(dt, (left, 9, right))
        ids = np.array([8, 0, sentinel(idt), 8, 3, 5, 1, 2, 2, 7, 4], idt.np)
        for label, x in (("contiguous", dev.to_device(host)), ("offset", offset_copy(dev, host, 16 // dt.nbytes)),
                         ("8-byte offset", offset_copy(dev, host, 8 // dt.nbytes) if dt.nbytes <= 8 else None),
                         ("odd offset", offset_copy(dev, host, 1) if dt.nbytes < 8 else None)):
            if x is not None:
                got = indexing.index_select(x, dev.to_device(ids), 1)
                assert_bits(got.to_host(), ref_select(host, ids, idt), f"{row_bytes} B rows, {label}")
        x = dev.to_device(host)
        for grid, block in ((1, (32, 2, 1)), (3, (8, 4, 1)), (2, (64, 1, 1))):
            out = dev.empty((left, len(ids), right), dt)
            dev.get_or_load_func(kernel_name("is_tiles", idt), INDEXING)[(grid, 1, 1), block](
                left * len(ids), dev.to_device(ids), indexing._words(x), indexing._words(out), 9, len(ids),
                row_bytes // 8)
            assert_bits(out.to_host(), ref_select(host, ids, idt), f"{row_bytes} B rows, launch {grid}x{block}")


@pk.kernel
def _stamp_rows(n: pk.usize, vocab: pk.usize, m: pk.usize, stamp: u32, table: pk.Ptr[u32], ids: pk.Ptr[i64]):
    """A producer that lets its dependents start first thing (``pk.launch_dependents``), then writes
    ``table[i] = stamp + i`` and ``ids[j] = (7 j + stamp) % vocab``: a programmatic launch after it
    overlaps these stores."""
    pk.launch_dependents()
    for i in pk.grid_stride(n):
        table[i] = stamp + u32(i)
        if i < m:
            ids[i] = i64((i * 7 + pk.usize(stamp)) % vocab)


_PRODUCER = pk.Module("test_indexing_producer")
_PRODUCER.add(_stamp_rows.instance("stamp_rows"))


def test_index_select_tiles_waits_for_the_kernel_before(wave_device):
    """The wrappers launch ``is_tiles_*`` programmatically (``SELECT_PROGRAMMATIC``: on CUDA sm_90+ it
    may start before the kernel ahead of it ends), so it must read nothing before
    ``pk.grid_dependency_wait()``: after a producer that releases its dependents before it writes the
    table and the ids (a small grid, so the select's blocks have free multiprocessors to start on),
    every select sees the new rows, round after round. Elsewhere the launch is plain: an ordinary
    producer-consumer order."""
    dev = wave_device
    vocab, width, m = 2048, 256, 4096  # 1 KiB rows of u32
    table, ids = dev.empty((vocab, width), u32), dev.empty((m,), i64)
    produce = dev.get_or_load_func("stamp_rows", _PRODUCER)
    col = np.arange(width, dtype=np.uint64)
    for stamp in range(1, 9):
        produce[2, 256](vocab * width, vocab, m, stamp * 100003, table, ids)
        got = indexing.index_select(table, ids, 0, check_ids=False).to_host()
        rows = (np.arange(m, dtype=np.uint64) * 7 + stamp * 100003) % vocab
        want = ((stamp * 100003 + rows[:, None] * width + col[None]) % 2 ** 32).astype(np.uint32)
        assert np.array_equal(got, want), f"round {stamp}: {int((got != want).sum())} of {got.size} stale"


def test_deterministic_adds_are_candles_sums(wave_device):
    """Float scatter_add and index_add without atomics are candle's column walks bit for bit: the sorted
    adds (``sa_sorted_*``, ``ia_sorted_*``: positions argsorted on the device, many duplicates, the
    sentinel) along every dim, and candle's column kernel where a warp's columns are adjacent."""
    dev = wave_device
    for shape, dim in (((4, 300), 1), ((300, 3), 0), ((2, 50, 5), 1), ((3, 4, indexing.SORTED_MAX_RIGHT), 1)):
        n = shape[dim] * 3
        src_shape = shape[:dim] + (n,) + shape[dim + 1:]
        hsrc, acc = values(pk.f32, src_shape), values(pk.f32, shape)
        ids = RNG.integers(0, shape[dim], src_shape).astype(np.int64)
        ids.reshape(-1)[::11] = sentinel(i64)
        x = dev.to_device(acc)
        indexing.scatter_add(x, dim, dev.to_device(ids), dev.to_device(hsrc))
        d3 = lambda a: a.reshape(math.prod(a.shape[:dim]), a.shape[dim], -1)  # noqa: E731
        want = ref_scatter(d3(acc), d3(ids), d3(hsrc), i64, pk.f32, True)
        assert_bits(x.to_host(), want.reshape(shape), f"scatter_add {shape} dim {dim}")
        rows = RNG.integers(0, shape[dim], n).astype(np.uint32)
        rows[::13] = sentinel(u32)
        x = dev.to_device(acc)
        indexing.index_add(x, dim, dev.to_device(rows), dev.to_device(hsrc))
        want = ref_index_add(d3(acc), rows, d3(hsrc), u32, pk.f32)
        assert_bits(x.to_host(), want.reshape(shape), f"index_add {shape} dim {dim}")


@pytest.mark.parametrize("dt,idt", [(pk.f32, i64), (pk.bf16, u8), (pk.f64, u32), (pk.f16, i64)], ids=str)
def test_scatter_add_rows_are_candles_sums(wave_device, dt, idt):
    """``sa_rows_*`` (a wave a row, the destination row in shared memory, each chunk of a wave added in
    lane order by ballot ranks, or at once where the hash buckets show every destination distinct) is
    candle's column walk bit for bit: rows of fewer sources than a wave, of a partial last chunk and of
    several chunks, many duplicates within a chunk (few destinations), rows longer than the buckets
    (distinct destinations sharing one), the sentinel and indices out of range (skipped), grids smaller
    than the rows; through the wrapper with ``SA_ROWS_MIN`` rows along the last dim."""
    dev = wave_device
    ws = dev.target.wave_size
    for left, n, m in ((5, 7, 3), (3, 4 * ws + 5, 2), (4, 3 * ws, 40), (2, 2 * ws + 1, 257)):
        hsrc, acc = values(dt, (left, n)), values(dt, (left, m))
        ids = index_data(idt, left * n, m).reshape(left, n)
        want = ref_scatter(acc[:, :, None], ids[:, :, None], hsrc[:, :, None], idt, dt, True)[:, :, 0]
        for grid in (1, 2, left):
            x = dev.to_device(acc)
            dev.get_or_load_func(kernel_name("sa_rows", idt, dt), INDEXING)[(grid, 1, 1), (ws, 1, 1), None,
                                                                             m * dt.nbytes](
                dev.to_device(ids), dev.to_device(hsrc), x, left, n, m)
            assert_bits(x.to_host(), want, f"sa_rows {left}x{n} into {m}, grid {grid}")
    if idt.int_range[1] > 2 * indexing.SA_TAGS:
        # destinations past the hash buckets: distinct ones sharing a bucket (k, k + SA_TAGS) beside real
        # duplicates (the ballots' path), a row of distinct ids (the shortcut for every chunk), and
        # duplicates among destinations past the first SA_TAGS only
        tags, left, n = indexing.SA_TAGS, 3, 4 * ws + 3
        m = 2 * tags + 5
        hsrc, acc = values(dt, (left, n)), values(dt, (left, m))
        ids = RNG.integers(0, 6, (left, n)) + tags * RNG.integers(0, 3, (left, n))
        ids[1] = RNG.permutation(m)[:n]
        ids[2] = tags + RNG.integers(0, 6, n)  # duplicates above the buckets alone
        ids[2, ::7] = sentinel(idt)
        ids = ids.astype(idt.np)
        want = ref_scatter(acc[:, :, None], ids[:, :, None], hsrc[:, :, None], idt, dt, True)[:, :, 0]
        x = dev.to_device(acc)
        dev.get_or_load_func(kernel_name("sa_rows", idt, dt), INDEXING)[(2, 1, 1), (ws, 1, 1), None, m * dt.nbytes](
            dev.to_device(ids), dev.to_device(hsrc), x, left, n, m)
        assert_bits(x.to_host(), want, f"sa_rows {left}x{n} into {m}, buckets shared by distinct destinations")
    left, n, m = indexing.SA_ROWS_MIN, 9, 5
    hsrc, acc = values(dt, (left, n)), values(dt, (left, m))
    ids = RNG.integers(0, m, (left, n)).astype(idt.np)
    ids[:, ::4] = sentinel(idt)
    x = dev.to_device(acc)
    indexing.scatter_add(x, 1, dev.to_device(ids), dev.to_device(hsrc))
    assert_bits(x.to_host(), ref_scatter(acc[:, :, None], ids[:, :, None], hsrc[:, :, None], idt, dt, True)[:, :, 0])


def ref_last_writer(acc, ids, src, idt):
    """candle's scatter along the last dim of 2-D rows, for each row: a destination takes its last
    valid source (NumPy's fancy assignment keeps the last of repeated indices, which is not promised,
    so the winners come from a max of j instead)."""
    out = acc.copy()
    for r in range(ids.shape[0]):
        ok = valid(ids[r], idt, acc.shape[1])
        win = np.full(acc.shape[1], -1)
        np.maximum.at(win, ids[r][ok].astype(np.int64), np.nonzero(ok)[0])
        out[r, win >= 0] = src[r, win[win >= 0]]
    return out


S_ROWS_CASES = [(dt, idt) for dt in indexing.VALUES + (f8e4m3,) for idt in indexing.INDICES]


@pytest.mark.parametrize("dt,idt", S_ROWS_CASES, ids=str)
def test_scatter_rows_last_writer(wave_device, dt, idt):
    """``s_rows_*`` / ``s_tiles_*`` (a block a unit: a range of destinations of a row, or of a tile of
    columns; shared-memory atomic maxima of each destination's sources) keep candle's last writer:
    many duplicates (few destinations), fewer sources than destinations (holes keep x), the sentinel
    and indices out of range (skipped), odd sizes, grids and blocks smaller than the units (the table
    cleared between them), ranges of odd spans (the last short), along the last dim (``s_rows_*``, and
    ``s_tiles_*`` in tiles of one column) and along a middle one in tiles of 1, 2 and 8 columns (the
    last tile narrow), through the kernels and the wrapper."""
    dev = wave_device
    ws = dev.target.wave_size
    hi = min(idt.int_range[1], 300)
    tag = "f8e4m3" if dt is f8e4m3 else dt  # candle's s_*_f8e4m3 spelling
    for left, n, m, right in ((5, 7, 3, 1), (3, 2 * ws + 5, min(hi, 200), 1), (4, 300, 37, 1), (2, 33, min(hi, 255), 1),
                              (3, 9, 6, 5)):
        hsrc, acc = values(dt, (left, n, right)), values(dt, (left, m, right))
        ids = index_data(idt, left * n * right, m).reshape(left, n, right)
        ids[-1] = RNG.integers(0, 2, (n, right)).astype(idt.np)  # one row of two destinations only
        want = ref_scatter(acc, ids, hsrc, idt, dt, False)
        if right == 1:
            assert (want[:, :, 0] == ref_last_writer(acc[:, :, 0], ids[:, :, 0], hsrc[:, :, 0], idt)).all()
            launches = [("s_rows", g, b, s, 0) for g, b, s in ((1, ws, m), (2, 3 * ws, m), (left, 256, m),
                                                              (3, ws, -(-m // 3)), (1, 2 * ws, 2))]
            launches += [("s_tiles", 2, 3 * ws, -(-m // 2), 0)]
        else:
            launches = [("s_tiles", g, b, s, c) for g, b, s, c in ((2, ws, m, 0), (3, 2 * ws, 4, 1), (1, ws, m, 3),
                                                                   (4, 3 * ws, 1, 3))]
        for kind, grid, block, span, cols_log2 in launches:
            x = dev.to_device(acc)
            dev.get_or_load_func(kernel_name(kind, idt, tag), INDEXING)[
                (grid, 1, 1), (block, 1, 1), None, (span << cols_log2) * 4](
                dev.to_device(ids), dev.to_device(hsrc), x, left, n, m, right, span, cols_log2)
            assert_bits(x.to_host(), want, f"{kind} {left}x{n}x{right} into {m}, grid {grid}, block {block}, "
                                            f"span {span}, columns {1 << cols_log2}")
        x = dev.to_device(acc)
        assert indexing.scatter(x, 1, dev.to_device(ids), dev.to_device(hsrc), check_ids=False) is x
        assert_bits(x.to_host(), want, f"scatter {left}x{n}x{right} into {m}")


@pytest.mark.parametrize("dt", (pk.f64, pk.bf16), ids=str)
@pytest.mark.parametrize("device_bytes", (4 * 90, 4 * 1000), ids=("device-cap", "max-bytes-cap"))
def test_scatter_paths(wave_device, monkeypatch, dt, device_bytes):
    """Each of scatter's paths keeps candle's last writer: few or narrow columns take ``s_rows_*``
    (along the last dim) or ``s_tiles_*`` where a row's or a tile's destinations split into at most
    ``S_ROWS_RANGES`` ranges (a tile whose ids fit ``S_TILES_RANGE_IDS``: ``S_TILES_RANGES``) of
    ``S_ROWS_BYTES`` of winners, or past ``S_ROWS_GROW`` such ranges of what the device lets a block
    have (``max_shared_per_block``, here smaller or larger than ``S_ROWS_MAX_BYTES``), in tiles of up
    to ``S_TILE_COLS_GROWN`` columns past ``S_TILE_NARROW_RANGES`` ranges; the global winner table
    (``s_winners_*`` / ``s_from_winners_*``) past them; many wide columns keep candle's column kernel.
    Odd sizes around each limit (the last range count before the table grows and the first after, the
    last range count before narrower tiles and the first after, ranges up to the last that fits and
    one past, a tile's ids one past their bytes), duplicates, the sentinel, one past the dim."""
    dev = wave_device
    calls, tables = [], []
    real = dev.get_or_load_func
    monkeypatch.setattr(dev, "get_or_load_func", lambda name, mod: calls.append(name) or real(name, mod))
    monkeypatch.setattr(type(dev), "max_shared_per_block", property(lambda self: device_bytes))
    sized = indexing._scatter_table_bytes
    monkeypatch.setattr(indexing, "_scatter_table_bytes", lambda *a: tables.append(sized(*a)) or tables[-1])
    monkeypatch.setattr(indexing, "S_ROWS_BYTES", 4 * 40)
    monkeypatch.setattr(indexing, "S_ROWS_GROW", 2)
    monkeypatch.setattr(indexing, "S_ROWS_MAX_BYTES", 4 * 100)
    monkeypatch.setattr(indexing, "S_ROWS_RANGES", 3)
    monkeypatch.setattr(indexing, "S_TILE_COLS", 8)
    monkeypatch.setattr(indexing, "S_TILE_COLS_GROWN", 4)
    monkeypatch.setattr(indexing, "S_TILE_NARROW_RANGES", 2)
    monkeypatch.setattr(indexing, "S_COLUMNS_MIN", 6 * 32)
    monkeypatch.setattr(indexing, "S_TILES_RANGES", 6)
    monkeypatch.setattr(indexing, "S_TILES_RANGE_IDS", 4 * 4 * 9)
    monkeypatch.setattr(indexing, "S_SORT_RANGES", 4)
    big = min(device_bytes, 4 * 100)  # the grown table: 90 winners (the device's cap) or 100 (S_ROWS_MAX_BYTES)
    last = 3 * big // 4  # the longest row in S_ROWS_RANGES grown ranges
    tag = dt.tag
    rows, tiles, table = f"s_rows_u32_{tag}", f"s_tiles_u32_{tag}", "s_winners_u32"
    # past S_ROWS_RANGES a row takes the counting sort, whose chunk (8 sources a thread, a wave at
    # least) does not fit the device's 90 u32
    sorts = f"s_runs_{tag}" if device_bytes > 4 * 90 else table
    # (shape, sources along dim, dim, kernel, bytes of winners a unit may hold; None: not asked)
    for shape, n, dim, kernel, nbytes in (
            ((3, 40), 50, 1, rows, 160), ((3, 80), 50, 1, rows, 160), ((3, 81), 90, 1, rows, big),
            ((2, last), last + 10, 1, rows, big), ((2, last + 1), 70, 1, sorts, big),
            ((2, 4 * big // 4), 70, 1, sorts, big), ((2, 4 * big // 4 + 1), 70, 1, table, big),
            ((5, 7), 9, 0, tiles, 160), ((10, 9), 5, 0, tiles, 160), ((11, 9), 5, 0, tiles, big),
            ((2 * (big // 32), 9), 4, 0, tiles, big), ((2 * (big // 32) + 1, 9), 4, 0, tiles, big),
            ((6 * (big // 16), 9), 9, 0, tiles, big), ((6 * (big // 16) + 1, 9), 9, 0, table, big),
            ((6 * (big // 16), 9), 10, 0, table, big), ((3 * (big // 16), 9), 10, 0, tiles, big),
            ((3 * (big // 16) + 1, 9), 10, 0, table, big), ((40, 3), 18, 0, tiles, big),
            ((2, 3, 31), 4, 1, tiles, 160), ((6, 5, 32), 9, 1, f"s_u32_{tag}", None),
            ((1, 4, 3, 33), 6, 1, tiles, 160)):
        src_shape = shape[:dim] + (n,) + shape[dim + 1:]
        hsrc, acc = values(dt, src_shape), values(dt, shape)
        ids = index_data(u32, math.prod(src_shape), shape[dim]).reshape(src_shape)
        x = dev.to_device(acc)
        calls.clear()
        tables.clear()
        indexing.scatter(x, dim, dev.to_device(ids), dev.to_device(hsrc), check_ids=False)
        assert kernel in calls, (shape, calls)
        assert tables == [] if nbytes is None else tables and set(tables) == {nbytes}, (shape, tables)
        want = ref_scatter(as3(acc, dim), as3(ids, dim), as3(hsrc, dim), u32, dt, False)
        assert_bits(x.to_host(), want.reshape(shape), f"scatter {shape} dim {dim}")


@pytest.mark.parametrize("dt,idt", [(pk.f32, i64), (pk.bf16, u32), (f8e4m3, u8), (pk.i64, i64)], ids=str)
def test_scatter_counting_sort(wave_device, monkeypatch, dt, idt):
    """Rows past ``S_ROWS_RANGES`` ranges (``s_sort_*`` then ``s_runs_*``) keep candle's last writer:
    rows of one chunk and of several (the last partial), ranges from two to ``S_SORT_RANGES`` (the
    last short) and one past it (the table), many duplicates (a row of two destinations), fewer
    sources than destinations, the sentinel and indices out of range (no entry); by name, blocks of
    one and three waves over fewer units than the grid and more."""
    dev = wave_device
    ws = dev.target.wave_size
    calls = []
    real = dev.get_or_load_func
    monkeypatch.setattr(dev, "get_or_load_func", lambda name, mod: calls.append(name) or real(name, mod))
    monkeypatch.setattr(indexing, "S_ROWS_BYTES", 4 * 16)
    monkeypatch.setattr(indexing, "S_ROWS_MAX_BYTES", 4 * 16)
    monkeypatch.setattr(indexing, "S_ROWS_RANGES", 1)
    monkeypatch.setattr(indexing, "S_SORT_RANGES", 12)
    monkeypatch.setattr(indexing, "S_SORT_BLOCK", ws)
    chunk = ws * indexing.S_SORT_PER
    hi = idt.int_range[1]
    for left, n, m, kernel in ((3, chunk, 17, "s_runs"), (2, 2 * chunk + 7, min(hi, 12 * 16), "s_runs"),
                               (2, 3 * chunk - 1, min(hi, 100), "s_runs"), (2, 70, 12 * 16 + 1, "s_winners"),
                               (1, chunk + 3, 33, "s_runs")):
        if m > hi:
            continue
        hsrc, acc = values(dt, (left, n)), values(dt, (left, m))
        ids = index_data(idt, left * n, m).reshape(left, n)
        ids[-1] = RNG.integers(0, 2, n).astype(idt.np)  # one row of two destinations only
        want = ref_scatter(acc[:, :, None], ids[:, :, None], hsrc[:, :, None], idt, dt, False)[:, :, 0]
        x = dev.to_device(acc)
        calls.clear()
        indexing.scatter(x, 1, dev.to_device(ids), dev.to_device(hsrc), check_ids=False)
        assert any(c.startswith(kernel) for c in calls), (left, n, m, calls)
        assert_bits(x.to_host(), want, f"scatter {left}x{n} into {m} ({kernel})")
        if kernel != "s_runs":
            continue
        span, bits = 16, (chunk - 1).bit_length()
        ranges, chunks = -(-m // span), -(-n // chunk)
        pairs, offs = dev.empty(left * n, u32), dev.empty(left * chunks * (ranges + 1), u32)
        dev.get_or_load_func(kernel_name("s_sort", idt), INDEXING)[left * chunks, ws, None, (ranges + chunk) * 4](
            dev.to_device(ids), pairs, offs, left, n, m, span, ranges)
        o = offs.to_host().reshape(left, chunks, ranges + 1)
        assert (np.diff(o, axis=2) >= 0).all() and (o[:, :, 0] == 0).all()
        for grid, block in ((1, ws), (3, 3 * ws), (left * ranges + 2, ws)):
            x = dev.to_device(acc)
            dev.get_or_load_func(kernel_name("s_runs", dt), INDEXING)[grid, block, None, span * 4](
                pairs, offs, dev.to_device(hsrc), x, left, n, m, span, ranges, bits)
            assert_bits(x.to_host(), want, f"s_runs {left}x{n} into {m}, grid {grid}, block {block}")


@pytest.mark.parametrize("flat,slices", ((True, True), (False, True), (True, False)),
                         ids=("flat-slices", "ids-slices", "flat-whole"))
def test_scatter_table_windows(wave_device, monkeypatch, flat, slices):
    """The global winner table in windows of ``S_TABLE_WINDOW`` destinations where a ``pre``'s
    destinations are more (the later windows from the flat destinations the first stored, or from
    the ids again; each window's slice zeroed and copied around its pass, or the whole table once):
    x of one window, one past it, several with the last short; a ``pre`` of at most a window takes
    one launch; dim 0, a middle dim and the last; duplicates, the sentinel and indices out of
    range."""
    dev = wave_device
    calls = []
    real = dev.get_or_load_func
    monkeypatch.setattr(dev, "get_or_load_func", lambda name, mod: calls.append(name) or real(name, mod))
    for knob, v in (("S_ROWS_BYTES", 0), ("S_TABLE_WINDOW", 60), ("S_TABLE_FLAT", flat), ("S_TABLE_SLICES", slices)):
        monkeypatch.setattr(indexing, knob, v)
    for shape, n, dim, windows in (((20, 3), 25, 0, 1), ((61,), 40, 0, 2), ((30, 7), 33, 0, 4),
                                   ((4, 15, 4), 9, 1, 1), ((3, 16, 4), 9, 1, 4), ((2, 70), 80, 1, 3)):
        src_shape = shape[:dim] + (n,) + shape[dim + 1:]
        hsrc, acc = values(pk.f32, src_shape), values(pk.f32, shape)
        ids = index_data(i64, math.prod(src_shape), shape[dim]).reshape(src_shape)
        x = dev.to_device(acc)
        calls.clear()
        indexing.scatter(x, dim, dev.to_device(ids), dev.to_device(hsrc), check_ids=False)
        launched = calls.count("s_winners_i64") + calls.count("s_winners_flat")
        assert launched == windows and (calls.count("s_winners_flat") == (windows - 1 if flat else 0)), (shape, calls)
        assert calls.count("s_from_winners_f32") == (windows if slices and windows > 1 else 1), (shape, calls)
        want = ref_scatter(as3(acc, dim), as3(ids, dim), as3(hsrc, dim), i64, pk.f32, False)
        assert_bits(x.to_host(), want.reshape(shape), f"scatter {shape} dim {dim}")


def test_atomic_float_adds_within_bound(wave_device):
    """``deterministic=False``: one atomic add per element in whatever order the threads land, so the
    sum is within the recursive-summation bound gamma_(k-1) * sum|x| for k adds into a cell (u = 2**-24)."""
    dev = wave_device
    src = RNG.uniform(-1, 1, (600, 16)).astype(np.float32)
    ids = RNG.integers(0, 5, 600).astype(np.int64)
    x = indexing.index_add(dev.to_device(np.zeros((5, 16), np.float32)), 0, dev.to_device(ids), dev.to_device(src),
                           deterministic=False).to_host()
    sids = RNG.integers(0, 5, (600, 16)).astype(np.int64)
    y = indexing.scatter_add(dev.to_device(np.zeros((5, 16), np.float32)), 0, dev.to_device(sids), dev.to_device(src),
                             deterministic=False).to_host()
    for got, member in ((x, lambda r, c: ids == r), (y, lambda r, c: sids[:, c] == r)):
        for r in range(5):
            for c in range(16):
                vals = src[member(r, c), c].astype(np.float64)
                m = max(len(vals) - 1, 0)
                bound = m * 2.0 ** -24 / (1 - m * 2.0 ** -24) * np.abs(vals).sum()
                assert abs(got[r, c] - vals.sum()) <= bound


@pytest.mark.parametrize("dt,idt", WRAPPER_CASES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather(wave_device, dt, idt, dim):
    dev, d = wave_device, dim % 3
    shape_ids = SHAPE[:d] + (6,) + SHAPE[d + 1:]
    ids = RNG.integers(0, SHAPE[d], shape_ids).astype(idt.np)
    ids.reshape(-1)[::5] = sentinel(idt)
    for label, x, hx in strided_views(dev, values(dt, SHAPE)):
        for ilabel, dids, hids in strided_views(dev, ids):
            got = indexing.gather(x, dim, dids)
            assert got.shape == shape_ids
            assert_bits(got.to_host(), ref_gather(as3(hx, d), as3(hids, d), idt).reshape(shape_ids), f"{label} {ilabel}")
    assert indexing.gather(dev.to_device(values(dt, SHAPE)), dim, dev.to_device(ids[(slice(None),) * d + (slice(0, 0),)])).size == 0


@pytest.mark.parametrize("dt,idt", WRAPPER_CASES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("op", ["scatter", "scatter_add", "index_add"])
def test_in_place_updates(wave_device, dt, idt, dim, op):
    dev, d = wave_device, dim % 3
    idt = i64 if op == "scatter" and idt is i32 else idt  # candle has no s_i32_*: f8 scatters by u8/u32/i64
    n = SHAPE[d] + 3  # more source slices than destination rows: duplicates
    src_shape = SHAPE[:d] + (n,) + SHAPE[d + 1:]
    hsrc = values(dt, src_shape)
    if op == "index_add":
        ids = np.resize(np.array([SHAPE[d] - 1, 0, sentinel(idt), 0], np.int64), n).astype(idt.np)
    else:
        ids = RNG.integers(0, SHAPE[d], src_shape).astype(idt.np)
        ids.reshape(-1)[::7] = sentinel(idt)
    acc = values(dt, SHAPE)
    for label, src, hs in strided_views(dev, hsrc):
        for ilabel, dids, hids in (strided_views(dev, ids) if ids.ndim > 1 else [("ids", dev.to_device(ids), ids)]):
            for xlabel, x in (("x", dev.to_device(acc)), ("offset x", offset_copy(dev, acc, 5))):
                got = getattr(indexing, op)(x, dim, dids, src)
                assert got is x
                if op == "index_add":
                    want = ref_index_add(as3(acc, d), hids, as3(hs, d), idt, dt)
                else:
                    want = ref_scatter(as3(acc, d), as3(hids, d), as3(hs, d), idt, dt, op == "scatter_add")
                assert_bits(x.to_host(), want.reshape(SHAPE), f"{op} {label} src, {ilabel}, {xlabel}")


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_valid_ids_agree_with_numpy(device, dim):
    """Without sentinels, the wrappers are NumPy's own take / take_along_axis / put_along_axis / add.at."""
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    ids = RNG.integers(0, SHAPE[dim], 9)
    got = indexing.index_select(device.to_device(x), device.to_device(ids.astype(np.uint32)), dim).to_host()
    assert (got == np.take(x, ids, axis=dim)).all()
    g = RNG.integers(0, SHAPE[dim], SHAPE[:dim] + (6,) + SHAPE[dim + 1:])
    got = indexing.gather(device.to_device(x), dim, device.to_device(g)).to_host()
    assert (got == np.take_along_axis(x, g, axis=dim)).all()
    perm = np.argsort(RNG.random(SHAPE), axis=dim)[(slice(None),) * dim + (slice(0, 2),)]  # no duplicates
    src = RNG.standard_normal(perm.shape).astype(np.float32)
    want = x.copy()
    np.put_along_axis(want, perm, src, axis=dim)
    got = indexing.scatter(device.to_device(x), dim, device.to_device(perm), device.to_device(src)).to_host()
    assert (got == want).all()
    xi, si = RNG.integers(-99, 99, SHAPE), RNG.integers(-99, 99, g.shape)
    want = xi.copy()
    np.add.at(want, tuple(g if d == dim else np.indices(g.shape)[d] for d in range(3)), si)
    got = indexing.scatter_add(device.to_device(xi), dim, device.to_device(g), device.to_device(si)).to_host()
    assert (got == want).all()
    si = RNG.integers(-99, 99, SHAPE[:dim] + (9,) + SHAPE[dim + 1:])
    want = xi.copy()
    np.add.at(np.moveaxis(want, dim, 0), ids, np.moveaxis(si, dim, 0))
    got = indexing.index_add(device.to_device(xi), dim, device.to_device(ids), device.to_device(si)).to_host()
    assert (got == want).all()


def test_u8_sentinel_inside_a_long_dim(device):
    """255 is "no element" for u8 ids even where the dim has a row 255 (candle's semantics)."""
    x = RNG.standard_normal((300, 2)).astype(np.float32)
    got = indexing.index_select(device.to_device(x), device.to_device(np.array([254, 255, 0], np.uint8)), 0)
    assert (got.to_host() == np.stack([x[254], np.zeros(2, np.float32), x[0]])).all()


@pytest.mark.parametrize("idt", indexing.F8_INDICES, ids=str)
def test_device_side_id_check(wave_device, idt):
    """The GPU's check (a kernel counting bad ids) run here: the same verdicts and messages as the host's."""
    dev = wave_device
    good = np.array([0, 4, sentinel(idt), 2, 4], idt.np)
    indexing._check_ids(dev.to_device(good), 5, "t", on_device=True)
    indexing._check_ids(dev.to_device(np.repeat(good, 2)).as_strided((5,), (2,)), 5, "t", on_device=True)
    for bad in [5, sentinel(idt) - 1] + ([-1, idt.int_range[0]] if idt.is_signed else []):
        ids = good.copy()
        ids[3] = bad
        with pytest.raises(ValueError, match=rf"t: index {bad} at \(3,\) is out of range for a dim of size 5"):
            indexing._check_ids(dev.to_device(ids), 5, "t", on_device=True)


def test_empty_updates_launch_nothing(device):
    x = device.to_device(np.ones((3, 4), np.float32))
    for op in (indexing.scatter, indexing.scatter_add):
        assert op(x, 1, device.to_device(np.zeros((3, 0), np.int64)), device.to_device(np.zeros((3, 0), np.float32))) is x
    indexing.index_add(x, 0, device.to_device(np.zeros(0, np.uint32)), device.to_device(np.zeros((0, 4), np.float32)))
    assert (x.to_host() == 1).all()


def test_scatter_add_integers_exact_under_many_duplicates(wave_device):
    dev = wave_device
    x = dev.to_device(np.zeros((4, 3), np.int64))
    ids = RNG.integers(0, 4, (1000, 3))
    src = RNG.integers(-10**12, 10**12, (1000, 3))
    indexing.scatter_add(x, 0, dev.to_device(ids.astype(np.int64)), dev.to_device(src))
    want = np.zeros((4, 3), np.int64)
    np.add.at(want, (ids, np.broadcast_to(np.arange(3), ids.shape)), src)
    assert (x.to_host() == want).all()


def test_float_sums_within_bound(wave_device):
    """index_add of 2000 f32 rows into 3: the order is fixed (ids in order), so the sum is the
    recursive sum: |got - exact| <= gamma_(k-1) * sum|x|, u = 2**-24 (Higham 4.2)."""
    dev = wave_device
    src = RNG.uniform(-1, 1, (2000, 8)).astype(np.float32)
    ids = RNG.integers(0, 3, 2000).astype(np.uint32)
    x = dev.to_device(np.zeros((3, 8), np.float32))
    got = indexing.index_add(x, 0, dev.to_device(ids), dev.to_device(src)).to_host()
    for r in range(3):
        rows = src[ids == r].astype(np.float64)
        m = len(rows) - 1
        bound = m * 2.0 ** -24 / (1 - m * 2.0 ** -24) * np.abs(rows).sum(0)
        assert (np.abs(got[r] - rows.sum(0)) <= bound).all()


def test_errors(device):
    x = device.to_device(np.zeros((3, 4), np.float32))
    ids = device.to_device(np.array([0, 2], np.uint32))
    with pytest.raises(TypeError, match="index dtype i32 is not supported for f32 values; index dtypes: i64, u32, u8"):
        indexing.index_select(x, device.to_device(np.array([0], np.int32)), 0)
    with pytest.raises(TypeError, match="no kernel for values of dtype i32"):
        indexing.gather(device.to_device(np.zeros((3, 4), np.int32)), 0, device.to_device(np.zeros((3, 4), np.uint32)))
    with pytest.raises(ValueError, match=r"index 3 at \(1,\) is out of range for a dim of size 3"):
        indexing.index_select(x, device.to_device(np.array([0, 3], np.uint32)), 0)
    with pytest.raises(ValueError, match="index -1 .* out of range for a dim of size 4"):
        indexing.gather(x, 1, device.to_device(np.full((3, 2), -1, np.int64)))
    with pytest.raises(ValueError, match="dim must be an int in \\[-2, 2\\), got 2"):
        indexing.index_select(x, ids, 2)
    with pytest.raises(ValueError, match="at least one dim"):
        indexing.index_select(device.to_device(np.float32(1)), ids, 0)
    with pytest.raises(ValueError, match="ids must be 1-D"):
        indexing.index_select(x, device.to_device(np.zeros((1, 2), np.uint32)), 0)
    with pytest.raises(ValueError, match="x and ids must have the same shape except along dim 0"):
        indexing.gather(x, 0, device.to_device(np.zeros((2, 3), np.uint32)))
    src = device.to_device(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="ids must have src's shape"):
        indexing.scatter(x, 0, ids, src)
    with pytest.raises(ValueError, match="x and src must have the same shape except along dim 0"):
        indexing.scatter_add(x, 0, device.to_device(np.zeros((2, 5), np.uint32)), device.to_device(np.ones((2, 5), np.float32)))
    with pytest.raises(TypeError, match="src has dtype f64, x has f32"):
        indexing.index_add(x, 0, ids, device.to_device(np.ones((2, 4), np.float64)))
    with pytest.raises(ValueError, match="ids must be 1-D with src.shape\\[0\\] = 2 entries"):
        indexing.index_add(x, 0, device.to_device(np.array([0, 1, 2], np.uint32)), src)
    with pytest.raises(ValueError, match="must be contiguous"):
        indexing.scatter(device.to_device(np.zeros((4, 3), np.float32)).transpose(), 0,
                         device.to_device(np.zeros((2, 4), np.uint32)), src)
    with pytest.raises(ValueError, match="out of range for a dim of size 3"):
        indexing.scatter_add(x, 0, device.to_device(np.array([[0, 0, 0, 0], [1, 3, 0, 0]], np.uint32)), src)
    assert (x.to_host() == 0).all()  # a refused call launches nothing
    # check_ids=False: the kernel skips the index instead (never writes out of bounds)
    indexing.scatter_add(x, 0, device.to_device(np.array([[0, 0, 0, 0], [1, 3, 0, 0]], np.uint32)), src,
                         check_ids=False)
    assert x.to_host().tolist() == [[1, 1, 2, 2], [1, 0, 0, 0], [0, 0, 0, 0]]  # the 3 skipped


@pytest.mark.parametrize("dt,idt", [(pk.f32, i64), (pk.bf16, u32), (pk.u8, u8)], ids=str)
def test_gather_last_dim_by_multiplication(wave_device, dt, idt):
    """gather along the last dim with 8 or more elements a thread takes the division by multiplication
    (``GATHER_MAGIC_MIN``): small grids over rows of several lengths, sentinels included."""
    dev = wave_device
    for rows, cols, width in ((7, 50, 40), (3, 9, 130), (1, 5, 300)):
        x = values(dt, (rows, cols))
        ids = RNG.integers(0, cols, (rows, width)).astype(idt.np)
        ids.reshape(-1)[::7] = sentinel(idt)
        out = dev.empty((rows, width), dt)
        for grid, block in ((1, 32), (2, 16)):
            assert rows * width >= grid * block * indexing.GATHER_MAGIC_MIN
            dev.get_or_load_func(kernel_name("gather", idt, dt), INDEXING)[grid, block](
                out.size, dev.to_device(ids), dev.to_device(x), out, rows, cols, width, 1)
            assert_bits(out.to_host(), ref_gather(x[:, :, None], ids[:, :, None], idt)[:, :, 0],
                        f"{rows}x{cols} ids {width} launch {grid}x{block}")
