"""A probe: im2col with its source staged channels-last, so that a pixel's run is whole 16-byte vectors.

Run on the GPU machine:  python benchmarks/im2col_cl_probe.py [--quick]

Issue 28's open figures are the wrappers' bf16 im2col 3x3 and im2col1d k3 (72% and 70% of copy;
f32 81% / 88%). The wrappers' rows kernels stage an item's source rows channel-major and read each
output element from the stage through a column table: one 2-byte shared read an element. This
probe stages the rows channels-last (``[row][column][channel]``, 16-byte vectors of 8 bf16 / 4 f32
channels, slots swizzled by the column), so a vector of channels at one tap is one 16-byte shared
read; a lane takes a unit (pixel, vector of channels), reads its KK taps' vectors (``ld.shared.v4``),
interleaves them in registers into the unit's KK output vectors (its run of V channels x KK taps is
contiguous in dst), and the wave stores its units' words in order through a buffer in shared memory
(``st.shared.v4`` in, a coalesced word a lane out, each lane's unit start by a shuffle).
``tests/stdlib/test_conv.py::test_im2col_cl_probe`` checks it on the CPU at both wave widths.
It times ``im2col_cl9_*`` / ``im2col1d_cl3_*`` beside the wrappers' kernels on benchmarks/conv.py's
buffers ([32,256,56,56] 3x3 p1, [32,256,8192] k3 p1), f32 and bf16, as % of the copy bandwidth.
Measured (docs/targets/cuda.md, "im2col channels-last probe"): slower than the wrappers' kernels.
"""
from __future__ import annotations

import argparse
import os
import sys

import pykern as pk
from pykern import ConstPtr, Ptr, f16, f32, bf16, u16, u32, usize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stdlib_kernels.conv import INDEX_31, layout_1d_as_2d, padded_source  # noqa: E402

T = pk.TypeVar("T")

#: ``im2col_cl9_*`` / ``im2col1d_cl3_*`` (channel counts a multiple of a vector's): an item
#: (b, oh, a run of ow, CL_NV vectors of channels) stages its source rows channels-last, so the KK taps
#: of a vector of channels are KK 16-byte shared loads; a lane interleaves them into its unit's KK output
#: vectors (V channels x KK taps, contiguous in dst), the wave passes them through shared memory and
#: stores them as whole words
CL_BLOCK = 128
CL_NV = 8
CL_LOADS = 8
CL_STAGE_BYTES = 24576


