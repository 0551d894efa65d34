"""The stdlib's info-taking kernels under candle's exact launch convention, against the null-info
launch and against PyTorch (issue 25).

Run on the GPU machine:  python benchmarks/candle_launch.py [--size-log2 28] [--dims 2]

candle passes ``info`` (dims, then each operand's strides) on every launch, even when every operand
is contiguous, and launches ``ceil(numel / 1024)`` blocks of 1024 threads. A kernel that took its
contiguous loop only for a null ``info`` ran ``where_u8_f32`` at 0.37x torch on an H100 under that
convention. Each row times the same kernel three ways on the same buffers: candle's arguments
(``info`` describing contiguous operands of a ``--dims``-d shape), the null-``info`` launch, and the
PyTorch op, each timed by ``benchmarks/timing.py`` (CUDA-event medians of ``--calls`` back-to-back
launches queued behind a GPU-side sleep: the GPU's time). The target: ``info/null`` >= 0.90 for
every family.

Families: unary, binary, ternary, affine, fill (``const_set``), cast; the ``fast_*`` reductions (one
block of ``next_power_of_two(min(1024, cols))`` threads a row, info = kept dims then the reduced one);
indexing's ``is_*`` (the ids' layout in info; candle's grid over the output). Then rows with no
null-``info`` launch, timed against the wrappers' own launch in its place (``wrap``): strided
layouts candle passes (a transposed operand, a broadcast row) and conv (info carries the shapes).
"""
from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import CALLS, Timer  # noqa: E402


