"""upsample_bilinear2d's rows kernel (``conv.bilinear_rows``) with row groups sized for 2 to 16 tiles a thread.

Run on the GPU machine:  python benchmarks/bilinear_probe.py [--quick] [--match REGEX]
                         python benchmarks/bilinear_probe.py --int {2,4} [--batch N]

On benchmarks/conv.py's buffers ([32,256,56,56] -> 112x112, align_corners off; 56x56 -> 84x84, a scale of 1.5;
[8,256,56,56] -> 224x224, 4x; [32,256,112,112] -> 56x56, a downscale), f32 and bf16, each % of the copy
bandwidth measured in the same run and x ``F.interpolate``, outputs compared with torch's, under the
wrappers' launch (``conv.rows_launch``): ``RT`` 16-byte tiles of a row a thread (which sets the threads a row,
``conv.row_group``) fixed at 2 to 16, and 0: the wrappers' rule (``conv.bilinear_row_tiles``, 4 times the
upscale along w). Earlier probes are in
docs/targets/cuda.md: tiles of outputs in order, strips in shared memory, walks down columns, the
arithmetic in f32 (commits c0b9e16, 7bc85de, 05ce912), RT 1 to 16 with register caps (f7dc886), and a
unit the output rows of one source row (``bilinear_runs``, commit beb1429).
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
#: the kernels' RT: 16-byte tiles of a row a thread is sized for (0: conv.bilinear_row_tiles' rule)
VARIANTS = (0, 2, 4, 8, 16)
for _rt in VARIANTS:
    for _t in (f32, bf16):
        PROBE.add(conv.upsample_bilinear2d_op.instance(f"{kernel_name('upsample_bilinear2d', _t)}_rt{_rt}", T=_t,
                                                       NARROW=conv.NARROW, RT=_rt))
#: candle's kernel compiled for the wrappers' blocks (conv.ROW_BLOCK threads) instead of candle's 1024: the
#: registers it may take (64 under 1024-thread blocks)
SMALL_BLOCKS = pk.kernel(conv.upsample_bilinear2d_op.__wrapped__, max_block_size=conv.ROW_BLOCK)
for _t in (f32, bf16):
    PROBE.add(SMALL_BLOCKS.instance(f"{kernel_name('upsample_bilinear2d', _t)}_rule_b{conv.ROW_BLOCK}", T=_t,
                                    NARROW=conv.NARROW, RT=0))


#: the exact-factor kernels (``conv.upsample_bilinear2d_int_op``) per factor in blocks of this many threads with
#: register bounds for this many of them an SM (0: none), and the wrappers' grid at this many blocks an SM
#: (``conv.BILINEAR_INT_SHAPES`` holds the choice)
INT_BLOCKS = {2: ((256, 0), (256, 3), (128, 6), (64, 12)), 4: ((64, 0), (64, 12), (128, 0), (128, 6), (256, 0))}
INT_GRIDS = {2: (24, 48, 96), 4: (48, 96, 192)}
for _f, _blocks in INT_BLOCKS.items():
    for _block, _mb in _blocks:
        _k = pk.kernel(conv.upsample_bilinear2d_int_op, max_block_size=_block, min_blocks_per_sm={"cuda": _mb})
        for _t in (f32, bf16):
            PROBE.add(_k.instance(f"{kernel_name(f'upsample_bilinear2d_{_f}x', _t)}_b{_block}_m{_mb}", T=_t,
                                  NARROW=conv.NARROW, RT=0, F=_f))


def run_int(b, factor: int, batch: int) -> None:
    """The exact-``factor`` kernel at INT_BLOCKS x INT_GRIDS on [batch,256,56,56] (-> 112 at 2x, 224 at 4x),
    beside the generic kernel under the wrappers' old grid (rows_launch over the output rows) and the
    wrappers' nearest upsampling of the same buffers (the same bytes moved, no arithmetic: the floor)."""
    import torch.nn.functional as F

    from conv import Lazy, as_array, info  # benchmarks/conv.py
    torch, dev = b.torch, b.dev
    size = 56 * factor
    for tag, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        xu = torch.randn(batch, 256, 56, 56, device="cuda").to(dt)
        ou = torch.empty(batch, 256, size, size, device="cuda", dtype=dt)
        infu = info(torch, xu)
        ref = lambda x=xu: F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)  # noqa: E731
        cases = [(f"generic [rows_launch]", Lazy(dev, f"upsample_bilinear2d_{tag}", conv.CONV),
                  conv.rows_launch(batch * 256 * size, size, as_array(dev, ou).dtype, dev))]
        unit = max(1, min(16 // factor // xu.element_size(), conv.BILINEAR_INT_UNIT_MAX))
        for block, mb in INT_BLOCKS[factor]:
            for per_sm in INT_GRIDS[factor]:
                grid = conv.rows_launch(batch * 256 * -(-56 // unit), 56, as_array(dev, xu).dtype, dev,
                                        per_sm=per_sm, block=block)
                cases.append((f"{factor}x blocks of {block} bound {mb or '-'} grid {per_sm}/SM",
                              Lazy(dev, f"upsample_bilinear2d_{factor}x_{tag}_b{block}_m{mb}", PROBE), grid))
        # the floor: nearest upsampling of the same buffers moves the same bytes with no arithmetic
        nearest = Lazy(dev, f"upsample_nearest2d_{tag}", conv.CONV)
        b.case(f"nearest {factor}x [{batch},256,56,56] {tag} (the floor)", xu.nbytes + ou.nbytes,
               lambda g=conv.nearest_launch(as_array(dev, xu), size, size), x=xu, o=ou, i=infu:
               nearest[g](size, size, 1.0 / factor, 1.0 / factor, i, x.data_ptr(), o.data_ptr()),
               lambda x=xu: F.interpolate(x, size=(size, size), mode="nearest"))
        for label, fn, grid in cases:
            ou.fill_(float("nan"))
            b.case(f"bilinear {factor}x [{batch},256,56,56] {tag} {label}", xu.nbytes + ou.nbytes,
                   lambda fn=fn, g=grid, x=xu, o=ou, i=infu: fn[g](size, size, False, False, 0.0, False, 0.0, i,
                                                                  x.data_ptr(), o.data_ptr()),
                   ref, lambda r=ref, o=ou: (o, r()))


def run(b, quick: bool) -> None:
    import torch.nn.functional as F

    from conv import Lazy, as_array, info  # benchmarks/conv.py
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    cases = ((batch, 56, 112), (batch, 56, 84), (batch // 4, 56, 224), (batch, 112, 56))
    for tag, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        for n, h, size in cases:
            xu = torch.randn(n, 256, h, h, device="cuda").to(dt)
            ou = torch.empty(n, 256, size, size, device="cuda", dtype=dt)
            infu = info(torch, xu)
            grid = conv.rows_launch(n * 256 * size, size, as_array(dev, ou).dtype, dev)
            ref = lambda x=xu, s=size: F.interpolate(x, size=(s, s), mode="bilinear", align_corners=False)  # noqa: E731
            for rt in VARIANTS + (f"rule_b{conv.ROW_BLOCK}",):
                fn = Lazy(dev, f"upsample_bilinear2d_{tag}_{rt}" if isinstance(rt, str) else
                          f"upsample_bilinear2d_{tag}_rt{rt}", PROBE)
                ou.fill_(float("nan"))
                b.case(f"bilinear {h}->{size} [{n},256] {tag} [RT {rt or 'rule'}]", xu.nbytes + ou.nbytes,
                       lambda fn=fn, s=size, x=xu, o=ou, i=infu: fn[grid](s, s, False, False, 0.0, False, 0.0, i,
                                                                          x.data_ptr(), o.data_ptr()),
                       ref, lambda r=ref, o=ou: (o, r()))


def main() -> None:
    import torch

    from conv import Bench  # benchmarks/conv.py
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--int", type=int, choices=(2, 4), default=0,
                    help="the exact-factor kernel of this factor in several blocks and grids")
    ap.add_argument("--batch", type=int, default=0, help="--int's batch (default 32 at 2x, 8 at 4x)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--match", default="", help="only the cases whose label matches this regex")
    args = ap.parse_args()
    b = Bench(torch, pk.device("cuda"), args.reps)
    b.match = args.match
    if args.int:
        run_int(b, args.int, args.batch or (32 if args.int == 2 else 8))
    else:
        run(b, args.quick)


if __name__ == "__main__":
    main()
