"""What every family shares: candle's ``info`` layout on the device and the elementwise skeleton the
families that take it run (``map_layout``); launch shapes, candle's ``Map1`` launch and scalar
conversion on the host.

``info`` is candle's flat array: ``dims[num_dims]`` followed by one ``strides[num_dims]`` block per
operand (element strides; zero strides broadcast). A null ``info`` means every operand is contiguous.
"""
from __future__ import annotations

import math

import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, f32, u32, usize
from pykern.runtime.base import DeviceArray
from pykern.runtime.launch import storage

#: candle's elementwise launch: 1024 threads, one element per thread
BLOCK = 1024
A, B, C, D, P = (pk.TypeVar(n) for n in "ABCDP")


@pk.func
def strided_index(idx: usize, num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize]) -> usize:
    """The memory offset of logical element ``idx`` (candle's ``get_strided_index``)."""
    offset: usize = 0
    rest = idx
    d = num_dims
    while d > 0:
        d -= 1
        offset += (rest % dims[d]) * strides[d]
        rest //= dims[d]
    return offset


@pk.func
def is_contiguous(num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize]) -> bool:
    """Row-major contiguity (dims of size 1 may carry any stride)."""
    acc: usize = 1
    d = num_dims
    while d > 0:
        d -= 1
        if dims[d] != 1 and strides[d] != acc:
            return False
        acc *= dims[d]
    return True


#: ranks whose contiguity ``contiguous_layouts`` reads in one round of independent loads (beyond: a loop)
FLAT_DIMS = 4


@pk.func
def contiguous_layouts(num_dims: usize, info: ConstPtr[usize], *, N) -> bool:
    """Are all ``N`` operands of ``info`` row-major contiguous? Up to FLAT_DIMS dims every load is
    independent of the others (clamped indices, no early exit), so the answer costs one memory round
    trip instead of a chain of 2 * num_dims * N dependent ones."""
    if num_dims > FLAT_DIMS:
        ok = True
        for k in pk.static_range(N):
            ok = ok and is_contiguous(num_dims, info, info + (k + 1) * num_dims)
        return ok
    if num_dims == 0:
        return True
    ok = True
    acc: usize = 1
    for e in pk.static_range(FLAT_DIMS):  # the e-th dim from the last
        gone = usize(e) >= num_dims
        d = pk.select(gone, usize(0), num_dims - (e + 1))
        n = info[d]
        free = gone | (n == 1)
        for k in pk.static_range(N):
            ok = ok & (free | (info[(k + 1) * num_dims + d] == acc))
        acc = pk.select(gone, acc, acc * n)
    return ok


#: the lanes of a group of threads whose tiles a strided walk interleaves (a warp on NVIDIA)
LANES = 32
#: ``layout_kind``'s answers
STRIDED, CONTIGUOUS, TRANSPOSED = 0, 1, 2


