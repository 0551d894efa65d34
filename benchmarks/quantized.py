"""The QUANTIZED family against PyTorch and the copy bandwidth, on one CUDA GPU, in one process.

Run on the GPU machine:  python benchmarks/quantized.py [--only mmvq|mmq|dequantize|get_rows|probes|pairs|planar|tile|mma|
early|rows_sweep|q6k|dequant_q3|ncu|...] [--iters 50]

* MMVQ at batch 1 (Q4_0, Q4_K, Q6_K, Q8_0; 4096x4096 and 14336x4096): the q8_1 + MMVQ pair per
  call, weights rotated over >= 8 buffers (> 100 MB in all, so L2 does not serve them); GB/s counts
  the weight bytes; against ``torch.mv`` in f16 rotated the same way. The wrappers' launch
  (``quantized_api.matmul``: ``mul_mat_vec_rows_{q}_q8_1``, MMVQ_WRAPPER_ROWS rows a block) and
  candle's exact launch (``mul_mat_vec_via_q8_1``: one row a block) are both timed, each pair and
  its MMVQ alone; "host loop" is the pair launched from Python back to back (no graph), which the
  host's ~5-7 us a launch bounds.
* MMQ at 16, 32 and 128 activation rows, under candle's tile and the wrappers' (planar q8_1 and
  ``mul_mat_planar_*``),
  against dequantize-then-``torch.matmul`` in f16 (the dequantize being pykern's fastest, the
  wrappers' ``dequantize_*_f16``); the matmul alone is printed too.
* ``dequantize_block_*`` (f32 and f16 out) and ``get_rows_*`` on >= 64 MB: bytes read + written,
  under candle's launch and the wrappers', with an empty kernel under candle's grids (the floor
  that block starts set).
* warps: the batch-1 pair and MMVQ alone of q4_0, q4_K, q6_K, q8_0 under the wrappers' kernel, the
  same with its blocks striding over the rows (``mmvq_stride``) and under (32, 2), a wave per row
  group (``mul_mat_vec_warps``) and the planar-activation kernel at one column; outputs compared.
* read_sizes: torch.mv f16, torch.sum and a copy of as many bytes as each format's 14336 x 4096
  weights (what reading that many bytes reaches at all).
* floor: the simplest kernel of the batch-1 MMVQ's shape (``read_floor``: its grid and block, the
  weight bytes and nothing else) alone and after ``quantize_q8_1``, plain and programmatic, beside the
  wrappers' pair: what the pair's launch shape allows at all.
* blocks: the wrappers' batch-1 MMVQ under (32, 2), (32, 4), (32, 8) at 4096 x 14336 and 14336 x 4096.
* probes: the q4_K / q6_K pair with an empty kernel in the quantize's place (what a second kernel
  costs by itself), the device's dp4a rate (the arithmetic bound of a dp4a MMQ), and the wrappers'
  MMQ kernel with more activation columns and fewer rows a block at 32 columns.
* pairs: the batch-1 pair of q4_K, q5_K, q6_K under the wrappers' kernel and ``mul_mat_vec_pairs``
  (a thread two chunks from one load of their shared words) at several rows a block.
* planar: the wrappers' MMQ (planar q8_1 + ``mul_mat_planar_{q}``) against their earlier
  ``mul_mat_cols`` and dequantize + torch.matmul at 16 to 128 columns, other shapes and blocks.
* pdl: the batch-1 pair launched plainly and with programmatic dependent launch (sm_90), and a
  probe that the overlap is real (a reader without ``pk.grid_dependency_wait`` sees stale data).
* tile: the tiled MMQ probe (``mmq_tile_probe_{q}``, both operands staged in shared memory: ggml's
  mul_mat_q shape with dp4a) against ``mul_mat_cols`` and dequantize + torch.matmul at 16, 32, 64
  activation columns.
* early: the batch-1 pair and MMVQ alone of q4_0, q4_K, q5_K, q6_K, q8_0 with the weights loaded before
  ``grid_dependency_wait`` and after (``MMVQ_WEIGHTS_FIRST`` was chosen from it); rows_sweep: the pair
  formats at 1, 2, 4 rows a block, either way; q6k: q6_K's pair loads (``block_span``, 16-bit scale
  loads) as probes beside the wrappers' kernel; dequant_q3: q3_K's f16 dequantize against its probes;
  ncu: one launch of each of those kernels, for ``ncu -k regex:...`` (not in the default run).
* mma: the wrappers' MMQ on ``pk.mma`` (``mul_mat_mma_{q}_*``: i8 tensor-core products block-scaled by
  ``pk.mma.scale_add``) for q4_0, q8_0, q4_K and q6_K against dequantize + torch.matmul f16 and the planar MMQ
  (``mul_mat_planar``) at 16, 24, 32, 64, 128 columns, checked within spec §6.5's bound.

Times: GPU time. ``--iters`` back-to-back calls are captured in one CUDA graph, and CUDA events time
its replays (median of 5, after warm-up): launched from Python one by one, every kernel here under
~7 us would time the host's launch call instead (docs/targets/cuda.md, "Measured"). The gaps
between a graph's kernels stay in the figure, as in a captured model. The ceiling is the
device-to-device copy bandwidth measured in the same run (bytes read + written) by ``timing.Timer``,
as every benchmark here measures it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

import pykern as pk
import pykern.math as pkm
from stdlib_kernels import QUANTIZED
from stdlib_kernels import quantized as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import Timer, graph_time  # noqa: E402

ROTATE_MIN = 8                # weight buffers rotated over, at least
ROTATE_BYTES = 160 << 20      # ... and at least this many bytes in all (H100 L2: 50 MB)


def loop_time(torch, fn, iters: int) -> float:
    """Seconds a call of ``fn(i, None)`` over ``iters`` calls launched from Python (median of 5 runs)."""
    for i in range(3):
        fn(i, None)
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(iters):
            fn(i, None)
        b.record()
        b.synchronize()
        runs.append(a.elapsed_time(b) / 1e3 / iters)
    return statistics.median(runs)


def random_blocks(rng, qtype: str, nrows: int, ncols: int) -> np.ndarray:
    """Random block bytes with finite, small f16 scales (the fields tests/stdlib/test_quantized.py lists)."""
    fields = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q2_K": [80, 82],
              "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208], "q8_K": []}
    q = Q.QTYPES[qtype]
    raw = rng.integers(0, 256, size=(nrows, ncols // q.qk, q.nbytes), dtype=np.uint8)
    for off in fields[qtype]:
        raw[..., off:off + 2] = (rng.uniform(0.5, 1.5, raw.shape[:2]) * 1e-2).astype(np.float16)[..., None].view(np.uint8)
    if qtype == "q8_K":
        raw[..., 0:4] = np.full(raw.shape[:2] + (1,), 1e-2, np.float32).view(np.uint8)
    return raw.reshape(-1)


class Bench:
    def __init__(self, torch, dev, iters: int):
        self.torch, self.dev, self.iters = torch, dev, iters
        # the ceiling as every benchmark measures it (timing.Timer). Not a graph of ``copy_``: captured,
        # a contiguous copy becomes a memcpy node that the copy engines run, well below an SM copy's
        # rate (docs/targets/cuda.md, quantized), which inflated every share of it here
        self.copy_bw = Timer(torch).copy_bandwidth()
        print(f"device: {torch.cuda.get_device_name()}; copy bandwidth {self.copy_bw / 1e12:.2f} TB/s (read + written)")

    def fn(self, name: str):
        return self.dev.get_or_load_func(name, QUANTIZED)

    def time(self, fn) -> float:
        return graph_time(self.torch, fn, self.iters)

    def rotated(self, host: np.ndarray) -> list:
        """Copies of ``host`` on the GPU: at least ROTATE_MIN and ROTATE_BYTES in all."""
        count = max(ROTATE_MIN, -(-ROTATE_BYTES // host.nbytes))
        first = self.torch.from_numpy(host).cuda()
        return [first] + [first.clone() for _ in range(count - 1)]

    def report(self, label: str, seconds: float, nbytes: int, ref_seconds: float | None = None, ref: str = ""):
        bw = nbytes / seconds
        line = f"{label:48} {seconds * 1e6:9.2f} us {bw / 1e12:6.2f} TB/s {100 * bw / self.copy_bw:5.0f}% copy"
        if ref_seconds is not None:
            line += f"   {ref} {ref_seconds * 1e6:9.2f} us  x{ref_seconds / seconds:5.2f}"
        print(line, flush=True)


def dequant_matmul(torch, deq, ws, w16, x16, el: int):
    """The MMQ reference, ``fn(i, stream)``: weights ``ws[i]`` dequantized to f16 by the wrappers'
    launch into ``w16``, then ``torch.matmul`` in f16 (what a user without MMQ would run)."""
    def run(i, s):
        deq[-(-el // Q.DEQUANTIZE_WRAPPER_ELEMENTS), Q.DEQUANTIZE_WRAPPER_BLOCK, s](
            ws[i % len(ws)].data_ptr(), w16.data_ptr(), el)
        return torch.matmul(x16, w16.T)
    return run


def mmvq_launches(quant, fn, rows: int, ws, x, vy, dst, k_padded: int, block=(32, 4)):
    """(MMVQ alone, quantize_q8_1 + MMVQ) as timed calls ``(i, stream)`` over the rotated weights ``ws``:
    ``fn`` takes ``rows`` weight rows a block of ``block`` threads."""
    nrows, ncols = dst.numel(), x.numel()

    def alone(i, s):
        fn[-(-nrows // rows), block, s](ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols,
                                          nrows, k_padded, nrows)

    def pair(i, s):
        quant[(k_padded // 256, 1), 256, s](x.data_ptr(), vy.data_ptr(), ncols, k_padded)
        alone(i, s)
    return alone, pair


def mmvq(b: Bench) -> None:
    """q8_1 + MMVQ at batch 1: weight bytes / time against the copy bandwidth and torch.mv in f16."""
    from stdlib_kernels.quantized_api import matmul
    torch, rng = b.torch, np.random.default_rng(0)
    print("\nMMVQ, batch 1 (quantize_q8_1 + mul_mat_vec; GB/s of weight bytes)")
    for nrows, ncols in ((4096, 4096), (14336, 4096)):
        x = torch.randn(ncols, device="cuda")
        w16 = b.rotated(np.zeros((nrows, ncols), np.float16))
        for w in w16:
            w.normal_()
        x16 = x.half()
        t_mv = b.time(lambda i, s, w16=w16: torch.mv(w16[i % len(w16)], x16))
        b.report(f"torch.mv f16 {nrows}x{ncols}", t_mv, w16[0].numel() * 2)
        w16 = None  # free the f16 copies before the quantized ones
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        quant = b.fn("quantize_q8_1")
        t_quant = b.time(lambda i, s: quant[(k_padded // 256, 1), 256, s](x.data_ptr(), vy.data_ptr(), ncols, k_padded))
        print(f"{'quantize_q8_1 alone':48} {t_quant * 1e6:9.2f} us")
        for qtype in ("q4_0", "q4_K", "q6_K", "q8_0"):
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            wbytes = ws[0].numel()
            launches = {"candle's launch": (b.fn(f"mul_mat_vec_{qtype}_q8_1_cuda1"), 1, (32, 4)),
                        "wrappers' launch": (b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"), Q.MMVQ_WRAPPER_ROWS[qtype],
                                             Q.mmvq_wrapper_block(qtype, ncols))}
            figures = {}
            for label, (fn, rows, block) in launches.items():
                alone, pair = mmvq_launches(quant, fn, rows, ws, x, vy, dst, k_padded, block)
                figures[label] = t_pair = b.time(pair)
                t_alone = b.time(alone)
                t_host = loop_time(torch, pair, b.iters)
                b.report(f"{qtype} {nrows}x{ncols} {label}", t_pair, wbytes, t_mv, "torch.mv f16")
                print(f"{'':48} MMVQ alone {t_alone * 1e6:6.2f} us = {100 * wbytes / t_alone / b.copy_bw:3.0f}% copy;"
                      f" host loop {t_host * 1e6:6.2f} us a pair")
            ratio = figures["wrappers' launch"] / figures["candle's launch"]
            print(f"{'':48} candle's launch at {ratio:.2f}x the wrappers' speed")
            # the API (its own buffers and launch) against candle's launch on the same weights: the same
            # products but for the order of the f32 additions
            got = matmul(b.dev.to_device(ws[0].cpu().numpy()), qtype,
                         b.dev.to_device(x.cpu().numpy()[None])).to_host()[0]
            launches["candle's launch"][0][nrows, (32, 4)](ws[0].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols,
                                                           nrows, k_padded, nrows)
            torch.cuda.synchronize()
            want = dst.cpu().numpy()
            assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), "wrappers and candle's launch disagree"
            del ws


def mmq(b: Bench) -> None:
    """q8_1 + MMQ against dequantize + torch.matmul in f16 (the dequantize being pykern's fastest:
    the wrappers' ``dequantize_{q}_f16``), and torch.matmul alone."""
    torch, rng = b.torch, np.random.default_rng(1)
    nrows, ncols = 4096, 4096
    print(f"\nMMQ {nrows}x{ncols} (quantize + mul_mat; GB/s of weight bytes)")
    quant, pquant = b.fn("quantize_q8_1"), b.fn("quantize_q8_1_planar")
    k_padded = -(-ncols // 512) * 512
    for qtype in ("q4_0", "q4_K", "q6_K", "q8_0"):
        ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
        deq = b.fn(f"dequantize_{qtype}_f16")
        mmq_k, planar_k = b.fn(f"mul_mat_{qtype}"), b.fn(f"mul_mat_planar_{qtype}")
        tile_x, tile_y = Q.MMQ_TILES[qtype]

        def candle(s, w, vy, dst, batch):  # candle's tile, block (32, 4)
            mmq_k[(-(-nrows // tile_y), -(-batch // tile_x)), (32, 4), s](
                w.data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows, batch, k_padded, nrows)

        def wrappers(s, w, vp, dst, batch):  # quantized_api.matmul's launch: planar q8_1
            planar_k[(-(-nrows // Q.MMQ_PLANAR_ROWS), -(-batch // Q.MMQ_PLANAR_COLUMNS)), (32, Q.MMQ_PLANAR_BLOCK_Y), s](
                w.data_ptr(), vp.data_ptr(), dst.data_ptr(), ncols, nrows, batch, k_padded, nrows)

        launches = {f"candle's tile {tile_x}x{tile_y}": (quant, candle), "wrappers' mul_mat_planar": (pquant, wrappers)}
        w16 = torch.empty((nrows, ncols), dtype=torch.float16, device="cuda")
        el = nrows * ncols
        for batch in (16, 32, 128):
            x = torch.randn(batch, ncols, device="cuda")
            x16 = x.half()
            vy = torch.empty(batch * k_padded // 32 * Q.PLANAR_BYTES, dtype=torch.uint8, device="cuda")  # either
            dst = torch.empty(batch, nrows, device="cuda")

            t_ref = b.time(dequant_matmul(torch, deq, ws, w16, x16, el))
            t_mm = b.time(lambda i, s, x16=x16: torch.matmul(x16, w16.T))
            for label, (qfn, launch) in launches.items():
                def ours(i, s, ws=ws, qfn=qfn, launch=launch, x=x, vy=vy, dst=dst, batch=batch):
                    qfn[(k_padded // 256, batch), 256, s](x.data_ptr(), vy.data_ptr(), ncols, k_padded)
                    launch(s, ws[i % len(ws)], vy, dst, batch)

                t_ours = b.time(ours)
                b.report(f"{qtype} batch {batch} {label}", t_ours, ws[0].numel(), t_ref, "dequant+matmul f16")
            print(f"{'':48} torch.matmul alone (f16 weights) {t_mm * 1e6:9.2f} us")
        del ws


@pk.kernel
def launch_probe(p: pk.Ptr[pk.f32]):
    """Nothing (no thread has index 2^20): under a launch shape, its time is the floor the grid's
    block starts set for any kernel."""
    if pk.thread_idx.x == 1 << 20:
        p[0] = 1.0


#: independent dp4a chains a thread of ``dp4a_probe`` keeps
PROBE_CHAINS = 8


@pk.kernel
def dp4a_probe(p: pk.Ptr[pk.i32], n: pk.i32):
    """``n`` steps of PROBE_CHAINS independent ``pk.dot4_i8`` a thread (each chain's operand the
    next chain's last value, so no step folds away): the device's dp4a rate, the ceiling of any
    dp4a MMQ."""
    acc = pk.local.array(PROBE_CHAINS, pk.i32)
    for k in pk.static_range(PROBE_CHAINS):
        acc[k] = pk.i32(pk.thread_idx.x) + k
    for i in range(n):
        for k in pk.static_range(PROBE_CHAINS):
            acc[k] = pk.dot4_i8(acc[(k + 1) % PROBE_CHAINS], 0x01FF7F03, acc[k])
    total = pk.i32(0)
    for k in pk.static_range(PROBE_CHAINS):
        total += acc[k]
    p[pk.global_id()] = total


#: the wrappers' earlier MMQs, the probes' point of comparison (kept here, not in the stdlib module a build
#: ships): ``mul_mat_cols_{q}``, the MMVQ kernel on MMQ_COLUMNS_A_BLOCK columns and MMQ_ROWS_A_BLOCK rows a
#: block of (32, MMQ_BLOCK_Y) threads, the columns along grid y (q8_1 blocks read from global memory: a
#: thread's sit 36 bytes from its neighbours', 9 cache wavefronts a warp a word; their figures:
#: docs/targets/cuda.md, MMQ), and ``mul_mat_rows_{q}``, candle's ``mul_mat_{q}`` on MMQ_WRAPPER_TILE
#: (candle's tiles give a 4096-row matrix a quarter to a half of an H100's SMs)
MMQ_COLUMNS_A_BLOCK, MMQ_ROWS_A_BLOCK, MMQ_BLOCK_Y = 8, 4, 2
MMQ_WRAPPER_TILE = (32, 32)
EARLIER_MMQ = pk.Module("quantized_earlier_mmq").add(
    *(Q.mul_mat_vec_q8_1.instance(f"mul_mat_cols_{q.name}", Q=q, N=MMQ_COLUMNS_A_BLOCK, rows=MMQ_ROWS_A_BLOCK,
                                  early=False) for q in Q.MATMUL_TYPES),
    *(Q.mul_mat_q.instance(f"mul_mat_rows_{q.name}", Q=q, tile_x=MMQ_WRAPPER_TILE[0], tile_y=MMQ_WRAPPER_TILE[1])
      for q in Q.MATMUL_TYPES))

#: (columns, rows) a block of the wrappers' MMQ kernel (``mul_mat_cols``: MMVQ on N columns) that the
#: probes time at 32 activation columns, under blocks of (32, MMQ_BLOCK_Y)
MMQ_SHAPES = ((8, 4), (16, 2), (32, 1), (16, 1))

#: blocks an SM the batch-1 MMVQ probes ask for (``min_blocks_per_sm``: a register budget of 65536 /
#: (blocks x 128) a thread) of the thread-a-chunk kernel (``mul_mat_vec_q8_1``): with 4 rows' chunks
#: q4_K's reached 8 blocks (32 warps)
MMVQ_MIN_BLOCKS = (10, 12, 16)
_MMVQ_BOUNDED = {mb: pk.kernel(max_block_size=128, min_blocks_per_sm={"cuda": mb})(Q.mul_mat_vec_q8_1.__wrapped__)
                 for mb in MMVQ_MIN_BLOCKS}

#: (rows a block, block) of the pairs kernel (``mul_mat_vec_pairs``) that ``--only pairs`` times for
#: the pair formats, beside the wrappers' kernel
PAIR_SHAPES = ((2, (32, 2)), (4, (32, 2)), (4, (32, 4)), (8, (32, 2)))
PAIR_FORMATS = tuple(q.name for q in Q.MATMUL_TYPES if q.pair is not None)
PAIR_PROBES = pk.Module("quantized_pairs").add(
    *(Q.mul_mat_vec_pairs.instance(f"pairs_{q}_{r}", Q=Q.QTYPES[q], rows=r, early=False)
      for q in PAIR_FORMATS for r in sorted({r for r, _ in PAIR_SHAPES})))

#: (columns, rows) a block of the planar-activation MMQ (``mul_mat_planar``) that ``--only planar`` times
#: beside the wrappers' (``mul_mat_planar_{q}``: MMQ_PLANAR_COLUMNS x MMQ_PLANAR_ROWS), under (32, 2)
PLANAR_SHAPES = ((4, 8), (16, 2))
PLANAR_FORMATS = ("q4_0", "q4_K", "q6_K", "q8_0")
PLANAR_PROBES = pk.Module("quantized_planar").add(
    *(Q.mul_mat_planar.instance(f"planar_{q}_{n}x{r}", Q=Q.QTYPES[q], N=n, rows=r)
      for q in PLANAR_FORMATS for n, r in PLANAR_SHAPES))

PROBES = pk.Module("quantized_bench").add(launch_probe.instance("launch_probe"), dp4a_probe.instance("dp4a_probe"),
                                          *(Q.mul_mat_vec_q8_1.instance(f"cols_q4_0_{n}x{r}", Q=Q.QTYPES["q4_0"], N=n,
                                                                        rows=r, early=False) for n, r in MMQ_SHAPES),
                                          *(k.instance(f"rows_{q}_blocks{mb}", Q=Q.QTYPES[q], N=1,
                                                       rows=Q.MMVQ_WRAPPER_ROWS[q], early=False)
                                            for mb, k in _MMVQ_BOUNDED.items() for q in ("q4_K", "q6_K")))


# ---- the tiled MMQ probe (issue 26: MMQ at 32 columns) ------------------------------------------------
#: the probe's tile: weight rows and activation columns a block, 32-element chunks a step, threads
TILE_ROWS, TILE_COLS, TILE_STEP, TILE_THREADS = 32, 32, 8, 256
#: words of a decoded row or column a step, padded so that 16-byte reads of 8 rows hit distinct banks
TILE_LDW = TILE_STEP * 8 + 4
#: floats of a row's scales and mins a step (4 a chunk), padded likewise
TILE_LDP = TILE_STEP * 4 + 4
#: words of a column's raw q8_1 blocks a step, and of them a thread copies
TILE_YW = TILE_STEP * Q.Q8_1_BYTES // 4
TILE_YPER = TILE_COLS * TILE_YW // TILE_THREADS
#: f32 bits of 1.5 * 2^23: an integer dot started at MAGIC (|dot| < 2^22) read as an f32 is
#: 1.5 * 2^23 + dot exactly, so one subtraction converts it (no I2F, a quarter-rate instruction)
MAGIC, MAGIC_F = 0x4B400000, 12582912.0


def tile_params(q) -> dict:
    """The probe's compile-time layout for format ``q``: the unit raw weight bytes are copied in (u32
    where blocks are 4-byte multiples, else u16) and how many a row has a step; the words of an
    activation chunk's record (d8, a dp4a start a group, the group sums as f32 for the formats with a
    min); the offsets of the shared-memory regions (one array: the final sums reuse its start)."""
    raw = pk.u32 if q.nbytes % 4 == 0 else pk.u16
    units = TILE_STEP * Q.Q8_1_QK // q.qk * q.nbytes // raw.nbytes
    groups = Q.Q8_1_QK // q.group
    rec = 4 if 1 + groups * (2 if q.has_min else 1) <= 4 else 8
    o_sp = TILE_ROWS * TILE_LDW
    o_sy = o_sp + TILE_ROWS * TILE_LDP
    o_sr = o_sy + TILE_COLS * TILE_LDW
    o_ry = o_sr + TILE_COLS * TILE_STEP * rec
    o_rw = o_ry + TILE_COLS * TILE_YW
    total = o_rw + -(-TILE_ROWS * units * raw.nbytes // 4)
    assert total * 4 <= 48 * 1024 and o_sr >= 4 * 1024, (q.name, total)
    return dict(RAW=raw, UNITS=units, RAW_PER=-(-TILE_ROWS * units // TILE_THREADS), REC=rec, O_SP=o_sp,
                O_SY=o_sy, O_SR=o_sr, O_RY=o_ry, O_RW=o_rw, SMEM=total)


@pk.kernel(max_block_size=TILE_THREADS)
def mmq_tile_probe(vx: pk.ConstPtr[pk.u8], vy: pk.ConstPtr[pk.u8], dst: pk.Ptr[pk.f32], ncols_x: pk.i32,
                   nrows_x: pk.i32, ncols_y: pk.i32, nrows_y: pk.i32, nrows_dst: pk.i32, *, q, RAW, UNITS, RAW_PER,
                   REC, O_SP, O_SY, O_SR, O_RY, O_RW, SMEM):
    """MMQ with both operands staged in shared memory (candle/ggml's mul_mat_q shape), under a block
    of TILE_THREADS: ``dst[col * nrows_dst + row]`` for TILE_ROWS rows (block x) and TILE_COLS q8_1
    columns (block y). Each step of TILE_STEP chunks: the raw bytes of the tile's rows and its
    columns' q8_1 blocks, loaded one step ahead into registers by consecutive threads (coalesced;
    decoded only once stored, since a use right after a load waits for it), are stored, decoded in
    shared memory (``load_chunk``; q8_1 words, d8, dp4a starts, group sums) and multiplied: warp w
    takes chunk w, a thread rows ``rq + 8 i`` (4) x columns ``cq + 4 j`` (8), 32 sums in registers;
    the 8 warps' sums are added in a fixed order at the end. Rows and columns past the matrix re-read
    the last one and are not written."""
    smem = pk.shared.array(SMEM, pk.u32)
    if ncols_x <= 0 or ncols_y <= 0 or nrows_x <= 0 or Q.flat_threads() != TILE_THREADS:
        return
    sw = smem + 0
    sp = pk.bitcast(smem + O_SP, pk.Ptr[pk.f32])
    sy = smem + O_SY
    sr = smem + O_SR
    ry = smem + O_RY
    rw = pk.bitcast(smem + O_RW, pk.Ptr[RAW])
    t = Q.flat_thread()
    chunks = pk.u32(ncols_x) // Q.Q8_1_QK
    per_block: pk.u32 = q.qk // Q.Q8_1_QK
    row_bytes = pk.usize(chunks // per_block) * q.nbytes
    column_bytes = pk.usize(pk.u32(max(nrows_y, 0)) // Q.Q8_1_QK) * Q.Q8_1_BYTES
    first_row = pk.block_idx.x * TILE_ROWS
    first = pk.block_idx.y * TILE_COLS
    last = pk.u32(ncols_y) - 1
    last_row = pk.u32(nrows_x) - 1
    pw = pk.local.array(RAW_PER, RAW)
    py = pk.local.array(TILE_YPER, pk.u32)
    for i in pk.static_range(RAW_PER):
        pw[i] = 0
    for i in pk.static_range(TILE_YPER):
        py[i] = 0
    ch = t % TILE_STEP  # decoding: chunk ch of row (and column) unit
    unit = t // TILE_STEP
    words = pk.local.array(8, pk.u32)
    params = pk.local.array(4, pk.f32)
    sums = pk.local.array(2, pk.i32)
    yq = pk.local.array(8, pk.i32)
    w = t // 32  # the products: chunk w, rows rq + 8 i, columns cq + 4 j
    lane = t % 32
    rq = lane % 8
    cq = lane // 8
    acc = pk.local.array(32, pk.f32)
    for i in pk.static_range(32):
        acc[i] = 0.0
    wq = pk.local.array(32, pk.u32)
    pr = pk.local.array(16, pk.f32)
    yv = pk.local.array(8, pk.u32)
    for c0 in range(pk.u32(0), chunks + TILE_STEP, pk.u32(TILE_STEP)):
        if c0 > 0:  # step c0 - STEP: store its loads
            for i in pk.static_range(RAW_PER):
                if t + TILE_THREADS * i < TILE_ROWS * UNITS:
                    rw[t + TILE_THREADS * i] = pw[i]
            for i in pk.static_range(TILE_YPER):
                ry[t + TILE_THREADS * i] = py[i]
            pk.syncthreads()
        if c0 < chunks:  # step c0's loads, in flight while step c0 - STEP is decoded and multiplied
            valid_w = min(chunks - c0, pk.u32(TILE_STEP)) // per_block * (q.nbytes // RAW.nbytes)
            for i in pk.static_range(RAW_PER):
                f = t + TILE_THREADS * i
                if f < TILE_ROWS * UNITS and f % UNITS < valid_w:
                    rp = pk.bitcast(vx + pk.usize(min(first_row + f // UNITS, last_row)) * row_bytes
                                    + pk.usize(c0 // per_block) * q.nbytes, pk.ConstPtr[RAW])
                    pw[i] = rp[f % UNITS]
            valid_y = min(chunks - c0, pk.u32(TILE_STEP)) * (Q.Q8_1_BYTES // 4)
            for i in pk.static_range(TILE_YPER):
                f = t + TILE_THREADS * i
                if f % TILE_YW < valid_y:
                    yp = pk.bitcast(vy + pk.usize(min(first + f // TILE_YW, last)) * column_bytes
                                    + pk.usize(c0) * Q.Q8_1_BYTES, pk.ConstPtr[pk.u32])
                    py[i] = yp[f % TILE_YW]
        if c0 > 0:
            s0 = c0 - TILE_STEP
            if s0 + ch < chunks:  # decode chunk ch of row unit and of column unit
                Q.load_chunk(pk.bitcast(rw, pk.ConstPtr[pk.u8]) + unit * (UNITS * RAW.nbytes)
                             + ch // per_block * q.nbytes, ch % per_block, words, params, Q=q)
                for k in pk.static_range(8):
                    sw[unit * TILE_LDW + ch * 8 + k] = words[k]
                for k in pk.static_range(4):
                    sp[unit * TILE_LDP + ch * 4 + k] = params[k]
                yb = unit * TILE_YW + ch * (Q.Q8_1_BYTES // 4)
                for k in pk.static_range(8):
                    yq[k] = pk.bitcast(ry[yb + 1 + k], pk.i32)
                    sy[unit * TILE_LDW + ch * 8 + k] = ry[yb + 1 + k]
                rec = (unit * TILE_STEP + ch) * REC
                sr[rec] = pk.bitcast(pk.f32(pk.bitcast(pk.u16(ry[yb] & 0xFFFF), pk.f16)), pk.u32)
                Q.group_sums(yq, sums, Q=q, at=0)
                for g in pk.static_range(Q.Q8_1_QK // q.group):
                    if q.qoff != 0 or q.has_min:
                        sr[rec + 1 + g] = pk.bitcast(MAGIC + q.qoff * sums[g], pk.u32)
                    else:
                        sr[rec + 1 + g] = pk.u32(MAGIC)
                    if q.has_min:
                        sr[rec + 1 + Q.Q8_1_QK // q.group + g] = pk.bitcast(pk.f32(sums[g]), pk.u32)
            pk.syncthreads()
            if s0 + w < chunks:
                for i in pk.static_range(4):
                    for k in pk.static_range(8):
                        wq[8 * i + k] = sw[(rq + 8 * i) * TILE_LDW + w * 8 + k]
                    for k in pk.static_range(4):
                        pr[4 * i + k] = sp[(rq + 8 * i) * TILE_LDP + w * 4 + k]
                for j in pk.static_range(8):
                    col = cq + 4 * j
                    for k in pk.static_range(8):
                        yv[k] = sy[col * TILE_LDW + w * 8 + k]
                    rec = (col * TILE_STEP + w) * REC
                    d8 = pk.bitcast(sr[rec], pk.f32)
                    for i in pk.static_range(4):
                        total = pk.f32(0)
                        for g in pk.static_range(Q.Q8_1_QK // q.group):
                            dots = pk.bitcast(sr[rec + 1 + g], pk.i32)
                            for k in pk.static_range(q.group // 4):
                                dots = pk.dot4_i8(wq[8 * i + g * (q.group // 4) + k], yv[g * (q.group // 4) + k], dots)
                            part = pr[4 * i + 2 * g] * (pk.bitcast(dots, pk.f32) - MAGIC_F)
                            if q.has_min:
                                mins = pk.bitcast(sr[rec + 1 + Q.Q8_1_QK // q.group + g], pk.f32)
                                part += pr[4 * i + 2 * g + 1] * mins
                            total += part
                        acc[8 * i + j] += d8 * total
            pk.syncthreads()
    red = pk.bitcast(smem, pk.Ptr[pk.f32])  # warps [n, 2n) hand their sums to warps [0, n)
    for half in pk.static_range(3):
        n = pk.u32(4 >> half)
        if w >= n and w < 2 * n:
            for i in pk.static_range(32):
                red[((w - n) * 32 + i) * 32 + lane] = acc[i]
        pk.syncthreads()
        if w < n:
            for i in pk.static_range(32):
                acc[i] += red[(w * 32 + i) * 32 + lane]
        pk.syncthreads()
    if w == 0:
        for i in pk.static_range(4):
            row = first_row + rq + 8 * i
            for j in pk.static_range(8):
                col = first + cq + 4 * j
                if row <= last_row and col <= last:
                    dst[pk.usize(col) * pk.usize(nrows_dst) + pk.usize(row)] = acc[8 * i + j]


#: the formats the tile probe is built for (every format the wrappers' MMQ serves)
TILE_PROBES = pk.Module("quantized_tile_probe").add(
    *(mmq_tile_probe.instance(f"mmq_tile_probe_{q.name}", q=q, **tile_params(q)) for q in Q.MATMUL_TYPES))


def launch_floor(b: Bench, grid: int, block: int) -> float:
    buf = b.torch.empty(1, device="cuda")
    fn = b.dev.get_or_load_func("launch_probe", PROBES)
    return b.time(lambda i, s: fn[grid, block, s](buf.data_ptr()))


def dequantize(b: Bench) -> None:
    """dequantize_block_* under candle's launch and the wrappers' ``dequantize_{q}_{d}``, 2^25
    elements (>= 64 MB written in f16, 128 MB in f32), with the launch floor of candle's grids."""
    torch, rng = b.torch, np.random.default_rng(2)
    el = 1 << 25
    rows, cols = el // 4096, 4096
    print(f"\ndequantize_block_* ({el:,} elements; bytes read + written): candle's launch, then the wrappers'")
    for grid, block in sorted({(-(-el // per), threads) for per, threads, _ in Q.DEQUANTIZE_LAUNCH.values()}):
        floor = launch_floor(b, grid, block)
        print(f"{'':48} an empty kernel under candle's grid {grid} x {block}: {floor * 1e6:.2f} us")
    for q in Q.QTYPES.values():
        w = torch.from_numpy(random_blocks(rng, q.name, rows, cols)).cuda()
        per, threads, unit = Q.DEQUANTIZE_LAUNCH[q.name]
        for dtype, tdt in (("f32", torch.float32), ("f16", torch.float16)):
            out = torch.empty(el, dtype=tdt, device="cuda")
            fn = b.fn(f"dequantize_block_{q.name}_{dtype}")
            t = b.time(lambda i, s, fn=fn, w=w, out=out: fn[-(-el // per), threads, s](
                w.data_ptr(), out.data_ptr(), *(() if unit is None else (el // unit,))))
            nbytes = w.numel() + out.numel() * out.element_size()
            b.report(f"dequantize_block_{q.name}_{dtype} candle's launch", t, nbytes)
            wide = b.fn(f"dequantize_{q.name}_{dtype}")
            t = b.time(lambda i, s, fn=wide, w=w, out=out: fn[-(-el // Q.DEQUANTIZE_WRAPPER_ELEMENTS),
                                                              Q.DEQUANTIZE_WRAPPER_BLOCK, s](
                w.data_ptr(), out.data_ptr(), el))
            b.report(f"dequantize_{q.name}_{dtype} wrappers' launch", t, nbytes)


def get_rows(b: Bench) -> None:
    """get_rows_* gathering every row of a 8192 x 4096 table once (a permutation), f32 out (128 MB),
    under candle's launch and the wrappers' (a block of 256 a row)."""
    torch, rng = b.torch, np.random.default_rng(3)
    rows, hidden = 8192, 4096
    ids = torch.from_numpy(rng.permutation(rows).astype(np.uint32)).cuda()
    out = torch.empty(rows, hidden, device="cuda")
    print(f"\nget_rows_* ({rows} rows of {hidden}; bytes read + written)")
    for grid_y, block in ((16, 64), (16, 32), (8, 256)):
        print(f"{'':48} an empty kernel under candle's grid ({rows}, {grid_y}) x {block}: "
              f"{launch_floor(b, rows * grid_y, block) * 1e6:.2f} us")
    for name in [t.tag for t in Q.FLOAT_ROWS] + [q.name for q in Q.MATMUL_TYPES]:
        if name in Q.QTYPES:
            q = Q.QTYPES[name]
            table = torch.from_numpy(random_blocks(rng, name, rows, hidden)).cuda()
            stride = hidden // q.qk * q.nbytes
            block, grid_y = (256, -(-hidden // 512)) if q.qk == 32 else (32 if name == "q4_K" else 64, hidden // 256)
        else:
            table = torch.randn(rows, hidden, device="cuda").to(getattr(torch, {"f32": "float32", "f16": "float16",
                                                                                 "bf16": "bfloat16"}[name]))
            stride, block, grid_y = hidden * table.element_size(), 256, -(-hidden // 256)
        fn = b.fn(f"get_rows_{name}")
        launches = {"candle's launch": (grid_y, block), "wrappers' launch": (1, 256)}
        nbytes = table.numel() * table.element_size() + out.numel() * 4
        ref = b.time(lambda i, s, table=table: torch.index_select(table, 0, ids.long()).float()) if name in ("f32", "f16") else None
        for label, (gy, bx) in launches.items():
            t = b.time(lambda i, s, fn=fn, table=table, gy=gy, bx=bx: fn[(rows, gy), bx, s](
                table.data_ptr(), ids.data_ptr(), out.data_ptr(), hidden, stride))
            b.report(f"get_rows_{name} {label}", t, nbytes, ref, "torch.index_select" if ref else "")


def probes(b: Bench) -> None:
    """What bounds the pairs and MMQ: the pair with an empty kernel in the quantize's place (the
    cost of a second kernel, whatever it does), and the dp4a rate of the device."""
    torch, rng = b.torch, np.random.default_rng(4)
    nrows, ncols = 14336, 4096
    print(f"\nprobes: the pair's floor ({nrows}x{ncols}) and the dp4a rate")
    x = torch.randn(ncols, device="cuda")
    k_padded = -(-ncols // 512) * 512
    vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
    dst = torch.empty(nrows, device="cuda")
    quant, empty = b.fn("quantize_q8_1"), b.dev.get_or_load_func("launch_probe", PROBES)
    buf = torch.empty(1, device="cuda")
    quant[(k_padded // 256, 1), 256](x.data_ptr(), vy.data_ptr(), ncols, k_padded)
    for qtype in ("q4_K", "q6_K"):
        ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
        rows = Q.MMVQ_WRAPPER_ROWS[qtype]
        alone, pair = mmvq_launches(quant, b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"), rows, ws, x, vy, dst, k_padded,
                                    Q.MMVQ_WRAPPER_BLOCK[qtype])

        def empty_pair(i, s, alone=alone):
            empty[k_padded // 256, 256, s](buf.data_ptr())
            alone(i, s)

        wbytes = ws[0].numel()
        for label, f in (("MMVQ alone", alone), ("quantize_q8_1 + MMVQ", pair), ("empty kernel + MMVQ", empty_pair)):
            b.report(f"{qtype} {label}", b.time(f), wbytes)
        for mb in MMVQ_MIN_BLOCKS:  # a thread a chunk (q4_K's kernel before pairs) under a budget of mb blocks an SM
            alone, pair = mmvq_launches(quant, b.dev.get_or_load_func(f"rows_{qtype}_blocks{mb}", PROBES), rows, ws, x,
                                        vy, dst, k_padded)
            b.report(f"{qtype} MMVQ alone, {mb} blocks an SM", b.time(alone), wbytes)
            b.report(f"{qtype} quantize_q8_1 + MMVQ, {mb} blocks an SM", b.time(pair), wbytes)
        del ws
    chip = torch.cuda.get_device_properties(0)
    dp = b.dev.get_or_load_func("dp4a_probe", PROBES)
    grid, block, steps = chip.multi_processor_count * 16, 256, 4096
    out = torch.empty(grid * block, dtype=torch.int32, device="cuda")
    t = b.time(lambda i, s: dp[grid, block, s](out.data_ptr(), steps))
    rate = grid * block * steps * PROBE_CHAINS / t
    print(f"dp4a: {rate / 1e12:.2f} T/s ({rate / chip.multi_processor_count / 1e9:.1f} G/s an SM, "
          f"{chip.multi_processor_count} SMs)")
    macs = 32 * 4096 * 4096
    print(f"MMQ 4096x4096 at 32 columns: {macs // 4:,} dp4a = {macs / 4 / rate * 1e6:.2f} us at that rate "
          f"(the group sums' dp4a and the scale arithmetic come on top)")
    # the wrappers' MMQ kernel with more activation columns a block (each weight chunk loaded once for
    # all of them), q4_0 4096 x 4096 at 32 columns, against dequantize + torch.matmul f16
    n, batch = 4096, 32
    ws = b.rotated(random_blocks(rng, "q4_0", n, n))
    w16 = torch.empty((n, n), dtype=torch.float16, device="cuda")
    x = torch.randn(batch, n, device="cuda")
    x16 = x.half()
    vy = torch.empty(batch * n // 32 * 36, dtype=torch.uint8, device="cuda")
    dst = torch.empty(batch, n, device="cuda")
    quant[(n // 256, batch), 256](x.data_ptr(), vy.data_ptr(), n, n)
    deq = b.fn("dequantize_q4_0_f16")

    t_ref = b.time(dequant_matmul(torch, deq, ws, w16, x16, n * n))
    want = None
    for cols, rows in MMQ_SHAPES:
        fn = b.dev.get_or_load_func(f"cols_q4_0_{cols}x{rows}", PROBES)

        def ours(i, s, fn=fn, cols=cols, rows=rows):
            quant[(n // 256, batch), 256, s](x.data_ptr(), vy.data_ptr(), n, n)
            fn[(-(-n // rows), batch // cols), (32, MMQ_BLOCK_Y), s](ws[i % len(ws)].data_ptr(), vy.data_ptr(),
                                                                        dst.data_ptr(), n, n, n, n)

        b.report(f"q4_0 batch {batch}, {cols} columns x {rows} rows a block", b.time(ours), ws[0].numel(), t_ref,
                 "dequant+matmul f16")
        ours(0, None)
        torch.cuda.synchronize()
        got = dst.cpu().numpy()
        want = got if want is None else want
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), "the shapes disagree"



def time_variant(b: Bench, label: str, pair, alone, wbytes: int, dst, want):
    """One MMVQ variant: the pair and the kernel alone timed and reported, then its output checked
    against the first variant's (``want``, None for the first); returns the reference."""
    t_pair, t_alone = b.time(pair), b.time(alone)
    b.report(label, t_pair, wbytes)
    print(f"{'':48} MMVQ alone {t_alone * 1e6:6.2f} us = {100 * wbytes / t_alone / b.copy_bw:3.0f}% copy")
    dst.fill_(float("nan"))
    pair(0, None)
    b.torch.cuda.synchronize()
    got = dst.cpu().numpy()
    want = got if want is None else want
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), f"{label} disagrees with the wrappers'"
    return want


def pairs(b: Bench) -> None:
    """The batch-1 pair (quantize_q8_1 + MMVQ) of the pair formats (q4_K, q5_K, q6_K): the wrappers'
    kernel against ``mul_mat_vec_pairs`` (a thread two chunks from one load of their shared words)
    at PAIR_SHAPES, same buffers, outputs compared; 14336 x 4096 and 4096 x 4096."""
    torch, rng = b.torch, np.random.default_rng(6)
    print("\npairs: the wrappers' batch-1 MMVQ against mul_mat_vec_pairs (weight bytes; pair, then MMVQ alone)")
    quant = b.fn("quantize_q8_1")
    for nrows, ncols in ((14336, 4096), (4096, 4096)):
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        for qtype in PAIR_FORMATS:
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            wbytes = ws[0].numel()
            variants = {"wrappers'": (b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"), Q.MMVQ_WRAPPER_ROWS[qtype],
                                      Q.MMVQ_WRAPPER_BLOCK[qtype])}
            for rows, block in PAIR_SHAPES:
                variants[f"pairs {rows} rows ({block[0]}, {block[1]})"] = (
                    b.dev.get_or_load_func(f"pairs_{qtype}_{rows}", PAIR_PROBES), rows, block)
            want = None
            for label, (fn, rows, block) in variants.items():
                alone, pair = mmvq_launches(quant, fn, rows, ws, x, vy, dst, k_padded, block)
                want = time_variant(b, f"{qtype} {nrows}x{ncols} {label}", pair, alone, wbytes, dst, want)
            del ws


# ---- batch-1 MMVQ probes (issue 26: MMVQ alone toward torch.mv's share of copy) ---------------------------
@pk.func
def q8_1_unit(vy: pk.ConstPtr[pk.u8], first_chunk: pk.usize, c_lo: pk.u32, c_hi: pk.u32, yw: pk.Ptr[pk.i32],
              d8: pk.Ptr[pk.f32], sums: pk.Ptr[pk.i32], *, QT, at):
    """The q8_1 blocks a unit of ``mul_mat_vec_warps`` meets: chunk ``first_chunk + c_lo`` (and, for a
    pair format, ``first_chunk + c_hi``): quants to ``yw[16 at ..]``, scales to ``d8[2 at ..]``, group
    sums to ``sums[4 at ..]``."""
    for h in pk.static_range(2 if QT.pair is not None else 1):
        yb = vy + (first_chunk + pk.usize(c_lo if h == 0 else c_hi)) * Q.Q8_1_BYTES
        y = pk.bitcast(yb + 4, pk.ConstPtr[pk.i32])
        for k in pk.static_range(8):
            yw[16 * at + 8 * h + k] = y[k]
        d8[2 * at + h] = Q.half_at(yb, 0)
        Q.group_sums(y, sums, Q=QT, at=4 * at + 2 * h)


@pk.func
def unit_chunks(u: pk.u32, *, QT) -> tuple[pk.usize, pk.u32, pk.u32]:
    """Unit ``u`` of a row (a chunk; for a pair format a pair of chunks): the row's first chunk of its
    block and its block-relative chunks (low, high)."""
    if QT.pair is not None:
        per_block: pk.u32 = QT.qk // (2 * Q.Q8_1_QK)
        pb = u % per_block
        c_lo = pb // QT.pair_stride * (2 * QT.pair_stride) + pb % QT.pair_stride
        return pk.usize(u // per_block) * (QT.qk // Q.Q8_1_QK), c_lo, c_lo + QT.pair_stride
    else:
        per_block_c: pk.u32 = QT.qk // Q.Q8_1_QK
        return pk.usize(u // per_block_c) * per_block_c, u % per_block_c, u % per_block_c


@pk.func
def load_unit(b: pk.ConstPtr[pk.u8], u: pk.u32, c_lo: pk.u32, c_hi: pk.u32, words: pk.Ptr[pk.u32],
              params: pk.Ptr[pk.f32], *, QT):
    """Weight unit ``u`` of the block at ``b`` (block-relative chunks ``c_lo``, ``c_hi``): its quants
    to ``words[0 .. 8)`` (a pair format's second chunk to ``words[8 .. 16)``), its chunks' scales and
    mins to ``params[0 .. 4)`` (and ``params[4 .. 8)``)."""
    if QT.pair is not None:
        QT.pair(b, u % (QT.qk // (2 * Q.Q8_1_QK)), words, words + 8)
        Q.chunk_params(b, c_lo, params, Q=QT)
        Q.chunk_params(b, c_hi, params + 4, Q=QT)
    else:
        Q.load_chunk(b, c_lo, words, params, Q=QT)


@pk.func
def dot_unit(words: pk.Ptr[pk.u32], params: pk.Ptr[pk.f32], yw: pk.Ptr[pk.i32], d8: pk.Ptr[pk.f32],
             sums: pk.Ptr[pk.i32], *, QT, at) -> pk.f32:
    """A loaded unit (``load_unit``) times its q8_1 blocks (``q8_1_unit`` at ``at``)."""
    total = Q.dot_words(words, params, yw, d8[2 * at], sums, Q=QT, y_at=16 * at, sums_at=4 * at)
    if QT.pair is not None:
        total += Q.dot_words(words + 8, params + 4, yw, d8[2 * at + 1], sums, Q=QT, y_at=16 * at + 8,
                             sums_at=4 * at + 2)
    return total


@pk.func
def warps_rows(vx: pk.ConstPtr[pk.u8], vy: pk.ConstPtr[pk.u8], dst: pk.Ptr[pk.f32], units: pk.u32, row_bytes: pk.usize,
               nrows: pk.u32, yw: pk.Ptr[pk.i32], d8: pk.Ptr[pk.f32], sums: pk.Ptr[pk.i32], *, QT, rows, unroll, held):
    """The row groups of this wave (every (waves of the grid)-th group of ``rows`` rows): each lane
    takes units ``lane + wave_size k`` of every row of the group, ``unroll`` at a time, every load of
    a step (all its units of all its rows) before any product, so that they are in flight together; a
    wave sum a row, no barrier. ``held``: the row is one step of units and ``yw``/``d8``/``sums``
    already hold its q8_1 blocks."""
    lane = pk.lane_id()
    waves = Q.flat_threads() // pk.wave_size
    groups = (nrows + rows - 1) // rows
    last = max(nrows, 1) - 1
    span = 16 if QT.pair is not None else 8    # words of a unit
    acc = pk.local.array(rows, pk.f32)
    words = pk.local.array((16 if QT.pair is not None else 8) * unroll * rows, pk.u32)
    params = pk.local.array((8 if QT.pair is not None else 4) * unroll * rows, pk.f32)
    for g in range(pk.block_idx.x * waves + Q.flat_thread() // pk.wave_size, groups, pk.grid_dim.x * waves):
        for r in pk.static_range(rows):
            acc[r] = 0.0
        for u0 in range(lane, units if not held else lane + 1, pk.wave_size * unroll):
            for k in pk.static_range(unroll):
                uc = min(u0 + k * pk.wave_size, units - 1)  # a unit past the row re-reads the last, dropped
                first_chunk, c_lo, c_hi = unit_chunks(uc, QT=QT)
                if not held:
                    q8_1_unit(vy, first_chunk, c_lo, c_hi, yw, d8, sums, QT=QT, at=k)
                for r in pk.static_range(rows):
                    row = min(g * rows + r, last)
                    b = vx + pk.usize(row) * row_bytes + (first_chunk // (QT.qk // Q.Q8_1_QK)) * QT.nbytes
                    load_unit(b, uc, c_lo, c_hi, words + span * (k * rows + r), params + span // 2 * (k * rows + r),
                              QT=QT)
            for k in pk.static_range(unroll):
                for r in pk.static_range(rows):
                    acc[r] += pk.select(u0 + k * pk.wave_size < units,
                                        dot_unit(words + span * (k * rows + r), params + span // 2 * (k * rows + r),
                                                 yw, d8, sums, QT=QT, at=k), pk.f32(0))
        for r in pk.static_range(rows):
            total = pk.wave.sum(acc[r])
            if lane == r and g * rows + r < nrows:
                dst[pk.usize(g * rows + r)] = total


@pk.kernel(max_block_size=Q.MAX_BLOCK)
def mul_mat_vec_warps(vx: pk.ConstPtr[pk.u8], vy: pk.ConstPtr[pk.u8], dst: pk.Ptr[pk.f32], ncols_x: pk.i32,
                      nrows_x: pk.i32, nrows_y: pk.i32, nrows_dst: pk.i32, *, QT, rows, unroll):
    """MMVQ at one column, a wave per group of ``rows`` rows, the grid's waves striding over the
    groups (any grid; ``--only warps`` times the blocks the SMs hold at once, which leaves no tail
    of blocks): a lane takes every wave_size-th unit of a row (a chunk; a pair of chunks for the pair
    formats, ``QT.pair``), ``unroll`` units at once, and a wave sum a row. Where a row is at most
    ``wave_size * unroll`` units the lane's q8_1 blocks are read once, before the rows, and held in
    registers; otherwise with each step. Blocks must be whole waves. ``nrows_y`` and ``nrows_dst``
    (one column) are unused."""
    unit_elems: pk.u32 = Q.Q8_1_QK * (2 if QT.pair is not None else 1)
    units = pk.u32(max(ncols_x, 0)) // unit_elems
    row_bytes = pk.usize(pk.u32(max(ncols_x, 0)) // QT.qk) * QT.nbytes
    nrows = pk.u32(max(nrows_x, 0))
    yw = pk.local.array(16 * unroll, pk.i32)
    d8 = pk.local.array(2 * unroll, pk.f32)
    sums = pk.local.array(4 * unroll, pk.i32)
    if units <= pk.wave_size * unroll:
        lane = pk.lane_id()
        for k in pk.static_range(unroll):
            first_chunk, c_lo, c_hi = unit_chunks(min(lane + k * pk.wave_size, max(units, 1) - 1), QT=QT)
            q8_1_unit(vy, first_chunk, c_lo, c_hi, yw, d8, sums, QT=QT, at=k)
        warps_rows(vx, vy, dst, units, row_bytes, nrows, yw, d8, sums, QT=QT, rows=rows, unroll=unroll, held=True)
    else:
        warps_rows(vx, vy, dst, units, row_bytes, nrows, yw, d8, sums, QT=QT, rows=rows, unroll=unroll,
                   held=False)



#: units a lane of ``mul_mat_vec_warps`` takes at once (its ``unroll``): a 4096-column row is then one
#: step (128 chunks; 64 pairs for the pair formats) on a wave of 32
WARPS_UNROLL = {q.name: 2 if q.pair is not None else 4 for q in Q.MATMUL_TYPES}
#: ``mul_mat_vec_warps`` (a wave per group of rows, the grid's waves striding over the groups) as
#: ``--only warps`` times it: rows a wave, and the grid: "resident" as many blocks of WARPS_BLOCK as
#: the SMs hold at once (the driver's occupancy of the kernel), None a wave per row group (one pass,
#: the block scheduler balancing)
WARPS_ROWS = (1,)
WARPS_GRIDS = ("resident",)
WARPS_BLOCK = (32, 8)
WARPS_FORMATS = ("q4_0", "q4_K", "q6_K", "q8_0")
WARPS_PROBES = pk.Module("quantized_warps").add(
    *(mul_mat_vec_warps.instance(f"warps_{q}_{r}", QT=Q.QTYPES[q], rows=r, unroll=WARPS_UNROLL[q])
      for q in WARPS_FORMATS for r in WARPS_ROWS))


@pk.kernel(max_block_size=Q.MAX_BLOCK)
def mmvq_stride(vx: pk.ConstPtr[pk.u8], vy: pk.ConstPtr[pk.u8], dst: pk.Ptr[pk.f32], ncols_x: pk.i32, nrows_x: pk.i32,
                nrows_y: pk.i32, nrows_dst: pk.i32, *, QT, rows):
    """The wrappers' batch-1 MMVQ (``mul_mat_vec_q8_1`` at one column; ``mul_mat_vec_pairs`` for the
    pair formats) with the grid's blocks striding over the groups of ``rows`` rows: a grid of the
    blocks the SMs hold at once leaves no tail of blocks (a barrier between groups frees the sums'
    shared memory)."""
    sm = pk.shared.array(Q.SHARED_SUMS[rows], pk.f32)
    acc = pk.local.array(rows, pk.f32)
    t = Q.flat_thread()
    nt = Q.flat_threads()
    unit: pk.u32 = Q.Q8_1_QK * (2 if QT.pair is not None else 1)
    units = pk.u32(max(ncols_x, 0)) // unit
    per_block: pk.u32 = QT.qk // unit
    row_bytes = pk.usize(units // per_block) * QT.nbytes
    nrows = pk.u32(max(nrows_x, 0))
    last = max(nrows, 1) - 1
    words = pk.local.array(16, pk.u32)
    params = pk.local.array(8, pk.f32)
    yw = pk.local.array(16, pk.i32)
    d8 = pk.local.array(2, pk.f32)
    sums = pk.local.array(4, pk.i32)
    for g in range(pk.block_idx.x, (nrows + rows - 1) // rows, pk.grid_dim.x):
        for r in pk.static_range(rows):
            acc[r] = 0.0
        first = g * rows
        for u in range(t, units, nt):
            first_chunk, c_lo, c_hi = unit_chunks(u, QT=QT)
            q8_1_unit(vy, first_chunk, c_lo, c_hi, yw, d8, sums, QT=QT, at=0)
            for r in pk.static_range(rows):
                b = vx + pk.usize(min(first + r, last)) * row_bytes + pk.usize(u // per_block) * QT.nbytes
                load_unit(b, u, c_lo, c_hi, words, params, QT=QT)
                acc[r] += dot_unit(words, params, yw, d8, sums, QT=QT, at=0)
        total = Q.block_sums(acc, sm, t, nt, count=rows)
        if t < rows and first + t < nrows:
            dst[pk.usize(first + t)] = total
        pk.syncthreads()


#: the grid-stride MMVQ probe (``mmvq_stride``) at the wrappers' rows a block, under their block
STRIDE_PROBES = pk.Module("quantized_stride").add(
    *(mmvq_stride.instance(f"stride_{q}", QT=Q.QTYPES[q], rows=Q.MMVQ_WRAPPER_ROWS[q]) for q in ("q4_0", "q4_K", "q6_K",
                                                                                              "q8_0")))


#: the planar-activation kernel at one column (``mul_mat_planar``, N = 1: each activation load coalesced
#: over the warp, where a q8_1 block's words sit 36 bytes from the neighbour's) at 2 and 4 rows a block
PLANAR1_PROBES = pk.Module("quantized_planar1").add(
    *(Q.mul_mat_planar.instance(f"planar1_{q}_{r}", Q=Q.QTYPES[q], N=1, rows=r)
      for q in ("q4_0", "q4_K", "q6_K", "q8_0") for r in (2, 4)))


def read_sizes(b: Bench) -> None:
    """What kernels moving as many bytes as a batch-1 MMVQ reads reach (the ceiling at that size, not
    at the copy's 0.5-1 GB): torch.mv in f16 with as many weight bytes (rows of 4096), torch.sum of
    the bytes as f32, a device copy of them and of half of them (bytes read + written: the half moves
    as many), sources and destinations rotated as the weights everywhere here. Compare with ``--only
    mmvq``'s MMVQ alone."""
    torch = b.torch
    print("\nread_sizes: reads of the MMVQ formats' byte counts at 14336 x 4096 (% of the copy ceiling above)")
    nrows, ncols = 14336, 4096
    for label, nbytes in (("q4_0/q4_K", nrows * ncols // 32 * 18), ("q6_K", nrows * ncols // 256 * 210),
                          ("q8_0", nrows * ncols // 32 * 34), ("f16", nrows * ncols * 2)):
        rows = nbytes // (2 * ncols)
        ws = b.rotated(np.zeros(rows * ncols, np.float16))
        for w in ws:
            w.normal_()
        mats = [w.view(rows, ncols) for w in ws]
        x16 = torch.randn(ncols, device="cuda").half()
        wbytes = ws[0].numel() * 2
        t_mv = b.time(lambda i, s: torch.mv(mats[i % len(mats)], x16))
        b.report(f"{label} bytes ({wbytes / 1e6:.1f} MB): torch.mv f16 {rows}x{ncols}", t_mv, wbytes)
        t_sum = b.time(lambda i, s: ws[i % len(ws)].view(torch.float32).sum())
        b.report(f"{label} bytes: torch.sum as f32", t_sum, wbytes)
        # the destinations rotate too: one destination of <= 50 MB would stay in L2, its writes never
        # waiting for DRAM (measured: a half copy of the q4_0 bytes at 109% of the ceiling)
        outs = [torch.empty_like(w) for w in ws]
        t_copy = b.time(lambda i, s: outs[i % len(outs)].copy_(ws[i % len(ws)]))
        b.report(f"{label} bytes: copy (read + written)", t_copy, 2 * wbytes)
        half = ws[0].numel() // 2
        t_half = b.time(lambda i, s: outs[i % len(outs)][:half].copy_(ws[i % len(ws)][:half]))
        b.report(f"{label} bytes: copy of half (as many moved)", t_half, 2 * half * 2)
        del ws, mats, outs


def blocks(b: Bench) -> None:
    """The wrappers' batch-1 MMVQ (``mul_mat_vec_rows_{q}_q8_1``, their rows a block) under blocks of
    (32, 2), (32, 4) and (32, 8), same buffers, outputs compared: rows of 4096 and 14336 columns give
    a thread one trip or several, the last part idle."""
    torch, rng = b.torch, np.random.default_rng(8)
    print("\nblocks: the wrappers' batch-1 MMVQ under (32, y) (weight bytes; pair, then MMVQ alone)")
    quant = b.fn("quantize_q8_1")
    for nrows, ncols in ((4096, 14336), (14336, 4096)):
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        for qtype in ("q4_0", "q4_K", "q5_K", "q6_K", "q8_0"):
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            wbytes = ws[0].numel()
            fn, rows = b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"), Q.MMVQ_WRAPPER_ROWS[qtype]
            want = None
            for by in (2, 4, 8):
                alone, pair = mmvq_launches(quant, fn, rows, ws, x, vy, dst, k_padded, (32, by))
                t_pair, t_alone = b.time(pair), b.time(alone)
                mark = " (wrappers')" if (32, by) == Q.mmvq_wrapper_block(qtype, ncols) else ""
                b.report(f"{qtype} {nrows}x{ncols} (32, {by}){mark}", t_pair, wbytes)
                print(f"{'':48} MMVQ alone {t_alone * 1e6:6.2f} us = {100 * wbytes / t_alone / b.copy_bw:3.0f}% copy")
                dst.fill_(float("nan"))
                pair(0, None)
                torch.cuda.synchronize()
                got = dst.cpu().numpy()
                want = got if want is None else want
                assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), f"(32, {by}) disagrees"
            del ws


def resident_blocks(fn, block) -> int:
    """Blocks of ``block`` threads of ``fn`` an SM holds at once (the driver's occupancy calculator)."""
    from cuda.bindings import driver
    err, n = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn.handle.handle, block[0] * block[1], 0)
    assert int(err) == 0, err
    return n


def warps(b: Bench, formats=WARPS_FORMATS) -> None:
    """The batch-1 pair and MMVQ alone: the wrappers' kernel against ``mul_mat_vec_warps`` at
    WARPS_ROWS x WARPS_GRIDS, same buffers, outputs compared; 14336 x 4096, 4096 x 4096 and 4096 x
    14336 (rows of more units than a wave holds)."""
    torch, rng = b.torch, np.random.default_rng(7)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    waves_a_block = WARPS_BLOCK[0] * WARPS_BLOCK[1] // 32
    print(f"\nwarps: the wrappers' batch-1 MMVQ against mul_mat_vec_warps ({sms} SMs; weight bytes; pair, then"
          " MMVQ alone)")
    quant, pquant = b.fn("quantize_q8_1"), b.fn("quantize_q8_1_planar")
    for nrows, ncols in ((14336, 4096), (4096, 4096), (4096, 14336)):
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        vp = torch.empty(k_padded // 32 * Q.PLANAR_BYTES, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        for qtype in formats:
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            wbytes = ws[0].numel()
            variants = {"wrappers'": (b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"),
                                      -(-nrows // Q.MMVQ_WRAPPER_ROWS[qtype]), Q.mmvq_wrapper_block(qtype, ncols))}
            stride = b.dev.get_or_load_func(f"stride_{qtype}", STRIDE_PROBES)
            block = Q.mmvq_wrapper_block(qtype, ncols)
            groups = -(-nrows // Q.MMVQ_WRAPPER_ROWS[qtype])
            variants["wrappers' stride, resident grid"] = (stride, min(groups, sms * resident_blocks(stride, block)),
                                                          block)
            if block == (32, 4):
                variants["wrappers' under (32, 2)"] = (variants["wrappers'"][0], groups, (32, 2))
            for rows in WARPS_ROWS:
                fn = b.dev.get_or_load_func(f"warps_{qtype}_{rows}", WARPS_PROBES)
                for per_sm in WARPS_GRIDS:
                    groups = -(-nrows // rows)
                    one_pass = -(-groups // waves_a_block)
                    grid = one_pass if per_sm is None else min(one_pass, sms * resident_blocks(fn, WARPS_BLOCK))
                    variants[f"warps {rows} rows, grid {grid}"] = (fn, grid, WARPS_BLOCK)
            for rows in (2, 4):
                for block in ((32, 4), (32, 2)):
                    variants[f"planar N=1 {rows} rows ({block[0]}, {block[1]})"] = (
                        b.dev.get_or_load_func(f"planar1_{qtype}_{rows}", PLANAR1_PROBES), -(-nrows // rows), block)
            want = None
            for label, (fn, grid, block) in variants.items():
                planar = label.startswith("planar")

                def alone(i, s, fn=fn, grid=grid, block=block, planar=planar):
                    if planar:
                        fn[grid, block, s](ws[i % len(ws)].data_ptr(), vp.data_ptr(), dst.data_ptr(), ncols, nrows, 1,
                                           k_padded, nrows)
                    else:
                        fn[grid, block, s](ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows,
                                           k_padded, nrows)

                def pair(i, s, alone=alone, planar=planar):
                    if planar:
                        pquant[(k_padded // 256, 1), 256, s](x.data_ptr(), vp.data_ptr(), ncols, k_padded)
                    else:
                        quant[(k_padded // 256, 1), 256, s](x.data_ptr(), vy.data_ptr(), ncols, k_padded)
                    alone(i, s)
                want = time_variant(b, f"{qtype} {nrows}x{ncols} {label}", pair, alone, wbytes, dst, want)
            del ws


def planar(b: Bench) -> None:
    """The wrappers' MMQ (``quantize_q8_1_planar`` + ``mul_mat_planar_{q}``: each activation load
    coalesced over the warp, the group sums precomputed) against their earlier ``mul_mat_cols``
    (q8_1 blocks 36 bytes apart) and dequantize + torch.matmul f16, 4096 x 4096 at 16, 32, 64 and 128
    activation columns; the planar kernel also at PLANAR_SHAPES and under (32, 1) and (32, 4);
    outputs compared with ``mul_mat_cols``'."""
    torch, rng = b.torch, np.random.default_rng(7)
    n = 4096
    print(f"\nplanar MMQ {n}x{n} (quantize + MMQ) against mul_mat_cols and dequantize + torch.matmul f16")
    quant, pquant = b.fn("quantize_q8_1"), b.fn("quantize_q8_1_planar")
    w16 = torch.empty((n, n), dtype=torch.float16, device="cuda")
    for qtype in PLANAR_FORMATS:
        ws = b.rotated(random_blocks(rng, qtype, n, n))
        deq, cols_k = b.fn(f"dequantize_{qtype}_f16"), b.dev.get_or_load_func(f"mul_mat_cols_{qtype}", EARLIER_MMQ)
        for batch in (16, 32, 64, 128):
            x = torch.randn(batch, n, device="cuda")
            x16 = x.half()
            vy = torch.empty(batch * n // 32 * 36, dtype=torch.uint8, device="cuda")
            vp = torch.empty(batch * n // 32 * Q.PLANAR_BYTES, dtype=torch.uint8, device="cuda")
            dst = torch.empty(batch, n, device="cuda")
            t_ref = b.time(dequant_matmul(torch, deq, ws, w16, x16, n * n))

            def cols(i, s, x=x, vy=vy, dst=dst, batch=batch, ws=ws):
                quant[(n // 256, batch), 256, s](x.data_ptr(), vy.data_ptr(), n, n)
                cols_k[(n // MMQ_ROWS_A_BLOCK, batch // MMQ_COLUMNS_A_BLOCK), (32, MMQ_BLOCK_Y), s](
                    ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), n, n, n, n)

            shapes = [("wrappers'", b.fn(f"mul_mat_planar_{qtype}"), Q.MMQ_PLANAR_COLUMNS, Q.MMQ_PLANAR_ROWS, by)
                      for by in (Q.MMQ_PLANAR_BLOCK_Y, 1, 4)]
            shapes += [("probe", b.dev.get_or_load_func(f"planar_{qtype}_{cn}x{r}", PLANAR_PROBES), cn, r,
                        Q.MMQ_PLANAR_BLOCK_Y) for cn, r in PLANAR_SHAPES]
            variants = {"mul_mat_cols (wrappers' before)": cols}
            for what, fn, cn, rows, by in shapes:
                def ours(i, s, fn=fn, cn=cn, rows=rows, by=by, x=x, vp=vp, dst=dst, batch=batch, ws=ws):
                    pquant[(n // 256, batch), 256, s](x.data_ptr(), vp.data_ptr(), n, n)
                    fn[(n // rows, -(-batch // cn)), (32, by), s](ws[i % len(ws)].data_ptr(), vp.data_ptr(),
                                                                 dst.data_ptr(), n, n, batch, n, n)
                variants[f"planar {what} {cn} cols x {rows} rows (32, {by})"] = ours
            want = None
            for label, f in variants.items():
                b.report(f"{qtype} batch {batch} {label}", b.time(f), ws[0].numel(), t_ref, "dequant+matmul f16")
                dst.fill_(float("nan"))
                f(0, None)
                torch.cuda.synchronize()
                got = dst.cpu().numpy()
                want = got if want is None else want
                assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), f"{label} disagrees with mul_mat_cols"
            t_pq = b.time(lambda i, s, x=x, vp=vp, batch=batch: pquant[(n // 256, batch), 256, s](
                x.data_ptr(), vp.data_ptr(), n, n))
            t_q = b.time(lambda i, s, x=x, vy=vy, batch=batch: quant[(n // 256, batch), 256, s](
                x.data_ptr(), vy.data_ptr(), n, n))
            print(f"{'':48} quantize_q8_1_planar alone {t_pq * 1e6:6.2f} us, quantize_q8_1 {t_q * 1e6:6.2f} us")
        del ws


def tile(b: Bench) -> None:
    """The tiled MMQ probe (``mmq_tile_probe_{q}``: both operands staged in shared memory) against
    the wrappers' ``mul_mat_cols`` and dequantize + torch.matmul f16, 4096 x 4096, each with the
    activations' quantize_q8_1; "alone" is the MMQ kernel by itself. The two kernels' outputs are
    compared (the same sums in another order)."""
    torch, rng = b.torch, np.random.default_rng(5)
    n = 4096
    print(f"\ntiled MMQ probe {n}x{n} (quantize_q8_1 + MMQ) against mul_mat_cols and dequantize + torch.matmul f16")
    quant = b.fn("quantize_q8_1")
    w16 = torch.empty((n, n), dtype=torch.float16, device="cuda")
    for qtype in ("q4_0", "q4_K", "q6_K", "q8_0"):
        ws = b.rotated(random_blocks(rng, qtype, n, n))
        deq, cols_k = b.fn(f"dequantize_{qtype}_f16"), b.dev.get_or_load_func(f"mul_mat_cols_{qtype}", EARLIER_MMQ)
        tile_k = b.dev.get_or_load_func(f"mmq_tile_probe_{qtype}", TILE_PROBES)
        for batch in (16, 32, 64):
            x = torch.randn(batch, n, device="cuda")
            x16 = x.half()
            vy = torch.empty(batch * n // 32 * 36, dtype=torch.uint8, device="cuda")
            dst = torch.empty(batch, n, device="cuda")

            reference = dequant_matmul(torch, deq, ws, w16, x16, n * n)

            def cols(s, w, vy=vy, dst=dst, batch=batch):
                cols_k[(n // MMQ_ROWS_A_BLOCK, batch // MMQ_COLUMNS_A_BLOCK), (32, MMQ_BLOCK_Y), s](
                    w.data_ptr(), vy.data_ptr(), dst.data_ptr(), n, n, n, n)

            def tiled(s, w, vy=vy, dst=dst, batch=batch):
                tile_k[(n // TILE_ROWS, -(-batch // TILE_COLS)), (32, TILE_THREADS // 32), s](
                    w.data_ptr(), vy.data_ptr(), dst.data_ptr(), n, n, batch, n, n)

            t_ref = b.time(reference)
            outs = []
            for label, launch in (("mul_mat_cols", cols), ("tile probe", tiled)):
                def pair(i, s, launch=launch, x=x, vy=vy, batch=batch, ws=ws):
                    quant[(n // 256, batch), 256, s](x.data_ptr(), vy.data_ptr(), n, n)
                    launch(s, ws[i % len(ws)])

                t_pair = b.time(pair)
                t_alone = b.time(lambda i, s, launch=launch, ws=ws: launch(s, ws[i % len(ws)]))
                b.report(f"{qtype} batch {batch} {label}", t_pair, ws[0].numel(), t_ref, "dequant+matmul f16")
                print(f"{'':48} alone {t_alone * 1e6:8.2f} us")
                dst.fill_(float("nan"))
                pair(0, None)
                torch.cuda.synchronize()
                outs.append(dst.cpu().numpy())
            assert np.abs(outs[1] - outs[0]).max() <= 1e-4 * np.abs(outs[0]).max(), \
                "tile probe and mul_mat_cols disagree"
        del ws


def batch1_cases(b: Bench, rng):
    """The batch-1 pair's buffers at 14336 x 4096, then 4096 x 4096, a format at a time (q4_0, q4_K,
    q6_K, q8_0): (nrows, ncols, x, k_padded, vy, dst, qtype, the rotated weights; the caller drops them)."""
    torch = b.torch
    for nrows, ncols in ((14336, 4096), (4096, 4096)):
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        for qtype in ("q4_0", "q4_K", "q6_K", "q8_0"):
            yield nrows, ncols, x, k_padded, vy, dst, qtype, b.rotated(random_blocks(rng, qtype, nrows, ncols))


@pk.kernel
def overlap_producer(out: pk.Ptr[pk.u32], n: pk.u32, seed: pk.u32, zero: pk.u32):
    """``out[i]`` = ``seed`` after a slow loop (a hash times ``zero``, 0 at run time: the compiler
    cannot drop the loop), ``launch_dependents`` first: a programmatic dependent may start while this
    runs."""
    pk.launch_dependents()
    i = pk.block_idx.x * pk.block_dim.x + pk.thread_idx.x
    h = i
    for _ in range(4000):
        h = (h ^ (h >> pk.u32(13))) * pk.u32(1664525) + pk.u32(1013904223)
    if i < n:
        out[i] = seed + h * zero


@pk.kernel
def overlap_reader(src: pk.ConstPtr[pk.u32], seen: pk.Ptr[pk.u32], n: pk.u32, seed: pk.u32, *, wait):
    """Counts the elements of ``src`` that are not yet ``seed`` when read, with or without the wait:
    without it, a non-zero count shows that the programmatic launch really started early."""
    i = pk.block_idx.x * pk.block_dim.x + pk.thread_idx.x
    if wait:
        pk.grid_dependency_wait()
    if i < n and src[i] != seed:
        pk.atomic.add(seen, 0, pk.u32(1))


OVERLAP_PROBES = pk.Module("quantized_overlap").add(
    overlap_producer.instance("overlap_producer"), overlap_reader.instance("overlap_reader_wait", wait=True),
    overlap_reader.instance("overlap_reader_nowait", wait=False))


def pdl(b: Bench) -> None:
    """The batch-1 pair (the wrappers' launch) launched plainly and with programmatic dependent launch
    (the MMVQ's start overlapping the quantize's end; ``quantized_api.matmul``'s launch on sm_90):
    graph replays and host loops, outputs compared bit for bit. First a probe that the overlap is
    real: a reader launched programmatically without the wait sees the producer's output unwritten."""
    torch, rng = b.torch, np.random.default_rng(5)
    n = 1 << 16
    buf = torch.zeros(n, dtype=torch.int32, device="cuda")
    seen = torch.zeros(1, dtype=torch.int32, device="cuda")
    prod = b.dev.get_or_load_func("overlap_producer", OVERLAP_PROBES)
    print("\nprogrammatic dependent launch: stale elements a reader saw over 20 producer -> reader pairs")
    for wait in (True, False):
        rd = b.dev.get_or_load_func(f"overlap_reader_{'wait' if wait else 'nowait'}", OVERLAP_PROBES)
        for programmatic in (False, True):
            seen.zero_()
            for seed in range(1, 21):
                prod.launch(n // 256, 256, buf.data_ptr(), n, seed, 0)
                rd.launch(n // 256, 256, buf.data_ptr(), seen.data_ptr(), n, seed, programmatic=programmatic)
            torch.cuda.synchronize()
            print(f"{'':48} wait {wait!s:5} programmatic {programmatic!s:5}: {int(seen.item())} stale")
    print("\nq8_1 + MMVQ pair, batch 1, the wrappers' launch: plain / programmatic (GB/s of weight bytes)")
    quant = b.fn("quantize_q8_1")
    for nrows, ncols, x, k_padded, vy, dst, qtype, ws in batch1_cases(b, rng):
        wbytes = ws[0].numel()
        fn, rows = b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"), Q.MMVQ_WRAPPER_ROWS[qtype]
        block = Q.MMVQ_WRAPPER_BLOCK[qtype]

        def pair(i, s, programmatic, fn=fn, rows=rows, block=block, ws=ws):
            quant.launch((k_padded // 256, 1), 256, x.data_ptr(), vy.data_ptr(), ncols, k_padded, stream=s)
            fn.launch(-(-nrows // rows), block, ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(),
                      ncols, nrows, k_padded, nrows, stream=s, programmatic=programmatic)

        outs = []
        for programmatic in (False, True):
            dst.fill_(float("nan"))
            pair(0, None, programmatic)
            torch.cuda.synchronize()
            outs.append(dst.cpu().numpy().copy())
        assert np.array_equal(outs[0], outs[1]), f"{qtype}: programmatic pair differs"
        times = {False: [], True: []}
        for _ in range(2):  # alternated, so drift shows as a spread rather than a gain
            for programmatic in (False, True):
                times[programmatic].append(b.time(lambda i, s, p=programmatic: pair(i, s, p)))
        hosts = {p: loop_time(torch, lambda i, s, p=p: pair(i, s, p), b.iters) for p in (False, True)}
        for programmatic, label in ((False, "plain"), (True, "programmatic")):
            t = min(times[programmatic])
            b.report(f"{qtype} {nrows}x{ncols} {label}", t, wbytes)
            print(f"{'':48} runs {' / '.join(f'{v * 1e6:.2f}' for v in times[programmatic])} us;"
                  f" host loop {hosts[programmatic] * 1e6:6.2f} us a pair")
        print(f"{'':48} programmatic at {min(times[False]) / min(times[True]):.3f}x the plain pair's speed")
        del ws


@pk.kernel
def read_floor(w: pk.ConstPtr[pk.u32], flag: pk.Ptr[pk.u32], words: pk.usize, per_block: pk.usize, *, WAIT):
    """The simplest kernel of the batch-1 MMVQ's shape: block b reads its rows' ``per_block`` words
    (the weight rows are adjacent) in 16-byte tiles spread over the block's threads and folds them
    into nothing (``flag`` is written only if a thread's fold hits a constant): no activations, no
    products, no reduction. ``WAIT``: it waits for the kernel before as the wrappers' MMVQ does."""
    if WAIT:
        pk.grid_dependency_wait()
    nt = pk.usize(pk.block_dim.x * pk.block_dim.y)
    t = pk.usize(pk.thread_idx.y * pk.block_dim.x + pk.thread_idx.x)
    lo = pk.usize(pk.block_idx.x) * per_block
    mine = w + lo
    acc = pk.u32(0)
    for i in pk.parallel_range(pk.usize(0), min(per_block, words - lo), t, nt):
        acc ^= mine[i]
    if acc == pk.u32(0x9E3779B9):
        flag[0] = acc


FLOOR_PROBES = pk.Module("quantized_floor").add(read_floor.instance("read_floor", WAIT=False),
                                                read_floor.instance("read_floor_wait", WAIT=True))


def floor(b: Bench) -> None:
    """What the batch-1 pair's shape allows at all: ``read_floor`` (the wrappers' MMVQ grid and block,
    reading the same weight bytes and nothing else) alone and after ``quantize_q8_1`` (plain, and
    programmatic with the wait, as the wrappers launch the pair), beside the wrappers' pair itself
    (programmatic): % of copy counting the weight bytes, as the issue's target does."""
    torch, rng = b.torch, np.random.default_rng(6)
    quant = b.fn("quantize_q8_1")
    probe, probe_wait = (b.dev.get_or_load_func(n, FLOOR_PROBES) for n in ("read_floor", "read_floor_wait"))
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    print("\nthe pair's floor: read_floor (the MMVQ's grid, the weight bytes only) alone and after quantize_q8_1")
    for nrows, ncols, x, k_padded, vy, dst, qtype, ws in batch1_cases(b, rng):
        wbytes = ws[0].numel()
        rows, block = Q.MMVQ_WRAPPER_ROWS[qtype], Q.mmvq_wrapper_block(qtype, ncols)
        grid, words, per_block = -(-nrows // rows), wbytes // 4, rows * (wbytes // 4 // nrows)
        fn = b.fn(f"mul_mat_vec_rows_{qtype}_q8_1")

        def quantize(s):
            quant.launch((k_padded // 256, 1), 256, x.data_ptr(), vy.data_ptr(), ncols, k_padded, stream=s)

        def read(i, s, kernel=probe, programmatic=False, ws=ws, grid=grid, block=block, words=words,
                 per_block=per_block):
            kernel.launch(grid, block, ws[i % len(ws)].data_ptr(), flag.data_ptr(), words, per_block, stream=s,
                          programmatic=programmatic)

        def mmvq(i, s, fn=fn, ws=ws, grid=grid, block=block):
            fn.launch(grid, block, ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows,
                      k_padded, nrows, stream=s, programmatic=True)

        cases = (("read_floor alone", read),
                 ("quantize_q8_1 + read_floor, plain", lambda i, s, read=read: (quantize(s), read(i, s))),
                 ("quantize_q8_1 + read_floor_wait, programmatic",
                  lambda i, s, read=read: (quantize(s), read(i, s, probe_wait, True))),
                 ("quantize_q8_1 + MMVQ (the wrappers' pair)", lambda i, s, mmvq=mmvq: (quantize(s), mmvq(i, s))))
        for label, f in cases:
            b.report(f"{qtype} {nrows}x{ncols} {label}", min(b.time(f) for _ in range(2)), wbytes)
        assert int(flag.item()) == 0
        del ws


#: chunks of 32 activations the fused floor's shared q8_1 holds (14336 columns)
FUSED_MAX_CHUNKS = 448


@pk.kernel
def fused_floor(x: pk.ConstPtr[pk.f32], w: pk.ConstPtr[pk.u32], flag: pk.Ptr[pk.u32], ncols: pk.usize,
                words: pk.usize, per_block: pk.usize):
    """``read_floor`` with the activations quantized to q8_1 inside the block first, as a batch-1
    MMVQ that fused ``quantize_q8_1`` would: each thread whole 32-element chunks (their amax, the
    butterfly's sum order, 32 divisions and roundings, 8 quant words and d into shared memory), a
    barrier, then the block's weight words. No second kernel and no wait: what that shape allows."""
    sq = pk.shared.array(FUSED_MAX_CHUNKS * 9, pk.u32)
    nt = pk.usize(pk.block_dim.x * pk.block_dim.y)
    t = pk.usize(pk.thread_idx.y * pk.block_dim.x + pk.thread_idx.x)
    chunks = ncols // 32
    for c in range(t, chunks, nt):
        xs = x + c * 32
        amax = pk.f32(0)
        s = pk.local.array(16, pk.f32)
        for i in pk.static_range(16):
            a = xs[i]
            b = xs[i + 16]
            amax = pk.fmax(amax, pk.fmax(pk.fabs(a), pk.fabs(b)))
            s[i] = a + b
        for m in pk.static_range(4):
            for i in pk.static_range(8 >> m):
                s[i] = s[i] + s[i + (8 >> m)]
        d = amax / 127.0
        for wv in pk.static_range(8):
            word = pk.u32(0)
            for k in pk.static_range(4):
                q = pk.i32(0) if amax == 0.0 else pk.i32(pkm.round(xs[wv * 4 + k] / d))
                word = word | ((pk.u32(q) & pk.u32(0xFF)) << pk.u32(8 * k))
            sq[c * 9 + wv] = word
        sq[c * 9 + 8] = pk.bitcast(d, pk.u32) ^ pk.bitcast(s[0], pk.u32)
    pk.syncthreads()
    lo = pk.usize(pk.block_idx.x) * per_block
    mine = w + lo
    acc = sq[t % (chunks * 9)]
    for i in pk.parallel_range(pk.usize(0), min(per_block, words - lo), t, nt):
        acc ^= mine[i]
    if acc == pk.u32(0x9E3779B9):
        flag[0] = acc


FUSED_PROBES = pk.Module("quantized_fused_floor").add(fused_floor.instance("fused_floor"))
#: (rows a block, threads a block) the fused floor runs at
FUSED_SHAPES = ((2, 64), (4, 64), (4, 128), (8, 128), (8, 256), (16, 256))


def fused(b: Bench) -> None:
    """The pair's floor (``floor``) beside ``fused_floor``: one kernel that quantizes the activations
    in each block and reads the weights, at several rows and threads a block; % of copy counting the
    weight bytes, and x torch.mv f16 on the same shape."""
    torch, rng = b.torch, np.random.default_rng(6)
    quant = b.fn("quantize_q8_1")
    probe_wait = b.dev.get_or_load_func("read_floor_wait", FLOOR_PROBES)
    fused_fn = b.dev.get_or_load_func("fused_floor", FUSED_PROBES)
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    print("\nthe fused floor: quantize in every block, then the weights (one kernel)")
    for nrows, ncols, x, k_padded, vy, dst, qtype, ws in batch1_cases(b, rng):
        if qtype not in ("q4_K", "q6_K"):
            del ws
            continue
        wbytes = ws[0].numel()
        words = wbytes // 4
        w16 = [torch.randn(nrows, ncols, device="cuda", dtype=torch.float16) for _ in range(4)]
        x16 = x.half()
        t_mv = min(b.time(lambda i, s, w16=w16: torch.mv(w16[i % len(w16)], x16)) for _ in range(2))
        b.report(f"torch.mv f16 {nrows}x{ncols}", t_mv, nrows * ncols * 2)
        del w16
        rows, block = Q.MMVQ_WRAPPER_ROWS[qtype], Q.mmvq_wrapper_block(qtype, ncols)
        fn = b.fn(f"mul_mat_vec_rows_{qtype}_q8_1")

        def quantize(s):
            quant.launch((k_padded // 256, 1), 256, x.data_ptr(), vy.data_ptr(), ncols, k_padded, stream=s)

        def pair(i, s, fn=fn, ws=ws, rows=rows, block=block):
            quantize(s)
            fn.launch(-(-nrows // rows), block, ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols,
                      nrows, k_padded, nrows, stream=s, programmatic=True)

        def floor_pair(i, s, ws=ws, rows=rows, block=block):
            quantize(s)
            probe_wait.launch(-(-nrows // rows), block, ws[i % len(ws)].data_ptr(), flag.data_ptr(), words,
                              rows * (words // nrows), stream=s, programmatic=True)

        cases = [("the wrappers' pair", pair), ("quantize + read_floor_wait (the pair's floor)", floor_pair)]
        for r, nt in FUSED_SHAPES:
            cases.append((f"fused_floor {r} rows, {nt} threads",
                          lambda i, s, ws=ws, r=r, nt=nt: fused_fn.launch(
                              -(-nrows // r), nt, x.data_ptr(), ws[i % len(ws)].data_ptr(), flag.data_ptr(), ncols,
                              words, r * (words // nrows), stream=s)))
        for label, f in cases:
            t = min(b.time(f) for _ in range(2))
            b.report(f"{qtype} {nrows}x{ncols} {label}", t, wbytes, t_mv, "torch.mv")
        assert int(flag.item()) == 0
        del ws


# ---- MMQ on pk.mma (issue 26: the tensor cores' i8 products, block-scaled) ---------------------------
def mma_launch(fn, s, w, vy, dst, batch: int, nrows: int, ncols: int, k_padded: int, tile) -> None:
    """``mul_mat_mma_{q}`` under the wrappers' launch (quantized_api.matmul's) for tile ``tile``."""
    wr, wc, _ = tile
    fn[(-(-nrows // (16 * wr)), -(-batch // (16 * wc))), Q.MMQ_MMA_WAVES * 32, s](
        w.data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows, batch, k_padded, nrows)


#: the activation rows ``--only mma`` times (``--mma-batches``), and its formats (``--mma-formats``)
MMA_BATCHES = (16, 24, 32, 64, 128)
MMA_FORMATS = tuple(Q.MMQ_MMA_TYPES)


def mma(b: Bench) -> None:
    """The wrappers' MMQ on pk.mma (q8_1 + ``mul_mat_mma_{q}``, stdlib_kernels/quantized.py, its tile
    by format and batch as quantized_api.matmul picks it; at 16 columns, which the wrappers give the
    planar MMQ, the format's first tile: 1x1x4, or 1x2x2 for the K formats) against dequantize + torch.matmul f16 and the planar MMQ (planar q8_1 +
    ``mul_mat_planar_{q}``), 4096 x 4096, weights rotated; "alone" is the mma kernel by itself (and
    each tile by itself, "tiles alone"). Its
    result is checked against the float64 product within spec/quantized.md §6.5's bound
    (tests/stdlib/test_quantized.py's check_q8_1_product) and against mul_mat_planar's."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "tests", "stdlib")]    # the test module imports its neighbours
    from tests.stdlib.test_quantized import check_q8_1_product
    torch, rng = b.torch, np.random.default_rng(7)
    n = 4096
    print(f"\nMMQ on pk.mma {n}x{n} (quantize_q8_1 + mul_mat_mma) against dequantize + torch.matmul f16 and "
          f"the planar MMQ")
    quant, pquant = b.fn("quantize_q8_1"), b.fn("quantize_q8_1_planar")
    w16 = torch.empty((n, n), dtype=torch.float16, device="cuda")
    for qtype in MMA_FORMATS:
        ws = b.rotated(random_blocks(rng, qtype, n, n))
        deq, planar_k = b.fn(f"dequantize_{qtype}_f16"), b.fn(f"mul_mat_planar_{qtype}")
        for batch in MMA_BATCHES:
            tile = Q.mmq_mma_tiles(qtype)[0] if batch < Q.MMQ_MMA_MIN_BATCH else Q.mmq_mma_tile(qtype, batch)
            probe = b.fn("mul_mat_mma_{}_{}x{}x{}".format(qtype, *tile))
            x = torch.randn(batch, n, device="cuda")
            x16 = x.half()
            vy = torch.empty(batch * n // 32 * Q.PLANAR_BYTES, dtype=torch.uint8, device="cuda")
            dst = torch.empty(batch, n, device="cuda")
            t_ref = b.time(dequant_matmul(torch, deq, ws, w16, x16, n * n))

            def ours(i, s, x=x, vy=vy, dst=dst, batch=batch, probe=probe, ws=ws):
                quant[(n // 256, batch), 256, s](x.data_ptr(), vy.data_ptr(), n, n)
                mma_launch(probe, s, ws[i % len(ws)], vy, dst, batch, n, n, n, tile)

            def planar(i, s, x=x, vy=vy, dst=dst, batch=batch, ws=ws):
                pquant[(n // 256, batch), 256, s](x.data_ptr(), vy.data_ptr(), n, n)
                planar_k[(n // Q.MMQ_PLANAR_ROWS, -(-batch // Q.MMQ_PLANAR_COLUMNS)), (32, Q.MMQ_PLANAR_BLOCK_Y), s](
                    ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), n, n, batch, n, n)
            t_ours, t_planar = b.time(ours), b.time(planar)
            t_alone = b.time(lambda i, s, probe=probe, vy=vy, dst=dst, batch=batch, ws=ws, tile=tile: mma_launch(
                probe, s, ws[i % len(ws)], vy, dst, batch, n, n, n, tile))
            b.report(f"{qtype} batch {batch} mul_mat_mma {'x'.join(map(str, tile))}", t_ours, ws[0].numel(), t_ref,
                     "dequant+matmul f16")
            print(f"{'':48} alone {t_alone * 1e6:8.2f} us; planar q8_1 + mul_mat_planar {t_planar * 1e6:8.2f} us "
                  f"(mma x{t_planar / t_ours:5.2f})", flush=True)
            alone = {}   # every tile by itself: which one wins at this batch
            for other in Q.mmq_mma_tiles(qtype):
                fo = b.fn("mul_mat_mma_{}_{}x{}x{}".format(qtype, *other))
                alone[other] = b.time(lambda i, s, fo=fo, vy=vy, dst=dst, batch=batch, ws=ws, other=other: mma_launch(
                    fo, s, ws[i % len(ws)], vy, dst, batch, n, n, n, other))
            print(f"{'':48} tiles alone: " + ", ".join(f"{'x'.join(map(str, k))} {v * 1e6:7.2f} us"
                                                      for k, v in alone.items()), flush=True)
            outs = []
            for f in (ours, planar):
                dst.fill_(float("nan"))
                f(0, None)
                torch.cuda.synchronize()
                outs.append(dst.cpu().numpy())
            quant[(n // 256, batch), 256, None](x.data_ptr(), vy.data_ptr(), n, n)
            torch.cuda.synchronize()
            qy = vy[:batch * n // 32 * 36].cpu().numpy().reshape(batch, -1)
            check_q8_1_product(outs[0], ws[0].cpu().numpy().reshape(n, -1), qtype, x.cpu().numpy(), qy)
            assert np.abs(outs[0] - outs[1]).max() <= 1e-4 * np.abs(outs[1]).max(), \
                "mul_mat_mma and mul_mat_planar disagree"
        del ws


# ---- issue 26, engineer mmvq: the weights before the wait, q6_K's MMVQ, q3_K's f16 dequantize ---------
#: the formats ``--only early`` times with the weights' loads before ``grid_dependency_wait`` and after
EARLY_FORMATS = ("q4_0", "q4_K", "q5_K", "q6_K", "q8_0")
#: shapes (rows, columns) every ``--only early`` format runs at
EARLY_SHAPES = ((14336, 4096), (4096, 4096), (4096, 14336))


def wrapper_instance(qtype: str, name: str, *, early: bool, rows: int | None = None):
    """The wrappers' batch-1 MMVQ kernel of ``qtype`` (``mul_mat_vec_rows_{q}_q8_1``'s definition), with
    ``early`` and ``rows`` as given."""
    kw = dict(Q=Q.QTYPES[qtype], rows=rows or Q.MMVQ_WRAPPER_ROWS[qtype], early=early)
    if qtype in Q.MMVQ_PAIRS:
        return Q.mul_mat_vec_pairs.instance(name, **kw)
    return Q.mul_mat_vec_q8_1.instance(name, N=1, **kw)


EARLY_PROBES = pk.Module("quantized_early").add(
    *(wrapper_instance(q, f"early{int(e)}_{q}", early=e) for q in EARLY_FORMATS for e in (False, True)))


def early(b: Bench) -> None:
    """The wrappers' batch-1 pair with each format's MMVQ loading a step's weights before
    ``grid_dependency_wait`` (early 1) or after it (early 0), launched programmatically (the API's
    launch on sm_90) and plainly, and the MMVQ alone; the two alternated twice (best of each), outputs
    bit-identical."""
    torch, rng = b.torch, np.random.default_rng(8)
    print("\nweights before the wait: the pair (programmatic / plain) and MMVQ alone, early 0 vs 1 (weight bytes)")
    quant = b.fn("quantize_q8_1")
    for nrows, ncols in EARLY_SHAPES:
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        for qtype in EARLY_FORMATS:
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            wbytes = ws[0].numel()
            rows, block = Q.MMVQ_WRAPPER_ROWS[qtype], Q.mmvq_wrapper_block(qtype, ncols)
            fns = {e: b.dev.get_or_load_func(f"early{e}_{qtype}", EARLY_PROBES) for e in (0, 1)}

            def pair(i, s, e, programmatic, rows=rows, block=block, ws=ws):
                quant.launch((k_padded // 256, 1), 256, x.data_ptr(), vy.data_ptr(), ncols, k_padded, stream=s)
                fns[e].launch(-(-nrows // rows), block, ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(),
                              ncols, nrows, k_padded, nrows, stream=s, programmatic=programmatic)

            def alone(i, s, e, rows=rows, block=block, ws=ws):
                fns[e][-(-nrows // rows), block, s](ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols,
                                                    nrows, k_padded, nrows)
            outs = []
            for e in (0, 1):
                for programmatic in (False, True):
                    dst.fill_(float("nan"))
                    pair(0, None, e, programmatic)
                    torch.cuda.synchronize()
                    outs.append(dst.cpu().numpy().copy())
            assert all(np.array_equal(outs[0], o) for o in outs), f"{qtype}: early 0/1 outputs differ"
            times = {}
            for _ in range(2):
                for e in (0, 1):
                    for mode in ("programmatic", "plain", "alone"):
                        f = (lambda i, s, e=e: alone(i, s, e)) if mode == "alone" else (
                            lambda i, s, e=e, p=mode == "programmatic": pair(i, s, e, p))
                        times.setdefault((e, mode), []).append(b.time(f))
            for mode in ("programmatic", "plain", "alone"):
                t0, t1 = min(times[(0, mode)]), min(times[(1, mode)])
                print(f"{qtype} {nrows}x{ncols} {mode:12} early0 {t0 * 1e6:7.2f} us {100 * wbytes / t0 / b.copy_bw:4.0f}%"
                      f"  early1 {t1 * 1e6:7.2f} us {100 * wbytes / t1 / b.copy_bw:4.0f}%  x{t0 / t1:.3f}"
                      f"  (runs {' / '.join(f'{v * 1e6:.2f}' for v in times[(0, mode)])} | "
                      f"{' / '.join(f'{v * 1e6:.2f}' for v in times[(1, mode)])})", flush=True)
            del ws


#: rows a block ``--only rows_sweep`` times the pair formats' MMVQ at (early 0 and 1; blocks as the wrappers')
SWEEP_ROWS = (1, 2, 4)
SWEEP_PROBES = pk.Module("quantized_rows_sweep").add(
    *(wrapper_instance(q, f"sweep_{q}_{r}_{e}", early=bool(e), rows=r) for q in Q.MMVQ_PAIRS for r in SWEEP_ROWS
      for e in (0, 1)))


def rows_sweep(b: Bench) -> None:
    """The pair formats' batch-1 MMVQ (``mul_mat_vec_pairs``) at SWEEP_ROWS rows a block, the weights
    before the wait or after, under the wrappers' blocks: the programmatic pair and the MMVQ alone,
    alternated twice (best of each), outputs compared with the wrappers' kernel."""
    torch, rng = b.torch, np.random.default_rng(12)
    print("\nrows a block x early, pair formats (programmatic pair / MMVQ alone; weight bytes)")
    quant = b.fn("quantize_q8_1")
    for nrows, ncols in EARLY_SHAPES:
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        for qtype in Q.MMVQ_PAIRS:
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            wbytes = ws[0].numel()
            block = Q.mmvq_wrapper_block(qtype, ncols)
            variants = {"wrappers'": (b.fn(f"mul_mat_vec_rows_{qtype}_q8_1"), Q.MMVQ_WRAPPER_ROWS[qtype])}
            for r in SWEEP_ROWS:
                for e in (0, 1):
                    variants[f"rows {r} early {e}"] = (b.dev.get_or_load_func(f"sweep_{qtype}_{r}_{e}", SWEEP_PROBES), r)

            def pair(i, s, fn, rows, ws=ws, block=block):
                quant.launch((k_padded // 256, 1), 256, x.data_ptr(), vy.data_ptr(), ncols, k_padded, stream=s)
                fn.launch(-(-nrows // rows), block, ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(),
                          ncols, nrows, k_padded, nrows, stream=s, programmatic=True)

            def alone(i, s, fn, rows, ws=ws, block=block):
                fn[-(-nrows // rows), block, s](ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols,
                                                nrows, k_padded, nrows)
            want = None
            for label, (fn, rows) in variants.items():
                dst.fill_(float("nan"))
                pair(0, None, fn, rows)
                torch.cuda.synchronize()
                got = dst.cpu().numpy().copy()
                want = got if want is None else want
                assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), f"{qtype} {label} disagrees"
            times = {}
            for _ in range(2):
                for label, (fn, rows) in variants.items():
                    times.setdefault(label, ([], []))
                    times[label][0].append(b.time(lambda i, s, fn=fn, rows=rows: pair(i, s, fn, rows)))
                    times[label][1].append(b.time(lambda i, s, fn=fn, rows=rows: alone(i, s, fn, rows)))
            for label, (tp, ta) in times.items():
                print(f"{qtype} {nrows}x{ncols} {label:18} pair {min(tp) * 1e6:7.2f} us {100 * wbytes / min(tp) / b.copy_bw:4.0f}%"
                      f"  alone {min(ta) * 1e6:7.2f} us {100 * wbytes / min(ta) / b.copy_bw:4.0f}%"
                      f"  (pair runs {' / '.join(f'{v * 1e6:.2f}' for v in tp)})", flush=True)
            del ws


@pk.func
def span8_aligned(block: pk.ConstPtr[pk.u8], offset: pk.u32, odd: bool, out: pk.Ptr[pk.u32], at: pk.u32):
    """``out[at .. at + 8)`` = the 8 words at ``offset`` (a multiple of 4) of a block 2 bytes past a
    word where ``odd``: 8 aligned words from the span's first aligned byte and its first two bytes
    (``span_words``' 7 words and 3 halves, its alignment test once a block)."""
    first = pk.u32(pk.bitcast(block + offset, pk.ConstPtr[pk.u16])[0])
    words = pk.bitcast(block + offset + pk.select(odd, pk.u32(2), pk.u32(0)), pk.ConstPtr[pk.u32])
    shift = pk.select(odd, pk.u64(16), pk.u64(32))
    prev = words[0]
    out[at] = pk.select(odd, first | (prev << 16), prev)
    for k in pk.static_range(1, 8):
        cur = words[k]
        out[at + k] = pk.u32(((pk.u64(cur) << 32) | pk.u64(prev)) >> shift)
        prev = cur


@pk.kernel(max_block_size=Q.MAX_BLOCK)
def q6k_pairs_probe(vx: pk.ConstPtr[pk.u8], vy: pk.ConstPtr[pk.u8], dst: pk.Ptr[pk.f32], ncols_x: pk.i32,
                    nrows_x: pk.i32, nrows_y: pk.i32, nrows_dst: pk.i32, *, QT, rows, aligned, scales16):
    """``Q.mul_mat_vec_pairs`` for q6_K with the weights before the wait, and: ``aligned``, each pair's
    ql and qh spans through ``span8_aligned`` (the block's alignment tested once; else ``span_words``,
    q6_K's loader before); ``scales16``, a chunk's two group scales from one 16-bit load (else a byte
    load a group). ``QT``: q6_K. q6k_11 is now the wrappers' kernel (the same SASS)."""
    sm = pk.shared.array(Q.SHARED_SUMS[rows], pk.f32)
    acc = pk.local.array(rows, pk.f32)
    for r in pk.static_range(rows):
        acc[r] = 0.0
    t = Q.flat_thread()
    nt = Q.flat_threads()
    first = pk.block_idx.x * rows
    pairs = pk.u32(max(ncols_x, 0)) // 64
    row_bytes = pk.usize(pairs // 4) * 210
    last = pk.u32(max(nrows_x, 1)) - 1
    lo = pk.local.array(8 * rows, pk.u32)
    hi = pk.local.array(8 * rows, pk.u32)
    params_lo = pk.local.array(4 * rows, pk.f32)
    params_hi = pk.local.array(4 * rows, pk.f32)
    high = pk.local.array(8, pk.u32)
    yw = pk.local.array(16, pk.i32)
    sums = pk.local.array(4, pk.i32)
    for p in range(t, pairs, nt):
        pb = p % 4
        hh = pb // 2
        ss = pb % 2
        c_lo = hh * 4 + ss
        c_hi = c_lo + 2
        for r in pk.static_range(rows):
            b = vx + pk.usize(min(first + r, last)) * row_bytes + pk.usize(p // 4) * 210
            if aligned:
                odd = not pk.is_aligned(b, 4)
                span8_aligned(b, 64 * hh + 32 * ss, odd, lo, 8 * r)
                span8_aligned(b, 128 + 32 * hh, odd, high, 0)
                for k in pk.static_range(8):
                    q = high[k] >> (2 * ss)
                    hi[8 * r + k] = ((lo[8 * r + k] >> 4) & 0x0F0F0F0F) | (((q >> 4) & 0x03030303) << 4)
                    lo[8 * r + k] = (lo[8 * r + k] & 0x0F0F0F0F) | ((q & 0x03030303) << 4)
            else:  # q6_K's pair loader before block_span: two span_words
                Q.span_words(b, 64 * hh + 32 * ss, lo, n=8, at=8 * r)
                Q.span_words(b, 128 + 32 * hh, high, n=8, at=0)
                for k in pk.static_range(8):
                    q = high[k] >> (2 * ss)
                    hi[8 * r + k] = ((lo[8 * r + k] >> 4) & 0x0F0F0F0F) | (((q >> 4) & 0x03030303) << 4)
                    lo[8 * r + k] = (lo[8 * r + k] & 0x0F0F0F0F) | ((q & 0x03030303) << 4)
            if scales16:
                d = Q.half_at(b, 208)
                two = pk.u32(pk.bitcast(b + 192 + 2 * c_lo, pk.ConstPtr[pk.u16])[0])
                params_lo[4 * r] = d * pk.f32(pk.bitcast(two << 24, pk.i32) >> 24)
                params_lo[4 * r + 2] = d * pk.f32(pk.bitcast(two << 16, pk.i32) >> 24)
                two = pk.u32(pk.bitcast(b + 192 + 2 * c_hi, pk.ConstPtr[pk.u16])[0])
                params_hi[4 * r] = d * pk.f32(pk.bitcast(two << 24, pk.i32) >> 24)
                params_hi[4 * r + 2] = d * pk.f32(pk.bitcast(two << 16, pk.i32) >> 24)
            else:
                Q.chunk_params(b, c_lo, params_lo + 4 * r, Q=QT)
                Q.chunk_params(b, c_hi, params_hi + 4 * r, Q=QT)
        pk.grid_dependency_wait()
        first_chunk = pk.usize(p // 4) * 8
        y_lo = vy + (first_chunk + c_lo) * 36
        y_hi = vy + (first_chunk + c_hi) * 36
        d8_lo = Q.half_at(y_lo, 0)
        d8_hi = Q.half_at(y_hi, 0)
        for h in pk.static_range(2):
            y = pk.bitcast((y_lo if h == 0 else y_hi) + 4, pk.ConstPtr[pk.i32])
            for k in pk.static_range(8):
                yw[8 * h + k] = y[k]
            Q.group_sums(y, sums, Q=QT, at=2 * h)
        for r in pk.static_range(rows):
            acc[r] += Q.dot_words(lo + 8 * r, params_lo + 4 * r, yw, d8_lo, sums, Q=QT, y_at=0, sums_at=0)
            acc[r] += Q.dot_words(hi + 8 * r, params_hi + 4 * r, yw, d8_hi, sums, Q=QT, y_at=8, sums_at=2)
    total = Q.block_sums(acc, sm, t, nt, count=rows)
    if t < rows and pk.i32(first + t) < nrows_x:
        dst[pk.usize(first + t)] = total


Q6K_PROBES = pk.Module("quantized_q6k").add(
    *(q6k_pairs_probe.instance(f"q6k_{a}{s16}", QT=Q.QTYPES["q6_K"], rows=2, aligned=bool(a), scales16=bool(s16)) for a in (0, 1)
      for s16 in (0, 1)))


def q6k(b: Bench) -> None:
    """q6_K's batch-1 MMVQ variants (Q6K_PROBES: the aligned spans, the 16-bit scale loads) against the
    wrappers' kernel, programmatic pair and alone, alternated twice, outputs compared."""
    torch, rng = b.torch, np.random.default_rng(13)
    print("\nq6_K MMVQ variants (programmatic pair / MMVQ alone; weight bytes)")
    quant = b.fn("quantize_q8_1")
    for nrows, ncols in EARLY_SHAPES:
        x = torch.randn(ncols, device="cuda")
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        ws = b.rotated(random_blocks(rng, "q6_K", nrows, ncols))
        wbytes = ws[0].numel()
        block = Q.mmvq_wrapper_block("q6_K", ncols)
        variants = {"wrappers'": b.fn("mul_mat_vec_rows_q6_K_q8_1")}
        variants.update({n: b.dev.get_or_load_func(n, Q6K_PROBES) for n in Q6K_PROBES.names()})

        def pair(i, s, fn, ws=ws, block=block):
            quant.launch((k_padded // 256, 1), 256, x.data_ptr(), vy.data_ptr(), ncols, k_padded, stream=s)
            fn.launch(-(-nrows // 2), block, ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(),
                      ncols, nrows, k_padded, nrows, stream=s, programmatic=True)

        def alone(i, s, fn, ws=ws, block=block):
            fn[-(-nrows // 2), block, s](ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows,
                                         k_padded, nrows)
        want = None
        for label, fn in variants.items():
            dst.fill_(float("nan"))
            pair(0, None, fn)
            torch.cuda.synchronize()
            got = dst.cpu().numpy().copy()
            want = got if want is None else want
            assert np.array_equal(got, want), f"q6_K {label} differs"
        times = {}
        for _ in range(2):
            for label, fn in variants.items():
                times.setdefault(label, ([], []))
                times[label][0].append(b.time(lambda i, s, fn=fn: pair(i, s, fn)))
                times[label][1].append(b.time(lambda i, s, fn=fn: alone(i, s, fn)))
        for label, (tp, ta) in times.items():
            print(f"q6_K {nrows}x{ncols} {label:12} pair {min(tp) * 1e6:7.2f} us {100 * wbytes / min(tp) / b.copy_bw:4.0f}%"
                  f"  alone {min(ta) * 1e6:7.2f} us {100 * wbytes / min(ta) / b.copy_bw:4.0f}%"
                  f"  (alone runs {' / '.join(f'{v * 1e6:.2f}' for v in ta)})", flush=True)
        del ws


@pk.kernel(max_block_size=Q.MAX_BLOCK)
def q3_k_f16_tiles(vx: pk.ConstPtr[pk.u8], y: pk.Ptr[pk.f16], count: pk.usize):
    """q3_K to f16 under the wrappers' launch, ``pk.parallel_range`` over the output's u64 words (a
    tile two words: one 16-byte store), each tile copy decoding its word's pair (``q3_k_pair_values``
    of word w - w % 2: LLVM merges the two copies' loads) and keeping its half."""
    t = pk.usize(pk.global_id())
    nt = pk.usize(pk.grid_dim.x) * pk.usize(pk.block_dim.x)
    out = pk.bitcast(y, pk.Ptr[pk.u64])
    blocks = pk.bitcast(vx, pk.ConstPtr[pk.u64])
    vals = pk.local.array(8, pk.f32)
    for w in pk.parallel_range(pk.usize(0), count // 4, t, nt):
        wp = w // 2 * 2
        Q.q3_k_pair_values(pk.bitcast(blocks, pk.ConstPtr[pk.u8]) + (wp // 64) * 110, pk.u32(wp % 64), vals)
        second = w % 2 == 1
        bits = pk.u64(0)
        for k in pk.static_range(4):
            bits |= pk.u64(pk.bitcast(pk.f16(pk.select(second, vals[4 + k], vals[k])), pk.u16)) << (16 * k)
        out[w] = bits


@pk.func
def q3_k_pair_magic(b: pk.ConstPtr[pk.u8], w: pk.u32, vals: pk.Ptr[pk.f32]):
    """``Q.q3_k_pair_values`` with each 3-bit quant made an f32 by its bits: 0x4B000000 | q is 2^23 + q
    exactly, and 2^23 + q - (2^23 + 4) = q - 4 exactly, so a * that is the same product bit for bit
    (no I2F, no sign extension)."""
    h = w // 32
    s = w // 8 % 4
    l4 = w % 8
    low = pk.local.array(2, pk.u32)
    hm = pk.local.array(2, pk.u32)
    Q.span_words(b, 32 + 32 * h + 4 * l4, low, n=2, at=0)
    Q.span_words(b, 4 * l4, hm, n=2, at=0)
    a = Q.q3_k_scale(b, w // 4)
    for j in pk.static_range(2):
        q = ((low[j] >> (2 * s)) & 0x03030303) | (((hm[j] >> (4 * h + s)) & 0x01010101) << 2)
        for k in pk.static_range(4):
            vals[4 * j + k] = a * (pk.bitcast(pk.u32(0x4B000000) | ((q >> (8 * k)) & 0xFF), pk.f32) - 8388612.0)


@pk.kernel(max_block_size=Q.MAX_BLOCK)
def q3_k_f16_magic(vx: pk.ConstPtr[pk.u8], y: pk.Ptr[pk.f16], count: pk.usize):
    """``dequantize_q3_K_f16``'s pair loop (a thread a pair of words, two u64 stores) through
    ``q3_k_pair_magic``."""
    t = pk.usize(pk.global_id())
    nt = pk.usize(pk.grid_dim.x) * pk.usize(pk.block_dim.x)
    out = pk.bitcast(y, pk.Ptr[pk.u64])
    pair_vals = pk.local.array(8, pk.f32)
    for p in range(t, count // 8, nt):
        w = 2 * p
        q3_k_pair_magic(vx + (w // 64) * 110, pk.u32(w % 64), pair_vals)
        for j in pk.static_range(2):
            bits = pk.u64(0)
            for k in pk.static_range(4):
                bits |= pk.u64(pk.bitcast(pk.f16(pair_vals[4 * j + k]), pk.u16)) << (16 * k)
            out[w + j] = bits


@pk.func
def q3_k_pair_words(b: pk.ConstPtr[pk.u8], w: pk.u32, vals: pk.Ptr[pk.f32], *, sext):
    """``Q.q3_k_pair_values`` with its two 8-byte spans (qs and hmask, both at multiples of 4 bytes
    from the block) read as three aligned words each below the block's own alignment (2 or 4 mod 4,
    tested once), shifted together by 16 bits or none. ``sext``: q - 4 of each 3-bit quant as the
    sign extension of q ^ 4 (the same integer) instead of a subtraction."""
    h = w // 32
    s = w // 8 % 4
    l4 = w % 8
    odd = not pk.is_aligned(b, 4)
    base = pk.bitcast(b - pk.select(odd, pk.i64(2), pk.i64(0)), pk.ConstPtr[pk.u32])
    shift = pk.select(odd, pk.u64(16), pk.u64(0))
    qs = 8 + 8 * h + l4
    x = pk.local.array(3, pk.u32)
    m = pk.local.array(3, pk.u32)
    for k in pk.static_range(3):
        x[k] = base[qs + k]
        m[k] = base[l4 + k]
    a = Q.q3_k_scale(b, w // 4)
    for j in pk.static_range(2):
        low = pk.u32(((pk.u64(x[j + 1]) << 32) | pk.u64(x[j])) >> shift)
        hm = pk.u32(((pk.u64(m[j + 1]) << 32) | pk.u64(m[j])) >> shift)
        q = ((low >> (2 * s)) & 0x03030303) | (((hm >> (4 * h + s)) & 0x01010101) << 2)
        for k in pk.static_range(4):
            if sext:
                vals[4 * j + k] = a * pk.f32(pk.bitcast((q ^ 0x04040404) << (29 - 8 * k), pk.i32) >> 29)
            else:
                vals[4 * j + k] = a * pk.f32(pk.i32((q >> (8 * k)) & 0xFF) - 4)


@pk.kernel(max_block_size=Q.MAX_BLOCK)
def q3_k_f16_words(vx: pk.ConstPtr[pk.u8], y: pk.Ptr[pk.f16], count: pk.usize, *, sext):
    """``q3_k_f16_magic`` through ``q3_k_pair_words``."""
    t = pk.usize(pk.global_id())
    nt = pk.usize(pk.grid_dim.x) * pk.usize(pk.block_dim.x)
    out = pk.bitcast(y, pk.Ptr[pk.u64])
    pair_vals = pk.local.array(8, pk.f32)
    for p in range(t, count // 8, nt):
        w = 2 * p
        q3_k_pair_words(vx + (w // 64) * 110, pk.u32(w % 64), pair_vals, sext=sext)
        for j in pk.static_range(2):
            bits = pk.u64(0)
            for k in pk.static_range(4):
                bits |= pk.u64(pk.bitcast(pk.f16(pair_vals[4 * j + k]), pk.u16)) << (16 * k)
            out[w + j] = bits


DEQUANT_PROBES = pk.Module("quantized_dequant_probes").add(q3_k_f16_tiles.instance("q3_k_f16_tiles"),
                                                           q3_k_f16_magic.instance("q3_k_f16_magic"),
                                                           q3_k_f16_words.instance("q3_k_f16_words", sext=False),
                                                           q3_k_f16_words.instance("q3_k_f16_words_sx", sext=True))


def dequant_q3(b: Bench) -> None:
    """q3_K's f16 dequantize (wrappers' launch, 2^25 elements): ``dequantize_q3_K_f16`` against the
    probes in DEQUANT_PROBES, alternated three times (best of each), outputs bit-identical; q3_K f32 and
    q4_K f16 beside them."""
    torch, rng = b.torch, np.random.default_rng(9)
    el = 1 << 25
    w = torch.from_numpy(random_blocks(rng, "q3_K", el // 4096, 4096)).cuda()
    grid = -(-el // Q.DEQUANTIZE_WRAPPER_ELEMENTS)
    print(f"\nq3_K f16 dequantize ({el:,} elements, wrappers' launch; bytes read + written)")
    variants = {"dequantize_q3_K_f16": b.fn("dequantize_q3_K_f16")}
    variants.update({n: b.dev.get_or_load_func(n, DEQUANT_PROBES) for n in DEQUANT_PROBES.names()})
    out = torch.empty(el, dtype=torch.float16, device="cuda")
    outs = []
    for fn in variants.values():
        out.fill_(float("nan"))
        fn[grid, Q.DEQUANTIZE_WRAPPER_BLOCK](w.data_ptr(), out.data_ptr(), el)
        torch.cuda.synchronize()
        outs.append(out.view(torch.int16).cpu().numpy().copy())
    for name, o in zip(variants, outs):
        assert np.array_equal(o, outs[0]), f"{name} differs from dequantize_q3_K_f16"
    nbytes = w.numel() + el * 2
    times = {}
    for _ in range(3):
        for name, fn in variants.items():
            times.setdefault(name, []).append(b.time(lambda i, s, fn=fn: fn[grid, Q.DEQUANTIZE_WRAPPER_BLOCK, s](
                w.data_ptr(), out.data_ptr(), el)))
    for name, ts in times.items():
        b.report(f"{name}", min(ts), nbytes)
        print(f"{'':48} runs {' / '.join(f'{v * 1e6:.2f}' for v in ts)} us")
    for name, dt, tdt in (("dequantize_q3_K_f32", "f32", torch.float32), ("dequantize_q4_K_f16", "f16", torch.float16)):
        q = name.split("_")[1] + "_" + name.split("_")[2]
        wq = w if q == "q3_K" else torch.from_numpy(random_blocks(rng, q, el // 4096, 4096)).cuda()
        o = torch.empty(el, dtype=tdt, device="cuda")
        fn = b.fn(name)
        t = b.time(lambda i, s, fn=fn, wq=wq, o=o: fn[grid, Q.DEQUANTIZE_WRAPPER_BLOCK, s](wq.data_ptr(), o.data_ptr(), el))
        b.report(name, t, wq.numel() + o.numel() * o.element_size())


def ncu_launches(b: Bench) -> None:
    """One launch of each kernel ``ncu`` should profile (run under ``ncu -k regex:...``; no graphs):
    the wrappers' MMVQ of q6_K, q8_0, q4_0, q4_K at 14336 x 4096 (early 0 and 1), q3_K's f16 dequantize
    and its probes, q3_K f32 and q4_K f16 at 2^25 elements."""
    torch, rng = b.torch, np.random.default_rng(10)
    nrows, ncols = 14336, 4096
    x = torch.randn(ncols, device="cuda")
    vy = torch.empty(ncols // 32 * 36, dtype=torch.uint8, device="cuda")
    dst = torch.empty(nrows, device="cuda")
    b.fn("quantize_q8_1")[(ncols // 256, 1), 256](x.data_ptr(), vy.data_ptr(), ncols, ncols)
    for qtype in ("q6_K", "q8_0", "q4_0", "q4_K"):
        w = torch.from_numpy(random_blocks(rng, qtype, nrows, ncols)).cuda()
        for e in (0, 1):
            b.dev.get_or_load_func(f"early{e}_{qtype}", EARLY_PROBES)[
                -(-nrows // Q.MMVQ_WRAPPER_ROWS[qtype]), Q.mmvq_wrapper_block(qtype, ncols)](
                w.data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows, ncols, nrows)
        if qtype == "q6_K":
            for name in Q6K_PROBES.names():
                b.dev.get_or_load_func(name, Q6K_PROBES)[-(-nrows // 2), Q.mmvq_wrapper_block(qtype, ncols)](
                    w.data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows, ncols, nrows)
    el = 1 << 25
    grid = -(-el // Q.DEQUANTIZE_WRAPPER_ELEMENTS)
    for q, dt, tdt in (("q3_K", "f16", torch.float16), ("q3_K", "f32", torch.float32), ("q4_K", "f16", torch.float16)):
        w = torch.from_numpy(random_blocks(rng, q, el // 4096, 4096)).cuda()
        o = torch.empty(el, dtype=tdt, device="cuda")
        fns = [b.fn(f"dequantize_{q}_{dt}")]
        if (q, dt) == ("q3_K", "f16"):
            fns += [b.dev.get_or_load_func(n, DEQUANT_PROBES) for n in DEQUANT_PROBES.names()]
        for fn in fns:
            fn[grid, Q.DEQUANTIZE_WRAPPER_BLOCK](w.data_ptr(), o.data_ptr(), el)
    torch.cuda.synchronize()


def main() -> None:
    global MMA_BATCHES, MMA_FORMATS
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", choices=["mmvq", "mmq", "dequantize", "get_rows", "probes", "pairs", "planar",
                                           "tile", "warps", "pdl", "read_sizes", "floor", "fused",
                                           "blocks", "mma", "early", "dequant_q3", "ncu", "rows_sweep", "q6k"])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--mma-batches", default=",".join(map(str, MMA_BATCHES)), help="--only mma: activation rows")
    ap.add_argument("--mma-formats", default=",".join(MMA_FORMATS), help="--only mma: the formats")
    args = ap.parse_args()
    MMA_BATCHES = tuple(int(v) for v in args.mma_batches.split(","))
    MMA_FORMATS = tuple(args.mma_formats.split(","))
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/quantized.py needs a CUDA GPU")
    torch.cuda.init()
    b = Bench(torch, pk.device("cuda"), args.iters)
    parts = {"mmvq": mmvq, "mmq": mmq, "dequantize": dequantize, "get_rows": get_rows, "probes": probes, "pairs": pairs,
             "planar": planar, "tile": tile, "warps": warps, "pdl": pdl,
             "read_sizes": read_sizes, "floor": floor, "fused": fused, "blocks": blocks, "mma": mma, "early": early, "dequant_q3": dequant_q3,
             "rows_sweep": rows_sweep, "q6k": q6k, "ncu": ncu_launches}
    for name, part in parts.items():
        if args.only == name or (args.only is None and name != "ncu"):
            part(b)


if __name__ == "__main__":
    main()
