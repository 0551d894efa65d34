"""upsample_bilinear2d's strips (``conv.bilinear_strips``) against its rows kernel (``conv.bilinear_rows``).

Run on the GPU machine:  python benchmarks/bilinear_probe.py [--quick]

On benchmarks/conv.py's buffers ([32,256,56,56] -> 112x112, align_corners off; and 56x56 -> 84x84, a
scale of 1.5), f32 and bf16, each % of the copy bandwidth measured in the same run and x
``F.interpolate``, outputs compared with torch's: ``STRIPS`` 0 (``bilinear_rows``: each output's four
source values gathered and converted to f64) and 1 (the wrappers' ``bilinear_strips``: a strip's source
rows interpolated along w once, each output from two of them), under the wrappers' launch
(``conv.rows_launch``). An earlier probe (commit c0b9e16: tiles of outputs in order, each column converted
once a tile; and the arithmetic in f32) is in docs/targets/cuda.md.
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
for _strips in (0, 1):
    for _t in (f32, bf16):
        PROBE.add(conv.upsample_bilinear2d_op.instance(f"{kernel_name('upsample_bilinear2d', _t)}_strips{_strips}",
                                                       T=_t, NARROW=conv.NARROW, PER=0,
                                                       STRIPS=_strips * conv.BILINEAR_STRIP_ENTRIES))


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
            for strips in (0, 1):
                fn = Lazy(dev, f"upsample_bilinear2d_{tag}_strips{strips}", PROBE)
                ou.fill_(float("nan"))
                b.case(f"upsample_bilinear2d 56->{size} [{batch},256] {tag} [strips {strips}]", xu.nbytes + ou.nbytes,
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
