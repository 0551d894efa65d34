"""The reduce family's host side: its tuning tables, the wrappers' launch heuristics, and the wrappers
themselves (``info`` and launch shapes as candle-core's ``FastReduce`` and candle-nn do), kept apart
from the kernels in ``stdlib_kernels/reduce.py``, which build from the tables below.

Every table's measurements are in ``docs/targets/cuda.md`` ("Reductions", "The reduce family's
tuning notes"). A wrapper validates its dtypes, shapes and launch block before it launches
(ValueError / TypeError naming the argument).
"""
from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from pykern import Module, bf16, f16, f32, f64, i64, u8, u32

from . import REDUCE, kernel_name
from ._common import as_device_array, launch_1d, storage

#: the CPU wrappers' norm kernels (``rmsnorm_host_*``, ``layernorm_host_*``; reduce.py adds them):
#: rows read in each pass, no GPU strategies, a sixth of the code to compile. Not candle's, not built
#: by ``pykern build``: a module of their own
REDUCE_HOST = Module("reduce_host")
#: the wrappers launch the host kernels on a CPU device (the tests set it False to check the GPU
#: kernels' strategies through the wrappers on the CPU too)
HOST_KERNELS = True

FAST_DTYPES = (f32, f64, u32, i64, u8, f16, bf16)
SUM_DTYPES = (f32, f64, u32, f16, bf16)
NN_DTYPES = (f32, f64, f16, bf16)

# ------------------------------------------------------------------------------- tuning (kernels)
#: rows up to this long go one per wave in fast_* (no barrier, no shared memory)
WAVE_ROWS = 4096
#: bytes of a row each thread keeps in registers, by element size (softmax: 32 elements, f64 8)
SOFTMAX_CACHE = {2: 64, 4: 128, 8: 64}
NORM_CACHE = {2: 16, 4: 64, 8: 64}  # 16-bit norms: 32 registers (two blocks of 1024 an SM)
#: threads a block in the wrappers' norm launches: rows of few threads share a block (along y)
NORM_BLOCK_THREADS = 256
#: softmax rows go through registers in blocks of at most this many lanes
SOFTMAX_CACHED_LANES = 512
#: candle launches softmax with one warp a row, block (1, 32, 1) (candle_kernels.md 9.3, "must be
#: 32"); every other block takes the wrappers' ``softmax_rows_*``
SOFTMAX_CANDLE_BLOCK = (1, 32, 1)
#: candle's kernels built for that block alone (max_block_size 32): a lane may take 128 registers
SOFTMAX_WARP_DTYPES = (f32,)
#: bytes of a long row's start that a lane holds in registers through both passes (candle's kernels;
#: the wrappers' ``softmax_rows_*`` hold SOFTMAX_CACHE / 2 of f32/f64 rows and none of 16-bit ones)
SOFTMAX_HELD = {2: 32, 4: 256, 8: 32}
#: elements a lane has in flight in the passes over the rest of a row
SOFTMAX_CHUNK = {2: 8, 4: 16, 8: 8}
#: norm rows of at most this many elements a thread go one per wave when a block of several waves
#: has one row (candle's 1024 threads on rows of 1024+)
WAVE_NORM_PER_THREAD = 4
#: the fewest threads of a group that takes a row in a block of one row (``row_group``)
GROUP_MIN_THREADS = 256
#: 16-bit rows longer than NARROW_GROUP_COLS that a wave would take go to groups of
#: NARROW_GROUP_THREADS; longer ones, up to NARROW_LONG_COLS, to groups of NARROW_LONG_GROUP_THREADS
NARROW_GROUP_THREADS = 128
NARROW_GROUP_COLS = 2048
NARROW_LONG_GROUP_THREADS = 512
NARROW_LONG_COLS = 16384
#: bytes a thread holds in the wrappers' own ``*_rows_*`` norms: 16-bit in blocks of at most 256
#: threads (four an SM at 64 registers); f32/f64 hold half of rows of up to twice NORM_CACHE
NORM_ROWS_CACHE = {2: 32, 4: NORM_CACHE[4], 8: NORM_CACHE[8]}
#: candle's norm kernels built for two blocks of 1024 an SM (32 registers), holding
#: NORM_TWO_BLOCKS_CACHE bytes a thread (rmsnorm_f32 half of NORM_CACHE, ``norm_row_held`` for the rest)
NORM_TWO_BLOCKS = {("rmsnorm", f32), ("rmsnorm", f16), ("rmsnorm", bf16), ("layernorm", f16), ("layernorm", bf16)}
NORM_TWO_BLOCKS_CACHE = {2: 16, 4: 32}


