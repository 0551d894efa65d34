"""Where the conv family's row kernels lose bandwidth: grids, registers, and a flat probe of the same bytes.

Run on the GPU machine:  python benchmarks/conv_rows_probe.py [--quick]

On ``benchmarks/conv.py``'s buffers (pools 2x2 on [32,256,112,112], nearest 2x and im2col 3x3 on
[32,256,56,56]), f32 and bf16, each % of the copy bandwidth measured in the same run:

* candle's kernels (``max_pool2d_*``, ``avg_pool2d_*``, ``upsample_nearest2d_*``) under the wrappers'
  ``rows_launch`` with 4 to 16 blocks of 256 a multiprocessor (nearest: 16 to 128, and a block for
  every row group, over the source rows that ``nearest_int_rows`` takes). One kernel holds every path of its
  op, so its registers are those of its largest path (64 under ``.maxntid 1024``: 4 blocks of 256 an SM);
* the vector-row path alone: the pools' ``{op}_vec_*`` (the wrappers' own kernels), and
  ``nearest_int_rows`` (F 2) in a kernel of its own (blocks of at most 256: its own registers, 8 blocks an SM),
  that one also with its occupancy cut by dynamic shared memory (36 KiB: 6 blocks an SM, 48 KiB: 4);
* a flat probe of the pool's bytes: ``out[i] = pool_words(a[i], b[i])`` over the input's two halves
  (the same arithmetic and bytes as the pool, no rows), the bound of the arithmetic under a plain
  grid-stride launch;
* im2col 3x3: candle's kernel and the staged path alone (``im2col_staged``; also with its registers
  capped for 5 and 6 blocks an SM), all under ``im2col_launch``, and torch's ``fill_`` of its output (the write-only bound of a 9:1 write:read
  pattern).
* im2col 3x3 and im2col1d k3 by rows (``--only im2col``): the rows path with one stage and a block an
  item (``im2col_rows``, the wrappers' ``im2col1d_rows_*``) against the pipelined one (``im2col_rows_pipe``,
  the wrappers' ``im2col_rows_*``: two stages, a block looping over items) and its variants (loads in
  flight, registers sized for 2 or 3 blocks an SM), bf16's pair fill (``im2col_rows_pairs_*`` and its
  variants, ``PAIR_VARIANTS``), and torch's ``fill_`` of the 3x3 output.
* col2im1d k4 s2 (``--only col2im``): the staged kernel against the rows path (``col2im1d_rows_*``) and
  its variants (without the whole-tap words, 4 taps an output, a 48 KiB stage, staged rows of 128 or
  512 bytes), and the ideal pattern of its bytes
  (``sum_flat``: two values read a value written, one stream each way).
"""
from __future__ import annotations

import argparse
import sys

import pykern as pk
from pykern import ConstPtr, Ptr, f64, usize

from conv import Bench, Lazy, as_array, info  # benchmarks/conv.py

T = pk.TypeVar("T")
W = pk.TypeVar("W")


from stdlib_kernels import conv  # noqa: E402
from stdlib_kernels.conv import (ROWS_BLOCK, ROWS_LOADS, ROWS_STAGE_BYTES, STAGE_BYTES, STAGE_PIXELS,  # noqa: E402
                                 im2col_staged, nearest_int_rows, pool_words)


def _near_vec(w_out: usize, h_out: usize, w_scale: f64, h_scale: f64, info: ConstPtr[usize], src: ConstPtr[T],
              dst: Ptr[T], *, T, W, H):
    nearest_int_rows(info, src, dst, False, F=2)


def _pool_flat(n: usize, a: ConstPtr[W], b: ConstPtr[W], out: Ptr[T], *, T, A, MAX, W, H):
    for i in pk.grid_stride(n):
        out[i] = pool_words(a[i], b[i], T=T, A=A, MAX=MAX, W=W, H=H)


