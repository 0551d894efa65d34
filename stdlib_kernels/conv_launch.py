"""Host wrappers for the CONV family, launched the way candle-core's CUDA backend does (spec §5.11),
with PyTorch's argument names (``stride``, ``padding``, ``dilation``, ``output_padding``; no groups).

* ``conv1d`` / ``conv2d``: im2col1d / im2col (the wrappers' own ``im2col1d_rows_*`` / ``im2col_rows_*``
  where ``im2col_rows_ok`` holds; 16-bit inputs with contiguous, aligned rows of an even width
  ``im2col1d_rows_pairs_*`` / ``im2col_rows_pairs_*``, ``im2col_rows_pairs_ok``; 16-bit 3-tap / 3x3
  windows over channels in 8s and rows in 4s ``im2col1d_k3[_narrow]_*`` / ``im2col_3x3_*``,
  ``im2col_vec_ok``), pykern's GEMM (``matmul``) with the weight as ``(c_in*k, c_out)``, then the
  permuting copy (``ucopy``) to ``(b, c_out, ...)``. dtypes the GEMM lacks (f64, u8, u32) take the
  direct ``conv1d_*`` / ``conv2d_*`` kernel.
* ``conv_transpose1d``: the GEMM ``(b, l_in, c_in) x (c_in, c_out*k)`` then col2im1d (pykern's own
  ``col2im1d_rows_*`` where ``col2im1d_rows_ok`` holds, else ``col2im1d_staged_*``; candle's semantics)
  where candle takes it (dilation 1, no padding or output
  padding), else the direct kernel; ``conv_transpose2d``:
  the direct kernel.
* ``avg_pool2d`` / ``max_pool2d`` (no padding), ``upsample_nearest2d`` (candle's in/out scales),
  ``upsample_bilinear2d`` (PyTorch's rules, ``size`` or ``scale_factor``).

A non-contiguous weight is copied to contiguous memory and that copy is multiplied (candle's CUDA
backend copies it and then multiplies the original storage; ``docs/compat.md``). Output sizes follow
PyTorch; a kernel larger than the padded input is an error, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from pykern.runtime.base import DeviceArray
from pykern.runtime.launch import storage

from . import CONV, kernel_name
from ._common import operands
from .conv import (DTYPES, bilinear_down2x_ok, bilinear_int_factor, bilinear_int_launch, col2im1d_launch,
                   col2im1d_rows_launch, col2im1d_rows_ok, im2col_launch, im2col_rows_launch, im2col_rows_ok, im2col_rows_pairs_ok,
                   im2col_vec_launch, im2col_vec_ok, nearest_launch, pool_vec_ok, rows_launch, vec_kernel)
from .matmul import DTYPES as GEMM_DTYPES
from .matmul import matmul
from .unary import copy as ucopy

#: the wrappers' block for the convolution kernels with loops (one output a thread a step)
DIRECT_BLOCK = 256


# ---- argument checks --------------------------------------------------------------------------------
def _pair(v, name: str, dims: int) -> tuple[int, ...]:
    vals = tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * dims
    if len(vals) != dims:
        raise ValueError(f"{name} must be an int or {dims} ints, got {v!r}")
    return vals


def _positive(v: int, name: str) -> int:
    if int(v) != v or v <= 0:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return int(v)


def _non_negative(v: int, name: str) -> int:
    if int(v) != v or v < 0:
        raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return int(v)


def _input(x, weight, op: str, spatial: int, transposed: bool = False):
    """Device arrays of one dtype; input (b, c_in, *s) (an unbatched (c_in, *s) gets b = 1) and weight
    (c_out, c_in, *k) or, transposed, (c_in, c_out, *k). Returns (x, weight, unbatched)."""
    x, weight = operands(op, DTYPES, x, weight, names=("input", "weight"))
    unbatched = x.ndim == spatial + 1
    if unbatched:
        x = x.as_strided((1,) + x.shape, (0,) + x.strides)
    if x.ndim != spatial + 2:
        raise ValueError(f"{op}: input must be (batch, channels, {spatial} spatial dims), got shape {x.shape}")
    if weight.ndim != spatial + 2:
        raise ValueError(f"{op}: weight must have {spatial + 2} dims, got shape {weight.shape}")
    c_in = weight.shape[0] if transposed else weight.shape[1]
    if x.shape[1] != c_in:
        raise ValueError(f"{op}: input has {x.shape[1]} channels, weight expects {c_in} (weight shape {weight.shape})")
    if any(n == 0 for n in weight.shape[2:]):
        raise ValueError(f"{op}: kernel size must be positive, got weight shape {weight.shape}")
    return x, weight, unbatched


def _conv_size(op: str, size: int, k: int, stride: int, padding: int, dilation: int) -> int:
    span = dilation * (k - 1) + 1
    if size + 2 * padding < span:
        raise ValueError(f"{op}: kernel extent {span} (size {k}, dilation {dilation}) is larger than the padded "
                         f"input {size} + 2*{padding}")
    return (size + 2 * padding - span) // stride + 1


def _info(x: DeviceArray, *more: DeviceArray) -> DeviceArray:
    """candle's info: dims and strides of each operand, always uploaded."""
    flat = [v for a in (x, *more) for v in (*a.shape, *a.strides)]
    return x.device.to_device(np.array(flat, np.uint64))