@dataclasses.dataclass(frozen=True)
class NormSpec:
    """How a norm kernel takes its rows (one compile-time argument of reduce.py's ``norm_rows`` and
    below): ``layernorm`` or rmsnorm; ``cache`` bytes of a row a thread holds in registers; ``own``:
    for the wrappers' launches only (no waves or groups; 16-bit rows filling every word unguarded);
    ``held``: f32/f64 rows up to twice what the threads hold keep that much (``norm_row_held``);
    ``host``: the CPU wrappers' kernels (``norm_rows``'s last path alone)."""
    layernorm: bool
    cache: int
    own: bool = False
    held: bool = False
    host: bool = False


def norm_kernels():
    """The norm kernels reduce.py builds, in its modules' order, as (norm, name suffix, register
    budget, dtype, NormSpec): candle's ``rmsnorm_*`` / ``layernorm_*`` (NORM_TWO_BLOCKS: two blocks
    of 1024 an SM, holding NORM_TWO_BLOCKS_CACHE), the wrappers' ``*_rows_*`` (16-bit: four blocks of
    at most NORM_BLOCK_THREADS an SM) and the CPU wrappers' ``*_host_*`` (REDUCE_HOST). ``norm_launch``
    below picks among the first two by the same tables."""
    for t in NN_DTYPES:
        for name in ("rmsnorm", "layernorm"):
            ln, two, narrow = name == "layernorm", (name, t) in NORM_TWO_BLOCKS, t.nbytes == 2
            cache = NORM_TWO_BLOCKS_CACHE[t.nbytes] if two else NORM_CACHE[t.nbytes]
            yield name, "", "two_blocks" if two else "default", t, NormSpec(ln, cache, held=two and not narrow)
            yield (name, "_rows", "rows" if narrow else "default", t,
                   NormSpec(ln, NORM_ROWS_CACHE[t.nbytes], own=True, held=not narrow))
            yield name, "_host", "default", t, NormSpec(ln, 0, own=True, host=True)


# ------------------------------------------------------------------------------- tuning (wrappers)
#: the wrappers' block for rows that go one per wave, and for one long row per block
WRAPPER_BLOCK = 256
#: softmax lanes for rows that do not fit in 512 lanes' registers, by row size in bytes (two passes)
SOFTMAX_LANES = ((32768, 256),)
#: the wrappers' 16-bit norm launches by row length: (up to columns, kernel suffix, threads a row,
#: threads a block), candle's block of 1024 past the table
NARROW_LAUNCH = ((256, "", 32, 256), (512, "_rows", 32, 256), (1536, "", 64, 256), (2048, "", 128, 256),
                 (4096, "", 128, 512))
#: f32/f64 rows longer than this many threads hold go to the ``*_rows_*`` kernels, half held
HELD_ROWS_THREADS = 512
#: the most threads a block of any reduce kernel has
MAX_BLOCK = 1024


def next_power_of_two(v: int) -> int:
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


# ------------------------------------------------------------------------------- validation
def _dtype_in(x, allowed, what: str) -> None:
    if x.dtype not in allowed:
        raise TypeError(f"{what}: dtype must be one of {', '.join(d.name for d in allowed)}, got {x.dtype.name}")


def _contiguous(x, what: str):
    x = as_device_array(x)
    if not x.is_contiguous:
        raise ValueError(f"{what} must be contiguous")
    return x


def _param(p, x, n: int, what: str):
    """A row-long parameter (alpha, beta): None, or a contiguous array of ``n`` elements of x's dtype
    on x's device (the kernels read n elements of it)."""
    if p is None:
        return None
    p = _contiguous(as_device_array(p, x.device), what)  # a NumPy array goes to x's device
    if p.dtype is not x.dtype:
        raise TypeError(f"{what} must have the input's dtype {x.dtype.name}, got {p.dtype.name}")
    if p.size != n or p.ndim != 1:
        raise ValueError(f"{what} must have shape ({n},) (the input's last dim), got {p.shape}")
    if p.device is not x.device:
        raise ValueError(f"{what} is on {p.device}, the input on {x.device}")
    return p


