"""What candle's grid allows a fill (``const_set``) on this GPU: the simplest kernels of that shape,
in hand-written CUDA C (cupy RawKernel), beside the stdlib's ``const_set`` under candle's ``info``
and the null-``info`` launch, and PyTorch's fill (issue 25).

Run on the GPU machine:  python benchmarks/const_set_probe.py [--size-log2 28]

candle launches ``const_set`` as ceil(n/1024) blocks of 1024 threads, a thread an element, and
passes ``info`` even for a contiguous destination. The probes, each on that grid:

* ``empty``: a kernel that does nothing (what the block starts alone cost);
* ``one store``: a store a thread (what the null-``info`` launch does);
* ``16 B, first blocks``: a 16-byte store a thread on the first 1/E of the blocks (E elements a
  store), the other blocks leave at once, after the busy ones;
* ``16 B, spread``: the same stores on every E-th block (each storing its E blocks' elements), so
  that the blocks that leave run beside the busy ones;
* ``16 B, spread + info``: the spread probe whose workers also read four words of an ``info`` array
  first (``const_set``'s ``layout_kind`` reads a 2-D layout in one round of loads).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import CALLS, Timer  # noqa: E402

SRC = r"""
typedef unsigned long long u64;
template <typename T> __device__ uint4 splat(T v) {
  unsigned w = sizeof(T) == 4 ? *(unsigned*)&v : (unsigned)(*(unsigned short*)&v) * 0x10001u;
  return make_uint4(w, w, w, w); }
template <typename T> __device__ void tail(T* o, T v, u64 base, u64 n, int e) {
  for (u64 i = base; i < n && i < base + e; i++) o[i] = v; }
extern "C" __global__ void empty_k(float* o, float v, u64 n) {}
#define PROBES(T, TAG)                                                                                  \
extern "C" __global__ void one_store_##TAG(T* o, T v, u64 n) {                                          \
  u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; if (i < n) o[i] = v; }                           \
extern "C" __global__ void first_blocks_##TAG(T* o, T v, u64 n) {                                       \
  const int E = 16 / sizeof(T);                                                                         \
  u64 base = E * (blockIdx.x * (u64)blockDim.x + threadIdx.x); if (base >= n) return;                  \
  if (base + E <= n) *(uint4*)(o + base) = splat(v); else tail(o, v, base, n, E); }                    \
extern "C" __global__ void spread_##TAG(T* o, T v, u64 n) {                                             \
  const int E = 16 / sizeof(T);                                                                         \
  if (blockIdx.x % E) return;                                                                           \
  u64 base = E * ((blockIdx.x / E) * (u64)blockDim.x + threadIdx.x); if (base >= n) return;            \
  if (base + E <= n) *(uint4*)(o + base) = splat(v); else tail(o, v, base, n, E); }                    \
extern "C" __global__ void spread_info_##TAG(T* o, T v, u64 n, const u64* info) {                       \
  const int E = 16 / sizeof(T);                                                                         \
  if (blockIdx.x % E) return;                                                                           \
  u64 d0 = __ldg(info), d1 = __ldg(info + 1), s0 = __ldg(info + 2), s1 = __ldg(info + 3);               \
  if (!((s1 == 1 || d1 == 1) && (s0 == d1 || d0 == 1))) return;                                        \
  u64 base = E * ((blockIdx.x / E) * (u64)blockDim.x + threadIdx.x); if (base >= n) return;            \
  if (base + E <= n) *(uint4*)(o + base) = splat(v); else tail(o, v, base, n, E); }
PROBES(float, f32)
PROBES(unsigned short, bf16)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-log2", type=int, default=28)
    ap.add_argument("--calls", type=int, default=CALLS, help="launches between two CUDA events (timing.Timer)")
    args = ap.parse_args()
    import cupy as cp
    import torch

    import pykern as pk
    import stdlib_kernels as sk
    n = 1 << args.size_log2
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    dev = pk.device("cuda")
    grid, block = (-(-n // 1024),), (1024,)
    timer = Timer(torch, calls=args.calls)
    copy_bw = timer.copy_bandwidth(n)
    print(f"device: {torch.cuda.get_device_name()}  copy bandwidth {copy_bw / 1e12:.3f} TB/s  n = {n:,}  "
          f"candle's grid {grid[0]:,} x {block[0]}")
    info = dev.to_device(np.array([1024, n // 1024, n // 1024, 1], np.uint64))
    print(f"{'kernel':28} {'ms':>7} {'torch/this':>10} {'null/this':>9}")
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        o = torch.empty(n, device="cuda", dtype=tdt)
        v = cp.float32(1.0) if tag == "f32" else cp.uint16(0x3F80)
        t_torch = timer(lambda: o.fill_(1.0))
        cs = dev.get_or_load_func(f"const_set_{tag}", sk.FILL)
        t_null = timer(lambda: cs[grid[0], block[0]](n, 2, None, 1.0, o.data_ptr()))

        def show(label, t):
            print(f"{label + ' ' + tag:28} {t * 1e3:7.3f} {t_torch / t:10.2f} {t_null / t:9.2f}", flush=True)

        show("torch fill", t_torch)
        show("const_set null info", t_null)
        o.fill_(0.0)
        cs[grid[0], block[0]](n, 2, info, 1.0, o.data_ptr())
        assert bool((o == 1.0).all()), f"const_set_{tag} under candle's info"
        show("const_set candle's info", timer(lambda: cs[grid[0], block[0]](n, 2, info, 1.0, o.data_ptr())))
        ptr = cp.uint64(o.data_ptr())
        show("probe: empty", timer(lambda: mod.get_function("empty_k")(grid, block, (ptr, cp.float32(1), cp.uint64(n)))))
        for name, label in (("one_store", "probe: one store"), ("first_blocks", "probe: 16 B, first blocks"),
                            ("spread", "probe: 16 B, spread")):
            f = mod.get_function(f"{name}_{tag}")
            o.fill_(0.0)
            f(grid, block, (ptr, v, cp.uint64(n)))
            assert bool((o == 1.0).all()), name
            show(label, timer(lambda f=f: f(grid, block, (ptr, v, cp.uint64(n)))))
        f = mod.get_function(f"spread_info_{tag}")
        o.fill_(0.0)
        f(grid, block, (ptr, v, cp.uint64(n), cp.uint64(info.ptr)))
        assert bool((o == 1.0).all()), "spread_info"
        show("probe: 16 B, spread + info", timer(lambda: f(grid, block, (ptr, v, cp.uint64(n), cp.uint64(info.ptr)))))


if __name__ == "__main__":
    main()
