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

Every kernel covers its output in a grid-stride loop, so candle's launch (one thread per output
element, blocks of 1024) and any smaller grid are both correct. The Python wrappers below the kernels
launch them the way candle-core's CUDA backend does (§5.11); conv2d and conv1d go through im2col and
pykern's own GEMM (``stdlib_kernels/matmul.py``).
"""
from __future__ import annotations

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, f64, u8, u32, u64, usize

from . import CONV, kernel_name
from ._common import compute_type

T = pk.TypeVar("T")
A = pk.TypeVar("A")

DTYPES = (f32, f64, f16, bf16, u8, u32)


# ---- device helpers ---------------------------------------------------------------------------------
@pk.func
def padded_source(pos: usize, padding: usize, extent: usize) -> usize:
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
def bilinear_source(o: usize, scale: f64, align_corners: bool) -> f64:
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
def div_by(n: usize, d: usize, magic: u64, *, wide) -> usize:
    """``n // d``: by ``divisor_magic`` where every index fits 32 bits (``wide`` false), else divided."""
    if wide:
        return n // d
    else:
        n32 = usize(u32(n))
        return (((n32 * usize(u32(magic))) >> 32) + n32) >> (magic >> 32)


# ---- kernels ----------------------------------------------------------------------------------------
@pk.kernel
def conv1d_op(src_numel: usize, l_out: usize, stride: usize, padding: usize, dilation: usize, info: ConstPtr[usize],
              src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T], *, T, A):
    c_in = info[1]
    l_in = info[2]
    c_out = info[6]
    k_size = info[8]
    for i in pk.grid_stride(info[0] * c_out * l_out):
        ol = i % l_out
        co = (i // l_out) % c_out
        s = src + (i // (l_out * c_out)) * info[3]
        w = kernel + co * info[9]
        acc = A(0)
        for k in range(k_size):
            sl = padded_source(stride * ol + k * dilation, padding, l_in)
            if sl < l_in:
                for ci in range(c_in):
                    acc += A(s[ci * info[4] + sl * info[5]]) * A(w[ci * info[10] + k * info[11]])
        dst[i] = T(acc)


@pk.kernel
def conv2d_op(src_numel: usize, w_out: usize, h_out: usize, stride: usize, padding: usize, dilation: usize,
              info: ConstPtr[usize], src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T], *, T, A):
    c_in = info[1]
    h_in = info[2]
    w_in = info[3]
    c_out = info[8]
    h_k = info[10]
    w_k = info[11]
    for i in pk.grid_stride(info[0] * c_out * h_out * w_out):
        ow = i % w_out
        oh = (i // w_out) % h_out
        co = (i // (w_out * h_out)) % c_out
        s = src + (i // (w_out * h_out * c_out)) * info[4]
        w = kernel + co * info[12]
        acc = A(0)
        for kh in range(h_k):
            sh = padded_source(stride * oh + kh * dilation, padding, h_in)
            if sh < h_in:
                for kw in range(w_k):
                    sw = padded_source(stride * ow + kw * dilation, padding, w_in)
                    if sw < w_in:
                        sp = s + sh * info[6] + sw * info[7]
                        wp = w + kh * info[14] + kw * info[15]
                        for ci in range(c_in):
                            acc += A(sp[ci * info[5]]) * A(wp[ci * info[13]])
        dst[i] = T(acc)


@pk.kernel
def conv_transpose1d_op(src_numel: usize, l_out: usize, stride: usize, padding: usize, out_padding: usize,
                        dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], kernel: ConstPtr[T], dst: Ptr[T],
                        *, T, A):
    c_in = info[1]
    l_in = info[2]
    c_out = info[7]
    k_size = info[8]
    for i in pk.grid_stride(info[0] * c_out * l_out):
        ol = i % l_out
        co = (i // l_out) % c_out
        s = src + (i // (l_out * c_out)) * info[3]
        w = kernel + co * info[10]
        acc = A(0)
        for k in range(k_size):
            il = transposed_source(ol, k * dilation, padding, stride, l_in)
            if il < l_in:
                for ci in range(c_in):
                    acc += A(s[ci * info[4] + il * info[5]]) * A(w[ci * info[9] + k * info[11]])
        dst[i] = T(acc)


@pk.kernel
def conv_transpose2d_op(src_numel: usize, w_out: usize, h_out: usize, stride: usize, padding: usize,
                        out_padding: usize, dilation: usize, info: ConstPtr[usize], src: ConstPtr[T],
                        kernel: ConstPtr[T], dst: Ptr[T], *, T, A):
    c_in = info[1]
    h_in = info[2]
    w_in = info[3]
    c_out = info[9]
    h_k = info[10]
    w_k = info[11]
    for i in pk.grid_stride(info[0] * c_out * h_out * w_out):
        ow = i % w_out
        oh = (i // w_out) % h_out
        co = (i // (w_out * h_out)) % c_out
        s = src + (i // (w_out * h_out * c_out)) * info[4]
        w = kernel + co * info[13]
        acc = A(0)
        for kh in range(h_k):
            ih = transposed_source(oh, kh * dilation, padding, stride, h_in)
            if ih < h_in:
                for kw in range(w_k):
                    iw = transposed_source(ow, kw * dilation, padding, stride, w_in)
                    if iw < w_in:
                        sp = s + ih * info[6] + iw * info[7]
                        wp = w + kh * info[14] + kw * info[15]
                        for ci in range(c_in):
                            acc += A(sp[ci * info[5]]) * A(wp[ci * info[12]])
        dst[i] = T(acc)


@pk.func
def im2col1d_loop(numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                  info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_k: u64, m_c: u64, m_l: u64, *, wide):
    c_in = info[1]
    l_in = info[2]
    for i in pk.grid_stride(numel):
        row = div_by(i, l_k, m_k, wide=wide)
        k = i - row * l_k
        bl = div_by(row, c_in, m_c, wide=wide)
        c = row - bl * c_in
        b = div_by(bl, l_out, m_l, wide=wide)
        ol = bl - b * l_out
        sl = padded_source(ol * stride + k * dilation, padding, l_in)
        inside = sl < l_in
        v = src[pk.select(inside, b * info[3] + c * info[4] + sl * info[5], usize(0))]
        dst[i] = pk.select(inside, v, T(0))


@pk.kernel
def im2col1d_op(dst_numel: usize, l_out: usize, l_k: usize, stride: usize, padding: usize, dilation: usize,
                info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    """candle's ``dst_numel`` counts (b, l, c) rows of ``l_k`` values; the loop runs over every value."""
    numel = dst_numel * l_k
    if numel <= NARROW:
        im2col1d_loop(numel, l_out, l_k, stride, padding, dilation, info, src, dst, divisor_magic(l_k),
                      divisor_magic(info[1]), divisor_magic(l_out), wide=False)
    else:
        im2col1d_loop(numel, l_out, l_k, stride, padding, dilation, info, src, dst, u64(0), u64(0), u64(0), wide=True)


@pk.func
def im2col_loop(numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
                dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_wk: u64, m_hk: u64, m_c: u64,
                m_wo: u64, m_ho: u64, *, wide):
    c_in = info[1]
    h_in = info[2]
    w_in = info[3]
    for i in pk.grid_stride(numel):
        r = div_by(i, w_k, m_wk, wide=wide)
        kw = i - r * w_k
        q = div_by(r, h_k, m_hk, wide=wide)
        kh = r - q * h_k
        r = div_by(q, c_in, m_c, wide=wide)
        c = q - r * c_in
        q = div_by(r, w_out, m_wo, wide=wide)
        ow = r - q * w_out
        b = div_by(q, h_out, m_ho, wide=wide)
        oh = q - b * h_out
        sh = padded_source(oh * stride + kh * dilation, padding, h_in)
        sw = padded_source(ow * stride + kw * dilation, padding, w_in)
        inside = sh < h_in and sw < w_in
        off = b * info[4] + c * info[5] + sh * info[6] + sw * info[7]
        v = src[pk.select(inside, off, usize(0))]
        dst[i] = pk.select(inside, v, T(0))


@pk.kernel
def im2col_op(dst_numel: usize, h_out: usize, w_out: usize, h_k: usize, w_k: usize, stride: usize, padding: usize,
              dilation: usize, info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    if dst_numel <= NARROW:
        im2col_loop(dst_numel, h_out, w_out, h_k, w_k, stride, padding, dilation, info, src, dst, divisor_magic(w_k),
                    divisor_magic(h_k), divisor_magic(info[1]), divisor_magic(w_out), divisor_magic(h_out), wide=False)
    else:
        im2col_loop(dst_numel, h_out, w_out, h_k, w_k, stride, padding, dilation, info, src, dst, u64(0), u64(0),
                    u64(0), u64(0), u64(0), wide=True)


@pk.func
def col2im1d_loop(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                  src: ConstPtr[T], dst: Ptr[T], m_l: u64, m_c: u64, *, wide):
    for i in pk.grid_stride(dst_el):
        bc = div_by(i, l_out, m_l, wide=wide)  # b * c_out + c
        ol = i - bc * l_out
        b = div_by(bc, c_out, m_c, wide=wide)
        col = src + b * l_in * c_out * k_size + (bc - b * c_out) * k_size
        # li * stride + k == ol for 0 <= k < k_size: li from ceil((ol - k_size + 1) / stride) to ol / stride
        first = (ol + 1 - k_size + stride - 1) // stride if ol + 1 > k_size else usize(0)
        last = min(ol // stride + 1, l_in)
        acc = T(0)
        for li in range(first, last):
            acc += col[li * c_out * k_size + (ol - li * stride)]
        dst[i] = acc


@pk.kernel
def col2im1d_op(dst_el: usize, l_out: usize, l_in: usize, c_out: usize, k_size: usize, stride: usize,
                src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    if dst_el <= NARROW:
        col2im1d_loop(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, divisor_magic(l_out), divisor_magic(c_out),
                      wide=False)
    else:
        col2im1d_loop(dst_el, l_out, l_in, c_out, k_size, stride, src, dst, u64(0), u64(0), wide=True)


@pk.func
def pool2d_loop(numel: usize, w_k: usize, h_k: usize, w_stride: usize, h_stride: usize, out2: usize, out3: usize,
                info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_3: u64, m_2: u64, m_c: u64, *, A, MAX, wide):
    """One output a step: the window's mean (A sum, ``average``) or candle CPU's max fold (the first
    element, replaced by every later one it is less than: a NaN first element stays, later NaNs are
    skipped)."""
    for i in pk.grid_stride(numel):
        r = div_by(i, out3, m_3, wide=wide)
        o3 = i - r * out3
        q = div_by(r, out2, m_2, wide=wide)
        o2 = r - q * out2
        b = div_by(q, info[1], m_c, wide=wide)
        c = q - b * info[1]
        s = src + b * info[4] + c * info[5] + o2 * w_stride * info[6] + o3 * h_stride * info[7]
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


@pk.kernel
def pool2d_op(src_numel: usize, w_k: usize, h_k: usize, w_stride: usize, h_stride: usize, info: ConstPtr[usize],
              src: ConstPtr[T], dst: Ptr[T], *, T, A, MAX, NARROW):
    """avg_pool2d (``MAX`` false) and max_pool2d: candle's "w" is dim 2, "h" dim 3."""
    out2 = pool_extent(info[2], w_k, w_stride)
    out3 = pool_extent(info[3], h_k, h_stride)
    numel = info[0] * info[1] * out2 * out3
    if numel <= NARROW:
        pool2d_loop(numel, w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, divisor_magic(out3),
                    divisor_magic(out2), divisor_magic(info[1]), A=A, MAX=MAX, wide=False)
    else:
        pool2d_loop(numel, w_k, h_k, w_stride, h_stride, out2, out3, info, src, dst, u64(0), u64(0), u64(0), A=A,
                    MAX=MAX, wide=True)


@pk.func
def nearest_loop(numel: usize, w_out: usize, h_out: usize, w_scale: f64, h_scale: f64, info: ConstPtr[usize],
                 src: ConstPtr[T], dst: Ptr[T], m_h: u64, m_w: u64, m_c: u64, *, wide):
    for i in pk.grid_stride(numel):
        r = div_by(i, h_out, m_h, wide=wide)
        o3 = i - r * h_out
        q = div_by(r, w_out, m_w, wide=wide)
        o2 = r - q * w_out
        b = div_by(q, info[1], m_c, wide=wide)
        s2 = min(usize(f64(o2) * w_scale), info[2] - 1)
        s3 = min(usize(f64(o3) * h_scale), info[3] - 1)
        dst[i] = src[b * info[4] + (q - b * info[1]) * info[5] + s2 * info[6] + s3 * info[7]]


@pk.kernel
def upsample_nearest2d_op(w_out: usize, h_out: usize, w_scale: f64, h_scale: f64, info: ConstPtr[usize],
                          src: ConstPtr[T], dst: Ptr[T], *, T, NARROW):
    """candle's "w" is dim 2: source ``min(floor(o * scale), in - 1)`` along dims 2 and 3."""
    numel = info[0] * info[1] * w_out * h_out
    if info[2] == 0 or info[3] == 0:  # nothing to read (the wrapper refuses this)
        return
    if numel <= NARROW:
        nearest_loop(numel, w_out, h_out, w_scale, h_scale, info, src, dst, divisor_magic(h_out), divisor_magic(w_out),
                     divisor_magic(info[1]), wide=False)
    else:
        nearest_loop(numel, w_out, h_out, w_scale, h_scale, info, src, dst, u64(0), u64(0), u64(0), wide=True)


@pk.func
def bilinear_loop(numel: usize, w_out: usize, h_out: usize, align_corners: bool, scale_h: f64, scale_w: f64,
                  info: ConstPtr[usize], src: ConstPtr[T], dst: Ptr[T], m_w: u64, m_h: u64, m_c: u64, *, wide):
    """PyTorch's interpolation in f64. A plain strided loop, one output a thread a step: an output
    gathers four inputs, so a grid-stride tile of several outputs gains no vector access and its staged
    copies spill registers."""
    h_in = info[2]
    w_in = info[3]
    for i in range(pk.global_id(), numel, usize(pk.grid_dim.x) * usize(pk.block_dim.x)):
        r = div_by(i, w_out, m_w, wide=wide)
        ow = i - r * w_out
        q = div_by(r, h_out, m_h, wide=wide)
        oh = r - q * h_out
        b = div_by(q, info[1], m_c, wide=wide)
        s = src + b * info[4] + (q - b * info[1]) * info[5]
        hr = bilinear_source(oh, scale_h, align_corners)
        wr = bilinear_source(ow, scale_w, align_corners)
        h0 = min(usize(hr), h_in - 1)
        w0 = min(usize(wr), w_in - 1)
        h1 = min(h0 + 1, h_in - 1)
        w1 = min(w0 + 1, w_in - 1)
        lh = min(max(hr - f64(h0), 0.0), 1.0)
        lw = min(max(wr - f64(w0), 0.0), 1.0)
        v00 = f64(s[h0 * info[6] + w0 * info[7]])
        v01 = f64(s[h0 * info[6] + w1 * info[7]])
        v10 = f64(s[h1 * info[6] + w0 * info[7]])
        v11 = f64(s[h1 * info[6] + w1 * info[7]])
        top = (1.0 - lw) * v00 + lw * v01
        bottom = (1.0 - lw) * v10 + lw * v11
        dst[i] = T((1.0 - lh) * top + lh * bottom)


@pk.kernel
def upsample_bilinear2d_op(w_out: usize, h_out: usize, align_corners: bool, has_scale_h: bool, scale_h_factor: f64,
                           has_scale_w: bool, scale_w_factor: f64, info: ConstPtr[usize], src: ConstPtr[T],
                           dst: Ptr[T], *, T, NARROW):
    """Genuine NCHW naming here: h is dim 2, w dim 3."""
    if info[2] == 0 or info[3] == 0:  # nothing to read (the wrapper refuses this)
        return
    scale_h = bilinear_scale(info[2], h_out, align_corners, has_scale_h, scale_h_factor)
    scale_w = bilinear_scale(info[3], w_out, align_corners, has_scale_w, scale_w_factor)
    numel = info[0] * info[1] * h_out * w_out
    if numel <= NARROW:
        bilinear_loop(numel, w_out, h_out, align_corners, scale_h, scale_w, info, src, dst, divisor_magic(w_out),
                      divisor_magic(h_out), divisor_magic(info[1]), wide=False)
    else:
        bilinear_loop(numel, w_out, h_out, align_corners, scale_h, scale_w, info, src, dst, u64(0), u64(0), u64(0),
                      wide=True)


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
    "upsample_bilinear2d": (upsample_bilinear2d_op, dict(NARROW=NARROW)),
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
