"""How long the first call of a stdlib wrapper takes in a fresh process on an empty cache: what a new
user waits for (issue 29: at most 2 s on the CPU target and on a GPU). Each case runs in its own
process with its own empty ``PYKERN_CACHE_DIR``; the figures are that call's wall time and its
process CPU time (compiling the kernels it launches, loading them, running once), after ``import
pykern, stdlib_kernels``. On a shared machine the CPU time is the figure to trust. Results are in
docs/targets/cpu.md ("First use").

    python benchmarks/first_use.py              # the CPU target, every case
    python benchmarks/first_use.py --only reduce
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
    "indexing.index_select": "from stdlib_kernels import indexing; indexing.index_select(x, ids, 0)",
    "sort.argsort": "from stdlib_kernels import sort; sort.argsort(x)",
    "conv.max_pool2d": "from stdlib_kernels import conv_launch; conv_launch.max_pool2d(x4, 2)",
    "quantized.dequantize": "from stdlib_kernels import quantized_api; quantized_api.dequantize(q, 'q8_0', (64, 1024))",
    "quantized.matmul 1 row": "from stdlib_kernels import quantized_api; quantized_api.matmul(q, 'q8_0', x1)",
    "quantized.matmul 16 rows": "from stdlib_kernels import quantized_api; quantized_api.matmul(q, 'q8_0', x16)",
}
#: the reduce family's wrappers, each at each dtype it takes (each dtype is its own kernel)
for _t in ("f32", "f64", "f16", "bf16"):
    CASES.update({
        f"reduce.softmax_last_dim {_t}": f"from stdlib_kernels import reduce; reduce.softmax_last_dim(xs['{_t}'])",
        f"reduce.rms_norm {_t}": f"from stdlib_kernels import reduce; reduce.rms_norm(xs['{_t}'], ones['{_t}'], 1e-5)",
        f"reduce.layer_norm {_t}":
            f"from stdlib_kernels import reduce; reduce.layer_norm(xs['{_t}'], ones['{_t}'], ones['{_t}'], 1e-5)",
        f"reduce.sum {_t}": f"from stdlib_kernels import reduce; reduce.reduce_sum(xs['{_t}'], [1])",
        f"reduce.argmax {_t}": f"from stdlib_kernels import reduce; reduce.argmax(xs['{_t}'], 1)",
        f"reduce.rope {_t}": f"from stdlib_kernels import reduce; reduce.rope(r4['{_t}'], cs['{_t}'], cs['{_t}'])",
    })
CASES.update({
    "reduce.max f32": "from stdlib_kernels import reduce; reduce.reduce_max(xs['f32'], [1])",
    "reduce.min f32": "from stdlib_kernels import reduce; reduce.reduce_min(xs['f32'], [1])",
    "reduce.argmin f32": "from stdlib_kernels import reduce; reduce.argmin(xs['f32'], 1)",
    "reduce.rope_i f32": "from stdlib_kernels import reduce; reduce.rope_i(r4['f32'], cs['f32'], cs['f32'])",
    "reduce.rope_thd f32": "from stdlib_kernels import reduce; reduce.rope_thd(r4['f32'], cs['f32'], cs['f32'])",
    "reduce.sum_atomic f32": "from stdlib_kernels import reduce; reduce.sum_atomic_launch(xs['f32'], [1])",
})

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
    x1 = dev.to_device(rng.standard_normal((1, 1024)).astype(np.float32))
    x16 = dev.to_device(rng.standard_normal((16, 1024)).astype(np.float32))
    host = {{"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": pk.bf16.np}}
    xs = {{k: dev.to_device(rng.standard_normal((64, 1024)).astype(t)) for k, t in host.items()}}
    ones = {{k: dev.to_device(np.ones(1024, t)) for k, t in host.items()}}
    r4 = {{k: dev.to_device(rng.standard_normal((2, 4, 16, 64)).astype(t)) for k, t in host.items()}}
    cs = {{k: dev.to_device(rng.standard_normal((16, 32)).astype(t)) for k, t in host.items()}}
    dev.synchronize()
    start, cpu = time.perf_counter(), time.process_time()
    {call}
    dev.synchronize()
    print(f"{{time.perf_counter() - start:.3f}} {{time.process_time() - cpu:.3f}}")
''')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    print(f"first call on an empty cache, device {args.device}: wall s, process CPU s")
    worst = (0.0, "")
    for name, call in CASES.items():
        if args.only not in name:
            continue
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PYKERN_CACHE_DIR": cache, "PYTHONPATH": f"{root}{os.pathsep}" + os.environ.get("PYTHONPATH", "")}
            r = subprocess.run([sys.executable, "-c", SETUP.format(device=args.device, call=call)],
                               capture_output=True, text=True, env=env, cwd=root)
        if r.returncode:
            print(f"{name:32s} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
            continue
        wall, cpu = map(float, r.stdout.strip().splitlines()[-1].split())
        worst = max(worst, (cpu, name))
        print(f"{name:32s} {wall:6.2f} s  {cpu:6.2f} s CPU", flush=True)
    print(f"slowest first call: {worst[1]}, {worst[0]:.2f} s CPU")


if __name__ == "__main__":
    main()
