"""``pk.grid_stride`` in tiles (``pykern/lower/tiles.py``): the GPU lowering, run on the host.

The CPU device takes ``tile_bytes=16`` to lower grid-stride loops as the cuda target does (tiles of
16 bytes of the narrowest array, hoisted vector loads and stores, busy blocks spread over oversized
grids), so every launch shape, size and alignment is checked here against NumPy; the cuda tests
run the same kernels on the GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f32, f64, u8, u32, u64, usize
from pykern import math as pkm
from pykern.compiler import compile_kernels
from pykern.targets.registry import make_target

T = pk.TypeVar("T")
SIZES = (0, 1, 3, 4, 5, 31, 1023, 1024, 1025, 4097, 10007)


def tiled():
    return pk.device("cpu", tile_bytes=16)


def shapes(n: int):
    """candle's (one thread per element), a small grid, an oversized one, and an odd one."""
    yield max(1, -(-n // 1024)), 1024
    yield 1, 32
    yield -(-n // 32) + 5, 32
    yield 7, 96


@pk.kernel
def k_axpy(n: usize, a: T, x: ConstPtr[T], y: ConstPtr[T], out: Ptr[T], *, T):  # streaming
    for i in pk.grid_stride(n):
        out[i] = a * x[i] + y[i]


AXPY = {t: k_axpy.instance(f"axpy_{t}", T=t) for t in (f32, f64, u8, bf16)}


@pk.kernel
def k_count(n: usize, out: Ptr[u32]):
    for i in pk.grid_stride(n):
        out[i] += u32(1)


@pk.kernel
def k_exp(n: usize, x: ConstPtr[f32], out: Ptr[f32]):  # staged: inlined math with branches
    for i in pk.grid_stride(n):
        out[i] = pkm.exp(x[i])


@pk.kernel
def k_branchy(n: usize, x: ConstPtr[f32], y: ConstPtr[f32], out: Ptr[f32], out2: Ptr[f32]):
    """A conditional load (not hoisted: y may be read only where x > 0), two stores (the last one
    deferred), an ``and`` whose right side loads."""
    for i in pk.grid_stride(n):
        v = x[i]
        if v > 0:
            v = v * y[i]
        else:
            v = -v
        out2[i] = v + 1
        w = x[i] > 1 and y[i] > 0
        out[i] = v if w else 2 * v


@pk.kernel
def k_in_place(n: usize, x: Ptr[f32]):
    for i in pk.grid_stride(n):
        v = x[i]
        if v < 0:
            v = pkm.exp(v)
        x[i] = v


@pk.func
def safe_div(a: usize, d: usize) -> usize:
    if d == 0:
        return a
    return a // d


@pk.func
def div_mod(a: usize, d: usize) -> tuple[usize, usize]:
    q = safe_div(a, d)
    return q, a - q * d


@pk.kernel
def k_read_after_write(n: usize, d: usize, q: Ptr[u64], r: Ptr[u64]):  # staged: the callee branches
    for i in pk.grid_stride(n):
        q[i], r[i] = div_mod(i, d)
        q[i] += u64(1)           # must read the store above, not the element before the body
        r[i] = r[i] * u64(2) + q[i]


@pk.kernel
def k_skip(n: usize, x: ConstPtr[f32], out: Ptr[f32]):  # continue: one element per step
    for i in pk.grid_stride(n):
        if x[i] < 0:
            continue
        out[i] = x[i]


@pk.kernel
def k_parallel(lo: u32, hi: u32, x: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.parallel_range(lo, hi, pk.thread_idx.x, pk.block_dim.x):
        out[i] = pkm.exp(x[i]) + 1.0


@pk.kernel
def k_parallel_down(lo: u32, hi: u32, x: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.parallel_range(lo, hi, pk.thread_idx.x, pk.block_dim.x, descending=True):
        out[i] = pkm.exp(x[i]) + 1.0


@pk.kernel
def k_visit_order(n: u32, seq: Ptr[u32], worker: Ptr[u32]):
    """Each index's visit number within its worker's walk, and the worker."""
    k = u32(0)
    for i in pk.parallel_range(u32(0), n, pk.thread_idx.x, pk.block_dim.x, descending=True):
        seq[i] = k
        worker[i] = pk.thread_idx.x
        k += u32(1)


@pk.kernel
def k_two_rows(n: usize, a: usize, b: usize, x: ConstPtr[f32], out: Ptr[f32], *, STAGED):
    """Two trailing stores through pointers into one array, rows a and b of n (a == b: one row,
    where each element's second store is the one that stays)."""
    r0 = out + a * n
    r1 = out + b * n
    for i in pk.parallel_range(usize(0), n, usize(pk.thread_idx.x), usize(pk.block_dim.x)):
        v = x[i] * 2.0
        if STAGED:
            v = pkm.exp(x[i])
        r0[i] = v + 1.0
        r1[i] = v - 1.0


TWO_ROWS = {staged: k_two_rows.instance(f"two_rows_{staged}", STAGED=staged) for staged in (False, True)}


def launch(kern, grid, block, *args, dev=None):
    dev = dev or tiled()
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("n", SIZES)
def test_every_index_once_under_every_shape(n):
    for grid, block in shapes(n):
        got = launch(k_count, grid, block, n, np.zeros(n + 3, np.uint32))[0]
        assert (got[:n] == 1).all() and (got[n:] == 0).all(), (grid, block)


@pytest.mark.parametrize("dtype", [f32, f64, u8, bf16], ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_streaming_body(dtype, n):
    rng = np.random.default_rng(n)
    x, y = (rng.uniform(0, 50, n + 3).astype(dtype.np) for _ in range(2))
    for grid, block in shapes(n):
        for off in (0, 1, 3):  # unaligned views take the one-element path
            dev = tiled()
            dx, dy = dev.to_device(x), dev.to_device(y)
            out = dev.zeros(n + 3, dtype)
            AXPY[dtype].launch(grid, block, n, 2, dx.as_strided((n,), (1,), off), dy.as_strided((n,), (1,), off), out,
                          device=dev)
            want = (dtype.np.type(2) * x[off:off + n] + y[off:off + n]).astype(dtype.np)
            np.testing.assert_array_equal(out.to_host()[:n], want, err_msg=f"{grid}x{block} offset {off}")


@pytest.mark.parametrize("n", SIZES)
def test_staged_math_matches_one_element_per_step(n):
    x = np.random.default_rng(n).uniform(-90, 90, n).astype(np.float32)
    plain = pk.device("cpu")
    want = plain.zeros(n, f32)
    k_exp.launch(1, 64, n, plain.to_device(x), want, device=plain)
    for grid, block in shapes(n):
        np.testing.assert_array_equal(launch(k_exp, grid, block, n, x, np.zeros(n, np.float32))[1], want.to_host())


@pytest.mark.parametrize("n", (5, 1025, 4099))
def test_staged_conditional_loads_and_two_stores(n):
    rng = np.random.default_rng(n)
    x, y = rng.uniform(-2, 3, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    v = np.where(x > 0, x * y, -x).astype(np.float32)
    for grid, block in shapes(n):
        out, out2 = launch(k_branchy, grid, block, n, x, y, np.zeros(n, np.float32), np.zeros(n, np.float32))[2:]
        np.testing.assert_array_equal(out2, v + np.float32(1))
        np.testing.assert_array_equal(out, np.where((x > 1) & (y > 0), v, 2 * v))


def test_staged_in_place():
    x = np.random.default_rng(3).uniform(-5, 5, 3001).astype(np.float32)
    for grid, block in shapes(x.size):
        got = launch(k_in_place, grid, block, x.size, x.copy())[0]
        np.testing.assert_allclose(got, np.where(x < 0, np.exp(x.astype(np.float64)), x), rtol=2e-7)


@pytest.mark.parametrize("n", (5, 1025, 4099))
def test_staged_load_after_a_store_to_the_same_element_sees_it(n):
    """Only the loads before any write to their array are issued ahead of a staged body."""
    i = np.arange(n, dtype=np.uint64)
    for grid, block in shapes(n):
        q, r = launch(k_read_after_write, grid, block, n, 7, np.full(n, 99, np.uint64), np.full(n, 99, np.uint64))
        np.testing.assert_array_equal(q, i // 7 + 1)
        np.testing.assert_array_equal(r, i % 7 * 2 + i // 7 + 1)


@pytest.mark.parametrize("staged", (False, True))
@pytest.mark.parametrize("n", (1, 5, 64, 1025))
def test_trailing_stores_to_two_rows(staged, n):
    """A tile's trailing stores wait for all its copies, one statement's elements after another
    (so each row's stores merge into vector stores): rows apart, adjacent, and the same row."""
    x = np.random.default_rng(n).uniform(-3, 3, n).astype(np.float32)
    plain = pk.device("cpu")
    for a, b in ((0, 2), (1, 0), (1, 1)):
        want = plain.zeros(3 * n, f32)
        TWO_ROWS[staged].launch(1, 64, n, a, b, plain.to_device(x), want, device=plain)
        want = want.to_host()
        for block in (1, 32, 96):
            got = launch(TWO_ROWS[staged], 1, block, n, a, b, x, np.zeros(3 * n, np.float32))[1]
            np.testing.assert_array_equal(got, want, err_msg=f"rows {a}, {b}, block {block}")
    if staged:  # rows (1, 1): the second store stays
        np.testing.assert_allclose(want[n:2 * n], np.exp(x.astype(np.float64)) - 1, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(want[n:2 * n], x * np.float32(2) - np.float32(1))


def test_trailing_stores_to_two_rows_are_vector_stores():
    ptx = compile_kernels([TWO_ROWS[False], TWO_ROWS[True]], make_target("cuda"), "tiles")[0].decode()
    for name in ("two_rows_False", "two_rows_True"):
        body = ptx[ptx.index(f".entry {name}"):]
        body = body[:body.index("\n}")]
        assert body.count("st.global.v4.b32") >= 2, name


def test_continue_keeps_one_element_per_step():
    x = np.random.default_rng(4).uniform(-1, 1, 2049).astype(np.float32)
    for grid, block in shapes(x.size):
        got = launch(k_skip, grid, block, x.size, x, np.full(x.size, 7, np.float32))[1]
        np.testing.assert_array_equal(got, np.where(x < 0, 7, x))


@pytest.mark.parametrize("lo,hi", [(0, 1000), (1, 1000), (3, 4), (5, 5), (6, 4103)])
def test_parallel_range_offsets(lo, hi):
    x = np.random.default_rng(lo).uniform(-3, 3, 4200).astype(np.float32)
    got = launch(k_parallel, 1, 128, lo, hi, x, np.zeros(4200, np.float32))[1]
    want = np.zeros(4200, np.float32)
    want[lo:hi] = np.exp(x[lo:hi].astype(np.float64)) + 1
    np.testing.assert_allclose(got, want, rtol=3e-7)


@pytest.mark.parametrize("lo,hi", [(0, 1000), (1, 1000), (3, 4), (5, 5), (6, 4103)])
@pytest.mark.parametrize("dev", [tiled, lambda: pk.device("cpu")], ids=["tiles", "plain"])
def test_descending_parallel_range_visits_every_index_once(lo, hi, dev):
    x = np.random.default_rng(lo).uniform(-3, 3, 4200).astype(np.float32)
    got = launch(k_parallel_down, 1, 128, lo, hi, x, np.zeros(4200, np.float32), dev=dev())[1]
    want = np.zeros(4200, np.float32)
    want[lo:hi] = np.exp(x[lo:hi].astype(np.float64)) + 1
    np.testing.assert_allclose(got, want, rtol=3e-7)


@pytest.mark.parametrize("n", [1, 31, 32, 4096, 4099])
def test_descending_workers_walk_from_the_top(n):
    """The point of ``descending``: each worker's visits go down the range (whole tiles of four u32
    under tiles; the tail after the tiles, under four elements, comes last)."""
    for dev, width in ((pk.device("cpu"), 1), (tiled(), 4)):
        seq, worker = launch(k_visit_order, 1, 32, n, np.zeros(n, np.uint32), np.zeros(n, np.uint32), dev=dev)
        whole = n // width * width
        for w in range(32):
            idx = np.flatnonzero(worker[:whole] == w)
            walk = idx[np.argsort(seq[idx], kind="stable")] // width
            assert (np.diff(walk) <= 0).all(), (n, width, w)
            assert walk.size == 0 or walk[0] == (whole // width - 1 - w), (n, width, w)


@pytest.mark.parametrize("kernel,want", [
    ("uexp_f32", ("ld.global.nc.v4.b32", "st.global.v4.b32")),        # staged: hoisted vector load
    ("ugelu_bf16", ("ld.global.nc.v4.b32", "st.global.v4.b32")),      # 8 bf16 a tile
    ("ucopy_f32", ("ld.global.nc.v4.b32", "st.global.v4.b32")),       # streaming
])
def test_cuda_tiles_are_16_byte_accesses(kernel, want):
    """The point of tiles: one 16-byte access per array and thread (checked in the PTX)."""
    import stdlib_kernels as sk
    ptx = compile_kernels([sk.UNARY.get(kernel)], make_target("cuda"), "tiles")[0].decode()
    for instr in want:
        assert instr in ptx, instr

