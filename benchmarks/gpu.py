"""pykern's stdlib kernels against PyTorch on the same GPU, same buffers, same process.

Run on the GPU machine:  python benchmarks/gpu.py [--size-log2 28] [--only reduce] [--rounds 2] [--old]

Kernels are launched the way a Rust candle backend launches them (candle's ABI and launch shapes:
elementwise grid = ceil(numel/1024) x 1024 threads, one element per thread; ``fast_*`` one block per
row with next_power_of_two(min(1024, cols)) threads; softmax blocks of (1, 32, 1); rmsnorm and
layernorm with 1024 threads). Times are ``benchmarks/timing.py``'s: CUDA-event medians of 10
back-to-back calls queued behind a GPU-side sleep (the GPU's time, not the host's to issue the first
call), pykern's and torch's alternated ``--rounds`` times and each side's median taken ("spread": the
lowest and highest ratio of the single rounds); ``--old`` adds the ratio the earlier timing gave
(``timing.idle_start``: one call between two events on an idle GPU) beside it. The working sets (2^28
elements) are far larger than L2, so no flush is needed. Bandwidth counts the bytes a kernel must
move (read + write once), against the device's copy bandwidth measured the same way in the same run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import Timer, idle_start  # noqa: E402


class Bench:
    """Cases timed pykern against torch on the same buffers, as % of this run's copy bandwidth."""

    def __init__(self, torch, dev, n: int, rounds: int = 2, old: bool = False):
        self.torch, self.dev, self.n, self.rounds, self.old = torch, dev, n, rounds, old
        self.rows: list[tuple] = []
        self.timer = Timer(torch)
        self.copy_bw = self.timer.copy_bandwidth(n)
        print(f"{dev.name}: copy bandwidth {self.copy_bw / 1e12:.3f} TB/s  (n = {n:,})")
        print(f"{'case':44} {'pykern ms':>9} {'torch ms':>9} {'pk TB/s':>8} {'%copy':>6} {'pk/torch':>8} "
              f"{'spread':>11}" + (f" {'old way':>7}" if old else ""))

    def fn(self, module, name):
        return self.dev.get_or_load_func(name, module)

    suffix = ""

    def case(self, label: str, nbytes: int, ours, theirs) -> None:
        label += self.suffix
        t_ours, t_theirs, ratios = self.timer.pair(ours, theirs, self.rounds)
        bw = nbytes / t_ours
        ratio = t_theirs / t_ours  # > 1: pykern faster
        self.rows.append((label, t_ours, t_theirs, ratio))
        old = ""
        if self.old:  # the earlier timing (one call between two events on an idle GPU), for comparison
            o_ours = idle_start(self.torch, ours)
            old = f" {idle_start(self.torch, theirs) / o_ours:7.3f}"
        print(f"{label:44} {t_ours * 1e3:9.4f} {t_theirs * 1e3:9.4f} {bw / 1e12:8.3f} "
              f"{100 * bw / self.copy_bw:5.1f}% {ratio:8.3f} {min(ratios):5.3f}-{max(ratios):5.3f}{old}", flush=True)


