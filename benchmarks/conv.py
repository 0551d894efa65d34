"""The CONV family and pykern's GEMM against PyTorch on the same GPU, same buffers, same process.

Run on the GPU machine:  python benchmarks/conv.py [--only data|gemm|conv2d] [--quick]

* Data movement (im2col, im2col1d, col2im1d, pools, upsampling) on working sets of >= 64 MB: each
  kernel under the wrappers' launch (as ``stdlib_kernels/conv_launch.py`` launches them: im2col and
  im2col1d through the wrappers' own ``im2col_rows_*`` / ``im2col1d_rows_*``, blocks of 288 under
  ``im2col_rows_launch``: im2col1d one per work item, im2col's pipelined kernel 3 an SM looping over
  the items; bf16 (3x3 and 3 taps over channels in 8s) through ``im2col_3x3_*`` / ``im2col1d_k3_*``,
  blocks of 128 a work item, ``im2col_vec_launch``; the pools and upsamplings
  ``rows_launch``, blocks of 256 taking output rows, at most 16 blocks a multiprocessor (exact 2x
  nearest, 2x and 4x: 64, ``nearest_launch``), the 2x2 pools through the wrappers' own ``{op}_vec_*``, exact 2x
  and 4x bilinear through ``upsample_bilinear2d_{2,4}x_*`` under ``bilinear_int_launch``, the downscale by 2
  through ``upsample_bilinear2d_down2x_*`` under ``rows_launch`` (and candle's
  kernel on the rows grid beside it, "rows"); col2im1d
  the wrappers' own ``col2im1d_rows_*``, one block of 256 per work item, ``col2im1d_rows_launch``, and
  beside it the earlier ``col2im1d_staged_*`` under ``col2im1d_launch``) and under candle's (one thread per output,
  blocks of 1024; im2col1d one thread per ``l_k`` outputs), against ``F.unfold``, ``F.max_pool2d``,
  ``F.avg_pool2d`` and ``F.interpolate``. Bandwidth counts the bytes a kernel must move: its input
  read once and its output written once; the device's copy bandwidth, measured in the same run, is
  the ceiling.
* The GEMM (``gemm_*``, ``stdlib_kernels/matmul.py``) on 4096^3 against ``torch.matmul``: f32 with
  TF32 off (the like-for-like figure: both on the FP32 pipes), and f16 / bf16 (torch on tensor cores).
* conv2d through the wrapper (im2col + GEMM + permuting copy) on a ResNet layer ([32,256,56,56],
  3x3, 256 -> 256, padding 1) against ``F.conv2d`` with TF32 on (torch's default) and off.

Times are ``benchmarks/timing.py``'s (``Timer``: CUDA-event medians of 10 back-to-back calls queued
behind a GPU-side sleep, so the host's issue of the first call stays out), pykern's and torch's
alternating ``--rounds`` times (``Timer.pair``), as gpu.py, indexing.py and sort.py time. Each case
then prints the largest difference between pykern's output and torch's (the GEMM: relative to a
float64 product).
"""
from __future__ import annotations

import argparse
import re
import sys

import os

import numpy as np

import pykern as pk

sys.path.insert(0, os.path.dirname(__file__))
from timing import Timer  # noqa: E402  (benchmarks/timing.py: every benchmark's one way of timing)


