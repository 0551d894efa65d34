"""upsample_bilinear2d's rows kernel (``conv.bilinear_rows``) with row groups sized for 1 to 16 tiles a thread.

Run on the GPU machine:  python benchmarks/bilinear_probe.py [--quick]

On benchmarks/conv.py's buffers ([32,256,56,56] -> 112x112, align_corners off; and 56x56 -> 84x84, a scale of
1.5), f32 and bf16, each % of the copy bandwidth measured in the same run and x ``F.interpolate``, outputs
compared with torch's: ``RT`` (``conv.BILINEAR_ROW_TILES``, the wrappers' 8) 1 to 16 16-byte tiles of a row a
thread, so that a thread's share of a row's setup (its source rows, weight, offsets) spreads over more
outputs, and registers capped for 6 blocks of 256 an SM (the kernel: 64 registers, 4 blocks), under the
wrappers' launch (``conv.rows_launch``). Earlier probes (commits c0b9e16, 7bc85de and 05ce912: tiles of
outputs in order, strips in shared memory, walks down columns, the arithmetic in f32) are in
docs/targets/cuda.md.
"""
from __future__ import annotations

import argparse
import os
import sys

import pykern as pk
from pykern import bf16, f32

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stdlib_kernels import conv, kernel_name  # noqa: E402

PROBE = pk.Module("bilinear_probe")
#: (the kernels' RT: 16-byte tiles of a row a thread is sized for, blocks of 256 an SM its registers are
#: capped for on CUDA; 0: the 64 of blocks up to 1024)
RTS = ((1, 0), (2, 0), (4, 0), (8, 0), (16, 0), (1, 6), (4, 6))
for _rt, _mb in RTS:
    _opts = {"max_block_size": conv.ROW_BLOCK, "min_blocks_per_sm": {"cuda": _mb}} if _mb else {}
    for _t in (f32, bf16):
        PROBE.add(pk.kernel(**_opts)(conv.upsample_bilinear2d_op.__wrapped__).instance(
            f"{kernel_name('upsample_bilinear2d', _t)}_rt{_rt}_{_mb}", T=_t, NARROW=conv.NARROW, RT=_rt))


def run(b, quick: bool) -> None:
    import torch.nn.functional as F

    from conv import Lazy, as_array, info  # benchmarks/conv.py
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    for tag, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        for size in (112, 84):
            xu = torch.randn(batch, 256, 56, 56, device="cuda").to(dt)
            ou = torch.empty(batch, 256, size, size, device="cuda", dtype=dt)
            infu = info(torch, xu)
            grid = conv.rows_launch(batch * 256 * size, size, as_array(dev, ou).dtype, dev)
            ref = lambda s=size: F.interpolate(xu, size=(s, s), mode="bilinear", align_corners=False)  # noqa: E731
            for rt, mb in RTS:
                fn = Lazy(dev, f"upsample_bilinear2d_{tag}_rt{rt}_{mb}", PROBE)
                ou.fill_(float("nan"))
                b.case(f"upsample_bilinear2d 56->{size} [{batch},256] {tag} [row tiles {rt}, blocks/SM {mb}]", xu.nbytes + ou.nbytes,
                       lambda fn=fn, s=size: fn[grid](s, s, False, False, 0.0, False, 0.0, infu, xu.data_ptr(),
                                                      ou.data_ptr()), ref, lambda r=ref: (ou, r()))


def main() -> None:
    import torch

    from conv import Bench  # benchmarks/conv.py
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    run(Bench(torch, pk.device("cuda"), args.reps), args.quick)


if __name__ == "__main__":
    main()
