"""Block reduction: each block sums its slice in shared memory, halving with a barrier per step.

Run: python examples/block_reduce.py
"""
import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, u32, usize

BLOCK = 256


@pk.kernel
def block_sum(n: usize, x: ConstPtr[f32], partial: Ptr[f32]):
    buf = pk.shared.array(BLOCK, f32)
    t = pk.thread_idx.x
    acc: f32 = 0
    for i in pk.grid_stride(n):              # each thread first sums a strided share of the input
        acc += x[i]
    buf[t] = acc
    pk.syncthreads()
    s = BLOCK // 2
    while s > 0:                             # tree reduction in shared memory
        if t < u32(s):
            buf[t] += buf[t + u32(s)]
        pk.syncthreads()                     # every thread of the block reaches each barrier
        s = s // 2
    if t == 0:
        partial[pk.block_idx.x] = buf[0]


def main() -> None:
    dev = pk.device()
    n, blocks = 1_000_003, 64
    x = np.random.default_rng(1).random(n, dtype=np.float32)
    partial = dev.zeros(blocks, np.float32)
    block_sum[blocks, BLOCK](n, dev.to_device(x), partial)
    total = float(partial.to_host().astype(np.float64).sum())
    expected = float(x.astype(np.float64).sum())
    ok = abs(total - expected) <= 1e-4 * abs(expected)
    print(f"block reduction on {dev}: sum={total:.3f}, numpy={expected:.3f}: {'OK' if ok else 'FAILED'}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
