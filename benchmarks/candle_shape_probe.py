"""What candle's launch shapes allow on this GPU, measured with hand-written CUDA C (cupy RawKernel).

candle launches elementwise kernels as ceil(n/1024) blocks of 1024 threads, one element a thread,
and ``fast_*`` reductions as one 1024-thread block per row. This probe times the simplest kernels
under those shapes (an empty kernel, one element a thread, 16-byte vectors on a quarter of the
threads of each block or on a quarter of the blocks) against PyTorch, to tell the limits of the
shape from the limits of pykern's code. Run on the GPU machine: ``python benchmarks/candle_shape_probe.py``.
"""
from __future__ import annotations

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize

SRC = r"""
typedef unsigned long long u64;
extern "C" __global__ void empty_k(float* o, float v, u64 n) {}
extern "C" __global__ void fill1(float* o, float v, u64 n) {
  u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; if (i < n) o[i] = v; }
extern "C" __global__ void fill_inblock(float* o, float v, u64 n) {   // threads t < blockDim/4: a float4
  unsigned t = threadIdx.x; if (t >= blockDim.x / 4) return;
  u64 base = blockIdx.x * (u64)blockDim.x + 4 * t;
  if (base + 4 <= n) *(float4*)(o + base) = make_float4(v, v, v, v); else for (; base < n; base++) o[base] = v; }
extern "C" __global__ void fill_quarter(float* o, float v, u64 n) {   // the first quarter of blocks: float4
  u64 base = 4 * (blockIdx.x * (u64)blockDim.x + threadIdx.x); if (base >= n) return;
  if (base + 4 <= n) *(float4*)(o + base) = make_float4(v, v, v, v); else for (; base < n; base++) o[base] = v; }
extern "C" __global__ void add1(const float* __restrict__ a, const float* __restrict__ b, float* o, u64 n) {
  u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + b[i]; }
extern "C" __global__ void add_inblock(const float* __restrict__ a, const float* __restrict__ b, float* o, u64 n) {
  unsigned t = threadIdx.x; if (t >= blockDim.x / 4) return;
  u64 base = blockIdx.x * (u64)blockDim.x + 4 * t;
  if (base + 4 <= n) { float4 x = *(const float4*)(a + base), y = *(const float4*)(b + base);
    *(float4*)(o + base) = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
  else for (; base < n; base++) o[base] = a[base] + b[base]; }
extern "C" __global__ void add_quarter(const float* __restrict__ a, const float* __restrict__ b, float* o, u64 n) {
  u64 base = 4 * (blockIdx.x * (u64)blockDim.x + threadIdx.x); if (base >= n) return;
  if (base + 4 <= n) { float4 x = *(const float4*)(a + base), y = *(const float4*)(b + base);
    *(float4*)(o + base) = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
  else for (; base < n; base++) o[base] = a[base] + b[base]; }
extern "C" __global__ void rowsum(const float* __restrict__ x, float* out, unsigned cols) {  // a block per row
  __shared__ float part[32];
  const float4* row = (const float4*)(x + blockIdx.x * (u64)cols);
  float s = 0.f;
  for (unsigned j = threadIdx.x; j < cols / 4; j += blockDim.x) { float4 v = row[j]; s += (v.x + v.y) + (v.z + v.w); }
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) { s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) out[blockIdx.x] = s; } }
extern "C" __global__ void rowsum_warp(const float* __restrict__ x, float* out, unsigned cols, unsigned rows) {
  // a warp per row, blocks of the grid spread: block b < rows/32 busy, 32 rows each
  unsigned w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  u64 r = blockIdx.x * (u64)(blockDim.x >> 5) + w; if (r >= rows) return;
  const float4* row = (const float4*)(x + r * cols);
  float s0 = 0.f, s1 = 0.f;
  for (unsigned j = lane; j < cols / 4; j += 64) { float4 v = row[j]; s0 += (v.x + v.y) + (v.z + v.w);
    if (j + 32 < cols / 4) { float4 u = row[j + 32]; s1 += (u.x + u.y) + (u.z + u.w); } }
  s0 += s1;
  for (int o = 16; o; o >>= 1) s0 += __shfl_xor_sync(0xffffffffu, s0, o);
  if (lane == 0) out[r] = s0; }
extern "C" __global__ void rms_regs(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ a,
                                    unsigned cols, float eps) {  // a block per row, the row held in registers
  __shared__ float part[32]; __shared__ float total;
  const float4* xr = (const float4*)(x + blockIdx.x * (u64)cols); float4* yr = (float4*)(y + blockIdx.x * (u64)cols);
  const float4* ar = (const float4*)a; unsigned n4 = cols / 4; float4 v[4]; float s = 0.f;
  #pragma unroll
  for (int k = 0; k < 4; k++) { unsigned j = threadIdx.x + k * blockDim.x;
    if (j < n4) { v[k] = xr[j]; s += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w; } }
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) { s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) total = s; }
  __syncthreads();
  float r = rsqrtf(total / cols + eps);
  #pragma unroll
  for (int k = 0; k < 4; k++) { unsigned j = threadIdx.x + k * blockDim.x;
    if (j < n4) { float4 al = ar[j]; yr[j] = make_float4(v[k].x * r * al.x, v[k].y * r * al.y, v[k].z * r * al.z,
                                                          v[k].w * r * al.w); } } }
extern "C" __global__ void softmax_warp(const float* __restrict__ x, float* __restrict__ y, unsigned cols) {
  // candle's block (1, 32, 1): a warp per row; online max/sum over float4s, then a second pass
  const float4* xr = (const float4*)(x + blockIdx.x * (u64)cols); float4* yr = (float4*)(y + blockIdx.x * (u64)cols);
  unsigned lane = threadIdx.y, n4 = cols / 4; float m = -3.4e38f, s = 0.f;
  for (unsigned j = lane; j < n4; j += 32) { float4 v = xr[j];
    float cm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    if (cm > m) { s *= __expf(m - cm); m = cm; }
    s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m); }
  for (int o = 16; o; o >>= 1) { float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
    float nm = fmaxf(m, om); s = s * __expf(m - nm) + os * __expf(om - nm); m = nm; }
  float inv = 1.f / s;
  for (unsigned j = lane; j < n4; j += 32) { float4 v = xr[j];
    yr[j] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv, __expf(v.z - m) * inv, __expf(v.w - m) * inv); } }
"""


