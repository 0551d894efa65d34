"""FILL: ``fill_{dt}(buf, value, numel)``, ``copy2d_{dt}(src, dst, d1, d2, src_s, dst_s)`` (u32 sizes,
64-bit indexing inside) and ``const_set_{dt}(numel, num_dims, info, value, out)`` (strided destination)."""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32, usize

from . import FILL, kernel_name
from ._common import CONTIGUOUS, as_device_array, info_array, launch_stream, layout_kind, strided_index
from ._common import tile_workers
from ._common import from_f64
from pykern.runtime.launch import storage

T = pk.TypeVar("T")
DTYPES = (u8, u32, i64, f32, f64, f16, bf16, f8e4m3)
EXTRA = (i16, i32)  # candle-core requests const_set/copy2d for these; candle-kernels lacks them


@pk.func
def fill_contiguous(out: Ptr[T], value: T, numel: usize):
    """A grid with a thread for every element (candle's launch) stores one element a thread: stores
    keep the memory busy without tiles, whose idle threads cost more here (H100: fill_f32 0.93x torch
    against 0.60x). Other grids stride in 16-byte tiles."""
    g = pk.global_id()
    if usize(pk.grid_dim.x) * usize(pk.block_dim.x) >= numel:
        if g < numel:
            out[g] = value
    else:
        for i in pk.grid_stride(numel):
            out[i] = value


@pk.kernel
def fill_kernel(buf: Ptr[T], value: T, numel: usize, *, T):
    fill_contiguous(buf, value, numel)


