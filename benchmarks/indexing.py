"""The indexing family against PyTorch on the same GPU, same buffers and ids, same process.

Run on the GPU machine:  python benchmarks/indexing.py [--size-log2 26] [--sweep] [--cases select,...]

Cases (i64 ids as torch takes them): index_select along dim 0 (an embedding lookup) into 4 * 2^26
bytes of output rows: f32 rows of 1 KiB, 256 B and 4 KiB from a 64 MiB table and 1 KiB from a 512
MiB one, bf16 1 KiB, f16 4 KiB and bf16 8 KiB rows; gather along dim 1 with random ids; scatter_
along dim 1 (random ids, and a permutation a row; rows of 4096, 16384 and 65536) and dim 0 (``scatter_case``), and
(``--cases scatter_long``, not by default) along the last dim and dim 0 of 2^18, 2^20 and 2^22 positions
(``--long-sizes``, ``--long-dims``, or ``--long-shapes last:17,0:14``: ``scatter_long_case``; ``--long-sweep``
times each winner-table size of ``--sweep-kib`` and tile width of ``--sweep-cols`` too; ``--sort-blocks``,
``--table-windows``, ``--table-extras``: the counting sort's and the global table's variants timed beside
the wrapper, ``--long-random``: random ids only); scatter_add_ along dim 1 and index_add_ along dim 0 (f32). Each is timed through the Python wrapper
(``stdlib_kernels.indexing``, its own launch, ``check_ids`` off: the host check of the ids is a
device-to-host copy, not the kernel; the deterministic scatter_add_/index_add_ include their ids'
device sort where they sort), index_select also by the previous wrapper kernel (``is_words_*``),
scatter_add_ also by the sorted adds (the deterministic path before ``sa_rows_*``; the two must
agree bit for bit) and with ``deterministic=False``, index_add_ by its atomic kernel (the atomic adds
torch's own are like), and each with candle's exact launch (cudarc's ``for_num_elems``:
``ceil(n/1024)`` blocks of 1024 over the elements for ``is``/``gather``, over the (pre, post)
columns for ``ia``/``sa``; candle's arguments, ``info`` always passed for ``is``). Times are
``benchmarks/timing.py``'s: CUDA-event medians of 10 back-to-back calls queued behind a GPU-side sleep
(``Timer``: the GPU's time alone, not the host's to issue the first call), ours and torch's
alternating ``ROUNDS`` times (``Timer.pair``; "spread": the lowest and highest ratio of those single
pairs; "old way": the ratio with ``back_to_back``'s events on an idle GPU (``timing.idle_start``),
for index_select; "host us": the host's time to issue
one call, ours/torch's); bandwidth counts the bytes a kernel must move (read + written once, ids
included) against the copy bandwidth measured in this run the same way. ``--sweep`` also times
index_select's ``is_tiles_*`` under other launches (``TILE_SWEEP``), ``--select-probes`` the f32
cases by ``is_tiles_*`` with plain stores and by ``select_probe`` and runs ``overlap_probe`` (also
``--overlap-probe`` alone: whether a
programmatic launch overlaps the producer before it; every index_select case is also timed by the
wrapper with ``is_tiles_*`` launched plainly, ``[wrapper, plain launch]``), ``--call-probes`` what a
wrapper call costs besides its kernel (``call_cost_probe``), ``--sa-variants`` scatter_add's
``sa_rows`` under ``SA_VARIANTS`` and scatter's ``s_rows`` under ``S_VARIANTS``; ``--quick-select`` keeps the f32 1 KiB, 256 B and 4 KiB
index_select cases (wrapper only for the last two). ``--rounds`` sets ``ROUNDS``; ``--no-variants`` times
scatter's wrapper alone (an A/B's old tree, whose ``benchmarks/`` this file may replace).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, usize
from stdlib_kernels import indexing as ix
from stdlib_kernels import kernel_name

sys.path.insert(0, os.path.dirname(__file__))
from timing import Timer, idle_start  # noqa: E402


#: alternations of pykern's and torch's timings a case
ROUNDS = 5


def back_to_back(torch, fn) -> float:
    """The earlier timing (10 calls between two events, the first event on an idle GPU, 15 samples):
    the "old way" column and the copy bandwidth "with it in"."""
    return idle_start(torch, fn, reps=15, calls=10)


class Bench:
    """Cases timed back to back (pykern's and torch's alike), as % of this run's copy bandwidth."""

    def __init__(self, torch, dev, n: int):
        self.torch, self.dev, self.n = torch, dev, n
        self.rows: list[tuple] = []
        self.rounds = ROUNDS
        self.variants = True  # False: scatter's cases time the wrapper alone (an A/B's old tree)
        self.timer = Timer(torch)
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        copy = lambda: y.copy_(x)  # noqa: E731
        self.copy_bw = 2 * x.nbytes / self.timer(copy, self.timer.host(copy))
        self.copy_bw_old = 2 * x.nbytes / back_to_back(torch, copy)
        print(f"{dev.name}: copy bandwidth {self.copy_bw / 1e12:.3f} TB/s (host issue out of the window; "
              f"{self.copy_bw_old / 1e12:.3f} with it in)  (n = {n:,})")
        print(f"{'case':52} {'pykern ms':>9} {'torch ms':>9} {'pk TB/s':>8} {'%copy':>6} {'pk/torch':>8} "
              f"{'spread':>7} {'old way':>7} {'host us':>11}")

    def case(self, label: str, nbytes: int, ours, theirs, slow: bool = False) -> None:
        """``slow``: ours takes milliseconds (candle's column walks): 5 single calls. Otherwise ours
        and torch's alternate, ``ROUNDS`` times each, and each side's median counts: the two are a
        few percent apart, about what the order of two single measurements moves."""
        if slow:
            t_ours, t_theirs = idle_start(self.torch, ours, reps=5), back_to_back(self.torch, theirs)
            spread, old, hosts = "", "", ""
        else:
            h_ours, h_theirs = self.timer.host(ours), self.timer.host(theirs)
            t_ours, t_theirs, ratios = self.timer.pair(ours, theirs, rounds=self.rounds)
            spread = f"{min(ratios):.3f}-{max(ratios):.3f}"  # the single pairs' ratios
            old = ""
            if label.startswith("index_select"):  # the short kernels, where the host's first call shows
                t_old = [(back_to_back(self.torch, ours), back_to_back(self.torch, theirs)) for _ in range(self.rounds)]
                old = f"{np.median([p[1] for p in t_old]) / np.median([p[0] for p in t_old]):.3f}"
            hosts = f"{h_ours * 1e6:.0f}/{h_theirs * 1e6:.0f}"
        bw = nbytes / t_ours
        ratio = t_theirs / t_ours  # > 1: pykern faster
        self.rows.append((label, t_ours, t_theirs, ratio))
        print(f"{label:52} {t_ours * 1e3:9.4f} {t_theirs * 1e3:9.4f} {bw / 1e12:8.3f} "
              f"{100 * bw / self.copy_bw:5.1f}% {ratio:8.3f} {spread:>11} {old:>7} {hosts:>11}", flush=True)


