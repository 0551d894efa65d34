"""The stdlib's info-taking kernels under candle's exact launch convention, against the null-info
launch and against PyTorch (issue 25).

Run on the GPU machine:  python benchmarks/candle_launch.py [--size-log2 28] [--dims 2]

candle passes ``info`` (dims, then each operand's strides) on every launch, even when every operand
is contiguous, and launches ``ceil(numel / 1024)`` blocks of 1024 threads. A kernel that took its
contiguous loop only for a null ``info`` ran ``where_u8_f32`` at 0.37x torch on an H100 under that
convention. Each row times the same kernel three ways on the same buffers: candle's arguments
(``info`` describing contiguous operands of a ``--dims``-d shape), the null-``info`` launch, and the
PyTorch op. The target: ``info/null`` >= 0.90 for every family.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu import timed  # noqa: E402  (CUDA-event medians, shared with benchmarks/gpu.py)


def candle_info(dev, shape: tuple[int, ...], operands: int):
    """candle's info for ``operands`` contiguous operands of ``shape``: dims, then strides per operand."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= n
    return dev.to_device(np.array(list(shape) + strides * operands, dtype=np.uint64))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-log2", type=int, default=28)
    ap.add_argument("--dims", type=int, default=2, help="rank of the shape candle describes in info")
    args = ap.parse_args()
    import torch

    import pykern as pk
    import stdlib_kernels as sk
    if not torch.cuda.is_available():
        sys.exit("benchmarks/candle_launch.py needs a CUDA GPU")
    dev = pk.device("cuda")
    n = 1 << args.size_log2
    shape = (n,) if args.dims == 1 else (1 << 10,) * (args.dims - 1) + (n >> (10 * (args.dims - 1)),)
    grid, block = (-(-n // 1024), 1, 1), (1024, 1, 1)
    nd = len(shape)
    x0 = torch.empty(n, device="cuda")
    copy_bw = 2 * x0.nbytes / timed(torch, lambda: x0.clone())
    print(f"device: {torch.cuda.get_device_name()}  copy bandwidth {copy_bw / 1e12:.2f} TB/s  n = {n:,}  "
          f"info shape {shape}")
    print(f"{'kernel':24} {'info ms':>8} {'null ms':>8} {'torch ms':>8} {'info/null':>9} {'info/torch':>10}")
    rows = []

    def row(label, with_info, null_info, theirs):
        t_info, t_null, t_torch = timed(torch, with_info), timed(torch, null_info), timed(torch, theirs)
        rows.append((label, t_null / t_info, t_torch / t_info))
        print(f"{label:24} {t_info * 1e3:8.3f} {t_null * 1e3:8.3f} {t_torch * 1e3:8.3f} "
              f"{t_null / t_info:9.2f} {t_torch / t_info:10.2f}", flush=True)

    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = torch.randn(n, device="cuda").to(tdt)
        y = torch.randn(n, device="cuda").to(tdt)
        out = torch.empty_like(x)
        cond = (torch.rand(n, device="cuda") > 0.5).to(torch.uint8)
        px, py, po, pc = x.data_ptr(), y.data_ptr(), out.data_ptr(), cond.data_ptr()
        info1, info2, info3 = (candle_info(dev, shape, k) for k in (1, 2, 3))
        for op, ref in (("exp", torch.exp), ("gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
                        ("copy", lambda t: out.copy_(t))):
            name = f"u{op}_{tag}"
            if name in sk.UNARY:
                f = dev.get_or_load_func(name, sk.UNARY)
                row(name, lambda f=f: f[grid, block](n, nd, info1, px, po),
                    lambda f=f: f[grid, block](n, nd, None, px, po), lambda ref=ref: ref(x))
        for op in ("add", "mul"):
            name = f"b{op}_{tag}"
            if name in sk.BINARY:
                f = dev.get_or_load_func(name, sk.BINARY)
                ref = torch.add if op == "add" else torch.mul
                row(name, lambda f=f: f[grid, block](n, nd, info2, px, py, po),
                    lambda f=f: f[grid, block](n, nd, None, px, py, po), lambda ref=ref: ref(x, y, out=out))
        name = f"where_u8_{tag}"
        if name in sk.TERNARY:
            f = dev.get_or_load_func(name, sk.TERNARY)
            row(name, lambda f=f: f[grid, block](n, nd, info3, pc, px, py, po),
                lambda f=f: f[grid, block](n, nd, None, pc, px, py, po), lambda: torch.where(cond.bool(), x, y))
        name = f"affine_{tag}"
        if name in sk.AFFINE:
            f = dev.get_or_load_func(name, sk.AFFINE)
            row(name, lambda f=f: f[grid, block](n, nd, info1, px, po, 1.5, 0.5),
                lambda f=f: f[grid, block](n, nd, None, px, po, 1.5, 0.5), lambda: torch.add(x * 1.5, 0.5))
        name = f"const_set_{tag}"
        if name in sk.FILL:
            f = dev.get_or_load_func(name, sk.FILL)
            row(name, lambda f=f: f[grid, block](n, nd, info1, 1.0, po),
                lambda f=f: f[grid, block](n, nd, None, 1.0, po), lambda: out.fill_(1.0))
    xf, xb = torch.randn(n, device="cuda"), torch.empty(n, dtype=torch.bfloat16, device="cuda")
    info1 = candle_info(dev, shape, 1)
    for src, dst, name, ref in ((xf, xb, "cast_f32_bf16", lambda: xf.to(torch.bfloat16)),
                                (xb, xf, "cast_bf16_f32", lambda: xb.to(torch.float32))):
        if name in sk.CAST:
            f = dev.get_or_load_func(name, sk.CAST)
            ps, pd = src.data_ptr(), dst.data_ptr()
            row(name, lambda f=f, ps=ps, pd=pd: f[grid, block](n, nd, info1, ps, pd),
                lambda f=f, ps=ps, pd=pd: f[grid, block](n, nd, None, ps, pd), ref)
    worst = min(rows, key=lambda r: r[1])
    geo = float(np.exp(np.mean([np.log(r[2]) for r in rows])))
    print(f"worst info/null: {worst[1]:.2f} ({worst[0]}); geometric mean info/torch: {geo:.2f} over {len(rows)} kernels")


if __name__ == "__main__":
    main()
