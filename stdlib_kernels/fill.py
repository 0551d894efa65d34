"""FILL: ``fill_{dt}(buf, value, numel)``, ``copy2d_{dt}(src, dst, d1, d2, src_s, dst_s)`` (u32 sizes,
64-bit indexing inside) and ``const_set_{dt}(numel, num_dims, info, value, out)`` (strided destination)."""
from __future__ import annotations

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i16, i32, i64, u8, u32, usize

from . import FILL, kernel_name
from ._common import CONTIGUOUS, as_device_array, info_array, launch_stream, layout_kind, offset_of, strided_index
from ._common import launch_1d, tile_workers
from ._common import from_f64
from pykern.runtime.launch import storage

T = pk.TypeVar("T")
DTYPES = (u8, u32, i64, f32, f64, f16, bf16, f8e4m3)
EXTRA = (i16, i32)  # candle-core requests const_set/copy2d for these; candle-kernels lacks them


@pk.func
def fill_contiguous(out: Ptr[T], value: T, numel: usize):
    """A grid with a thread for every element (candle's launch) stores one element a thread: stores
    keep the memory busy without tiles, whose idle threads cost more here (docs/targets/cuda.md).
    Other grids stride in 16-byte tiles."""
    g = pk.global_id()
    if usize(pk.grid_dim.x) * usize(pk.block_dim.x) >= numel:
        if g < numel:
            out[g] = value
    else:
        for i in pk.grid_stride(numel):
            out[i] = value


@pk.kernel(loop_strength_reduction={"cuda": False})
def fill_kernel(buf: Ptr[T], value: T, numel: usize, *, T):
    fill_contiguous(buf, value, numel)


@pk.kernel(loop_strength_reduction={"cuda": False}, moves=("T",))
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


#: under candle's grid, the tiles a worker thread of ``const_set`` stores (a power of two): one block in
#: S = CONST_SET_SPREAD * W works, storing its own and the next S - 1 blocks' elements (docs/targets/cuda.md,
#: "candle's info": 4 keeps S what it was, so as many blocks work at mid sizes; 8 was 3 % faster at 2**28)
CONST_SET_SPREAD = 4


@pk.kernel(loop_strength_reduction={"cuda": False})
def const_set_kernel(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], *, T):
    """candle passes ``info`` even for a contiguous destination: see ``set_value``."""
    set_value(numel, num_dims, info, value, out, W=pk.tile_bytes // T.nbytes if pk.tile_bytes > T.nbytes else 1,
              S=CONST_SET_SPREAD * (pk.tile_bytes // T.nbytes) if pk.tile_bytes > T.nbytes else 1)


@pk.func
def set_value(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], *, W, S):
    """``value`` into every element of ``info``'s layout (a null ``info``: contiguous).

    Where a thread takes one element a step (S = 1: AMDGPU, the CPU) every thread works. With tiles
    of W elements, a grid with a thread for every element (candle's) needs one thread in W, and its
    blocks cost more than their stores: 262,144 blocks of 1024 for 2**28 elements, where an empty
    kernel under that grid already takes half of torch's fill (docs/targets/cuda.md). One block in S works (S =
    CONST_SET_SPREAD * W), storing its chunk of S blocks' elements (and every ``step`` on where the
    grid is short of that), and the other blocks leave first, on the fewest instructions: with
    ``info``, on the block index alone (no ``info``, element count or grid size read: a test of the
    grid's size there made candle's launch 16 % slower); with a null ``info``, also where the grid has
    a thread for every element (others, the wrappers' launch, take grid-stride tiles in every block).
    So a short grid passed ``info`` works in one block in S: candle's grid is never short, and the
    wrapper launches strided layouts on it (``const_set_shape``; a contiguous one is passed a null
    ``info``) (docs/targets/cuda.md, "candle's info")."""
    if S == 1:
        if info is None:
            fill_contiguous(out, value, numel)
        else:
            tiled_layout(numel, num_dims, info, value, out, W=W)
        return
    if pk.block_idx.x & u32(S - 1) != 0:  # first: S - 1 blocks in S of candle's grid run nothing else
        if info is not None:
            return
        if usize(pk.grid_dim.x) * usize(pk.block_dim.x) >= numel:
            return
    if info is None and usize(pk.grid_dim.x) * usize(pk.block_dim.x) < numel:
        fill_contiguous(out, value, numel)  # every block: grid-stride tiles
        return
    chunk = usize(S) * usize(pk.block_dim.x)
    step = usize((pk.grid_dim.x + u32(S - 1)) // u32(S)) * chunk  # the working blocks' chunks together
    lo = usize(pk.block_idx.x) * usize(pk.block_dim.x)
    if info is None:
        while lo < numel:
            o = out + lo
            for i in pk.parallel_range(u32(0), u32(min(numel - lo, chunk)), pk.thread_idx.x, pk.block_dim.x):
                o[i] = value
            lo += step
    else:
        spread_layout(numel, num_dims, info, value, out, lo, step, chunk, S=S)


@pk.func
def spread_layout(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], lo: usize,
                  step: usize, chunk: usize, *, S):
    """A working block of ``set_value`` under ``info``: its chunks of ``chunk`` elements from ``lo``
    every ``step``. The layout is decided once (``layout_kind``); a contiguous one takes adjacent
    tiles from the chunk's own pointer (u32 indices), another one element a thread and step over
    all the working threads, in u32 index arithmetic below 2**32 elements (``offset_of``)."""
    if layout_kind(numel, num_dims, info, N=1, T2D=False) == CONTIGUOUS:
        while lo < numel:
            o = out + lo
            for i in pk.parallel_range(u32(0), u32(min(numel - lo, chunk)), pk.thread_idx.x, pk.block_dim.x):
                o[i] = value
            lo += step
    else:  # one element a thread and step, the working blocks' threads in a row
        k = usize(pk.block_idx.x // u32(S)) * usize(pk.block_dim.x) + usize(pk.thread_idx.x)
        if numel <= 0xFFFFFFFF:
            strided_elements(numel, num_dims, info, value, out, k, step // usize(S), IDX=u32)
        else:
            strided_elements(numel, num_dims, info, value, out, k, step // usize(S), IDX=usize)


@pk.func
def strided_elements(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], k: usize,
                     workers: usize, *, IDX):
    while k < numel:
        out[offset_of(k, num_dims, info, info + num_dims, IDX=IDX)] = value
        k += workers


@pk.func
def tiled_layout(numel: usize, num_dims: usize, info: ConstPtr[usize], value: T, out: Ptr[T], *, W):
    """``value`` into every element of ``info``'s layout by every thread of the grid, in tiles of
    ``W`` elements (``tile_workers``: a thread per tile where the grid has more); the layout is
    decided once (``layout_kind``)."""
    g = pk.global_id()
    workers = tile_workers(numel, W=W)
    if g >= workers:
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
        x.device.get_or_load_func(kernel_name("const_set", x.dtype), FILL)[const_set_shape(x, info)](
            x.size, x.ndim, info, from_f64(value, x.dtype), storage(x))  # the layout travels in info
    return x


def const_set_shape(x, info) -> tuple[int, int]:
    """The wrapper's launch of ``const_set`` over ``x``: grid-stride tiles for a contiguous ``x`` (a
    null ``info``), candle's grid for a strided one: under ``info`` one block in S works
    (``set_value``), and the short grid left too few (several times slower: docs/targets/cuda.md)."""
    return launch_stream(x.size, x) if info is None else launch_1d(x.size)


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