@pk.func
def tile_workers(numel: usize, *, W) -> usize:
    """How many threads an elementwise loop over ``numel`` elements in tiles of ``W`` uses: the
    grid's, or a thread per tile (rounded up to whole LANES) where the grid has more: candle's launch,
    a thread an element. The rest leave before anything else: under candle's launch they are most of
    the grid (3 in 4 for f32, 15 in 16 with a u8 operand), and whatever they run before leaving
    (reading ``info``, say) bounds the kernel (``docs/targets/cuda.md``, "candle's info")."""
    tiles = (numel + (W - 1)) // W
    return min(usize(pk.grid_dim.x) * usize(pk.block_dim.x), (tiles + (LANES - 1)) // LANES * LANES)


@pk.func
def layout_kind(numel: usize, num_dims: usize, info: ConstPtr[usize], *, N, T2D) -> u32:
    """CONTIGUOUS, TRANSPOSED (dims (C, R), strides (1, S >= C); asked only with ``T2D``) or STRIDED.
    2-D layouts, the common case, read every word at a constant index: one round of loads, shared by
    both questions, and few instructions (each busy warp of candle's grid pays them)."""
    if num_dims == 2:
        d0 = info[0]
        d1 = info[1]
        ok = True
        for k in pk.static_range(N):
            ok = ok & ((info[3 + 2 * k] == 1) | (d1 == 1)) & ((info[2 + 2 * k] == d1) | (d0 == 1))
        if ok:
            return u32(CONTIGUOUS)
        if T2D:
            if info[3] >= d0 and info[2] == 1 and d0 > 1 and d1 > 1 and d0 * d1 == numel:
                return u32(TRANSPOSED)
        return u32(STRIDED)
    return u32(CONTIGUOUS) if contiguous_layouts(num_dims, info, N=N) else u32(STRIDED)


#: elements of a strided run loaded together (one row, a fixed stride each operand): loads in flight
RUN = 4


@pk.func
def map_layout(numel: usize, num_dims: usize, info: ConstPtr[usize], a: ConstPtr[A], b: ConstPtr[B], c: ConstPtr[C],
               out: Ptr[D], p: P, q: P, *, N, NB, F, K, TRANSPOSE):
    """The elementwise skeleton of candle's ``info`` kernels: ``out[i] = F(a[i], (b[i], c[i],) p, q, K=K)``
    over ``N`` operands (``b``/``c`` unused below N: pass ``a``) laid out as ``info`` says, for any
    launch shape. ``NB``: the bytes of the narrowest array, which set the tile (``pk.tile_bytes``).
    ``TRANSPOSE``: None, or ``(c, r, s, a, out, blocks)`` for candle's ``.t()`` of a row-major matrix,
    maybe a column slice: dims (C, R), strides (1, S >= C) (ucopy).

    Threads past ``tile_workers`` leave first, without reading ``info`` (with ``TRANSPOSE``, whole
    blocks of them: the transpose's tiles have barriers); the workers decide the layout
    (``layout_kind``, a round of independent loads; a null ``info`` is contiguous) and take the tiled
    loop, or walk the strided layout by the same tiles (``strided_tiles``)."""
    map_tiles(numel, num_dims, info, a, b, c, out, p, q, N=N, W=pk.tile_bytes // NB if pk.tile_bytes > NB else 1,
              F=F, K=K, TRANSPOSE=TRANSPOSE)


@pk.func
def map_tiles(numel: usize, num_dims: usize, info: ConstPtr[usize], a: ConstPtr[A], b: ConstPtr[B], c: ConstPtr[C],
              out: Ptr[D], p: P, q: P, *, N, W, F, K, TRANSPOSE):
    g = pk.global_id()
    workers = tile_workers(numel, W=W)
    if TRANSPOSE is None:
        if g >= workers:  # first: under candle's launch most threads run nothing else
            return
    elif usize(pk.block_idx.x) * usize(pk.block_dim.x) >= workers:  # whole blocks: the tiles have barriers
        return
    kind: u32 = CONTIGUOUS
    if info is not None:
        kind = layout_kind(numel, num_dims, info, N=N, T2D=TRANSPOSE is not None)
    if TRANSPOSE is not None:
        if kind == TRANSPOSED:  # every thread of the remaining blocks (a uniform decision)
            blocks = usize(pk.grid_dim.x)
            if workers < blocks * usize(pk.block_dim.x):  # candle's grid; the wrappers' divides nothing
                blocks = (workers + usize(pk.block_dim.x) - 1) // usize(pk.block_dim.x)
            TRANSPOSE(info[0], info[1], info[3], a, out, blocks)
            return
        if g >= workers:
            return
    if kind == CONTIGUOUS:
        for i in pk.parallel_range(usize(0), numel, g, workers):
            if N == 1:
                out[i] = F(a[i], p, q, K=K)
            elif N == 2:
                out[i] = F(a[i], b[i], p, q, K=K)
            else:
                out[i] = F(a[i], b[i], c[i], p, q, K=K)
        return
    if numel <= 0xFFFFFFFF:  # index arithmetic in u32 below 2**32 elements (several times cheaper)
        strided_tiles(numel, num_dims, info, a, b, c, out, p, q, g, workers, N=N, W=W, R=RUN if W > RUN else W,
                      F=F, K=K, IDX=u32)
    else:
        strided_tiles(numel, num_dims, info, a, b, c, out, p, q, g, workers, N=N, W=W, R=RUN if W > RUN else W,
                      F=F, K=K, IDX=usize)


@pk.func
def offset_of(i: usize, num_dims: usize, dims: ConstPtr[usize], strides: ConstPtr[usize], *, IDX) -> usize:
    """``strided_index`` with its divisions in IDX."""
    offset: usize = 0
    rest = IDX(i)
    d = num_dims
    while d > 0:
        d -= 1
        n = IDX(dims[d])
        offset += usize(rest % n) * strides[d]
        rest //= n
    return offset


@pk.func
def strided_tiles(numel: usize, num_dims: usize, info: ConstPtr[usize], a: ConstPtr[A], b: ConstPtr[B],
                  c: ConstPtr[C], out: Ptr[D], p: P, q: P, g: usize, workers: usize, *, N, W, R, F, K, IDX):
    """A strided layout by the tiles of the contiguous loop: a group of LANES threads takes LANES * W
    adjacent elements, lane l the elements l, l + LANES, ... (for k < W), so each access of a warp is
    to adjacent elements of the output (and of every row-major operand), and the threads near each
    other read near each other in every operand (a transposed operand's lines are still in L2 when
    the next rows reach them). A thread reads its elements in runs of ``R`` that stay in one row (one
    offset computation a run, R loads of each operand in flight), one at a time where a run would
    cross a row. Groups of 1 where the workers are not whole groups (odd launch shapes)."""
    lanes = usize(LANES) if workers % LANES == 0 else usize(1)
    lane = g & (lanes - 1)
    last = IDX(info[num_dims - 1])
    sa = info[2 * num_dims - 1] * lanes
    sb = info[3 * num_dims - 1] * lanes if N > 1 else usize(0)
    sc = info[4 * num_dims - 1] * lanes if N > 2 else usize(0)
    va = pk.local.array(R, A)
    vb = pk.local.array(R, B)
    vc = pk.local.array(R, C)
    t = (g - lane) * W + lane
    while t < numel:
        k: pk.u32 = 0
        while k < W:
            i = t + usize(k) * lanes
            if i >= numel:
                break
            oa = offset_of(i, num_dims, info, info + num_dims, IDX=IDX)
            ob = offset_of(i, num_dims, info, info + 2 * num_dims, IDX=IDX) if N > 1 else usize(0)
            oc = offset_of(i, num_dims, info, info + 3 * num_dims, IDX=IDX) if N > 2 else usize(0)
            span = IDX((R - 1) * lanes)
            if R > 1 and k + R <= W and i + usize(span) < numel and span < last - IDX(i) % last:
                for r in pk.static_range(R):
                    va[r] = a[oa + r * sa]
                    if N > 1:
                        vb[r] = b[ob + r * sb]
                    if N > 2:
                        vc[r] = c[oc + r * sc]
                for r in pk.static_range(R):
                    j = i + r * lanes
                    if N == 1:
                        out[j] = F(va[r], p, q, K=K)
                    elif N == 2:
                        out[j] = F(va[r], vb[r], p, q, K=K)
                    else:
                        out[j] = F(va[r], vb[r], vc[r], p, q, K=K)
                k += R
            else:
                if N == 1:
                    out[i] = F(a[oa], p, q, K=K)
                elif N == 2:
                    out[i] = F(a[oa], b[ob], p, q, K=K)
                else:
                    out[i] = F(a[oa], b[ob], c[oc], p, q, K=K)
                k += 1
        t += workers * W


@pk.func
def map_in_place(numel: usize, out: Ptr[D], p: P, q: P, *, NB, F, K):
    """``out[i] = F(out[i], p, q, K=K)`` (candle's null ``inp``: in place, contiguous), by
    ``map_layout``'s workers."""
    g = pk.global_id()
    workers = tile_workers(numel, W=pk.tile_bytes // NB if pk.tile_bytes > NB else 1)
    if g < workers:
        for i in pk.parallel_range(usize(0), numel, g, workers):
            out[i] = F(out[i], p, q, K=K)


def launch_1d(numel: int, block: int = BLOCK) -> tuple[int, int]:
    """candle's shape: ``ceil(numel / block)`` blocks of ``block`` threads (at least one block)."""
    return max(1, -(-numel // block)), block


#: the wrappers' block for grid-stride kernels: several blocks per SM keep loads in flight while one
#: block finishes (measured against blocks of 1024: docs/targets/cuda.md)
STREAM_BLOCK = 256


def launch_stream(numel: int, *arrays: DeviceArray, block: int = STREAM_BLOCK, tiles: int = 1) -> tuple[int, int]:
    """The wrappers' own shape for grid-stride kernels over ``arrays``: ``tiles`` tiles a thread (the
    GPU lowering gives each thread ``tile_bytes`` of the narrowest dtype per step, ``lower/tiles.py``;
    4 elements where tiles are off), so no block is launched empty. Math-bound kernels take 2: a
    thread's second tile loads while its first computes."""
    tile = arrays[0].device.target.tile_bytes
    per_thread = tiles * (max(1, tile // min(a.dtype.nbytes for a in arrays)) if tile else 4)
    return max(1, -(-numel // (block * per_thread))), block


def info_array(device, shape: tuple[int, ...], *strides: tuple[int, ...]) -> DeviceArray | None:
    """The ``info`` buffer for ``shape`` and each operand's strides; None when all are contiguous."""
    contiguous = DeviceArray(device, 0, shape, pk.f32).strides
    if all(tuple(s) == contiguous for s in strides):
        return None
    flat = np.array(list(shape) + [x for s in strides for x in s], dtype=np.uint64)
    return device.to_device(flat)


def as_device_array(x, device=None) -> DeviceArray:
    """Accept a device array; a framework's array (torch, CuPy, JAX) viewed in place through DLPack;
    or anything else NumPy reads, copied to ``device`` (the CPU by default)."""
    if isinstance(x, DeviceArray):
        return x
    if not isinstance(x, np.ndarray) and (hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")):
        return device.from_dlpack(x) if device is not None else pk.from_dlpack(x)
    return (device or pk.device("cpu")).to_device(np.asarray(x))


def operands(op: str, dtypes, x, *others, names: tuple[str, ...] = ("a", "b")) -> tuple[DeviceArray, ...]:
    """``x`` and ``others`` as device arrays on ``x``'s device, of one dtype the family has kernels
    for: else a TypeError naming the operation, the operands (``names``) and their dtypes."""
    x = as_device_array(x)
    rest = tuple(as_device_array(o, x.device) for o in others)
    for name, o in zip(names[1:], rest):
        if o.dtype is not x.dtype:
            raise TypeError(f"{op}: {names[0]} is {x.dtype} and {name} is {o.dtype}; their dtypes must match")
    if x.dtype not in dtypes:
        raise TypeError(f"{op}: no kernel for {x.dtype}; dtypes: {', '.join(t.tag for t in dtypes)}")
    return (x, *rest)

def compute_type(t):
    """What a dtype is computed in: f32 for the storage floats (f16, bf16, f8), else itself."""
    return f32 if t.is_storage_float else t


def from_f64(v, dtype):
    """candle's ``T::from_f64``: ints truncate and saturate like Rust's ``as`` (NaN -> 0); floats round."""
    if dtype.is_int:
        v = float(v)
        if math.isnan(v):
            return 0
        lo, hi = dtype.int_range
        return int(min(max(math.trunc(v) if math.isfinite(v) else v, lo), hi))
    return float(v)  # the launcher rounds (fp8 saturating, as a kernel's cast does)


def output(x: DeviceArray, out, dtype) -> DeviceArray:
    if out is None:
        return x.device.empty(x.shape, dtype)
    if out.shape != x.shape or out.dtype is not dtype or not out.is_contiguous or out.device is not x.device:
        raise ValueError(f"out must be a contiguous {dtype} array of shape {x.shape} on {x.device}, got {out!r}")
    return out


def map1(module, name: str, x, out=None, before=(), after=(), dtype=None, inplace: bool = True,
         tiles: int = 1) -> DeviceArray:
    """candle's Map1 launch: ``name(numel, num_dims, info, *before, inp, out, *after)`` over ``x``'s layout.

    ``out=x`` (contiguous) runs in place by passing a null ``inp``, where the kernel supports it."""
    x = as_device_array(x)
    if name not in module:  # a dtype the family has no kernel for: say so, not a bare KeyError
        same_op = sorted(k for k in module.names() if k.rsplit("_", 1)[0] == name.rsplit("_", 1)[0])
        raise TypeError(f"no {module.name} kernel {name!r} for {x.dtype}; there are {', '.join(same_op) or 'none'}")
    out = output(x, out, dtype or x.dtype)
    if x.size == 0:
        return out
    fn = x.device.get_or_load_func(name, module)
    if inplace and out.ptr == x.ptr and x.is_contiguous:
        inp, info = None, None
    else:
        inp, info = storage(x), info_array(x.device, x.shape, x.strides)  # the layout travels in info
    grid, block = launch_stream(x.size, x, out, tiles=tiles)
    fn[grid, block](x.size, x.ndim, info, *before, inp, out, *after)
    return out
