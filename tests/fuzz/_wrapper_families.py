"""Random arguments against the stdlib wrappers beyond the elementwise ones (reduce, indexing, sort,
conv, matmul, quantized), for ``_wrapper_cases.py``. Each op is a pair: ``draw(data)`` makes the call's
arguments (valid, edge-case or wrong on purpose) and the NumPy reference that says what the answer
must be, or raises when the call is invalid; pykern must agree or raise a clear error.

Inputs stay small and the dtypes few per op: every new (kernel, dtype) costs a compile on the CPU
target, and the point is the argument handling, not the arithmetic (the family tests cover that).
"""
from __future__ import annotations

import ml_dtypes  # noqa: F401 - NumPy learns bf16 / fp8
import numpy as np
from gguf import GGMLQuantizationType, quants
from hypothesis import strategies as st

import pykern as pk
from pykern.runtime.array import DeviceArray
import stdlib_kernels as sk
from stdlib_kernels import cast, conv_launch, fill, indexing, matmul, quantized_api, reduce_launch, sort

DEV = pk.device("cpu")


class Invalid(Exception):
    """The reference's verdict that the call is invalid: pykern must raise a clear error."""


def values(draw, shape, dtype):
    """A host array of small values; integers and floats with ties, so stability and first-wins matter."""
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    host = rng.integers(-4, 5, size=shape).astype(np.float64) * draw(st.sampled_from([1.0, 0.5]))
    if np.dtype(dtype).kind == "u":
        host = np.abs(host)
    return host.astype(dtype)


def placed(draw, host):
    """``host`` on the device as a contiguous array, a transposed view, an offset view or a NumPy array."""
    kind = draw(st.sampled_from(["array", "array", "transposed", "offset", "numpy"]))
    if kind == "numpy":
        return host
    if kind == "transposed" and host.ndim >= 2:
        return DEV.to_device(np.ascontiguousarray(np.swapaxes(host, -1, -2))).transpose()
    if kind == "offset" and host.size:
        flat = np.concatenate([np.zeros(3, host.dtype), host.reshape(-1)])
        return DEV.to_device(flat).offset_view(3, host.shape)
    return DEV.to_device(host)


def shape_of(draw, min_dims=1, max_dims=3, max_side=5):
    return tuple(draw(st.lists(st.integers(0, max_side), min_size=min_dims, max_size=max_dims)))


def any_dim(draw, ndim):
    """Mostly valid dims (negative ones too), sometimes out of range."""
    return draw(st.integers(-ndim - 1, ndim)) if ndim else draw(st.integers(-1, 1))


def axis(dim, ndim):
    if not -ndim <= dim < ndim:
        raise Invalid(f"dim {dim} for {ndim} dims")
    return dim % ndim


# ---- reduce --------------------------------------------------------------------------------------------
def draw_reduce(draw):
    op = draw(st.sampled_from(["sum", "max", "argmax", "argmin", "softmax", "rms_norm", "layer_norm"]))
    dtype = draw(st.sampled_from([np.float32, np.float16, np.uint32] if op in ("sum", "max", "argmax", "argmin")
                                 else [np.float32, np.float16, np.int64]))
    host = values(draw, shape_of(draw, 0 if op in ("sum", "max") else 1), dtype)
    x = placed(draw, host)
    keepdim = draw(st.booleans())
    if op in ("sum", "max"):
        dims = draw(st.one_of(st.none(), st.lists(st.integers(-1, max(host.ndim, 1)), max_size=2)))
        call = (reduce_launch.reduce_sum if op == "sum" else reduce_launch.reduce_max)
        return op, lambda: call(x, dims, keepdim), lambda: ref_fold(op, host, dims, keepdim)
    if op in ("argmax", "argmin"):
        dim = any_dim(draw, host.ndim)
        call = reduce_launch.argmax if op == "argmax" else reduce_launch.argmin
        return op, lambda: call(x, dim, keepdim), lambda: ref_arg(op, host, dim, keepdim)
    if op == "softmax":
        return op, lambda: reduce_launch.softmax_last_dim(x), lambda: ref_softmax(contiguous(x, host))
    n = host.shape[-1]
    alpha_len = draw(st.sampled_from([n, n, n + 1, max(n - 1, 0)]))
    alpha = values(draw, (alpha_len,), dtype)
    beta = values(draw, (alpha_len,), dtype)
    eps = draw(st.sampled_from([1e-5, 0.5]))
    if op == "rms_norm":
        return op, lambda: reduce_launch.rms_norm(x, DEV.to_device(alpha), eps), \
            lambda: ref_norm(contiguous(x, host), alpha, None, eps)
    return op, lambda: reduce_launch.layer_norm(x, DEV.to_device(alpha), DEV.to_device(beta), eps), \
        lambda: ref_norm(contiguous(x, host), alpha, beta, eps)