@pk.kernel
def pk_fill1(o: Ptr[f32], v: f32, n: usize):
    i = pk.global_id()
    if i < n:
        o[i] = v


@pk.kernel
def pk_add1(a: ConstPtr[f32], b: ConstPtr[f32], o: Ptr[f32], n: usize):
    i = pk.global_id()
    if i < n:
        o[i] = a[i] + b[i]


def main() -> None:
    import cupy as cp
    import torch

    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    k = {name: mod.get_function(name) for name in ("empty_k", "fill1", "fill_inblock", "fill_quarter", "add1",
                                                  "add_inblock", "add_quarter", "rowsum", "rowsum_warp", "rms_regs",
                                                  "softmax_warp")}

    from timing import Timer  # benchmarks/timing.py: the GPU's time, the host's issue kept out
    timed = Timer(torch)

    n = 1 << 28
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    grid = (n + 1023) // 1024
    ptr = lambda t: cp.uint64(t.data_ptr())  # noqa: E731
    t_fill, t_add = timed(lambda: o.fill_(1.0)), timed(lambda: torch.add(x, y, out=o))
    print(f"torch fill {t_fill * 1e6:.0f} us, add {t_add * 1e6:.0f} us")
    for name, ref in (("empty_k", t_fill), ("fill1", t_fill), ("fill_inblock", t_fill), ("fill_quarter", t_fill)):
        t = timed(lambda: k[name]((grid,), (1024,), (ptr(o), cp.float32(1.0), cp.uint64(n))))
        print(f"{name:14} candle shape {t * 1e6:7.0f} us  torch/this {ref / t:5.2f}")
    for name in ("add1", "add_inblock", "add_quarter"):
        t = timed(lambda: k[name]((grid,), (1024,), (ptr(x), ptr(y), ptr(o), cp.uint64(n))))
        print(f"{name:14} candle shape {t * 1e6:7.0f} us  torch/this {t_add / t:5.2f}")
    # the same one-element-a-thread kernels in pykern (pk_fill1, pk_add1), and the stdlib's fill, whose
    # 16-byte tiles leave three threads in four idle under this shape
    import stdlib_kernels as sk
    dev = pk.device("cuda")
    t = timed(lambda: pk_fill1[grid, 1024](o.data_ptr(), 1.0, n))
    print(f"{'pykern fill1':14} candle shape {t * 1e6:7.0f} us  torch/this {t_fill / t:5.2f}")
    t = timed(lambda: pk_add1[grid, 1024](x.data_ptr(), y.data_ptr(), o.data_ptr(), n))
    print(f"{'pykern add1':14} candle shape {t * 1e6:7.0f} us  torch/this {t_add / t:5.2f}")
    fill = dev.get_or_load_func("fill_f32", sk.FILL)
    t = timed(lambda: fill[grid, 1024](o.data_ptr(), 1.0, n))
    print(f"{'fill_f32':14} candle shape {t * 1e6:7.0f} us  torch/this {t_fill / t:5.2f}")
    for cols in (1024, 4096, 16384):
        rows = n // cols
        xs = x.view(rows, cols)
        out = torch.empty(rows, device="cuda")
        t_ref = timed(lambda: xs.sum(-1))
        t = timed(lambda: k["rowsum"]((rows,), (1024,), (ptr(x), ptr(out), cp.uint32(cols))))
        t2 = timed(lambda: k["rowsum_warp"]((rows,), (1024,), (ptr(x), ptr(out), cp.uint32(cols), cp.uint32(rows))))
        print(f"row sum cols {cols:5}: block/row {t * 1e6:6.0f} us ({t_ref / t:4.2f}), "
              f"warp/row on candle's grid {t2 * 1e6:6.0f} us ({t_ref / t2:4.2f}); torch {t_ref * 1e6:.0f} us")
        alpha = torch.ones(cols, device="cuda")
        y = torch.empty_like(xs)
        t_ref = timed(lambda: torch.nn.functional.rms_norm(xs, (cols,), alpha, 1e-5))
        t = timed(lambda: k["rms_regs"]((rows,), (1024,), (ptr(x), ptr(y), ptr(alpha), cp.uint32(cols), cp.float32(1e-5))))
        print(f"rmsnorm cols {cols:5}: block/row, row in registers {t * 1e6:6.0f} us ({t_ref / t:4.2f}); "
              f"torch {t_ref * 1e6:.0f} us")
        t_ref = timed(lambda: torch.softmax(xs, -1))
        t = timed(lambda: k["softmax_warp"]((rows,), (1, 32, 1), (ptr(x), ptr(y), cp.uint32(cols))))
        print(f"softmax cols {cols:5}: warp/row (candle's block) {t * 1e6:6.0f} us ({t_ref / t:4.2f}); "
              f"torch {t_ref * 1e6:.0f} us")


if __name__ == "__main__":
    main()
