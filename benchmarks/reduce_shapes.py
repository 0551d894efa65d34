"""Which launch shapes suit the reduce family's kernels, for the Python wrappers to pick from.

candle's shapes are fixed by its Rust side (``gpu.py`` times those); the wrappers may launch the same
kernels differently wherever every shape is correct, and this probe times the candidates against
PyTorch on the same rows: ``fast_*`` grids dense in waves (a row per wave, any grid covers every
row), softmax with more lanes per row, rms/layernorm with a wave per row and several rows a block.
Run on the GPU machine: ``python benchmarks/reduce_shapes.py``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from gpu import Bench, row_cases  # noqa: E402


def agree(label: str, ours, theirs) -> None:
    """A shape that is fast but wrong must not be picked: compare with PyTorch once per shape."""
    ours, theirs = ours.float(), theirs.float()
    bad = (ours - theirs).abs().max().item() > 2e-2 * max(1.0, theirs.abs().max().item())
    if bad:
        print(f"  MISMATCH {label}: max |diff| {(ours - theirs).abs().max().item():.3g}", flush=True)


def main() -> None:
    import torch

    import pykern as pk
    import stdlib_kernels as sk

    dev = pk.device("cuda")
    b = Bench(torch, dev, 1 << 28)
    n = b.n
    for cols, rows, tdt, tag, x, out in row_cases(torch, n):
        nb = x.nbytes
        if tag == "f32":
            red = torch.empty(rows, device="cuda")
            idx = torch.empty(rows, device="cuda", dtype=torch.int32)
            info = dev.to_device(np.array([rows, cols, cols, 1], dtype=np.uint64))
            shapes = [(rows, 1024, "candle")] + ([(-(-rows // (blk // 32)), blk, f"dense {blk}")
                                                  for blk in (256, 512, 1024)] if cols <= 4096 else
                                                 [(rows, blk, f"row/block {blk}") for blk in (256, 512)])
            for op, ref, o in (("fast_sum", lambda: x.sum(-1), red), ("fast_max", lambda: x.amax(-1), red),
                               ("fast_argmax", lambda: x.argmax(-1), idx)):
                f = b.fn(sk.REDUCE, f"{op}_{tag}")
                for grid, blk, label in shapes:
                    f[grid, blk](n, cols, 2, info, x.data_ptr(), o.data_ptr())
                    agree(f"{op} {cols} {label}", o, ref())
                    b.case(f"{op} {tag} {cols} {label}", nb, lambda f=f, o=o, g=grid, k=blk: f[g, k](
                        n, cols, 2, info, x.data_ptr(), o.data_ptr()), ref)
        f = b.fn(sk.REDUCE, f"softmax_{tag}")
        for lanes in (32, 64, 128, 256, 1024):
            f[(rows, 1, 1), (1, lanes, 1)](x.data_ptr(), out.data_ptr(), cols)
            agree(f"softmax {tag} {cols} {lanes}", out, torch.softmax(x.float(), -1))
            b.case(f"softmax {tag} {cols} (1,{lanes},1)", 2 * nb, lambda f=f, k=lanes: f[(rows, 1, 1), (1, k, 1)](
                x.data_ptr(), out.data_ptr(), cols), lambda: torch.softmax(x, -1))
        alpha = torch.ones(cols, device="cuda", dtype=tdt)
        beta = torch.zeros(cols, device="cuda", dtype=tdt)
        norm_shapes = [((rows, 1, 1), (1024, 1, 1), "candle 1024"), ((rows, 1, 1), (32, 1, 1), "(32,1)"),
                       ((rows // 4, 1, 1), (32, 4, 1), "(32,4)"), ((rows // 8, 1, 1), (32, 8, 1), "(32,8)"),
                       ((rows, 1, 1), (128, 1, 1), "(128,1)"), ((rows, 1, 1), (256, 1, 1), "(256,1)")]
        for name, ref, extra in (
                ("rmsnorm", lambda: torch.nn.functional.rms_norm(x, (cols,), alpha, 1e-5), [alpha.data_ptr()]),
                ("layernorm", lambda: torch.nn.functional.layer_norm(x, (cols,), alpha, beta, 1e-5),
                 [alpha.data_ptr(), beta.data_ptr()])):
            f = b.fn(sk.REDUCE, f"{name}_{tag}")
            for grid, blk, label in norm_shapes:
                f[grid, blk](x.data_ptr(), out.data_ptr(), *extra, cols, blk[0], 1e-5)
                agree(f"{name} {tag} {cols} {label}", out, ref())
                b.case(f"{name} {tag} {cols} {label}", 2 * nb, lambda f=f, g=grid, k=blk, e=extra: f[g, k](
                    x.data_ptr(), out.data_ptr(), *e, cols, k[0], 1e-5), ref)


if __name__ == "__main__":
    main()