def elementwise(b: Bench, shape: str = "candle") -> None:
    """Elementwise families under candle's launch shape (one element per thread) or the wrappers'
    own (``launch_stream``: one 16-byte tile of the narrowest dtype per thread, no idle blocks)."""
    import stdlib_kernels as sk
    from stdlib_kernels._common import STREAM_BLOCK
    torch, n = b.torch, b.n
    block = STREAM_BLOCK if shape == "wrapper" else 1024

    def launch(numel: int, itemsize: int, tiles: int = 1) -> tuple[int, int]:
        """launch_stream's shape (the unary wrappers take 2 tiles a thread), or candle's."""
        per_thread = tiles * max(1, b.dev.target.tile_bytes // itemsize) if shape == "wrapper" else 1
        return (numel + block * per_thread - 1) // (block * per_thread), block

    b.suffix = f" [{shape}]"
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        grid, _ = launch(n, 2 if tag == "bf16" else 4)
        ugrid, _ = launch(n, 2 if tag == "bf16" else 4, tiles=2)
        x = torch.randn(n, device="cuda").to(tdt)
        y = torch.randn(n, device="cuda").to(tdt)
        out = torch.empty_like(x)
        nb = x.element_size() * n
        px, py, po = x.data_ptr(), y.data_ptr(), out.data_ptr()
        unary = {"exp": torch.exp, "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
                 "gelu_erf": torch.nn.functional.gelu, "silu": torch.nn.functional.silu}
        for op, ref in unary.items():
            name = f"u{op}_{tag}"
            if name in sk.UNARY:
                f = b.fn(sk.UNARY, name)
                b.case(f"unary {op} {tag}", 2 * nb, lambda f=f: f[ugrid, block](n, 1, None, px, po),
                       lambda ref=ref: ref(x))
        for op, ref in (("add", torch.add), ("mul", torch.mul)):
            name = f"b{op}_{tag}"
            if name in sk.BINARY:
                f = b.fn(sk.BINARY, name)
                b.case(f"binary {op} {tag}", 3 * nb, lambda f=f: f[grid, block](n, 1, None, px, py, po),
                       lambda ref=ref: torch.add(x, y, out=out) if ref is torch.add else torch.mul(x, y, out=out))
        if f"affine_{tag}" in sk.AFFINE:
            f = b.fn(sk.AFFINE, f"affine_{tag}")
            b.case(f"affine {tag}", 2 * nb, lambda f=f: f[grid, block](n, 1, None, px, po, 1.5, 0.5),
                   lambda: torch.add(x * 1.5, 0.5))
        cond = (torch.rand(n, device="cuda") > 0.5).to(torch.uint8)
        if f"where_u8_{tag}" in sk.TERNARY:
            f = b.fn(sk.TERNARY, f"where_u8_{tag}")
            b.case(f"where u8 {tag}", 3 * nb + n, lambda f=f: f[launch(n, 1)](n, 1, None, cond.data_ptr(), px, py, po),
                   lambda: torch.where(cond.bool(), x, y))
        if f"fill_{tag}" in sk.FILL:
            f = b.fn(sk.FILL, f"fill_{tag}")
            b.case(f"fill {tag}", nb, lambda f=f: f[grid, block](po, 1.0, n), lambda: out.fill_(1.0))
        rows = 1 << 14
        cols = n // rows
        if f"copy2d_{tag}" in sk.FILL:
            f = b.fn(sk.FILL, f"copy2d_{tag}")
            half = cols // 2
            src2, dst2 = x.view(rows, cols), out.view(rows, cols)
            b.case(f"copy2d {tag} (half rows)", nb, lambda f=f: f[launch(rows * half, x.element_size())](
                px, po, rows, half, cols, cols), lambda: dst2[:, :half].copy_(src2[:, :half]))
        if f"ucopy_{tag}" in sk.UNARY:  # transposed copy: strided input through info
            f = b.fn(sk.UNARY, f"ucopy_{tag}")
            side = 1 << min(14, (n.bit_length() - 1) // 2)  # 2^14 square at the default 2^28
            src = x[: side * side].view(side, side)
            info = b.dev.to_device(np.array([side, side, 1, side], dtype=np.uint64))
            b.case(f"transposed copy {tag}", 2 * side * side * x.element_size(),
                   lambda f=f: f[launch(side * side, x.element_size())](side * side, 2, info, px, po),
                   lambda: src.t().contiguous())
    xf = torch.randn(n, device="cuda")
    xb = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    for src, dst, name, ref in ((xf, xb, "cast_f32_bf16", lambda: xf.to(torch.bfloat16)),
                                (xb, xf, "cast_bf16_f32", lambda: xb.to(torch.float32))):
        if name in sk.CAST:
            f = b.fn(sk.CAST, name)
            grid, _ = launch(n, 2)
            nbytes = n * (src.element_size() + dst.element_size())
            b.case(name, nbytes, lambda f=f, s=src, d=dst: f[grid, block](n, 1, None, s.data_ptr(), d.data_ptr()), ref)


def row_cases(torch, n: int):
    """The reduce benchmarks' inputs: (cols, rows, torch dtype, tag, x, out) for rows of 1024, 4096
    and 16384 columns over ``n`` elements, f32 and bf16."""
    for cols in (1024, 4096, 16384):
        rows = n // cols
        for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            x = torch.randn(rows, cols, device="cuda").to(tdt)
            yield cols, rows, tdt, tag, x, torch.empty_like(x)


def reductions(b: Bench, shape: str = "candle") -> None:
    """The reduce family under candle's launch shapes or the wrappers' own (stdlib_kernels.reduce_launch:
    fast_* a wave per row on a dense grid, softmax and norms row_threads a row)."""
    import stdlib_kernels as sk
    from stdlib_kernels import reduce_launch as R
    b.suffix = f" [{shape}]"
    own = shape == "wrapper"
    ws = b.dev.target.wave_size
    torch, n = b.torch, b.n
    for cols, rows, tdt, tag, x, out in row_cases(torch, n):
        nb = x.nbytes
        red = torch.empty(rows, device="cuda", dtype=tdt)
        if tag == "f32":
            idx = torch.empty(rows, device="cuda", dtype=torch.uint32)
            info = b.dev.to_device(np.array([rows, cols, cols, 1], dtype=np.uint64))
            grid, threads = rows, min(1024, 1 << (cols - 1).bit_length())
            if own:
                threads = R.WRAPPER_BLOCK
                grid = -(-rows // (threads // ws)) if cols <= R.WAVE_ROWS else rows
            for op, ref, o in (("fast_sum", lambda: x.sum(-1), red), ("fast_max", lambda: x.amax(-1), red),
                               ("fast_argmax", lambda: x.argmax(-1), idx)):
                if f"{op}_{tag}" in sk.REDUCE:
                    f = b.fn(sk.REDUCE, f"{op}_{tag}")
                    b.case(f"{op} {tag} rows of {cols}", nb, lambda f=f, o=o: f[grid, threads](
                        n, cols, 2, info, x.data_ptr(), o.data_ptr()), ref)
        block = R.softmax_block(cols, getattr(pk, tag), ws) if own else R.SOFTMAX_CANDLE_BLOCK
        name = R.softmax_kernel_name(getattr(pk, tag), None if own else block)  # the wrappers' own for theirs
        if name in sk.REDUCE:
            f = b.fn(sk.REDUCE, name)
            b.case(f"softmax {tag} cols {cols}", 2 * nb, lambda f=f, block=block: f[(rows, 1, 1), block](
                x.data_ptr(), out.data_ptr(), cols), lambda: torch.softmax(x, -1))
        alpha = torch.ones(cols, device="cuda", dtype=tdt)
        beta = torch.zeros(cols, device="cuda", dtype=tdt)
        name, ngrid, nblock = f"rmsnorm_{tag}", (rows, 1, 1), (1024, 1, 1)
        if own:  # the wrappers' kernel and shape (stdlib_kernels.reduce_launch.norm_launch)
            name, ngrid, nblock = R.norm_launch("rmsnorm", rows, cols, getattr(pk, tag), ws)
        if name in sk.REDUCE:
            f = b.fn(sk.REDUCE, name)
            b.case(f"rmsnorm {tag} cols {cols}", 2 * nb, lambda f=f: f[ngrid, nblock](
                x.data_ptr(), out.data_ptr(), alpha.data_ptr(), cols, nblock[0], 1e-5),
                lambda: torch.nn.functional.rms_norm(x, (cols,), alpha, 1e-5))
        name = R.norm_launch("layernorm", rows, cols, getattr(pk, tag), ws)[0] if own else f"layernorm_{tag}"
        if name in sk.REDUCE:
            f = b.fn(sk.REDUCE, name)
            b.case(f"layernorm {tag} cols {cols}", 2 * nb, lambda f=f: f[ngrid, nblock](
                x.data_ptr(), out.data_ptr(), alpha.data_ptr(), beta.data_ptr(), cols, nblock[0], 1e-5),
                lambda: torch.nn.functional.layer_norm(x, (cols,), alpha, beta, 1e-5))


def c_launch_loop(b: Bench, raw, h) -> tuple[float, float] | None:
    """The driver's own cost of a launch, from a C loop (cc builds it; None without a C compiler)."""
    import ctypes
    import subprocess
    import tempfile
    src = r"""typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, void*, void**, void**);
        #include <time.h>
        double loop(void* fp, void* f, void** params, int n) {
            launch_t launch = (launch_t)fp; struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
            for (int i = 0; i < n; i++) launch(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
            clock_gettime(CLOCK_MONOTONIC, &b);
            return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3; }"""
    with tempfile.TemporaryDirectory() as d:
        try:
            open(f"{d}/l.c", "w").write(src)
            subprocess.run(["cc", "-O2", "-shared", "-fPIC", f"{d}/l.c", "-o", f"{d}/l.so"], check=True,
                           capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        lib = ctypes.CDLL(f"{d}/l.so")
        lib.loop.restype = ctypes.c_double
        lib.loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        times = []
        for _ in range(40):
            times.append(lib.loop(ctypes.cast(raw, ctypes.c_void_p).value, h.c_handle.value, h.params, 100))
            b.dev.synchronize()
    return statistics.median(times), min(times)


def overheads(b: Bench) -> None:
    """Host launch overhead (six arguments) and compile times."""
    import ctypes
    import os

    import stdlib_kernels as sk
    from pykern.compiler import build_module

    @pk.kernel
    def six(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32], z: Ptr[f32], m: usize):
        i = pk.global_id()
        if i < n:
            y[i] = a * x[i] + z[i]

    x = b.dev.zeros(1024, pk.f32)
    fn = b.dev.get_or_load_func("six", six._only_instance().module)
    for _ in range(200):
        fn.launch(1, 32, 0, 1.0, x, x, x, 0)
    b.dev.synchronize()
    # batches of 100 launches, synchronised between batches (untimed): a longer run fills the
    # driver's launch queue, and then the host waits for the GPU instead of measuring itself
    def per_launch(launch) -> tuple[float, float]:
        times = []
        for _ in range(40):
            t = time.perf_counter()
            for _ in range(100):
                launch()
            times.append((time.perf_counter() - t) / 100)
            b.dev.synchronize()
        return statistics.median(times), min(times)

    # the floor on this host: the driver's own entry point with everything prepared
    from pykern.runtime.cuda import _raw_launch
    raw, h = _raw_launch(), fn.handle
    floor = per_launch(lambda: raw(h.c_handle, 1, 1, 1, 32, 1, 1, 0, None, h.c_params, None))
    host = per_launch(lambda: fn.launch(1, 32, 0, 1.0, x, x, x, 0))
    print(f"host launch overhead, 6 arguments: {host[0] * 1e6:.2f} us (median of 40 batches of 100; min "
          f"{host[1] * 1e6:.2f}); the driver's cuLaunchKernel alone: {floor[0] * 1e6:.2f} us (min "
          f"{floor[1] * 1e6:.2f})")
    from pykern.runtime.cuda import CUlaunchConfig, _raw_launch_ex
    ex, cfg = _raw_launch_ex(), CUlaunchConfig((1, 1, 1), (32, 1, 1), 0, None, None, 0)
    pcfg = ctypes.c_void_p(ctypes.addressof(cfg))
    t = per_launch(lambda: ex(pcfg, h.c_handle, h.c_params, None))
    print(f"  the driver's cuLaunchKernelEx alone (through ctypes): {t[0] * 1e6:.2f} us (min {t[1] * 1e6:.2f})")
    t = c_launch_loop(b, raw, h)
    if t:
        print(f"  the driver's cuLaunchKernel from C (100 in a loop): {t[0]:.2f} us (min {t[1]:.2f}): the floor")
    # the driver's time by stream kind: the legacy default stream orders against every blocking
    # stream of the context, a non-blocking one against nothing
    drv = b.dev._drv
    err, nb = drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
    snb = ctypes.c_void_p(int(nb))
    for label, stream in (("legacy default stream", None), ("a non-blocking stream", snb),
                          ("the per-thread default stream", ctypes.c_void_p(2))):
        t = per_launch(lambda s=stream: raw(h.c_handle, 1, 1, 1, 32, 1, 1, 0, s, h.c_params, None))
        print(f"  driver alone on {label}: {t[0] * 1e6:.2f} us (min {t[1] * 1e6:.2f})")
    t = per_launch(lambda: fn.launch(1, 32, 0, 1.0, x, x, x, 0, stream=int(nb)))
    print(f"  Function.launch on a non-blocking stream: {t[0] * 1e6:.2f} us (min {t[1] * 1e6:.2f})")
    b.dev.synchronize()
    others = {"torch.add(t, 1, out=t)": lambda: b.torch.add(tt, 1, out=tt)}
    tt = b.torch.zeros(1024, device="cuda")
    try:
        import cupy as cp
        ck = cp.RawKernel(r"""extern "C" __global__ void six(unsigned long long n, float a, const float* x, float* y,
            float* z, unsigned long long m) { unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = a * x[i] + z[i]; }""", "six")
        cx = cp.zeros(1024, cp.float32)
        others["cupy RawKernel, same six arguments"] = lambda: ck((1,), (32,), (cp.uint64(0), cp.float32(1.0), cx, cx, cx,
                                                                              cp.uint64(0)))
    except ImportError:
        pass
    for label, call in others.items():
        try:
            t = per_launch(call)
        except Exception as exc:  # noqa: BLE001 - a comparison that cannot run here must not stop the harness
            print(f"  same host, {label}: not measured ({type(exc).__name__}: {exc})")
            continue
        print(f"  same host, {label}: {t[0] * 1e6:.2f} us (min {t[1] * 1e6:.2f})")
    # a wrapper call: output allocated, kernel launched, output freed, from the stream-ordered pool
    # (the default) and with cuMemAlloc/cuMemFree (whose free waits for the whole device)
    import stdlib_kernels.unary as U
    from pykern import config
    from pykern.runtime.cuda import CudaDevice
    with config.override(cuda_pool=False):
        plain = CudaDevice(b.dev.index)
    for label, d in (("stream-ordered pool", b.dev), ("cuMemAlloc/cuMemFree", plain)):
        xs = d.to_device(np.ones(1 << 16, np.float32))
        t = per_launch(lambda xs=xs: U.exp(xs))
        print(f"  unary.exp wrapper on 2^16 f32, memory from {label}: {t[0] * 1e6:.2f} us a call (min {t[1] * 1e6:.2f})")
    if os.environ.get("PYKERN_BENCH_SKIP_COMPILE"):
        return
    os.environ["PYKERN_CACHE"] = "0"

    @pk.kernel
    def simple(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = x[i] * 2.0

    @pk.kernel
    def twice(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = x[i] + x[i]

    for label, k in (("first compile in the process (LLVM set-up included)", simple), ("cold compile", twice)):
        t = time.perf_counter()
        build_module(k._only_instance().module, b.dev.target)
        print(f"{label} of a simple kernel ({b.dev.target.arch} PTX): {(time.perf_counter() - t) * 1e3:.1f} ms")
    for m in sk.MODULES:
        if len(m):
            t = time.perf_counter()
            build_module(m, b.dev.target)
            print(f"compile module {m.name:9} ({len(m):3} kernels): {time.perf_counter() - t:6.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-log2", type=int, default=28)
    ap.add_argument("--only", choices=["elementwise", "wrapper", "reduce", "reduce-wrapper", "overheads"])
    ap.add_argument("--rounds", type=int, default=2, help="alternations of pykern's and torch's timing a case")
    ap.add_argument("--old", action="store_true", help="also the ratio of the earlier timing (timing.idle_start)")
    args = ap.parse_args()
    import torch

    import pykern as pk
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs a CUDA GPU")
    torch.cuda.init()
    dev = pk.device("cuda")
    b = Bench(torch, dev, 1 << args.size_log2, args.rounds, args.old)
    parts = {"elementwise": elementwise, "wrapper": lambda b: elementwise(b, "wrapper"), "reduce": reductions,
             "reduce-wrapper": lambda b: reductions(b, "wrapper"), "overheads": overheads}
    for name, part in parts.items():
        if args.only in (None, name):
            part(b)
    if b.rows:
        geo = float(np.exp(np.mean([np.log(r[3]) for r in b.rows])))
        print(f"geometric mean pykern/torch speed ratio: {geo:.2f} over {len(b.rows)} cases")


if __name__ == "__main__":
    main()
