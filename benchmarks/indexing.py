"""The indexing family against PyTorch on the same GPU, same buffers and ids, same process.

Run on the GPU machine:  python benchmarks/indexing.py [--size-log2 26] [--sweep] [--cases select,...]

Cases (i64 ids as torch takes them): index_select along dim 0 (an embedding lookup) into 4 * 2^26
bytes of output rows: f32 rows of 1 KiB, 256 B and 4 KiB from a 64 MiB table and 1 KiB from a 512
MiB one, bf16 1 KiB, f16 4 KiB and bf16 8 KiB rows; gather along dim 1 with random ids;
scatter_add_ along dim 1 and index_add_ along dim 0 (f32). Each is timed through the Python wrapper
(``stdlib_kernels.indexing``, its own launch, ``check_ids`` off: the host check of the ids is a
device-to-host copy, not the kernel; the deterministic scatter_add_/index_add_ include their ids'
device sort where they sort), index_select also by the previous wrapper kernel (``is_words_*``),
scatter_add_ also by the sorted adds (the deterministic path before ``sa_rows_*``; the two must
agree bit for bit) and with ``deterministic=False``, index_add_ by its atomic kernel (the atomic adds
torch's own are like), and each with candle's exact launch (cudarc's ``for_num_elems``:
``ceil(n/1024)`` blocks of 1024 over the elements for ``is``/``gather``, over the (pre, post)
columns for ``ia``/``sa``; candle's arguments, ``info`` always passed for ``is``). Times are
CUDA-event medians of 10 back-to-back calls (``sort.back_to_back``: the GPU's time, not the host's
to issue one call), ours and torch's alternating ``ROUNDS`` times; bandwidth counts the bytes a
kernel must move (read + written once, ids included) against the copy bandwidth measured in this
run the same way. ``--sweep`` also times index_select's ``is_tiles_*`` under other launches
(``TILE_SWEEP``).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from gpu import timed  # noqa: E402
from sort import back_to_back  # noqa: E402


#: alternations of pykern's and torch's timings a case
ROUNDS = 5


class Bench:
    """Cases timed back to back (pykern's and torch's alike), as % of this run's copy bandwidth."""

    def __init__(self, torch, dev, n: int):
        self.torch, self.dev, self.n = torch, dev, n
        self.rows: list[tuple] = []
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        self.copy_bw = 2 * x.nbytes / back_to_back(torch, lambda: y.copy_(x))
        print(f"{dev.name}: copy bandwidth {self.copy_bw / 1e12:.2f} TB/s  (n = {n:,})")
        print(f"{'case':44} {'pykern ms':>9} {'torch ms':>9} {'pk TB/s':>8} {'%copy':>6} {'pk/torch':>8}")

    def case(self, label: str, nbytes: int, ours, theirs, slow: bool = False) -> None:
        """``slow``: ours takes milliseconds (candle's column walks): 5 single calls. Otherwise ours
        and torch's alternate, ``ROUNDS`` times each, and each side's median counts: the two are a
        few percent apart, about what the order of two single measurements moves."""
        if slow:
            t_ours, t_theirs = timed(self.torch, ours, reps=5), back_to_back(self.torch, theirs)
        else:
            t = [(back_to_back(self.torch, ours), back_to_back(self.torch, theirs)) for _ in range(ROUNDS)]
            t_ours, t_theirs = (float(np.median([p[k] for p in t])) for k in (0, 1))
        bw = nbytes / t_ours
        ratio = t_theirs / t_ours  # > 1: pykern faster
        self.rows.append((label, t_ours, t_theirs, ratio))
        print(f"{label:44} {t_ours * 1e3:9.3f} {t_theirs * 1e3:9.3f} {bw / 1e12:8.2f} "
              f"{100 * bw / self.copy_bw:5.0f}% {ratio:8.2f}", flush=True)


def wrap(dev, t):
    """A torch CUDA tensor as a pykern DeviceArray on the same memory (no copy)."""
    import pykern as pk
    from pykern.runtime.base import DeviceArray
    dtype = {"torch.float32": pk.f32, "torch.int64": pk.i64, "torch.uint32": pk.u32, "torch.float16": pk.f16,
             "torch.bfloat16": pk.bf16}[str(t.dtype)]
    return DeviceArray(dev, t.data_ptr(), tuple(t.shape), dtype, owner=t)


def candle_grid(n: int) -> tuple[int, int]:
    return max(1, -(-n // 1024)), 1024


#: ``--sweep``: is_tiles launches besides the default, as (16-byte tiles a thread along a row, threads
#: a block, blocks an SM at most or None)
TILE_SWEEP = ((1, 256, None), (2, 128, None), (4, 256, None), (2, 256, 32))


def index_select_case(b: Bench, row_bytes: int = 1024, sweep: bool = False, table_log2: int = 26,
                      dtype: str = "float32", others: bool = True) -> None:
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


def scatter_add_case(b: Bench) -> None:
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
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-log2", type=int, default=26, help="elements of the output / source")
    ap.add_argument("--sweep", action="store_true", help="index_select under other grid caps too")
    ap.add_argument("--only-select", action="store_true", help="only the index_select cases")
    ap.add_argument("--cases", default="select,gather,scatter_add,index_add",
                    help="comma-separated: select, gather, scatter_add, index_add")
    args = ap.parse_args()
    import torch

    import pykern as pk
    if not torch.cuda.is_available():
        sys.exit("benchmarks/indexing.py needs a CUDA GPU")
    torch.cuda.init()
    b = Bench(torch, pk.device("cuda"), 1 << args.size_log2)
    cases = set(args.cases.split(","))
    if "select" in cases:
        index_select_case(b, sweep=args.sweep)
        index_select_case(b, row_bytes=256, sweep=args.sweep)
        index_select_case(b, row_bytes=4096, sweep=args.sweep)
        index_select_case(b, table_log2=29, sweep=args.sweep)
        index_select_case(b, row_bytes=1024, dtype="bfloat16", others=False)
        index_select_case(b, row_bytes=4096, dtype="float16", others=False)
        index_select_case(b, row_bytes=8192, dtype="bfloat16", table_log2=29, others=False)
    for name, case in (("gather", gather_case), ("scatter_add", scatter_add_case), ("index_add", index_add_case)):
        if name in cases and not args.only_select:
            case(b)
    geo = float(np.exp(np.mean([np.log(r[3]) for r in b.rows])))
    print(f"geometric mean pykern/torch speed ratio: {geo:.2f} over {len(b.rows)} cases")


if __name__ == "__main__":
    main()
