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
from pykern import ConstPtr, Ptr, bf16, f16, f32, u16, u32, u64, usize

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
CL_LOADS_2D = 12
#: a stage's bytes
CL_STAGE_BYTES = 24576


@pk.func
def cl_pixels(c_in: usize, h_k: usize, w_k: usize, w_out: usize, stride: usize, dilation: usize, vbytes: usize,
              stage_bytes: usize, kk: usize, extra: usize) -> usize:
    """Pixels an item of the channels-last path: the most consecutive ow whose staged columns (a row's
    pitch a multiple of 8 columns) fit the stage; 0 where the path does not apply (``im2col_cl_plan`` on
    the host computes the same)."""
    if h_k * w_k != kk or c_in % (16 // vbytes) != 0 or c_in == 0 or w_out == 0 or stride == 0:
        return usize(0)
    cols = stage_bytes // (CL_NV * 16 * h_k) // 8 * 8
    reach = (w_k - 1) * dilation + 1
    if cols < reach + extra:
        return usize(0)
    return min(w_out, (cols - reach - extra) // stride + 1)


@pk.func
def cl_chunks_ok(info: ConstPtr[usize], src: ConstPtr[T]) -> bool:
    """The chunk fill applies: rows contiguous along w, every row, channel and batch start and the width a
    whole number of 4-element (8-byte) chunks, ``src`` 8-byte aligned."""
    return (info[7] == 1 and info[3] % 4 == 0 and info[4] % 4 == 0 and info[5] % 4 == 0 and info[6] % 4 == 0
            and pk.is_aligned(src, 8))


@pk.func
def cl_item(item: usize, c_tiles: usize, w_tiles: usize, h_out: usize) -> tuple[usize, usize, usize, usize]:
    """Item ``item``'s (batch, output row, w tile, channel tile)."""
    r = item // c_tiles
    return r // w_tiles // h_out, r // w_tiles % h_out, r % w_tiles, item % c_tiles


@pk.func
def cl_load(f0: u32, total: u32, pairs: u32, ngrp: u32, xl: u32, wd: u32, vals: Ptr[u32], base: ConstPtr[T],
            row0: usize, col0: usize, nvn: u32, sw: usize, dil_h: usize, pad_h: usize, padding: usize,
            geo: Ptr[usize], *, T, L):
    """A fill batch's L words (the thread's (row, pair) f0, f0 + ngrp, ...; 0 in the padding) into ``vals``:
    word ``wd`` of vector ``k % CL_NV`` at staged column ``k // CL_NV * 8 + xl`` of staged row ``row``.
    ``geo``: the source's height, width and channel, row and column strides, read once a kernel (in
    registers: a reload of ``info`` after each of the write's stores would follow every word)."""
    V = 16 // T.nbytes
    hi = geo[0]
    wi = geo[1]
    row = f0 // max(pairs, u32(1))
    k = f0 - row * pairs
    for u in pk.static_range(L):
        cv = k % u32(CL_NV)
        x = k // u32(CL_NV) * 8 + xl
        ih = padded_source(row0 + usize(row) * dil_h, pad_h, hi)
        iw = padded_source(col0 + usize(x), padding, wi)
        inside = f0 + u32(u) * ngrp < total and ih < hi and iw < wi and cv < nvn and usize(x) < sw
        o = pk.select(inside, usize(cv * u32(V) + wd * u32(4 // T.nbytes)) * geo[2] + ih * geo[3] + iw * geo[4],
                      usize(0))
        if T.nbytes == 2:
            w = u32(pk.bitcast(base[o], u16)) | (u32(pk.bitcast(base[o + geo[2]], u16)) << 16)
        else:
            w = pk.bitcast(base[o], u32)
        vals[u] = pk.select(inside, w, u32(0))
        k += ngrp
        wrap = k >= pairs
        k = pk.select(wrap, k - pairs, k)
        row = pk.select(wrap, row + 1, row)


@pk.func
def cl_store(f0: u32, total: u32, pairs: u32, ngrp: u32, xl: u32, wd: u32, vals: Ptr[u32], stage: Ptr[u32],
             pitch: u32, *, L):
    """``cl_load``'s words into the stage: slot ``cv ^ column % 8`` of their column."""
    row = f0 // max(pairs, u32(1))
    k = f0 - row * pairs
    for u in pk.static_range(L):
        if f0 + u32(u) * ngrp < total:
            x = k // u32(CL_NV) * 8 + xl
            stage[((row * pitch + x) * u32(CL_NV) + ((k % u32(CL_NV)) ^ xl)) * 4 + wd] = vals[u]
        k += ngrp
        wrap = k >= pairs
        k = pk.select(wrap, k - pairs, k)
        row = pk.select(wrap, row + 1, row)


@pk.func
def cl_load4(f0: u32, total: u32, nckg: u32, ngrp: u32, ckl: u32, wd: u32, vals: Ptr[u64], base: ConstPtr[T],
             row0: usize, pos0: usize, origin: usize, nvn: u32, nck: u32, dil_h: usize, pad_h: usize,
             geo: Ptr[usize], *, L):
    """The chunk fill's batch (16-bit types): L tasks (the thread's f0, f0 + ngrp, ...), each two channels'
    (``wd``'s pair of vector ``cv``) 4 aligned source columns as two 8-byte loads into ``vals``; task g is
    (staged row, vector, chunk group) = g's place in h_k x CL_NV x nckg, its chunk ``group * 8 + ckl``
    (staged columns 4 chunk .. 4 chunk + 3; source column ``pos0 + 4 chunk - origin``, 0 outside)."""
    hi = geo[0]
    wi = geo[1]
    b64 = pk.bitcast(base, ConstPtr[u64])
    for u in pk.static_range(L):
        g = f0 + u32(u) * ngrp
        rc = g // max(nckg, u32(1))
        ck = (g - rc * nckg) * 8 + ckl
        cv = rc % u32(CL_NV)
        ih = padded_source(row0 + usize(rc // u32(CL_NV)) * dil_h, pad_h, hi)
        pos = pos0 + usize(ck) * 4
        inside = g < total and ih < hi and pos >= origin and pos - origin < wi and cv < nvn and ck < nck
        o = pk.select(inside, usize(cv * 8 + wd * 2) * geo[2] + ih * geo[3] + (pos - origin), usize(0))
        vals[2 * u] = pk.select(inside, b64[o >> 2], u64(0))
        vals[2 * u + 1] = pk.select(inside, b64[(o + geo[2]) >> 2], u64(0))


@pk.func
def cl_store4(f0: u32, total: u32, nckg: u32, ngrp: u32, ckl: u32, wd: u32, vals: Ptr[u64], stage: Ptr[u32],
              pitch: u32, nck: u32, *, L):
    """``cl_load4``'s tasks into the stage: the pair's four columns as four words, each in slot ``cv ^ ckl``
    (``cv ^ (column >> 2) % 8``) of its column: a wave's stores of one column offset hit 32 banks."""
    for u in pk.static_range(L):
        g = f0 + u32(u) * ngrp
        rc = g // max(nckg, u32(1))
        ck = (g - rc * nckg) * 8 + ckl
        if g < total and ck < nck:
            a = vals[2 * u]
            b = vals[2 * u + 1]
            v = ((rc // u32(CL_NV)) * pitch + ck * 4) * u32(CL_NV) + ((rc % u32(CL_NV)) ^ ckl)
            for i in pk.static_range(4):
                stage[(v + u32(i * CL_NV)) * 4 + wd] = (u32(a >> u64(16 * i)) & 0xFFFF) | (u32(b >> u64(16 * i)) << 16)


@pk.func
def cl_fill_load(j: u32, grp: u32, per: u32, total: u32, span: u32, ngrp: u32, la: u32, wd: u32, vals: Ptr[u32],
                 vals64: Ptr[u64], base: ConstPtr[T], row0: usize, col0: usize, sh: usize, nvn: u32, sw: usize,
                 nck: u32, dil_h: usize, pad_h: usize, padding: usize, geo: Ptr[usize], *, T, L, CF):
    """Batch ``j`` of a stage's fill (the thread's tasks from ``grp + per * j``): ``cl_load4`` (CF) or
    ``cl_load``."""
    if CF:
        cl_load4(grp + per * j, total, span, ngrp, la, wd, vals64, base, row0, col0, padding + sh, nvn, nck, dil_h, pad_h,
                 geo, L=L)
    else:
        cl_load(grp + per * j, total, span, ngrp, la, wd, vals, base, row0, col0, nvn, sw, dil_h, pad_h, padding, geo,
                T=T, L=L)


@pk.func
def cl_fill_store(j: u32, grp: u32, per: u32, total: u32, span: u32, ngrp: u32, la: u32, wd: u32, vals: Ptr[u32],
                  vals64: Ptr[u64], stage: Ptr[u32], pitch: u32, nck: u32, *, L, CF):
    """``cl_fill_load``'s batch into ``stage``."""
    if CF:
        cl_store4(grp + per * j, total, span, ngrp, la, wd, vals64, stage, pitch, nck, L=L)
    else:
        cl_store(grp + per * j, total, span, ngrp, la, wd, vals, stage, pitch, L=L)


@pk.func
def cl_fill_item(item: usize, c_tiles: usize, w_tiles: usize, h_out: usize, pw: usize, stride: usize, pm: usize,
                 batches: u32, grp: u32, per: u32, total: u32, span: u32, ngrp: u32, la: u32, wd: u32, vals: Ptr[u32],
                 vals64: Ptr[u64], src: ConstPtr[T], s0: usize, cg: usize, c_in: usize, stride_h: usize, sw: usize,
                 nck: u32, dil_h: usize, pad_h: usize, padding: usize, geo: Ptr[usize], stage: Ptr[u32], pitch: u32,
                 *, T, L, CF):
    """Item ``item``'s whole stage, batch after batch (the caller's barrier follows)."""
    b, oh, wt, ct = cl_item(item, c_tiles, w_tiles, h_out)
    sh = (wt * pw * stride % 4 + 4 - pm) % 4
    for j in range(u32(0), batches):
        cl_fill_load(j, grp, per, total, span, ngrp, la, wd, vals, vals64, src + b * s0 + ct * cg * geo[2],
                     oh * stride_h, wt * pw * stride, sh, u32(min(cg, c_in - ct * cg) // usize(16 // T.nbytes)), sw,
                     nck, dil_h, pad_h, padding, geo, T=T, L=L, CF=CF)
        cl_fill_store(j, grp, per, total, span, ngrp, la, wd, vals, vals64, stage, pitch, nck, L=L, CF=CF)


@pk.func
def im2col_cl(h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize, stride: usize, pad_h: usize,
              padding: usize, dil_h: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T],
              pw: usize, stages: Ptr[u32], sb: u32, ob: Ptr[u32], *, T, KK, L, PART, CF, PIPE, OB2):
    """Items go to blocks in turn (block-uniform loop and barriers), pipelined over two stages of ``sb``
    words: while the block writes item i from one, it fills item i + grid into the other, a fill batch
    (L tasks a thread) issued before each write round and stored after it. A stage holds the item's
    ``h_k`` source rows x ``pitch`` columns x CL_NV 16-byte vectors of channels (channels-last); vector
    ``cv`` of column x sits in slot ``cv ^ f(x)``, ``f(x) = x % 8`` (the word fill) or ``x // 4 % 8`` (the
    chunk fill), so that the fill's stores and the write's vector loads hit every bank once.
    Fill, CF = 0 (``cl_load``): a word a task (16-bit types: a channel pair), a group of 32 threads 8
    columns x a vector's 4 words. CF = 1 (``cl_load4``, 16-bit types over rows of aligned 8-byte
    chunks; staged column 0 is ``sh`` columns before the item's first, so chunks are aligned): two
    channels x 4 columns a task, a group 8 chunks x a vector's 4 channel pairs.
    Write: a unit is (pixel q, vector cv); its lane loads the KK taps' vectors, interleaves them into
    the unit's KK output vectors in its wave's part of ``ob``; then the wave copies its units' output,
    one contiguous run a pixel, in 16-byte tiles (``pk.parallel_range``)."""
    V = 16 // T.nbytes
    CPW = 4 // T.nbytes  # channels a word
    c_in = info[1]
    sw = (pw - 1) * stride + (w_k - 1) * dilation + 1
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    grp = t // 32
    ngrp = nt // 32
    wd = (t // 8) % 4
    la = t % 8
    if CF:
        pitch = u32((sw + 3 + 7) // 8 * 8)
        nck = pitch // 4
        span = (nck + 7) // 8  # chunk groups a (row, vector)
        wd = t % 4
        la = (t // 4) % 8
    else:
        pitch = u32((sw + 7) // 8 * 8)
        nck = u32(0)
        span = pitch // 8 * u32(CL_NV)  # (octet, vector) pairs a row
    total = u32(h_k) * span * (u32(CL_NV) if CF else u32(1))
    per = ngrp * u32(L)
    batches = (total + per - 1) // per
    cg = usize(CL_NV * V)
    c_tiles = (c_in + cg - 1) // cg
    w_tiles = (w_out + pw - 1) // pw
    items = info[0] * h_out * w_tiles * c_tiles
    ws = u32(pk.wave_size)
    lane = t % ws
    wob = (t - lane) * u32(4 * KK)  # the wave's part of ob, in words
    rowlen = c_in * usize(KK)
    obt = pk.bitcast(ob, Ptr[T])
    vals = pk.local.array(L, u32)
    vals64 = pk.local.array(2 * L, u64)
    tw = pk.local.array(4 * KK, u32)
    geo = pk.local.array(5, usize)
    geo[0] = info[2]
    geo[1] = info[3]
    geo[2] = info[5]
    geo[3] = info[6]
    geo[4] = info[7]
    s0 = info[4]
    pm = padding % 4
    acc = u32(0)
    item = usize(pk.block_idx.x)
    if PIPE and item < items and PART & 1:  # the first item's stage
        cl_fill_item(item, c_tiles, w_tiles, h_out, pw, stride, pm, batches, grp, per, total, span, ngrp, la, wd, vals,
                     vals64, src, s0, cg, c_in, stride_h, sw, nck, dil_h, pad_h, padding, geo, stages, pitch, T=T, L=L,
                     CF=CF)
        pk.syncthreads()
    cur = u32(0)
    while item < items:
        if not PIPE and PART & 1:  # one stage: fill, then write
            cl_fill_item(item, c_tiles, w_tiles, h_out, pw, stride, pm, batches, grp, per, total, span, ngrp, la, wd,
                         vals, vals64, src, s0, cg, c_in, stride_h, sw, nck, dil_h, pad_h, padding, geo, stages, pitch,
                         T=T, L=L, CF=CF)
            pk.syncthreads()
        b, oh, wt, ct = cl_item(item, c_tiles, w_tiles, h_out)
        c0 = ct * cg
        nvn = u32(min(cg, c_in - c0) // usize(V))
        ow0 = wt * pw
        pn = u32(min(pw, w_out - ow0))
        sh32 = u32((ow0 * stride % 4 + 4 - pm) % 4) if CF else u32(0)
        stage = stages + usize(cur * sb)
        nxt = item + usize(pk.grid_dim.x)
        fill = PIPE and nxt < items and PART & 1
        nb, noh, nwt, nct = cl_item(pk.select(fill, nxt, item), c_tiles, w_tiles, h_out)
        nbase = src + nb * s0 + nct * cg * geo[2]
        nnvn = u32(min(cg, c_in - nct * cg) // usize(V))
        nsh = (nwt * pw * stride % 4 + 4 - pm) % 4
        nstage = stages + usize((1 - cur) * sb)
        j = u32(0)
        units = pn * nvn if PART & 2 else u32(0)
        sc = u32(stride)
        par = u32(0)
        for u0 in range(u32(0), units, nt):
            obw = wob + par * nt * u32(4 * KK)  # OB2: ob's halves in turn, a barrier a round
            if fill and j < batches:
                cl_fill_load(j, grp, per, total, span, ngrp, la, wd, vals, vals64, nbase, noh * stride_h, nwt * pw * stride,
                             nsh, nnvn, sw, nck, dil_h, pad_h, padding, geo, T=T, L=L, CF=CF)
            unit = u0 + t
            if unit < units:
                q = unit // nvn
                cv = unit - q * nvn
                for tap in pk.static_range(KK):
                    kh = u32(tap) // u32(w_k)
                    x = sh32 + q * sc + (u32(tap) - kh * u32(w_k)) * u32(dilation)
                    v = ((kh * pitch + x) * u32(CL_NV) + (cv ^ ((x >> 2) % 8 if CF else x % 8))) * 4
                    for i in pk.static_range(4):
                        tw[tap * 4 + i] = stage[v + u32(i)]
                for i in pk.static_range(4 * KK):
                    if T.nbytes == 2:
                        lo = (tw[(2 * i) % KK * 4 + (2 * i) // KK // 2] >> (16 * ((2 * i) // KK % 2))) & 0xFFFF
                        hi16 = (tw[(2 * i + 1) % KK * 4 + (2 * i + 1) // KK // 2] >> (16 * ((2 * i + 1) // KK % 2))) << 16
                        ob[obw + lane * u32(4 * KK) + u32(i)] = lo | (hi16 & 0xFFFF0000)
                    else:
                        ob[obw + lane * u32(4 * KK) + u32(i)] = tw[i % KK * 4 + i // KK]
            pk.syncthreads()
            w0 = u0 + (t - lane)  # the wave's units [w0, w1): one contiguous run of dst a pixel
            w1 = min(w0 + ws, units)
            if w0 < w1:
                for qq in range(w0 // nvn, (w1 - 1) // nvn + 1):
                    ua = max(w0, qq * nvn)
                    ub = min(w1, (qq + 1) * nvn)
                    seg = dst + (((b * h_out + oh) * w_out + ow0 + usize(qq)) * rowlen
                                 + (c0 + usize((ua - qq * nvn) * u32(V))) * usize(KK))
                    run = obt + usize((obw + (ua - w0) * u32(4 * KK)) * u32(CPW))
                    for e in pk.parallel_range(usize(0), usize((ub - ua) * u32(V * KK)), usize(lane), usize(ws)):
                        seg[e] = run[e]
            if fill and j < batches:
                cl_fill_store(j, grp, per, total, span, ngrp, la, wd, vals, vals64, nstage, pitch, nck, L=L, CF=CF)
                j += 1
            if OB2:
                par = 1 - par
            else:
                pk.syncthreads()
        while fill and j < batches:  # the batches the write rounds left
            cl_fill_load(j, grp, per, total, span, ngrp, la, wd, vals, vals64, nbase, noh * stride_h, nwt * pw * stride, nsh,
                         nnvn, sw, nck, dil_h, pad_h, padding, geo, T=T, L=L, CF=CF)
            cl_fill_store(j, grp, per, total, span, ngrp, la, wd, vals, vals64, nstage, pitch, nck, L=L, CF=CF)
            j += 1
        pk.syncthreads()
        if PART == 1:  # the fill alone: a read of the stage keeps it
            acc = acc ^ stage[t]
        if PIPE:
            cur = 1 - cur
        item = nxt
    if PART == 1 and acc == u32(0x9E3779B9):
        dst[0] = T(0)


@pk.kernel(max_block_size=CL_BLOCK)
def im2col_cl_op(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
                 dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, KK, SB, L, PART, CF, PIPE, NTB,
                 OB2):
    """im2col for windows of KK taps over channel counts a multiple of a 16-byte vector's (candle's
    signature and semantics; ``im2col_cl_ok`` on the host): ``im2col_cl``. Other arguments, and blocks
    not a whole number of waves or over CL_BLOCK, write nothing."""
    stages = pk.shared.array((2 if PIPE else 1) * SB // 4, u32)
    ob = pk.shared.array(NTB * 4 * KK * (2 if OB2 else 1) if PART & 2 else 4, u32)
    pw = cl_pixels(info[1], h_k, w_k, w_out, stride, dilation, usize(T.nbytes), usize(SB), usize(KK),
                   usize(3 if CF else 0))
    if (pw > 0 and dst_numel > 0 and pk.is_aligned(dst, 16) and pk.block_dim.x <= NTB
            and pk.block_dim.x % u32(pk.wave_size) == 0 and (not CF or cl_chunks_ok(info, src))):
        im2col_cl(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src, dst, pw,
                  stages, u32(SB // 4), ob, T=T, KK=KK, L=L, PART=PART, CF=CF, PIPE=PIPE, OB2=OB2)


@pk.kernel(max_block_size=CL_BLOCK)
def im2col1d_cl_op(dst_numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                   info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, KK, SB, L, PART, CF, PIPE, NTB,
                 OB2):
    """im2col1d by ``im2col_cl`` on the input seen as height 1 (``im2col1d_cl_{T}``)."""
    stages = pk.shared.array((2 if PIPE else 1) * SB // 4, u32)
    ob = pk.shared.array(NTB * 4 * KK * (2 if OB2 else 1) if PART & 2 else 4, u32)
    pw = cl_pixels(info[1], usize(1), l_k, l_out, stride, dilation, usize(T.nbytes), usize(SB), usize(KK),
                   usize(3 if CF else 0))
    as_2d = pk.local.array(8, usize)
    layout_1d_as_2d(info, as_2d)
    if (pw > 0 and dst_numel > 0 and pk.is_aligned(dst, 16) and pk.block_dim.x <= NTB
            and pk.block_dim.x % u32(pk.wave_size) == 0 and (not CF or cl_chunks_ok(as_2d, src))):
        im2col_cl(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation, as_2d, src,
                  dst, pw, stages, u32(SB // 4), ob, T=T, KK=KK, L=L, PART=PART, CF=CF, PIPE=PIPE, OB2=OB2)

#: the probe module: 3x3 (2-d) and 3-tap (1-d) windows
PROBE = pk.Module("im2col_cl_probe")
CL_DTYPES = (f32, f16, bf16)
#: the chunk fill (16-bit types): tasks a batch, and blocks an SM the 2-d kernel's registers are sized for
CL_LOADS_CHUNKS = 6
CL_BLOCKS_PER_SM_2D = 5
for _t in CL_DTYPES:  # the word fill, one stage
    PROBE.add(im2col_cl_op.instance(f"im2col_cl9_{_t.tag}", T=_t, KK=9, SB=CL_STAGE_BYTES, L=CL_LOADS_2D, PART=3,
                                    CF=0, PIPE=0, NTB=CL_BLOCK, OB2=0))
    PROBE.add(im2col1d_cl_op.instance(f"im2col1d_cl3_{_t.tag}", T=_t, KK=3, SB=CL_STAGE_BYTES, L=CL_LOADS, PART=3,
                                      CF=0, PIPE=0, NTB=CL_BLOCK, OB2=0))
#: variants of the chunk fill (bf16, timed; outputs compared unless the write or the fill is left out):
#: label -> overrides of L (tasks a batch), PART (3 both, 2 the write alone, 1 the fill alone), MB (blocks an
#: SM the registers are sized for, 0: uncapped), PIPE (two stages of half the bytes, pipelined), GRID (blocks
#: an SM the grid holds, each looping over items; 0: a block an item), NTB (threads a block), OB2 (ob's two
#: halves in turn: one barrier a write round)
CHUNKS = {"im2col_cl9": dict(L=CL_LOADS_CHUNKS, PART=3, MB=CL_BLOCKS_PER_SM_2D, PIPE=0, GRID=0, NTB=CL_BLOCK, OB2=0,
                             SB=CL_STAGE_BYTES, ONLY=None),
          "im2col1d_cl3": dict(L=CL_LOADS_CHUNKS, PART=3, MB=0, PIPE=0, GRID=0, NTB=CL_BLOCK, OB2=0, SB=CL_STAGE_BYTES,
                               ONLY=None)}
VARIANTS = {"4 tasks a batch": dict(L=4), "3 tasks a batch": dict(L=3, ONLY="im2col_cl9"),
            "registers for 7 blocks/SM": dict(MB=7, ONLY="im2col1d_cl3"),
            "8 KiB stage": dict(SB=8192, ONLY="im2col1d_cl3"), "12 KiB stage": dict(SB=12288, ONLY="im2col1d_cl3"),
            "16 KiB stage": dict(SB=16384, ONLY="im2col1d_cl3"),
            "12 KiB stage, registers for 7 blocks/SM": dict(SB=12288, MB=7, ONLY="im2col1d_cl3"),
            "16 KiB stage, registers for 7 blocks/SM": dict(SB=16384, MB=7, ONLY="im2col1d_cl3")}


def variant(kind: str, label: str | None) -> dict:
    """The chunk fill's parameters for ``kind`` (``im2col_cl9`` / ``im2col1d_cl3``), a variant's if ``label``."""
    return dict(CHUNKS[kind], **(VARIANTS[label] if label else {}))


def _chunk_kernel(kind: str, name: str, t, v: dict):
    opts = {"min_blocks_per_sm": {"cuda": v["MB"]}} if v["MB"] else {}
    op = im2col_cl_op if kind == "im2col_cl9" else im2col1d_cl_op
    PROBE.add(pk.kernel(max_block_size=v["NTB"], **opts)(op.__wrapped__).instance(
        name, T=t, KK=9 if kind == "im2col_cl9" else 3, SB=v["SB"] // (2 if v["PIPE"] else 1), L=v["L"],
        PART=v["PART"], CF=1, PIPE=v["PIPE"], NTB=v["NTB"], OB2=v["OB2"]))


for _kind in CHUNKS:
    for _t in (f16, bf16):
        _chunk_kernel(_kind, f"{_kind}_chunks_{_t.tag}", _t, variant(_kind, None))
    for _n, _label in enumerate(VARIANTS):
        if VARIANTS[_label].get("ONLY", _kind) == _kind:
            _chunk_kernel(_kind, f"{_kind}_v{_n}", bf16, variant(_kind, _label))


# ---- host side ------------------------------------------------------------------------------------------
def im2col_cl_plan(c_in: int, h_k: int, w_k: int, w_out: int, stride: int, dilation: int, dtype,
                   kk: int, extra: int = 0, stage_bytes: int = CL_STAGE_BYTES) -> int:
    """``cl_pixels`` on the host: an item's pixels for ``im2col_cl{kk}_{dtype}``, 0 where it does not apply."""
    if h_k * w_k != kk or c_in == 0 or c_in % (16 // dtype.nbytes) or w_out == 0 or stride == 0:
        return 0
    cols = stage_bytes // (CL_NV * 16 * h_k) // 8 * 8
    reach = (w_k - 1) * dilation + 1
    return 0 if cols < reach + extra else min(w_out, (cols - reach - extra) // stride + 1)


def im2col_cl_ok(x, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, padding: int, dilation: int,
                 chunks: bool = False) -> bool:
    """Whether the wrappers take ``im2col_cl9_*`` (x (b, c, h, w), a 3x3 window) or ``im2col1d_cl3_*`` (x (b,
    c, l), 3 taps): a dtype they are built for, channels a multiple of a 16-byte vector's, sizes below 2**31
    (the kernels' u32 stage arithmetic)."""
    kk = 9 if x.ndim == 4 else 3
    if x.ndim not in (3, 4) or x.dtype not in CL_DTYPES or h_out * w_out == 0 or x.shape[0] == 0:
        return False
    if chunks and not (x.dtype.nbytes == 2 and x.strides[-1] == 1 and x.shape[-1] % 4 == 0 and x.ptr % 8 == 0
                       and all(s % 4 == 0 for s in x.strides[:-1])):
        return False
    pixels = im2col_cl_plan(x.shape[1], h_k, w_k, w_out, stride, dilation, x.dtype, kk, 3 if chunks else 0)
    return pixels > 0 and max(*x.shape, h_out, w_out, stride, padding, dilation) <= INDEX_31


def im2col_cl_launch(b: int, c_in: int, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, dilation: int,
                     dtype, device=None, blocks_per_sm: int = 0, chunks: bool = False,
                     stage_bytes: int = CL_STAGE_BYTES, block: int = CL_BLOCK) -> tuple[int, int]:
    """The grid for ``im2col_cl*`` (``im2col1d``: h_out = h_k = 1): blocks of CL_BLOCK, a block an item, or
    at most ``blocks_per_sm`` a multiprocessor (132 where the device does not say), each looping over
    items (the pipelined variant fills the next while it writes the current)."""
    pixels = im2col_cl_plan(c_in, h_k, w_k, w_out, stride, dilation, dtype, h_k * w_k, 3 if chunks else 0,
                            stage_bytes)
    group = CL_NV * 16 // dtype.nbytes
    items = max(1, b * h_out * -(-w_out // max(pixels, 1)) * -(-c_in // group))
    if blocks_per_sm:
        items = min(items, (getattr(device, "multiprocessors", None) or 132) * blocks_per_sm)
    return items, block

def run(b, quick: bool) -> None:
    """The probe beside the wrappers' kernels on benchmarks/conv.py's im2col buffers, outputs compared:
    the word fill for f32 and bf16, the chunk fill and its VARIANTS for bf16."""
    import torch.nn.functional as F

    from conv import Lazy, as_array, info  # benchmarks/conv.py
    from stdlib_kernels import CONV
    from stdlib_kernels.conv import im2col_rows_launch, im2col_rows_pairs_ok
    torch, dev = b.torch, b.dev
    batch, ln = (8 if quick else 32), 8192
    for tdt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for one_d in (False, True):
            if one_d:
                x = torch.randn(batch, 256, ln, device="cuda").to(tdt)
                cols = torch.empty(batch, ln, 256, 3, device="cuda", dtype=tdt)
                geo = (1, ln, 1, 3)  # h_out, w_out, h_k, w_k
                label, kind = f"im2col1d k3 p1 [{batch},256,{ln}] {tag}", "im2col1d_cl3"
                ref = lambda x=x: F.unfold(x.unsqueeze(2), (1, 3), padding=(0, 1))  # noqa: E731
                mine = lambda cols=cols: cols.view(batch, ln, 256 * 3).transpose(1, 2)  # noqa: E731
                args = lambda cols=cols, x=x, inf=info(torch, x): (  # noqa: E731
                    batch * ln * 256, ln, 3, 1, 1, 1, inf, x.data_ptr(), cols.data_ptr())
            else:
                x = torch.randn(batch, 256, 56, 56, device="cuda").to(tdt)
                cols = torch.empty(batch, 56, 56, 256, 3, 3, device="cuda", dtype=tdt)
                geo = (56, 56, 3, 3)
                label, kind = f"im2col 3x3 p1 [{batch},256,56,56] {tag}", "im2col_cl9"
                ref = lambda x=x: F.unfold(x, 3, padding=1)  # noqa: E731
                mine = lambda cols=cols: cols.view(batch, 56 * 56, 256 * 9).transpose(1, 2)  # noqa: E731
                args = lambda cols=cols, x=x, inf=info(torch, x): (  # noqa: E731
                    cols.numel(), 56, 56, 3, 3, 1, 1, 1, inf, x.data_ptr(), cols.data_ptr())
            xa = as_array(dev, x)
            pairs = im2col_rows_pairs_ok(xa, *geo, 1, 1, 1)
            own = ("im2col1d_rows" if one_d else "im2col_rows") + ("_pairs" if pairs else "") + f"_{tag}"
            cases = {"wrapper": (Lazy(dev, own, CONV), im2col_rows_launch(batch, 256, *geo, 1, 1, xa.dtype, dev,
                                                                          one_d=one_d, pairs=pairs))}
            assert im2col_cl_ok(xa, *geo, 1, 1, 1)
            cases["cl"] = (Lazy(dev, f"{kind}_{tag}", PROBE), im2col_cl_launch(batch, 256, *geo, 1, 1, xa.dtype, dev))
            if tag == "bf16":
                assert im2col_cl_ok(xa, *geo, 1, 1, 1, chunks=True)
                grid = im2col_cl_launch(batch, 256, *geo, 1, 1, xa.dtype, dev, chunks=True)
                cases["cl, chunks"] = (Lazy(dev, f"{kind}_chunks_{tag}", PROBE), grid)
                for n, name in enumerate(VARIANTS):
                    v = variant(kind, name)
                    if VARIANTS[name].get("ONLY", kind) != kind:
                        continue
                    cases[f"cl, chunks, {name}"] = (Lazy(dev, f"{kind}_v{n}", PROBE), im2col_cl_launch(
                        batch, 256, *geo, 1, 1, xa.dtype, dev, v["GRID"], chunks=True,
                        stage_bytes=v["SB"] // (2 if v["PIPE"] else 1), block=v["NTB"]))
            for name, (fn, (grid, block)) in cases.items():
                cols.fill_(float("nan"))
                b.case(f"{label} [{name}]", x.nbytes + cols.nbytes,
                       lambda fn=fn, g=grid, bl=block, args=args: fn[g, bl](*args()), ref,
                       None if "alone" in name else lambda mine=mine, ref=ref: (mine(), ref()))


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