class Bench:
    """Cases timed by ``benchmarks/timing.py``'s ``Timer`` (CUDA-event medians of ``calls`` back-to-back
    calls queued behind a GPU-side sleep: the GPU's time alone), pykern's and torch's alternating
    ``rounds`` times (``Timer.pair``; "spread": the lowest and highest ratio of those single rounds),
    every bandwidth as % of the copy bandwidth ``Timer.copy_bandwidth`` measures in the same run."""

    def __init__(self, torch, dev, reps: int, match: str | None = None, rounds: int = 2):
        self.torch, self.dev, self.reps, self.match, self.rounds = torch, dev, reps, match, rounds
        self.rows: list[tuple] = []
        self.timer = Timer(torch, reps=reps)
        self.copy_bw = self.timer.copy_bandwidth()
        print(f"{torch.cuda.get_device_name()}: copy bandwidth {self.copy_bw / 1e12:.3f} TB/s")
        print(f"{'case':60} {'pykern ms':>9} {'torch ms':>9} {'pk TB/s':>8} {'%copy':>6} {'pk/torch':>8} "
              f"{'spread':>11}")

    def case(self, label: str, nbytes: int, ours, theirs=None, same=None) -> None:
        """A bandwidth case: pykern's time, torch's (if any), % of copy bandwidth, torch/pykern time;
        ``same()`` gives (pykern's output, torch's, in one layout) after the runs: their largest difference.
        Cases whose label matches no ``--match`` pattern are skipped."""
        if self.match and not re.search(self.match, label):
            return
        spread = ""
        if theirs:
            t_ours, t_theirs, ratios = self.timer.pair(ours, theirs, self.rounds)
            spread = f"{min(ratios):5.2f}-{max(ratios):5.2f}"
        else:
            t_ours, t_theirs = self.timer(ours), float("nan")
        bw = nbytes / t_ours
        ratio = t_theirs / t_ours  # > 1: pykern faster
        self.rows.append((label, t_ours, t_theirs, ratio))
        diff = ""
        if same is not None:
            mine, ref = same()
            diff = f"  max|pk - torch| {(mine.float() - ref.float()).abs().max().item():.3g}"
        print(f"{label:60} {t_ours * 1e3:9.4f} {t_theirs * 1e3:9.4f} {bw / 1e12:8.3f} "
              f"{100 * bw / self.copy_bw:5.1f}% {ratio:8.2f} {spread:>11}{diff}", flush=True)

    def flops(self, label: str, flop: float, ours, theirs) -> None:
        """A compute case: TFLOP/s of each and torch/pykern time."""
        t_ours, t_theirs, _ = self.timer.pair(ours, theirs, 1)
        self.rows.append((label, t_ours, t_theirs, t_theirs / t_ours))
        print(f"{label:52} {t_ours * 1e3:9.3f} {t_theirs * 1e3:9.3f}   pykern {flop / t_ours / 1e12:6.1f} TFLOP/s, "
              f"torch {flop / t_theirs / 1e12:6.1f} TFLOP/s, pk/torch {t_theirs / t_ours:5.2f}", flush=True)


class Lazy:
    """A kernel loaded (compiled) on its first launch: cases skipped by ``--match`` compile nothing."""

    def __init__(self, dev, name: str, module):
        self.dev, self.name, self.module, self.fn = dev, name, module, None

    def __getitem__(self, launch):
        if self.fn is None:
            self.fn = self.dev.get_or_load_func(self.name, self.module)
        return self.fn[launch]


def as_array(dev, t):
    """A torch CUDA tensor as a pykern DeviceArray (same memory, same strides)."""
    from pykern.runtime.base import DeviceArray
    dtypes = {"torch.float32": pk.f32, "torch.float16": pk.f16, "torch.bfloat16": pk.bf16, "torch.float64": pk.f64,
              "torch.uint8": pk.u8}
    return DeviceArray(dev, t.data_ptr(), tuple(t.shape), dtypes[str(t.dtype)], owner=t, strides=tuple(t.stride()))


def info(torch, t) -> int:
    """candle's info for one operand (dims, strides), uploaded once; keeps the buffer alive on ``t``."""
    buf = torch.tensor(list(t.shape) + list(t.stride()), dtype=torch.int64, device="cuda")
    t._pk_info = buf
    return buf.data_ptr()


