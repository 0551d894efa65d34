"""candle's CONV module: direct and transposed convolutions, im2col / col2im, pools and upsampling.

Eleven ops x ``f32 f64 f16 bf16 u8 u32``, each written once below and instantiated from ``OPS``, with
candle's names, parameter order and sizes (``../shared/spec/candle_kernels.md`` §5):

* ``conv1d(src_numel, l_out, stride, padding, dilation, info12, src, kernel, dst)``;
  ``conv2d(src_numel, w_out, h_out, stride, padding, dilation, info16, src, kernel, dst)``;
  ``conv_transpose1d(src_numel, l_out, stride, padding, out_padding, dilation, info12, ...)``;
  ``conv_transpose2d(src_numel, w_out, h_out, stride, padding, out_padding, dilation, info16, ...)``.
  ``info`` = src dims and strides, then kernel dims and strides (``(c_out, c_in, k...)``, transposed
  ``(c_in, c_out, k...)``); dst is contiguous ``(b, c_out, out...)``. Sums run in A (f32 for f16/bf16,
  else T: u8/u32 wrap); taps falling in the zero padding are skipped. conv1d's source position is
  ``stride*l + k*dilation`` as in candle's CPU backend (candle's CUDA kernel multiplies the stride
  term by the dilation too; ``docs/compat.md``).
* ``im2col1d(dst_numel, l_out, l_k, stride, padding, dilation, info6, src, dst)``: ``dst_numel`` is
  candle's thread count ``b*l_out*c_in``; dst ``(b, l_out, c_in, l_k)``.
  ``im2col(dst_numel, h_out, w_out, h_k, w_k, stride, padding, dilation, info8, src, dst)``: dst
  ``(b, h_out, w_out, c_in, h_k, w_k)``. Positions in the padding read as zero.
* ``col2im1d(dst_el, l_out, l_in, c_out, k_size, stride, src, dst)``: contiguous src
  ``(b, l_in, c_out, k_size)`` summed (in T, ``l_in`` ascending, as candle's CPU backend) into dst
  ``(b, c_out, l_out)``.
* ``avg_pool2d`` / ``max_pool2d(src_numel, w_k, h_k, w_stride, h_stride, info8, src, dst)``: candle's
  "w" is dim 2 and "h" dim 3; no padding; a window larger than the input gives an empty output.
* ``upsample_nearest2d(w_out, h_out, w_scale, h_scale, info8, src, dst)`` (again "w" = dim 2) and
  ``upsample_bilinear2d(w_out, h_out, align_corners, has_scale_h, scale_h, has_scale_w, scale_w, info8,
  src, dst)`` (genuine NCHW: h = dim 2) with PyTorch's scale rules, interpolated in f64.

Every kernel covers its output whatever the grid (grid-stride loops, or block-uniform loops over
work items), so candle's launch (one thread per output element, blocks of 1024) and any smaller grid
are both correct. The data-movement kernels index in u32 where every size fits (``div_by``: division
by multiplication), and im2col under blocks of 32 threads or more gathers through shared memory
(``im2col_staged``, a 3x3 window's taps unrolled, im2col1d's two channels at once). The pools (2x2
and 3x3 windows) and the upsamplings go by output rows (``pool_rows``, ``nearest_rows``,
``bilinear_rows``): a row's index arithmetic once a row, per-column source offsets from tables in
shared memory; 2x2 stride-2 pools over contiguous rows (``pool_rows_vec``) and exact 2x and 4x nearest
upsampling (``nearest_int_rows``) are plain vector tiles of a row. ``rows_launch`` is the wrappers' grid.
The wrappers' own ``col2im1d_rows_{f32,f16,bf16}`` (candle's col2im1d by rows: an item's source rows
staged once, each channel's outputs stored as 8-byte words; ``col2im1d_rows_launch``) and
``col2im1d_staged_*`` (staged through shared memory, where the rows path does not apply;
``col2im1d_launch``), ``{max,avg}_pool2d_vec_*`` and ``im2col_rows_*`` / ``im2col1d_rows_*`` (im2col by
output rows: an item's input rows staged once, each pixel's run stored in 16-byte vectors; 2-d on CUDA
and the CPU pipelined across a block's items, ``im2col_rows_pipe``;
``im2col_rows_launch``) with ``im2col_rows_pairs_*`` / ``im2col1d_rows_pairs_*`` (16-bit types, the input
staged as 4-byte pairs; ``im2col_rows_pairs_ok``) and ``im2col_3x3_*`` / ``im2col1d_k3_*`` (16-bit 3x3 / 3-tap
windows, the input staged channels-last: ``im2col_vec``, ``im2col_vec_ok``), ``upsample_bilinear2d_{2,4}x_*``
(bilinear by exactly 2 or 4: ``bilinear_int_rows``) and ``upsample_bilinear2d_down2x_*`` (by exactly a half:
``bilinear_down2x_rows``) are the additions to candle's names. The host wrappers
live in ``stdlib_kernels/conv_launch.py`` and launch these the way candle-core's CUDA backend does
(§5.11); conv2d and conv1d go through im2col and pykern's own GEMM (``stdlib_kernels/matmul.py``).
``im2col_launch`` below is the wrappers' grid for im2col.
"""
from __future__ import annotations

from math import gcd

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, f64, u8, u16, u32, u64, usize
from pykern.ir.types import UINT_OF_SIZE

from . import CONV, kernel_name
from ._common import compute_type

T = pk.TypeVar("T")
A = pk.TypeVar("A")
X = pk.TypeVar("X")  # an index type: u32 where every index and size fits 31 bits, else usize

DTYPES = (f32, f64, f16, bf16, u8, u32)


# ---- device helpers ---------------------------------------------------------------------------------
@pk.func
def padded_source(pos: X, padding: X, extent: X) -> X:
    """``pos - padding`` where that lies in ``[0, extent)``, else ``extent`` (a tap in the zero padding)."""
    if pos < padding or pos >= padding + extent:
        return extent
    return pos - padding


