"""argsort of f32 rows against ``torch.argsort`` on the same GPU, same buffers, same process.

Run on the GPU machine:  python benchmarks/sort.py [--keys-log2 24] [--cols 128,1024,4096,65536]

Rows of 128, 1024, 4096 and 65536 columns, 2^24 keys each case. Three launches of pykern's:

* ``wrappers``: ``stdlib_kernels.sort.argsort`` as a user calls it (``sort_rows_*`` for rows of up to
  ``max_run`` columns, ``sort_runs_*`` then merge passes beyond; output and scratch buffers
  allocated per call, Python included);
* ``wrappers, kernels only``: the same kernels on preallocated buffers (what the launches cost);
* ``candle``: candle's ``asort_asc_f32`` under candle's launch (a block a row, ``min(ncols_pad,
  1024)`` threads, ``ncols_pad * 4`` bytes of shared memory), where it fits in 48 KiB.

against ``torch.argsort(x, dim=-1)`` (and ``stable=True``, since pykern's sort is stable). Times are
``benchmarks/timing.py``'s: CUDA-event medians of 10 back-to-back calls queued behind a GPU-side
sleep, so that the GPU's time is measured, not the host's to issue the first call (the wrappers'
Python allocates the output and scratch: tens of µs); ``--old`` adds the ratio the earlier timing
gave (``back_to_back``: the start event on an idle GPU) for the wrappers' rows. The device's copy
bandwidth is measured the same way in the same run (a sort moves at least 4 bytes in and 4 out a
key: that traffic at copy speed is the floor). Every pykern result is checked once against torch's
sorted values.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import Timer, idle_start  # noqa: E402

COLS = (128, 1024, 4096, 65536)


def back_to_back(torch, fn) -> float:
    """The earlier timing (10 calls between two events, the first event on an idle GPU, 15 samples):
    ``--old``'s column, and indexing.py's "old way" until it takes ``timing.idle_start`` itself."""
    return idle_start(torch, fn, reps=15, calls=10)


def check(label: str, x_host: np.ndarray, order: np.ndarray) -> None:
    """The order must be a permutation of each row that sorts it."""
    got = np.take_along_axis(x_host, order.astype(np.int64), -1)
    ok = (np.sort(order, -1) == np.arange(x_host.shape[-1])).all() and (got == np.sort(x_host, -1)).all()
    if not ok:
        print(f"  MISMATCH {label}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys-log2", type=int, default=24)
    ap.add_argument("--cols", default=",".join(map(str, COLS)))
    ap.add_argument("--old", action="store_true", help="also the wrappers' ratio under the earlier timing")
    args = ap.parse_args()

    import torch

    import pykern as pk
    from stdlib_kernels import SORT, sort
    from stdlib_kernels.sort import next_power_of_two, rows_launch

    dev = pk.device("cuda")
    keys = 1 << args.keys_log2
    timer = Timer(torch)
    copy_bw = timer.copy_bandwidth()
    floor = 8 * keys / copy_bw  # 4 bytes read, 4 written a key at copy speed
    print(f"{dev.name}: copy bandwidth {copy_bw / 1e12:.3f} TB/s; {keys:,} keys a case "
          f"(8 bytes a key at copy speed: {floor * 1e3:.3f} ms)")
    print(f"{'case':46} {'ms':>8} {'Gkeys/s':>8} {'torch ms':>9} {'vs torch':>8} {'vs stable':>9}"
          + (f" {'old way':>7}" if args.old else ""))
    max_run = getattr(sort, "max_run", lambda dtype: sort.MAX_RUN)(pk.f32)

    for cols in map(int, args.cols.split(",")):
        rows = keys // cols
        xd = dev.empty((rows, cols), pk.f32)
        x = torch.from_dlpack(xd)
        x.copy_(torch.randn(rows, cols, device="cuda"))
        x_host = xd.to_host()
        ref = lambda: torch.argsort(x, dim=-1)  # noqa: E731
        t_torch = timer(ref)
        t_stable = timer(lambda: torch.argsort(x, dim=-1, stable=True))

        def report(label: str, seconds: float, old: str = "") -> None:
            print(f"{label:46} {seconds * 1e3:8.3f} {keys / seconds / 1e9:8.2f} {t_torch * 1e3:9.3f} "
                  f"{t_torch / seconds:8.2f} {t_stable / seconds:9.2f}{old}", flush=True)

        check(f"wrappers {cols}", x_host, sort.argsort(xd).to_host())
        wrapped = lambda: sort.argsort(xd)  # noqa: E731
        old = f" {back_to_back(torch, ref) / back_to_back(torch, wrapped):7.3f}" if args.old else ""
        report(f"f32 rows of {cols} [wrappers]", timer(wrapped), old)

        out = dev.empty((rows, cols), pk.u32)
        if cols <= max_run:  # the wrappers' one launch, without the Python around it
            fn = dev.get_or_load_func("sort_rows_asc_f32", SORT)
            cfg = rows_launch(rows, cols, pk.f32)
            launch = lambda: fn[cfg](xd, rows, cols, out)  # noqa: E731
            launch()
            check(f"wrapper kernel {cols}", x_host, out.to_host())
            report(f"f32 rows of {cols} [wrappers, kernels only]", timer(launch))

        ncols_pad = next_power_of_two(cols)
        if ncols_pad * 4 <= 48 * 1024:
            fn = dev.get_or_load_func("asort_asc_f32", SORT)
            cfg = ((rows, 1, 1), (min(ncols_pad, 1024), 1, 1), None, ncols_pad * 4)
            launch = lambda: fn[cfg](xd, out, cols, ncols_pad)  # noqa: E731
            launch()
            check(f"candle {cols}", x_host, out.to_host())
            report(f"f32 rows of {cols} [candle's launch]", timer(launch))
        else:
            print(f"f32 rows of {cols} [candle's launch]: needs {ncols_pad * 4 // 1024} KiB of shared memory "
                  f"(48 KiB without opt-in): candle cannot launch it")


if __name__ == "__main__":
    main()
