"""saxpy: y = a * x + y over a grid-stride loop.  Run: python examples/saxpy.py"""
import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize


@pk.kernel
def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * x[i] + y[i]


def main() -> None:
    dev = pk.device()                      # the first GPU, else the CPU
    n = 1 << 20
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = dev.to_device(x), dev.to_device(y)
    saxpy[64, 256](n, 2.5, dx, dy)
    got = dy.to_host()
    expected = np.float32(2.5) * x + y
    ok = np.allclose(got, expected, rtol=1e-6, atol=1e-6)
    print(f"saxpy on {dev}: n={n}, max error {np.abs(got - expected).max():.3g}: {'OK' if ok else 'FAILED'}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