def _direct_launch(numel: int) -> tuple[int, int]:
    return max(1, -(-numel // DIRECT_BLOCK)), DIRECT_BLOCK


def _contiguous(w: DeviceArray) -> DeviceArray:
    return w if w.is_contiguous else ucopy(w)


def _squeeze(out: DeviceArray, unbatched: bool) -> DeviceArray:
    return out.reshape(out.shape[1:]) if unbatched else out


# ---- convolutions -----------------------------------------------------------------------------------
def conv1d(x, weight, stride: int = 1, padding: int = 0, dilation: int = 1):
    """PyTorch's ``F.conv1d`` without bias or groups: x (b, c_in, l) or (c_in, l), weight (c_out, c_in, k)."""
    x, weight, unbatched = _input(x, weight, "conv1d", 1)
    stride, dilation = _positive(stride, "stride"), _positive(dilation, "dilation")
    padding = _non_negative(padding, "padding")
    b, c_in, l_in = x.shape
    c_out, _, k = weight.shape
    l_out = _conv_size("conv1d", l_in, k, stride, padding, dilation)
    dev, dt = x.device, x.dtype
    if b * c_out * l_out == 0:
        return _squeeze(dev.empty((b, c_out, l_out), dt), unbatched)
    if dt in GEMM_DTYPES:
        threads = b * l_out * c_in
        cols = dev.empty((b * l_out, c_in * k), dt)  # (b, l_out, c_in, k)
        if im2col_vec_ok(x, 1, l_out, 1, k, stride, padding, dilation):  # 16-bit, 3 taps, channels-last (conv.py)
            fn = dev.get_or_load_func(kernel_name(vec_kernel(3, c_in)[0], dt), CONV)
            grid = im2col_vec_launch(b, c_in, 1, l_out, 1, k, stride, dilation)
        elif im2col_rows_pairs_ok(x, 1, l_out, 1, k, stride, padding, dilation):  # 16-bit, pairs (conv.py)
            fn = dev.get_or_load_func(kernel_name("im2col1d_rows_pairs", dt), CONV)
            grid = im2col_rows_launch(b, c_in, 1, l_out, 1, k, stride, dilation, dt, dev, one_d=True, pairs=True)
        elif im2col_rows_ok(x, 1, l_out, 1, k, stride, padding, dilation):  # the wrappers' own kernel (conv.py)
            fn = dev.get_or_load_func(kernel_name("im2col1d_rows", dt), CONV)
            grid = im2col_rows_launch(b, c_in, 1, l_out, 1, k, stride, dilation, dt, dev, one_d=True)
        else:
            fn = dev.get_or_load_func(kernel_name("im2col1d", dt), CONV)
            grid = im2col_launch(b, c_in, 1, l_out, 1, k, dt)
        fn[grid](threads, l_out, k, stride, padding, dilation, _info(x), storage(x), cols)
        prod = matmul(cols, _contiguous(weight).reshape(c_out, c_in * k).transpose())  # (b*l_out, c_out)
        out = ucopy(prod.reshape(b, l_out, c_out).transpose(1, 2))
    else:
        out = dev.empty((b, c_out, l_out), dt)
        fn = dev.get_or_load_func(kernel_name("conv1d", dt), CONV)
        fn[_direct_launch(out.size)](x.size, l_out, stride, padding, dilation, _info(x, weight), storage(x),
                                     storage(weight), out)
    return _squeeze(out, unbatched)


def conv2d(x, weight, stride: int = 1, padding: int = 0, dilation: int = 1):
    """PyTorch's ``F.conv2d`` without bias or groups: x (b, c_in, h, w) or (c_in, h, w), weight
    (c_out, c_in, kh, kw); stride, padding and dilation are one value for both dims, as in candle."""
    x, weight, unbatched = _input(x, weight, "conv2d", 2)
    stride, dilation = _positive(stride, "stride"), _positive(dilation, "dilation")
    padding = _non_negative(padding, "padding")
    b, c_in, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    h_out = _conv_size("conv2d", h, kh, stride, padding, dilation)
    w_out = _conv_size("conv2d", w, kw, stride, padding, dilation)
    dev, dt = x.device, x.dtype
    if b * c_out * h_out * w_out == 0:
        return _squeeze(dev.empty((b, c_out, h_out, w_out), dt), unbatched)
    if dt in GEMM_DTYPES:
        cols = dev.empty((b * h_out * w_out, c_in * kh * kw), dt)  # (b, h_out, w_out, c_in, kh, kw)
        if im2col_vec_ok(x, h_out, w_out, kh, kw, stride, padding, dilation):  # 16-bit 3x3, channels-last (conv.py)
            fn = dev.get_or_load_func(kernel_name(vec_kernel(9, c_in)[0], dt), CONV)
            grid = im2col_vec_launch(b, c_in, h_out, w_out, kh, kw, stride, dilation)
        elif im2col_rows_pairs_ok(x, h_out, w_out, kh, kw, stride, padding, dilation):  # 16-bit, pairs (conv.py)
            fn = dev.get_or_load_func(kernel_name("im2col_rows_pairs", dt), CONV)
            grid = im2col_rows_launch(b, c_in, h_out, w_out, kh, kw, stride, dilation, dt, dev, pairs=True)
        elif im2col_rows_ok(x, h_out, w_out, kh, kw, stride, padding, dilation):  # the wrappers' own kernel (conv.py)
            fn = dev.get_or_load_func(kernel_name("im2col_rows", dt), CONV)
            grid = im2col_rows_launch(b, c_in, h_out, w_out, kh, kw, stride, dilation, dt, dev)
        else:
            fn = dev.get_or_load_func(kernel_name("im2col", dt), CONV)
            grid = im2col_launch(b, c_in, h_out, w_out, kh, kw, dt)
        fn[grid](cols.size, h_out, w_out, kh, kw, stride, padding, dilation, _info(x), storage(x), cols)
        prod = matmul(cols, _contiguous(weight).reshape(c_out, c_in * kh * kw).transpose())
        hw = h_out * w_out
        out = ucopy(prod.as_strided((b, c_out, h_out, w_out), (hw * c_out, 1, w_out * c_out, c_out)))
    else:
        out = dev.empty((b, c_out, h_out, w_out), dt)
        fn = dev.get_or_load_func(kernel_name("conv2d", dt), CONV)
        fn[_direct_launch(out.size)](x.size, w_out, h_out, stride, padding, dilation, _info(x, weight), storage(x),
                                     storage(weight), out)
    return _squeeze(out, unbatched)


def _transposed_size(op: str, size: int, k: int, stride: int, padding: int, output_padding: int, dilation: int) -> int:
    if output_padding >= max(stride, dilation):
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than stride {stride} or dilation "
                         f"{dilation}")
    n = (size - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
    if n <= 0:
        raise ValueError(f"{op}: padding {padding} leaves no output for input size {size} and kernel size {k}")
    return n


def conv_transpose1d(x, weight, stride: int = 1, padding: int = 0, output_padding: int = 0, dilation: int = 1):
    """PyTorch's ``F.conv_transpose1d`` without bias or groups: weight (c_in, c_out, k)."""
    x, weight, unbatched = _input(x, weight, "conv_transpose1d", 1, transposed=True)
    stride, dilation = _positive(stride, "stride"), _positive(dilation, "dilation")
    padding, output_padding = _non_negative(padding, "padding"), _non_negative(output_padding, "output_padding")
    b, c_in, l_in = x.shape
    _, c_out, k = weight.shape
    l_out = _transposed_size("conv_transpose1d", l_in, k, stride, padding, output_padding, dilation)
    dev, dt = x.device, x.dtype
    out = dev.empty((b, c_out, l_out), dt)
    if out.size == 0:
        return _squeeze(out, unbatched)
    if (dt in GEMM_DTYPES and x.size and weight.is_contiguous and dilation == 1 and padding == 0
            and output_padding == 0):
        cols = matmul(x.transpose(1, 2), weight.reshape(c_in, c_out * k))  # (b, l_in, c_out * k)
        if col2im1d_rows_ok(cols, l_in, c_out, k, stride, l_out):  # the wrappers' own kernels (conv.py)
            fn = dev.get_or_load_func(kernel_name("col2im1d_rows", dt), CONV)
            grid = col2im1d_rows_launch(b, l_in, c_out, k, stride, dt, dev.target)
        else:
            fn = dev.get_or_load_func(kernel_name("col2im1d_staged", dt), CONV)
            grid = col2im1d_launch(b, l_in, c_out, k, stride, dt)
        fn[grid](out.size, l_out, l_in, c_out, k, stride, cols, out)
    else:
        fn = dev.get_or_load_func(kernel_name("conv_transpose1d", dt), CONV)
        fn[_direct_launch(out.size)](x.size, l_out, stride, padding, output_padding, dilation, _info(x, weight),
                                     storage(x), storage(weight), out)
    return _squeeze(out, unbatched)


def conv_transpose2d(x, weight, stride: int = 1, padding: int = 0, output_padding: int = 0, dilation: int = 1):
    """PyTorch's ``F.conv_transpose2d`` without bias or groups: weight (c_in, c_out, kh, kw)."""
    x, weight, unbatched = _input(x, weight, "conv_transpose2d", 2, transposed=True)
    stride, dilation = _positive(stride, "stride"), _positive(dilation, "dilation")
    padding, output_padding = _non_negative(padding, "padding"), _non_negative(output_padding, "output_padding")
    b, c_in, h, w = x.shape
    _, c_out, kh, kw = weight.shape
    h_out = _transposed_size("conv_transpose2d", h, kh, stride, padding, output_padding, dilation)
    w_out = _transposed_size("conv_transpose2d", w, kw, stride, padding, output_padding, dilation)
    dev, dt = x.device, x.dtype
    out = dev.empty((b, c_out, h_out, w_out), dt)
    if out.size:
        fn = dev.get_or_load_func(kernel_name("conv_transpose2d", dt), CONV)
        fn[_direct_launch(out.size)](x.size, w_out, h_out, stride, padding, output_padding, dilation,
                                     _info(x, weight), storage(x), storage(weight), out)
    return _squeeze(out, unbatched)


# ---- pools and upsampling -----------------------------------------------------------------------------
def _image(x, op: str) -> DeviceArray:
    (x,) = operands(op, DTYPES, x)
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be (batch, channels, height, width), got shape {x.shape}")
    return x


def _pool(op: str, x, kernel_size, stride):
    x = _image(x, op)
    k = tuple(_positive(v, "kernel_size") for v in _pair(kernel_size, "kernel_size", 2))
    s = k if stride is None else tuple(_positive(v, "stride") for v in _pair(stride, "stride", 2))
    b, c, h, w = x.shape
    if h < k[0] or w < k[1]:
        raise ValueError(f"{op}: kernel_size {k} is larger than the input's {h}x{w}")
    out = x.device.empty((b, c, (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1), x.dtype)
    if out.size:  # candle's Pool2D{w_k: k.0, h_k: k.1, ...}: the kernels' "w" is dim 2
        vec = pool_vec_ok(x, k, s, out.size)  # 2x2 windows as words of vector tiles: the wrappers' own kernel
        fn = x.device.get_or_load_func(kernel_name(f"{op}_vec" if vec else op, x.dtype), CONV)
        grid = rows_launch(b * c * out.shape[2], out.shape[3], x.dtype, x.device, tiles=vec)
        fn[grid](x.size, k[0], k[1], s[0], s[1], _info(x), storage(x), out)
    return out


def avg_pool2d(x, kernel_size, stride=None):
    """PyTorch's ``F.avg_pool2d`` without padding (candle has none); stride defaults to kernel_size.
    Floats average in f32 (f64 for f64); u8/u32 divide their wrapped sum, truncating."""
    return _pool("avg_pool2d", x, kernel_size, stride)


def max_pool2d(x, kernel_size, stride=None):
    """PyTorch's ``F.max_pool2d`` without padding; NaNs as candle's CPU fold (``docs/compat.md``)."""
    return _pool("max_pool2d", x, kernel_size, stride)


def upsample_nearest2d(x, size):
    """candle's ``upsample_nearest2d(h, w)``: output (b, c, h, w), source index ``floor(o * in/out)``."""
    x = _image(x, "upsample_nearest2d")
    oh, ow = (_positive(v, "size") for v in _pair(size, "size", 2))
    b, c, h, w = x.shape
    out = x.device.empty((b, c, oh, ow), x.dtype)
    if out.size:
        if h * w == 0:
            raise ValueError(f"upsample_nearest2d: cannot upsample an empty {h}x{w} image to {oh}x{ow}")
        fn = x.device.get_or_load_func(kernel_name("upsample_nearest2d", x.dtype), CONV)
        fn[nearest_launch(x, oh, ow)](oh, ow, h / oh, w / ow, _info(x), storage(x), out)
    return out


def upsample_bilinear2d(x, size=None, scale_factor=None, align_corners: bool = False):
    """PyTorch's ``F.interpolate(mode="bilinear")``: exactly one of ``size`` (h, w) and ``scale_factor``
    (output ``floor(in * scale)``, the scale itself used for the source index unless align_corners)."""
    x = _image(x, "upsample_bilinear2d")
    b, c, h, w = x.shape
    if (size is None) == (scale_factor is None):
        raise ValueError("upsample_bilinear2d: give exactly one of size and scale_factor")
    if size is not None:
        oh, ow = (_positive(v, "size") for v in _pair(size, "size", 2))
        scales = (None, None)
    else:
        scales = tuple(float(v) for v in (scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * 2))
        if len(scales) != 2 or not all(np.isfinite(s) and s > 0 for s in scales):
            raise ValueError(f"upsample_bilinear2d: scale_factor must be positive and finite, got {scale_factor!r}")
        oh, ow = int(np.floor(h * scales[0])), int(np.floor(w * scales[1]))
    out = x.device.empty((b, c, oh, ow), x.dtype)
    if out.size:
        if h * w == 0:
            raise ValueError(f"upsample_bilinear2d: cannot upsample an empty {h}x{w} image to {oh}x{ow}")
        sh, sw = scales
        factor = bilinear_int_factor(x, oh, ow, scales, align_corners)
        if factor:  # exactly 2x or 4x: the wrappers' own kernels (conv.py)
            fn = x.device.get_or_load_func(kernel_name(f"upsample_bilinear2d_{factor}x", x.dtype), CONV)
            grid = bilinear_int_launch(x, factor)
        elif bilinear_down2x_ok(x, oh, ow, scales, align_corners):  # exactly half: likewise
            fn = x.device.get_or_load_func(kernel_name("upsample_bilinear2d_down2x", x.dtype), CONV)
            grid = rows_launch(b * c * oh, ow, x.dtype, x.device)
        else:
            fn = x.device.get_or_load_func(kernel_name("upsample_bilinear2d", x.dtype), CONV)
            grid = rows_launch(b * c * oh, ow, x.dtype, x.device)
        fn[grid](ow, oh, bool(align_corners), sh is not None, sh or 0.0, sw is not None, sw or 0.0, _info(x),
                 storage(x), out)
    return out


__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "avg_pool2d", "max_pool2d",
           "upsample_nearest2d", "upsample_bilinear2d"]
