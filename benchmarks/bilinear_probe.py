"""upsample_bilinear2d down columns (``conv.bilinear_walk``) against its rows kernel (``conv.bilinear_rows``).

Run on the GPU machine:  python benchmarks/bilinear_probe.py [--quick]

On benchmarks/conv.py's buffers ([32,256,56,56] -> 112x112, align_corners off; and 56x56 -> 84x84, a
scale of 1.5), f32 and bf16, each % of the copy bandwidth measured in the same run and x
``F.interpolate``, outputs compared with torch's: ``WALK`` 0 (``bilinear_rows``: each output's four
source values gathered through column tables and converted to f64) and the wrappers' ``bilinear_walk``
with 8 to 64 output rows a thread walks a unit, under the wrappers' launch (``conv.rows_launch``).
Earlier probes (commits c0b9e16 and 7bc85de: tiles of outputs in order, strips in shared memory, the
arithmetic in f32) are in docs/targets/cuda.md.
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
#: the kernels' WALK: output rows a thread walks a unit (0: ``bilinear_rows``)
WALKS = (0, 8, 16, 32, 64)
for _walk in WALKS:
    for _t in (f32, bf16):
        PROBE.add(conv.upsample_bilinear2d_op.instance(f"{kernel_name('upsample_bilinear2d', _t)}_walk{_walk}",
                                                       T=_t, NARROW=conv.NARROW, WALK=_walk))


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
            for walk in WALKS:
                fn = Lazy(dev, f"upsample_bilinear2d_{tag}_walk{walk}", PROBE)
                ou.fill_(float("nan"))
                b.case(f"upsample_bilinear2d 56->{size} [{batch},256] {tag} [walk {walk}]", xu.nbytes + ou.nbytes,
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