def contiguous(x, host):
    """candle-nn's softmax and norms take contiguous rows only (``input has to be contiguous``)."""
    if isinstance(x, DeviceArray) and not x.is_contiguous:
        raise Invalid("a strided input to a row kernel")
    return host


def ref_fold(op, host, dims, keepdim):
    dims = list(range(host.ndim)) if dims is None else dims
    if any(not -host.ndim <= d < host.ndim for d in dims) or len({d % host.ndim for d in dims}) != len(dims):
        raise Invalid("bad dims")
    axes = tuple(d % host.ndim for d in dims) if host.ndim else ()
    if op == "max":
        if host.size == 0:
            raise Invalid("max of an empty tensor")
        return np.max(host, axis=axes, keepdims=keepdim) if axes else host.copy()
    wide = host.astype(np.float64 if host.dtype.kind == "f" else np.uint64)
    total = np.sum(wide, axis=axes, keepdims=keepdim) if axes else wide
    return np.asarray(total).astype(host.dtype)  # integer sums wrap


def ref_arg(op, host, dim, keepdim):
    d = axis(dim, host.ndim)
    if host.size == 0:
        raise Invalid("argmax of an empty tensor")
    got = (np.argmax if op == "argmax" else np.argmin)(host, axis=d)  # the first extremum, as the kernels
    return np.expand_dims(got, d).astype(np.uint32) if keepdim else got.astype(np.uint32)


def ref_softmax(host):
    if host.dtype.kind != "f":
        raise Invalid("softmax of integers")
    x = host.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True)) if x.size else x
    return (e / e.sum(axis=-1, keepdims=True) if x.size else x).astype(host.dtype)


def ref_norm(host, alpha, beta, eps):
    if host.dtype.kind != "f" or len(alpha) != host.shape[-1]:
        raise Invalid("integers or alpha of the wrong length")
    x = host.astype(np.float64)
    if x.size == 0:
        return host.copy()
    if beta is None:
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * alpha
    else:
        mean = x.mean(axis=-1, keepdims=True)
        y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps) * alpha + beta
    return y.astype(host.dtype)


# ---- indexing ------------------------------------------------------------------------------------------
INDEX_DTYPES = [np.uint8, np.uint32, np.int64, np.float32]  # float ids: a TypeError