@pk.kernel
def copy2d_kernel(src: ConstPtr[T], dst: Ptr[T], d1: u32, d2: u32, src_s: u32, dst_s: u32, *, T, W):
    """Row by row: the grid's threads form groups of ``per_row`` workers, one per ``W`` elements of a
    row (a 16-byte tile on GPUs), each group copying rows ``r, r + groups, ...`` through
    ``parallel_range`` on the row's own pointers (vector accesses when the row is aligned), so no
    element needs a division. Threads past the last whole group have no row."""
    g = pk.global_id()
    total = usize(pk.block_dim.x) * usize(pk.grid_dim.x)
    per_row = min(usize((d2 + (W - 1)) // W), total)
    groups = total // per_row
    r = g // per_row
    w = pk.u32(g - r * per_row)
    if r >= groups:
        return
    while r < usize(d1):
        s = src + r * usize(src_s)
        d = dst + r * usize(dst_s)
        for j in pk.parallel_range(pk.u32(0), d2, w, pk.u32(per_row)):
            d[j] = s[j]
        r += groups


#: under candle's grid, tiles a worker of ``const_set`` stores (a power of two): its block stores the
#: elements of CONST_SET_SPREAD * W blocks (H100, 2**28 under candle's info: 1 / 2 / 4 / 16 tiles gave
#: f32 0.68 / 0.80 / 0.83 / 0.84 and bf16 0.84 / 0.94 / 0.96 / 0.96 of the null launch;
#: docs/targets/cuda.md, "candle's info")
CONST_SET_SPREAD = 4


@pk.kernel
def const_set_kernel(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], *, T):
    """candle passes ``info`` even for a contiguous destination: see ``set_layout``."""
    if info is None:
        fill_contiguous(out, value, numel)
    else:
        # S = 1 (no spreading) where a thread takes one element a step (AMDGPU, the CPU: no idle threads)
        set_layout(numel, num_dims, info, value, out, W=pk.tile_bytes // T.nbytes if pk.tile_bytes > T.nbytes else 1,
                   S=CONST_SET_SPREAD * (pk.tile_bytes // T.nbytes) if pk.tile_bytes > T.nbytes else 1)


@pk.func
def set_layout(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], *, W, S):
    """``value`` into every element of ``info``'s layout, by workers of tiles of ``W`` elements.
    Under candle's grid (a thread for every element) one block in W is enough: the workers are the
    threads of every ``S``-th block (a power of two, S >= W), each such block storing the elements
    of its S blocks, and the other blocks leave before reading ``info``, running beside the busy
    ones: the workers' first, ``tile_workers``' order, left three blocks in four idle after them
    (f32). Fewer worker blocks (S > W, S / W tiles a thread) pay fewer preambles and rounds of
    loads of ``info`` (docs/targets/cuda.md, "candle's info"). Other grids take ``tile_workers``.
    The workers decide the layout once (``layout_kind``)."""
    g = pk.global_id()
    workers = tile_workers(numel, W=W)
    if S > 1 and usize(pk.grid_dim.x) * usize(pk.block_dim.x) >= numel:  # candle's grid
        if pk.block_idx.x & (S - 1) != 0:  # first: all but one block in S run nothing else
            return
        g = usize(pk.block_idx.x // S) * usize(pk.block_dim.x) + usize(pk.thread_idx.x)
        workers = usize((pk.grid_dim.x + (S - 1)) // S) * usize(pk.block_dim.x)
    elif g >= workers:
        return
    if layout_kind(numel, num_dims, info, N=1, T2D=False) == CONTIGUOUS:
        for i in pk.parallel_range(usize(0), numel, g, workers):
            out[i] = value
    else:
        i = g
        while i < numel:
            out[strided_index(i, num_dims, info, info + num_dims)] = value
            i += workers


for _t in DTYPES + EXTRA:
    if _t in DTYPES:
        FILL.add(fill_kernel.instance(kernel_name("fill", _t), T=_t))
    FILL.add(copy2d_kernel.instance(kernel_name("copy2d", _t), T=_t, W=max(1, 16 // _t.nbytes)),
             const_set_kernel.instance(kernel_name("const_set", _t), T=_t))


def fill(x, value):
    """Set every element of ``x`` (any layout, e.g. a strided view) to ``value``; returns ``x``.

    Launches ``const_set`` as candle does for ``ones``/``full`` (``fill_*`` only covers contiguous buffers)."""
    return const_set(x, value)


def const_set(x, value):
    """candle's ``const_set``: ``value`` (converted as ``T::from_f64``) into every element of ``x``; returns ``x``."""
    x = as_device_array(x)
    if x.size:
        info = info_array(x.device, x.shape, x.strides)
        x.device.get_or_load_func(kernel_name("const_set", x.dtype), FILL)[launch_stream(x.size, x)](
            x.size, x.ndim, info, from_f64(value, x.dtype), storage(x))  # the layout travels in info
    return x


def fill_buffer(x, value):
    """The ``fill_{dt}`` kernel on a contiguous array (candle exports it but never launches it)."""
    x = as_device_array(x)
    if not x.is_contiguous:
        raise ValueError("fill_buffer needs a contiguous array; use fill() for views")
    if x.size:
        x.device.get_or_load_func(kernel_name("fill", x.dtype), FILL)[launch_stream(x.size, x)](x, from_f64(value, x.dtype), x.size)
    return x


def copy2d(src, dst, d1: int, d2: int, src_s: int, dst_s: int, src_o: int = 0, dst_o: int = 0):
    """``dst[dst_o + r*dst_s + c] = src[src_o + r*src_s + c]`` for ``r < d1, c < d2`` (candle's copy2d),
    over the memory ``src`` and ``dst`` cover (a view's storage, as candle's offsets and strides
    address it). Sizes that would reach past either array raise ``ValueError`` before the launch."""
    src, dst = as_device_array(src), as_device_array(dst)
    if src.dtype is not dst.dtype:
        raise ValueError(f"copy2d: dtypes differ ({src.dtype}, {dst.dtype})")
    if src.device is not dst.device:
        raise ValueError(f"copy2d: src is on {src.device}, dst on {dst.device}")
    sizes = {"d1": d1, "d2": d2, "src_s": src_s, "dst_s": dst_s, "src_o": src_o, "dst_o": dst_o}
    for what, v in sizes.items():
        if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or v < 0:
            raise ValueError(f"copy2d: {what} must be a non-negative int, got {v!r}")
        if what not in ("src_o", "dst_o") and v >= 1 << 32:  # the kernel's u32 parameters
            raise ValueError(f"copy2d: {what} = {v} does not fit the kernel's u32 parameter")
    if d1 == 0 or d2 == 0:
        return dst
    src_mem, dst_mem = storage(src), storage(dst)
    for what, mem, stride, offset in (("src", src_mem, src_s, src_o), ("dst", dst_mem, dst_s, dst_o)):
        last = offset + (d1 - 1) * stride + d2  # one past the last element copied
        if last > mem.size:
            raise ValueError(f"copy2d: {d1} rows of {d2} elements at stride {stride} from offset {offset} reach "
                             f"element {last - 1} of {what}, which has {mem.size}")
    if dst_s < d2 and d1 > 1:
        raise ValueError(f"copy2d: dst rows of {d2} elements at stride {dst_s} overlap")
    fn = dst.device.get_or_load_func(kernel_name("copy2d", dst.dtype), FILL)
    fn[launch_stream(d1 * d2, dst)](src_mem.offset_view(src_o, (src_mem.size - src_o,)),
                                    dst_mem.offset_view(dst_o, (dst_mem.size - dst_o,)), d1, d2, src_s, dst_s)
    return dst