def candle_info(dev, shape: tuple[int, ...], operands: int):
    """candle's info for ``operands`` contiguous operands of ``shape``: dims, then strides per operand."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= n
    return dev.to_device(np.array(list(shape) + strides * operands, dtype=np.uint64))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-log2", type=int, default=28)
    ap.add_argument("--dims", type=int, default=2, help="rank of the shape candle describes in info")
    ap.add_argument("--calls", type=int, default=CALLS, help="launches between two CUDA events (timing.Timer)")
    ap.add_argument("--only", default=None,
                    help="comma-separated sections: elementwise, fill, u8, reduce, indexing, strided, reduce-strided, conv")
    args = ap.parse_args()
    only = None if args.only is None else set(args.only.split(","))

    def section(name: str) -> bool:
        return only is None or name in only
    import torch

    import pykern as pk
    import stdlib_kernels as sk
    if not torch.cuda.is_available():
        sys.exit("benchmarks/candle_launch.py needs a CUDA GPU")
    dev = pk.device("cuda")
    n = 1 << args.size_log2
    shape = (n,) if args.dims == 1 else (1 << 10,) * (args.dims - 1) + (n >> (10 * (args.dims - 1)),)
    grid, block = (-(-n // 1024), 1, 1), (1024, 1, 1)
    nd = len(shape)
    timer = Timer(torch, calls=args.calls)
    copy_bw = timer.copy_bandwidth(n)
    print(f"device: {torch.cuda.get_device_name()}  copy bandwidth {copy_bw / 1e12:.3f} TB/s  n = {n:,}  "
          f"info shape {shape}")
    print(f"{'kernel':24} {'info ms':>8} {'null ms':>8} {'torch ms':>8} {'info/null':>9} {'info/torch':>10}")
    rows = []

    def row(label, with_info, null_info, theirs, gate=True):
        """``gate``: info/null counts toward the 0.90 target (False: the second launch is the wrappers')."""
        t_info, t_null, t_torch = (timer(f) for f in (with_info, null_info, theirs))
        rows.append((label, t_null / t_info, t_torch / t_info, gate))
        print(f"{label:24} {t_info * 1e3:8.3f} {t_null * 1e3:8.3f} {t_torch * 1e3:8.3f} "
              f"{t_null / t_info:9.2f} {t_torch / t_info:10.2f}", flush=True)

    ew = section("elementwise")
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")) if ew else ():
        x = torch.randn(n, device="cuda").to(tdt)
        y = torch.randn(n, device="cuda").to(tdt)
        out = torch.empty_like(x)
        cond = (torch.rand(n, device="cuda") > 0.5).to(torch.uint8)
        px, py, po, pc = x.data_ptr(), y.data_ptr(), out.data_ptr(), cond.data_ptr()
        info1, info2, info3 = (candle_info(dev, shape, k) for k in (1, 2, 3))
        for op, ref in (("exp", torch.exp), ("gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
                        ("copy", lambda t: out.copy_(t))):
            name = f"u{op}_{tag}"
            if ew and name in sk.UNARY:
                f = dev.get_or_load_func(name, sk.UNARY)
                row(name, lambda f=f: f[grid, block](n, nd, info1, px, po),
                    lambda f=f: f[grid, block](n, nd, None, px, po), lambda ref=ref: ref(x))
        for op in ("add", "mul"):
            name = f"b{op}_{tag}"
            if ew and name in sk.BINARY:
                f = dev.get_or_load_func(name, sk.BINARY)
                ref = torch.add if op == "add" else torch.mul
                row(name, lambda f=f: f[grid, block](n, nd, info2, px, py, po),
                    lambda f=f: f[grid, block](n, nd, None, px, py, po), lambda ref=ref: ref(x, y, out=out))
        name = f"where_u8_{tag}"
        if ew and name in sk.TERNARY:
            f = dev.get_or_load_func(name, sk.TERNARY)
            row(name, lambda f=f: f[grid, block](n, nd, info3, pc, px, py, po),
                lambda f=f: f[grid, block](n, nd, None, pc, px, py, po), lambda: torch.where(cond.bool(), x, y))
        name = f"affine_{tag}"
        if ew and name in sk.AFFINE:
            f = dev.get_or_load_func(name, sk.AFFINE)
            row(name, lambda f=f: f[grid, block](n, nd, info1, px, po, 1.5, 0.5),
                lambda f=f: f[grid, block](n, nd, None, px, po, 1.5, 0.5), lambda: torch.add(x * 1.5, 0.5))
    if section("fill"):
        const_set(dev, sk, n, shape, grid, block, row, timer)
    if ew or section("u8"):  # 1-byte copies: a 16-byte tile is 16 elements, so 15 threads in 16 are idle
        xu, ou = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8), torch.empty(n, device="cuda",
                                                                                           dtype=torch.uint8)
        f = dev.get_or_load_func("ucopy_u8", sk.UNARY)
        info1 = candle_info(dev, shape, 1)
        row("ucopy_u8", lambda: f[grid, block](n, nd, info1, xu.data_ptr(), ou.data_ptr()),
            lambda: f[grid, block](n, nd, None, xu.data_ptr(), ou.data_ptr()), lambda: ou.copy_(xu))
    xf, xb = torch.randn(n, device="cuda"), torch.empty(n, dtype=torch.bfloat16, device="cuda")
    info1 = candle_info(dev, shape, 1)
    for src, dst, name, ref in ((xf, xb, "cast_f32_bf16", lambda: xf.to(torch.bfloat16)),
                                (xb, xf, "cast_bf16_f32", lambda: xb.to(torch.float32))) if ew else ():
        if name in sk.CAST:
            f = dev.get_or_load_func(name, sk.CAST)
            ps, pd = src.data_ptr(), dst.data_ptr()
            row(name, lambda f=f, ps=ps, pd=pd: f[grid, block](n, nd, info1, ps, pd),
                lambda f=f, ps=ps, pd=pd: f[grid, block](n, nd, None, ps, pd), ref)
    # -- fast_* reductions: a block per row, candle's next_power_of_two(min(1024, cols)) threads
    import stdlib_kernels.reduce_launch as rl
    for cols in (1024, 4096) if section("reduce") else ():
        rws = n // cols
        kept = (1 << 10,) * (args.dims - 2) + (rws >> (10 * (args.dims - 2)),) if args.dims > 1 else ()
        rshape = kept + (cols,)
        rinfo = candle_info(dev, rshape, 1)
        for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            xr = torch.randn(rws, cols, device="cuda").to(tdt)
            for op, ref in (("fast_sum", lambda t: t.sum(-1)), ("fast_max", lambda t: t.amax(-1)),
                            ("fast_argmax", lambda t: t.argmax(-1))):
                name = f"{op}_{tag}"
                if name not in sk.REDUCE:
                    continue
                f = dev.get_or_load_func(name, sk.REDUCE)
                dst = torch.empty(rws, device="cuda", dtype=torch.int32 if "arg" in op else tdt)
                shape_r = ((rws, 1, 1), (rl.next_power_of_two(min(1024, cols)), 1, 1))
                call = (lambda f=f, xr=xr, dst=dst, inf=rinfo, nd=len(rshape):
                        f[shape_r](n, cols, nd, inf, xr.data_ptr(), dst.data_ptr()))
                call()
                want = ref(xr.float())
                got = dst.float() if "arg" not in op else dst.long()
                assert (torch.allclose(got, want, rtol=1e-2, atol=1e-1 * cols ** 0.5) if op == "fast_sum"
                        else torch.equal(got, want.to(got.dtype))), name
                row(f"{name} cols {cols}", call,
                    lambda f=f, xr=xr, dst=dst: f[shape_r](n, cols, 2, None, xr.data_ptr(), dst.data_ptr()),
                    lambda ref=ref, xr=xr: ref(xr))
    if section("indexing"):
        indexing(dev, sk, n, block, row)
    if section("strided") or section("reduce-strided") or section("conv"):
        print(f"{'(no null launch)':24} {'info ms':>8} {'wrap ms':>8} {'torch ms':>8} {'info/wrap':>9} {'info/torch':>10}")
    if section("strided"):
        strided(dev, sk, n, grid, block, row)
    if section("reduce-strided"):
        strided_reduce(dev, sk, n, row, rl)
    if section("conv"):
        conv(dev, sk, block, row)
    worst = min((r for r in rows if r[3]), key=lambda r: r[1], default=None)
    geo = float(np.exp(np.mean([np.log(r[2]) for r in rows])))
    if worst is not None:
        print(f"worst info/null: {worst[1]:.2f} ({worst[0]}); geometric mean info/torch: {geo:.2f} over {len(rows)} rows")


def const_set(dev, sk, n, shape, grid, block, row, timer):
    """``const_set`` of every dtype under candle's grid (info / null / torch's fill of as many bytes),
    then the launches ``fill.const_set`` makes itself (``launch_stream``'s grid: a null ``info`` for a
    contiguous destination, and ``info`` for a transposed one), and candle's grid on the transposed
    one. Every launch is checked first (every element set, from a poisoned buffer)."""
    import torch

    import pykern as pk
    from stdlib_kernels._common import launch_stream
    from stdlib_kernels.fill import from_f64
    by_bytes = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    info, nd = candle_info(dev, shape, 1), len(shape)
    nt = min(n, 1 << 24)  # transposed: index arithmetic per element, so a smaller buffer
    tinfo = dev.to_device(np.array([1024, nt // 1024, 1, 1024], np.uint64))
    tgrid = (-(-nt // 1024), 1, 1)
    wrapped = []
    for t in (pk.u8, pk.u32, pk.i64, pk.f32, pk.f64, pk.f16, pk.bf16, pk.f8e4m3, pk.i16, pk.i32):
        name = f"const_set_{t.tag}"
        if name not in sk.FILL:
            continue
        f = dev.get_or_load_func(name, sk.FILL)
        o = torch.empty(n, dtype=by_bytes[t.nbytes], device="cuda")
        val = from_f64(3, t)
        want = torch.from_numpy(np.array([val], t.np).view(np.dtype(f"u{t.nbytes}") if t.nbytes > 1 else np.uint8)
                                .astype(np.int64)).to("cuda").to(o.dtype)
        po = o.data_ptr()
        # the wrapper's own launches (fill.const_set): by the dtype and whether info is null alone
        shape_of = getattr(sk.fill, "const_set_shape", lambda x, i: launch_stream(x.size, x))
        like = lambda m, t=t: SimpleNamespace(size=m, dtype=t, device=dev)  # noqa: E731 (what the shape reads)
        wg, tw = shape_of(like(n), None), shape_of(like(nt), tinfo)
        for g, inf, m, dims in (((grid, block), info, n, nd), ((grid, block), None, n, nd), (wg, None, n, nd),
                                (tw, tinfo, nt, 2), ((tgrid, block), tinfo, nt, 2)):
            o.fill_(7)  # poison: no dtype's 3 has these bits
            f[g](m, dims, inf, val, po)
            torch.cuda.synchronize()
            assert bool((o[:m] == want).all()) and bool((o[m:] == 7).all()), (name, g, inf is None)
        row(name, lambda f=f: f[grid, block](n, nd, info, val, po), lambda f=f: f[grid, block](n, nd, None, val, po),
            lambda: o.fill_(3))
        wrapped.append((name, timer(lambda f=f, wg=wg: f[wg](n, 2, None, val, po)),
                        timer(lambda f=f, tw=tw: f[tw](nt, 2, tinfo, val, po)),
                        timer(lambda f=f: f[tgrid, block](nt, 2, tinfo, val, po))))
    print(f"{'const_set, ms':24} {'wrappers, contiguous':>20} {f'transposed 2^{nt.bit_length() - 1}':>16} "
          f"{'candle transposed':>17}")
    for name, a, b, c in wrapped:
        print(f"{name:24} {a * 1e3:20.3f} {b * 1e3:16.3f} {c * 1e3:17.3f}")


def indexing(dev, sk, n, block, row):
    """index_select of 1 KiB rows, candle's grid over the output, the ids' layout in info."""
    import torch
    hidden, vocab = 256, (1 << 26) // 1024
    irows = n // hidden
    table = torch.randn(vocab, hidden, device="cuda")
    ids = torch.randint(0, vocab, (irows,), device="cuda", dtype=torch.int64)
    sel = torch.empty(irows, hidden, device="cuda")
    f = dev.get_or_load_func("is_i64_f32", sk.INDEXING)
    iinfo = dev.to_device(np.array([irows, 1], np.uint64))
    ig = (-(-n // 1024), 1, 1)
    f[ig, block](n, 1, iinfo, ids.data_ptr(), table.data_ptr(), sel.data_ptr(), 1, vocab, irows, hidden)
    assert torch.equal(sel, torch.index_select(table, 0, ids)), "is_i64_f32"
    row("is_i64_f32 1 KiB rows",
        lambda: f[ig, block](n, 1, iinfo, ids.data_ptr(), table.data_ptr(), sel.data_ptr(), 1, vocab, irows, hidden),
        lambda: f[ig, block](n, 1, None, ids.data_ptr(), table.data_ptr(), sel.data_ptr(), 1, vocab, irows, hidden),
        lambda: torch.index_select(table, 0, ids, out=sel))

   

def strided(dev, sk, n, grid, block, row):
    """Strided layouts candle passes (a transposed operand, a broadcast row), candle's grid against
    the wrappers' launch."""
    import torch
    from stdlib_kernels._common import launch_stream
    r0, c0 = 1 << 10, n >> 10
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    xt = x.view(c0, r0).t()  # (r0, c0) with strides (1, r0): candle's .t()
    xa = dev.from_dlpack(x)
    cond = (torch.rand(n, device="cuda") > 0.5).to(torch.uint8)
    wgrid = launch_stream(n, xa)
    wgrid16 = launch_stream(n, xa, dev.from_dlpack(cond))
    sinfo = {k: dev.to_device(np.array([r0, c0] + st, np.uint64)) for k, st in (
        ("t", [1, r0]), ("t,b", [1, r0, 0, 1]), ("b,c,c", [0, 1, c0, 1, c0, 1]))}
    cases = [
        ("badd_f32 transposed+row", "t,b", sk.BINARY, (x, y), lambda: torch.add(xt, y[:c0], out=out.view(r0, c0)),
         lambda: (xt + y[:c0]).reshape(-1)),
        ("where_u8_f32 row cond", "b,c,c", sk.TERNARY, (cond, x, y),
         lambda: torch.where(cond[:c0].bool(), x.view(r0, c0), y.view(r0, c0)),
         lambda: torch.where(cond[:c0].bool(), x.view(r0, c0), y.view(r0, c0)).reshape(-1)),
        ("uexp_f32 transposed", "t", sk.UNARY, (x,), lambda: torch.exp(xt), lambda: torch.exp(xt).reshape(-1)),
        ("ucopy_f32 transposed", "t", sk.UNARY, (x,), lambda: out.view(r0, c0).copy_(xt), lambda: xt.reshape(-1)),
    ]
    for label, key, mod, ops, theirs, want in cases:
        name = label.split()[0]
        f = dev.get_or_load_func(name, mod)
        ptrs = [t.data_ptr() for t in ops]
        g_w = wgrid16 if mod is sk.TERNARY else wgrid
        inf = sinfo[key]
        out.fill_(float("nan"))
        f[grid, block](n, 2, inf, *ptrs, out.data_ptr())
        assert torch.allclose(out, want(), rtol=1e-6), label
        out.fill_(float("nan"))
        f[g_w](n, 2, inf, *ptrs, out.data_ptr())
        assert torch.allclose(out, want(), rtol=1e-6), label + " (wrappers' launch)"
        row(label, lambda f=f, p=ptrs, i=inf: f[grid, block](n, 2, i, *p, out.data_ptr()),
            lambda f=f, p=ptrs, i=inf, g=g_w: f[g](n, 2, i, *p, out.data_ptr()), theirs, gate=False)


def strided_reduce(dev, sk, n, row, rl):
    """``fast_*`` over dim 0 of a (cols, rows) matrix (candle's reduction of a transposed layout):
    rows of ``cols`` elements at a stride of ``rows``, candle's grid (a block per row) against the
    wrappers' launch of such rows (a block of up to WRAPPER_BLOCK threads per row)."""
    import torch
    for cols in (1024, 4096):
        rws = n // cols
        xm = torch.randn(cols, rws, device="cuda")
        xr = xm.t()  # (rws, cols), strides (1, rws)
        rinfo = dev.to_device(np.array([rws, cols, 1, rws], np.uint64))
        wblock = max(rl.WRAPPER_BLOCK, 2 * dev.target.wave_size)
        for op, ref in (("fast_sum", lambda t: t.sum(-1)), ("fast_argmax", lambda t: t.argmax(-1))):
            f = dev.get_or_load_func(f"{op}_f32", sk.REDUCE)
            dst = torch.empty(rws, device="cuda", dtype=torch.int32 if "arg" in op else torch.float32)
            shape_c = ((rws, 1, 1), (rl.next_power_of_two(min(1024, cols)), 1, 1))
            shape_w = ((rws, 1, 1), (min(wblock, rl.next_power_of_two(cols)), 1, 1))  # the wrappers' strided rows
            for shp in (shape_c, shape_w):
                dst.fill_(-1)
                f[shp](n, cols, 2, rinfo, xm.data_ptr(), dst.data_ptr())
                expect = ref(xr)
                assert (torch.allclose(dst, expect, rtol=1e-3, atol=1e-2) if op == "fast_sum"
                        else torch.equal(dst.long(), expect)), f"{op} strided {shp}"
            row(f"{op}_f32 cols {cols} transposed",
                lambda f=f, dst=dst, s=shape_c, i=rinfo, xm=xm: f[s](n, cols, 2, i, xm.data_ptr(), dst.data_ptr()),
                lambda f=f, dst=dst, s=shape_w, i=rinfo, xm=xm: f[s](n, cols, 2, i, xm.data_ptr(), dst.data_ptr()),
                lambda ref=ref, xr=xr: ref(xr), gate=False)


def conv(dev, sk, block, row):
    """2x2 max pool and 3x3 im2col, candle's grid of a thread an output, against the wrappers' launch."""
    import torch
    import torch.nn.functional as F

    import pykern as pk
    from stdlib_kernels.conv import im2col_launch, rows_launch
    batch = 8
    xp = torch.randn(batch, 256, 112, 112, device="cuda")
    op_ = torch.empty(batch, 256, 56, 56, device="cuda")
    infp = dev.to_device(np.array(list(xp.shape) + list(xp.stride()), np.uint64))
    f = dev.get_or_load_func("max_pool2d_f32", sk.CONV)
    pg = ((-(-op_.numel() // 1024), 1, 1), block)
    pw = rows_launch(batch * 256 * 56, 56, pk.f32, dev, tiles=False)
    f[pg](xp.numel(), 2, 2, 2, 2, infp, xp.data_ptr(), op_.data_ptr())
    assert torch.equal(op_, F.max_pool2d(xp, 2)), "max_pool2d_f32"
    row("max_pool2d_f32 2x2", lambda: f[pg](xp.numel(), 2, 2, 2, 2, infp, xp.data_ptr(), op_.data_ptr()),
        lambda: f[pw](xp.numel(), 2, 2, 2, 2, infp, xp.data_ptr(), op_.data_ptr()), lambda: F.max_pool2d(xp, 2),
        gate=False)
    xi = torch.randn(batch, 64, 56, 56, device="cuda")
    cols = torch.empty(batch, 56, 56, 64, 3, 3, device="cuda")
    infi = dev.to_device(np.array(list(xi.shape) + list(xi.stride()), np.uint64))
    f = dev.get_or_load_func("im2col_f32", sk.CONV)
    ig = ((-(-cols.numel() // 1024), 1, 1), block)
    iw = im2col_launch(batch, 64, 56, 56, 3, 3, pk.f32)
    row("im2col_f32 3x3 p1", lambda: f[ig](cols.numel(), 56, 56, 3, 3, 1, 1, 1, infi, xi.data_ptr(), cols.data_ptr()),
        lambda: f[iw](cols.numel(), 56, 56, 3, 3, 1, 1, 1, infi, xi.data_ptr(), cols.data_ptr()),
        lambda: F.unfold(xi, 3, padding=1), gate=False)


if __name__ == "__main__":
    main()