@pk.func
def cl_pixels(c_in: usize, h_k: usize, w_k: usize, w_out: usize, stride: usize, dilation: usize, vbytes: usize,
              stage_bytes: usize, kk: usize) -> usize:
    """Pixels an item of the channels-last path: the most consecutive ow whose staged columns (a row's
    pitch a multiple of 8 columns) fit the stage; 0 where the path does not apply (``im2col_cl_plan`` on
    the host computes the same)."""
    if h_k * w_k != kk or c_in % (16 // vbytes) != 0 or c_in == 0 or w_out == 0 or stride == 0:
        return usize(0)
    cols = stage_bytes // (CL_NV * 16 * h_k) // 8 * 8
    reach = (w_k - 1) * dilation + 1
    if cols < reach:
        return usize(0)
    return min(w_out, (cols - reach) // stride + 1)


@pk.func
def im2col_cl(h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize, stride: usize, pad_h: usize,
              padding: usize, dil_h: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T],
              pw: usize, st32: Ptr[u32], ob: Ptr[u32], *, T, KK, L):
    """Items go to blocks in turn (block-uniform loop and barriers). Fill: the item's ``h_k`` source rows
    x ``sw`` columns x CL_NV vectors as 4-byte words (16-bit types: a channel pair), a wave's lanes 8
    columns x a vector's 4 words (conflict-free stores: vector slot ``cv ^ x % 8``), L loads in flight.
    Write: a unit is (pixel q, vector cv); its lane loads the KK taps' vectors, interleaves them into
    the unit's ``4 * KK`` output words in its wave's part of ``ob``, and the wave stores its units' words
    in order, each lane finding its word's unit start by a shuffle."""
    V = 16 // T.nbytes
    CPW = 4 // T.nbytes  # channels a word
    c_in = info[1]
    sw = (pw - 1) * stride + (w_k - 1) * dilation + 1
    pitch = u32((sw + 7) // 8 * 8)
    cg = usize(CL_NV * V)
    c_tiles = (c_in + cg - 1) // cg
    w_tiles = (w_out + pw - 1) // pw
    items = info[0] * h_out * w_tiles * c_tiles
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    ws = u32(pk.wave_size)
    lane = t % ws
    wob = (t - lane) * u32(4 * KK)  # the wave's part of ob
    rowlen = c_in * usize(KK)
    hi = info[2]
    wi = info[3]
    d32 = pk.bitcast(dst, Ptr[u32])
    vals = pk.local.array(L, u32)
    tw = pk.local.array(4 * KK, u32)
    for item in range(usize(pk.block_idx.x), items, usize(pk.grid_dim.x)):
        ct = item % c_tiles
        r = item // c_tiles
        wt = r % w_tiles
        r = r // w_tiles
        oh = r % h_out
        b = r // h_out
        c0 = ct * cg
        nvn = u32(min(cg, c_in - c0) // usize(V))
        ow0 = wt * pw
        pn = u32(min(pw, w_out - ow0))
        base = src + b * info[4] + c0 * info[5]
        nfill = u32(h_k) * pitch * u32(CL_NV * 4)
        for f0 in range(t, nfill, nt * u32(L)):
            for u in pk.static_range(L):
                f = min(f0 + u32(u) * nt, nfill - 1)
                x = f % 8 + (f // 256) % (pitch // 8) * 8
                wd = (f // 8) % 4
                cv = (f // 32) % u32(CL_NV)
                row = f // (pitch * u32(CL_NV * 4))
                ch = usize(cv * u32(V) + wd * u32(CPW))
                ih = padded_source(oh * stride_h + usize(row) * dil_h, pad_h, hi)
                iw = padded_source(ow0 * stride + usize(x), padding, wi)
                inside = ih < hi and iw < wi and cv < nvn and usize(x) < sw
                o = pk.select(inside, ch * info[5] + ih * info[6] + iw * info[7], usize(0))
                if T.nbytes == 2:
                    w = u32(pk.bitcast(base[o], u16)) | (u32(pk.bitcast(base[o + info[5]], u16)) << 16)
                else:
                    w = pk.bitcast(base[o], u32)
                vals[u] = pk.select(inside, w, u32(0))
            for u in pk.static_range(L):
                f = f0 + u32(u) * nt
                if f < nfill:
                    x = f % 8 + (f // 256) % (pitch // 8) * 8
                    cv = (f // 32) % u32(CL_NV)
                    row = f // (pitch * u32(CL_NV * 4))
                    st32[((row * pitch + x) * u32(CL_NV) + (cv ^ (x % 8))) * 4 + (f // 8) % 4] = vals[u]
        pk.syncthreads()
        units = pn * nvn
        sc = u32(stride)
        for u0 in range(u32(0), units, nt):
            unit = u0 + t
            ok = unit < units
            q = unit // max(nvn, u32(1))
            cv = unit - q * nvn
            start = ((b * h_out + oh) * w_out + ow0 + usize(q)) * rowlen + (c0 + usize(cv * u32(V))) * usize(KK)
            if ok:
                for k in pk.static_range(KK):
                    kh = u32(k) // u32(w_k)
                    x = q * sc + (u32(k) - kh * u32(w_k)) * u32(dilation)
                    v = ((kh * pitch + x) * u32(CL_NV) + (cv ^ (x % 8))) * 4
                    for j in pk.static_range(4):
                        tw[k * 4 + j] = st32[v + u32(j)]
                for j in pk.static_range(4 * KK):
                    if T.nbytes == 2:
                        lo = (tw[(2 * j) % KK * 4 + (2 * j) // KK // 2] >> (16 * ((2 * j) // KK % 2))) & 0xFFFF
                        hi16 = (tw[(2 * j + 1) % KK * 4 + (2 * j + 1) // KK // 2] >> (16 * ((2 * j + 1) // KK % 2))) << 16
                        ob[wob + lane * u32(4 * KK) + u32(j)] = lo | (hi16 & 0xFFFF0000)
                    else:
                        ob[wob + lane * u32(4 * KK) + u32(j)] = tw[j % KK * 4 + j // KK]
            pk.syncthreads()
            word0 = start // usize(CPW)
            for m in pk.static_range(4 * KK):
                kw = u32(m) * ws + lane  # the wave's word: unit kw // KW, its word kw % KW
                src_lane = kw // u32(4 * KK)
                s = pk.wave.shuffle(word0, src_lane)
                if u0 + (t - lane) + src_lane < units:
                    d32[s + usize(kw - src_lane * u32(4 * KK))] = ob[wob + kw]
            pk.syncthreads()
        pk.syncthreads()


@pk.kernel(max_block_size=CL_BLOCK)
def im2col_cl_op(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
                 dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, KK, SB, L):
    """im2col for windows of KK taps over channel counts a multiple of a 16-byte vector's (candle's
    signature and semantics; ``im2col_cl_ok`` on the host): ``im2col_cl``. Other arguments, and blocks
    not a whole number of waves or over CL_BLOCK, write nothing."""
    stage = pk.shared.array(SB // 4, u32)
    ob = pk.shared.array(CL_BLOCK * 4 * KK, u32)
    pw = cl_pixels(info[1], h_k, w_k, w_out, stride, dilation, usize(T.nbytes), usize(SB), usize(KK))
    if (pw > 0 and dst_numel > 0 and pk.is_aligned(dst, 16) and pk.block_dim.x <= CL_BLOCK
            and pk.block_dim.x % u32(pk.wave_size) == 0):
        im2col_cl(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src, dst, pw,
                  stage, ob, T=T, KK=KK, L=L)


@pk.kernel(max_block_size=CL_BLOCK)
def im2col1d_cl_op(dst_numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                   info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, KK, SB, L):
    """im2col1d by ``im2col_cl`` on the input seen as height 1 (``im2col1d_cl_{T}``)."""
    stage = pk.shared.array(SB // 4, u32)
    ob = pk.shared.array(CL_BLOCK * 4 * KK, u32)
    pw = cl_pixels(info[1], usize(1), l_k, l_out, stride, dilation, usize(T.nbytes), usize(SB), usize(KK))
    if (pw > 0 and dst_numel > 0 and pk.is_aligned(dst, 16) and pk.block_dim.x <= CL_BLOCK
            and pk.block_dim.x % u32(pk.wave_size) == 0):
        as_2d = pk.local.array(8, usize)
        layout_1d_as_2d(info, as_2d)
        im2col_cl(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation, as_2d, src,
                  dst, pw, stage, ob, T=T, KK=KK, L=L)

#: the probe module: 3x3 (2-d) and 3-tap (1-d) windows
PROBE = pk.Module("im2col_cl_probe")
CL_DTYPES = (f32, f16, bf16)
for _t in CL_DTYPES:
    PROBE.add(im2col_cl_op.instance(f"im2col_cl9_{_t.tag}", T=_t, KK=9, SB=CL_STAGE_BYTES, L=CL_LOADS))
    PROBE.add(im2col1d_cl_op.instance(f"im2col1d_cl3_{_t.tag}", T=_t, KK=3, SB=CL_STAGE_BYTES, L=CL_LOADS))


# ---- host side ------------------------------------------------------------------------------------------
def im2col_cl_plan(c_in: int, h_k: int, w_k: int, w_out: int, stride: int, dilation: int, dtype,
                   kk: int) -> int:
    """``cl_pixels`` on the host: an item's pixels for ``im2col_cl{kk}_{dtype}``, 0 where it does not apply."""
    if h_k * w_k != kk or c_in == 0 or c_in % (16 // dtype.nbytes) or w_out == 0 or stride == 0:
        return 0
    cols = CL_STAGE_BYTES // (CL_NV * 16 * h_k) // 8 * 8
    reach = (w_k - 1) * dilation + 1
    return 0 if cols < reach else min(w_out, (cols - reach) // stride + 1)


def im2col_cl_ok(x, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, padding: int, dilation: int) -> bool:
    """Whether the wrappers take ``im2col_cl9_*`` (x (b, c, h, w), a 3x3 window) or ``im2col1d_cl3_*`` (x (b,
    c, l), 3 taps): a dtype they are built for, channels a multiple of a 16-byte vector's, sizes below 2**31
    (the kernels' u32 stage arithmetic)."""
    kk = 9 if x.ndim == 4 else 3
    if x.ndim not in (3, 4) or x.dtype not in CL_DTYPES or h_out * w_out == 0 or x.shape[0] == 0:
        return False
    pixels = im2col_cl_plan(x.shape[1], h_k, w_k, w_out, stride, dilation, x.dtype, kk)
    return pixels > 0 and max(*x.shape, h_out, w_out, stride, padding, dilation) <= INDEX_31


def im2col_cl_launch(b: int, c_in: int, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, dilation: int,
                     dtype) -> tuple[int, int]:
    """The wrappers' grid for ``im2col_cl*``: one block of CL_BLOCK per item (``im2col1d``: h_out = h_k = 1)."""
    pixels = im2col_cl_plan(c_in, h_k, w_k, w_out, stride, dilation, dtype, h_k * w_k)
    group = CL_NV * 16 // dtype.nbytes
    return max(1, b * h_out * -(-w_out // max(pixels, 1)) * -(-c_in // group)), CL_BLOCK

def run(b, quick: bool) -> None:
    """The probe beside the wrappers' kernels on benchmarks/conv.py's im2col buffers, outputs compared."""
    import torch.nn.functional as F

    from conv import Lazy, as_array, info  # benchmarks/conv.py
    from stdlib_kernels import CONV
    from stdlib_kernels.conv import im2col_rows_launch, im2col_rows_pairs_ok
    torch, dev = b.torch, b.dev
    batch = 8 if quick else 32
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
        cols = torch.empty(batch, 56, 56, 256, 3, 3, device="cuda", dtype=tdt)
        xa, inf = as_array(dev, x), info(torch, x)
        pairs = im2col_rows_pairs_ok(xa, 56, 56, 3, 3, 1, 1, 1)
        cases = {"wrapper": (Lazy(dev, f"im2col_rows{'_pairs' if pairs else ''}_{tag}", CONV),
                             im2col_rows_launch(batch, 256, 56, 56, 3, 3, 1, 1, xa.dtype, dev, pairs=pairs))}
        assert im2col_cl_ok(xa, 56, 56, 3, 3, 1, 1, 1)
        cases["cl"] = (Lazy(dev, f"im2col_cl9_{tag}", PROBE), im2col_cl_launch(batch, 256, 56, 56, 3, 3, 1, 1, xa.dtype))
        for name, (fn, (grid, block)) in cases.items():
            cols.fill_(float("nan"))
            b.case(f"im2col 3x3 p1 [{batch},256,56,56] {tag} [{name}]", x.nbytes + cols.nbytes,
                   lambda fn=fn, g=grid, bl=block: fn[g, bl](cols.numel(), 56, 56, 3, 3, 1, 1, 1, inf, x.data_ptr(),
                                                            cols.data_ptr()),
                   lambda: F.unfold(x, 3, padding=1),
                   lambda: (cols.view(batch, 56 * 56, 256 * 9).transpose(1, 2), F.unfold(x, 3, padding=1)))
        ln = 8192
        x1 = torch.randn(batch, 256, ln, device="cuda").to(tdt)
        cols1 = torch.empty(batch, ln, 256, 3, device="cuda", dtype=tdt)
        xa1, inf1 = as_array(dev, x1), info(torch, x1)
        pairs = im2col_rows_pairs_ok(xa1, 1, ln, 1, 3, 1, 1, 1)
        cases = {"wrapper": (Lazy(dev, f"im2col1d_rows{'_pairs' if pairs else ''}_{tag}", CONV),
                             im2col_rows_launch(batch, 256, 1, ln, 1, 3, 1, 1, xa1.dtype, dev, one_d=True, pairs=pairs))}
        assert im2col_cl_ok(xa1, 1, ln, 1, 3, 1, 1, 1)
        cases["cl"] = (Lazy(dev, f"im2col1d_cl3_{tag}", PROBE), im2col_cl_launch(batch, 256, 1, ln, 1, 3, 1, 1, xa1.dtype))
        threads = batch * ln * 256
        for name, (fn, (grid, block)) in cases.items():
            cols1.fill_(float("nan"))
            b.case(f"im2col1d k3 p1 [{batch},256,{ln}] {tag} [{name}]", x1.nbytes + cols1.nbytes,
                   lambda fn=fn, g=grid, bl=block: fn[g, bl](threads, ln, 3, 1, 1, 1, inf1, x1.data_ptr(),
                                                            cols1.data_ptr()),
                   lambda: F.unfold(x1.unsqueeze(2), (1, 3), padding=(0, 1)),
                   lambda: (cols1.view(batch, ln, 256 * 3).transpose(1, 2),
                            F.unfold(x1.unsqueeze(2), (1, 3), padding=(0, 1))))


def main() -> None:
    import torch

    from conv import Bench  # benchmarks/conv.py
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    b = Bench(torch, pk.device("cuda"), args.reps)
    run(b, args.quick)


if __name__ == "__main__":
    main()
