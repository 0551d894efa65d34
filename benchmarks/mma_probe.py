"""What ``pk.mma`` buys: a plain f16 GEMM tile kernel on the built-in against torch.matmul on a CUDA GPU.

``Y = X @ W^T`` with X (M x K) and W (N x K) f16 row-major (a linear layer: W is column-major B),
Y in f32. A block of four waves computes a 32 x 128 block of Y, each wave 32 x 32 (2 x 2 fragments),
staging X and W through shared memory with 8-byte loads. ``gemm_xwt``: 32-deep slices, no double
buffering, no padding: the first kernel anyone would write. ``gemm_xwt_pipe``: 64-deep stages in
two buffers (the next stage's words in registers during the current one's products) and rows padded
so that each ldmatrix's rows meet no bank twice. Both show the instruction's reach, not a tuned GEMM.
Shapes: M = 32 (issue 26's 32 activation rows, 4096 x 4096 weights) and a square 4096 GEMM. The
reference is torch.matmul in f16 on the same buffers (cuBLAS, f16 out); figures in TFLOP/s and as a
ratio. The copy bandwidth of the run is printed with the card, as every benchmark here does.

    python benchmarks/mma_probe.py            # on a CUDA GPU
    python benchmarks/mma_probe.py --check    # the kernel against NumPy on the CPU target (small shapes)
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pykern as pk  # noqa: E402
from pykern import ConstPtr, Ptr, f16, f32, i32, u64  # noqa: E402

BM, BN, BK = 32, 128, 32


@pk.kernel(max_block_size=128)
def gemm_xwt(m: i32, n: i32, k: i32, x: ConstPtr[f16], w: ConstPtr[f16], y: Ptr[f32]):
    """y = x @ w^T for m a multiple of 32, n of 128, k of 32 * grid_dim.z; 128 threads (four waves of
    32: the CUDA width; at wave64 a block is two waves and the kernel is not for it). With a grid of
    ``split`` along z, block z sums the z-th slice of k into ``y[z]`` (split-K: partial products)."""
    sx = pk.shared.array(BM * BK // 4, u64)           # 32 rows x 32 k, as 8-byte words
    sw = pk.shared.array(BN * BK // 4, u64)           # 128 columns (rows of w) x 32 k
    hx = pk.bitcast(sx, Ptr[f16])
    hw = pk.bitcast(sw, Ptr[f16])
    t = i32(pk.thread_idx.x)
    wave = t // 32
    m0 = i32(pk.block_idx.y) * BM
    n0 = i32(pk.block_idx.x) * BN
    x8 = pk.bitcast(x, ConstPtr[u64])
    w8 = pk.bitcast(w, ConstPtr[u64])
    k8 = k // 4
    kc = k // i32(pk.grid_dim.z)
    kz = i32(pk.block_idx.z)
    c00 = pk.mma.zeros(f32)
    c01 = pk.mma.zeros(f32)
    c10 = pk.mma.zeros(f32)
    c11 = pk.mma.zeros(f32)
    for k0 in range(kz * kc, kz * kc + kc, BK):
        for j in pk.static_range(2):                  # 256 words of x
            e = t + 128 * j
            sx[e] = x8[(m0 + e // 8) * k8 + k0 // 4 + e % 8]
        for j in pk.static_range(8):                  # 1024 words of w
            e = t + 128 * j
            sw[e] = w8[(n0 + e // 8) * k8 + k0 // 4 + e % 8]
        pk.syncthreads()
        for kk in pk.static_range(0, BK, 16):
            a0 = pk.mma.load_a(hx + kk, BK)
            a1 = pk.mma.load_a(hx + 16 * BK + kk, BK)
            b0 = pk.mma.load_b(hw + (wave * 32) * BK + kk, BK, layout="col")
            b1 = pk.mma.load_b(hw + (wave * 32 + 16) * BK + kk, BK, layout="col")
            c00 = pk.mma.mma(a0, b0, c00)
            c01 = pk.mma.mma(a0, b1, c01)
            c10 = pk.mma.mma(a1, b0, c10)
            c11 = pk.mma.mma(a1, b1, c11)
        pk.syncthreads()
    base = y + (kz * m * n + m0 * n + n0 + wave * 32)
    pk.mma.store(base, n, c00)
    pk.mma.store(base + 16, n, c01)
    pk.mma.store(base + 16 * n, n, c10)
    pk.mma.store(base + 16 * n + 16, n, c11)


PK = 64                 # the pipelined kernel's k depth a stage
ROW = PK // 4 + 2       # its shared rows in 8-byte words: 64 k + 8 halves of padding (144 bytes)


@pk.kernel(max_block_size=128)
def gemm_xwt_pipe(m: i32, n: i32, k: i32, x: ConstPtr[f16], w: ConstPtr[f16], y: Ptr[f32]):
    """gemm_xwt with what its loads lacked: 64-deep stages in two shared buffers (the next stage's
    global words held in registers while the current one is multiplied, one barrier a stage), and rows
    padded to 144 bytes so the eight 16-byte rows of each ldmatrix fall in distinct banks. The same
    contract as gemm_xwt (m a multiple of 32, n of 128, k of 64 * grid_dim.z)."""
    sx = pk.shared.array(2 * BM * ROW, u64)
    sw = pk.shared.array(2 * BN * ROW, u64)
    hx = pk.bitcast(sx, Ptr[f16])
    hw = pk.bitcast(sw, Ptr[f16])
    t = i32(pk.thread_idx.x)
    wave = t // 32
    m0 = i32(pk.block_idx.y) * BM
    n0 = i32(pk.block_idx.x) * BN
    x8 = pk.bitcast(x, ConstPtr[u64])
    w8 = pk.bitcast(w, ConstPtr[u64])
    k8 = k // 4
    kc = k // i32(pk.grid_dim.z)
    kbeg = i32(pk.block_idx.z) * kc
    rx = pk.local.array(4, u64)                       # 32 rows x 16 words of x a stage
    rw = pk.local.array(16, u64)                      # 128 rows x 16 words of w
    for j in pk.static_range(4):
        e = t + 128 * j
        rx[j] = x8[(m0 + e // 16) * k8 + kbeg // 4 + e % 16]
    for j in pk.static_range(16):
        e = t + 128 * j
        rw[j] = w8[(n0 + e // 16) * k8 + kbeg // 4 + e % 16]
    for j in pk.static_range(4):
        e = t + 128 * j
        sx[(e // 16) * ROW + e % 16] = rx[j]
    for j in pk.static_range(16):
        e = t + 128 * j
        sw[(e // 16) * ROW + e % 16] = rw[j]
    pk.syncthreads()
    c00 = pk.mma.zeros(f32)
    c01 = pk.mma.zeros(f32)
    c10 = pk.mma.zeros(f32)
    c11 = pk.mma.zeros(f32)
    stages = kc // PK
    for s in range(stages):
        more = s + 1 < stages
        if more:
            k1 = kbeg + (s + 1) * PK
            for j in pk.static_range(4):
                e = t + 128 * j
                rx[j] = x8[(m0 + e // 16) * k8 + k1 // 4 + e % 16]
            for j in pk.static_range(16):
                e = t + 128 * j
                rw[j] = w8[(n0 + e // 16) * k8 + k1 // 4 + e % 16]
        bx = hx + (s % 2) * (BM * ROW * 4)
        bw = hw + (s % 2) * (BN * ROW * 4)
        for kk in pk.static_range(0, PK, 16):
            a0 = pk.mma.load_a(bx + kk, ROW * 4)
            a1 = pk.mma.load_a(bx + 16 * ROW * 4 + kk, ROW * 4)
            b0 = pk.mma.load_b(bw + (wave * 32) * ROW * 4 + kk, ROW * 4, layout="col")
            b1 = pk.mma.load_b(bw + (wave * 32 + 16) * ROW * 4 + kk, ROW * 4, layout="col")
            c00 = pk.mma.mma(a0, b0, c00)
            c01 = pk.mma.mma(a0, b1, c01)
            c10 = pk.mma.mma(a1, b0, c10)
            c11 = pk.mma.mma(a1, b1, c11)
        if more:
            nx = ((s + 1) % 2) * (BM * ROW)
            nw = ((s + 1) % 2) * (BN * ROW)
            for j in pk.static_range(4):
                e = t + 128 * j
                sx[nx + (e // 16) * ROW + e % 16] = rx[j]
            for j in pk.static_range(16):
                e = t + 128 * j
                sw[nw + (e // 16) * ROW + e % 16] = rw[j]
        pk.syncthreads()
    base = y + (i32(pk.block_idx.z) * m * n + m0 * n + n0 + wave * 32)
    pk.mma.store(base, n, c00)
    pk.mma.store(base + 16, n, c01)
    pk.mma.store(base + 16 * n, n, c10)
    pk.mma.store(base + 16 * n + 16, n, c11)


def launch(m: int, n: int, k: int, x, w, y, device=None, split: int = 1, pipe: bool = False) -> None:
    """``y`` holds ``split`` partial products of m x n (their sum is x @ w^T)."""
    (gemm_xwt_pipe if pipe else gemm_xwt).launch((n // BN, m // BM, split), 128, m, n, k, x, w, y, device=device)


def check() -> None:
    """The kernel against NumPy in float64 on the CPU target at wave 32 (the bound of docs/language.md)."""
    dev = pk.device("cpu", wave_size=32)
    rng = np.random.default_rng(0)
    m, n, k = 64, 256, 128
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    limit = 32 * (k // 16) * 2.0 ** -24 * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64).T).max()
    for pipe in (False, True):
        y = dev.zeros((2, m, n), f32)
        launch(m, n, k, dev.to_device(x), dev.to_device(w), y, device=dev, split=2, pipe=pipe)
        err = np.abs(y.to_host().sum(axis=0) - ref).max()
        print(f"check{' (pipelined)' if pipe else ''}: max |error| {err:.3g} (bound {limit:.3g})")
        assert err <= limit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        check()
        return
    import torch
    from benchmarks.timing import Timer
    dev = pk.device("cuda")
    timer = Timer(torch)
    bw = timer.copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s")
    # split-K for the 32-row shape: 32 blocks of 32 x 128 would leave 100 of 132 SMs idle; the
    # partial sums are added by torch.sum inside the timed call (a second kernel, counted)
    for (m, n, k, split), pipe in [(s, p) for s in ((32, 4096, 4096, 1), (32, 4096, 4096, 8), (4096, 4096, 4096, 1))
                                   for p in (False, True)]:
        x = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16)
        y = torch.empty(split, m, n, device="cuda", dtype=torch.float32)
        px, pw, py = dev.from_dlpack(x), dev.from_dlpack(w), dev.from_dlpack(y)

        def ours(m=m, n=n, k=k, split=split, px=px, pw=pw, py=py, y=y, pipe=pipe):
            launch(m, n, k, px, pw, py, device=dev, split=split, pipe=pipe)
            return y.sum(0) if split > 1 else y[0]
        theirs = lambda: torch.matmul(x, w.t())  # noqa: E731
        got = ours()
        torch.cuda.synchronize()
        ref = (x.double() @ w.double().t())
        err = (got.double() - ref).abs().max().item()
        t_ours, t_theirs, _ = timer.pair(ours, theirs)
        flop = 2.0 * m * n * k
        moved = 2 * (m * k + n * k) + 4 * m * n
        print(f"M={m} N={n} K={k} split-K {split} {'pipelined' if pipe else 'first   '}: pk.mma {t_ours * 1e6:8.1f} us {flop / t_ours / 1e12:6.1f} TFLOP/s "
              f"({moved / t_ours / bw:5.1%} of copy bw) | torch.matmul f16 {t_theirs * 1e6:8.1f} us "
              f"{flop / t_theirs / 1e12:6.1f} TFLOP/s | torch/ours {t_theirs / t_ours:.2f}x | max |err| {err:.3g}")


if __name__ == "__main__":
    main()