def wrap(dev, t):
    """A torch CUDA tensor as a pykern DeviceArray on the same memory (no copy)."""
    import pykern as pk
    from pykern.runtime.base import DeviceArray
    dtype = {"torch.float32": pk.f32, "torch.int64": pk.i64, "torch.uint32": pk.u32, "torch.float16": pk.f16,
             "torch.bfloat16": pk.bf16}[str(t.dtype)]
    return DeviceArray(dev, t.data_ptr(), tuple(t.shape), dtype, owner=t)


I = pk.TypeVar("I")  # noqa: E741


@pk.kernel
def select_probe(rows: usize, ids: ConstPtr[I], inp: ConstPtr[pk.u64], out: Ptr[pk.u64], src_dim: usize,
                 row_words: pk.u32, *, I, store_hint, load_hint):
    """``--select-probes``: index_select of dim 0 (one ids list) by 16-byte tiles, the shape of
    ``is_tiles_*`` without its grid-stride step, with plain accesses (``plain``), with the output's
    stores marked ``evict_first`` (``evict``: the output then leaves the L2 first, so more of the table
    stays for later reads; ``pk.store`` keeps these accesses 8 bytes wide), and (``load_hint``) the
    table's loads ``evict_last`` too: 0.85-0.89x torch on an H100, dropped from the runs (its pinned
    lines also sped up the torch calls timed after it)."""
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    r = pk.block_idx.x * pk.block_dim.y + pk.thread_idx.y
    if r < pk.u32(rows):
        k = ix.position(ids[usize(r)], src_dim)
        if k < src_dim:
            dst = out + usize(r) * usize(row_words)
            src = inp + k * usize(row_words)
            for j in pk.parallel_range(pk.u32(0), row_words, t, nt):
                if load_hint:
                    w = pk.load(src, j, eviction="evict_last")
                else:
                    w = src[j]
                if store_hint:
                    pk.store(dst, j, w, eviction="evict_first")
                else:
                    dst[j] = w


@pk.kernel
def stamp_rows(n: usize, vocab: usize, m: usize, stamp: pk.u32, table: Ptr[pk.u64], ids: Ptr[pk.i64]):
    """``--select-probes``' producer: lets its dependents start first thing, then writes every table word
    (``stamp + i``) and the ids, so that a programmatic launch after it overlaps these stores."""
    pk.launch_dependents()
    for i in pk.grid_stride(n):
        table[i] = pk.u64(stamp) + pk.u64(i)
        if i < m:
            ids[i] = pk.i64((i * 7 + usize(stamp)) % vocab)


_PROBES = []


def select_probes():
    """The probe kernels, and ``is_tiles_i64`` with plain stores (``tiles_plain``: the kernel before its
    ``evict_first`` stores), in one module built once."""
    if not _PROBES:
        probe = pk.Module("indexing_select_probe")
        for name, sh, lh in (("plain", False, False), ("evict", True, False)):
            probe.add(select_probe.instance(name, I=pk.i64, store_hint=sh, load_hint=lh))
        probe.add(ix.select_tiles.instance("tiles_plain", I=pk.i64, evict=False))
        probe.add(stamp_rows.instance("stamp_rows"))
        _PROBES.append(probe)
    return _PROBES[0]


