"""CPU target vs NumPy on elementwise kernels (issue: within 3x of NumPy). Run: python benchmarks/cpu_elementwise.py"""
from __future__ import annotations

import time

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize


@pk.kernel
def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * x[i] + y[i]


@pk.kernel
def add(n: usize, x: ConstPtr[f32], y: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.grid_stride(n):
        out[i] = x[i] + y[i]


def best_of(fn, reps: int = 7) -> float:
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(n: int = 1 << 24) -> None:
    x, y, out = (np.random.rand(n).astype(np.float32) for _ in range(3))
    grid = n // 1024
    cases = [("saxpy", lambda: saxpy[grid, 1024](n, 2.0, x, y), lambda: np.add(2.0 * x, y, out=out)),
             ("add", lambda: add[grid, 1024](n, x, y, out), lambda: np.add(x, y, out=out))]
    print(f"{'kernel':8} {'pykern ms':>10} {'numpy ms':>10} {'ratio':>6}   (n = {n})")
    for name, ours, ref in cases:
        a, b = best_of(ours), best_of(ref)
        print(f"{name:8} {a * 1e3:10.2f} {b * 1e3:10.2f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