def draw_ids(draw, shape, size):
    dtype = draw(st.sampled_from(INDEX_DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    hi = size + draw(st.sampled_from([0, 0, 0, 2]))  # sometimes out of range
    ids = rng.integers(0, max(hi, 1), size=shape)
    if np.dtype(dtype).kind in "ui" and ids.size and draw(st.booleans()):
        ids.reshape(-1)[0] = np.iinfo(dtype).max  # the sentinel: no element
    if dtype == np.int64 and ids.size and draw(st.integers(0, 4)) == 0:
        ids.reshape(-1)[-1] = -1
    return ids.astype(dtype)


def check_ids(ids, size):
    if ids.dtype.kind == "f":
        raise Invalid("float ids")
    sentinel = np.iinfo(ids.dtype).max
    wide = ids.astype(np.int64) if ids.dtype != np.uint64 else ids
    if ((wide != sentinel) & ((wide < 0) | (wide >= size))).any():
        raise Invalid("index out of range")
    return wide != sentinel


def draw_indexing(draw):
    op = draw(st.sampled_from(["index_select", "gather", "scatter_add", "index_add", "scatter", "embedding"]))
    dtype = draw(st.sampled_from([np.float32, ml_dtypes.bfloat16, np.uint8, np.int64]))
    host = values(draw, shape_of(draw), dtype)
    dim = any_dim(draw, host.ndim)
    d = dim % host.ndim if -host.ndim <= dim < host.ndim else 0
    size = host.shape[d]
    if op == "embedding":
        ids = draw_ids(draw, shape_of(draw, 0, 2, 3), host.shape[0])
        table = placed(draw, host)
        return op, lambda: indexing.embedding(ids, table), lambda: ref_embedding(ids, host)
    if op == "index_select":
        ids = draw_ids(draw, (draw(st.integers(0, 4)),), size)
        x = placed(draw, host)
        return op, lambda: indexing.index_select(x, ids, dim), lambda: ref_select(host, ids, dim)
    k = draw(st.integers(0, 4))
    other = host.shape[:d] + (k,) + host.shape[d + 1:]
    if op == "gather":
        ids = draw_ids(draw, other, size)
        x = placed(draw, host)
        return op, lambda: indexing.gather(x, dim, ids), lambda: ref_gather(host, dim, ids)
    src = values(draw, other, dtype)
    ids = draw_ids(draw, (k,) if op == "index_add" else other, size)
    x = DEV.to_device(host)
    call = getattr(indexing, op)
    return op, lambda: call(x, dim, ids, src), lambda: ref_add(op, host, dim, ids, src)


def ref_select(host, ids, dim):
    d = axis(dim, host.ndim)
    keep = check_ids(ids, host.shape[d])
    if host.shape[d] == 0:  # only sentinels: zeros
        return np.zeros(host.shape[:d] + ids.shape + host.shape[d + 1:], host.dtype)
    taken = np.take(host, np.where(keep, ids.astype(np.int64), 0), axis=d)
    mask = keep.reshape((1,) * d + (-1,) + (1,) * (host.ndim - d - 1))
    return np.where(mask, taken, np.zeros((), host.dtype)).astype(host.dtype)


def ref_embedding(ids, host):
    if host.ndim != 2:
        raise Invalid("the table must be 2-D")
    flat = ref_select(host, ids.reshape(-1), 0)
    return flat.reshape(ids.shape + host.shape[1:])


def ref_gather(host, dim, ids):
    d = axis(dim, host.ndim)
    keep = check_ids(ids, host.shape[d])
    if host.shape[d] == 0:
        return np.zeros(ids.shape, host.dtype)
    taken = np.take_along_axis(host, np.where(keep, ids.astype(np.int64), 0), axis=d)
    return np.where(keep, taken, np.zeros((), host.dtype)).astype(host.dtype)


def ref_add(op, host, dim, ids, src):
    d = axis(dim, host.ndim)
    keep = check_ids(ids, host.shape[d])
    out = host.astype(np.float64 if host.dtype.kind == "f" or host.dtype == ml_dtypes.bfloat16 else np.int64)
    if op == "scatter":  # the last writer along dim wins, as candle's column kernel
        out = host.copy()
        for pos in sorted(zip(*np.nonzero(keep)), key=lambda p: p[d]):
            dst = list(pos)
            dst[d] = int(ids[pos])
            out[tuple(dst)] = src[pos]
        return out
    if op == "index_add":
        for j in np.nonzero(keep)[0]:
            dst = [slice(None)] * host.ndim
            sel = list(dst)
            dst[d], sel[d] = int(ids[j]), j
            out[tuple(dst)] += src[tuple(sel)]
    else:
        for pos in zip(*np.nonzero(keep)):
            dst = list(pos)
            dst[d] = int(ids[pos])
            out[tuple(dst)] += src[pos]
    return out.astype(host.dtype)  # integers wrap as the kernels' adds do


# ---- sort ----------------------------------------------------------------------------------------------
def draw_sort(draw):
    op = draw(st.sampled_from(["argsort", "argsort", "sort", "topk"]))
    dtype = draw(st.sampled_from([np.float32, np.uint8, np.int64, np.float16]))
    host = values(draw, shape_of(draw, 1, 2, 9), dtype)
    x = placed(draw, host)
    dim = any_dim(draw, host.ndim)
    if op == "argsort":
        desc, candle = draw(st.booleans()), draw(st.booleans())
        return op, lambda: sort.argsort(x, dim, desc, candle_shape=candle), lambda: ref_argsort(host, dim, desc)
    if op == "sort":
        desc = draw(st.booleans())
        return op, lambda: sort.sort(x, dim, desc), lambda: ref_topk(host, host.shape[dim % host.ndim] if
                                                                    -host.ndim <= dim < host.ndim else 0, dim, desc)
    k = draw(st.integers(-1, 10))
    largest = draw(st.booleans())
    return op, lambda: sort.topk(x, k, dim, largest), lambda: ref_topk(host, k, dim, largest)


def stable_order(row, descending):
    """Python's sort is stable, ``reverse=True`` included: equal keys (and -0.0, 0.0) keep index order."""
    return sorted(range(len(row)), key=lambda i: float(row[i]), reverse=descending)


def ref_argsort(host, dim, descending):
    d = axis(dim, host.ndim)
    moved = np.moveaxis(host, d, -1)
    if moved.size == 0:
        return np.zeros(host.shape, np.uint32)
    order = np.array([stable_order(r, descending) for r in moved.reshape(-1, moved.shape[-1])], np.uint32)
    return np.moveaxis(order.reshape(moved.shape), -1, d)


def ref_topk(host, k, dim, largest):
    d = axis(dim, host.ndim)
    if not 0 <= k <= host.shape[d]:
        raise Invalid("k out of range")
    idx = np.take(ref_argsort(host, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(host, idx.astype(np.int64), axis=d), idx


# ---- conv ----------------------------------------------------------------------------------------------
def draw_conv(draw):
    op = draw(st.sampled_from(["conv2d", "conv1d", "conv_transpose1d", "conv_transpose2d", "max_pool2d",
                               "avg_pool2d", "upsample_nearest2d", "upsample_bilinear2d"]))
    dtype = draw(st.sampled_from([np.float32, np.float16] if op == "upsample_bilinear2d" else
                                 [np.float32, np.float16, np.uint8]))
    spatial = 1 if op.endswith("1d") else 2
    b, c = draw(st.integers(1, 2)), draw(st.integers(0, 3))
    sides = tuple(draw(st.integers(0, 6)) for _ in range(spatial))
    host = values(draw, (b, c) + sides, dtype)
    x = placed(draw, host)
    if op.startswith("conv_transpose"):
        kern = tuple(draw(st.integers(1, 3)) for _ in range(spatial))
        w = values(draw, (draw(st.sampled_from([c, c, c + 1])), draw(st.integers(1, 3))) + kern, dtype)
        stride, padding, out_pad, dilation = (draw(st.integers(lo, 2)) for lo in (1, 0, 0, 1))
        call = getattr(conv_launch, op)
        return op, lambda: call(x, w, stride, padding, out_pad, dilation), \
            lambda: ref_conv_transpose(host, w, stride, padding, out_pad, dilation)
    if op == "upsample_bilinear2d":
        size = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
        corners = draw(st.booleans())
        return op, lambda: conv_launch.upsample_bilinear2d(x, size, align_corners=corners), \
            lambda: ref_bilinear(host, size, corners)
    if op.startswith("conv"):
        c_in = draw(st.sampled_from([c, c, c + 1]))  # sometimes the wrong channel count
        kern = tuple(draw(st.integers(1, 3)) for _ in range(spatial))
        w = values(draw, (draw(st.integers(1, 3)), c_in) + kern, draw(st.sampled_from([dtype, dtype, np.float64])))
        stride, padding, dilation = draw(st.integers(0, 2)), draw(st.integers(-1, 2)), draw(st.integers(1, 2))
        call = conv_launch.conv2d if spatial == 2 else conv_launch.conv1d
        return op, lambda: call(x, w, stride, padding, dilation), lambda: ref_conv(host, w, stride, padding, dilation)
    if op == "upsample_nearest2d":
        size = (draw(st.integers(0, 7)), draw(st.integers(1, 7)))
        return op, lambda: conv_launch.upsample_nearest2d(x, size), lambda: ref_nearest(host, size)
    k = (draw(st.integers(0, 3)), draw(st.integers(1, 3)))
    stride = draw(st.sampled_from([None, 1, 2]))
    call = getattr(conv_launch, op)
    return op, lambda: call(x, k, stride), lambda: ref_pool(op, host, k, stride)


def ref_conv(host, w, stride, padding, dilation):
    spatial = host.ndim - 2
    if w.dtype != host.dtype or w.shape[1] != host.shape[1] or stride < 1 or padding < 0:
        raise Invalid("dtypes, channels, stride or padding")
    pads = [(0, 0), (0, 0)] + [(padding, padding)] * spatial
    xp = np.pad(host.astype(np.float64), pads)
    kern = w.shape[2:]
    outs = [(xp.shape[2 + i] - dilation * (kern[i] - 1) - 1) // stride + 1 for i in range(spatial)]
    if any(o <= 0 for o in outs):
        raise Invalid("kernel larger than the padded input")
    out = np.zeros((host.shape[0], w.shape[0]) + tuple(outs))
    wd = w.astype(np.float64)
    for tap in np.ndindex(*kern):
        window = tuple(slice(t * dilation, t * dilation + (o - 1) * stride + 1, stride) for t, o in zip(tap, outs))
        out += np.einsum("bc...,oc->bo...", xp[(slice(None), slice(None)) + window], wd[(slice(None), slice(None)) + tap])
    return out.astype(host.dtype) if host.dtype.kind == "f" else out.astype(np.int64).astype(host.dtype)


def ref_conv_transpose(host, w, stride, padding, out_pad, dilation):
    """Every input element scattered through every tap (PyTorch's definition)."""
    spatial = host.ndim - 2
    if w.shape[0] != host.shape[1] or out_pad >= max(stride, dilation):
        raise Invalid("channels or output_padding")
    kern = w.shape[2:]
    outs = [(host.shape[2 + i] - 1) * stride - 2 * padding + dilation * (kern[i] - 1) + out_pad + 1
            for i in range(spatial)]
    if any(o <= 0 for o in outs):
        raise Invalid("no output")
    full = np.zeros((host.shape[0], w.shape[1]) + tuple(o + 2 * padding for o in outs))
    xd, wd = host.astype(np.float64), w.astype(np.float64)
    for pos in np.ndindex(*host.shape[2:]):
        for tap in np.ndindex(*kern):
            at = tuple(p * stride + t * dilation for p, t in zip(pos, tap))
            full[(slice(None), slice(None)) + at] += xd[(slice(None), slice(None)) + pos] @ wd[(slice(None), slice(None)) + tap]
    out = full[(slice(None), slice(None)) + tuple(slice(padding, padding + o) for o in outs)]
    return out.astype(host.dtype) if host.dtype.kind == "f" else out.astype(np.int64).astype(host.dtype)


def ref_bilinear(host, size, align_corners):
    """PyTorch's bilinear source index: ``(o + 0.5) * in/out - 0.5`` clamped at 0, or ``o * (in-1)/(out-1)``."""
    b, c, h, w = host.shape
    if h * w == 0 and b * c:
        raise Invalid("empty image")

    def taps(n_in, n_out):
        if align_corners:
            src = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        else:
            src = np.maximum((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0.0)
        lo = np.minimum(np.floor(src).astype(np.int64), max(n_in - 1, 0))
        return lo, np.minimum(lo + 1, max(n_in - 1, 0)), src - lo
    if host.size == 0:
        return np.zeros((b, c) + tuple(size), host.dtype)
    (r0, r1, fr), (c0, c1, fc) = taps(h, size[0]), taps(w, size[1])
    x = host.astype(np.float64)
    top = x[:, :, r0][..., c0] * (1 - fc) + x[:, :, r0][..., c1] * fc
    bottom = x[:, :, r1][..., c0] * (1 - fc) + x[:, :, r1][..., c1] * fc
    return (top * (1 - fr)[:, None] + bottom * fr[:, None]).astype(host.dtype)


def ref_pool(op, host, k, stride):
    kh, kw = k
    sh, sw = (k if stride is None else (stride, stride))
    if kh < 1 or kw < 1:
        raise Invalid("kernel size")
    b, c, h, w = host.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise Invalid("kernel larger than the input")
    out = np.zeros((b, c, oh, ow), np.float64)
    for i, j in np.ndindex(oh, ow):
        win = host[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw].astype(np.float64)
        out[:, :, i, j] = win.max(axis=(2, 3)) if op == "max_pool2d" else (
            win.sum(axis=(2, 3)) / (kh * kw) if host.dtype.kind == "f" else win.sum(axis=(2, 3)) // (kh * kw))
    return out.astype(host.dtype)


def ref_nearest(host, size):
    oh, ow = size
    if oh < 1 or ow < 1:
        raise Invalid("size")
    b, c, h, w = host.shape
    if h * w == 0 and b * c:
        raise Invalid("empty image")
    rows = np.minimum((np.arange(oh) * (h / oh)).astype(np.int64), max(h - 1, 0))
    cols = np.minimum((np.arange(ow) * (w / ow)).astype(np.int64), max(w - 1, 0))
    return host[:, :, rows][:, :, :, cols] if host.size else np.zeros((b, c, oh, ow), host.dtype)


# ---- matmul and quantized ------------------------------------------------------------------------------
def draw_matmul(draw):
    dtype = draw(st.sampled_from([np.float32, np.float16, ml_dtypes.bfloat16]))
    m, k, n = (draw(st.integers(0, 9)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 2), max_size=1)))
    a = values(draw, batch + (m, k), dtype)
    b = values(draw, batch + (draw(st.sampled_from([k, k, k + 1])), n), draw(st.sampled_from([dtype, dtype, np.float64])))
    xa, xb = placed(draw, a), placed(draw, b)
    return "matmul", lambda: matmul.matmul(xa, xb), lambda: ref_matmul(a, b)


def ref_matmul(a, b):
    if a.dtype != b.dtype or a.shape[-1] != b.shape[-2]:
        raise Invalid("dtypes or inner sizes")
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)


def draw_quantized(draw):
    name = draw(st.sampled_from(["q4_0", "q8_0", "q5_1"]))  # formats gguf can also quantize
    qt = GGMLQuantizationType[name.upper()]
    block = quants.GGML_QUANT_SIZES[qt][0]
    rows, cols = draw(st.integers(0, 3)), block * draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    blocks = quants.quantize(rng.standard_normal((rows, cols)).astype(np.float32), qt)
    shape = (rows, cols + draw(st.sampled_from([0, 0, 0, 1, block])))  # sometimes not what the bytes hold
    dtype = draw(st.sampled_from([pk.f32, pk.f16]))
    what = draw(st.sampled_from(["dequantize", "dequantize", "matmul", "get_rows"]))
    if what == "matmul":
        x = rng.standard_normal((draw(st.integers(0, 10)), shape[1])).astype(np.float32)
        return f"{name}.matmul", lambda: quantized_api.matmul(DEV.to_device(blocks.reshape(-1)), name, x, shape=shape), \
            lambda: ref_qmatmul(blocks, qt, shape, rows, cols, x)
    if what == "get_rows":
        ids = rng.integers(0, rows + 1, size=draw(st.integers(0, 4))).astype(np.uint32)
        return f"{name}.get_rows", lambda: quantized_api.get_rows(DEV.to_device(blocks.reshape(-1)), name, shape, ids), \
            lambda: ref_get_rows(blocks, qt, shape, rows, cols, ids)

    def want():
        return dequantized(blocks, qt, shape, rows, cols).astype(dtype.np)
    return name, lambda: quantized_api.dequantize(DEV.to_device(blocks.reshape(-1)), name, shape, dtype), want


def dequantized(blocks, qt, shape, rows, cols):
    if shape[1] % quants.GGML_QUANT_SIZES[qt][0] or (rows and shape[1] != cols):
        raise Invalid("shape does not match the blocks")
    return quants.dequantize(blocks, qt).reshape(shape) if rows else np.zeros(shape, np.float32)


def ref_qmatmul(blocks, qt, shape, rows, cols, x):
    """``x @ W.T``; the activations are quantized to q8_1 (8 bits, 1/127 of a block's largest value), so
    each output may be off by about 1/127 of ``|x| @ |W|.T``."""
    w = dequantized(blocks, qt, shape, rows, cols).astype(np.float64)
    return Near((x @ w.T).astype(np.float32), 2e-2 * (np.abs(x) @ np.abs(w).T) + 1e-5)


def ref_get_rows(blocks, qt, shape, rows, cols, ids):
    w = dequantized(blocks, qt, shape, rows, cols)
    if (ids >= rows).any():
        raise Invalid("a row out of range")
    return w[ids.astype(np.int64)].astype(np.float32)


class Near:
    """A reference with its own absolute bound per element."""

    def __init__(self, want, atol):
        self.want, self.atol = want, atol


# ---- cast and fill --------------------------------------------------------------------------------------
CAST_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.uint8, np.uint32, np.int64, np.float64]


def draw_cast(draw):
    op = draw(st.sampled_from(["to", "fill"]))
    host = values(draw, shape_of(draw, 0), draw(st.sampled_from(CAST_DTYPES)))
    if op == "fill":  # in place, through any view: the whole view is set, the rest of the buffer is not
        base = np.zeros((2,) + host.shape, host.dtype)
        buf = DEV.to_device(base)
        view = buf.transpose() if host.ndim >= 1 and draw(st.booleans()) else buf
        value = draw(st.sampled_from([2.5, -1.0, 300.0, float("nan")]))
        return op, lambda: (cast_fill(view, value), buf)[1], lambda: ref_fill(base, value)
    dtype = draw(st.sampled_from(CAST_DTYPES + [np.complex64]))
    x = placed(draw, host)
    return op, lambda: cast.to(x, dtype), lambda: ref_cast(host, dtype)


def cast_fill(view, value):
    fill.fill(view, value)


def saturated(v, dtype):
    """Rust's ``as`` from a float to an int: truncate, saturate, NaN to 0 (candle's CPU casts)."""
    if np.dtype(dtype).kind in "ui":
        info = np.iinfo(dtype)
        v = np.nan_to_num(np.trunc(np.asarray(v, np.float64)), nan=0.0)
        return np.clip(v, info.min, info.max).astype(dtype)
    return np.asarray(v, np.float64).astype(dtype)


def ref_fill(base, value):
    return np.full(base.shape, saturated(value, base.dtype), base.dtype)


def ref_cast(host, dtype):
    if np.dtype(dtype).kind == "c":
        raise Invalid("complex")
    if host.dtype.kind in "ui":
        wide = host.astype(np.int64)
        if np.dtype(dtype).kind in "ui":  # integer casts wrap (Rust's ``as``)
            return wide.astype(dtype)
        return wide.astype(np.float64).astype(dtype)
    return saturated(host.astype(np.float64), dtype)


FAMILIES = {"cast": draw_cast, "reduce": draw_reduce, "indexing": draw_indexing, "sort": draw_sort, "conv": draw_conv,
            "matmul": draw_matmul, "quantized": draw_quantized}
#: with ``_wrapper_cases.py``'s elementwise ops (and fill's copy2d), every family's wrappers
assert set(FAMILIES) | {"affine", "binary", "fill", "ternary", "unary"} == {m.name for m in sk.MODULES} | {"matmul"}


def tolerance(want) -> float:
    """Loose: the reference is computed in f64; 16-bit results round once more."""
    return 2e-2 if want.dtype in (np.float16, ml_dtypes.bfloat16) else 1e-4


def compare(op: str, got, want) -> None:
    if isinstance(want, Near):
        host = got.to_host()
        assert host.shape == want.want.shape, f"{op}: shape {host.shape}, NumPy's {want.want.shape}"
        err = np.abs(host.astype(np.float64) - want.want)
        assert (err <= want.atol).all(), f"{op}: off by {err.max()} (bound {want.atol.reshape(-1)[np.argmax(err)]})"
        return
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            compare(op, g, w)
        return
    host = got.to_host()
    assert host.shape == want.shape, f"{op}: shape {host.shape}, NumPy's {want.shape}"
    assert host.dtype == want.dtype, f"{op}: dtype {host.dtype}, NumPy's {want.dtype}"
    g, w = host.astype(np.float64), want.astype(np.float64)
    tol = tolerance(want)
    ok = np.isclose(g, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max(initial=0))), equal_nan=True)
    assert ok.all(), f"{op}: wrong values {host.reshape(-1)[:8]} vs {want.reshape(-1)[:8]}"


__all__ = ["FAMILIES", "Invalid", "compare"]