def _block_threads(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_BLOCK:
        raise ValueError(f"{what} must be an int from 1 to {MAX_BLOCK}, got {value!r}")
    return int(value)


def _rows_input(x, name: str, scalar: bool = False):
    """The input of softmax and the norms: contiguous, of a float dtype, with a last dim (softmax:
    ``scalar``, a 0-d array is one row of one element)."""
    x = _contiguous(x, f"{name} input")
    _dtype_in(x, NN_DTYPES, name)
    if x.ndim == 0 and not scalar:
        raise ValueError(f"{name} works over the last dim: its input needs at least one dim, got a 0-d array")
    return x


# ------------------------------------------------------------------------------- fast_* and sum
def _norm_dims(dims, ndim: int) -> list[int]:
    if dims is None:
        return list(range(ndim))
    dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(f"dims must be ints, got {d!r}")
        d = int(d) + ndim if d < 0 else int(d)
        if not 0 <= d < ndim:
            raise ValueError(f"dim {d} out of range for a tensor of rank {ndim}")
        if d in out:
            raise ValueError(f"dim {d} given twice")
        out.append(d)
    return out


FAST_OPS = ("fast_sum", "fast_min", "fast_max", "fast_argmin", "fast_argmax")


def fast_reduce_launch(op: str, x, dims=None, keepdim: bool = False, candle_shape: bool = False):
    """candle-core's ``FastReduce`` info (kept dims, then the reduced dims in the given order) and, with
    ``candle_shape``, its launch: one block of ``next_power_of_two(min(1024, E))`` threads per output.
    By default the launch is the wrappers' own: trailing dims of a contiguous tensor are passed as one
    2-D (rows, E) layout, so rows of up to WAVE_ROWS elements take the kernel's wave-per-row path on a
    grid with no idle blocks; longer or strided rows take a block of WRAPPER_BLOCK threads each."""
    if op not in FAST_OPS:
        raise ValueError(f"op must be one of {', '.join(FAST_OPS)}, got {op!r}")
    x = as_device_array(x)
    _dtype_in(x, FAST_DTYPES, op)
    sum_dims = _norm_dims(dims, x.ndim)
    if op != "fast_sum" and x.size == 0:
        raise ValueError(f"{op[5:]} of an empty tensor (candle: EmptyTensor)")
    kept = [i for i in range(x.ndim) if i not in sum_dims]
    rdims = [x.shape[i] for i in kept] + [x.shape[i] for i in sum_dims]
    rstrides = [x.strides[i] for i in kept] + [x.strides[i] for i in sum_dims]
    dst_el = int(math.prod(x.shape[i] for i in kept))
    src_el = x.size
    el = src_el // dst_el if dst_el else 0
    out_dtype = u32 if op in ("fast_argmin", "fast_argmax") else x.dtype
    shape = tuple(1 if i in sum_dims else n for i, n in enumerate(x.shape)) if keepdim else \
        tuple(x.shape[i] for i in kept)
    out = x.device.empty(shape, out_dtype)
    if dst_el == 0:
        return out
    grid, block = dst_el, next_power_of_two(min(1024, el))
    trailing = x.ndim and x.is_contiguous and sum_dims == list(range(len(kept), x.ndim))
    if not candle_shape and trailing:
        rdims, rstrides = [dst_el, el], [el, 1]  # the kernel's rows_contiguous layout
    if not candle_shape:
        ws = x.device.target.wave_size
        block = max(WRAPPER_BLOCK, 2 * ws)
        if trailing and 0 < el <= WAVE_ROWS:  # fast_reduce's wave_rows: any grid covers every row
            grid = -(-dst_el // (block // ws))
        else:
            block = min(block, next_power_of_two(el))
    info = x.device.to_device(np.array(rdims + rstrides, dtype=np.uint64)) if x.ndim else None
    fn = x.device.get_or_load_func(kernel_name(op, x.dtype), REDUCE)
    fn[(grid, 1, 1), (block, 1, 1)](src_el, el, len(rdims), info, storage(x), out)  # the layout travels in info
    return out


def reduce_sum(x, dims=None, keepdim: bool = False):
    """``Tensor::sum`` over ``dims`` (all by default) through ``fast_sum``; ints wrap."""
    return fast_reduce_launch("fast_sum", x, dims, keepdim)


def reduce_max(x, dims=None, keepdim: bool = False):
    return fast_reduce_launch("fast_max", x, dims, keepdim)


def reduce_min(x, dims=None, keepdim: bool = False):
    return fast_reduce_launch("fast_min", x, dims, keepdim)


def _single(dim) -> int:
    if not isinstance(dim, numbers.Integral):
        dims = list(dim)
        if len(dims) != 1:
            raise ValueError(f"argmin/argmax reduce over a single dim (candle: OnlySingleDimension), got {dims}")
        dim = dims[0]
    return dim


def argmax(x, dim, keepdim: bool = False):
    """The index (u32) of the first maximum along ``dim``."""
    return fast_reduce_launch("fast_argmax", x, [_single(dim)], keepdim)


def argmin(x, dim, keepdim: bool = False):
    return fast_reduce_launch("fast_argmin", x, [_single(dim)], keepdim)


def sum_atomic_launch(x, dims):
    """``sum_dt`` as its signature describes it (candle never launches it): 1D/1024 over the input,
    atomics into a zeroed output with the reduced dims of size 1."""
    x = as_device_array(x)
    _dtype_in(x, SUM_DTYPES, "sum")
    sum_dims = sorted(_norm_dims(dims, x.ndim))
    contig = [1] * x.ndim
    for i in range(x.ndim - 2, -1, -1):
        contig[i] = contig[i + 1] * x.shape[i + 1]
    info = list(x.shape) + list(x.strides) + [x.shape[d] for d in sum_dims] + [contig[d] for d in sum_dims]
    out_shape = tuple(1 if i in sum_dims else n for i, n in enumerate(x.shape))
    out = x.device.zeros(out_shape, x.dtype)
    if x.size == 0:
        return out
    half = x.dtype in (f16, bf16)
    target = out
    if half:  # the kernel sees the halves as 32-bit words: pad to a whole word
        nwords = (out.size + 1) // 2
        target = x.device.zeros((nwords,), u32)
    fn = x.device.get_or_load_func(kernel_name("sum", x.dtype), REDUCE)
    grid, block = launch_1d(x.size)
    fn[grid, block](x.size, x.ndim, len(sum_dims), x.device.to_device(np.array(info, dtype=np.uint64)), storage(x),
                    target)
    if half:
        host = target.to_host().view(x.dtype.np)[:out.size].reshape(out_shape)
        out.copy_from_host(host)
    return out


# ------------------------------------------------------------------------------- softmax
def row_threads(n_cols: int, dtype, wave: int, cache: dict) -> int:
    """Threads per row in the wrappers' own launches: enough that each has ``cache`` bytes of the row
    or less (the row fits in their registers, ``row_fits``, for the kernels' own caches), a power of
    two from a wave up to 1024."""
    per_thread = cache[dtype.nbytes] // dtype.nbytes
    return min(1024, max(wave, next_power_of_two(-(-n_cols // per_thread))))


def softmax_block(n_cols: int, dtype, wave: int) -> tuple[int, int, int]:
    """The wrappers' own softmax block: the row in registers (``row_threads``) when 512 lanes or fewer
    hold it, else SOFTMAX_LANES by the row's size (1024 past them)."""
    lanes = row_threads(n_cols, dtype, wave, SOFTMAX_CACHE)
    if lanes > SOFTMAX_CACHED_LANES:
        lanes = next((n for limit, n in SOFTMAX_LANES if n_cols * dtype.nbytes <= limit), 1024)
    return 1, lanes, 1


def softmax_kernel_name(dtype, block=None) -> str:
    """candle's kernel for candle's block, ``softmax_rows_*`` for every other and for the wrappers' own
    (``block`` None, even where ``softmax_block`` is candle's): candle's f32 kernel is built for one
    warp, and candle's 16-bit ones keep the start of a long row in registers, which makes them spill
    and slows the rows held in registers (see ``softmax_kernel``)."""
    candle = block is not None and tuple(block) == SOFTMAX_CANDLE_BLOCK
    return kernel_name("softmax" if candle else "softmax_rows", dtype)


def _softmax_block_arg(block) -> tuple[int, int, int]:
    """A softmax block given by the caller: (1, n, 1), 1 <= n <= 1024 (the kernels take a row's lanes
    along y, one row a block: any other x or z would give the grid's rows to threads past them)."""
    try:
        shape = tuple(block)
    except TypeError:
        raise ValueError(f"softmax block must be a (1, n, 1) tuple, got {block!r}") from None
    if len(shape) != 3 or shape[0] != 1 or shape[2] != 1:
        raise ValueError(f"softmax block must be (1, n, 1) (one row a block, its lanes along y), got {block!r}")
    return 1, _block_threads(shape[1], "softmax block's n"), 1


def softmax_last_dim(x, block=None):
    """candle-nn's ``softmax_last_dim``: grid (rows, 1, 1); ``block`` None for the wrappers' own
    ``softmax_block``, candle's (1, 32, 1) for candle's kernel, or any (1, n, 1) with n <= 1024."""
    x = _rows_input(x, "softmax", scalar=True)
    if block is not None:
        block = _softmax_block_arg(block)
    out = x.device.empty(x.shape, x.dtype)
    n_cols = x.shape[-1] if x.ndim else 1
    rows = x.size // n_cols if n_cols else 0
    if rows == 0 or n_cols == 0:
        return out
    if n_cols >= 2**31:
        raise ValueError(f"softmax rows hold fewer than 2**31 elements, got {n_cols}")
    fn = x.device.get_or_load_func(softmax_kernel_name(x.dtype, block), REDUCE)
    if block is None:
        block = softmax_block(n_cols, x.dtype, x.device.target.wave_size)
    fn[(rows, 1, 1), block](x, out, n_cols)
    return out


# ------------------------------------------------------------------------------- rmsnorm / layernorm
def norm_launch(name: str, rows: int, n_cols: int, dtype, wave: int) -> tuple[str, tuple, tuple]:
    """The wrappers' own kernel, grid and block for rmsnorm/layernorm: 16-bit rows by NARROW_LAUNCH,
    f32/f64 rows held in registers by ``row_threads`` (in candle's kernel, or ``*_rows_*`` where
    candle's holds less: NORM_TWO_BLOCKS), but rows longer than HELD_ROWS_THREADS threads hold (up to
    twice what 1024 hold) half held by ``*_rows_*``. Block (threads a row, R), row = block * R + y:
    R rows a block (the block's threads over a row's) when they divide the row count."""
    per_thread = NORM_CACHE[dtype.nbytes] // dtype.nbytes
    if dtype.nbytes == 2:
        suffix, nt, block_threads = next(((k, t, b) for limit, k, t, b in NARROW_LAUNCH if n_cols <= limit),
                                         ("", 1024, 1024))
        kname, nt = kernel_name(name + suffix, dtype), max(nt, wave)
    elif HELD_ROWS_THREADS * per_thread < n_cols <= 2 * 1024 * per_thread:  # half the row held
        kname = kernel_name(name + "_rows", dtype)
        nt = HELD_ROWS_THREADS if n_cols <= 2 * HELD_ROWS_THREADS * per_thread else 1024
        block_threads = NORM_BLOCK_THREADS
    else:
        kname = kernel_name(name + ("_rows" if (name, dtype) in NORM_TWO_BLOCKS else ""), dtype)
        nt = row_threads(n_cols, dtype, wave, NORM_CACHE)
        block_threads = NORM_BLOCK_THREADS
    per_block = max(1, block_threads // nt)
    while rows % per_block:
        per_block //= 2
    return kname, (rows // per_block, 1, 1), (nt, per_block, 1)


def _norm_launch(name, x, params, eps, block_size=None):
    x = _rows_input(x, name)
    n_cols = x.shape[-1]
    params = [_param(p, x, n_cols, f"{name} {what}") for p, what in zip(params, ("alpha", "beta"))]
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"{name} eps must be a float, got {eps!r}")
    if block_size is not None:
        block_size = _block_threads(block_size, f"{name} block_size")
    if n_cols >= 2**31:
        raise ValueError(f"{name} rows hold fewer than 2**31 elements, got {n_cols}")
    out = x.device.empty(x.shape, x.dtype)
    rows = x.size // n_cols if n_cols else 0
    if rows == 0:
        return out
    module = REDUCE
    if block_size is None and HOST_KERNELS and x.device.target.name == "cpu":
        module, (kname, grid, block) = REDUCE_HOST, host_norm_launch(name, rows, x.dtype, x.device.target.wave_size)
    elif block_size is None:
        kname, grid, block = norm_launch(name, rows, n_cols, x.dtype, x.device.target.wave_size)
    else:  # candle's launch: a block of block_size threads a row
        kname, grid, block = kernel_name(name, x.dtype), (rows, 1, 1), (block_size, 1, 1)
    x.device.get_or_load_func(kname, module)[grid, block](x, out, *params, n_cols, block[0], float(eps))
    return out


def host_norm_launch(name: str, rows: int, dtype, wave: int) -> tuple[str, tuple, tuple]:
    """The CPU wrappers' kernel (REDUCE_HOST), grid and block: a wave a row, NORM_BLOCK_THREADS // wave
    rows a block where they divide the row count (a block's threads run in turn on a CPU: lanes only
    spread a row's passes, and fewer make fewer switches between them)."""
    per_block = max(1, NORM_BLOCK_THREADS // wave)
    while rows % per_block:
        per_block //= 2
    return kernel_name(name + "_host", dtype), (rows // per_block, 1, 1), (wave, per_block, 1)


def rms_norm(x, alpha, eps: float, block_size=None):
    """candle-nn's ``rms_norm``: ``x / sqrt(mean(x^2) + eps) * alpha`` over the last dim (alpha may be
    None). candle launches a block of ``block_size`` threads per row (32 below 1024 columns, else
    1024); without one the wrappers' own launch is used (``norm_launch``)."""
    return _norm_launch("rmsnorm", x, [alpha], eps, block_size)


def layer_norm(x, alpha, beta, eps: float, block_size=None):
    """candle-nn's ``layer_norm``: ``(x - mean) / sqrt(var + eps) * alpha + beta`` (biased variance)."""
    return _norm_launch("layernorm", x, [alpha, beta], eps, block_size)


# ------------------------------------------------------------------------------- rotary embeddings
#: the rotary embeddings' layouts of x and the kernels' size arguments (before stride_b)
ROPE_LAYOUTS = {"rope_i": ("bhtd", lambda b, h, t, d: (b * h, t * d)),
                "rope": ("bhtd", lambda b, h, t, d: (b * h, t * d, d)),
                "rope_thd": ("bthd", lambda b, h, t, d: (b, t, h, d))}


def _rope(name, x, cos, sin):
    """candle-nn's rotary embeddings: one thread a rotated pair (1D launch over x.size / 2); cos/sin
    (t, d/2) or (b, t, d/2), in which case ``stride_b`` steps them by batch."""
    layout, sizes = ROPE_LAYOUTS[name]
    x = _contiguous(x, f"{name} input")
    cos, sin = _contiguous(cos, "cos"), _contiguous(sin, "sin")
    if x.ndim != 4 or x.shape[-1] % 2:
        raise ValueError(f"{name}: x must be ({', '.join(layout)}) with d even, got shape {x.shape}")
    if cos.dtype is not x.dtype or sin.dtype is not x.dtype:
        raise ValueError(f"{name}: x, cos and sin must share a dtype")
    _dtype_in(x, NN_DTYPES, name)
    if cos.shape != sin.shape or cos.ndim not in (2, 3):
        raise ValueError(f"{name}: cos and sin must both be (t, d/2) or (b, t, d/2)")
    dims = dict(zip(layout, x.shape))
    b, h, t, d = dims["b"], dims["h"], dims["t"], dims["d"]
    if cos.shape[-1] != d // 2 or cos.shape[-2] < t or (cos.ndim == 3 and (cos.shape[0] != b or cos.shape[1] != t)):
        raise ValueError(f"{name}: cos/sin of shape {cos.shape} do not fit (b={b}, t={t}, d={d})")
    if max(b * h, t * d, b, t, h, d) >= 2**32:
        raise ValueError(f"{name}: each of the kernel's u32 sizes must be below 2**32, got shape {x.shape}")
    out = x.device.empty(x.shape, x.dtype)
    if x.size:
        fn = x.device.get_or_load_func(kernel_name(name, x.dtype), REDUCE)
        grid, block = launch_1d(x.size // 2)
        fn[grid, block](x, cos, sin, out, *sizes(b, h, t, d), h * t * d if cos.ndim == 3 else 0)
    return out


def rope_i(x, cos, sin):
    """Interleaved rotary embedding of x (b, h, t, d) with cos/sin (t, d/2) or (b, t, d/2)."""
    return _rope("rope_i", x, cos, sin)


def rope(x, cos, sin):
    """Rotate-half rotary embedding of x (b, h, t, d)."""
    return _rope("rope", x, cos, sin)


def rope_thd(x, cos, sin):
    """Rotate-half rotary embedding of x (b, t, h, d)."""
    return _rope("rope_thd", x, cos, sin)


__all__ = ["reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin", "softmax_last_dim", "rms_norm", "layer_norm",
           "rope", "rope_i", "rope_thd", "sum_atomic_launch", "fast_reduce_launch", "next_power_of_two",
           "norm_launch", "host_norm_launch", "softmax_block", "softmax_kernel_name", "REDUCE_HOST"]
