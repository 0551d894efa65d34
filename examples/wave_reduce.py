"""Wave-shuffle reduction: each wave sums its lanes with shuffle_down (no shared memory), then
one atomic add per wave.  Correct at wave widths 32 and 64.  Run: python examples/wave_reduce.py
"""
import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize


@pk.kernel
def wave_sum(n: usize, x: ConstPtr[f32], out: Ptr[f32]):
    acc: f32 = 0
    for i in pk.grid_stride(n):
        acc += x[i]
    offset = pk.wave_size // 2               # a compile-time constant per target
    while offset > 0:
        acc += pk.wave.shuffle_down(acc, offset)
        offset = offset // 2
    if pk.lane_id() == 0:                    # lane 0 now holds the wave's total
        pk.atomic.add(out, 0, acc)


def main() -> None:
    n = 1 << 18
    x = (np.arange(n) % 7).astype(np.float32)          # small integers: the sum is exact in f32
    ok = True
    devices = [pk.device("cpu", wave_size=32), pk.device("cpu", wave_size=64)]
    if pk.device().kind != "cpu":
        devices.append(pk.device())
    for dev in devices:
        out = dev.zeros(1, np.float32)
        wave_sum[32, 256](n, dev.to_device(x), out)
        got, expected = float(out.to_host()[0]), float(x.sum(dtype=np.float64))
        ok &= got == expected
        print(f"wave reduction on {dev} (wave size {dev.target.wave_size}): {got:.0f} vs {expected:.0f}: "
              f"{'OK' if got == expected else 'FAILED'}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