def overlap_probe(b: Bench, rounds: int = 20) -> None:
    """``--select-probes``: is the programmatic launch's overlap real, and does ``is_tiles_*``'s
    ``grid_dependency_wait`` cover it? A producer on 8 blocks (``stamp_rows``: ``launch_dependents``
    first, then 16 MiB of table words and the ids) is followed at once by a select of 16384 rows of 1 KiB,
    launched programmatically: by ``select_probe`` (no wait: it may read the table before the producer
    has written it) and by the wrapper (``is_tiles_*``, which waits). Stale elements over ``rounds``
    rounds, each checked against the stamp."""
    torch, dev = b.torch, b.dev
    vocab, words, m = 16384, 128, 16384
    table = torch.empty(vocab, words, device="cuda", dtype=torch.int64)
    ids = torch.empty(m, device="cuda", dtype=torch.int64)
    out = torch.empty(m, words, device="cuda", dtype=torch.int64)
    tw, iw = wrap(dev, table), wrap(dev, ids)
    mod = select_probes()
    produce, probe = dev.get_or_load_func("stamp_rows", mod), dev.get_or_load_func("plain", mod)
    stale = {"select_probe (no wait)": 0, "wrapper (is_tiles_*)": 0}
    for r in range(rounds):
        for name in stale:
            stamp = 1000003 * (r + 1) + (7 if name.startswith("wrapper") else 0)
            produce.launch(8, 256, vocab * words, vocab, m, stamp, table.data_ptr(), ids.data_ptr())
            if name.startswith("wrapper"):
                got = torch.from_dlpack(ix.index_select(tw, iw, 0, check_ids=False))
            else:
                probe.launch((m // 4, 1, 1), (32, 4, 1), m, ids.data_ptr(), table.data_ptr(), out.data_ptr(), vocab, words,
                             programmatic=True)
                got = out
            rows = (torch.arange(m, device="cuda") * 7 + stamp) % vocab
            want = stamp + rows[:, None] * words + torch.arange(words, device="cuda")[None]
            stale[name] += int((got != want).sum())
    for name, n in stale.items():
        print(f"programmatic overlap: {name}: {n:,} of {rounds * m * words:,} elements stale over {rounds} rounds")


def call_cost_probe(b: Bench, row_bytes: int = 1024, table_log2: int = 29) -> None:
    """``--call-probes``: what a wrapper call costs the GPU besides its kernel, on 1 KiB rows of a 512 MiB
    table (f32, i64 ids): torch's index_select followed by a pykern ``empty()`` of the output (the
    stream-ordered pool's allocation and free a call, no kernel of ours), and ``is_tiles_*`` under the
    wrappers' launch into one fixed output, into a ``torch.empty`` a call and into a pykern ``empty()``
    a call (what the wrapper does), each launched plainly and programmatically."""
    torch, dev = b.torch, b.dev
    hidden, vocab = row_bytes // 4, (1 << table_log2) // row_bytes
    rows = 4 * b.n // row_bytes
    table = torch.randn(vocab, hidden, device="cuda")
    ids = torch.randint(0, vocab, (rows,), device="cuda", dtype=torch.int64)
    out = torch.empty(rows, hidden, device="cuda")
    want = torch.index_select(table, 0, ids)
    nbytes = 2 * out.nbytes + ids.nbytes
    theirs = lambda: torch.index_select(table, 0, ids)  # noqa: E731
    label = f"index_select float32 {row_bytes} B rows, {1 << table_log2 - 20} MiB table"
    words = row_bytes // 8
    grid, block = ix._tiles_launch(dev, rows, row_bytes // 16)
    f = dev.get_or_load_func(kernel_name("is_tiles", pk.i64), ix.INDEXING)
    tab, iw = ix._words(wrap(dev, table)), wrap(dev, ids)

    def torch_and_empty():
        torch.index_select(table, 0, ids)
        return dev.empty((rows, words), pk.u64)
    b.case(f"{label} [torch + pykern empty()]", nbytes, torch_and_empty, theirs)
    for prog in (False, True):
        how = "programmatic" if prog else "plain"

        def fixed(prog=prog):
            f.launch(grid, block, rows, iw, tab, out.data_ptr(), vocab, rows, words, programmatic=prog)

        def torch_empty(prog=prog):
            o = torch.empty_like(out)
            f.launch(grid, block, rows, iw, tab, o.data_ptr(), vocab, rows, words, programmatic=prog)
            return o

        def pool_empty(prog=prog):
            o = dev.empty((rows, words), pk.u64)
            f.launch(grid, block, rows, iw, tab, o, vocab, rows, words, programmatic=prog)
            return o
        out.zero_()
        fixed()
        assert torch.equal(out, want), "is_tiles into a fixed output != torch"
        assert torch.equal(torch_empty(), want), "is_tiles into torch.empty != torch"
        assert torch.equal(torch.from_dlpack(pool_empty()).view(torch.float32).view(want.shape), want), \
            "is_tiles into a pykern empty() != torch"
        b.case(f"{label} [is_tiles, {how}, one fixed output]", nbytes, fixed, theirs)
        b.case(f"{label} [is_tiles, {how}, torch.empty a call]", nbytes, torch_empty, theirs)
        b.case(f"{label} [is_tiles, {how}, pykern empty() a call]", nbytes, pool_empty, theirs)


def candle_grid(n: int) -> tuple[int, int]:
    return max(1, -(-n // 1024)), 1024


#: ``--sweep``: is_tiles launches besides the default, as (16-byte tiles a thread along a row, threads
#: a block, blocks an SM at most or None)
TILE_SWEEP = ((1, 64, None), (4, 256, None))
#: ``--sa-variants``: ``sa_rows`` under other (hash buckets, row elements a lane in flight): (0, 0) is
#: the kernel before the shortcut, (SA_TAGS, SA_ROW_LOADS) the wrappers'
SA_VARIANTS = ((0, 0), (2048, 16), (2048, 32))
#: ``--sa-variants``: ``s_rows`` under other threads a block (the wrappers': ``S_ROWS_BLOCK``)
S_VARIANTS = (256, 512)


def index_select_case(b: Bench, row_bytes: int = 1024, sweep: bool = False, table_log2: int = 26,
                      dtype: str = "float32", others: bool = True, probes: bool = False) -> None:
    """index_select along dim 0 (an embedding lookup) of a table of ``2**table_log2`` bytes into ``4 n``
    bytes of output rows: the wrapper (``is_tiles_*``), the previous wrapper kernel ``is_words_*`` under
    its own launch and candle's ``is_*`` under candle's (``others``), against torch.index_select."""
    import pykern as pk
    from stdlib_kernels import INDEXING, kernel_name
    from stdlib_kernels import indexing as ix
    torch, dev = b.torch, b.dev
    tdt = getattr(torch, dtype)
    esize = torch.tensor([], dtype=tdt).element_size()
    hidden = row_bytes // esize
    vocab = (1 << table_log2) // row_bytes  # a 64 MiB table by default: about the L2's size
    rows = 4 * b.n // row_bytes  # output rows: 4 n bytes
    table = torch.randn(vocab, hidden, device="cuda").to(tdt)
    ids = torch.randint(0, vocab, (rows,), device="cuda", dtype=torch.int64)
    out = torch.empty(rows, hidden, device="cuda", dtype=tdt)
    nbytes = 2 * out.nbytes + ids.nbytes
    tw, iw, ow = wrap(dev, table), wrap(dev, ids), wrap(dev, out)
    label = f"index_select {dtype} {row_bytes} B rows" + (f", {1 << table_log2 - 20} MiB table" if table_log2 != 26 else "")
    theirs = lambda: torch.index_select(table, 0, ids)  # noqa: E731
    b.case(f"{label} [wrapper]", nbytes, lambda: ix.index_select(tw, iw, 0, check_ids=False), theirs)
    want = torch.index_select(table, 0, ids)
    assert torch.equal(torch.from_dlpack(ix.index_select(tw, iw, 0, check_ids=False)), want), "wrapper != torch"
    if getattr(ix, "SELECT_PROGRAMMATIC", False):  # the wrapper with is_tiles_* launched plainly (absent: an old tree)
        ix.SELECT_PROGRAMMATIC = False
        try:
            b.case(f"{label} [wrapper, plain launch]", nbytes, lambda: ix.index_select(tw, iw, 0, check_ids=False),
                   theirs)
        finally:
            ix.SELECT_PROGRAMMATIC = True
    if probes and dtype == "float32":
        mod = select_probes()
        words = row_bytes // 8
        x = min(1024, max(1, words // 4))  # two 16-byte tiles a thread
        y = max(1, 256 // x)
        grid, block = ix._tiles_launch(dev, rows, row_bytes // 16)
        fp = dev.get_or_load_func("tiles_plain", mod)
        go = lambda: fp[grid, block](rows, ids.data_ptr(), table.data_ptr(), out.data_ptr(), vocab, rows,  # noqa: E731
                                     words)
        b.case(f"{label} [is_tiles, plain stores]", nbytes, go, theirs)
        out.zero_()
        go()
        assert torch.equal(out, want), "is_tiles with plain stores != torch"
        for name in ("plain", "evict"):
            f = dev.get_or_load_func(name, mod)
            go = lambda: f[(-(-rows // y), 1, 1), (x, y, 1)](rows, ids.data_ptr(), table.data_ptr(),  # noqa: E731
                                                            out.data_ptr(), vocab, words)
            b.case(f"{label} [probe {name}]", nbytes, go, theirs)
            out.zero_()
            go()
            assert torch.equal(out, want), f"probe {name} != torch"
    if sweep:
        keep = ix.SELECT_THREAD_TILES, ix.SELECT_BLOCK, ix.SELECT_TILE_BLOCKS_PER_SM
        for variant in TILE_SWEEP:
            ix.SELECT_THREAD_TILES, ix.SELECT_BLOCK, ix.SELECT_TILE_BLOCKS_PER_SM = variant
            b.case(f"{label} [tiles {variant[0]}/{variant[1]}/{variant[2]}]", nbytes,
                   lambda: ix.index_select(tw, iw, 0, check_ids=False), theirs)
        ix.SELECT_THREAD_TILES, ix.SELECT_BLOCK, ix.SELECT_TILE_BLOCKS_PER_SM = keep
    if not others:
        return
    fw = dev.get_or_load_func(kernel_name("is_words", pk.i64), INDEXING)  # the previous wrapper kernel
    words = row_bytes // 8
    chunks = rows * -(-words // ix.ROW_WORDS)
    grid = min(-(-chunks // 256), 8 * dev.multiprocessors)
    b.case(f"{label} [is_words, 8 words a thread]", nbytes,
           lambda: fw[grid, 256](rows, iw, ix._words(tw), ix._words(ow), vocab, rows, words), theirs)
    out.zero_()
    fw[grid, 256](rows, iw, ix._words(tw), ix._words(ow), vocab, rows, words)
    assert torch.equal(out, want), "is_words != torch"
    f = dev.get_or_load_func(kernel_name("is", pk.i64, ow.dtype.tag), INDEXING)
    info = dev.to_device(np.array([rows, 1], np.uint64))
    n = out.numel()
    b.case(f"{label} [candle]", nbytes,
           lambda: f[candle_grid(n)](n, 1, info, ids.data_ptr(), table.data_ptr(), out.data_ptr(), 1, vocab, rows,
                                     hidden),
           lambda: torch.index_select(table, 0, ids, out=out))


def gather_case(b: Bench) -> None:
    from stdlib_kernels import INDEXING
    from stdlib_kernels import indexing as ix
    torch, dev = b.torch, b.dev
    cols = 4096
    rows = b.n // cols
    x = torch.randn(rows, cols, device="cuda")
    ids = torch.randint(0, cols, (rows, cols), device="cuda", dtype=torch.int64)
    out = torch.empty_like(x)
    nbytes = 2 * out.nbytes + ids.nbytes  # each output element reads one x element and one id
    xw, iw = wrap(dev, x), wrap(dev, ids)
    b.case("gather dim 1 random ids [wrapper]", nbytes, lambda: ix.gather(xw, 1, iw, check_ids=False),
           lambda: torch.gather(x, 1, ids))
    f = dev.get_or_load_func("gather_i64_f32", INDEXING)
    n = out.numel()
    b.case("gather dim 1 random ids [candle]", nbytes,
           lambda: f[candle_grid(n)](n, ids.data_ptr(), x.data_ptr(), out.data_ptr(), rows, cols, cols, 1),
           lambda: torch.gather(x, 1, ids, out=out))
    assert torch.equal(torch.from_dlpack(ix.gather(xw, 1, iw, check_ids=False)), torch.gather(x, 1, ids))


def scatter_add_case(b: Bench, variants: bool = False) -> None:
    from stdlib_kernels import INDEXING
    from stdlib_kernels import indexing as ix
    torch, dev = b.torch, b.dev
    cols = 4096
    rows = b.n // cols
    src = torch.randn(rows, cols, device="cuda")
    ids = torch.randint(0, cols, (rows, cols), device="cuda", dtype=torch.int64)
    x = torch.zeros(rows, cols, device="cuda")
    nbytes = src.nbytes + ids.nbytes + 2 * x.nbytes  # src and ids read; each x element read and written
    xw, iw, sw = wrap(dev, x), wrap(dev, ids), wrap(dev, src)
    b.case("scatter_add_ dim 1 [wrapper]", nbytes, lambda: ix.scatter_add(xw, 1, iw, sw, check_ids=False),
           lambda: x.scatter_add_(1, ids, src))
    keep = ix.SA_ROWS_MIN
    ix.SA_ROWS_MIN = 1 << 62  # the deterministic path before sa_rows: positions argsorted, sa_sorted
    b.case("scatter_add_ dim 1 [wrapper, sorted adds]", nbytes, lambda: ix.scatter_add(xw, 1, iw, sw, check_ids=False),
           lambda: x.scatter_add_(1, ids, src))
    x.zero_()
    ix.scatter_add(xw, 1, iw, sw, check_ids=False)
    sorted_sums = x.clone()
    ix.SA_ROWS_MIN = keep
    x.zero_()
    ix.scatter_add(xw, 1, iw, sw, check_ids=False)
    assert torch.equal(x, sorted_sums), "sa_rows disagrees with the sorted adds (both candle's order)"
    if variants:
        import pykern as pk
        probe = pk.Module("indexing_sa_probe")
        for tags, loads in SA_VARIANTS:
            probe.add(ix.scatter_add_rows.instance(f"sa_rows_{tags}_{loads}", I=pk.i64, T=pk.f32, tags=tags,
                                                   row_loads=loads))
        for tags, loads in SA_VARIANTS:
            f = dev.get_or_load_func(f"sa_rows_{tags}_{loads}", probe)
            go = lambda: f[(rows, 1, 1), (32, 1, 1), None, cols * 4](ids.data_ptr(), src.data_ptr(), x.data_ptr(),  # noqa: E731
                                                                      rows, cols, cols)
            b.case(f"scatter_add_ dim 1 [sa_rows tags {tags}, row loads {loads}]", nbytes, go,
                   lambda: x.scatter_add_(1, ids, src))
            x.zero_()
            go()
            assert torch.equal(x, sorted_sums), f"sa_rows {tags}/{loads} disagrees with the sorted adds"
    b.case("scatter_add_ dim 1 [wrapper, atomics]", nbytes,
           lambda: ix.scatter_add(xw, 1, iw, sw, check_ids=False, deterministic=False),
           lambda: x.scatter_add_(1, ids, src))
    f = dev.get_or_load_func("sa_i64_f32", INDEXING)
    b.case("scatter_add_ dim 1 [candle]", nbytes,
           lambda: f[candle_grid(rows)](ids.data_ptr(), src.data_ptr(), x.data_ptr(), rows, cols, cols, 1),
           lambda: x.scatter_add_(1, ids, src), slow=True)
    x.zero_()
    ix.scatter_add(xw, 1, iw, sw, check_ids=False)
    want = torch.zeros_like(x).scatter_add_(1, ids, src)
    assert torch.allclose(x, want, rtol=1e-4, atol=1e-4), "scatter_add disagrees with torch"


def last_writer(torch, x, dim: int, ids, src):
    """torch's ``scatter_`` with candle's rule for duplicates (the last source along ``dim`` wins;
    torch leaves the winner unspecified): each destination's winning ``j`` by a ``scatter_reduce``
    amax of ``j``, then a gather of the winners where there is one."""
    shape = [1] * src.dim()
    shape[dim] = src.shape[dim]
    j = torch.arange(src.shape[dim], device=src.device).view(shape).expand_as(ids)
    win = torch.full(x.shape, -1, dtype=torch.int64, device=x.device).scatter_reduce_(dim, ids, j, "amax")
    return torch.where(win >= 0, torch.gather(src, dim, win.clamp(min=0)), x), int((win >= 0).sum())


def _scatter_variants(b: Bench, label: str, x, x0, ids, src, dim: int, want, nbytes: int, variants) -> None:
    """The wrapper, then the wrapper under each of ``variants`` ((suffix, {knob: value}, slow) with
    ``stdlib_kernels.indexing``'s constants set for the variant, or (suffix, f, slow) with ``f(x, dim,
    ids, src)`` called in place of the wrapper), each checked against ``want``."""
    from stdlib_kernels import indexing as ix
    torch, dev = b.torch, b.dev
    xw, iw, sw = wrap(dev, x), wrap(dev, ids), wrap(dev, src)
    theirs = lambda: x.scatter_(dim, ids, src)  # noqa: E731
    for suffix, knobs, slow in (("wrapper", {}, False),) + (tuple(variants) if b.variants else ()):
        ours = lambda: ix.scatter(xw, dim, iw, sw, check_ids=False)  # noqa: E731
        if callable(knobs):  # a call of its own on the wrapped buffers
            ours, knobs = functools.partial(knobs, xw, dim, iw, sw), {}
        keep = {k: getattr(ix, k) for k in knobs}
        for k, v in knobs.items():
            setattr(ix, k, v)
        try:
            x.copy_(x0)
            ours()
            assert torch.equal(x, want), f"{label} [{suffix}] != last writer"
            b.case(f"{label} [{suffix}]", nbytes, ours, theirs, slow=slow)
        finally:
            for k, v in keep.items():
                setattr(ix, k, v)


def tiles_last(x, dim: int, ids, src) -> None:
    """``s_tiles_*`` in tiles of one column along the last dim, where the wrapper takes ``s_rows_*``."""
    left, right = ix._sizes(src.shape, dim)
    assert ix._scatter_tiles(x, kernel_name("s", ids.dtype, x.dtype.tag), ids, src, left, src.shape[dim],
                             x.shape[dim], right, tiles_last=True), "s_tiles: the units do not fit"


#: the wrapper before s_rows' ranges and tiles: rows past one range of S_ROWS_BYTES take the global
#: winner table (along dim 0 that table is taken with S_ROWS_BYTES 0)
OLD_ROWS = {"S_ROWS_RANGES": 1}


def scatter_case(b: Bench, variants: bool = False) -> None:
    """``scatter_`` (candle's ``s``, last writer wins) with random i64 ids (duplicates): along dim 1 of
    rows of 4096 f32 from as many sources, and with a permutation a row (no duplicates: torch's result
    is then exact); along long rows (16384 and 65536: past one ``S_ROWS_BYTES`` range); along dim 0
    of a table of 1024 rows of 4096 from 4096 source rows. The wrapper, the wrapper under its previous
    choices (the global winner table; candle's column kernel along dim 0 before that), ``s_rows_*``
    and ``s_tiles_*`` under other ranges, tiles and blocks, candle's column kernel under candle's launch; with
    ``variants`` also ``s_rows_*`` under other block sizes along dim 1."""
    from stdlib_kernels import INDEXING
    torch, dev = b.torch, b.dev
    cols = 4096
    rows = b.n // cols
    src = torch.randn(rows, cols, device="cuda")
    x0 = torch.randn(rows, cols, device="cuda")
    x = x0.clone()
    for kind in ("random ids", "a permutation a row"):
        if kind == "random ids":
            ids = torch.randint(0, cols, (rows, cols), device="cuda", dtype=torch.int64)
        else:
            ids = torch.argsort(torch.rand(rows, cols, device="cuda"), dim=1)
        want, written = last_writer(torch, x0, 1, ids, src)
        nbytes = src.nbytes + ids.nbytes + 4 * written  # src and ids read, each written element of x once
        if kind != "random ids":
            assert torch.equal(want, x0.clone().scatter_(1, ids, src)), "last writer (no duplicates) != torch"
        more = [(f"s_rows block {block}", {"S_ROWS_BLOCK": block}, False) for block in (S_VARIANTS if variants else ())]
        more += [("s_tiles, one column", tiles_last, False)]
        if kind == "random ids":
            more += [("global winner table", {"S_ROWS_BYTES": 0}, False)]
        _scatter_variants(b, f"scatter_ dim 1 {kind}", x, x0, ids, src, 1, want, nbytes, more)
        if kind == "random ids":
            f = dev.get_or_load_func("s_i64_f32", INDEXING)
            b.case(f"scatter_ dim 1 {kind} [candle]", nbytes,
                   lambda: f[candle_grid(rows)](ids.data_ptr(), src.data_ptr(), x.data_ptr(), rows, cols, cols, 1),
                   lambda: x.scatter_(1, ids, src), slow=True)
            x.copy_(x0)
            f[candle_grid(rows)](ids.data_ptr(), src.data_ptr(), x.data_ptr(), rows, cols, cols, 1)
            assert torch.equal(x, want), "candle's s_i64_f32 != last writer"
    del src, x0, x, ids
    for long_cols in (16384, 65536):  # long rows: past one range of S_ROWS_BYTES of u32 winners
        long_rows = b.n // long_cols
        src = torch.randn(long_rows, long_cols, device="cuda")
        x0 = torch.randn(long_rows, long_cols, device="cuda")
        x = x0.clone()
        ids = torch.randint(0, long_cols, (long_rows, long_cols), device="cuda", dtype=torch.int64)
        want, written = last_writer(torch, x0, 1, ids, src)
        nbytes = src.nbytes + ids.nbytes + 4 * written
        more = [("old wrapper: global winner table", OLD_ROWS, False), ("s_tiles, one column", tiles_last, False),
                ("s_rows ranges of 96 KiB", {"S_ROWS_BYTES": 96 * 1024}, False)]
        _scatter_variants(b, f"scatter_ dim 1 rows of {long_cols} random ids", x, x0, ids, src, 1, want, nbytes, more)
        if long_cols == 16384:
            f = dev.get_or_load_func("s_i64_f32", INDEXING)
            b.case(f"scatter_ dim 1 rows of {long_cols} random ids [candle]", nbytes,
                   lambda: f[candle_grid(long_rows)](ids.data_ptr(), src.data_ptr(), x.data_ptr(), long_rows,
                                                     long_cols, long_cols, 1),
                   lambda: x.scatter_(1, ids, src), slow=True)
        del src, x0, x, ids, want
    # dim 0: n_src rows of sources into a table of rows (right = cols: candle's column kernel, coalesced)
    vocab, n_src = 1024, rows // 4
    table0 = torch.randn(vocab, cols, device="cuda")
    table = table0.clone()
    src = torch.randn(n_src, cols, device="cuda")
    ids = torch.randint(0, vocab, (n_src, cols), device="cuda", dtype=torch.int64)
    want, written = last_writer(torch, table0, 0, ids, src)
    nbytes = src.nbytes + ids.nbytes + 4 * written
    _scatter_variants(b, "scatter_ dim 0 random ids", table, table0, ids, src, 0, want, nbytes,
                      [(f"s_tiles tiles of {c} columns", {"S_TILE_COLS": c}, False) for c in (8, 32)]
                      + [("s_tiles tiles of 32 columns, 96 KiB", {"S_TILE_COLS": 32, "S_ROWS_BYTES": 96 * 1024}, False),
                         ("s_tiles 512 threads", {"S_ROWS_BLOCK": 512}, False),
                         ("old wrapper: global winner table", {"S_ROWS_BYTES": 0}, False),
                         ("columns", {"S_COLUMNS_MIN": 0}, True)])
    f = dev.get_or_load_func("s_i64_f32", INDEXING)
    b.case("scatter_ dim 0 random ids [candle]", nbytes,
           lambda: f[candle_grid(cols)](ids.data_ptr(), src.data_ptr(), table.data_ptr(), 1, n_src, vocab, cols),
           lambda: table.scatter_(0, ids, src), slow=True)


def scatter_ranges(dev, m: int, right: int) -> int:
    """The ranges ``s_rows_*`` / ``s_tiles_*`` split a dim of ``m`` destinations into (tiles of
    ``right`` columns up to ``S_TILE_COLS``; the winners' bytes as ``_scatter_tiles`` takes them)."""
    cols = 1 if right == 1 else min(ix.S_TILE_COLS, 1 << (right - 1).bit_length())
    table = getattr(ix, "_scatter_table_bytes", None)  # absent from the tree before it (an A/B's old side)
    table = table(dev, m, cols) if table else ix.S_ROWS_BYTES
    if hasattr(ix, "_grown_tile_cols"):
        cols = ix._grown_tile_cols(m, cols, table)
    per = table // (4 * cols)
    return -(-m // per) if per else 1 << 62


#: the tables (KiB of u32 winners a unit) the sweep of ``scatter_long_case`` times each case under
SWEEP_KIB = (48, 96, 160, 220)
#: ... and along dim 0, tiles of these columns under each of ``SWEEP_COLS_KIB`` (more destinations a
#: range, fewer ids a tile)
SWEEP_COLS = (8, 4)
SWEEP_COLS_KIB = (220,)
#: every range limit out of the way: a variant takes the ranges however many there are
NO_RANGE_LIMITS = {"S_ROWS_RANGES": 128, "S_TILES_RANGES": 128, "S_TILES_RANGE_IDS": 1 << 62}


def fixed_table(kib: int, **more) -> dict:
    """The knobs that make every unit's table ``kib`` KiB (capped by the device)."""
    return {"S_ROWS_BYTES": kib * 1024, "S_ROWS_MAX_BYTES": kib * 1024, **NO_RANGE_LIMITS, **more}


#: ``scatter_long_case``: the global table's windows (destinations) timed beside the wrapper's
TABLE_WINDOWS = (2 << 20, 4 << 20, 8 << 20, 16 << 20)
#: ... and the other table variants: ids read by each window, no windows, the table zeroed and copied whole
TABLE_EXTRAS = ("ids", "none", "whole")
#: ... and the counting sort's blocks
SORT_BLOCKS = (256, 512, 1024)


def scatter_long_case(b: Bench, sizes=(18, 20, 22), dims=("last", "0"), shapes=None, sweep=False,
                      long_ranges=False, kinds=("random ids", "a permutation")) -> None:
    """``scatter_`` along a dim of ``2**s`` positions for each ``s`` in ``sizes`` (as many sources),
    ``b.n`` f32 in all: along the last dim (``b.n >> s`` rows) and along dim 0 (``b.n >> s`` columns),
    random i64 ids and a permutation along the dim (``shapes``: (dim, s) pairs in place of the
    product). The wrapper, the global winner table where the wrapper takes the ranges, and ``s_rows_*``
    / ``s_tiles_*`` in as many ranges as the dim needs where the wrapper takes the table and that is at
    most 128 (each range reads all of its row's or tile's ids: the crossover against the table).
    ``sweep``: with random ids, also each table size of ``SWEEP_KIB`` (and along dim 0 tiles of
    ``SWEEP_COLS`` columns) wherever that takes at most 128 ranges, and the table. Where the wrapper
    takes the counting sort (``s_sort_*`` + ``s_runs_*``), also its other blocks (``SORT_BLOCKS``) and the
    table; where it takes ``s_rows_*``, the counting sort; where it takes the table, other windows
    (``TABLE_WINDOWS``), the ids read by every window (no flat destinations), no windows, and the
    table zeroed and copied whole (not a window's slice around its pass).
    ``long_ranges``: ``s_rows_*`` / ``s_tiles_*`` past their range limits too (up to 128)."""
    torch = b.torch
    for where, s in shapes or [(w, s) for s in sizes for w in dims]:
        dim = 1 if where == "last" else 0
        shape = (b.n >> s, 1 << s) if dim == 1 else (1 << s, b.n >> s)
        right = 1 if dim == 1 else shape[1]
        ranges = scatter_ranges(b.dev, 1 << s, right)
        src = torch.randn(shape, device="cuda")
        x0 = torch.randn(shape, device="cuda")
        x = x0.clone()
        for kind in kinds:
            if kind == "random ids":
                ids = torch.randint(0, 1 << s, shape, device="cuda", dtype=torch.int64)
            else:
                ids = torch.argsort(torch.rand(shape, device="cuda"), dim=dim)
            want, written = last_writer(torch, x0, dim, ids, src)
            nbytes = src.nbytes + ids.nbytes + 4 * written
            most = ix.S_ROWS_RANGES  # the wrapper's limit (_scatter_tiles)
            if dim == 0 and shape[0] * min(ix.S_TILE_COLS, right) * 8 <= ix.S_TILES_RANGE_IDS:
                most = ix.S_TILES_RANGES
            more = ([("global winner table", {"S_ROWS_BYTES": 0}, False)]
                    if kind == "random ids" and ranges <= most else [])  # else the wrapper's
            if most < ranges <= 128 and not sweep and long_ranges:
                more += [(f"{'s_rows' if dim else 's_tiles'}, {ranges} ranges", NO_RANGE_LIMITS, False)]
            sorts = dim == 1 and ix.S_ROWS_RANGES < ranges <= ix.S_SORT_RANGES  # the wrapper's counting sort
            if dim == 1 and ranges <= ix.S_ROWS_RANGES and kind == "random ids":
                more += [("counting sort", {"S_ROWS_RANGES": 0}, False)]
            if sorts and kind == "random ids":
                more += [(f"counting sort, blocks of {blk}", {"S_SORT_BLOCK": blk, "S_SORT_MIN_BLOCK": blk}, False)
                         for blk in SORT_BLOCKS]
                more += [("global winner table", {"S_SORT_RANGES": 0}, False)]
            if ranges > most and not sorts:  # the wrapper's global table: its windows
                more += [(f"table, windows of {w >> 20}M", {"S_TABLE_WINDOW": w}, False) for w in TABLE_WINDOWS
                         if w != ix.S_TABLE_WINDOW]
                extras = [("ids", f"table, windows of {ix.S_TABLE_WINDOW >> 20}M, ids each window",
                           {"S_TABLE_FLAT": False}), ("none", "table, no windows", {"S_TABLE_WINDOW": 1 << 40}),
                          ("whole", f"table, windows of {ix.S_TABLE_WINDOW >> 20}M, one zeroing and one copy",
                           {"S_TABLE_SLICES": False})]
                more += [(label, knobs, False) for key, label, knobs in extras if key in TABLE_EXTRAS]
            if sweep and kind == "random ids":
                keep = {k: getattr(ix, k) for k in ("S_ROWS_BYTES", "S_ROWS_MAX_BYTES", "S_TILE_COLS")}
                tries = [(kib, keep["S_TILE_COLS"]) for kib in SWEEP_KIB]
                tries += [(kib, c) for kib in SWEEP_COLS_KIB for c in SWEEP_COLS
                          if dim == 0 and c < min(right, ix.S_TILE_COLS)]
                for kib, c in tries:
                    ix.S_ROWS_BYTES, ix.S_ROWS_MAX_BYTES, ix.S_TILE_COLS = kib * 1024, kib * 1024, c
                    r = scatter_ranges(b.dev, 1 << s, right)
                    ix.S_ROWS_BYTES, ix.S_ROWS_MAX_BYTES, ix.S_TILE_COLS = keep.values()
                    if r <= 128:
                        more += [(f"{kib} KiB, {c if dim == 0 else 1} cols, {r} ranges",
                                  fixed_table(kib, S_TILE_COLS=c), False)]
            where_s = "the last dim" if dim else "dim 0"
            _scatter_variants(b, f"scatter_ {shape[0]}x{shape[1]} along {where_s}, {kind}", x, x0, ids, src, dim,
                              want, nbytes, more)
            del ids, want
        del src, x0, x


def index_add_case(b: Bench) -> None:
    from stdlib_kernels import INDEXING
    from stdlib_kernels import indexing as ix
    from stdlib_kernels._common import launch_stream
    torch, dev = b.torch, b.dev
    cols = 1024
    n_src = b.n // cols
    dst_rows = n_src // 4
    src = torch.randn(n_src, cols, device="cuda")
    ids = torch.randint(0, dst_rows, (n_src,), device="cuda", dtype=torch.int64)
    x = torch.zeros(dst_rows, cols, device="cuda")
    nbytes = src.nbytes + ids.nbytes + 2 * src.nbytes  # each add reads src and reads/writes an x element
    xw, iw, sw = wrap(dev, x), wrap(dev, ids), wrap(dev, src)
    b.case("index_add_ dim 0 [wrapper]", nbytes, lambda: ix.index_add(xw, 0, iw, sw, check_ids=False),
           lambda: x.index_add_(0, ids, src))
    fa = dev.get_or_load_func("ia_atomic_i64_f32", INDEXING)  # the wrapper's atomic launch, which it
    grid = launch_stream(src.numel(), sw, xw)  # takes for rows shorter than SORTED_MIN_ROW (or floats with
    b.case("index_add_ dim 0 [atomics]", nbytes,  # deterministic=False)
           lambda: fa[grid](src.numel(), iw, n_src, sw, xw, n_src, dst_rows, cols),
           lambda: x.index_add_(0, ids, src))
    f = dev.get_or_load_func("ia_i64_f32", INDEXING)
    b.case("index_add_ dim 0 [candle]", nbytes,
           lambda: f[candle_grid(cols)](ids.data_ptr(), n_src, src.data_ptr(), x.data_ptr(), 1, n_src, dst_rows, cols),
           lambda: x.index_add_(0, ids, src), slow=True)
    x.zero_()
    ix.index_add(xw, 0, iw, sw, check_ids=False)
    want = torch.zeros_like(x).index_add_(0, ids, src)
    assert torch.allclose(x, want, rtol=1e-4, atol=1e-4), "index_add disagrees with torch"


def main() -> None:
    global SWEEP_KIB, SWEEP_COLS, SWEEP_COLS_KIB, TABLE_WINDOWS, SORT_BLOCKS, TABLE_EXTRAS
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-log2", type=int, default=26, help="elements of the output / source")
    ap.add_argument("--sweep", action="store_true", help="index_select under other grid caps too")
    ap.add_argument("--only-select", action="store_true", help="only the index_select cases")
    ap.add_argument("--select-probes", action="store_true", help="index_select f32: the eviction-hint probes")
    ap.add_argument("--overlap-probe", action="store_true", help="index_select: the programmatic launch's overlap "
                    "probe alone (--select-probes runs it too)")
    ap.add_argument("--call-probes", action="store_true", help="index_select: what a wrapper call costs "
                    "besides its kernel (the pool's output, the launch)")
    ap.add_argument("--sa-variants", action="store_true", help="scatter_add's sa_rows under SA_VARIANTS too")
    ap.add_argument("--quick-select", action="store_true", help="index_select: f32 1 KiB, 256 B, 4 KiB only")
    ap.add_argument("--cases", default="select,gather,scatter,scatter_add,index_add",
                    help="comma-separated: select, gather, scatter, scatter_long, scatter_add, index_add")
    ap.add_argument("--long-sizes", default="18,20,22", help="scatter_long: log2 positions along the dim")
    ap.add_argument("--long-dims", default="last,0", help="scatter_long: the dims (last, 0)")
    ap.add_argument("--long-shapes", default="", help="scatter_long: dim:log2 pairs (last:16,0:14) in place "
                    "of --long-sizes x --long-dims")
    ap.add_argument("--long-sweep", action="store_true", help="scatter_long: each table size and tile width too")
    ap.add_argument("--long-ranges", action="store_true", help="scatter_long: s_rows/s_tiles past their limits too")
    ap.add_argument("--long-random", action="store_true", help="scatter_long: random ids only (no permutation)")
    ap.add_argument("--table-extras", default=",".join(TABLE_EXTRAS),
                    help="scatter_long: the table's other variants timed (ids, none, whole)")
    ap.add_argument("--sort-blocks", default=",".join(map(str, SORT_BLOCKS)),
                    help="scatter_long: the counting sort's blocks timed")
    ap.add_argument("--table-windows", default=",".join(str(w >> 20) for w in TABLE_WINDOWS),
                    help="scatter_long: the global table's windows timed (Mi destinations)")
    ap.add_argument("--sweep-kib", default=",".join(map(str, SWEEP_KIB)), help="--long-sweep: table KiB")
    ap.add_argument("--sweep-cols", default="8,4:220", help="--long-sweep: dim 0's tile columns:table KiB")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="alternations of pykern and torch a case")
    ap.add_argument("--no-variants", action="store_true", help="scatter: the wrapper alone, no variants")
    args = ap.parse_args()
    import torch

    import pykern as pk
    if not torch.cuda.is_available():
        sys.exit("benchmarks/indexing.py needs a CUDA GPU")
    torch.cuda.init()
    b = Bench(torch, pk.device("cuda"), 1 << args.size_log2)
    b.rounds, b.variants = args.rounds, not args.no_variants
    cols, _, kib = args.sweep_cols.partition(":")
    SWEEP_KIB = tuple(int(v) for v in args.sweep_kib.split(",") if v)
    SWEEP_COLS = tuple(int(v) for v in cols.split(",") if v)
    SWEEP_COLS_KIB = tuple(int(v) for v in kib.split(",") if v)
    TABLE_WINDOWS = tuple(int(v) << 20 for v in args.table_windows.split(",") if v)
    SORT_BLOCKS = tuple(int(v) for v in args.sort_blocks.split(",") if v)
    TABLE_EXTRAS = tuple(v for v in args.table_extras.split(",") if v)
    cases = set(args.cases.split(","))
    if "select" in cases:
        if args.select_probes or args.overlap_probe:
            overlap_probe(b)
        if args.call_probes:
            call_cost_probe(b)
        index_select_case(b, sweep=args.sweep, probes=args.select_probes)
        index_select_case(b, row_bytes=256, others=not args.quick_select)
        index_select_case(b, row_bytes=4096, others=not args.quick_select, probes=args.select_probes)
        if not args.quick_select:
            index_select_case(b, table_log2=29, sweep=args.sweep, probes=args.select_probes)
            index_select_case(b, row_bytes=1024, dtype="bfloat16", others=False)
            index_select_case(b, row_bytes=4096, dtype="float16", others=False)
            index_select_case(b, row_bytes=8192, dtype="bfloat16", table_log2=29, others=False)
    for name, case in (("gather", gather_case), ("scatter", scatter_case), ("scatter_add", scatter_add_case),
                       ("index_add", index_add_case)):
        if name in cases and not args.only_select:
            case(b, args.sa_variants) if name in ("scatter", "scatter_add") else case(b)
    if "scatter_long" in cases:
        shapes = ([(d, int(v)) for d, v in (p.split(":") for p in args.long_shapes.split(","))]
                  if args.long_shapes else None)
        scatter_long_case(b, tuple(int(v) for v in args.long_sizes.split(",")), tuple(args.long_dims.split(",")),
                          shapes, args.long_sweep, args.long_ranges,
                          ("random ids",) if args.long_random else ("random ids", "a permutation"))
    geo = float(np.exp(np.mean([np.log(r[3]) for r in b.rows])))
    print(f"geometric mean pykern/torch speed ratio: {geo:.2f} over {len(b.rows)} cases")


if __name__ == "__main__":
    main()