@pk.func
def transposed_source(out_pos: usize, tap: usize, padding: usize, stride: usize, extent: usize) -> usize:
    """The input position a transposed convolution's tap reads for ``out_pos`` (``(out_pos + padding -
    tap) / stride`` when that divides and lies in ``[0, extent)``), else ``extent``."""
    shifted = out_pos + padding
    if shifted < tap:
        return extent
    t = shifted - tap
    if t % stride != 0:
        return extent
    return min(t // stride, extent)


@pk.func
def pool_extent(size: usize, window: usize, stride: usize) -> usize:
    """Windows along one dim (no padding): ``(size - window) / stride + 1``, 0 when the window is larger."""
    if size < window or stride == 0:
        return 0
    return (size - window) // stride + 1


@pk.func
def average(total: A, count: usize) -> A:
    """A window's mean: the float sum times the reciprocal count (candle's ``sum * (1/(w_k*h_k))``),
    integers by exact division of their wrapped sum."""
    if A.is_int:
        return total // A(count)
    else:
        return total * (A(1.0) / A(count))


@pk.func
def bilinear_scale(in_size: usize, out_size: usize, align_corners: bool, has_scale: bool, scale: f64) -> f64:
    """PyTorch's ``area_pixel_compute_scale``: (in-1)/(out-1) with aligned corners (0 for one output),
    else 1/scale for a given positive scale factor, else in/out."""
    if align_corners:
        return f64(in_size - 1) / f64(out_size - 1) if out_size > 1 else 0.0
    if has_scale and scale > 0.0:
        return 1.0 / scale
    return f64(in_size) / f64(out_size)


@pk.func
def bilinear_source(o: X, scale: f64, align_corners: bool) -> f64:
    """PyTorch's ``area_pixel_compute_source_index`` (linear): clamped at 0 for half-pixel centres."""
    if align_corners:
        return scale * f64(o)
    return max(scale * (f64(o) + 0.5) - 0.5, 0.0)


@pk.func
def divisor_magic(d: usize) -> u64:
    """Division by ``d`` (1 <= d < 2**32) as a multiplication (Granlund and Montgomery): with
    ``l = ceil(log2 d)`` and ``m = ceil(2**(32 + l) / d) - 2**32`` (< 2**32), ``n // d == (((n * m) >> 32)
    + n) >> l`` for every n < 2**32. Returned packed as ``m | l << 32``; computed once a thread, outside
    the loops, where a 64-bit division costs tens of instructions an index."""
    l: u64 = 0
    while l < 32 and (u64(1) << l) < d:
        l += 1
    x = ((u64(1) << l) - d) << 32
    return (x // d + u64(x % d != 0)) | (l << 32)


@pk.func
def div_by(n: X, d: X, magic: u64) -> X:
    """``n // d``: one wide multiply by ``divisor_magic(d)`` for u32 indices, a division for usize."""
    if X is usize:
        return n // d
    else:
        t = (u64(n) * u64(u32(magic))) >> 32
        return u32((t + u64(n)) >> (magic >> 32))


@pk.func
def div_mod(n: X, d: X, magic: u64) -> tuple[X, X]:
    """``(n // d, n % d)`` through ``div_by``: one step of an index's decomposition into coordinates
    (the quotient the rest of the index, the remainder the coordinate along the dim of size ``d``)."""
    q = div_by(n, d, magic)
    return q, n - q * d


#: the largest index, size, stride and padding the u32 index path takes: sums of two stay below 2**32
INDEX_31 = 0x7FFFFFFF


@pk.func
def small_layout(info: ConstPtr[usize], count: usize) -> bool:
    """Every dim and stride of ``info`` (``count`` entries) at most ``INDEX_31``."""
    for j in range(count):
        if info[j] > INDEX_31:
            return False
    return True


# ---- kernels ----------------------------------------------------------------------------------------
@pk.func
def forward_tap(out_pos: usize, tap: usize, padding: usize, stride: usize, extent: usize) -> usize:
    """The input position a convolution's tap (``tap`` = k * dilation) reads for ``out_pos``, else
    ``extent``: ``transposed_source``'s signature, so one direct-convolution body serves both."""
    return padded_source(stride * out_pos + tap, padding, extent)


# The direct convolutions: one output a thread a step, summing its taps in the accumulation type A.
# A convolution and its transpose differ only in which input a tap reads (SOURCE) and where the
# weight's (c_out, c_in) strides sit in ``info`` (WCO, WCI: the transposes' weights are (c_in, c_out, ...)).
@pk.func
def direct_conv1d(l_out: usize, stride: usize, padding: usize, dilation: usize, info: ConstPtr[usize],
                  src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T], *, T, A, SOURCE, C_OUT, WCO, WCI):
    c_in = info[1]
    l_in = info[2]
    c_out = info[C_OUT]
    k_size = info[8]
    for i in pk.grid_stride(info[0] * c_out * l_out):
        ol = i % l_out
        co = (i // l_out) % c_out
        s = src + (i // (l_out * c_out)) * info[3]
        w = kernel + co * info[WCO]
        acc = A(0)
        for k in range(k_size):
            sl = SOURCE(ol, k * dilation, padding, stride, l_in)
            if sl < l_in:
                for ci in range(c_in):
                    acc += A(s[ci * info[4] + sl * info[5]]) * A(w[ci * info[WCI] + k * info[11]])
        dst[i] = T(acc)


@pk.func
def direct_conv2d(w_out: usize, h_out: usize, stride: usize, padding: usize, dilation: usize,
                  info: ConstPtr[usize], src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T],
                  *, T, A, SOURCE, C_OUT, WCO, WCI):
    c_in = info[1]
    h_in = info[2]
    w_in = info[3]
    c_out = info[C_OUT]
    h_k = info[10]
    w_k = info[11]
    for i in pk.grid_stride(info[0] * c_out * h_out * w_out):
        ow = i % w_out
        oh = (i // w_out) % h_out
        co = (i // (w_out * h_out)) % c_out
        s = src + (i // (w_out * h_out * c_out)) * info[4]
        w = kernel + co * info[WCO]
        acc = A(0)
        for kh in range(h_k):
            sh = SOURCE(oh, kh * dilation, padding, stride, h_in)
            if sh < h_in:
                for kw in range(w_k):
                    sw = SOURCE(ow, kw * dilation, padding, stride, w_in)
                    if sw < w_in:
                        sp = s + sh * info[6] + sw * info[7]
                        wp = w + kh * info[14] + kw * info[15]
                        for ci in range(c_in):
                            acc += A(sp[ci * info[5]]) * A(wp[ci * info[WCI]])
        dst[i] = T(acc)


@pk.kernel
def conv1d_op(src_numel: usize, l_out: usize, stride: usize, padding: usize, dilation: usize, info: ConstPtr[usize],
              src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T], *, T, A):
    direct_conv1d(l_out, stride, padding, dilation, info, src, kernel, dst, T=T, A=A, SOURCE=forward_tap,
                  C_OUT=6, WCO=9, WCI=10)


@pk.kernel
def conv2d_op(src_numel: usize, w_out: usize, h_out: usize, stride: usize, padding: usize, dilation: usize,
              info: ConstPtr[usize], src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T], *, T, A):
    direct_conv2d(w_out, h_out, stride, padding, dilation, info, src, kernel, dst, T=T, A=A, SOURCE=forward_tap,
                  C_OUT=8, WCO=12, WCI=13)


@pk.kernel
def conv_transpose1d_op(src_numel: usize, l_out: usize, stride: usize, padding: usize, out_padding: usize,
                        dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T],
                        *, T, A):
    direct_conv1d(l_out, stride, padding, dilation, info, src, kernel, dst, T=T, A=A, SOURCE=transposed_source,
                  C_OUT=7, WCO=10, WCI=9)


@pk.kernel
def conv_transpose2d_op(src_numel: usize, w_out: usize, h_out: usize, stride: usize, padding: usize,
                        out_padding: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T],
                        kernel: ConstPtr[T], dst: Ptr[T], *, T, A):
    direct_conv2d(w_out, h_out, stride, padding, dilation, info, src, kernel, dst, T=T, A=A,
                  SOURCE=transposed_source, C_OUT=9, WCO=13, WCI=12)


# The data-movement kernels below run one loop written over a compile-time index type I: u32 where
# the output count is at most NARROW and every size, stride and position fits 31 bits (``narrow``
# checks), with divisions by multiplication (``div_by``) and 32-bit wide multiplies for offsets; usize
# otherwise. Magic numbers are computed once a thread before the loop; the usize path gets zeros.
@pk.func
def im2col1d_loop(numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                  info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_k: u64, m_c: u64, m_l: u64, *, I):
    lk = I(l_k)
    c_in = I(info[1])
    lo = I(l_out)
    for i in pk.grid_stride(numel):
        row, k = div_mod(I(i), lk, m_k)
        bl, c = div_mod(row, c_in, m_c)
        b, ol = div_mod(bl, lo, m_l)
        sl = padded_source(ol * I(stride) + k * I(dilation), I(padding), I(info[2]))
        inside = sl < I(info[2])
        off = usize(b) * usize(I(info[3])) + usize(c) * usize(I(info[4])) + usize(sl) * usize(I(info[5]))
        v = src[pk.select(inside, off, usize(0))]
        dst[i] = pk.select(inside, v, T(0))


@pk.func
def layout_1d_as_2d(info: ConstPtr[usize], as_2d: Ptr[usize]):
    """candle's 1-D ``info`` (b, c, l and their strides) as the 2-D layout (b, c, 1, l) im2col's paths
    take: im2col1d runs them on the input seen as height 1."""
    as_2d[0] = info[0]
    as_2d[1] = info[1]
    as_2d[2] = usize(1)
    as_2d[3] = info[2]
    as_2d[4] = info[3]
    as_2d[5] = info[4]
    as_2d[6] = usize(0)
    as_2d[7] = info[5]


@pk.kernel(moves=("T",))
def im2col1d_op(dst_numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    """candle's ``dst_numel`` counts (b, l, c) rows of ``l_k`` values. Blocks of STAGE_PIXELS threads or
    more take im2col's staged path (the input seen as height 1); other launches run over every value."""
    sh = pk.shared.array(STAGE_BYTES // T.nbytes, T)
    chunk = min(info[1], (usize(STAGE_BYTES // T.nbytes) // STAGE_PIXELS - 1) // max(l_k, usize(1)))
    if usize(pk.block_dim.x) >= STAGE_PIXELS and chunk > 0 and dst_numel > 0:
        as_2d = pk.local.array(8, usize)
        layout_1d_as_2d(info, as_2d)
        if l_k == 3:
            im2col_staged(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation, as_2d,
                          src, dst, chunk, dst_numel // info[1], sh, P=STAGE_PIXELS, KH=1, KW=3, U=2)
        else:
            im2col_staged(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation, as_2d,
                          src, dst, chunk, dst_numel // info[1], sh, P=STAGE_PIXELS, KH=0, KW=0, U=1)
        return
    numel = dst_numel * l_k
    reach = max(l_out * stride + l_k * dilation, padding + info[2])
    if numel <= NARROW and reach <= INDEX_31 and small_layout(info, usize(6)):
        im2col1d_loop(numel, l_out, l_k, stride, padding, dilation, info, src, dst, divisor_magic(l_k),
                      divisor_magic(info[1]), divisor_magic(l_out), I=u32)
    else:
        im2col1d_loop(numel, l_out, l_k, stride, padding, dilation, info, src, dst, u64(0), u64(0), u64(0), I=usize)


@pk.func
def im2col_loop(numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
                dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_wk: u64, m_hk: u64, m_c: u64,
                m_wo: u64, m_ho: u64, *, I):
    wk = I(w_k)
    hk = I(h_k)
    c_in = I(info[1])
    wo = I(w_out)
    ho = I(h_out)
    for i in pk.grid_stride(numel):
        r, kw = div_mod(I(i), wk, m_wk)
        q, kh = div_mod(r, hk, m_hk)
        r, c = div_mod(q, c_in, m_c)
        q, ow = div_mod(r, wo, m_wo)
        b, oh = div_mod(q, ho, m_ho)
        sh = padded_source(oh * I(stride) + kh * I(dilation), I(padding), I(info[2]))
        sw = padded_source(ow * I(stride) + kw * I(dilation), I(padding), I(info[3]))
        inside = sh < I(info[2]) and sw < I(info[3])
        off = (usize(b) * usize(I(info[4])) + usize(c) * usize(I(info[5])) + usize(sh) * usize(I(info[6]))
               + usize(sw) * usize(I(info[7])))
        v = src[pk.select(inside, off, usize(0))]
        dst[i] = pk.select(inside, v, T(0))


#: im2col's staged path: a block step gathers STAGE_PIXELS consecutive output pixels x a chunk of channels
#: (lanes along pixels: adjacent input columns) into STAGE_BYTES of shared memory, then writes each
#: pixel's run of the chunk's (c, kh, kw) values out contiguously
STAGE_PIXELS = 32
STAGE_BYTES = 32768


@pk.func
def im2col_staged(h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize, stride_w: usize,
                  pad_h: usize, pad_w: usize, dil_h: usize, dil_w: usize, info: ConstPtr[usize], src: ConstPtr[T],
                  dst: Ptr[T], chunk: usize, pixels: usize, sh: Ptr[T], *, P, KH, KW, U):
    """Work items (P pixels, ``chunk`` channels) go to blocks in turn (block-uniform loop and barriers).
    Gather: thread t takes pixel ``t % P`` of the item and channels ``t // P`` apart, storing its
    window at ``sh[p * seg + (c - c0) * K + j]`` (``seg`` odd: no bank conflicts). Write: the block's
    waves (threads past the last whole wave idle) take the item's pixels in turn, each writing that
    pixel's ``chunk * K`` run of dst. ``info`` is the 2-d source layout (im2col1d passes its 1-d one as
    height 1, unpadded)."""
    c_in = info[1]
    kk = h_k * w_k
    seg = chunk * kk | 1
    c_tiles = (c_in + chunk - 1) // chunk
    items = (pixels + P - 1) // P * c_tiles
    t = usize(pk.thread_idx.x)
    nt = usize(pk.block_dim.x)
    groups = nt // P
    w = min(usize(pk.wave_size), nt)  # the write-out's groups: whole waves (the block, if smaller)
    writers = nt // w
    p = t % P
    taps = pk.local.array(max(KH * KW, 1), usize)
    tap_in = pk.local.array(max(KH * KW, 1), bool)
    vals = pk.local.array(max(KH * KW, 1) * U, T)
    item = usize(pk.block_idx.x)
    while item < items:
        p0 = item // c_tiles * P
        c0 = item % c_tiles * chunk
        cn = min(chunk, c_in - c0)
        pn = min(usize(P), pixels - p0)
        if p < pn and t < groups * P:
            pixel = p0 + p
            ow = pixel % w_out
            oh = pixel // w_out % h_out
            b = pixel // (w_out * h_out)
            if KH > 0 and U > 1:  # a small window of KH x KW (compile-time): the taps' offsets once a
                # pixel, then U channels' windows loaded (all in flight) before any is stored
                for kh in pk.static_range(KH):
                    ih = padded_source(oh * stride_h + usize(kh) * dil_h, pad_h, info[2])
                    for kw in pk.static_range(KW):
                        iw = padded_source(ow * stride_w + usize(kw) * dil_w, pad_w, info[3])
                        inside = ih < info[2] and iw < info[3]
                        taps[kh * KW + kw] = pk.select(inside, ih * info[6] + iw * info[7], usize(0))
                        tap_in[kh * KW + kw] = inside
                at = src + b * info[4]
                for c in range(c0 + t // P, c0 + cn, groups * U):
                    for u in pk.static_range(U):
                        base = at + min(c + usize(u) * groups, c0 + cn - 1) * info[5]
                        for j in pk.static_range(KH * KW):
                            vals[u * KH * KW + j] = base[taps[j]]
                    for u in pk.static_range(U):
                        cu = c + usize(u) * groups
                        if cu < c0 + cn:
                            out = sh + p * seg + (cu - c0) * kk
                            for j in pk.static_range(KH * KW):
                                out[j] = pk.select(tap_in[j], vals[u * KH * KW + j], T(0))
            elif KH > 0:  # a window of KH x KW: its loads in flight together (more lost: registers)
                for c in range(c0 + t // P, c0 + cn, groups):
                    base = src + b * info[4] + c * info[5]
                    out = sh + p * seg + (c - c0) * kk
                    for kh in pk.static_range(KH):
                        ih = padded_source(oh * stride_h + usize(kh) * dil_h, pad_h, info[2])
                        for kw in pk.static_range(KW):
                            iw = padded_source(ow * stride_w + usize(kw) * dil_w, pad_w, info[3])
                            inside = ih < info[2] and iw < info[3]
                            v = base[pk.select(inside, ih * info[6] + iw * info[7], usize(0))]
                            out[kh * KW + kw] = pk.select(inside, v, T(0))
            else:
                for c in range(c0 + t // P, c0 + cn, groups):
                    base = src + b * info[4] + c * info[5]
                    out = sh + p * seg + (c - c0) * kk
                    for kh in range(h_k):
                        ih = padded_source(oh * stride_h + kh * dil_h, pad_h, info[2])
                        for kw in range(w_k):
                            iw = padded_source(ow * stride_w + kw * dil_w, pad_w, info[3])
                            inside = ih < info[2] and iw < info[3]
                            v = base[pk.select(inside, ih * info[6] + iw * info[7], usize(0))]
                            out[kh * w_k + kw] = pk.select(inside, v, T(0))
        pk.syncthreads()
        run = cn * kk
        if t < writers * w:
            for q in range(t // w, pn, writers):
                row = dst + (p0 + q) * c_in * kk + c0 * kk
                for e in pk.parallel_range(usize(0), run, t % w, w):
                    row[e] = sh[q * seg + e]
        pk.syncthreads()
        item += usize(pk.grid_dim.x)


@pk.kernel(moves=("T",))
def im2col_op(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
              dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    """Blocks of at least STAGE_PIXELS threads (candle's 1024, the wrappers' 256) take the staged path
    when a chunk of at least one channel fits; other launches the one-output-a-step loop."""
    sh = pk.shared.array(STAGE_BYTES // T.nbytes, T)
    kk = h_k * w_k
    chunk = min(info[1], (usize(STAGE_BYTES // T.nbytes) // STAGE_PIXELS - 1) // max(kk, usize(1)))
    if usize(pk.block_dim.x) >= STAGE_PIXELS and chunk > 0 and dst_numel > 0:
        if h_k == 3 and w_k == 3:
            im2col_staged(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src, dst,
                          chunk, dst_numel // (info[1] * kk), sh, P=STAGE_PIXELS, KH=3, KW=3, U=1)
        else:
            im2col_staged(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src, dst,
                          chunk, dst_numel // (info[1] * kk), sh, P=STAGE_PIXELS, KH=0, KW=0, U=1)
        return
    reach = max(max(h_out, w_out) * stride + max(h_k, w_k) * dilation, padding + max(info[2], info[3]))
    if dst_numel <= NARROW and reach <= INDEX_31 and small_layout(info, usize(8)):
        im2col_loop(dst_numel, h_out, w_out, h_k, w_k, stride, padding, dilation, info, src, dst, divisor_magic(w_k),
                    divisor_magic(h_k), divisor_magic(info[1]), divisor_magic(w_out), divisor_magic(h_out), I=u32)
    else:
        im2col_loop(dst_numel, h_out, w_out, h_k, w_k, stride, padding, dilation, info, src, dst, u64(0), u64(0),
                    u64(0), u64(0), u64(0), I=usize)


#: im2col's rows path (the wrappers' own ``im2col_rows_*`` / ``im2col1d_rows_*``): a work item is one
#: output position (b, oh) with up to ROWS_PIXELS consecutive ow and a chunk of channels whose run of
#: (c, kh, kw) columns is about ROWS_VECS 16-byte vectors. Its stage holds the input rows the item's
#: windows cover (chunk x h_k rows of the columns they span, zeros in the padding), a third of what the
#: output layout would take for a 3x3 window; each output value is then one shared read through a table
#: of its column's offset, and each lane stores whole 16-byte vectors of a pixel's run.
ROWS_PIXELS = 64
ROWS_VECS = 72
#: the wrappers' block for the rows path: ROWS_VECS lanes a pixel, four pixels at once
ROWS_BLOCK = 288
ROWS_STAGE_BYTES = 24576
#: the column-offset table (u16 entries): the most (c, kh, kw) columns an item's run may have
ROWS_TAB = 2048
#: the stage's loads a thread issues before storing any of them
ROWS_LOADS = 8
#: blocks of ROWS_BLOCK an SM the kernels' registers are sized for on CUDA (56 registers; uncapped they
#: took 71-95, three or two blocks an SM; docs/targets/cuda.md)
ROWS_BLOCKS_PER_SM = 4


@pk.func
def im2col_rows_tile(c_in: usize, h_k: usize, w_k: usize, w_out: usize, stride: usize, dilation: usize,
                     tbytes: usize, stage_bytes: usize, tab_n: usize, extra: usize) -> u64:
    """The rows path's tile, ``chunk | pixels << 32`` (0 where the path does not apply): ``chunk``
    channels, a multiple of the channels whose (c, kh, kw) run fills whole 16-byte vectors, about
    ROWS_VECS vectors (all of c_in where fewer) and at most ``tab_n`` columns; ``pixels`` consecutive ow
    (at most ROWS_PIXELS) whose staged columns fit the stage. ``extra``: staged columns beyond the
    windows' (the pair fill's 2: its rows start on an even source column), then the pitch is sized
    exactly (``rows_pitch(sw + extra)`` at most the row's room). ``im2col_rows_plan`` computes the same
    on the host."""
    kk = h_k * w_k
    vw = usize(16) // tbytes
    if kk == 0 or c_in == 0 or w_out == 0:
        return u64(0)
    g = vw
    while kk % g != 0:  # gcd(kk, vw), vw a power of two
        g = g // 2
    unit = vw // g
    chunk = min(c_in, max(unit, usize(ROWS_VECS) * vw // kk // unit * unit))
    if chunk * kk > tab_n:
        return u64(0)
    per_row = stage_bytes // tbytes // (chunk * h_k)
    reach = (w_k - 1) * dilation + 1
    if per_row < reach + 3:
        return u64(0)
    room = per_row - 3 - reach
    if extra > 0:  # the largest pitch rows_pitch gives within per_row, less the extra columns
        top = per_row
        if tbytes == 4 and top % 2 == 0:
            top -= 1
        elif tbytes == 2:
            top -= (top + 2) % 4
        if top < reach + extra:
            return u64(0)
        room = top - extra - reach
    pixels = min(min(w_out, usize(ROWS_PIXELS)), room // stride + 1)
    return u64(chunk) | (u64(pixels) << 32)


@pk.func
def rows_pitch(sw: usize, tbytes: usize) -> usize:
    """A staged row's pitch: at least ``sw`` elements and an odd number of 4-byte words (16-bit types: an
    even number of elements, 2 mod 4), so a warp's reads of adjacent channels' rows spread over the banks
    (a pitch of 64 put every channel of im2col1d's k = 3 window on the same few banks)."""
    p = sw
    if tbytes == 4:
        p = p | 1
    elif tbytes == 2:
        while p % 4 != 2:
            p += 1
    return p


@pk.func
def rows_domain(info: ConstPtr[usize], reach: usize, padding: usize, dilation: usize) -> bool:
    """im2col_rows' u32 staging arithmetic holds: the 2-d layout ``info``'s dims and strides, ``reach``
    (the largest source position plus one), padding and dilation below 2**31, and a batch's offsets
    (``sum (dim - 1) * stride`` over c, h, w) below 2**32 (``im2col_rows_ok`` on the host)."""
    if not small_layout(info, usize(8)) or max(reach, max(padding, dilation)) > INDEX_31:
        return False
    span = usize(0)
    for d in range(1, 4):
        span += (max(info[d], usize(1)) - 1) * info[d + 4]
    return span <= 0xFFFFFFFF


@pk.func
def column_table(tab: Ptr[u16], chunk: usize, h_k: usize, w_k: usize, pitch: usize, dil_w: usize):
    """Both rows paths' table, built once a block (the caller's barrier follows): column e of an
    item's run (channel, kh, kw) -> its stage offset for the item's first pixel, so a written value
    is one shared read."""
    kk = h_k * w_k
    for e in range(usize(pk.thread_idx.x), chunk * kk, usize(pk.block_dim.x)):
        ce = e // kk
        je = e - ce * kk
        ke = je // w_k
        tab[e] = u16((ce * h_k + ke) * pitch + (je - ke * w_k) * dil_w)


@pk.func
def im2col_rows(h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize, stride_w: usize,
                pad_h: usize, pad_w: usize, dil_h: usize, dil_w: usize, info: ConstPtr[usize], src: ConstPtr[T],
                dst: Ptr[T], chunk: usize, pw: usize, stage: Ptr[T], tab: Ptr[u16], *, L, CW):
    """Items go to blocks in turn (block-uniform loop and barriers). Fill: thread t takes staged column
    ``t % sw`` (lanes along the input's width) of every ``nt // sw``-th of the item's ``cn * h_k`` rows,
    L loads in flight before any store; staged rows at ``rows_pitch``. Write: groups of ``g`` lanes (one
    16-byte tile a lane where the block has ``g`` = the run's vectors) take the item's pixels in turn;
    pixel q's value of column e is ``stage[tab[e] + q * stride_w]``. ``info`` is the 2-d source layout
    (im2col1d passes its 1-d one as height 1, unpadded). CW = 2 (16-bit types; the caller checks
    ``pipe_pairs_ok``): the fill as 4-byte words of aligned source pairs (``im2col_rows_pipe``'s CW = 2),
    staged rows two columns wider, starting ``sh`` (0 or 1) before the item's first window column."""
    c_in = info[1]
    kk = h_k * w_k
    sw = (pw - 1) * stride_w + (w_k - 1) * dil_w + 1
    if CW == 2:
        pitch = rows_pitch(sw + 2, usize(T.nbytes))
    else:
        pitch = rows_pitch(sw, usize(T.nbytes))
    c_tiles = (c_in + chunk - 1) // chunk
    w_tiles = (w_out + pw - 1) // pw
    items = info[0] * h_out * w_tiles * c_tiles
    if items > INDEX_31:  # the item loop's arithmetic is u32 (im2col_rows_ok checks this on the host)
        return
    t = usize(pk.thread_idx.x)
    nt = usize(pk.block_dim.x)
    column_table(tab, chunk, h_k, w_k, pitch, dil_w)
    pk.syncthreads()
    nv = (chunk * kk * usize(T.nbytes) + 15) // 16
    g = min(nv, nt)
    groups = nt // g
    lane = t % g
    grp = t // g
    rowlen = c_in * kk
    # the fill's index arithmetic in u32 (the kernels check that a batch's offsets fit)
    if CW == 2:
        xs = min((sw + 2) // 2, nt)  # words a staged row
    else:
        xs = min(sw, nt)
    passes = u32(nt // xs)  # rows a pass of the fill covers
    tx = u32(t % xs)
    ty = u32(t // xs)
    sw32 = u32(sw)
    p32 = u32(pitch)
    hk32 = u32(h_k)
    m_hk = divisor_magic(h_k)
    s5 = u32(info[5])
    s6 = u32(info[6])
    s7 = u32(info[7])
    hi = u32(info[2])
    wi = u32(info[3])
    sh32 = u32(stride_h)
    dh32 = u32(dil_h)
    ph32 = u32(pad_h)
    pw32 = u32(pad_w)
    vals = pk.local.array(L, T)
    ct32 = u32(c_tiles)
    wt32 = u32(w_tiles)
    ho32 = u32(h_out)
    item = u32(pk.block_idx.x)
    while item < u32(items):
        ct = item % ct32
        r = item // ct32
        wt = r % wt32
        r = r // wt32
        oh = usize(r % ho32)
        b = usize(r // ho32)
        c0 = usize(ct) * chunk
        cn = min(chunk, c_in - c0)
        ow0 = usize(wt) * pw
        pn = min(pw, w_out - ow0)
        rows = u32(cn * h_k)
        base = src + b * info[4] + c0 * info[5]
        oh32 = u32(oh) * sh32
        sh = u32(0)
        if CW == 2:
            iw0 = u32(ow0 * stride_w) - pw32
            sh = iw0 & 1
            base32 = pk.bitcast(base, ConstPtr[u32])
            st32 = pk.bitcast(stage, Ptr[u32])
            vals32 = pk.local.array(L, u32)
            if ty < passes:
                for x in range(tx, (sw32 + 2) // 2, u32(xs)):
                    iw = iw0 - sh + x * 2  # even; wraps past 2**31 left of the input
                    for r0 in range(ty, rows, passes * u32(L)):
                        for u in pk.static_range(L):
                            row = min(r0 + u32(u) * passes, rows - 1)
                            c, kh = div_mod(row, hk32, m_hk)
                            ih = padded_source(oh32 + kh * dh32, ph32, hi)
                            inside = ih < hi and iw < wi
                            v32 = base32[usize(pk.select(inside, (c * s5 + ih * s6 + iw) >> 1, u32(0)))]
                            vals32[u] = pk.select(inside, v32, u32(0))
                        for u in pk.static_range(L):
                            if r0 + u32(u) * passes < rows:
                                st32[(r0 + u32(u) * passes) * (p32 // 2) + x] = vals32[u]
        elif ty < passes:
            for x in range(tx, sw32, u32(xs)):
                iw = padded_source(u32(ow0 * stride_w) + x, pw32, wi)
                iwo = iw * s7
                for r0 in range(ty, rows, passes * u32(L)):
                    for u in pk.static_range(L):
                        row = min(r0 + u32(u) * passes, rows - 1)
                        c, kh = div_mod(row, hk32, m_hk)
                        ih = padded_source(oh32 + kh * dh32, ph32, hi)
                        inside = ih < hi and iw < wi
                        v = base[usize(pk.select(inside, c * s5 + ih * s6 + iwo, u32(0)))]
                        vals[u] = pk.select(inside, v, T(0))
                    for u in pk.static_range(L):
                        if r0 + u32(u) * passes < rows:
                            stage[(r0 + u32(u) * passes) * p32 + x] = vals[u]
        pk.syncthreads()
        run = cn * kk
        if grp < groups:
            out = dst + ((b * h_out + oh) * w_out + ow0) * rowlen + c0 * kk
            for q in range(grp, pn, groups):
                o = out + q * rowlen
                sp = stage + q * stride_w
                if CW == 2:
                    sp = sp + usize(sh)
                for e in pk.parallel_range(usize(0), run, lane, g):
                    o[e] = sp[tab[e]]
        pk.syncthreads()
        item += u32(pk.grid_dim.x)


#: im2col's pipelined rows path (``im2col_rows_pipe``, the wrappers' ``im2col_rows_*`` on CUDA and the CPU):
#: two stages of this many bytes (each holds a whole item of a 3x3 window's 56 pixels) and a column
#: table of ROWS_PIPE_TAB entries, 48896 bytes of static shared memory in all (48 KiB is the most
#: without an opt-in)
ROWS_PIPE_STAGE_BYTES = 23424
ROWS_PIPE_TAB = 1024
#: ... for the 16-bit pair fill (``im2col_rows_pairs_*``): stages two columns wider (a 3x3 item's 192 rows
#: at a pitch of 62) and a table of 768 entries (a run of up to 96 columns of 8 channels), 49152 bytes
ROWS_PIPE_STAGE_BYTES_16 = 23808
ROWS_PIPE_TAB_16 = 768
#: blocks of ROWS_BLOCK an SM the pipelined kernel's registers are sized for on CUDA (72 registers and
#: 16-24 bytes of spills; sized for four, 56 registers, it spilled 150-220 bytes and ran at about half
#: the speed), and the wrappers' grid: that many blocks an SM, each looping over items
ROWS_PIPE_BLOCKS_PER_SM = 3


@pk.func
def rows_item(item: u32, ct32: u32, wt32: u32, ho32: u32) -> tuple[u32, u32, u32, u32]:
    """Work item ``item``'s (channel tile, width tile, oh, b): channel tiles vary fastest."""
    r = item // ct32
    wt = r % wt32
    r = r // wt32
    return item % ct32, wt, r % ho32, r // ho32


@pk.func
def rows_write(out: Ptr[T], stage: Ptr[T], tab: Ptr[u16], j0: u32, j1: u32, grp: u32, groups: u32, rowlen: usize,
               stride_w: u32, run: u32, lane: u32, g: u32):
    """The thread's pixels ``grp + j * groups`` for j in [j0, j1) of the current item (``out`` its first
    pixel's run, ``stage`` its stage): each lane stores 16-byte tiles of the pixel's run, value e read
    from the stage at ``tab[e]``."""
    for j in range(j0, j1):
        q = grp + j * groups
        o = out + usize(q) * rowlen
        sp = stage + usize(q * stride_w)
        for e in pk.parallel_range(u32(0), run, lane, g):
            o[e] = sp[tab[e]]


@pk.func
def im2col_rows_pipe(h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize, stride_w: usize,
                     pad_h: usize, pad_w: usize, dil_h: usize, dil_w: usize, info: ConstPtr[usize], src: ConstPtr[T],
                     dst: Ptr[T], chunk: usize, pw: usize, stage: Ptr[T], sbe: usize, tab: Ptr[u16], *, L, CW):
    """im2col_rows software-pipelined across a block's items: while a thread writes the current item
    from one stage, it fills the next item into the other, one round of L loads (issued before the
    round's share of the current item's pixels is written, stored after it) at a time, so a round's
    memory latency hides behind stores instead of a barrier. One barrier an item. The first pass fills
    the block's first item and writes nothing; the last writes the last item and fills nothing.
    ``stage`` holds two stages of ``sbe`` elements. Fill and write as in ``im2col_rows``; every index
    but the destination's in u32 (the domain tests keep sizes below 2**31), which keeps the state
    both halves of a pass need in registers.

    CW = 2 (16-bit types; the caller checks ``pipe_pairs_ok``): the fill as 4-byte pairs
    (``pipe_item``): a load fetches two adjacent source columns, half the fill's instructions an
    element, which bound the 16-bit pipeline. A staged row starts on an even source column, ``sh``
    (0 or 1) before the item's first window column, and is two columns wider than the windows'
    (``im2col_rows_tile``'s ``extra``). CW = 1 keeps its pass inline, statement for statement as it was
    before the two shared this body, not through pipe_item's CW = 1: that changed its sm_90 code, and
    every change to it moved its spills. Each ``if CW`` compiles only one side, so each instance's code
    is the one its own copy of the body gave."""
    c_in = info[1]
    kk = h_k * w_k
    sw = (pw - 1) * stride_w + (w_k - 1) * dil_w + 1
    if CW == 2:
        pitch = rows_pitch(sw + 2, usize(T.nbytes))
    else:
        pitch = rows_pitch(sw, usize(T.nbytes))
    c_tiles = (c_in + chunk - 1) // chunk
    w_tiles = (w_out + pw - 1) // pw
    items = info[0] * h_out * w_tiles * c_tiles
    if items > INDEX_31:  # the item loop's arithmetic is u32 (im2col_rows_ok checks this on the host)
        return
    t = usize(pk.thread_idx.x)
    nt = usize(pk.block_dim.x)
    column_table(tab, chunk, h_k, w_k, pitch, dil_w)
    nv = (chunk * kk * usize(T.nbytes) + 15) // 16
    g = u32(min(nv, nt))
    groups = u32(nt) // g
    lane = u32(t) % g
    grp = u32(t) // g
    rowlen = c_in * kk
    if CW == 2:
        cols = (sw + 2) // 2  # the staged words a row: the windows' columns and sh
    else:
        cols = sw
    xs = u32(min(cols, nt))
    passes = u32(nt) // xs
    tx = u32(t) % xs
    ty = u32(t) // xs
    step = passes * u32(L)
    p32 = u32(pitch)
    hk32 = u32(h_k)
    m_hk = divisor_magic(h_k)
    dc = passes // hk32
    dkh = passes - dc * hk32
    dh32 = u32(dil_h)
    ph32 = u32(pad_h)
    s4 = u32(info[4])
    s5 = u32(info[5])
    s6 = u32(info[6])
    s7 = u32(info[7])
    hi = u32(info[2])
    wi = u32(info[3])
    if CW == 1:
        vals = pk.local.array(L, T)
    ct32 = u32(c_tiles)
    wt32 = u32(w_tiles)
    ho32 = u32(h_out)
    n32 = u32(items)
    ch32 = u32(chunk)
    ci32 = u32(c_in)
    kk32 = u32(kk)
    pw32 = u32(pw)
    wo32 = u32(w_out)
    sw32 = u32(stride_w)
    sbe32 = u32(sbe)
    ncol = u32(0)  # the columns (CW = 2: words) this thread fills: x = tx, tx + xs, ... below cols
    if ty < passes:
        ncol = (u32(cols) - tx + xs - 1) // xs
    cur = n32
    nxt = u32(pk.block_idx.x)
    sel = u32(0)
    pk.syncthreads()
    while cur < n32 or nxt < n32:
        fill = stage + usize(sel * sbe32)
        # the next item, filled into `fill`: its rounds (columns x row rounds) set the write's pieces.
        # col0: CW = 1 its first window column before the padding, CW = 2 the even source column its
        # staged rows start at
        rows = u32(0)
        base = src
        col0 = u32(0)
        oh32 = u32(0)
        if nxt < n32:
            ct, wt, oh, b = rows_item(nxt, ct32, wt32, ho32)
            c0 = ct * ch32
            rows = min(ch32, ci32 - c0) * hk32
            base = src + usize(b) * usize(s4) + usize(c0) * usize(s5)
            if CW == 2:
                col0 = (wt * pw32 * sw32 - u32(pad_w)) & ~u32(1)
            else:
                col0 = wt * pw32 * sw32
            oh32 = oh * u32(stride_h)
        if CW == 1:
            nrr = u32(0)
            if ty < rows:
                nrr = (rows - ty + step - 1) // step
            pieces = max(ncol * nrr, u32(1))
        # the current item, written from the other stage: the thread's pixels grp + j * groups, j < npx
        npx = u32(0)
        out = dst
        run = u32(0)
        if CW == 2:
            sh = u32(0)
        if cur < n32 and grp < groups:
            ct, wt, oh, b = rows_item(cur, ct32, wt32, ho32)
            c0 = ct * ch32
            ow0 = wt * pw32
            if CW == 2:
                sh = (ow0 * sw32 - u32(pad_w)) & 1
            pn = min(pw32, wo32 - ow0)
            run = min(ch32, ci32 - c0) * kk32
            out = dst + ((usize(b) * h_out + usize(oh)) * w_out + usize(ow0)) * rowlen + usize(c0) * usize(kk32)
            if grp < pn:
                npx = (pn - grp + groups - 1) // groups
        if CW == 2:
            wsrc = stage + usize(sbe32 - sel * sbe32 + sh)
            pipe_item(fill, base, rows, col0, oh32, ncol, tx, xs, ty, step, passes, hk32, m_hk, dc, dkh, dh32, ph32,
                      s5, s6, hi, wi, p32, out, wsrc, tab, npx, grp, groups, rowlen, sw32, run, lane, g, L=L)
        else:
            wsrc = stage + usize(sbe32 - sel * sbe32)
            k = u32(0)
            for xi in range(u32(0), ncol):
                x = tx + xi * xs
                iw = col0 + x - u32(pad_w)  # wraps past 2**31 left of the input: one compare tests both sides
                iw_in = iw < wi
                iwo = iw * s7
                for r0 in range(ty, rows, step):
                    # row r0 + u * passes's (c, kh) one step from the last (dc, dkh: passes // h_k, passes % h_k)
                    c, kh = div_mod(r0, hk32, m_hk)
                    for u in pk.static_range(L):
                        if u > 0:
                            kh += dkh
                            c += dc
                            wrap = kh >= hk32
                            kh = pk.select(wrap, kh - hk32, kh)
                            c = pk.select(wrap, c + 1, c)
                        ih = oh32 + kh * dh32 - ph32
                        inside = ih < hi and iw_in and r0 + u32(u) * passes < rows
                        v = base[usize(pk.select(inside, c * s5 + ih * s6 + iwo, u32(0)))]
                        vals[u] = pk.select(inside, v, T(0))
                    rows_write(out, wsrc, tab, k * npx // pieces, (k + 1) * npx // pieces, grp, groups, rowlen,
                               sw32, run, lane, g)
                    k += 1
                    for u in pk.static_range(L):
                        if r0 + u32(u) * passes < rows:
                            fill[(r0 + u32(u) * passes) * p32 + x] = vals[u]
            rows_write(out, wsrc, tab, k * npx // pieces, npx, grp, groups, rowlen, sw32, run, lane, g)
        pk.syncthreads()
        cur = nxt
        if nxt < n32:
            nxt += u32(pk.grid_dim.x)
        sel = u32(1) - sel


@pk.func
def pipe_item(fill: Ptr[T], base: ConstPtr[T], rows: u32, iw0: u32, oh32: u32, ncol: u32, tx: u32, xs: u32,
              ty: u32, step: u32, passes: u32, hk32: u32, m_hk: u64, dc: u32, dkh: u32, dh32: u32, ph32: u32,
              s5: u32, s6: u32, hi: u32, wi: u32, p32: u32, out: Ptr[T], wsrc: Ptr[T], tab: Ptr[u16],
              npx: u32, grp: u32, groups: u32, rowlen: usize, sw32: u32, run: u32, lane: u32, g: u32, *, L):
    """One pass of im2col_rows_pipe's pair fill (CW = 2: 16-bit types, rows contiguous and 4-byte
    aligned, an even width): the next item's fill into ``fill``, rounds of L loads of a 4-byte word of
    an aligned source pair (column x is source column ``iw0 + 2 x``, ``iw0`` even; a staged row is
    ``p32 / 2`` words), each round's share of the current item's pixels written (rows_write) between
    its loads and its stores. The element fill (CW = 1) stays inline in im2col_rows_pipe: sent through
    here its PTX changed (docs/targets/cuda.md, conv)."""
    vals32 = pk.local.array(L, u32)
    base32 = pk.bitcast(base, ConstPtr[u32])
    fill32 = pk.bitcast(fill, Ptr[u32])
    pw32 = p32 // 2
    nrr = u32(0)
    if ty < rows:
        nrr = (rows - ty + step - 1) // step
    pieces = max(ncol * nrr, u32(1))
    k = u32(0)
    for xi in range(u32(0), ncol):
        x = tx + xi * xs
        iw = iw0 + x * u32(2)  # wraps past 2**31 left of the input: one compare tests both sides
        iw_in = iw < wi
        for r0 in range(ty, rows, step):
            # row r0 + u * passes's (c, kh) one step from the last (dc, dkh: passes // h_k, passes % h_k)
            c, kh = div_mod(r0, hk32, m_hk)
            for u in pk.static_range(L):
                if u > 0:
                    kh += dkh
                    c += dc
                    wrap = kh >= hk32
                    kh = pk.select(wrap, kh - hk32, kh)
                    c = pk.select(wrap, c + 1, c)
                ih = oh32 + kh * dh32 - ph32
                inside = ih < hi and iw_in and r0 + u32(u) * passes < rows
                v32 = base32[usize(pk.select(inside, (c * s5 + ih * s6 + iw) >> 1, u32(0)))]
                vals32[u] = pk.select(inside, v32, u32(0))
            rows_write(out, wsrc, tab, k * npx // pieces, (k + 1) * npx // pieces, grp, groups, rowlen, sw32,
                       run, lane, g)
            k += 1
            for u in pk.static_range(L):
                if r0 + u32(u) * passes < rows:
                    fill32[(r0 + u32(u) * passes) * pw32 + x] = vals32[u]
    rows_write(out, wsrc, tab, k * npx // pieces, npx, grp, groups, rowlen, sw32, run, lane, g)


@pk.func
def pipe_pairs_ok(info: ConstPtr[usize], src: ConstPtr[T]) -> bool:
    """The 2-d layout ``info`` and ``src`` allow im2col_rows_pipe's pair fill (CW = 2): rows contiguous
    along w, every row and the source 4-byte aligned, and an even width (no pair straddles a row's end)."""
    return (info[7] == 1 and info[4] % 2 == 0 and info[5] % 2 == 0 and info[6] % 2 == 0 and info[3] % 2 == 0
            and pk.is_aligned(src, 4))


@pk.kernel(max_block_size=ROWS_BLOCK, min_blocks_per_sm={"cuda": ROWS_BLOCKS_PER_SM}, moves=("T",))
def im2col_rows_op(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize,
                   padding: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T,
                   SB, L, NS, TB, PR):
    """The wrappers' own im2col (``im2col_rows_{T}``, candle's signature and semantics): the rows path
    alone, for sizes where its tile applies and 32-bit staging indices suffice (``im2col_rows_plan``,
    which the wrappers check before launching it); arguments outside that write nothing. A kernel of its
    own: candle's im2col_op holds the loop and the staged gather, whose registers it would take. NS = 2:
    the pipelined path (``im2col_rows_pipe``, two stages of SB bytes), NS = 1 ``im2col_rows``; TB
    column-table entries. PR = 1 (16-bit types, NS = 2): the pair fill (``im2col_rows_pipe``, CW = 2,
    ``im2col_rows_pairs_*``), layouts outside ``pipe_pairs_ok`` writing nothing."""
    stage = pk.shared.array(NS * SB // T.nbytes, T)
    tab = pk.shared.array(TB, u16)
    tile = im2col_rows_tile(info[1], h_k, w_k, w_out, stride, dilation, usize(T.nbytes), usize(SB), usize(TB),
                            usize(2 if NS == 2 and T.nbytes == 2 and PR > 0 else 0))
    reach = max(max(h_out * stride + h_k * dilation, w_out * stride + w_k * dilation), padding + max(info[2], info[3]))
    if (tile != 0 and dst_numel > 0 and stride > 0 and rows_domain(info, reach, padding, dilation)
            and max(max(h_out, w_out), max(h_k, w_k)) <= INDEX_31):
        if NS == 2 and T.nbytes == 2 and PR > 0:
            if pipe_pairs_ok(info, src):
                im2col_rows_pipe(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation,
                                 info, src, dst, usize(u32(tile)), usize(tile >> 32), stage,
                                 usize(SB // T.nbytes), tab, L=L, CW=2)
        elif NS == 2:
            im2col_rows_pipe(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src,
                             dst, usize(u32(tile)), usize(tile >> 32), stage, usize(SB // T.nbytes), tab, L=L,
                             CW=1)
        else:
            im2col_rows(h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src, dst,
                        usize(u32(tile)), usize(tile >> 32), stage, tab, L=L, CW=1)


@pk.kernel(max_block_size=ROWS_BLOCK, min_blocks_per_sm={"cuda": ROWS_BLOCKS_PER_SM}, moves=("T",))
def im2col1d_rows_op(dst_numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                     info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, SB, L, NS, TB, PR):
    """The wrappers' own im2col1d (``im2col1d_rows_{T}``, candle's signature: ``dst_numel`` counts
    (b, l, c) rows): im2col_rows (NS = 1) or im2col_rows_pipe (NS = 2) on the input seen as height 1;
    arguments outside its domain write nothing (``im2col_rows_plan``). PR = 1 (16-bit types, NS = 1):
    the pair fill (``im2col_rows``' CW = 2, ``im2col1d_rows_pairs_*``), layouts outside
    ``pipe_pairs_ok`` writing nothing."""
    stage = pk.shared.array(NS * SB // T.nbytes, T)
    tab = pk.shared.array(TB, u16)
    tile = im2col_rows_tile(info[1], usize(1), l_k, l_out, stride, dilation, usize(T.nbytes), usize(SB), usize(TB),
                            usize(2 if NS == 1 and T.nbytes == 2 and PR > 0 else 0))
    if tile != 0 and dst_numel > 0 and stride > 0 and max(l_out, l_k) <= INDEX_31:
        as_2d = pk.local.array(8, usize)
        layout_1d_as_2d(info, as_2d)
        if not rows_domain(as_2d, max(l_out * stride + l_k * dilation, padding + info[2]), padding, dilation):
            return
        if NS == 2:
            im2col_rows_pipe(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation,
                             as_2d, src, dst, usize(u32(tile)), usize(tile >> 32), stage, usize(SB // T.nbytes), tab,
                             L=L, CW=1)
        elif T.nbytes == 2 and PR > 0:
            if pipe_pairs_ok(as_2d, src):
                im2col_rows(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation,
                            as_2d, src, dst, usize(u32(tile)), usize(tile >> 32), stage, tab, L=L, CW=2)
        else:
            im2col_rows(usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1), dilation,
                        as_2d, src, dst, usize(u32(tile)), usize(tile >> 32), stage, tab, L=L, CW=1)



# ---- im2col for 16-bit 3x3 / 3-tap windows: the source staged channels-last --------------------------
#: ``im2col_3x3_*`` / ``im2col1d_k3_*`` (f16, bf16; ``im2col_vec_ok``): an item is (b, oh, a run of ow,
#: VEC_NV 16-byte vectors of channels); its h_k source rows are staged channels-last, so the KK taps of a
#: vector of channels are KK 16-byte shared loads, which a lane interleaves in registers into its unit's
#: KK output vectors (V channels x KK taps: contiguous in dst); the wave stores its units' output from a
#: buffer in shared memory as 16-byte tiles. Blocks of VEC_BLOCK threads (whole waves), their registers
#: sized for VEC_BLOCKS_PER_SM blocks an SM on CUDA; VEC_TASKS_2D / _1D fill tasks a batch
#: (docs/targets/cuda.md, "Ninth pass")
VEC_BLOCK = 128
VEC_NV = 8
#: ... and for 3-tap windows over more than VEC_NARROW channels (``im2col1d_k3_*``); the wrappers take
#: ``im2col1d_k3_narrow_*`` (VEC_NV_NARROW vectors, VEC_TASKS_NARROW tasks a batch) for at most VEC_NARROW, whose
#: stage would be mostly empty with 16 (both correct for any channels: ``vec_kernel``)
VEC_NV_1D = 16
VEC_NARROW = 64
VEC_STAGE_BYTES = 24576
VEC_BLOCKS_PER_SM = 5
VEC_TASKS_2D = 6
VEC_TASKS_1D = 4
VEC_TASKS_NARROW = 3
VEC_NV_NARROW = 8
VEC_DTYPES = (f16, bf16)


@pk.func
def vec_pixels(c_in: usize, h_k: usize, w_k: usize, w_out: usize, stride: usize, dilation: usize, kk: usize,
               nv: usize) -> usize:
    """An item's pixels: the most consecutive ow whose staged columns (3 more for the fill's alignment;
    the pitch a multiple of 8) fit VEC_STAGE_BYTES; 0 where the path does not apply (``im2col_vec_plan``
    on the host)."""
    if h_k * w_k != kk or c_in % 8 != 0 or c_in == 0 or w_out == 0 or stride == 0:
        return usize(0)
    cols = usize(VEC_STAGE_BYTES) // (nv * 16 * h_k) // 8 * 8
    reach = (w_k - 1) * dilation + 1
    if cols < reach + 3:
        return usize(0)
    return min(w_out, (cols - reach - 3) // stride + 1)


@pk.func
def vec_layout_ok(info: ConstPtr[usize], src: ConstPtr[T]) -> bool:
    """The fill's 8-byte chunks apply: rows contiguous along w; the width and every batch, channel and
    row stride whole chunks of 4 elements; ``src`` 8-byte aligned. (The stage's u32 arithmetic needs no
    size check: ``vec_pixels`` bounds the stride, dilation and pixels by the stage's columns.)"""
    return (info[7] == 1 and info[3] % 4 == 0 and info[4] % 4 == 0 and info[5] % 4 == 0 and info[6] % 4 == 0
            and pk.is_aligned(src, 8))


@pk.func
def vec_item(item: usize, c_tiles: usize, w_tiles: usize, h_out: usize) -> tuple[usize, usize, usize, usize]:
    """Item ``item``'s (batch, output row, w tile, channel tile)."""
    r = item // c_tiles
    return r // w_tiles // h_out, r // w_tiles % h_out, r % w_tiles, item % c_tiles


@pk.func
def vec_fill_load(f0: u32, total: u32, nckg: u32, ngrp: u32, ckl: u32, wd: u32, vals: Ptr[u64], base: ConstPtr[T],
                  row0: usize, pos0: usize, origin: usize, nvn: u32, nck: u32, dil_h: usize, pad_h: usize,
                  geo: Ptr[usize], *, L, NV):
    """A fill batch: L tasks (the thread's f0, f0 + ngrp, ...), each two channels (pair ``wd`` of vector
    ``cv``) x 4 aligned source columns as two 8-byte loads into ``vals``. Task g is (staged row, vector,
    chunk group) = g's place in h_k x NV x nckg, its chunk ``group * 8 + ckl`` (staged columns 4 chunk
    .. 4 chunk + 3, source column ``pos0 + 4 chunk - origin``; 0 outside the source). ``geo``: height,
    width, channel and row strides, read once a kernel (a reload of ``info`` would follow each of the
    write's stores)."""
    hi = geo[0]
    wi = geo[1]
    b64 = pk.bitcast(base, ConstPtr[u64])
    for u in pk.static_range(L):
        g = f0 + u32(u) * ngrp
        rc = g // max(nckg, u32(1))
        ck = (g - rc * nckg) * 8 + ckl
        cv = rc % u32(NV)
        ih = padded_source(row0 + usize(rc // u32(NV)) * dil_h, pad_h, hi)
        pos = pos0 + usize(ck) * 4
        inside = g < total and ih < hi and pos >= origin and pos - origin < wi and cv < nvn and ck < nck
        o = pk.select(inside, usize(cv * 8 + wd * 2) * geo[2] + ih * geo[3] + (pos - origin), usize(0))
        vals[2 * u] = pk.select(inside, b64[o >> 2], u64(0))
        vals[2 * u + 1] = pk.select(inside, b64[(o + geo[2]) >> 2], u64(0))


@pk.func
def vec_fill_store(f0: u32, total: u32, nckg: u32, ngrp: u32, ckl: u32, wd: u32, vals: Ptr[u64], stage: Ptr[u32],
                   pitch: u32, nck: u32, *, L, NV):
    """``vec_fill_load``'s tasks into the stage: the pair's four columns as four words, in slot ``cv ^ ckl``
    (``cv ^ column // 4 % 8``) of their column, so that a wave's stores of one column offset, and the
    write's 16-byte loads of one column's vectors, each hit every bank once."""
    for u in pk.static_range(L):
        g = f0 + u32(u) * ngrp
        rc = g // max(nckg, u32(1))
        ck = (g - rc * nckg) * 8 + ckl
        if g < total and ck < nck:
            a = vals[2 * u]
            b = vals[2 * u + 1]
            v = ((rc // u32(NV)) * pitch + ck * 4) * u32(NV) + ((rc % u32(NV)) ^ ckl)
            for i in pk.static_range(4):
                stage[(v + u32(i * NV)) * 4 + wd] = (u32(a >> u64(16 * i)) & 0xFFFF) | (u32(b >> u64(16 * i)) << 16)


@pk.func
def vec_fill_item(item: usize, c_tiles: usize, w_tiles: usize, h_out: usize, pw: usize, stride: usize, pm: usize,
                  batches: u32, grp: u32, per: u32, total: u32, nckg: u32, ngrp: u32, ckl: u32, wd: u32, vals: Ptr[u64],
                  src: ConstPtr[T], s0: usize, cg: usize, c_in: usize, stride_h: usize, nck: u32, dil_h: usize,
                  pad_h: usize, padding: usize, geo: Ptr[usize], stage: Ptr[u32], pitch: u32, *, T, L, NV):
    """Item ``item``'s stage, batch after batch (the caller's barrier follows)."""
    b, oh, wt, ct = vec_item(item, c_tiles, w_tiles, h_out)
    sh = (wt * pw * stride % 4 + 4 - pm) % 4
    base = src + b * s0 + ct * cg * geo[2]
    nvn = u32(min(cg, c_in - ct * cg) // usize(16 // T.nbytes))
    for j in range(u32(0), batches):
        vec_fill_load(grp + j * per, total, nckg, ngrp, ckl, wd, vals, base, oh * stride_h, wt * pw * stride,
                      padding + sh, nvn, nck, dil_h, pad_h, geo, L=L, NV=NV)
        vec_fill_store(grp + j * per, total, nckg, ngrp, ckl, wd, vals, stage, pitch, nck, L=L, NV=NV)


@pk.func
def im2col_vec(h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize, stride: usize, pad_h: usize,
               padding: usize, dil_h: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T],
               pw: usize, stage: Ptr[u32], ob: Ptr[u32], *, T, KK, L, NV):
    """Items go to blocks in turn (block-uniform loop and barriers). The stage holds the item's ``h_k``
    source rows x ``pitch`` columns x NV vectors, staged column 0 being ``sh`` (0-3) columns before
    the item's first so that the fill's chunks are aligned; vector ``cv`` of column x sits in slot
    ``cv ^ x // 4 % 8``. Fill: a group of 32 threads takes 8 chunks x a vector's 4 channel pairs
    (``vec_fill_load``). Write, in rounds of a unit a thread: unit (pixel q, vector cv) loads its KK taps'
    vectors and interleaves them into its KK output vectors in its wave's part of ``ob``; after the
    barrier the wave copies its units' output, one contiguous run of dst a pixel, in 16-byte tiles."""
    V = 16 // T.nbytes
    c_in = info[1]
    sw = (pw - 1) * stride + (w_k - 1) * dilation + 1
    t = pk.thread_idx.x
    nt = pk.block_dim.x
    grp = t // 32
    ngrp = nt // 32
    wd = t % 4
    ckl = (t // 4) % 8
    pitch = u32((sw + 3 + 7) // 8 * 8)
    nck = pitch // 4  # chunks a staged row
    nckg = (nck + 7) // 8
    total = u32(h_k * NV) * nckg
    per = ngrp * u32(L)
    batches = (total + per - 1) // per
    cg = usize(NV * V)
    c_tiles = (c_in + cg - 1) // cg
    w_tiles = (w_out + pw - 1) // pw
    items = info[0] * h_out * w_tiles * c_tiles
    ws = u32(pk.wave_size)
    lane = t % ws
    wob = (t - lane) * u32(4 * KK)  # the wave's part of ob, in words
    rowlen = c_in * usize(KK)
    obt = pk.bitcast(ob, Ptr[T])
    vals = pk.local.array(2 * L, u64)
    tw = pk.local.array(4 * KK, u32)
    geo = pk.local.array(4, usize)
    geo[0] = info[2]
    geo[1] = info[3]
    geo[2] = info[5]
    geo[3] = info[6]
    s0 = info[4]
    pm = padding % 4
    sc = u32(stride)
    item = usize(pk.block_idx.x)
    while item < items:
        vec_fill_item(item, c_tiles, w_tiles, h_out, pw, stride, pm, batches, grp, per, total, nckg, ngrp, ckl, wd,
                      vals, src, s0, cg, c_in, stride_h, nck, dil_h, pad_h, padding, geo, stage, pitch, T=T, L=L, NV=NV)
        pk.syncthreads()
        b, oh, wt, ct = vec_item(item, c_tiles, w_tiles, h_out)
        c0 = ct * cg
        nvn = u32(min(cg, c_in - c0) // usize(V))
        ow0 = wt * pw
        pn = u32(min(pw, w_out - ow0))
        sh = (ow0 * stride % 4 + 4 - pm) % 4
        units = pn * nvn
        for u0 in range(u32(0), units, nt):
            unit = u0 + t
            if unit < units:
                q = unit // nvn
                cv = unit - q * nvn
                for tap in pk.static_range(KK):
                    kh = u32(tap) // u32(w_k)
                    x = u32(sh) + q * sc + (u32(tap) - kh * u32(w_k)) * u32(dilation)
                    v = ((kh * pitch + x) * u32(NV) + (cv ^ ((x >> 2) % 8))) * 4
                    for i in pk.static_range(4):
                        tw[tap * 4 + i] = stage[v + u32(i)]
                for i in pk.static_range(4 * KK):  # output word i: elements 2i, 2i + 1 = (channel, tap) pairs
                    lo = (tw[(2 * i) % KK * 4 + (2 * i) // KK // 2] >> (16 * ((2 * i) // KK % 2))) & 0xFFFF
                    hi = tw[(2 * i + 1) % KK * 4 + (2 * i + 1) // KK // 2] >> (16 * ((2 * i + 1) // KK % 2))
                    ob[wob + lane * u32(4 * KK) + u32(i)] = lo | (hi << 16)
            pk.syncthreads()
            w0 = u0 + (t - lane)  # the wave's units [w0, w1): one contiguous run of dst a pixel
            w1 = min(w0 + ws, units)
            if w0 < w1:
                for qq in range(w0 // nvn, (w1 - 1) // nvn + 1):
                    ua = max(w0, qq * nvn)
                    ub = min(w1, (qq + 1) * nvn)
                    seg = dst + (((b * h_out + oh) * w_out + ow0 + usize(qq)) * rowlen
                                 + (c0 + usize((ua - qq * nvn) * u32(V))) * usize(KK))
                    run = obt + usize((wob + (ua - w0) * u32(4 * KK)) * 2)
                    for e in pk.parallel_range(usize(0), usize((ub - ua) * u32(V * KK)), usize(lane), usize(ws)):
                        seg[e] = run[e]
            pk.syncthreads()
        item += usize(pk.grid_dim.x)


@pk.func
def im2col_vec_entry(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride_h: usize,
                     stride: usize, pad_h: usize, padding: usize, dil_h: usize, dilation: usize, info: ConstPtr[usize],
                     src: ConstPtr[T], dst: Ptr[T], stage: Ptr[u32], ob: Ptr[u32], *, T, KK, L, NV):
    """Both kernels' checks (``im2col_vec_ok`` on the host); arguments outside the path's domain, and
    blocks that are not whole waves or over VEC_BLOCK, write nothing. (NV is a compile-time constant
    for the stage's stride: a stride known only at run time, or one kernel with bodies for 16 and 8
    vectors, measured slower: docs/targets/cuda.md, conv.)"""
    pw = vec_pixels(info[1], h_k, w_k, w_out, stride, dilation, usize(KK), usize(NV))
    if (pw > 0 and dst_numel > 0 and pk.is_aligned(dst, 16) and pk.block_dim.x <= VEC_BLOCK
            and pk.block_dim.x % u32(pk.wave_size) == 0 and vec_layout_ok(info, src)):
        im2col_vec(h_out, w_out, h_k, w_k, stride_h, stride, pad_h, padding, dil_h, dilation, info, src, dst, pw, stage,
                   ob, T=T, KK=KK, L=L, NV=NV)


@pk.kernel(max_block_size=VEC_BLOCK, min_blocks_per_sm={"cuda": VEC_BLOCKS_PER_SM}, moves=("T",))
def im2col_3x3_op(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
                  dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, L, NV):
    """The wrappers' im2col for 3x3 windows (``im2col_3x3_{T}``, candle's signature and semantics):
    ``im2col_vec``, L fill tasks a batch, NV channel vectors an item."""
    stage = pk.shared.array(VEC_STAGE_BYTES // 4, u32)
    ob = pk.shared.array(VEC_BLOCK * 4 * 9, u32)
    im2col_vec_entry(dst_numel, h_out, w_out, h_k, w_k, stride, stride, padding, padding, dilation, dilation, info, src,
                     dst, stage, ob, T=T, KK=9, L=L, NV=NV)


@pk.kernel(max_block_size=VEC_BLOCK, min_blocks_per_sm={"cuda": VEC_BLOCKS_PER_SM}, moves=("T",))
def im2col1d_k3_op(dst_numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                   info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, L, NV):
    """The wrappers' im2col1d for 3-tap windows (``im2col1d_k3_{T}``, candle's signature): ``im2col_vec``
    on the input seen as height 1."""
    stage = pk.shared.array(VEC_STAGE_BYTES // 4, u32)
    ob = pk.shared.array(VEC_BLOCK * 4 * 3, u32)
    as_2d = pk.local.array(8, usize)
    layout_1d_as_2d(info, as_2d)
    im2col_vec_entry(dst_numel, usize(1), l_out, usize(1), l_k, usize(1), stride, usize(0), padding, usize(1),
                     dilation, as_2d, src, dst, stage, ob, T=T, KK=3, L=L, NV=NV)


#: the same kernel for the pipelined path (NS = 2), its registers sized for ROWS_PIPE_BLOCKS_PER_SM
im2col_rows_pipe_op = pk.kernel(max_block_size=ROWS_BLOCK, min_blocks_per_sm={"cuda": ROWS_PIPE_BLOCKS_PER_SM},
                                moves=("T",))(im2col_rows_op.__wrapped__)

@pk.func
def col2im1d_loop(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                  src: ConstPtr[T], dst: Ptr[T], m_l: u64, m_c: u64, *, I):
    lo = I(l_out)
    co = I(c_out)
    for i in pk.grid_stride(dst_el):
        bc, o = div_mod(I(i), lo, m_l)  # b * c_out + c, and the output position
        ol = usize(o)
        b, c = div_mod(bc, co, m_c)
        col = src + usize(b) * l_in * c_out * k_size + usize(c) * k_size
        # li * stride + k == ol for 0 <= k < k_size: li from ceil((ol - k_size + 1) / stride) to ol / stride
        first = (ol + 1 - k_size + stride - 1) // stride if ol + 1 > k_size else usize(0)
        last = min(ol // stride + 1, l_in)
        acc = T(0)
        for li in range(first, last):
            acc += col[li * c_out * k_size + (ol - li * stride)]
        dst[i] = acc


#: col2im1d's staged path: each staged source row holds about COL_ROW_BYTES of (channel, tap) values
#: (one cache line), and a work item's (li, channel) tile must span at least COL_MIN_ROWS new rows
COL_ROW_BYTES = 128
COL_MIN_ROWS = 16
#: the staging loads a thread issues before storing any of them
COL_LOADS = 8
#: col2im1d's stage: one work item's source rows
COL_STAGE_BYTES = STAGE_BYTES


@pk.func
def col2im1d_tile(c_out: usize, k_size: usize, stride: usize, tbytes: usize) -> u64:
    """The staged path's tile: ``chunk`` channels a staged row (about COL_ROW_BYTES), and ``span`` new
    source positions an item (what COL_STAGE_BYTES holds after the ``(k - 1) // stride`` rows of overlap
    with the previous item), packed as ``chunk | span << 32``; span 0 where the tile is too small
    (``col2im1d_launch`` computes the same)."""
    chunk = min(c_out, max(usize(COL_ROW_BYTES) // tbytes // max(k_size, usize(1)), usize(1)))
    pitch = chunk * k_size | 1
    rows = usize(COL_STAGE_BYTES) // tbytes // pitch
    halo = (k_size - 1) // stride
    span = rows - halo if rows > halo else usize(0)
    if span < COL_MIN_ROWS or span <= halo:
        span = usize(0)
    return u64(chunk) | (u64(span) << 32)


@pk.func
def col2im1d_staged(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                    src: ConstPtr[T], dst: Ptr[T], chunk: usize, span: usize, sh: Ptr[T]):
    """col2im1d as a transpose through shared memory: a work item (batch b, ``span`` source positions
    from li0, ``chunk`` channels from c0) stages the rows li0 - halo ... li0 + span - 1 (each row's
    ``chunk * k`` values are contiguous in src: whole lines; COL_LOADS loads a thread in flight) at
    an odd pitch, then writes the outputs it owns, ``ol`` in ``[li0 * stride, (li0 + span) * stride)`` (the last item: up to
    ``l_out``), lanes along ``ol`` (contiguous stores), each summing its taps in col2im1d_loop's order.
    Items go to blocks in turn (block-uniform loop and barriers)."""
    t = usize(pk.thread_idx.x)
    nt = usize(pk.block_dim.x)
    w = min(usize(pk.wave_size), nt)
    waves = nt // w
    lane = t % w
    wave = t // w
    pitch = chunk * k_size | 1
    halo = (k_size - 1) // stride
    c_tiles = (c_out + chunk - 1) // chunk
    l_tiles = (l_in + span - 1) // span
    batches = dst_el // (c_out * l_out)
    items = batches * l_tiles * c_tiles
    s32 = u32(stride)
    m_s = divisor_magic(stride)
    vals = pk.local.array(COL_LOADS, T)
    offs = pk.local.array(COL_LOADS, u32)
    item = usize(pk.block_idx.x)
    while item < items:
        ct = item % c_tiles
        bl = item // c_tiles
        lt = bl % l_tiles
        b = bl // l_tiles
        c0 = ct * chunk
        cn = min(chunk, c_out - c0)
        li0 = lt * span
        r0 = li0 - min(halo, li0)  # the first staged source row
        r1 = min(li0 + span, l_in)
        run = cn * k_size
        total = (r1 - r0) * run
        m_run = divisor_magic(run)
        rows = src + ((b * l_in + r0) * c_out + c0) * k_size
        for j0 in range(usize(0), total, nt * COL_LOADS):  # COL_LOADS loads a thread in flight at once
            for u in pk.static_range(COL_LOADS):
                j = u32(min(j0 + t + usize(u) * nt, total - 1))
                r, e = div_mod(j, u32(run), m_run)
                vals[u] = rows[usize(r) * c_out * k_size + usize(e)]
                offs[u] = r * u32(pitch) + e
            for u in pk.static_range(COL_LOADS):
                if j0 + t + usize(u) * nt < total:
                    sh[offs[u]] = vals[u]
        pk.syncthreads()
        oa = min(li0 * stride, l_out)
        ob = l_out if li0 + span >= l_in else min((li0 + span) * stride, l_out)
        if t < waves * w:
            for c in range(wave, cn, waves):
                out = dst + (b * c_out + c0 + c) * l_out
                col = sh + c * k_size
                for ol in range(oa + lane, ob, w):
                    o = u32(ol)
                    first = u32(0)
                    if ol + 1 > k_size:
                        first = div_by(o + 1 + s32 - 1 - u32(k_size), s32, m_s)
                    last = min(div_by(o, s32, m_s) + 1, u32(l_in))
                    acc = T(0)
                    for li in range(first, last):
                        acc += col[usize(li - u32(r0)) * pitch + usize(o - li * s32)]
                    out[ol] = acc
        pk.syncthreads()
        item += usize(pk.grid_dim.x)


@pk.kernel
def col2im1d_op(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    if dst_el <= NARROW and l_out <= INDEX_31 and c_out <= INDEX_31:
        col2im1d_loop(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, divisor_magic(l_out), divisor_magic(c_out),
                      I=u32)
    else:
        col2im1d_loop(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, u64(0), u64(0), I=usize)


@pk.kernel
def col2im1d_staged_op(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                       src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    """The wrappers' own col2im1d (``col2im1d_staged_{T}``, candle's signature): blocks of at least
    STAGE_PIXELS threads take the staged path where its tile is large enough (``col2im1d_tile``),
    anything else col2im1d_op's loop. A kernel of its own so that candle's ``col2im1d_{T}`` keeps the
    loop's registers and no shared memory under candle's blocks of 1024 (the staged path there: 2
    blocks an SM, a block's 8 channels leaving 24 of its 32 waves idle while it sums)."""
    sh = pk.shared.array(COL_STAGE_BYTES // T.nbytes, T)
    if (usize(pk.block_dim.x) >= STAGE_PIXELS and dst_el > 0 and dst_el <= NARROW and l_out <= INDEX_31
            and l_in <= INDEX_31 and c_out <= INDEX_31 and stride > 0 and stride <= INDEX_31
            and l_out + stride + k_size <= INDEX_31):
        tile = col2im1d_tile(c_out, k_size, stride, usize(T.nbytes))
        span = usize(tile >> 32)
        if span > 0:
            col2im1d_staged(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, usize(u32(tile)), span, sh)
            return
    if dst_el <= NARROW and l_out <= INDEX_31 and c_out <= INDEX_31:
        col2im1d_loop(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, divisor_magic(l_out), divisor_magic(c_out),
                      I=u32)
    else:
        col2im1d_loop(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, u64(0), u64(0), I=usize)


#: col2im1d's rows path (the wrappers' own ``col2im1d_rows_*``): a work item is (b, ``chunk`` channels,
#: ``span`` source positions). Its stage holds the item's source rows (each row's ``chunk * k`` values
#: about COLR_ROW_BYTES, whole 8-byte words of src), at an odd pitch of 4-byte words; the write side then
#: stores each channel's output segment as 16-byte tiles (``parallel_range``), each output summing at
#: most COLR_TAPS staged values (a loop-free body: taps as selects), so the stores are vectors.
COLR_ROW_BYTES = 256
COLR_STAGE_BYTES = 32768
#: the stage's 8-byte loads a thread issues before storing any of them
COLR_LOADS = 8
#: the most taps an output sums (``ceil(k / stride)``): the write side's unrolled selects
COLR_TAPS = 2
#: an item spans at least this many new source positions
COLR_MIN_ROWS = 16
#: the wrappers' block for the rows path
COLR_BLOCK = 256
#: the 8-byte words a lane writes of a channel's segment (groups of fewer lanes a channel, more channels at
#: once): each channel's setup (its offsets, the words before and after the whole ones) spread over more
#: words (docs/targets/cuda.md, the conv section's eighth pass: 8 words and COLR_BLOCKS_PER_SM did best)
COLR_WORDS = 8
#: registers for 4 blocks of COLR_BLOCK an SM on CUDA (64; bf16 took 80 uncapped, 3 blocks an SM)
COLR_BLOCKS_PER_SM = 4
#: f32 on CUDA: shorter staged rows (8 channels of a 4-tap kernel) in a larger stage, so an item spans
#: more source positions (16-bit types lost with either: the figures in docs/targets/cuda.md);
#: elsewhere the 32 KiB stage leaves AMD's 64 KiB LDS two blocks a CU
COLR_STAGE_BYTES_F32_CUDA = 49152
COLR_ROW_BYTES_F32_CUDA = 128


@pk.func
def col2im1d_rows_tile(c_out: usize, k_size: usize, stride: usize, tbytes: usize, stage_bytes: usize, taps: usize,
                       row_bytes: usize) -> u64:
    """The rows path's tile, ``chunk | span << 32`` (0 where it does not apply): ``chunk`` channels whose
    ``chunk * k`` values are whole 8-byte words (all of c_out where fewer than about COLR_ROW_BYTES), and
    ``span`` new source positions an item, what the stage holds after the ``(k - 1) // stride`` rows
    of overlap. Applies where an output sums at most ``taps`` values and src's rows are whole words
    (``col2im1d_rows_plan`` computes the same on the host)."""
    if k_size == 0 or c_out == 0 or stride == 0 or k_size > taps * stride:
        return u64(0)
    rb = k_size * tbytes  # bytes a channel
    if (c_out * rb) % 8 != 0:
        return u64(0)
    g = usize(8)
    while rb % g != 0:  # gcd(rb, 8)
        g = g // 2
    unit = usize(8) // g
    chunk = min(c_out, max(unit, row_bytes // rb // unit * unit))
    pitch = chunk * rb // 4 + 1
    rows = stage_bytes // 4 // pitch
    halo = (k_size - 1) // stride
    if rows < halo + COLR_MIN_ROWS:
        return u64(0)
    return u64(chunk) | (u64(rows - halo) << 32)


@pk.func
def col2im1d_rows(l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize, batches: usize,
                  src: ConstPtr[T], dst: Ptr[T], chunk: usize, span: usize, stage: Ptr[T], *, T, A, L, MT, H, FAST,
                  WL):
    """Items go to blocks in turn (block-uniform loop and barriers). Fill: thread t takes 8-byte word
    ``t % xs`` of every ``nt // xs``-th staged row (``xs``: the row's words, at most the block), L loads
    in flight before any store, each word stored as two 4-byte words at the row's odd pitch. Write:
    groups of ``g`` lanes (enough for WL words a lane: a channel's setup spread over several words) take
    the item's channels in turn; a channel's outputs ``[li0 * s, (li0 + span) * s)`` (the last item: to
    ``l_out``) go out as 8-byte words, a lane a word at a time, A's sums rounded to T once (adjacent
    lanes read adjacent source rows of the stage: at an odd pitch, few bank conflicts), the outputs before the
    first whole word and after the last one apart (all of them where dst is not 8-byte aligned). Output
    ``ol`` sums ``stage[li - r0][c * k + ol - li * s]`` over its taps li ascending (col2im1d_loop's
    order), the taps past its count adding zero."""
    t = usize(pk.thread_idx.x)
    nt = usize(pk.block_dim.x)
    wpr = chunk * k_size * usize(T.nbytes) // 8  # 8-byte words a full staged row
    p32 = u32(wpr * 2 + 1)  # the pitch in 4-byte words
    pt = p32 * 4 // u32(T.nbytes)  # ... and in elements
    halo = (k_size - 1) // stride
    c_tiles = (c_out + chunk - 1) // chunk
    l_tiles = (l_in + span - 1) // span
    items = batches * l_tiles * c_tiles
    if items > INDEX_31:
        return
    src64 = pk.bitcast(src, ConstPtr[u64])
    st32 = pk.bitcast(stage, Ptr[u32])
    row64 = u32(c_out * k_size * usize(T.nbytes) // 8)  # a source row's words
    xs = min(wpr, nt)
    passes = u32(nt // xs)
    tx = u32(t % xs)
    ty = u32(t // xs)
    s32 = u32(stride)
    m_s = divisor_magic(stride)
    jmax = u32((k_size - 1) % stride)
    h32 = u32(halo)
    every_tap = k_size == MT * stride  # every output inside the sequence sums MT taps
    li_n = u32(l_in)
    ew = usize(8 // T.nbytes)  # outputs an 8-byte word
    wide = pk.is_aligned(dst, 8)
    ng = (span * stride + ew - 1) // ew  # words of a channel's segment
    g = usize(1)
    while g * WL < ng and g * 2 <= nt:
        g *= 2
    groups = nt // g
    lane = t % g
    grp = t // g
    vals = pk.local.array(L, u64)
    ct32 = u32(c_tiles)
    lt32 = u32(l_tiles)
    item = u32(pk.block_idx.x)
    while item < u32(items):
        ct = item % ct32
        r = item // ct32
        lt = r % lt32
        b = usize(r // lt32)
        c0 = usize(ct) * chunk
        cn = min(chunk, c_out - c0)
        li0 = u32(usize(lt) * span)
        r0 = li0 - min(h32, li0)  # the first staged source row
        r1 = min(li0 + u32(span), li_n)
        rows = r1 - r0
        words = u32(cn * k_size * usize(T.nbytes) // 8)
        base = src64 + ((b * l_in + usize(r0)) * c_out + c0) * k_size * usize(T.nbytes) // 8
        if ty < passes:
            for x in range(tx, words, u32(xs)):
                for q0 in range(ty, rows, passes * u32(L)):
                    for u in pk.static_range(L):
                        q = min(q0 + u32(u) * passes, rows - 1)
                        vals[u] = base[usize(q * row64 + x)]
                    for u in pk.static_range(L):
                        q = q0 + u32(u) * passes
                        if q < rows:
                            st32[usize(q * p32 + 2 * x)] = u32(vals[u])
                            st32[usize(q * p32 + 2 * x + 1)] = u32(vals[u] >> u64(32))
        pk.syncthreads()
        oa = li0 * s32
        ob = u32(l_out) if r1 >= li_n else r1 * s32
        n = usize(ob - oa)
        bias = u32(0) - r0 * pt  # stage offset of (li, tap ol - li * s): li * (pt - s) + ol - r0 * pt
        lo_all = h32 * s32  # outputs from here to hi_all sum exactly MT taps where k = MT * s
        hi_all = li_n * s32
        if grp < groups:
            for c in range(grp, cn, groups):
                at = (b * c_out + c0 + c) * l_out + usize(oa)
                head = min((ew - at % ew) % ew, n) if wide else n  # outputs before the first whole word
                full = (n - head) // ew
                rest = head + full * ew  # the outputs after the last whole word
                cs = stage + c * k_size
                for e in range(lane, head, g):
                    dst[at + e] = col2im1d_rows_value(oa + u32(e), cs, pt, r0, s32, m_s, jmax, h32, li_n, MT=MT)
                for e in range(rest + lane, n, g):
                    dst[at + e] = col2im1d_rows_value(oa + u32(e), cs, pt, r0, s32, m_s, jmax, h32, li_n, MT=MT)
                wp = pk.bitcast(dst + (at + head), Ptr[u64])
                first = oa + u32(head)
                pairs = s32 % 2 == 0  # col2im1d_rows_word_pairs' even first outputs: below
                for w in range(lane, full, g):
                    o = first + u32(w) * u32(ew)
                    if FAST and every_tap and o >= lo_all and o + u32(ew) <= hi_all:
                        if T.nbytes == 2:
                            if pairs:
                                wp[w] = col2im1d_rows_word_pairs(o, cs, pt - s32, bias, s32, m_s, h32, T=T, A=A,
                                                                 MT=MT, H=H)
                            else:
                                wp[w] = col2im1d_rows_word_full(o, cs, pt - s32, bias, s32, m_s, h32, T=T, A=A,
                                                                MT=MT, H=H)
                        else:
                            wp[w] = col2im1d_rows_word_full(o, cs, pt - s32, bias, s32, m_s, h32, T=T, A=A, MT=MT,
                                                            H=H)
                    else:
                        wp[w] = col2im1d_rows_word(o, cs, pt - s32, bias, s32, m_s, jmax, h32, li_n, T=T, A=A,
                                                   MT=MT, H=H)
        pk.syncthreads()
        item += u32(pk.grid_dim.x)


@pk.func
def col2im1d_rows_word_full(o0: u32, cs: Ptr[T], d: u32, bias: u32, s32: u32, m_s: u64, h32: u32, *, T, A, MT,
                            H) -> u64:
    """col2im1d_rows_word where every output of the word sums exactly MT taps (``k = MT * s``, the word
    inside the sequence: ``q - halo >= 0`` and ``q < l_in`` for each): no counts, no selects, and each
    next output's stage offset a step from the last (+1, and +d where ``q`` steps)."""
    q, j = div_mod(o0, s32, m_s)
    at = (q - h32) * d + o0 + bias  # output o0's tap of source row q - halo
    sums = pk.local.array(8 // T.nbytes, A)
    for e in pk.static_range(8 // T.nbytes):
        acc = A(0)
        for m in pk.static_range(MT):
            acc += A(cs[usize(at + u32(m) * d)])
        sums[e] = acc
        j += 1
        wrap = j == s32
        j = pk.select(wrap, u32(0), j)
        at += u32(1) + pk.select(wrap, d, u32(0))
    return col2im1d_rows_pack(sums, T=T, A=A, H=H)


@pk.func
def col2im1d_rows_word_pairs(o0: u32, cs: Ptr[T], d: u32, bias: u32, s32: u32, m_s: u64, h32: u32, *, T, A, MT,
                             H) -> u64:
    """col2im1d_rows_word_full for 16-bit T at an even stride and an even first output: outputs ``o``
    and ``o + 1`` (``o`` even) take their taps from adjacent stage elements of the same rows (their
    phases ``j``, ``j + 1`` share ``q``), at an even offset (the stage's pitch, ``c * k`` and ``d`` are
    even), so one 4-byte stage read gives both a tap: half the shared reads of 16-bit elements, the
    same sums in the same order. Every word's first output is even at an even stride: ``l_out = (l_in
    - 1 + MT) * s`` where every output sums MT taps, the items' first outputs are multiples of s, and
    a word starts at a multiple of 4 elements of an 8-byte aligned dst."""
    q, j = div_mod(o0, s32, m_s)
    at = (q - h32) * d + o0 + bias
    sums = pk.local.array(4, A)
    words = pk.bitcast(cs, Ptr[u32])
    for e in pk.static_range(2):
        lo = A(0)
        hi = A(0)
        for m in pk.static_range(MT):
            v = words[usize((at + u32(m) * d) // 2)]
            lo += A(pk.bitcast(H(v & u32(0xFFFF)), T))
            hi += A(pk.bitcast(H(v >> u32(16)), T))
        sums[2 * e] = lo
        sums[2 * e + 1] = hi
        j += 2
        wrap = j == s32
        j = pk.select(wrap, u32(0), j)
        at += u32(2) + pk.select(wrap, d, u32(0))
    return col2im1d_rows_pack(sums, T=T, A=A, H=H)


@pk.func
def col2im1d_rows_word(o0: u32, cs: Ptr[T], d: u32, bias: u32, s32: u32, m_s: u64, jmax: u32, h32: u32, li_n: u32,
                       *, T, A, MT, H) -> u64:
    """The 8-byte word of outputs ``o0 ...``: col2im1d_rows_value's sums, one division for the word
    (each next output's ``q, j`` by a step of ``j``), each tap's stage offset ``li * d + ol + bias``."""
    q, j = div_mod(o0, s32, m_s)
    sums = pk.local.array(8 // T.nbytes, A)
    for e in pk.static_range(8 // T.nbytes):
        ol = o0 + u32(e)
        lo = q + u32(j > jmax)
        first = lo - min(lo, h32)
        last = min(q + 1, li_n)
        acc = A(0)
        for m in pk.static_range(MT):
            li = first + u32(m)
            valid = li < last
            v = cs[usize(pk.select(valid, li * d + ol + bias, u32(0)))]
            acc += pk.select(valid, A(v), A(0))
        sums[e] = acc
        j += 1
        wrap = j == s32
        q += u32(wrap)
        j = pk.select(wrap, u32(0), j)
    return col2im1d_rows_pack(sums, T=T, A=A, H=H)


@pk.func
def col2im1d_rows_pack(sums: Ptr[A], *, T, A, H) -> u64:
    """The word's sums rounded to T once each (the only rounding of a 16-bit output's taps) and packed,
    16-bit values by 32-bit pairs."""
    word = u64(0)
    if T.nbytes == 2:
        for k in pk.static_range(0, 4, 2):
            pair = u32(pk.bitcast(T(sums[k]), H)) | (u32(pk.bitcast(T(sums[k + 1]), H)) << u32(16))
            word = word | (u64(pair) << u64(k * 16))
    else:
        for e in pk.static_range(8 // T.nbytes):
            word = word | (u64(pk.bitcast(T(sums[e]), H)) << u64(e * 8 * T.nbytes))
    return word


@pk.func
def col2im1d_rows_value(ol: u32, cs: Ptr[T], pt: u32, r0: u32, s32: u32, m_s: u64, jmax: u32, h32: u32, li_n: u32,
                        *, MT) -> T:
    """Output ``ol``'s sum over its taps (source rows li ascending, at most MT, past their count adding
    zero): ``li`` from ``q - halo`` (one more for phases ``j`` past ``(k - 1) % s``) to ``q``, within the
    source, where ``q, j = divmod(ol, s)``; channel ``cs``'s staged rows from r0 at pitch ``pt``."""
    q, j = div_mod(ol, s32, m_s)
    lo = q + u32(j > jmax)
    first = lo - min(lo, h32)
    last = min(q + 1, li_n)
    acc = T(0)
    for m in pk.static_range(MT):
        li = first + u32(m)
        valid = li < last
        v = cs[usize(pk.select(valid, (li - r0) * pt + (ol - li * s32), u32(0)))]
        acc += pk.select(valid, v, T(0))
    return acc


@pk.kernel(max_block_size=COLR_BLOCK, min_blocks_per_sm={"cuda": COLR_BLOCKS_PER_SM})
def col2im1d_rows_op(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                     src: ConstPtr[T], dst: Ptr[T], *, T, SB, L, MT, FAST, RB, WL):
    """The wrappers' own col2im1d (``col2im1d_rows_{T}``, candle's signature and semantics): the rows
    path alone, where its tile applies (``col2im1d_rows_tile``: at most MT taps an output, src's rows
    whole 8-byte words), src is 8-byte aligned and every size fits 31 bits (``col2im1d_rows_ok``, which
    the wrappers check before launching it); arguments outside that write nothing."""
    stage = pk.shared.array(SB // T.nbytes, T)
    tile = col2im1d_rows_tile(c_out, k_size, stride, usize(T.nbytes), usize(SB), usize(MT), usize(RB))
    if (tile != 0 and dst_el > 0 and pk.is_aligned(src, 8) and max(max(l_out, l_in), max(c_out, stride)) <= INDEX_31
            and l_out + stride + k_size <= INDEX_31 and l_in * c_out * k_size <= 0xFFFFFFFF
            and l_out == (l_in - 1) * stride + k_size and l_in > 0):
        if T.nbytes == 2 and MT <= 2:  # f32 sums rounded once: T's own sum of at most two taps, bit for bit
            col2im1d_rows(l_out, l_in, c_out, k_size, stride, dst_el // (c_out * l_out), src, dst, usize(u32(tile)),
                          usize(tile >> 32), stage, T=T, A=f32, L=L, MT=MT, H=u16, FAST=FAST, WL=WL)
        elif T.nbytes == 2:
            col2im1d_rows(l_out, l_in, c_out, k_size, stride, dst_el // (c_out * l_out), src, dst, usize(u32(tile)),
                          usize(tile >> 32), stage, T=T, A=T, L=L, MT=MT, H=u16, FAST=FAST, WL=WL)
        else:
            col2im1d_rows(l_out, l_in, c_out, k_size, stride, dst_el // (c_out * l_out), src, dst, usize(u32(tile)),
                          usize(tile >> 32), stage, T=T, A=T, L=L, MT=MT, H=u32, FAST=FAST, WL=WL)


@pk.func
def pool2d_loop(numel: usize, w_k: usize, h_k: usize, w_stride: usize, h_stride: usize, out2: usize, out3: usize,
                info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_3: u64, m_2: u64, m_c: u64, *, A, MAX, I):
    """One output a step: the window's mean (A sum, ``average``) or candle CPU's max fold (the first
    element, replaced by every later one it is less than: a NaN first element stays, later NaNs are
    skipped)."""
    o3n = I(out3)
    o2n = I(out2)
    cn = I(info[1])
    for i in pk.grid_stride(numel):
        r, o3 = div_mod(I(i), o3n, m_3)
        q, o2 = div_mod(r, o2n, m_2)
        b, c = div_mod(q, cn, m_c)
        s = src + (usize(b) * usize(I(info[4])) + usize(c) * usize(I(info[5]))
                   + usize(o2 * I(w_stride)) * usize(I(info[6])) + usize(o3 * I(h_stride)) * usize(I(info[7])))
        if MAX:
            largest = s[0]
            for a in range(w_k):
                for e in range(h_k):
                    v = s[a * info[6] + e * info[7]]
                    largest = pk.select(largest < v, v, largest)
            dst[i] = largest
        else:
            acc = A(0)
            for a in range(w_k):
                for e in range(h_k):
                    acc += A(s[a * info[6] + e * info[7]])
            dst[i] = T(average(acc, w_k * h_k))


#: the rows path of the pools and the upsamplings: a group of threads (a power of two, ``row_group``)
#: takes an output row (b, c, o2) at a time, each thread tiles of adjacent outputs along dim 3 (vector
#: stores); what each output position along a dim reads comes from tables in shared memory, filled
#: once a block (nearest: both dims; bilinear: dim 3), so no output pays for divisions or f64 index math
ROW_TABLE = 2048
#: rows a pool's thread takes at once, and upsample_nearest2d's (1 or 2)
POOL_ROWS = 1
NEAREST_ROWS = 1
BILINEAR_TABLE = 1024
#: ``bilinear_int_rows`` takes the elements of a word (16 / F bytes), at most this many, source rows a unit
#: (each row interpolated along w once for the output rows on both sides of it): more rows a unit share
#: more of that work but leave fewer units to spread over the grid (the sweep per factor and size:
#: docs/targets/cuda.md, conv)
BILINEAR_INT_UNIT_MAX = 4
#: ``upsample_bilinear2d_{F}x_*``'s blocks by (F, element size): (threads a block, blocks of them an SM the
#: CUDA compiler makes room for (0: as many as it likes), the wrappers' most blocks an SM). The 16-bit 2x
#: kernels fit a register bound without spills, and smaller blocks fill the SM more evenly; the 4x ones
#: spill under it and run best unbounded (the sweep: docs/targets/cuda.md, conv)
BILINEAR_INT_SHAPES = {(2, 4): (128, 0, 96), (2, 2): (64, 12, 96), (4, 4): (256, 0, 48), (4, 2): (256, 0, 48)}
#: 16-byte tiles of a row a thread of ``bilinear_rows`` is sized for: this many times the upscale along
#: w, as a power of two from 1 to 2**BILINEAR_ROW_TILES_MAX_LOG2 (``bilinear_row_tiles``; the kernels' ``RT``,
#: 0, takes the rule, a probe's fixed RT overrides it: docs/targets/cuda.md, ``benchmarks/bilinear_probe.py``)
BILINEAR_ROW_TILES_PER_SCALE = 4
BILINEAR_ROW_TILES_MAX_LOG2 = 4


@pk.func
def row_group(cols: usize, width: usize) -> usize:
    """Threads a row: the smallest power of two with a tile of ``width`` outputs each for ``cols``, at
    most the block."""
    nt = usize(pk.block_dim.x)
    tiles = (cols + width - 1) // width
    g = usize(1)
    while g < tiles and g * 2 <= nt:
        g *= 2
    return g


@pk.func
def pool_rows(w_k: usize, h_k: usize, w_stride: usize, h_stride: usize, out2: usize, out3: usize,
              info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, A, MAX, K2, K3, PAIR, W, H):
    """pool2d_loop for a window of K2 x K3 (compile-time) by rows: the same fold, in the same order.
    Lanes take adjacent outputs, one at a time (tiles of adjacent outputs a lane would spread a warp's
    loads over several times the lines), and POOL_ROWS rows at once: their windows' loads in flight together."""
    g = row_group(out3, usize(1))
    groups = usize(pk.block_dim.x) // g
    rows = info[0] * info[1] * out2
    first = usize(pk.block_idx.x) * groups
    t = usize(pk.thread_idx.x)
    grp = t // g
    if first >= rows or grp >= groups:
        return
    lane = t % g
    s6 = info[6]
    s7 = info[7]
    hs = h_stride * s7
    ws = w_stride * s6
    o2n = u32(out2)
    cn = u32(info[1])
    m_2 = divisor_magic(out2)
    m_c = divisor_magic(info[1])
    step = usize(pk.grid_dim.x) * groups
    if PAIR:  # contiguous rows, every window starting on a pair: read as words
        if (s7 == 1 and hs % 2 == 0 and ws % 2 == 0 and s6 % 2 == 0 and info[4] % 2 == 0 and info[5] % 2 == 0
                and pk.is_aligned(src, 2 * T.nbytes)):
            pool_rows_loop(first + grp, rows, step, lane, g, o2n, cn, m_2, m_c, ws, hs, s6, s7, out3, info, src, dst,
                           A=A, MAX=MAX, K2=K2, K3=K3, W=W, H=H, PAIRS=True)
            return
    pool_rows_loop(first + grp, rows, step, lane, g, o2n, cn, m_2, m_c, ws, hs, s6, s7, out3, info, src, dst, A=A,
                   MAX=MAX, K2=K2, K3=K3, W=W, H=H, PAIRS=False)


@pk.func
def pool_rows_vec(w_stride: usize, out2: usize, out3: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *,
                  A, MAX, W, H):
    """A 2x2 pool with stride 2 along dim 3 over rows contiguous along it, every window on a pair
    (``pool_rows``' PAIRS case with adjacent windows): output ``e`` of a row reads word ``e`` of each
    of its two source rows, so the row is a plain ``parallel_range`` whose tiles are vector accesses,
    16 bytes of output a lane (32 of each source row) where a lane took one output before."""
    vec_rows(out2, w_stride, out3, info, src, dst, T=T, A=A, P=MAX, W=W, H=H, ROW=pool_vec_row, UNIT=1, LANE=16 // T.nbytes)


@pk.func
def vec_rows(n2: usize, step2: usize, cols: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *,
             T, A, P, W, H, ROW, UNIT, LANE):
    """The row loop shared by ``pool_rows_vec``, ``nearest_int_rows`` and ``bilinear_int_rows``: groups of
    lanes (``row_group``, 16-byte tiles of ``cols``) take the units ``(b, c, i2)`` of a plane in turn,
    UNIT rows ``i2 * UNIT ...`` of its ``n2`` a unit, the unit's first source row at ``i2 * UNIT * step2
    * info[6]``, and ``ROW`` does a unit's tiles (the divisions by multiplication, once a thread). ``P`` is
    the row function's own choice (the pools' MAX, the upsamplings' factor)."""
    g = row_group(cols, usize(LANE))
    groups = usize(pk.block_dim.x) // g
    units = (n2 + usize(UNIT - 1)) // usize(UNIT)
    rows = info[0] * info[1] * units
    t = usize(pk.thread_idx.x)
    grp = t // g
    first = usize(pk.block_idx.x) * groups + grp
    if first >= rows or grp >= groups:
        return
    lane = t % g
    s6 = info[6]
    pitch2 = usize(UNIT) * step2 * s6
    n2u = u32(units)
    cn = u32(info[1])
    m_2 = divisor_magic(units)
    m_c = divisor_magic(info[1])
    for row in range(first, rows, usize(pk.grid_dim.x) * groups):
        q, i2 = div_mod(u32(row), n2u, m_2)  # b * c, and the unit along dim 2
        b, c = div_mod(q, cn, m_c)
        s = src + (usize(b) * info[4] + usize(c) * info[5] + usize(i2) * pitch2)
        ROW(row, q, i2, s, lane, g, n2, cols, s6, dst, T=T, A=A, P=P, W=W, H=H)


@pk.func
def pool_vec_row(row: usize, q: u32, o2: u32, s: ConstPtr[T], lane: usize, g: usize, out2: usize, out3: usize,
                 s6: usize, dst: Ptr[T], *, T, A, P, W, H):
    """``pool_rows_vec``'s row: output ``e`` from word ``e`` of source rows ``s`` and ``s + s6``."""
    ra = pk.bitcast(s, ConstPtr[W])
    rb = pk.bitcast(s + s6, ConstPtr[W])
    o = dst + row * out3
    for e in pk.parallel_range(usize(0), out3, lane, g):
        o[e] = pool_words(ra[e], rb[e], T=T, A=A, MAX=P, W=W, H=H)


@pk.func
def pool_words(wa: W, wb: W, *, T, A, MAX, W, H) -> T:
    """pool_window_pairs on a 2x2 window already loaded as two words (its rows), in the same order."""
    a0 = pk.bitcast(H(wa), T)
    a1 = pk.bitcast(H(wa >> W(8 * T.nbytes)), T)
    b0 = pk.bitcast(H(wb), T)
    b1 = pk.bitcast(H(wb >> W(8 * T.nbytes)), T)
    if MAX:
        largest = a0
        largest = pk.select(largest < a0, a0, largest)
        largest = pk.select(largest < a1, a1, largest)
        largest = pk.select(largest < b0, b0, largest)
        return pk.select(largest < b1, b1, largest)
    else:
        acc = A(0)
        acc += A(a0)
        acc += A(a1)
        acc += A(b0)
        acc += A(b1)
        return T(average(acc, usize(4)))


@pk.func
def pool_rows_loop(first: usize, rows: usize, step: usize, lane: usize, g: usize, o2n: u32, cn: u32, m_2: u64,
                   m_c: u64, ws: usize, hs: usize, s6: usize, s7: usize, out3: usize, info: ConstPtr[usize],
                   src: ConstPtr[T], dst: Ptr[T], *, A, MAX, K2, K3, W, H, PAIRS):
    """pool_rows' loop; with PAIRS, each window row's two elements are read as one word of type W."""
    base = pk.local.array(POOL_ROWS, usize)
    out = pk.local.array(POOL_ROWS, usize)
    v = pk.local.array(POOL_ROWS, T)
    for row0 in range(first, rows, step * POOL_ROWS):
        for u in pk.static_range(POOL_ROWS):
            row = min(row0 + step * u, rows - 1)  # past the last row: read the last row, store nothing
            q, o2 = div_mod(u32(row), o2n, m_2)
            b, c = div_mod(q, cn, m_c)
            base[u] = usize(b) * info[4] + usize(c) * info[5] + usize(o2) * ws
            out[u] = row * out3
        for e in range(lane, out3, g):
            for u in pk.static_range(POOL_ROWS):
                if PAIRS:
                    v[u] = pool_window_pairs(src + (base[u] + e * hs), s6, A=A, MAX=MAX, K2=K2, W=W, H=H)
                else:
                    v[u] = pool_window(src + (base[u] + e * hs), s6, s7, A=A, MAX=MAX, K2=K2, K3=K3)
            for u in pk.static_range(POOL_ROWS):
                if u == 0 or row0 + step * u < rows:
                    dst[out[u] + e] = v[u]


@pk.func
def pool_window_pairs(s: ConstPtr[T], s6: usize, *, A, MAX, K2, W, H) -> T:
    """pool_window for K3 == 2 with adjacent elements along dim 3 read as one word (``s`` aligned to two)."""
    largest = s[0]
    acc = A(0)
    for a in pk.static_range(K2):
        w = pk.bitcast(s + usize(a) * s6, ConstPtr[W])[0]
        lo = pk.bitcast(H(w), T)
        hi = pk.bitcast(H(w >> W(8 * T.nbytes)), T)
        if MAX:
            largest = pk.select(largest < lo, lo, largest)
            largest = pk.select(largest < hi, hi, largest)
        else:
            acc += A(lo)
            acc += A(hi)
    if MAX:
        return largest
    else:
        return T(average(acc, usize(K2 * 2)))


@pk.func
def pool_window(s: ConstPtr[T], s6: usize, s7: usize, *, A, MAX, K2, K3) -> T:
    """One K2 x K3 window at ``s``: candle CPU's max fold or the mean (pool2d_loop's, in its order)."""
    if MAX:
        largest = s[0]
        for a in pk.static_range(K2):
            for k in pk.static_range(K3):
                v = s[usize(a) * s6 + usize(k) * s7]
                largest = pk.select(largest < v, v, largest)
        return largest
    else:
        acc = A(0)
        for a in pk.static_range(K2):
            for k in pk.static_range(K3):
                acc += A(s[usize(a) * s6 + usize(k) * s7])
        return T(average(acc, usize(K2 * K3)))


@pk.func
def nearest_rows(w_out: usize, h_out: usize, w_scale: f64, h_scale: f64, info: ConstPtr[usize], src: ConstPtr[T],
                 dst: Ptr[T], tab2: Ptr[u32], tab3: Ptr[u32]):
    """nearest_loop by rows (u32 indices): the source offsets along dims 2 and 3 from tables."""
    g = row_group(h_out, usize(16 // T.nbytes))
    nt = usize(pk.block_dim.x)
    groups = nt // g
    rows = info[0] * info[1] * w_out
    first = usize(pk.block_idx.x) * groups
    if first >= rows:  # the whole block idle (before its barrier)
        return
    t = usize(pk.thread_idx.x)
    for j in range(t, w_out, nt):
        tab2[j] = min(u32(f64(u32(j)) * w_scale), u32(info[2]) - 1) * u32(info[6])
    for j in range(t, h_out, nt):
        tab3[j] = min(u32(f64(u32(j)) * h_scale), u32(info[3]) - 1) * u32(info[7])
    pk.syncthreads()
    grp = t // g
    if grp >= groups:
        return
    lane = t % g
    wo = u32(w_out)
    cn = u32(info[1])
    m_w = divisor_magic(w_out)
    m_c = divisor_magic(info[1])
    step = usize(pk.grid_dim.x) * groups
    for row in range(first + grp, rows, step * NEAREST_ROWS):
        q, o2 = div_mod(u32(row), wo, m_w)
        b, ch = div_mod(q, cn, m_c)
        base = usize(b) * info[4] + usize(ch) * info[5] + usize(tab2[o2])
        out = dst + row * h_out
        if NEAREST_ROWS == 1:
            for e in pk.parallel_range(usize(0), h_out, lane, g):
                out[e] = src[base + usize(tab3[e])]
        else:  # two rows at once: their loads in flight together (past the last row: the last row again)
            row_b = min(row + step, rows - 1)
            q, o2 = div_mod(u32(row_b), wo, m_w)
            b, ch = div_mod(q, cn, m_c)
            base_b = usize(b) * info[4] + usize(ch) * info[5] + usize(tab2[o2])
            out_b = dst + row_b * h_out
            for e in pk.parallel_range(usize(0), h_out, lane, g):
                c = usize(tab3[e])
                va = src[base + c]
                vb = src[base_b + c]
                out[e] = va
                out_b[e] = vb


@pk.func
def nearest_int_rows(info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], words: bool, *, F):
    """nearest_rows for an upsampling by an integer factor F (2 or 4; ``w_scale == h_scale == 1 / F``:
    output (o2, o3) reads (o2 // F, o3 // F)) of rows contiguous along dim 3: a group of lanes takes a
    source row. With ``words`` (rows and offsets whole words of 16 / F bytes, dst 16-byte aligned; F 4
    and elements of at most 4 bytes), each lane a word of it at a time, whose outputs make one 16-byte
    store an output row (``nearest_word_row``: a warp's stores adjacent); else each lane a 16-byte tile of
    it (one vector load), every element stored F times as words of up to 8 bytes (``nearest_int_word``)
    to each of the F output rows it feeds (``nearest_int_row``). No tables, no per-output index
    arithmetic, each source element read once. The row functions get F as vec_rows' ``P``."""
    if F == 4 and T.nbytes <= 4 and words:
        vec_rows(info[2], usize(1), info[3], info, src, dst, T=T, A=T, P=F, W=u32, H=UINT_OF_SIZE[T.nbytes],
                 ROW=nearest_word_row, UNIT=1, LANE=4 // T.nbytes)
    else:
        vec_rows(info[2], usize(1), info[3], info, src, dst, T=T, A=T, P=F, W=UINT_OF_SIZE[min(F * T.nbytes, 8)],
                 H=UINT_OF_SIZE[T.nbytes], ROW=nearest_int_row, UNIT=1, LANE=16 // T.nbytes)


@pk.func
def nearest_int_row(row: usize, q: u32, s2: u32, s: ConstPtr[T], lane: usize, g: usize, in2: usize, in3: usize,
                    s6: usize, dst: Ptr[T], *, T, A, P, W, H):
    """``nearest_int_rows``' source row ``s`` by tiles: its P output rows, one ``parallel_range`` each;
    element e becomes P // (W.nbytes // H.nbytes) words ``e * words + k`` of the row (each the element
    W.nbytes // H.nbytes times)."""
    out3 = usize(P) * in3
    o = dst + (usize(q) * in2 + usize(s2)) * usize(P) * out3
    for u in pk.static_range(P):  # a loop per output row: one row's stores merge into vectors
        wo = pk.bitcast(o + usize(u) * out3, Ptr[W])
        for e in pk.parallel_range(usize(0), in3, lane, g):
            x = nearest_int_word(s[e], T=T, W=W, H=H)
            for k in pk.static_range(P * H.nbytes // W.nbytes):
                wo[e * usize(P * H.nbytes // W.nbytes) + k] = x


@pk.func
def nearest_word_row(row: usize, q: u32, s2: u32, s: ConstPtr[T], lane: usize, g: usize, in2: usize, in3: usize,
                     s6: usize, dst: Ptr[T], *, T, A, P, W, H):
    """``nearest_int_rows``' source row ``s`` by words: lane ``lane`` takes words ``lane, lane + g, ...`` (of
    16 / P bytes), each stored to every output row as 16 bytes (output i of them from the word's element
    i // P), so a warp's stores are adjacent 16-byte words (with tiles of the source, 64 bytes apart at
    4x: a quarter of each store's sectors, half of each L2 sector a write, which cost the 4x case reads
    of its output and half its speed; docs/targets/cuda.md). Indices along the row in u32."""
    out3 = usize(P) * in3
    o = dst + (usize(q) * in2 + usize(s2)) * usize(P) * out3
    sw = pk.bitcast(s, ConstPtr[W])
    for wd in range(u32(lane), u32(in3) // u32(W.nbytes // T.nbytes), u32(g)):
        word = sw[usize(wd)]
        for u in pk.static_range(P):
            out = pk.assume_aligned(pk.bitcast(o + (usize(u) * out3 + usize(wd) * usize(16 // T.nbytes)), Ptr[u64]), 16)
            for half in pk.static_range(2):
                packed = u64(0)
                for i in pk.static_range(8 // T.nbytes):
                    at = (half * (8 // T.nbytes) + i) // P
                    packed = packed | (u64(H(word >> W(8 * T.nbytes * at))) << u64(8 * T.nbytes * i))
                out[half] = packed


@pk.func
def nearest_int_word(v: T, *, T, W, H) -> W:
    """``v``'s bits (as H, the unsigned integer of T's size) repeated over a word of type W."""
    x = W(pk.bitcast(v, H))
    for k in pk.static_range(1, W.nbytes // H.nbytes):
        x = x | (W(pk.bitcast(v, H)) << W(8 * H.nbytes * k))
    return x


@pk.func
def bilinear_int_rows(info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, H, F):
    """bilinear_rows for an upsampling by an integer factor F (2 or 4; ``scale_h == scale_w == 1 / F``,
    half-pixel centres) of rows contiguous along w in whole words of 16 / F bytes: ``vec_rows`` gives a
    group of lanes a unit of source rows (as many as a word has elements, at most BILINEAR_INT_UNIT_MAX),
    each lane a word of them at a time (``bilinear_int_row``), whose F outputs an element along w make 16
    bytes. At that scale every
    output's two columns and weight follow from its index (column ``F k + c`` from ``k - 1, k`` at
    ``(c + 0.5) / F + 0.5`` for ``c < F / 2``, else from ``k, k + 1`` at ``(c + 0.5) / F - 0.5``; the
    first and last clamp as ``bilinear_source`` does), so a word's outputs come from the word and its
    two neighbours, without tables or gathers, and each source row is interpolated along w once for the
    output rows on both sides of it. F reaches the row as vec_rows' ``P``."""
    if F == 2:
        vec_rows(info[2], usize(1), info[3], info, src, dst, T=T, A=f64, P=F, W=u64, H=H, ROW=bilinear_int_row,
                 UNIT=min(16 // F // T.nbytes, BILINEAR_INT_UNIT_MAX), LANE=16 // T.nbytes)
    else:
        vec_rows(info[2], usize(1), info[3], info, src, dst, T=T, A=f64, P=F, W=u32, H=H, ROW=bilinear_int_row,
                 UNIT=min(16 // F // T.nbytes, BILINEAR_INT_UNIT_MAX), LANE=16 // T.nbytes)


@pk.func
def bilinear_int_row(row: usize, q: u32, i2: u32, s: ConstPtr[T], lane: usize, g: usize, h_in: usize, w_in: usize,
                     s6: usize, dst: Ptr[T], *, T, A, P, W, H):
    """At the factor F (``P``), source rows ``u = i2 * unit ...`` (below ``h_in``) of plane ``q``, a word of
    each at a time, the row after next loaded while a row's outputs are made: with ``u``'s interpolation along w (``top``)
    and ``u + 1``'s (``bottom``, the last row's own), output rows ``F u + F / 2 + j`` (``lh`` ``(j +
    0.5) / F``; those from ``F (u + 1)`` on only below ``F h_in``) and, for ``u`` 0, rows ``0 ... F / 2
    - 1`` (0), each ``(1 - lh) * top + lh * bottom``; then ``bottom`` is the next ``top``. Those ``lh``
    are bilinear_source's at scale ``1 / F`` (``(oh + 0.5) / F - 0.5``, clamped at 0, less its floor),
    exactly; the arithmetic is bilinear_loop's, in its order. Each output row's 16 bytes are one store
    (dst 16-byte aligned: ``bilinear_int``). Indices along the row in u32."""
    w_out = usize(P) * w_in
    plane = dst + usize(q) * usize(P) * h_in * w_out
    unit = u32(min(W.nbytes // T.nbytes, BILINEAR_INT_UNIT_MAX))  # vec_rows' UNIT
    u0 = i2 * unit
    h32 = u32(h_in)
    w32 = u32(w_in)
    for wd in range(u32(lane), w32 // u32(W.nbytes // T.nbytes), u32(g)):
        k0 = wd * u32(W.nbytes // T.nbytes)
        top = pk.local.array(16 // T.nbytes, f64)
        bottom = pk.local.array(16 // T.nbytes, f64)
        word, left, right = bilinear_int_load(s, wd, k0, w32, W=W)
        bilinear_int_along_w(word, left, right, k0, top, T=T, H=H, W=W, F=P)
        word, left, right = bilinear_int_load(s + usize(min(u0 + 1, h32 - 1) - u0) * s6, wd, k0, w32, W=W)
        for u in range(u0, min(u0 + unit, h32)):
            # the row after next in flight while this one's outputs are made
            ahead = bilinear_int_load(s + usize(min(u + 2, h32 - 1) - u0) * s6, wd, k0, w32, W=W)
            bilinear_int_along_w(word, left, right, k0, bottom, T=T, H=H, W=W, F=P)
            # slots below P / 2: the first rows (weight 0), then rows P u + slot, at weight (j + 0.5) / P
            # for j = slot - P / 2; those from P (u + 1) on only below the last
            for slot in pk.static_range(P // 2 + P):
                if (slot < P // 2 and u == u32(0)) or (P // 2 <= slot < P) or (slot >= P and u + 1 < h32):
                    oh = pk.select(slot < P // 2, u32(slot), u32(P) * u + u32(slot))
                    lh = pk.select(slot < P // 2, f64(0.0), f64(2 * slot - P + 1) / f64(2 * P))
                    out = pk.assume_aligned(pk.bitcast(plane + (usize(oh) * w_out + usize(u32(P) * k0)),
                                                       Ptr[u64]), 16)
                    for half in pk.static_range(2):
                        packed = u64(0)
                        for i in pk.static_range(8 // T.nbytes):
                            at = half * (8 // T.nbytes) + i
                            v = T((1.0 - lh) * top[at] + lh * bottom[at])
                            packed = packed | (u64(pk.bitcast(v, H)) << u64(8 * T.nbytes * i))
                        out[half] = packed
            for j in pk.static_range(16 // T.nbytes):
                top[j] = bottom[j]
            word, left, right = ahead


@pk.func
def bilinear_int_load(row: ConstPtr[T], wd: u32, k0: u32, w_in: u32, *, W) -> tuple[W, T, T]:
    """Word ``wd`` of a source row and its neighbours ``k0 - 1`` and ``k0 + per`` (clamped; at ``k0`` 0
    the first element again, which ``bilinear_int_along_w`` does not use)."""
    return (pk.bitcast(row, ConstPtr[W])[usize(wd)], row[usize(k0 - pk.select(k0 > 0, u32(1), u32(0)))],
            row[usize(min(k0 + u32(W.nbytes // T.nbytes), w_in - 1))])


@pk.func
def bilinear_int_along_w(word: W, left: T, right: T, k0: u32, out: Ptr[f64], *, T, H, W, F):
    """A source row's interpolation along w at output columns ``F k0 ... F (k0 + per) - 1`` (F is
    ``16 // W.nbytes``): elements ``k0 ...`` from ``word``, their neighbours ``k0 - 1`` (``left``) and ``k0 +
    per`` (``right``, clamped)."""
    v = pk.local.array(W.nbytes // T.nbytes + 2, f64)
    v[0] = f64(left)
    for i in pk.static_range(W.nbytes // T.nbytes):
        v[i + 1] = f64(pk.bitcast(H(word >> W(8 * T.nbytes * i)), T))
    v[W.nbytes // T.nbytes + 1] = f64(right)
    for i in pk.static_range(W.nbytes // T.nbytes):
        for c in pk.static_range(F):
            if c < F // 2:  # from k - 1, k: at k0 = 0 the source clamps to 0 (columns 0, 1, weight 0)
                lw = f64(2 * c + 1) / f64(2 * F) + 0.5
                if i == 0:
                    edge = k0 == 0
                    lw0 = pk.select(edge, f64(0.0), lw)
                    out[c] = (1.0 - lw0) * pk.select(edge, v[1], v[0]) + lw0 * pk.select(edge, v[2], v[1])
                else:
                    out[F * i + c] = (1.0 - lw) * v[i] + lw * v[i + 1]
            else:
                lw = f64(2 * c + 1) / f64(2 * F) - 0.5
                out[F * i + c] = (1.0 - lw) * v[i + 1] + lw * v[i + 2]


@pk.func
def bilinear_row_tiles(w_in: usize, w_out: usize) -> usize:
    """Tiles a thread of ``bilinear_rows`` takes along a row: the more outputs a source element feeds,
    the more of them a thread's row setup should serve (measured: a downscale by 2 best at 2 tiles, a
    1.5x upscale at 4, 2x at 8, 4x at 16), the fewer, the more threads a row for the loads in flight."""
    scaled = usize(BILINEAR_ROW_TILES_PER_SCALE) * w_out  # rt * w_in <= scaled: no division
    rt = usize(1)
    for k in pk.static_range(1, BILINEAR_ROW_TILES_MAX_LOG2 + 1):
        rt = pk.select((1 << k) * w_in <= scaled, usize(1 << k), rt)
    return rt


@pk.func
def bilinear_rows(w_out: usize, h_out: usize, align_corners: bool, scale_h: f64, scale_w: f64,
                  info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], t0: Ptr[u32], t1: Ptr[u32], tl: Ptr[f64], *,
                  RT):
    """bilinear_loop by rows (u32 indices): each column's two source offsets and weight from tables,
    each row's once a row; the same f64 arithmetic in the same order. A row's group of threads is
    sized for ``bilinear_row_tiles`` 16-byte tiles a thread (RT, when not 0), over which a thread's
    share of the row setup spreads."""
    if RT:
        rt = usize(RT)
    else:
        rt = bilinear_row_tiles(info[3], w_out)
    g = row_group(w_out, rt * usize(16 // T.nbytes))
    nt = usize(pk.block_dim.x)
    groups = nt // g
    rows = info[0] * info[1] * h_out
    first = usize(pk.block_idx.x) * groups
    if first >= rows:  # the whole block idle (before its barrier)
        return
    t = usize(pk.thread_idx.x)
    h_in = u32(info[2])
    w_in = u32(info[3])
    for j in range(t, w_out, nt):
        wr = bilinear_source(u32(j), scale_w, align_corners)
        w0 = min(u32(wr), w_in - 1)
        t0[j] = w0 * u32(info[7])
        t1[j] = min(w0 + 1, w_in - 1) * u32(info[7])
        tl[j] = min(max(wr - f64(w0), 0.0), 1.0)
    pk.syncthreads()
    grp = t // g
    if grp >= groups:
        return
    lane = t % g
    ho = u32(h_out)
    cn = u32(info[1])
    m_h = divisor_magic(h_out)
    m_c = divisor_magic(info[1])
    for row in range(first + grp, rows, usize(pk.grid_dim.x) * groups):
        q, oh = div_mod(u32(row), ho, m_h)
        b, c = div_mod(q, cn, m_c)
        base = usize(b) * info[4] + usize(c) * info[5]
        hr = bilinear_source(oh, scale_h, align_corners)
        h0 = min(u32(hr), h_in - 1)
        h1 = min(h0 + 1, h_in - 1)
        lh = min(max(hr - f64(h0), 0.0), 1.0)
        r0 = base + usize(h0) * info[6]
        r1 = base + usize(h1) * info[6]
        out = dst + row * w_out
        for e in pk.parallel_range(usize(0), w_out, lane, g):
            out[e] = bilinear_point(src, r0, r1, usize(t0[e]), usize(t1[e]), tl[e], lh)


@pk.func
def bilinear_point(src: ConstPtr[T], r0: usize, r1: usize, a0: usize, a1: usize, lw: f64, lh: f64) -> T:
    """bilinear_loop's interpolation of one output (rows r0, r1; columns a0, a1), in f64."""
    return bilinear_weights(f64(src[r0 + a0]), f64(src[r0 + a1]), f64(src[r1 + a0]), f64(src[r1 + a1]), lw, lh, T=T)


@pk.func
def bilinear_weights(v00: f64, v01: f64, v10: f64, v11: f64, lw: f64, lh: f64, *, T) -> T:
    """PyTorch's interpolation of a 2x2 window (rows 0, 1; columns 0, 1) at weights lw, lh, in f64,
    rounded once to T: along w, then along h."""
    top = (1.0 - lw) * v00 + lw * v01
    bottom = (1.0 - lw) * v10 + lw * v11
    return T((1.0 - lh) * top + lh * bottom)


@pk.func
def bilinear_down2x_rows(h_out: usize, w_out: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T]):
    """bilinear_rows for a downscale by exactly 2 with half-pixel centres (both scales 2, the source twice
    the output, rows contiguous along w in whole pairs of elements): output (oh, ow) sits at source
    (2 oh + 0.5, 2 ow + 0.5), so it interpolates the 2x2 window at (2 oh, 2 ow) with weights 0.5: an
    average pool's window, read as the pools' vector rows read theirs (``vec_rows``, a pair of elements a
    word, ``bilinear_down2x_row``), where each output's four gathers held the rows kernel to half the
    bandwidth in 16-bit types. The arithmetic is ``bilinear_point``'s, in its order (bit-identical)."""
    vec_rows(h_out, usize(2), w_out, info, src, dst, T=T, A=f64, P=0, W=UINT_OF_SIZE[2 * T.nbytes],
             H=UINT_OF_SIZE[T.nbytes], ROW=bilinear_down2x_row, UNIT=1, LANE=16 // T.nbytes)


@pk.func
def bilinear_down2x_row(row: usize, q: u32, o2: u32, s: ConstPtr[T], lane: usize, g: usize, out2: usize, out3: usize,
                      s6: usize, dst: Ptr[T], *, T, A, P, W, H):
    """``bilinear_down2x_rows``' output row ``row``: output ``e`` from word ``e`` of source rows ``s`` and
    ``s + s6``."""
    ra = pk.bitcast(s, ConstPtr[W])
    rb = pk.bitcast(s + s6, ConstPtr[W])
    o = dst + row * out3
    for e in pk.parallel_range(usize(0), out3, lane, g):
        wa = ra[e]
        wb = rb[e]
        o[e] = bilinear_weights(f64(pk.bitcast(H(wa), T)), f64(pk.bitcast(H(wa >> W(8 * T.nbytes)), T)),
                                f64(pk.bitcast(H(wb), T)), f64(pk.bitcast(H(wb >> W(8 * T.nbytes)), T)),
                                0.5, 0.5, T=T)


@pk.kernel
def pool2d_op(src_numel: usize, w_k: usize, h_k: usize, w_stride: usize, h_stride: usize, info: ConstPtr[usize],
              src: ConstPtr[T], dst: Ptr[T], *, T, A, MAX, NARROW):
    """avg_pool2d (``MAX`` false) and max_pool2d: candle's "w" is dim 2, "h" dim 3."""
    out2 = pool_extent(info[2], w_k, w_stride)
    out3 = pool_extent(info[3], h_k, h_stride)
    numel = info[0] * info[1] * out2 * out3
    if numel <= NARROW and small_layout(info, usize(8)) and max(w_stride, h_stride) <= INDEX_31:
        if w_k == 2 and h_k == 2:
            adjacent = (h_stride == 2 and info[7] == 1 and info[6] % 2 == 0 and info[4] % 2 == 0 and info[5] % 2 == 0
                        and pk.is_aligned(src, 2 * T.nbytes))
            if T.nbytes == 2:
                if adjacent:
                    pool_rows_vec(w_stride, out2, out3, info, src, dst, A=A, MAX=MAX, W=u32, H=u16)
                    return
            elif T.nbytes == 4:
                if adjacent:
                    pool_rows_vec(w_stride, out2, out3, info, src, dst, A=A, MAX=MAX, W=u64, H=u32)
                    return
            if T.nbytes == 2:
                pool_rows(w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, A=A, MAX=MAX, K2=2, K3=2,
                          PAIR=True, W=u32, H=u16)
            elif T.nbytes == 4:
                pool_rows(w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, A=A, MAX=MAX, K2=2, K3=2,
                          PAIR=True, W=u64, H=u32)
            else:
                pool_rows(w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, A=A, MAX=MAX, K2=2, K3=2,
                          PAIR=False, W=u32, H=u16)
            return
        if w_k == 3 and h_k == 3:
            pool_rows(w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, A=A, MAX=MAX, K2=3, K3=3, PAIR=False,
                      W=u32, H=u16)
            return
        pool2d_loop(numel, w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, divisor_magic(out3),
                    divisor_magic(out2), divisor_magic(info[1]), A=A, MAX=MAX, I=u32)
    else:
        pool2d_loop(numel, w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, u64(0), u64(0), u64(0), A=A,
                    MAX=MAX, I=usize)


#: the wrappers' block for the pools and upsamplings (``rows_launch``), and the largest block of their own
#: row kernels: under it ptxas sizes their registers for several blocks an SM, not for one of 1024
ROW_BLOCK = 256


@pk.kernel(max_block_size=ROW_BLOCK)
def pool2d_vec_op(src_numel: usize, w_k: usize, h_k: usize, w_stride: usize, h_stride: usize, info: ConstPtr[usize],
                  src: ConstPtr[T], dst: Ptr[T], *, T, A, MAX, NARROW):
    """The wrappers' own 2x2 pools with stride 2 along dim 3 (``max_pool2d_vec_{T}``, ``avg_pool2d_vec_{T}``,
    candle's signature and semantics): ``pool_rows_vec`` alone. pool2d_op's other paths set its registers
    (sm_90: 64, four blocks of 256 an SM); this path alone, in blocks of at most ROW_BLOCK, takes 32-40,
    so six to eight blocks an SM keep more loads in flight (``docs/targets/cuda.md``). Its domain is pool2d_op's test for that path,
    repeated here and on the host (``pool_vec_ok``, which the wrappers check before launching it);
    arguments outside it write nothing."""
    out2 = pool_extent(info[2], w_k, w_stride)
    out3 = pool_extent(info[3], h_k, h_stride)
    if (info[0] * info[1] * out2 * out3 <= NARROW and small_layout(info, usize(8))
            and max(w_stride, h_stride) <= INDEX_31 and w_k == 2 and h_k == 2 and h_stride == 2 and info[7] == 1
            and info[6] % 2 == 0 and info[4] % 2 == 0 and info[5] % 2 == 0 and pk.is_aligned(src, 2 * T.nbytes)):
        if T.nbytes == 2:
            pool_rows_vec(w_stride, out2, out3, info, src, dst, A=A, MAX=MAX, W=u32, H=u16)
        else:
            pool_rows_vec(w_stride, out2, out3, info, src, dst, A=A, MAX=MAX, W=u64, H=u32)


@pk.func
def nearest_loop(numel: usize, w_out: usize, h_out: usize, w_scale: f64, h_scale: f64, info: ConstPtr[usize],
                 src: ConstPtr[T], dst: Ptr[T], m_h: u64, m_w: u64, m_c: u64, *, I):
    ho = I(h_out)
    wo = I(w_out)
    cn = I(info[1])
    for i in pk.grid_stride(numel):
        r, o3 = div_mod(I(i), ho, m_h)
        q, o2 = div_mod(r, wo, m_w)
        b, c = div_mod(q, cn, m_c)
        s2 = min(I(f64(o2) * w_scale), I(info[2]) - 1)
        s3 = min(I(f64(o3) * h_scale), I(info[3]) - 1)
        dst[i] = src[usize(b) * usize(I(info[4])) + usize(c) * usize(I(info[5])) + usize(s2) * usize(I(info[6]))
                     + usize(s3) * usize(I(info[7]))]


@pk.kernel(moves=("T",))
def upsample_nearest2d_op(w_out: usize, h_out: usize, w_scale: f64, h_scale: f64, info: ConstPtr[usize],
                          src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    """candle's "w" is dim 2: source ``min(floor(o * scale), in - 1)`` along dims 2 and 3."""
    numel = info[0] * info[1] * w_out * h_out
    if info[2] == 0 or info[3] == 0:  # nothing to read (the wrapper refuses this)
        return
    tab2 = pk.shared.array(ROW_TABLE, u32)
    tab3 = pk.shared.array(ROW_TABLE, u32)
    if numel <= NARROW and small_layout(info, usize(8)) and info[7] == 1 and info[2] * info[6] <= INDEX_31:
        for f in pk.static_range(2, 5, 2):  # NEAREST_INT_FACTORS
            if w_out == f * info[2] and h_out == f * info[3] and w_scale == 1.0 / f and h_scale == 1.0 / f:
                words = (T.nbytes * (info[3] | info[4] | info[5] | info[6]) % (16 // f) == 0
                         and pk.is_aligned(src, 16 // f) and pk.is_aligned(dst, 16))
                nearest_int_rows(info, src, dst, words, F=f)
                return
    if (numel <= NARROW and small_layout(info, usize(8)) and max(w_out, h_out) <= ROW_TABLE
            and info[2] * info[6] <= INDEX_31 and info[3] * info[7] <= INDEX_31):
        nearest_rows(w_out, h_out, w_scale, h_scale, info, src, dst, tab2, tab3)
        return
    if numel <= NARROW and small_layout(info, usize(8)):
        nearest_loop(numel, w_out, h_out, w_scale, h_scale, info, src, dst, divisor_magic(h_out), divisor_magic(w_out),
                     divisor_magic(info[1]), I=u32)
    else:
        nearest_loop(numel, w_out, h_out, w_scale, h_scale, info, src, dst, u64(0), u64(0), u64(0), I=usize)


@pk.func
def bilinear_loop(numel: usize, w_out: usize, h_out: usize, align_corners: bool, scale_h: f64, scale_w: f64,
                  info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_w: u64, m_h: u64, m_c: u64, *, I):
    """PyTorch's interpolation in f64. A plain strided loop, one output a thread a step: an output
    gathers four inputs, so a grid-stride tile of several outputs gains no vector access and its staged
    copies spill registers."""
    h_in = I(info[2])
    w_in = I(info[3])
    wo = I(w_out)
    ho = I(h_out)
    cn = I(info[1])
    sh = usize(I(info[6]))
    sw = usize(I(info[7]))
    for i in range(pk.global_id(), numel, usize(pk.grid_dim.x) * usize(pk.block_dim.x)):
        r, ow = div_mod(I(i), wo, m_w)
        q, oh = div_mod(r, ho, m_h)
        b, c = div_mod(q, cn, m_c)
        s = src + usize(b) * usize(I(info[4])) + usize(c) * usize(I(info[5]))
        hr = bilinear_source(oh, scale_h, align_corners)
        wr = bilinear_source(ow, scale_w, align_corners)
        h0 = min(I(hr), h_in - 1)
        w0 = min(I(wr), w_in - 1)
        h1 = min(h0 + 1, h_in - 1)
        w1 = min(w0 + 1, w_in - 1)
        lh = min(max(hr - f64(h0), 0.0), 1.0)
        lw = min(max(wr - f64(w0), 0.0), 1.0)
        v00 = f64(s[usize(h0) * sh + usize(w0) * sw])
        v01 = f64(s[usize(h0) * sh + usize(w1) * sw])
        v10 = f64(s[usize(h1) * sh + usize(w0) * sw])
        v11 = f64(s[usize(h1) * sh + usize(w1) * sw])
        top = (1.0 - lw) * v00 + lw * v01
        bottom = (1.0 - lw) * v10 + lw * v11
        dst[i] = T((1.0 - lh) * top + lh * bottom)


@pk.func
def bilinear_int(w_out: usize, h_out: usize, align_corners: bool, scale_h: f64, scale_w: f64,
                 info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, NARROW, F) -> bool:
    """``bilinear_int_rows`` where it applies (``bilinear_int_factor`` on the host): an upsampling by
    exactly F with half-pixel centres, rows contiguous along w and every offset whole words of 16 / F
    bytes, dst 16-byte aligned (each output row is then whole 16-byte words, stored as such). False
    where it does not (nothing written)."""
    per = usize(16 // F // T.nbytes)
    if not (info[0] * info[1] * h_out * w_out <= NARROW and small_layout(info, usize(8)) and not align_corners
            and scale_h == f64(1.0) / f64(F) and scale_w == f64(1.0) / f64(F) and h_out == F * info[2]
            and w_out == F * info[3] and info[7] == 1 and (info[3] | info[4] | info[5] | info[6]) % per == 0
            and pk.is_aligned(src, 16 // F) and pk.is_aligned(dst, 16) and info[2] * info[6] <= INDEX_31):
        return False
    if T.nbytes == 2:
        bilinear_int_rows(info, src, dst, H=u16, F=F)
    else:
        bilinear_int_rows(info, src, dst, H=u32, F=F)
    return True


def upsample_bilinear2d_int_op(w_out: usize, h_out: usize, align_corners: bool, has_scale_h: bool,
                               scale_h_factor: f64, has_scale_w: bool, scale_w_factor: f64, info: ConstPtr[usize],
                               src: ConstPtr[T], dst: Ptr[T], *, T, NARROW, RT, F):
    """The wrappers' own bilinear upsampling by an integer factor F (``upsample_bilinear2d_{F}x_{T}``,
    candle's signature and semantics): ``bilinear_int`` alone, in the blocks of BILINEAR_INT_SHAPES. In
    candle's kernel the same path spilled (its 1024-thread blocks cap registers at 64, its other paths
    need them) and cost that kernel's other scales their speed; alone it keeps 64 (f32) to 80 (16-bit)
    registers and no spills (docs/targets/cuda.md). Arguments outside its domain
    (``bilinear_int_factor``, which the wrapper checks first) write nothing."""
    if info[2] == 0 or info[3] == 0:
        return
    bilinear_int(w_out, h_out, align_corners,
                 bilinear_scale(info[2], h_out, align_corners, has_scale_h, scale_h_factor),
                 bilinear_scale(info[3], w_out, align_corners, has_scale_w, scale_w_factor), info, src, dst,
                 NARROW=NARROW, F=F)


def upsample_bilinear2d_down2x_op(w_out: usize, h_out: usize, align_corners: bool, has_scale_h: bool,
                                  scale_h_factor: f64, has_scale_w: bool, scale_w_factor: f64, info: ConstPtr[usize],
                                  src: ConstPtr[T], dst: Ptr[T], *, T, NARROW, RT):
    """The wrappers' own bilinear downscale by exactly 2 (``upsample_bilinear2d_down2x_{T}``, candle's
    signature and semantics): ``bilinear_down2x_rows`` where it applies (``bilinear_down2x_ok`` on the
    host: half-pixel centres, both scales 2, the source twice the output, rows contiguous along w and
    every offset whole pairs of elements); it writes nothing elsewhere."""
    if info[2] == 0 or info[3] == 0:
        return
    if (info[0] * info[1] * h_out * w_out <= NARROW and small_layout(info, usize(8)) and not align_corners
            and bilinear_scale(info[2], h_out, align_corners, has_scale_h, scale_h_factor) == 2.0
            and bilinear_scale(info[3], w_out, align_corners, has_scale_w, scale_w_factor) == 2.0
            and info[2] == 2 * h_out and info[3] == 2 * w_out and info[7] == 1 and (info[4] | info[5] | info[6]) % 2 == 0
            and pk.is_aligned(src, 2 * T.nbytes) and info[2] * info[6] <= INDEX_31):
        bilinear_down2x_rows(h_out, w_out, info, src, dst)


@pk.kernel
def upsample_bilinear2d_op(w_out: usize, h_out: usize, align_corners: bool, has_scale_h: bool, scale_h_factor: f64,
                           has_scale_w: bool, scale_w_factor: f64, info: ConstPtr[usize], src: ConstPtr[T],
                           dst: Ptr[T], *, T, NARROW, RT):
    """Genuine NCHW naming here: h is dim 2, w dim 3."""
    if info[2] == 0 or info[3] == 0:  # nothing to read (the wrapper refuses this)
        return
    scale_h = bilinear_scale(info[2], h_out, align_corners, has_scale_h, scale_h_factor)
    scale_w = bilinear_scale(info[3], w_out, align_corners, has_scale_w, scale_w_factor)
    numel = info[0] * info[1] * h_out * w_out
    t0 = pk.shared.array(BILINEAR_TABLE, u32)
    t1 = pk.shared.array(BILINEAR_TABLE, u32)
    tl = pk.shared.array(BILINEAR_TABLE, f64)
    if (numel <= NARROW and small_layout(info, usize(8)) and w_out <= BILINEAR_TABLE
            and info[2] * info[6] <= INDEX_31 and info[3] * info[7] <= INDEX_31):
        bilinear_rows(w_out, h_out, align_corners, scale_h, scale_w, info, src, dst, t0, t1, tl, RT=RT)
        return
    if numel <= NARROW and small_layout(info, usize(8)):
        bilinear_loop(numel, w_out, h_out, align_corners, scale_h, scale_w, info, src, dst, divisor_magic(w_out),
                      divisor_magic(h_out), divisor_magic(info[1]), I=u32)
    else:
        bilinear_loop(numel, w_out, h_out, align_corners, scale_h, scale_w, info, src, dst, u64(0), u64(0), u64(0),
                      I=usize)


#: outputs up to this many take 32-bit index arithmetic (``div_by``); tests lower it to check the other path
NARROW = 0xFFFFFFFF

#: op -> (generic kernel, its compile-time parameters beyond T): candle's macro table
OPS = {
    "conv1d": (conv1d_op, dict(accumulate=True)),
    "conv2d": (conv2d_op, dict(accumulate=True)),
    "conv_transpose1d": (conv_transpose1d_op, dict(accumulate=True)),
    "conv_transpose2d": (conv_transpose2d_op, dict(accumulate=True)),
    "im2col1d": (im2col1d_op, dict(NARROW=NARROW)),
    "col2im1d": (col2im1d_op, dict(NARROW=NARROW)),
    "im2col": (im2col_op, dict(NARROW=NARROW)),
    "avg_pool2d": (pool2d_op, dict(accumulate=True, MAX=False, NARROW=NARROW)),
    "max_pool2d": (pool2d_op, dict(accumulate=True, MAX=True, NARROW=NARROW)),
    "upsample_nearest2d": (upsample_nearest2d_op, dict(NARROW=NARROW)),
    "upsample_bilinear2d": (upsample_bilinear2d_op, dict(NARROW=NARROW, RT=0)),
}


def instance_params(op: str, dtype, **overrides) -> dict:
    """The compile-time parameters of ``{op}_{dtype}``: T, A (the accumulation type) where the op sums."""
    params = dict(OPS[op][1], T=dtype, **overrides)
    if params.pop("accumulate", False):
        params["A"] = compute_type(dtype)
    return params


for _op, (_kernel, _) in OPS.items():
    for _t in DTYPES:
        CONV.add(_kernel.instance(kernel_name(_op, _t), **instance_params(_op, _t)))

#: the wrappers' own kernels (not candle's names; ``docs/compat.md``): col2im1d's staged path for the
#: dtypes whose conv_transpose1d goes through the GEMM and col2im1d
STAGED_COL2IM_DTYPES = (f32, f16, bf16)
for _t in STAGED_COL2IM_DTYPES:
    CONV.add(col2im1d_staged_op.instance(kernel_name("col2im1d_staged", _t), **instance_params("col2im1d", _t)))
#: and the 2x2 pools' vector-row path as kernels of their own (``pool2d_vec_op``): the 16- and 32-bit types
VEC_POOL_DTYPES = (f32, f16, bf16, u32)
for _op in ("avg_pool2d", "max_pool2d"):
    for _t in VEC_POOL_DTYPES:
        CONV.add(pool2d_vec_op.instance(kernel_name(f"{_op}_vec", _t), **instance_params(_op, _t)))
#: and bilinear upsampling by exactly 2 and 4 (``bilinear_int``) for the float types models upsample
BILINEAR_INT_DTYPES = (f32, f16, bf16)
BILINEAR_INT_FACTORS = (2, 4)
#: (a definition of it per factor and element size, with the blocks of BILINEAR_INT_SHAPES)
BILINEAR_INT_KERNELS = {key: pk.kernel(upsample_bilinear2d_int_op, max_block_size=block,
                                       min_blocks_per_sm={"cuda": min_blocks})
                        for key, (block, min_blocks, _) in BILINEAR_INT_SHAPES.items()}
for _f in BILINEAR_INT_FACTORS:
    for _t in BILINEAR_INT_DTYPES:
        CONV.add(BILINEAR_INT_KERNELS[_f, _t.nbytes].instance(kernel_name(f"upsample_bilinear2d_{_f}x", _t), F=_f,
                                                              **instance_params("upsample_bilinear2d", _t)))
#: and the downscale by exactly 2 (``upsample_bilinear2d_down2x_*``), in the wrappers' row blocks
BILINEAR_DOWN2X = pk.kernel(upsample_bilinear2d_down2x_op, max_block_size=ROW_BLOCK)
for _t in BILINEAR_INT_DTYPES:
    CONV.add(BILINEAR_DOWN2X.instance(kernel_name("upsample_bilinear2d_down2x", _t),
                                      **instance_params("upsample_bilinear2d", _t)))
#: and im2col's rows path (``im2col_rows``) as kernels of their own, for the dtypes conv2d / conv1d take through
#: the GEMM
ROWS_IM2COL_DTYPES = (f32, f16, bf16)
#: (2-d: pipelined, ``im2col_rows_pipe``, except on AMDGPU, where its 48 KiB of LDS would leave one block a
#: CU; 1-d: ``im2col_rows``, which the pipeline made slower on an H100: docs/targets/cuda.md)
for _t in ROWS_IM2COL_DTYPES:
    CONV.add(im2col_rows_pipe_op.instance(
        kernel_name("im2col_rows", _t), T=_t, L=ROWS_LOADS,
        NS=pk.per_target(amdgpu=1, default=2), SB=pk.per_target(amdgpu=ROWS_STAGE_BYTES, default=ROWS_PIPE_STAGE_BYTES),
        TB=pk.per_target(amdgpu=ROWS_TAB, default=ROWS_PIPE_TAB), PR=0))
    CONV.add(im2col1d_rows_op.instance(kernel_name("im2col1d_rows", _t), T=_t, SB=ROWS_STAGE_BYTES, L=ROWS_LOADS,
                                       NS=1, TB=ROWS_TAB, PR=0))
#: and for 16-bit types the pipeline's pair fill (``im2col_rows_pairs_*``, PR = 1: the fill's loads 4-byte pairs,
#: half the instructions of an element fill), which the wrappers take where ``im2col_rows_pairs_ok`` holds;
#: a kernel of its own, since one holding both fills spilled (docs/targets/cuda.md). AMDGPU: the one-stage
#: ``im2col_rows``, as ``im2col_rows_*`` there
ROWS_PAIRS_DTYPES = (f16, bf16)
for _t in ROWS_PAIRS_DTYPES:
    CONV.add(im2col_rows_pipe_op.instance(
        kernel_name("im2col_rows_pairs", _t), T=_t, L=ROWS_LOADS, NS=pk.per_target(amdgpu=1, default=2),
        SB=pk.per_target(amdgpu=ROWS_STAGE_BYTES, default=ROWS_PIPE_STAGE_BYTES_16),
        TB=pk.per_target(amdgpu=ROWS_TAB, default=ROWS_PIPE_TAB_16), PR=pk.per_target(amdgpu=0, default=1)))
    CONV.add(im2col1d_rows_op.instance(kernel_name("im2col1d_rows_pairs", _t), T=_t, SB=ROWS_STAGE_BYTES,
                                       L=ROWS_LOADS, NS=1, TB=ROWS_TAB, PR=pk.per_target(amdgpu=0, default=1)))
#: and the 16-bit 3x3 / 3-tap windows staged channels-last (``im2col_vec``), which the wrappers take where
#: ``im2col_vec_ok`` holds
for _t in VEC_DTYPES:
    CONV.add(im2col_3x3_op.instance(kernel_name("im2col_3x3", _t), T=_t, L=VEC_TASKS_2D, NV=VEC_NV))
    CONV.add(im2col1d_k3_op.instance(kernel_name("im2col1d_k3", _t), T=_t, L=VEC_TASKS_1D, NV=VEC_NV_1D))
    CONV.add(im2col1d_k3_op.instance(kernel_name("im2col1d_k3_narrow", _t), T=_t, L=VEC_TASKS_NARROW,
                                     NV=VEC_NV_NARROW))
#: and col2im1d's rows path (``col2im1d_rows``), for the dtypes conv_transpose1d takes through the GEMM
ROWS_COL2IM_DTYPES = (f32, f16, bf16)
for _t in ROWS_COL2IM_DTYPES:
    _wide = _t.nbytes == 4  # f32 on CUDA: 128-byte rows in a 48 KiB stage (docs/targets/cuda.md)
    CONV.add(col2im1d_rows_op.instance(
        kernel_name("col2im1d_rows", _t), T=_t, L=COLR_LOADS, MT=COLR_TAPS, FAST=True, WL=COLR_WORDS,
        SB=pk.per_target(cuda=COLR_STAGE_BYTES_F32_CUDA, default=COLR_STAGE_BYTES) if _wide else COLR_STAGE_BYTES,
        RB=pk.per_target(cuda=COLR_ROW_BYTES_F32_CUDA, default=COLR_ROW_BYTES) if _wide else COLR_ROW_BYTES))


# ---- host side: the wrappers' launch shapes -----------------------------------------------------------
#: the wrappers' block for im2col's staged path: 8 groups of STAGE_PIXELS lanes
STAGE_BLOCK = 256


def im2col_launch(b: int, c_in: int, h_out: int, w_out: int, h_k: int, w_k: int, dtype) -> tuple[int, int]:
    """One block of STAGE_BLOCK threads per staged work item of ``im2col_{dtype}`` (its ``chunk`` and
    item count, computed as the kernel does), so no block is launched without work; ``im2col1d`` is the
    case ``h_out = h_k = 1``."""
    kk = max(1, h_k * w_k)
    chunk = min(c_in, (STAGE_BYTES // dtype.nbytes // STAGE_PIXELS - 1) // kk)
    if chunk == 0 or c_in == 0:  # the kernel's one-output-a-step loop: blocks of 256 over the outputs
        return max(1, -(-b * h_out * w_out * c_in * kk // (STAGE_BLOCK * 4))), STAGE_BLOCK
    items = -(-(b * h_out * w_out) // STAGE_PIXELS) * -(-c_in // chunk)
    return max(1, items), STAGE_BLOCK


def im2col_rows_plan(c_in: int, h_k: int, w_k: int, w_out: int, stride: int, dilation: int, dtype,
                     stage_bytes: int = ROWS_STAGE_BYTES, tab: int = ROWS_TAB, extra: int = 0) -> tuple[int, int]:
    """``im2col_rows_tile`` on the host: (chunk, pixels), (0, 0) where the rows path does not apply."""
    kk, vw = h_k * w_k, 16 // dtype.nbytes
    if kk == 0 or c_in == 0 or w_out == 0:
        return 0, 0
    unit = vw // gcd(kk, vw)
    chunk = min(c_in, max(unit, ROWS_VECS * vw // kk // unit * unit))
    per_row = stage_bytes // dtype.nbytes // (chunk * h_k)
    reach = (w_k - 1) * dilation + 1
    if chunk * kk > tab or per_row < reach + 3:
        return 0, 0
    room = per_row - 3 - reach
    if extra:
        top = per_row - (1 - per_row % 2 if dtype.nbytes == 4 else (per_row + 2) % 4 if dtype.nbytes == 2 else 0)
        if top < reach + extra:
            return 0, 0
        room = top - extra - reach
    return chunk, min(w_out, ROWS_PIXELS, room // stride + 1)


def im2col_rows_params(dtype, target, one_d: bool = False, pairs: bool = False) -> tuple[dict, int]:
    """``im2col_rows_{dtype}``'s (``one_d``: ``im2col1d_rows_{dtype}``'s, ``pairs``:
    ``im2col_rows_pairs_{dtype}``'s) stage bytes, column-table entries and extra staged columns as
    ``target`` (a target or its name) compiles them, in ``im2col_rows_plan``'s keywords, and its stages
    (2: the pipelined path, whose grid is capped)."""
    name = ("im2col1d_rows" if one_d else "im2col_rows") + ("_pairs" if pairs else "")
    p = CONV.get(kernel_name(name, dtype)).params_for(target)
    extra = 2 if dtype.nbytes == 2 and p.get("PR", 0) > 0 else 0
    return dict(stage_bytes=p["SB"], tab=p["TB"], extra=extra), p["NS"]


def im2col_rows_ok(x, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, padding: int, dilation: int,
                   pairs: bool = False) -> bool:
    """Whether the wrappers take ``im2col_rows_*`` (x (b, c, h, w)) or ``im2col1d_rows_*`` (x (b, c, l):
    ``h_out = h_k = 1``) for the device array ``x``: a dtype they are built for, a tile that applies,
    every size below 2**31 and a batch's source offsets below 2**32 (the kernels' u32 staging
    arithmetic; ``rows_domain``, their own test). ``pairs``: the same for ``im2col_rows_pairs_*``
    (``im2col_rows_pairs_ok``)."""
    if x.dtype not in (ROWS_PAIRS_DTYPES if pairs else ROWS_IM2COL_DTYPES):
        return False
    dims, strides = (x.shape[0], x.shape[1], 1, x.shape[2]), (x.strides[0], x.strides[1], 0, x.strides[2])
    if x.ndim == 4:
        dims, strides = x.shape, x.strides
    reach = max(h_out * stride + h_k * dilation, w_out * stride + w_k * dilation, padding + max(dims[2], dims[3]))
    span = sum((d - 1) * s for d, s in zip(dims[1:], strides[1:]))
    params, _ = im2col_rows_params(x.dtype, x.device.target, x.ndim == 3, pairs)
    chunk, pixels = im2col_rows_plan(dims[1], h_k, w_k, w_out, stride, dilation, x.dtype, **params)
    items = dims[0] * h_out * -(-w_out // max(pixels, 1)) * -(-dims[1] // max(chunk, 1))
    return (dims[0] * h_out * w_out > 0 and stride > 0 and chunk > 0 and items <= INDEX_31
            and max(*dims, *strides, h_out, w_out, h_k, w_k, stride, dilation, padding, reach) <= INDEX_31
            and span <= 0xFFFFFFFF)


def im2col_rows_pairs_ok(x, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, padding: int,
                         dilation: int) -> bool:
    """Whether the wrappers take ``im2col_rows_pairs_*`` (``im2col1d_rows_pairs_*`` for a 3-d ``x``) for the
    device array ``x``: a 16-bit type, rows contiguous along w (l), every row and the array 4-byte aligned,
    an even width (the kernels' ``pipe_pairs_ok``), and ``im2col_rows_ok`` for its stage and table."""
    return (x.ndim in (3, 4) and x.dtype in ROWS_PAIRS_DTYPES and x.strides[-1] == 1 and x.shape[-1] % 2 == 0
            and all(v % 2 == 0 for v in x.strides[:-1]) and x.ptr % 4 == 0
            and im2col_rows_ok(x, h_out, w_out, h_k, w_k, stride, padding, dilation, pairs=True))


def im2col_rows_launch(b: int, c_in: int, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, dilation: int,
                       dtype, device, one_d: bool = False, pairs: bool = False) -> tuple[int, int]:
    """The wrappers' grid for ``im2col_rows_{dtype}`` (``one_d``: ``im2col1d_rows``, h_out = h_k = 1) on
    ``device``: blocks of ROWS_BLOCK, one per work item; for the pipelined path at most
    ROWS_PIPE_BLOCKS_PER_SM a multiprocessor (132 where the device does not say), each block looping over
    items, the pipeline filling the next while it writes the current one. ``pairs``: the grid of
    ``im2col_rows_pairs_{dtype}``."""
    params, stages = im2col_rows_params(dtype, device.target, one_d, pairs)
    chunk, pixels = im2col_rows_plan(c_in, h_k, w_k, w_out, stride, dilation, dtype, **params)
    items = b * h_out * -(-w_out // max(pixels, 1)) * -(-c_in // max(chunk, 1))
    if stages == 2:
        items = min(items, (getattr(device, "multiprocessors", None) or 132) * ROWS_PIPE_BLOCKS_PER_SM)
    return max(1, items), ROWS_BLOCK


def im2col_vec_plan(c_in: int, h_k: int, w_k: int, w_out: int, stride: int, dilation: int, kk: int) -> int:
    """``vec_pixels`` on the host: an item's pixels, 0 where ``im2col_vec`` does not apply."""
    if h_k * w_k != kk or c_in == 0 or c_in % 8 or w_out == 0 or stride == 0:
        return 0
    cols = VEC_STAGE_BYTES // (vec_vectors(kk, c_in) * 16 * h_k) // 8 * 8
    reach = (w_k - 1) * dilation + 1
    return 0 if cols < reach + 3 else min(w_out, (cols - reach - 3) // stride + 1)


def im2col_vec_ok(x, h_out: int, w_out: int, h_k: int, w_k: int, stride: int, padding: int, dilation: int) -> bool:
    """Whether the wrappers take ``im2col_3x3_*`` (x (b, c, h, w), a 3x3 window) or ``im2col1d_k3_*`` (x (b, c,
    l), 3 taps) for the device array ``x`` (the kernels' ``vec_layout_ok`` and ``vec_pixels``): f16 or
    bf16, channels a multiple of 8, rows contiguous, the width and every stride a multiple of 4, the
    array 8-byte aligned, sizes below 2**31; not on AMDGPU, where the rows kernels stay (their 24 KiB
    of LDS a block was chosen for CDNA's 64 KiB a CU; these kernels are correct there, untimed)."""
    kk = 9 if x.ndim == 4 else 3
    if x.ndim not in (3, 4) or x.dtype not in VEC_DTYPES or h_out * w_out == 0 or x.shape[0] == 0:
        return False
    if x.device.target.name == "amdgpu":  # 31-43 KB of LDS a block: 1-2 blocks a CDNA CU (docs/targets/amdgpu.md)
        return False
    if x.strides[-1] != 1 or x.shape[-1] % 4 or x.ptr % 8 or any(s % 4 for s in x.strides[:-1]):
        return False
    reach = max(h_out * stride + h_k * dilation, w_out * stride + w_k * dilation, padding + max(x.shape[2:]))
    return (im2col_vec_plan(x.shape[1], h_k, w_k, w_out, stride, dilation, kk) > 0
            and max(*x.shape, *x.strides, h_out, w_out, stride, padding, dilation, reach) <= INDEX_31)


def im2col_vec_launch(b: int, c_in: int, h_out: int, w_out: int, h_k: int, w_k: int, stride: int,
                      dilation: int) -> tuple[int, int]:
    """The wrappers' grid for ``im2col_3x3_*`` / ``im2col1d_k3_*`` (h_out = h_k = 1): a block of VEC_BLOCK an
    item."""
    pixels = im2col_vec_plan(c_in, h_k, w_k, w_out, stride, dilation, h_k * w_k)
    return max(1, b * h_out * -(-w_out // max(pixels, 1)) * -(-c_in // (vec_vectors(h_k * w_k, c_in) * 8))), VEC_BLOCK


def vec_kernel(kk: int, c_in: int) -> tuple[str, int]:
    """The wrappers' ``im2col_vec`` kernel (its name less the dtype) for a window of ``kk`` taps over
    ``c_in`` channels, and the 16-byte vectors of channels its items stage."""
    if kk == 9:
        return "im2col_3x3", VEC_NV
    return ("im2col1d_k3", VEC_NV_1D) if c_in > VEC_NARROW else ("im2col1d_k3_narrow", VEC_NV_NARROW)


def vec_vectors(kk: int, c_in: int) -> int:
    """``vec_kernel``'s vectors of channels an item."""
    return vec_kernel(kk, c_in)[1]


def col2im1d_launch(b: int, l_in: int, c_out: int, k: int, stride: int, dtype) -> tuple[int, int]:
    """The wrappers' grid for ``col2im1d_staged_{dtype}``: one block of STAGE_BLOCK per staged work item
    (``col2im1d_tile``'s tile, computed as the kernel does), or blocks of 256 over the outputs where the
    kernel takes its loop."""
    chunk = min(c_out, max(COL_ROW_BYTES // dtype.nbytes // max(k, 1), 1))
    rows = COL_STAGE_BYTES // dtype.nbytes // (chunk * k | 1)
    halo = (k - 1) // stride
    span = rows - halo if rows > halo else 0
    if span < COL_MIN_ROWS or span <= halo or c_out == 0:
        l_out = (l_in - 1) * stride + k
        return max(1, -(-b * c_out * l_out // STAGE_BLOCK)), STAGE_BLOCK
    return max(1, b * -(-l_in // span) * -(-c_out // chunk)), STAGE_BLOCK


def col2im1d_rows_plan(c_out: int, k: int, stride: int, dtype, stage_bytes: int = COLR_STAGE_BYTES,
                       taps: int = COLR_TAPS, row_bytes: int = COLR_ROW_BYTES) -> tuple[int, int]:
    """``col2im1d_rows_tile`` on the host: (chunk, span), (0, 0) where the rows path does not apply."""
    rb = k * dtype.nbytes
    if k == 0 or c_out == 0 or stride == 0 or k > taps * stride or (c_out * rb) % 8:
        return 0, 0
    unit = 8 // gcd(rb, 8)
    chunk = min(c_out, max(unit, row_bytes // rb // unit * unit))
    rows = stage_bytes // 4 // (chunk * rb // 4 + 1)
    halo = (k - 1) // stride
    if rows < halo + COLR_MIN_ROWS:
        return 0, 0
    return chunk, rows - halo


def col2im1d_rows_params(dtype, target) -> dict:
    """``col2im1d_rows_{dtype}``'s stage and row bytes as ``target`` (a target or its name) compiles them,
    in ``col2im1d_rows_plan``'s keywords (``stage_bytes``, ``row_bytes``)."""
    p = CONV.get(kernel_name("col2im1d_rows", dtype)).params_for(target)
    return dict(stage_bytes=p["SB"], row_bytes=p["RB"])


def col2im1d_rows_ok(cols, l_in: int, c_out: int, k: int, stride: int, l_out: int) -> bool:
    """Whether the wrappers take ``col2im1d_rows_*`` for the contiguous device array ``cols`` (b, l_in,
    c_out * k) into (b, c_out, l_out): the kernel's own test on the host (a dtype it is built for, a
    tile that applies, src 8-byte aligned, sizes below 2**31, ``l_out = (l_in - 1) * stride + k``)."""
    b = cols.size // max(1, l_in * c_out * k)
    if cols.dtype not in ROWS_COL2IM_DTYPES:
        return False
    params = col2im1d_rows_params(cols.dtype, cols.device.target)
    chunk, span = col2im1d_rows_plan(c_out, k, stride, cols.dtype, **params)
    items = b * -(-l_in // max(span, 1)) * -(-c_out // max(chunk, 1))
    return (cols.dtype in ROWS_COL2IM_DTYPES and chunk > 0 and cols.ptr % 8 == 0 and l_in > 0 and b > 0
            and l_out == (l_in - 1) * stride + k and items <= INDEX_31 and max(l_out, l_in, c_out, stride) <= INDEX_31
            and l_out + stride + k <= INDEX_31 and l_in * c_out * k <= 0xFFFFFFFF)


def col2im1d_rows_launch(b: int, l_in: int, c_out: int, k: int, stride: int, dtype, target) -> tuple[int, int]:
    """The wrappers' grid for ``col2im1d_rows_{dtype}`` compiled for ``target``: one block of COLR_BLOCK
    per work item."""
    chunk, span = col2im1d_rows_plan(c_out, k, stride, dtype, **col2im1d_rows_params(dtype, target))
    return max(1, b * -(-l_in // max(span, 1)) * -(-c_out // max(chunk, 1))), COLR_BLOCK


#: the wrappers' most blocks of ROW_BLOCK a multiprocessor for the pools and upsamplings: each thread
#: then takes several rows, so its setup (the divisors' magic numbers, a block's tables) is paid once
ROW_BLOCKS_PER_SM = 16


def pool_vec_ok(x, k: tuple[int, int], s: tuple[int, int], out_size: int) -> bool:
    """Whether ``{op}_vec_{dtype}`` (``pool2d_vec_op``) takes the pool of the device array ``x`` with
    window ``k`` and stride ``s`` (candle's order: dim 2, dim 3): the kernel's own test, on the host."""
    return (x.dtype in VEC_POOL_DTYPES and tuple(k) == (2, 2) and s[1] == 2 and x.strides[3] == 1
            and all(v % 2 == 0 for v in x.strides[:3]) and x.ptr % (2 * x.dtype.nbytes) == 0
            and out_size <= NARROW and max(*x.shape, *x.strides, *s) <= INDEX_31)


def bilinear_words_ok(x, oh: int, ow: int, scales: tuple, align_corners: bool, scale: float, per: int) -> bool:
    """The host's test shared by the wrappers' own bilinear kernels (``bilinear_int_factor``,
    ``bilinear_down2x_ok``): half-pixel centres, every scale used exactly ``scale`` (in / out, or
    PyTorch's scale factor's inverse), rows contiguous along w with the width, every stride and src
    in whole words of ``per`` elements, and the sizes their u32 indices take."""
    b, c, h, w = x.shape
    return (x.dtype in BILINEAR_INT_DTYPES and not align_corners and h == scale * oh and w == scale * ow
            and all(v is None or 1.0 / v == scale for v in scales) and x.strides[3] == 1
            and all(v % per == 0 for v in (w, *x.strides[:3])) and x.ptr % (per * x.dtype.nbytes) == 0
            and b * c * oh * ow <= NARROW and max(*x.shape, *x.strides) <= INDEX_31 and h * x.strides[2] <= INDEX_31)


def bilinear_int_factor(x, oh: int, ow: int, scales: tuple, align_corners: bool) -> int:
    """The factor F with which ``upsample_bilinear2d_{F}x_{dtype}`` takes the device array ``x`` to ``oh x
    ow`` with ``scales`` (PyTorch's scale factors or None), 0 where none does: ``bilinear_int``'s test,
    on the host (words of 16 / F bytes)."""
    return next((f for f in BILINEAR_INT_FACTORS if bilinear_words_ok(
        x, oh, ow, scales, align_corners, 1.0 / f, max(1, 16 // f // x.dtype.nbytes))), 0)


def bilinear_down2x_ok(x, oh: int, ow: int, scales: tuple, align_corners: bool) -> bool:
    """Whether ``upsample_bilinear2d_down2x_{dtype}`` takes the device array ``x`` to ``oh x ow`` with
    ``scales`` (PyTorch's scale factors or None): its kernel's test, on the host (pairs of elements)."""
    return bilinear_words_ok(x, oh, ow, scales, align_corners, 2.0, 2)


def bilinear_int_launch(x, factor: int) -> tuple[int, int]:
    """The wrappers' grid for ``upsample_bilinear2d_{factor}x_*`` of the device array ``x``: ``rows_launch``
    over the units of its source rows ``bilinear_int_rows`` takes (a few rows each) in the blocks of
    BILINEAR_INT_SHAPES (f32's for element sizes it has no kernel for: a grid for candle's kernel over
    the same rows)."""
    b, c, h, w = x.shape
    block, _, per_sm = BILINEAR_INT_SHAPES.get((factor, x.dtype.nbytes), BILINEAR_INT_SHAPES[factor, 4])
    unit = max(1, min(16 // factor // x.dtype.nbytes, BILINEAR_INT_UNIT_MAX))  # bilinear_int_rows' UNIT
    return rows_launch(b * c * -(-h // unit), w, x.dtype, x.device, per_sm=per_sm, block=block)


#: exact 2x and 4x nearest upsampling (``nearest_int_rows``) is the exception: its short row units want more
#: blocks an SM in flight (``benchmarks/conv_rows_probe.py``; figures in docs/targets/cuda.md, conv)
NEAREST_INT_BLOCKS_PER_SM = 64
#: the factors ``nearest_int_rows`` takes
NEAREST_INT_FACTORS = (2, 4)


def rows_launch(rows: int, cols: int, dtype, device, tiles: bool = True,
                per_sm: int = ROW_BLOCKS_PER_SM, block: int = ROW_BLOCK, width: int = 0) -> tuple[int, int]:
    """The wrappers' grid for the pools and upsamplings over ``rows`` output rows of ``cols``: enough
    blocks of ``block`` threads for every row group (as ``row_group`` splits the block), at most ``per_sm`` a
    multiprocessor (132 where the device does not say). ``tiles``: 16-byte tiles a thread (the
    upsamplings and ``{op}_vec_*``; candle's pool kernels take one output a step); ``width``, where
    given, the elements a thread takes at a time instead (``vec_rows``' LANE)."""
    width = width or (16 // dtype.nbytes if tiles else 1)
    tiles, g = -(-cols // width), 1
    while g < tiles and g * 2 <= block:
        g *= 2
    sms = getattr(device, "multiprocessors", None) or 132
    return max(1, min(-(-rows // (block // g)), sms * per_sm)), block


def nearest_launch(x, oh: int, ow: int) -> tuple[int, int]:
    """The wrappers' grid for ``upsample_nearest2d_*`` of the device array ``x`` to ``oh x ow``:
    ``rows_launch`` over the output rows, or where the kernel takes ``nearest_int_rows`` over the source
    rows it takes (their tiles set its row groups) with NEAREST_INT_BLOCKS_PER_SM."""
    b, c, h, w = x.shape
    if any(oh == f * h and ow == f * w for f in NEAREST_INT_FACTORS) and x.strides[3] == 1:
        words = oh == 4 * h and x.dtype.nbytes <= 4  # nearest_word_row's lanes, where it applies
        return rows_launch(b * c * h, w, x.dtype, x.device, per_sm=NEAREST_INT_BLOCKS_PER_SM,
                           width=4 // x.dtype.nbytes if words else 0)
    return rows_launch(b * c * oh, ow, x.dtype, x.device)
