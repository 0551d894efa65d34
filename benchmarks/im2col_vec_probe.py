"""Variants of the 16-bit 3x3 / 3-tap im2col staged channels-last (``conv.im2col_vec``), beside the kernels
the wrappers took before it.

Run on the GPU machine:  python benchmarks/im2col_vec_probe.py [--quick]

On benchmarks/conv.py's buffers ([32,256,56,56] 3x3 p1, [32,256,8192] k3 p1), bf16, each % of the copy
bandwidth measured in the same run, outputs compared with ``F.unfold``: the wrappers' kernels
(``im2col_3x3_bf16`` / ``im2col1d_k3_bf16``), the pair-fill rows kernels they replaced for these windows
(``im2col_rows_pairs_*`` / ``im2col1d_rows_pairs_*``), and ``im2col_vec`` with other fill tasks a batch
(``L``), register budgets (blocks an SM on CUDA) and channels an item (``NV`` vectors); ``--channels``: 3-tap
inputs of other channel counts (the same bytes). The design's earlier forms (a word a thread fill, the fill
pipelined over two stages, the fill or the write alone) are in git history (commit 7a44ba0,
``benchmarks/im2col_cl_probe.py``) and their figures in docs/targets/cuda.md, "Ninth pass" and "Tenth pass".
"""
from __future__ import annotations

import argparse
import os
import sys

import pykern as pk
from pykern import bf16

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stdlib_kernels import conv  # noqa: E402

#: label -> (fill tasks a batch, blocks an SM the registers are sized for on CUDA (0: uncapped), vectors of
#: channels an item), per window
VARIANTS = {"3x3": {"4 tasks a batch": (4, 5, 8)},
            "k3": {"8 vectors an item, 3 tasks (the narrow kernel)": (3, 5, 8), "16 vectors, 3 tasks": (3, 5, 16),
                   "16 vectors, registers for 4 blocks/SM": (4, 4, 16), "16 vectors, for 6 blocks/SM": (4, 6, 16),
                   "32 vectors": (4, 5, 32), "32 vectors, registers for 4 blocks/SM": (4, 4, 32)}}
PROBE = pk.Module("im2col_vec_probe")
for _win, _op in (("3x3", conv.im2col_3x3_op), ("k3", conv.im2col1d_k3_op)):
    for _n, (_l, _mb, _nv) in enumerate(VARIANTS[_win].values()):
        _opts = {"min_blocks_per_sm": {"cuda": _mb}} if _mb else {}
        PROBE.add(pk.kernel(max_block_size=conv.VEC_BLOCK, **_opts)(_op.__wrapped__).instance(
            f"vec_{_win}_v{_n}", T=bf16, L=_l, NV=_nv))


def run(b, quick: bool, channels: tuple[int, ...]) -> None:
    import torch.nn.functional as F

    from conv import Lazy, as_array, info  # benchmarks/conv.py
    from stdlib_kernels import CONV
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    for win, c in [("3x3", 256)] + [("k3", c) for c in channels]:
        if win == "k3":  # the same bytes whatever the channels
            ln = 8192 * 256 // c
            x = torch.randn(batch, c, ln, device="cuda").to(torch.bfloat16)
            cols = torch.empty(batch, ln, c, 3, device="cuda", dtype=torch.bfloat16)
            geo, own, pairs = (1, ln, 1, 3), f"{conv.vec_kernel(3, c)[0]}_bf16", "im2col1d_rows_pairs_bf16"
            label = f"im2col1d k3 p1 [{batch},{c},{ln}] bf16"
            ref = lambda: F.unfold(x.unsqueeze(2), (1, 3), padding=(0, 1))  # noqa: E731
            mine = lambda: cols.view(batch, ln, c * 3).transpose(1, 2)  # noqa: E731
            args = (batch * ln * c, ln, 3, 1, 1, 1, info(torch, x), x.data_ptr(), cols.data_ptr())
        else:
            x = torch.randn(batch, 256, 56, 56, device="cuda").to(torch.bfloat16)
            cols = torch.empty(batch, 56, 56, 256, 3, 3, device="cuda", dtype=torch.bfloat16)
            geo, own, pairs = (56, 56, 3, 3), "im2col_3x3_bf16", "im2col_rows_pairs_bf16"
            label = f"im2col 3x3 p1 [{batch},256,56,56] bf16"
            ref = lambda: F.unfold(x, 3, padding=1)  # noqa: E731
            mine = lambda: cols.view(batch, 56 * 56, 256 * 9).transpose(1, 2)  # noqa: E731
            args = (cols.numel(), 56, 56, 3, 3, 1, 1, 1, info(torch, x), x.data_ptr(), cols.data_ptr())
        xa = as_array(dev, x)
        assert conv.im2col_vec_ok(xa, *geo, 1, 1, 1) and conv.im2col_rows_pairs_ok(xa, *geo, 1, 1, 1)
        grid = conv.im2col_vec_launch(batch, c, *geo, 1, 1)
        cases = {"wrappers' (im2col_vec)": (Lazy(dev, own, CONV), grid),
                 "pair-fill rows kernel": (Lazy(dev, pairs, CONV), conv.im2col_rows_launch(
                     batch, 256, *geo, 1, 1, xa.dtype, dev, one_d=win == "k3", pairs=True))}
        for n, (name, (_, _, nv)) in enumerate(VARIANTS[win].items()):
            items = grid[0] * conv.vec_vectors(9 if win == "3x3" else 3, c) // nv  # the grid for nv vectors an item
            if win == "k3":
                pixels = conv.VEC_STAGE_BYTES // (nv * 16) // 8 * 8 - 5
                items = batch * -(-ln // pixels) * -(-c // (nv * 8))
            cases[name] = (Lazy(dev, f"vec_{win}_v{n}", PROBE), (items, conv.VEC_BLOCK))
        for name, (fn, (g, bl)) in cases.items():
            cols.fill_(float("nan"))
            b.case(f"{label} [{name}]", x.nbytes + cols.nbytes, lambda fn=fn, g=g, bl=bl: fn[g, bl](*args), ref,
                   lambda: (mine(), ref()))


def main() -> None:
    import torch

    from conv import Bench  # benchmarks/conv.py
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--channels", default="256", help="3-tap inputs' channels (comma-separated; same bytes each)")
    args = ap.parse_args()
    run(Bench(torch, pk.device("cuda"), args.reps), args.quick, tuple(int(c) for c in args.channels.split(",")))


if __name__ == "__main__":
    main()
