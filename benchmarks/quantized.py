"""The QUANTIZED family against PyTorch and the copy bandwidth, on one CUDA GPU, in one process.

Run on the GPU machine:  python benchmarks/quantized.py [--only mmvq|mmq|dequantize|get_rows] [--iters 50]

* MMVQ at batch 1 (Q4_0, Q4_K, Q6_K, Q8_0; 4096x4096 and 14336x4096): the q8_1 + MMVQ pair per
  call, weights rotated over >= 8 buffers (> 100 MB in all, so L2 does not serve them); GB/s counts
  the weight bytes; against ``torch.mv`` in f16 rotated the same way. The wrappers' launch
  (``quantized_api.matmul``) and candle's exact launch (``mul_mat_vec_via_q8_1``) are both timed.
* MMQ at 16, 32 and 128 activation rows, under candle's tile and the wrappers' (``mul_mat_rows_*``),
  against dequantize-then-``torch.matmul`` in f16 (the dequantize being pykern's
  ``dequantize_block_*_f16``); the matmul alone is printed too.
* ``dequantize_block_*`` (f32 and f16 out) and ``get_rows_*`` on >= 64 MB: bytes read + written.

Times: CUDA events around ``--iters`` back-to-back calls (median of 5 such runs, after warm-up), so
launch latency shows as it does in a model. The ceiling is the device-to-device copy bandwidth
measured in the same run (bytes read + written).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import pykern as pk
from stdlib_kernels import QUANTIZED
from stdlib_kernels import quantized as Q

ROTATE_MIN = 8                # weight buffers rotated over, at least
ROTATE_BYTES = 160 << 20      # ... and at least this many bytes in all (H100 L2: 50 MB)


def loop_time(torch, fn, iters: int) -> float:
    """Seconds a call of ``fn(i)`` over ``iters`` back-to-back calls (median of 5 runs)."""
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(iters):
            fn(i)
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
        n = 1 << 27
        x = torch.empty(n, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        self.copy_bw = 2 * x.nbytes / loop_time(torch, lambda i: y.copy_(x), 20)
        print(f"device: {torch.cuda.get_device_name()}; copy bandwidth {self.copy_bw / 1e12:.2f} TB/s (read + written)")

    def fn(self, name: str):
        return self.dev.get_or_load_func(name, QUANTIZED)

    def time(self, fn) -> float:
        return loop_time(self.torch, fn, self.iters)

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
        t_mv = b.time(lambda i, w16=w16: torch.mv(w16[i % len(w16)], x16))
        w16 = None  # free the f16 copies before the quantized ones
        k_padded = -(-ncols // 512) * 512
        vy = torch.empty(k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
        dst = torch.empty(nrows, device="cuda")
        quant = b.fn("quantize_q8_1")
        for qtype in ("q4_0", "q4_K", "q6_K", "q8_0"):
            ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
            fn = b.fn(f"mul_mat_vec_{qtype}_q8_1_cuda1")
            wbytes = ws[0].numel()

            def candle(i, ws=ws, fn=fn):  # mul_mat_vec_via_q8_1: grid nrows, block (32, 4)
                quant[(k_padded // 256, 1), 256](x.data_ptr(), vy.data_ptr(), ncols, k_padded)
                fn[nrows, (32, 4)](ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows, k_padded,
                                   nrows)

            # the wrappers (their own buffers, through the API) give the same values as this launch
            got = matmul(b.dev.to_device(ws[0].cpu().numpy()), qtype, b.dev.to_device(x.cpu().numpy()[None]))
            candle(0)
            torch.cuda.synchronize()
            assert np.array_equal(got.to_host()[0], dst.cpu().numpy()), "wrappers and candle's launch disagree"
            t_candle = b.time(candle)
            b.report(f"{qtype} {nrows}x{ncols} candle's launch", t_candle, wbytes, t_mv, "torch.mv f16")
            # quantized_api.matmul launches MMVQ with candle's shape: its figure is this one (ratio 1)
            print(f"{'':48} wrappers' launch = candle's launch (ratio 1.00)")
            del ws


def mmq(b: Bench) -> None:
    """q8_1 + MMQ against pykern's f16 dequantize + torch.matmul, and torch.matmul alone."""
    torch, rng = b.torch, np.random.default_rng(1)
    nrows, ncols = 4096, 4096
    print(f"\nMMQ {nrows}x{ncols} (quantize_q8_1 + mul_mat)")
    quant = b.fn("quantize_q8_1")
    k_padded = -(-ncols // 512) * 512
    for qtype in ("q4_0", "q4_K", "q6_K", "q8_0"):
        ws = b.rotated(random_blocks(rng, qtype, nrows, ncols))
        deq = b.fn(f"dequantize_block_{qtype}_f16")
        per, threads, unit = Q.DEQUANTIZE_LAUNCH[qtype]
        launches = {"candle's": (b.fn(f"mul_mat_{qtype}"), Q.MMQ_TILES[qtype]),
                    "wrappers'": (b.fn(f"mul_mat_rows_{qtype}"), Q.MMQ_WRAPPER_TILE)}
        w16 = torch.empty((nrows, ncols), dtype=torch.float16, device="cuda")
        el = nrows * ncols
        for batch in (16, 32, 128):
            x = torch.randn(batch, ncols, device="cuda")
            x16 = x.half()
            vy = torch.empty(batch * k_padded // 32 * 36, dtype=torch.uint8, device="cuda")
            dst = torch.empty(batch, nrows, device="cuda")

            def dequant_matmul(i, ws=ws, x16=x16):
                deq[-(-el // per), threads](ws[i % len(ws)].data_ptr(), w16.data_ptr(),
                                            *(() if unit is None else (el // unit,)))
                return torch.matmul(x16, w16.T)

            t_ref = b.time(dequant_matmul)
            t_mm = b.time(lambda i, x16=x16: torch.matmul(x16, w16.T))
            for label, (fn, (tile_x, tile_y)) in launches.items():
                def ours(i, ws=ws, fn=fn, x=x, vy=vy, dst=dst, batch=batch, tile_x=tile_x, tile_y=tile_y):
                    quant[(k_padded // 256, batch), 256](x.data_ptr(), vy.data_ptr(), ncols, k_padded)
                    fn[(-(-nrows // tile_y), -(-batch // tile_x)), (32, 4)](
                        ws[i % len(ws)].data_ptr(), vy.data_ptr(), dst.data_ptr(), ncols, nrows, batch, k_padded,
                        nrows)

                t_ours = b.time(ours)
                b.report(f"{qtype} batch {batch} {label} tile {tile_x}x{tile_y}", t_ours, ws[0].numel(), t_ref,
                         "dequant+matmul f16")
            print(f"{'':48} torch.matmul alone (f16 weights) {t_mm * 1e6:9.2f} us")
        del ws


def dequantize(b: Bench) -> None:
    """dequantize_block_* under candle's launch, 2^25 elements (>= 64 MB written in f16, 128 MB in f32)."""
    torch, rng = b.torch, np.random.default_rng(2)
    el = 1 << 25
    rows, cols = el // 4096, 4096
    print(f"\ndequantize_block_* ({el:,} elements; bytes read + written)")
    for q in Q.QTYPES.values():
        w = torch.from_numpy(random_blocks(rng, q.name, rows, cols)).cuda()
        per, threads, unit = Q.DEQUANTIZE_LAUNCH[q.name]
        for dtype, tdt in (("f32", torch.float32), ("f16", torch.float16)):
            out = torch.empty(el, dtype=tdt, device="cuda")
            fn = b.fn(f"dequantize_block_{q.name}_{dtype}")
            t = b.time(lambda i, fn=fn, w=w, out=out: fn[-(-el // per), threads](
                w.data_ptr(), out.data_ptr(), *(() if unit is None else (el // unit,))))
            b.report(f"dequantize_block_{q.name}_{dtype}", t, w.numel() + out.numel() * out.element_size())


def get_rows(b: Bench) -> None:
    """get_rows_* gathering every row of a 8192 x 4096 table once (a permutation), f32 out (128 MB)."""
    torch, rng = b.torch, np.random.default_rng(3)
    rows, hidden = 8192, 4096
    ids = torch.from_numpy(rng.permutation(rows).astype(np.uint32)).cuda()
    out = torch.empty(rows, hidden, device="cuda")
    print(f"\nget_rows_* ({rows} rows of {hidden}; bytes read + written)")
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
        t = b.time(lambda i, fn=fn, table=table: fn[(rows, grid_y), block](
            table.data_ptr(), ids.data_ptr(), out.data_ptr(), hidden, stride))
        nbytes = table.numel() * table.element_size() + out.numel() * 4
        ref = b.time(lambda i, table=table: torch.index_select(table, 0, ids.long()).float()) if name in ("f32", "f16") else None
        b.report(f"get_rows_{name}", t, nbytes, ref, "torch.index_select" if ref else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", choices=["mmvq", "mmq", "dequantize", "get_rows"])
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/quantized.py needs a CUDA GPU")
    torch.cuda.init()
    b = Bench(torch, pk.device("cuda"), args.iters)
    parts = {"mmvq": mmvq, "mmq": mmq, "dequantize": dequantize, "get_rows": get_rows}
    for name, part in parts.items():
        if args.only in (None, name):
            part(b)


if __name__ == "__main__":
    main()