def _im2col_st(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize,
               padding: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T):
    sh = pk.shared.array(STAGE_BYTES // T.nbytes, T)
    kk = h_k * w_k
    chunk = min(info[1], (usize(STAGE_BYTES // T.nbytes) // STAGE_PIXELS - 1) // max(kk, usize(1)))
    im2col_staged(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src, dst,
                  chunk, dst_numel // (info[1] * kk), sh, P=STAGE_PIXELS, KH=3, KW=3, U=1)


#: the probe module: the vector-row paths and im2col's staged path as kernels of their own
PROBE = pk.Module("conv_rows_probe")
_nv = pk.kernel(max_block_size=256)(_near_vec)
_pf, _ic = pk.kernel(_pool_flat), pk.kernel(max_block_size=256)(_im2col_st)
for _t, _w, _h in ((pk.f32, pk.u64, pk.u32), (pk.bf16, pk.u32, pk.u16)):
    for _mx in (True, False):
        PROBE.add(_pf.instance(f"{'max' if _mx else 'avg'}_flat_{_t.tag}", T=_t, A=pk.f32, MAX=_mx, W=_w, H=_h))
    PROBE.add(_nv.instance(f"near_vec_{_t.tag}", T=_t, W=_w, H=_h))
    PROBE.add(_ic.instance(f"im2col_st_{_t.tag}", T=_t))
    for _mb in (5, 6):  # registers capped for 5 / 6 blocks of 256 an SM (48 / 40; the stage allows 7)
        PROBE.add(pk.kernel(max_block_size=256, min_blocks_per_sm={"cuda": _mb})(_im2col_st).instance(
            f"im2col_st_{_t.tag}_{_mb}", T=_t))


def _sum_flat(n: usize, a: ConstPtr[T], b: ConstPtr[T], out: Ptr[T], *, T):
    """col2im1d's ideal pattern: its bytes (two values read a value written) as one stream each way."""
    for i in pk.grid_stride(n):
        out[i] = a[i] + b[i]


_sf = pk.kernel(_sum_flat)
for _t in (pk.f32, pk.bf16):
    PROBE.add(_sf.instance(f"sum_flat_{_t.tag}", T=_t))
#: col2im1d_rows variants: label -> (stage bytes, loads in flight, taps)
_RB = conv.COLR_ROW_BYTES
COLR_VARIANTS = {  # label -> (stage bytes, loads in flight, taps, whole-tap words, staged row bytes)
    "rows, no whole-tap words": (conv.COLR_STAGE_BYTES, conv.COLR_LOADS, conv.COLR_TAPS, False, _RB),
    "rows, 4 taps": (conv.COLR_STAGE_BYTES, conv.COLR_LOADS, 4, True, _RB),
    "rows, 48 KiB stage": (49152, conv.COLR_LOADS, conv.COLR_TAPS, True, _RB),
    "rows, 128-byte rows": (conv.COLR_STAGE_BYTES, conv.COLR_LOADS, conv.COLR_TAPS, True, 128),
    "rows, 512-byte rows": (conv.COLR_STAGE_BYTES, conv.COLR_LOADS, conv.COLR_TAPS, True, 512),
    "rows, 128-byte rows, 48 KiB": (49152, conv.COLR_LOADS, conv.COLR_TAPS, True, 128),
    "rows, 512-byte rows, 48 KiB": (49152, conv.COLR_LOADS, conv.COLR_TAPS, True, 512),
}
#: the wrappers' stage and row bytes (``col2im1d_rows_{f32,bf16}`` on CUDA) with more words a lane (``WL``,
#: groups of fewer lanes a channel) and registers capped for some blocks an SM (0: uncapped): label -> (words
#: a lane, blocks)
COLR_WORD_VARIANTS = {"rows, 8 words a lane, 4 blocks/SM": (8, 4), "rows, 8 words a lane, 3 blocks/SM": (8, 3),
                      "rows, 8 words a lane, 5 blocks/SM": (8, 5), "rows, 12 words a lane, 4 blocks/SM": (12, 4),
                      "rows, 16 words a lane, 4 blocks/SM": (16, 4), "rows, 16 words a lane, 3 blocks/SM": (16, 3),
                      "rows, 32 words a lane, 4 blocks/SM": (32, 4), "rows, 16 words a lane": (16, 0)}
for _t in (pk.f32, pk.bf16):
    for _n, (_sb, _l, _mt, _fast, _rb) in enumerate(COLR_VARIANTS.values()):
        PROBE.add(conv.col2im1d_rows_op.instance(f"colr_{_n}_{_t.tag}", T=_t, SB=_sb, L=_l, MT=_mt, FAST=_fast,
                                                 RB=_rb, WL=conv.COLR_WORDS))
    _own = conv.col2im1d_rows_params(_t, "cuda")
    for _n, (_wl, _mb) in enumerate(COLR_WORD_VARIANTS.values()):
        _k = pk.kernel(max_block_size=conv.COLR_BLOCK, **({"min_blocks_per_sm": {"cuda": _mb}} if _mb else {}))(
            conv.col2im1d_rows_op.__wrapped__)  # _mb 0: registers uncapped
        PROBE.add(_k.instance(f"colw_{_n}_{_t.tag}", T=_t, SB=_own["stage_bytes"], L=conv.COLR_LOADS,
                              MT=conv.COLR_TAPS, FAST=True, RB=_own["row_bytes"], WL=_wl))


def run_col2im(b: Bench, quick: bool) -> None:
    """col2im1d k4 s2 on (32, 4096, 256, 4) -> (32, 256, 8194), benchmarks/conv.py's case: the staged
    kernel (the earlier wrappers' choice), the rows path and its variants, and the ideal pattern of the
    same bytes (``sum_flat``: one read stream of the input's two halves, one write stream)."""
    import torch.nn.functional as F

    from stdlib_kernels import CONV
    from stdlib_kernels.conv import col2im1d_launch, col2im1d_rows_plan
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    l_in, c_out, k, s = 4096, 256, 4, 2
    l_out = (l_in - 1) * s + k
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        pdt = pk.f32 if tag == "f32" else pk.bf16
        col = torch.randn(batch, l_in, c_out, k, device="cuda").to(tdt)
        im = torch.empty(batch, c_out, l_out, device="cuda", dtype=tdt)
        col_torch = col.permute(0, 2, 3, 1).reshape(batch, c_out * k, l_in)
        nbytes = col.nbytes + im.nbytes

        def grid(sb, mt, rb=conv.COLR_ROW_BYTES):
            chunk, span = col2im1d_rows_plan(c_out, k, s, pdt, sb, mt, rb)
            return batch * -(-l_in // span) * -(-c_out // chunk), conv.COLR_BLOCK
        runs = [("old: col2im1d_staged", Lazy(dev, f"col2im1d_staged_{tag}", CONV),
                 col2im1d_launch(batch, l_in, c_out, k, s, pdt)),
                ("col2im1d_rows", Lazy(dev, f"col2im1d_rows_{tag}", CONV),
                 conv.col2im1d_rows_launch(batch, l_in, c_out, k, s, pdt, dev.target))]
        for n, (label, (sb, _, mt, _, rb)) in enumerate(COLR_VARIANTS.items()):
            runs.append((label, Lazy(dev, f"colr_{n}_{tag}", PROBE), grid(sb, mt, rb)))
        for n, label in enumerate(COLR_WORD_VARIANTS):  # the wrappers' grid: same stage, same items
            runs.append((label, Lazy(dev, f"colw_{n}_{tag}", PROBE),
                         conv.col2im1d_rows_launch(batch, l_in, c_out, k, s, pdt, dev.target)))
        for label, fn, g in runs:
            im.fill_(float("nan"))
            b.case(f"col2im1d k4 s2 {tag} [{label}] {g[0]}x{g[1]}", nbytes,
                   lambda fn=fn, g=g: fn[g](im.numel(), l_out, l_in, c_out, k, s, col.data_ptr(), im.data_ptr()),
                   lambda: F.fold(col_torch, (1, l_out), (1, k), stride=(1, s)),
                   lambda: (im, F.fold(col_torch, (1, l_out), (1, k), stride=(1, s)).view(batch, c_out, l_out)))
        n = col.numel() // 2  # the input's two halves summed into the output's first n values
        fn = Lazy(dev, f"sum_flat_{tag}", PROBE)
        g = (-(-n // (256 * (16 // col.element_size()))), 256)
        b.case(f"col2im1d k4 s2 {tag} [probe: ideal pattern, sum_flat] {g[0]}x{g[1]}", 3 * n * col.element_size(),
               lambda: fn[g](n, col.data_ptr(), col.data_ptr() + n * col.element_size(), im.data_ptr()))
        del col, im, col_torch


#: the pipelined rows path (``im2col_rows_pipe``, two stages): label -> (loads in flight, registers sized for
#: this many blocks of ROWS_BLOCK an SM)
PIPE_VARIANTS = {"pipe, L=8, 3 blocks/SM": (8, 3), "pipe, L=8, 2 blocks/SM": (8, 2),
                 "pipe, L=12, 3 blocks/SM": (12, 3), "pipe, L=16, 2 blocks/SM": (16, 2)}
for _n, (_l, _mb) in enumerate(PIPE_VARIANTS.values()):
    _k2 = pk.kernel(max_block_size=ROWS_BLOCK, min_blocks_per_sm={"cuda": _mb})(conv.im2col_rows_op.__wrapped__)
    _k1 = pk.kernel(max_block_size=ROWS_BLOCK, min_blocks_per_sm={"cuda": _mb})(conv.im2col1d_rows_op.__wrapped__)
    for _t in (pk.f32, pk.bf16):
        PROBE.add(_k2.instance(f"pipe2d_{_n}_{_t.tag}", T=_t, SB=conv.ROWS_PIPE_STAGE_BYTES, L=_l, NS=2,
                               TB=conv.ROWS_PIPE_TAB, PR=0))
        PROBE.add(_k1.instance(f"pipe1d_{_n}_{_t.tag}", T=_t, SB=conv.ROWS_PIPE_STAGE_BYTES, L=_l, NS=2,
                               TB=conv.ROWS_PIPE_TAB, PR=0))
#: the pipeline's 16-bit pair fill (``im2col_rows_pipe`` with ``CW=2``, the wrappers' ``im2col_rows_pairs_*``) with its
#: registers sized for other occupancies, and with more loads in flight: label -> (loads in flight, blocks of
#: ROWS_BLOCK an SM)
PAIR_VARIANTS = {"pairs, L=8, 2 blocks/SM": (8, 2), "pairs, L=12, 3 blocks/SM": (12, 3),
                 "pairs, L=4, 3 blocks/SM": (4, 3)}
for _n, (_l, _mb) in enumerate(PAIR_VARIANTS.values()):
    _k2 = pk.kernel(max_block_size=ROWS_BLOCK, min_blocks_per_sm={"cuda": _mb})(conv.im2col_rows_op.__wrapped__)
    PROBE.add(_k2.instance(f"pair2d_{_n}_bf16", T=pk.bf16, SB=conv.ROWS_PIPE_STAGE_BYTES_16, L=_l, NS=2,
                           TB=conv.ROWS_PIPE_TAB_16, PR=1))
#: the rows path without the pipeline (one stage, one block an item; ``im2col1d_rows_*`` is this one)
for _t in (pk.f32, pk.bf16):
    PROBE.add(conv.im2col_rows_op.instance(f"old2d_{_t.tag}", T=_t, SB=ROWS_STAGE_BYTES, L=ROWS_LOADS, NS=1,
                                           TB=conv.ROWS_TAB, PR=0))
    PROBE.add(conv.im2col1d_rows_op.instance(f"old1d_{_t.tag}", T=_t, SB=ROWS_STAGE_BYTES, L=ROWS_LOADS, NS=1,
                                             TB=conv.ROWS_TAB, PR=0))

def run_im2col(b: Bench, quick: bool) -> None:
    """im2col 3x3 on [32,256,56,56] and im2col1d k3 on [32,256,8192]: the rows path without the pipeline
    (``old*``: one stage, a block an item; the wrappers' ``im2col1d_rows_*``) against the pipelined one
    (``im2col_rows_pipe``: the wrappers' ``im2col_rows_*`` under ``im2col_rows_launch``, and
    ``PIPE_VARIANTS`` under grids of as many blocks an SM as their registers allow), and torch's
    ``fill_`` of the 3x3 output (the write-only bound)."""
    import torch.nn.functional as F

    from stdlib_kernels import CONV
    from stdlib_kernels.conv import im2col_rows_launch, im2col_rows_plan
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    sms = dev.multiprocessors or 132
    nan = float("nan")

    def runs(tag, pdt, kind, c, h_out, w_out, kh, kw):
        chunk, pix = im2col_rows_plan(c, kh, kw, w_out, 1, 1, pdt)
        old_items = batch * h_out * -(-w_out // pix) * -(-c // chunk)
        chunk, pix = im2col_rows_plan(c, kh, kw, w_out, 1, 1, pdt, conv.ROWS_PIPE_STAGE_BYTES, conv.ROWS_PIPE_TAB)
        items = batch * h_out * -(-w_out // pix) * -(-c // chunk)
        name = "im2col_rows" if kind == "2d" else "im2col1d_rows"
        out = [("one stage, a block an item", Lazy(dev, f"old{kind}_{tag}", PROBE), (old_items, ROWS_BLOCK))]
        if kind == "2d":
            out.append(("im2col_rows (pipe), im2col_rows_launch", Lazy(dev, f"{name}_{tag}", CONV),
                        im2col_rows_launch(batch, c, h_out, w_out, kh, kw, 1, 1, pdt, dev)))
        for n, (label, (_, mb)) in enumerate(PIPE_VARIANTS.items()):
            out.append((label, Lazy(dev, f"pipe{kind}_{n}_{tag}", PROBE), (min(items, sms * mb), ROWS_BLOCK)))
        if kind == "2d" and tag == "bf16":
            out.append(("im2col_rows_pairs, im2col_rows_launch", Lazy(dev, f"im2col_rows_pairs_{tag}", CONV),
                        im2col_rows_launch(batch, c, h_out, w_out, kh, kw, 1, 1, pdt, dev, pairs=True)))
            chunk, pix = im2col_rows_plan(c, kh, kw, w_out, 1, 1, pdt, conv.ROWS_PIPE_STAGE_BYTES_16,
                                          conv.ROWS_PIPE_TAB_16, 2)
            items = batch * h_out * -(-w_out // pix) * -(-c // chunk)
            for n, (label, (_, mb)) in enumerate(PAIR_VARIANTS.items()):
                out.append((label, Lazy(dev, f"pair2d_{n}_bf16", PROBE), (min(items, sms * mb), ROWS_BLOCK)))
        return out

    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        pdt = pk.f32 if tag == "f32" else pk.bf16
        x = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
        cols = torch.empty(batch, 56, 56, 256, 3, 3, device="cuda", dtype=tdt)
        inf = info(torch, x)
        nbytes = x.nbytes + cols.nbytes
        for label, fn, g in runs(tag, pdt, "2d", 256, 56, 56, 3, 3):
            cols.fill_(nan)
            b.case(f"im2col 3x3 {tag} [{label}] {g[0]}x{g[1]}", nbytes,
                   lambda fn=fn, g=g: fn[g](cols.numel(), 56, 56, 3, 3, 1, 1, 1, inf, x.data_ptr(), cols.data_ptr()),
                   lambda: F.unfold(x, 3, padding=1),
                   lambda: (cols.view(batch, 56 * 56, 256 * 9).transpose(1, 2), F.unfold(x, 3, padding=1)))
        b.case(f"im2col 3x3 {tag} [probe: torch fill_ of the output, write only]", cols.nbytes,
               lambda: cols.fill_(1.0))
        l = 8192
        x1 = torch.randn(batch, 256, l, device="cuda").to(tdt)
        cols1 = torch.empty(batch, l, 256, 3, device="cuda", dtype=tdt)
        inf1 = info(torch, x1)
        threads = batch * l * 256
        for label, fn, g in runs(tag, pdt, "1d", 256, 1, l, 1, 3):
            cols1.fill_(nan)
            b.case(f"im2col1d k3 {tag} [{label}] {g[0]}x{g[1]}", x1.nbytes + cols1.nbytes,
                   lambda fn=fn, g=g: fn[g](threads, l, 3, 1, 1, 1, inf1, x1.data_ptr(), cols1.data_ptr()),
                   lambda: F.unfold(x1.unsqueeze(2), (1, 3), padding=(0, 1)),
                   lambda: (cols1.view(batch, l, 256 * 3).transpose(1, 2),
                            F.unfold(x1.unsqueeze(2), (1, 3), padding=(0, 1))))
        del x, cols, x1, cols1

def grid(rows: int, cols: int, dtype, dev, tiles: bool, per_sm: int):
    return conv.rows_launch(rows, cols, dtype, dev, tiles, per_sm=per_sm)


def run(b: Bench, quick: bool) -> None:
    import torch.nn.functional as F

    from stdlib_kernels import CONV
    from stdlib_kernels.conv import im2col_launch
    torch, dev = b.torch, b.dev
    mod = PROBE
    assert conv.ROW_BLOCK == 256
    batch = 8 if quick else 32
    nan = float("nan")
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        pdt = pk.f32 if tag == "f32" else pk.bf16
        xp = torch.randn(batch, 256, 112, 112, device="cuda").to(tdt)
        op_ = torch.empty(batch, 256, 56, 56, device="cuda", dtype=tdt)
        infp = info(torch, xp)
        rows = batch * 256 * 56
        half = xp.numel() // 2
        words = xp.view(torch.int32 if tag == "bf16" else torch.int64)
        for op, ref in (("max_pool2d", F.max_pool2d), ("avg_pool2d", F.avg_pool2d)):
            short = op[:3]
            runs = [(f"candle kernel, {s}/SM", Lazy(dev, f"{op}_{tag}", CONV), s) for s in (4, 8, 16)]
            runs += [(f"{op}_vec_{tag}, {s}/SM", Lazy(dev, f"{op}_vec_{tag}", CONV), s) for s in (8, 16)]
            for label, fn, s in runs:
                g = grid(rows, 56, pdt, dev, "_vec_" in label, s)
                op_.fill_(nan)
                b.case(f"{op} {tag} [{label}] {g[0]}x{g[1]}", xp.nbytes + op_.nbytes,
                       lambda fn=fn, g=g: fn[g](xp.numel(), 2, 2, 2, 2, infp, xp.data_ptr(), op_.data_ptr()),
                       lambda ref=ref: ref(xp, 2), lambda ref=ref: (op_, ref(xp, 2)))
            # the flat probe: the same bytes and arithmetic (its input the two halves, not row pairs)
            fn = Lazy(dev, f"{short}_flat_{tag}", mod)
            n = op_.numel()
            g = (-(-n // (256 * (16 // xp.element_size()))), 256)
            b.case(f"{op} {tag} [flat probe] {g[0]}x{g[1]}", xp.nbytes + op_.nbytes,
                   lambda fn=fn, g=g: fn[g](n, words.data_ptr(), words.data_ptr() + half * xp.element_size(),
                                            op_.data_ptr()), lambda ref=ref: ref(xp, 2))
        xu = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
        ou = torch.empty(batch, 256, 112, 112, device="cuda", dtype=tdt)
        infu = info(torch, xu)
        near = Lazy(dev, f"upsample_nearest2d_{tag}", CONV)
        runs = [(f"candle kernel, {s}/SM", near, s, 0) for s in (16, 32, 64, 96, 128, 1 << 20)]
        # the path alone, its occupancy cut by dynamic shared memory: 36 KiB (6 blocks an SM), 48 KiB (4)
        runs += [(f"vec path alone, {s}/SM, {kib} KiB", Lazy(dev, f"near_vec_{tag}", mod), s, kib)
                 for s, kib in ((64, 0), (64, 48), (1 << 20, 48))]
        for label, fn, s, kib in runs:
            g = grid(batch * 256 * 56, 56, pdt, dev, True, s)  # nearest_int_rows: source rows
            ou.fill_(nan)
            b.case(f"nearest 2x {tag} [{label}] {g[0]}x{g[1]}", xu.nbytes + ou.nbytes,
                   lambda fn=fn, g=g, kib=kib: fn[(g[0], 1, 1), (g[1], 1, 1), None, kib * 1024](
                       112, 112, 0.5, 0.5, infu, xu.data_ptr(), ou.data_ptr()),
                   lambda: F.interpolate(xu, size=(112, 112), mode="nearest"),
                   lambda: (ou, F.interpolate(xu, size=(112, 112), mode="nearest")))
        cols = torch.empty(batch, 56, 56, 256, 3, 3, device="cuda", dtype=tdt)
        infx = info(torch, xu)
        g = im2col_launch(batch, 256, 56, 56, 3, 3, pdt)
        for label, fn in (("candle kernel", Lazy(dev, f"im2col_{tag}", CONV)),
                          ("staged path alone", Lazy(dev, f"im2col_st_{tag}", mod)),
                          ("staged path alone, 5 blocks/SM", Lazy(dev, f"im2col_st_{tag}_5", mod)),
                          ("staged path alone, 6 blocks/SM", Lazy(dev, f"im2col_st_{tag}_6", mod))):
            cols.fill_(nan)
            b.case(f"im2col 3x3 {tag} [{label}] {g[0]}x{g[1]}", xu.nbytes + cols.nbytes,
                   lambda fn=fn: fn[g](cols.numel(), 56, 56, 3, 3, 1, 1, 1, infx, xu.data_ptr(), cols.data_ptr()),
                   lambda: F.unfold(xu, 3, padding=1),
                   lambda: (cols.view(batch, 56 * 56, 256 * 9).transpose(1, 2), F.unfold(xu, 3, padding=1)))
        b.case(f"im2col 3x3 {tag} [probe: torch fill_ of the output, write only]", cols.nbytes,
               lambda: cols.fill_(1.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--match", help="only the cases whose label matches this regular expression")
    ap.add_argument("--only", choices=["rows", "im2col", "col2im"],
                    help="one part: the pools and upsamplings, im2col, or col2im1d")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/conv_rows_probe.py needs a CUDA GPU")
    torch.cuda.init()
    dev = pk.device("cuda")
    b = Bench(torch, dev, args.reps, args.match)
    if args.only in (None, "rows"):
        run(b, args.quick)
    if args.only in (None, "im2col"):
        run_im2col(b, args.quick)
    if args.only in (None, "col2im"):
        run_col2im(b, args.quick)


if __name__ == "__main__":
    main()
