"""How long the first call of a stdlib wrapper takes in a fresh process on an empty cache: what a new
user waits for (issue 29: at most 2 s on the CPU target and on a GPU). Each case runs in its own
process with its own empty ``PYKERN_CACHE_DIR``; the figure is that call's wall time (compiling the
kernels it launches, loading them, running once), after ``import pykern, stdlib_kernels``.

    python benchmarks/first_use.py              # the CPU target
    python benchmarks/first_use.py --device cuda
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CASES = {
    "unary.exp": "from stdlib_kernels import unary; unary.exp(x)",
    "binary.add": "from stdlib_kernels import binary; binary.add(x, x)",
    "ternary.where": "from stdlib_kernels import ternary; ternary.where(c, x, x)",
    "reduce.softmax_last_dim": "from stdlib_kernels import reduce; reduce.softmax_last_dim(x)",
    "reduce.rms_norm": "from stdlib_kernels import reduce; reduce.rms_norm(x, a, 1e-5)",
    "indexing.index_select": "from stdlib_kernels import indexing; indexing.index_select(x, ids, 0)",
    "sort.argsort": "from stdlib_kernels import sort; sort.argsort(x)",
    "conv.max_pool2d": "from stdlib_kernels import conv_launch; conv_launch.max_pool2d(x4, 2)",
    "quantized.dequantize": "from stdlib_kernels import quantized_api; quantized_api.dequantize(q, 'q8_0', (64, 1024))",
}

SETUP = textwrap.dedent('''
    import time, numpy as np
    import pykern as pk, stdlib_kernels
    dev = pk.device({device!r})
    rng = np.random.default_rng(0)
    x = dev.to_device(rng.standard_normal((64, 1024)).astype(np.float32))
    x4 = dev.to_device(rng.standard_normal((2, 4, 16, 16)).astype(np.float32))
    a = dev.to_device(np.ones(1024, np.float32))
    c = dev.to_device((rng.integers(0, 2, (64, 1024))).astype(np.uint8))
    ids = dev.to_device(np.array([3, 1, 4, 1, 5], np.uint32))
    q = dev.to_device(np.zeros(64 * 1024 // 32 * 34, np.uint8))
    start = time.perf_counter()
    {call}
    dev.synchronize()
    print(f"{{time.perf_counter() - start:.3f}}")
''')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    print(f"first call on an empty cache, device {args.device}")
    worst = 0.0
    for name, call in CASES.items():
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PYKERN_CACHE_DIR": cache, "PYTHONPATH": f"{root}{os.pathsep}" + os.environ.get("PYTHONPATH", "")}
            r = subprocess.run([sys.executable, "-c", SETUP.format(device=args.device, call=call)],
                               capture_output=True, text=True, env=env, cwd=root)
        if r.returncode:
            print(f"{name:28s} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
            continue
        seconds = float(r.stdout.strip().splitlines()[-1])
        worst = max(worst, seconds)
        print(f"{name:28s} {seconds:6.2f} s")
    print(f"slowest first call: {worst:.2f} s")


if __name__ == "__main__":
    main()