def shapes(b: Bench, numel: int, *tensors, per_thread_outputs: int = 1):
    """{launch name: (grid, block)}: the wrappers' (launch_stream) and candle's (1D/1024)."""
    from stdlib_kernels._common import launch_stream
    arrays = [as_array(b.dev, t) for t in tensors]
    candle = (max(1, -(-(numel // per_thread_outputs) // 1024)), 1024)
    return {"wrapper": launch_stream(numel, *arrays), "candle": candle}


def row_shapes(b: Bench, out, tiles: bool = True):
    """The pools' (``tiles`` False) and upsamplings' launches: the wrappers' (``rows_launch``) and
    candle's (1D/1024)."""
    from stdlib_kernels.conv import rows_launch
    rows, cols = out.shape[0] * out.shape[1] * out.shape[2], out.shape[3]
    return {"wrapper": rows_launch(rows, cols, as_array(b.dev, out).dtype, b.dev, tiles),
            "candle": (max(1, -(-out.numel() // 1024)), 1024)}


def data_movement(b: Bench, quick: bool) -> None:
    import torch.nn.functional as F

    from stdlib_kernels import CONV
    from stdlib_kernels.conv import (col2im1d_launch, col2im1d_rows_launch, col2im1d_rows_ok, im2col_rows_launch,
                                     im2col_rows_ok, im2col_rows_pairs_ok, im2col_vec_launch, im2col_vec_ok)
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        # im2col 3x3, padding 1, on [32,256,56,56]: output (b, 56, 56, 256, 3, 3)
        x = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
        cols = torch.empty(batch, 56, 56, 256, 3, 3, device="cuda", dtype=tdt)
        # the wrappers' kernel: im2col_3x3_* for bf16 (im2col_vec_ok), else im2col_rows_*
        pairs = im2col_rows_pairs_ok(as_array(dev, x), 56, 56, 3, 3, 1, 1, 1)
        fns = {"wrapper": Lazy(dev, f"im2col_rows{'_pairs' if pairs else ''}_{tag}", CONV),
               "candle": Lazy(dev, f"im2col_{tag}", CONV)}
        inf = info(torch, x)
        nbytes = x.nbytes + cols.nbytes
        assert im2col_rows_ok(as_array(dev, x), 56, 56, 3, 3, 1, 1, 1)
        launches = {"wrapper": im2col_rows_launch(batch, 256, 56, 56, 3, 3, 1, 1, as_array(dev, x).dtype, dev,
                                                  pairs=pairs),
                    "candle": shapes(b, cols.numel(), x, cols)["candle"]}
        if im2col_vec_ok(as_array(dev, x), 56, 56, 3, 3, 1, 1, 1):  # bf16: the wrappers take im2col_3x3_*
            fns["wrapper"] = Lazy(dev, f"im2col_3x3_{tag}", CONV)
            launches["wrapper"] = im2col_vec_launch(batch, 256, 56, 56, 3, 3, 1, 1)
        for shape, (grid, block) in launches.items():
            cols.fill_(float("nan"))
            b.case(f"im2col 3x3 p1 [{batch},256,56,56] {tag} [{shape}]", nbytes,
                   lambda fn=fns[shape], g=grid, bl=block: fn[g, bl](cols.numel(), 56, 56, 3, 3, 1, 1, 1, inf, x.data_ptr(),
                                                      cols.data_ptr()),
                   lambda: F.unfold(x, 3, padding=1),
                   lambda: (cols.view(batch, 56 * 56, 256 * 9).transpose(1, 2), F.unfold(x, 3, padding=1)))
        # im2col1d k=3, padding 1, on [32,256,8192]
        l = 8192
        x1 = torch.randn(batch, 256, l, device="cuda").to(tdt)
        cols1 = torch.empty(batch, l, 256, 3, device="cuda", dtype=tdt)
        pairs = im2col_rows_pairs_ok(as_array(dev, x1), 1, l, 1, 3, 1, 1, 1)  # bf16: im2col1d_rows_pairs_*
        fns = {"wrapper": Lazy(dev, f"im2col1d_rows{'_pairs' if pairs else ''}_{tag}", CONV),
               "candle": Lazy(dev, f"im2col1d_{tag}", CONV)}
        inf1 = info(torch, x1)
        threads = batch * l * 256
        assert im2col_rows_ok(as_array(dev, x1), 1, l, 1, 3, 1, 1, 1)
        launches1 = {"wrapper": im2col_rows_launch(batch, 256, 1, l, 1, 3, 1, 1, as_array(dev, x1).dtype, dev,
                                                   one_d=True, pairs=pairs),
                     "candle": shapes(b, cols1.numel(), x1, cols1, per_thread_outputs=3)["candle"]}
        if im2col_vec_ok(as_array(dev, x1), 1, l, 1, 3, 1, 1, 1):  # bf16: the wrappers take im2col1d_k3_*
            fns["wrapper"] = Lazy(dev, f"im2col1d_k3_{tag}", CONV)
            launches1["wrapper"] = im2col_vec_launch(batch, 256, 1, l, 1, 3, 1, 1)
        for shape, (grid, block) in launches1.items():
            cols1.fill_(float("nan"))
            b.case(f"im2col1d k3 p1 [{batch},256,{l}] {tag} [{shape}]", x1.nbytes + cols1.nbytes,
                   lambda fn=fns[shape], g=grid, bl=block: fn[g, bl](threads, l, 3, 1, 1, 1, inf1, x1.data_ptr(), cols1.data_ptr()),
                   lambda: F.unfold(x1.unsqueeze(2), (1, 3), padding=(0, 1)),
                   lambda: (cols1.view(batch, l, 256 * 3).transpose(1, 2), F.unfold(x1.unsqueeze(2), (1, 3),
                                                                                     padding=(0, 1))))
        # col2im1d: (b, l_in, c_out, k) -> (b, c_out, (l_in - 1) * stride + k), stride 2, k 4 (overlapping)
        l_in = 4096
        col = torch.randn(batch, l_in, 256, 4, device="cuda").to(tdt)
        l_out = (l_in - 1) * 2 + 4
        im = torch.empty(batch, 256, l_out, device="cuda", dtype=tdt)
        fns = {"wrapper": Lazy(dev, f"col2im1d_rows_{tag}", CONV), "staged": Lazy(dev, f"col2im1d_staged_{tag}", CONV),
               "candle": Lazy(dev, f"col2im1d_{tag}", CONV)}
        col_torch = col.permute(0, 2, 3, 1).reshape(batch, 256 * 4, l_in)  # F.fold's (b, c*k, blocks), made once
        assert col2im1d_rows_ok(as_array(dev, col), l_in, 256, 4, 2, l_out)
        launches2 = {"wrapper": col2im1d_rows_launch(batch, l_in, 256, 4, 2, as_array(dev, col).dtype, dev.target),
                     "staged": col2im1d_launch(batch, l_in, 256, 4, 2, as_array(dev, col).dtype),
                     "candle": shapes(b, im.numel(), col, im)["candle"]}
        for shape, (grid, block) in launches2.items():
            im.fill_(float("nan"))
            b.case(f"col2im1d k4 s2 [{batch},{l_in},256,4] {tag} [{shape}]", col.nbytes + im.nbytes,
                   lambda fn=fns[shape], g=grid, bl=block: fn[g, bl](im.numel(), l_out, l_in, 256, 4, 2, col.data_ptr(),
                                                                      im.data_ptr()),
                   lambda: F.fold(col_torch, (1, l_out), (1, 4), stride=(1, 2)),
                   lambda: (im, F.fold(col_torch, (1, l_out), (1, 4), stride=(1, 2)).view(batch, 256, l_out)))
        # pools 2x2 stride 2 on [32,256,112,112]
        xp = torch.randn(batch, 256, 112, 112, device="cuda").to(tdt)
        op_ = torch.empty(batch, 256, 56, 56, device="cuda", dtype=tdt)
        infp = info(torch, xp)
        for op, ref in (("max_pool2d", F.max_pool2d), ("avg_pool2d", F.avg_pool2d)):
            # the wrappers take their own {op}_vec_* here (contiguous rows, 2x2 windows); candle its {op}_*
            fns = {"wrapper": Lazy(dev, f"{op}_vec_{tag}", CONV), "candle": Lazy(dev, f"{op}_{tag}", CONV)}
            for shape, (grid, block) in row_shapes(b, op_).items():
                op_.fill_(float("nan"))
                b.case(f"{op} 2x2 [{batch},256,112,112] {tag} [{shape}]", xp.nbytes + op_.nbytes,
                       lambda fn=fns[shape], g=grid, bl=block: fn[g, bl](xp.numel(), 2, 2, 2, 2, infp, xp.data_ptr(),
                                                                         op_.data_ptr()),
                       lambda ref=ref: ref(xp, 2), lambda ref=ref: (op_, ref(xp, 2)))
        # bilinear downscale by 2 on the same buffers (the wrappers' upsample_bilinear2d_down2x_*)
        half = lambda: F.interpolate(xp, size=(56, 56), mode="bilinear", align_corners=False)  # noqa: E731
        own, candle = (Lazy(dev, f"upsample_bilinear2d{k}_{tag}", CONV) for k in ("_down2x", ""))
        for shape, (fn, (grid, block)) in {"wrapper": (own, row_shapes(b, op_)["wrapper"]),
                                           "rows": (candle, row_shapes(b, op_)["wrapper"]),
                                           "candle": (candle, row_shapes(b, op_)["candle"])}.items():
            op_.fill_(float("nan"))
            b.case(f"upsample_bilinear2d 0.5x [{batch},256,112,112] {tag} [{shape}]", xp.nbytes + op_.nbytes,
                   lambda fn=fn, g=grid, bl=block: fn[g, bl](56, 56, False, False, 0.0, False, 0.0, infp, xp.data_ptr(),
                                                             op_.data_ptr()),
                   half, lambda: (op_, half()))
        # upsampling 2x: [32,256,56,56] -> 112x112
        xu = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
        ou = torch.empty(batch, 256, 112, 112, device="cuda", dtype=tdt)
        infu = info(torch, xu)
        fn = Lazy(dev, f"upsample_nearest2d_{tag}", CONV)
        from stdlib_kernels.conv import nearest_launch
        launches = {**row_shapes(b, ou), "wrapper": nearest_launch(as_array(dev, xu), 112, 112)}
        for shape, (grid, block) in launches.items():
            b.case(f"upsample_nearest2d 2x [{batch},256,56,56] {tag} [{shape}]", xu.nbytes + ou.nbytes,
                   lambda g=grid, bl=block: fn[g, bl](112, 112, 0.5, 0.5, infu, xu.data_ptr(), ou.data_ptr()),
                   lambda: F.interpolate(xu, size=(112, 112), mode="nearest"),
                   lambda: (ou, F.interpolate(xu, size=(112, 112), mode="nearest")))
        from stdlib_kernels.conv import bilinear_int_launch
        # bilinear 2x on the same buffers, 4x: [batch / 4,256,56,56] -> 224x224 (as many output bytes)
        for f, xb in ((2, xu), (4, xu[:max(1, batch // 4)])):
            size = 56 * f
            ob = torch.empty(xb.shape[0], 256, size, size, device="cuda", dtype=tdt)
            infb = info(torch, xb)
            candle_fn, own_fn = (Lazy(dev, f"upsample_bilinear2d{k}_{tag}", CONV) for k in ("", f"_{f}x"))
            launches = {"wrapper": (own_fn, bilinear_int_launch(as_array(dev, xb), f)),  # the wrappers' exact-F kernel
                        "rows": (candle_fn, row_shapes(b, ob)["wrapper"]),  # candle's kernel on the wrappers' old grid
                        "candle": (candle_fn, row_shapes(b, ob)["candle"])}
            if f == 4:  # nearest 4x on the same buffers (2x is above)
                near = Lazy(dev, f"upsample_nearest2d_{tag}", CONV)
                for shape, (grid, block) in {"wrapper": nearest_launch(as_array(dev, xb), size, size),
                                             "candle": row_shapes(b, ob)["candle"]}.items():
                    b.case(f"upsample_nearest2d 4x [{xb.shape[0]},256,56,56] {tag} [{shape}]", xb.nbytes + ob.nbytes,
                           lambda g=grid, bl=block, x=xb, o=ob, i=infb, s=size:
                               near[g, bl](s, s, 0.25, 0.25, i, x.data_ptr(), o.data_ptr()),
                           lambda x=xb, s=size: F.interpolate(x, size=(s, s), mode="nearest"),
                           lambda x=xb, o=ob, s=size: (o, F.interpolate(x, size=(s, s), mode="nearest")))
            ref = lambda x=xb, s=size: F.interpolate(x, size=(s, s), mode="bilinear", align_corners=False)  # noqa: E731
            for shape, (fn, (grid, block)) in launches.items():
                b.case(f"upsample_bilinear2d {f}x [{xb.shape[0]},256,56,56] {tag} [{shape}]", xb.nbytes + ob.nbytes,
                       lambda fn=fn, g=grid, bl=block, x=xb, o=ob, i=infb, s=size:
                           fn[g, bl](s, s, False, False, 0.0, False, 0.0, i, x.data_ptr(), o.data_ptr()),
                       ref, lambda o=ob, r=ref: (o, r()))


def gemm(b: Bench, quick: bool) -> None:
    from stdlib_kernels.matmul import MATMUL, gemm_launch
    torch, dev = b.torch, b.dev
    n = 2048 if quick else 4096
    for tdt, tag in ((torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16")):
        a = torch.randn(n, n, device="cuda").to(tdt)
        w = torch.randn(n, n, device="cuda").to(tdt)
        c = torch.empty(n, n, device="cuda", dtype=tdt)
        fn = dev.get_or_load_func(f"gemm_{tag}", MATMUL)
        grid, block = gemm_launch(n, n, 1, dev.target)
        ours = lambda: fn[grid, block](n, n, n, a.data_ptr(), 0, n, 1, w.data_ptr(), 0, n, 1, c.data_ptr())
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        b.flops(f"gemm {n}^3 {tag} (torch: {'FP32, TF32 off' if tag == 'f32' else 'tensor cores'})", 2.0 * n ** 3,
                ours, lambda: torch.matmul(a, w, out=c))
        ours()
        ref = torch.matmul(a.double(), w.double())
        print(f"    max|gemm - f64| / max|f64| = {((c.double() - ref).abs().max() / ref.abs().max()).item():.3g}")
        if tag == "f32":
            torch.backends.cuda.matmul.allow_tf32 = True
            b.flops(f"gemm {n}^3 f32 (torch: TF32 on)", 2.0 * n ** 3, ours, lambda: torch.matmul(a, w, out=c))
            torch.backends.cuda.matmul.allow_tf32 = False


def conv2d(b: Bench, quick: bool) -> None:
    import torch.nn.functional as F

    from stdlib_kernels import conv_launch
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
        w = (torch.randn(256, 256, 3, 3, device="cuda") * 0.05).to(tdt)
        xa, wa = as_array(dev, x), as_array(dev, w)
        flop = 2.0 * batch * 256 * 56 * 56 * 256 * 9
        for tf32 in ((True, False) if tag == "f32" else (False,)):
            torch.backends.cudnn.allow_tf32 = tf32
            label = f"conv2d wrapper 3x3 [{batch},256,56,56] {tag} (torch {'TF32' if tf32 else 'strict'})"
            b.flops(label, flop, lambda: conv_launch.conv2d(xa, wa, padding=1), lambda: F.conv2d(x, w, padding=1))
        got = conv_launch.conv2d(xa, wa, padding=1)
        torch.backends.cudnn.allow_tf32 = False
        want = F.conv2d(x.float(), w.float(), padding=1)
        err = (torch.from_numpy(got.to_host().astype(np.float32)).cuda() - want).abs().max().item()
        print(f"    max |wrapper - F.conv2d (f32, strict)| = {err:.3g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", choices=["data", "gemm", "conv2d"])
    ap.add_argument("--quick", action="store_true", help="smaller batches and a 2048^3 GEMM")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of pykern's and torch's timing a case")
    ap.add_argument("--match", help="a regular expression: only the bandwidth cases whose label matches")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/conv.py needs a CUDA GPU")
    torch.cuda.init()
    dev = pk.device("cuda")
    b = Bench(torch, dev, args.reps, args.match, args.rounds)
    for name, part in (("data", data_movement), ("gemm", gemm), ("conv2d", conv2d)):
        if args.only in (None, name):
            part(b, args.quick)


if __name__ == "__main__":
    main()
