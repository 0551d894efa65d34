"""GPU built-ins: ids, barriers, shared memory, atomics and wave operations (widths 32 and 64)."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, f64, i32, i64, u8, u32, u64, usize

T = pk.TypeVar("T")
ATOMIC_TYPES = [pk.i32, pk.u32, pk.i64, pk.u64, pk.f32, pk.f64]


def run(dev, kern, grid, block, *args, shared_mem=0):
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, shared_mem=shared_mem, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


# ---------------------------------------------------------------------------- ids, multi-dim
@pk.kernel
def k_ids(out: Ptr[u32]):
    bx = pk.block_idx.x + pk.grid_dim.x * (pk.block_idx.y + pk.grid_dim.y * pk.block_idx.z)
    tx = pk.thread_idx.x + pk.block_dim.x * (pk.thread_idx.y + pk.block_dim.y * pk.thread_idx.z)
    nthreads = pk.block_dim.x * pk.block_dim.y * pk.block_dim.z
    o = out + usize(bx * nthreads + tx) * 12
    o[0] = pk.thread_idx.x
    o[1] = pk.thread_idx.y
    o[2] = pk.thread_idx.z
    o[3] = pk.block_idx.x
    o[4] = pk.block_idx.y
    o[5] = pk.block_idx.z
    o[6] = pk.block_dim.x
    o[7] = pk.block_dim.y
    o[8] = pk.block_dim.z
    o[9] = pk.grid_dim.x
    o[10] = pk.grid_dim.y
    o[11] = pk.grid_dim.z


@pytest.mark.parametrize("grid,block", [((2, 3, 2), (4, 2, 3)), ((5,), (7,)), ((1, 4), (3, 5)), (3, (2, 1, 4))])
def test_multi_dim_ids(device, grid, block):
    g = tuple(grid) if isinstance(grid, tuple) else (grid,)
    b = tuple(block) if isinstance(block, tuple) else (block,)
    g, b = g + (1,) * (3 - len(g)), b + (1,) * (3 - len(b))
    n = int(np.prod(g) * np.prod(b))
    got = run(device, k_ids, grid, block, np.zeros(n * 12, np.uint32))[0].reshape(n, 12)
    exp = [(tx, ty, tz, bx, by, bz) + b + g
           for bz in range(g[2]) for by in range(g[1]) for bx in range(g[0])
           for tz in range(b[2]) for ty in range(b[1]) for tx in range(b[0])]
    assert [tuple(r) for r in got.tolist()] == exp


# ---------------------------------------------------------------------------- barriers and shared memory
@pk.kernel
def k_reverse(x: ConstPtr[f32], out: Ptr[f32]):
    buf = pk.shared.array(256, f32)
    t = pk.thread_idx.x + pk.block_dim.x * pk.thread_idx.y
    n = pk.block_dim.x * pk.block_dim.y
    base = usize(pk.block_idx.x * n)
    buf[t] = x[base + usize(t)]
    pk.syncthreads()              # every write above is visible below, to every thread of the block
    out[base + usize(t)] = buf[n - 1 - t]


@pytest.mark.parametrize("grid,block", [(4, 256), (3, 100), ((80,), (16, 16)), (2, (8, 4))])
def test_barrier_orders_shared_memory(device, grid, block):
    nb = grid if isinstance(grid, int) else grid[0]
    bs = block if isinstance(block, int) else block[0] * block[1]
    x = np.random.default_rng(0).standard_normal(nb * bs).astype(np.float32)
    got = run(device, k_reverse, grid, block, x, np.zeros_like(x))[1]
    np.testing.assert_array_equal(got, x.reshape(nb, bs)[:, ::-1].ravel())


@pk.kernel
def k_shared_per_block(out: Ptr[u32]):
    # every block fills its shared array with its own id; another block's writes never show up
    buf = pk.shared.array((4, 32), u32)
    tile = pk.shared.array(4, u32)
    t = pk.thread_idx.x
    for r in range(4):
        buf[r, t] = pk.block_idx.x * u32(1000) + u32(r)
    if t < 4:
        tile[t] = pk.block_idx.x
    pk.syncthreads()
    acc: u32 = 0
    for r in range(4):
        for c in range(32):
            acc += buf[r, c] - pk.block_idx.x * u32(1000)
    pk.syncthreads()
    out[pk.block_idx.x * 32 + t] = acc + tile[t % 4] - pk.block_idx.x


def test_shared_memory_is_per_block_even_when_blocks_run_in_parallel(device):
    nb = 1024   # 1024 * 32 threads: the host runs blocks on several threads
    got = run(device, k_shared_per_block, nb, 32, np.zeros(nb * 32, np.uint32))[0]
    assert (got == 32 * (0 + 1 + 2 + 3)).all()


@pk.kernel
def k_shared_first_used_in_branch(out: Ptr[u32]):
    buf = pk.shared.array(32, u32)
    t = pk.thread_idx.x
    if t < 4:
        buf[t] = t + u32(1)
    pk.syncthreads()
    out[t] = buf[t % 4]


@pk.kernel
def k_dynamic_first_used_in_loop(out: Ptr[u32]):
    dyn = pk.shared.dynamic(u32)
    t = pk.thread_idx.x
    for k in range(1):
        dyn[t] = t * u32(2)
    pk.syncthreads()
    out[t] = dyn[31 - t]


# regression: the first use of a shared array inside a branch or loop once left its address in a block
# that did not dominate later uses (LLVM verifier: 'Instruction does not dominate all uses!')
@pytest.mark.parametrize("kern", [k_shared_first_used_in_branch, k_dynamic_first_used_in_loop], ids=["static", "dynamic"])
def test_shared_first_used_in_branch(device, kern):
    got = run(device, kern, 1, 32, np.zeros(32, np.uint32), shared_mem=128)[0]
    exp = [t % 4 + 1 for t in range(32)] if kern is k_shared_first_used_in_branch else [(31 - t) * 2 for t in range(32)]
    assert got.tolist() == exp


@pk.kernel
def k_dynamic_shared(x: ConstPtr[f32], out: Ptr[f32]):
    dyn = pk.shared.dynamic(f32)
    stat = pk.shared.array(64, f32)
    t = pk.thread_idx.x
    n = pk.block_dim.x
    i = usize(pk.block_idx.x * n + t)
    dyn[t] = x[i]
    stat[t % 64] = 0.0
    pk.syncthreads()
    if t == 0:
        s: f32 = 0
        for k in range(n):
            s += dyn[k]
        stat[0] = s
    pk.syncthreads()
    out[i] = stat[0] - dyn[(t + 1) % n]


@pytest.mark.parametrize("bs", [64, 200, 512])
def test_dynamic_shared_memory_sized_at_launch(device, bs):
    x = (np.arange(3 * bs) % 13).astype(np.float32)
    got = run(device, k_dynamic_shared, 3, bs, x, np.zeros_like(x), shared_mem=bs * 4)[1]
    xs = x.reshape(3, bs)
    np.testing.assert_array_equal(got.reshape(3, bs), xs.sum(1, keepdims=True) - np.roll(xs, -1, axis=1))


@pk.kernel
def k_fences(p: Ptr[i32]):
    i = pk.global_id()
    p[i] = 1
    pk.threadfence_block()
    p[i] += 1
    pk.threadfence()
    p[i] += 1
    pk.threadfence_system()


def test_memory_fences(device):
    assert (run(device, k_fences, 2, 32, np.zeros(64, np.int32))[0] == 3).all()


@pk.kernel
def k_divergent_barrier(p: Ptr[i32]):
    if pk.thread_idx.x < 5:
        pk.syncthreads()
    p[0] = 1


def test_divergent_barrier_raises_launch_error():
    dev = pk.device("cpu")
    with pytest.raises(pk.LaunchError, match=r"k_divergent_barrier.*barrier.*only some threads.*line \d+"):
        run(dev, k_divergent_barrier, 1, 32, np.zeros(1, np.int32))


# ---------------------------------------------------------------------------- atomics
@pk.kernel
def k_atomic_global(n: usize, vals: ConstPtr[T], acc: Ptr[T], old: Ptr[T], *, T):
    i = pk.global_id()
    if i < n:
        v = vals[i]
        pk.atomic.add(acc, 0, v)
        pk.atomic.sub(acc, 1, v)
        pk.atomic.min(acc, 2, v)
        pk.atomic.max(acc, 3, v)
        old[i] = pk.atomic.exchange(acc, 4, v)
        # a counter incremented through compare-and-swap retries
        done = False
        while not done:
            cur = pk.atomic.add(acc, 5, 0)
            done = pk.atomic.cas(acc, 5, cur, cur + 1) == cur


@pk.kernel
def k_atomic_shared(vals: ConstPtr[T], out: Ptr[T], old: Ptr[T], init: ConstPtr[T], *, T):
    acc = pk.shared.array(6, T)
    t = pk.thread_idx.x
    i = pk.global_id()
    if t < 6:
        acc[t] = init[t]
    pk.syncthreads()
    v = vals[i]
    pk.atomic.add(acc, 0, v)
    pk.atomic.sub(acc, 1, v)
    pk.atomic.min(acc, 2, v)
    pk.atomic.max(acc, 3, v)
    old[i] = pk.atomic.exchange(acc, 4, v)
    done = False
    while not done:
        cur = pk.atomic.add(acc, 5, 0)
        done = pk.atomic.cas(acc, 5, cur, cur + 1) == cur
    pk.syncthreads()
    if t < 6:
        out[pk.block_idx.x * 6 + t] = acc[t]


ATOMIC_MOD = pk.Module("test_atomics")
for _t in ATOMIC_TYPES:
    ATOMIC_MOD.add(k_atomic_global.instance(f"atomic_global_{_t.name}", T=_t),
                   k_atomic_shared.instance(f"atomic_shared_{_t.name}", T=_t))


def _atomic_values(ty, n):
    v = (np.arange(n, dtype=np.int64) * 7919) % 1000
    if ty.is_signed or ty.is_float:
        v = v - 500
    return v.astype(ty.np)


def _init(ty):
    big = 10 ** 6
    return np.array([5, big, big if ty.is_signed or ty.is_float else 2 ** ty.bits - 1 if ty.bits < 64 else 2 ** 63, -big if ty.is_signed or ty.is_float else 0, 12345, 0], dtype=ty.np)


def _expected(ty, init, vals):
    i = [int(v) for v in init]
    vs = [int(v) for v in vals]
    mod = None if ty.is_float else 1 << ty.bits
    add, sub = i[0] + sum(vs), i[1] - sum(vs)
    if mod:
        add, sub = add % mod, sub % mod
    return [add, sub, min(i[2], *vs), max(i[3], *vs), None, i[5] + len(vs)]


@pytest.mark.parametrize("ty", ATOMIC_TYPES, ids=lambda t: t.name)
def test_atomics_global_under_contention(device, ty):
    n = 128 * 128     # enough threads that the host runs blocks on several cores at once
    vals = _atomic_values(ty, n)
    init = _init(ty)
    fn = device.get_or_load_func(f"atomic_global_{ty.name}", ATOMIC_MOD)
    dacc, dold = device.to_device(init), device.zeros(n, ty.np)
    fn[128, 128](n, device.to_device(vals), dacc, dold)
    acc, old = dacc.to_host(), dold.to_host()
    exp = _expected(ty, init, vals)
    got = [int(v) for v in acc]
    if not ty.is_float:
        got = [g % (1 << ty.bits) for g in got]
        exp = [e % (1 << ty.bits) if e is not None else None for e in exp]
    for k in (0, 1, 2, 3, 5):
        assert got[k] == exp[k], (ty, k, got[k], exp[k])
    # exchange: the old values plus the final one are exactly the initial value and every thread's value
    assert sorted(old.tolist() + [acc[4]]) == sorted([init[4]] + vals.tolist())


@pytest.mark.parametrize("ty", ATOMIC_TYPES, ids=lambda t: t.name)
def test_atomics_shared_under_contention(device, ty):
    nb, bs = 16, 256
    vals = _atomic_values(ty, nb * bs)
    init = _init(ty)
    fn = device.get_or_load_func(f"atomic_shared_{ty.name}", ATOMIC_MOD)
    dout, dold = device.zeros(nb * 6, ty.np), device.zeros(nb * bs, ty.np)
    fn[nb, bs](device.to_device(vals), dout, dold, device.to_device(init))
    out, old = dout.to_host().reshape(nb, 6), dold.to_host().reshape(nb, bs)
    for b in range(nb):
        vb = vals[b * bs:(b + 1) * bs]
        exp = _expected(ty, init, vb)
        got = [int(v) for v in out[b]]
        if not ty.is_float:
            got = [g % (1 << ty.bits) for g in got]
            exp = [e % (1 << ty.bits) if e is not None else None for e in exp]
        for k in (0, 1, 2, 3, 5):
            assert got[k] == exp[k], (ty, b, k, got[k], exp[k])
        assert sorted(old[b].tolist() + [out[b, 4]]) == sorted([init[4]] + vb.tolist())


@pk.kernel
def k_atomic_returns_old(p: Ptr[i32], olds: Ptr[i32]):
    i = pk.global_id()
    olds[i] = pk.atomic.add(p, 0, 1)


def test_atomic_add_returns_distinct_old_values(device):
    n = 64 * 256
    p, olds = run(device, k_atomic_returns_old, 64, 256, np.zeros(1, np.int32), np.zeros(n, np.int32))
    assert p[0] == n and sorted(olds.tolist()) == list(range(n))


@pk.kernel
def k_cas_semantics(p: Ptr[f64], out: Ptr[f64]):
    out[0] = pk.atomic.cas(p, 0, 1.0, 2.0)     # matches: swaps
    out[1] = pk.atomic.cas(p, 0, 1.0, 3.0)     # does not match: unchanged
    out[2] = pk.atomic.exchange(p, 1, -0.5)
    out[3] = pk.atomic.min(p, 2, -7.0)
    out[4] = pk.atomic.max(p, 3, 7.0)


def test_cas_exchange_return_old_values(device):
    p, out = run(device, k_cas_semantics, 1, 1, np.array([1.0, 9.0, -1.0, 1.0]), np.zeros(5))
    assert p.tolist() == [2.0, -0.5, -7.0, 7.0]
    assert out.tolist() == [1.0, 2.0, 9.0, -1.0, 1.0]


# ---------------------------------------------------------------------------- wave operations
WAVE_TYPES = [i32, u32, i64, f32, f64]


@pk.func
def flat_id() -> usize:
    """The thread's position in the whole launch, for any block and grid shape."""
    b = pk.block_idx.x + pk.grid_dim.x * (pk.block_idx.y + pk.grid_dim.y * pk.block_idx.z)
    t = pk.thread_idx.x + pk.block_dim.x * (pk.thread_idx.y + pk.block_dim.y * pk.thread_idx.z)
    return usize(b) * usize(pk.block_dim.x * pk.block_dim.y * pk.block_dim.z) + usize(t)


@pk.kernel
def k_wave_shuffles(x: ConstPtr[T], src: ConstPtr[u32], out: Ptr[T], D: u32, *, T):
    i = flat_id()
    v = x[i]
    o = out + i * 4
    o[0] = pk.wave.shuffle(v, src[i])
    o[1] = pk.wave.shuffle_xor(v, D)
    o[2] = pk.wave.shuffle_up(v, D)
    o[3] = pk.wave.shuffle_down(v, D)


@pk.kernel
def k_wave_reduce(x: ConstPtr[T], out: Ptr[T], *, T):
    i = flat_id()
    v = x[i]
    o = out + i * 3
    o[0] = pk.wave.sum(v)
    o[1] = pk.wave.min(v)
    o[2] = pk.wave.max(v)


@pk.kernel
def k_wave_votes(x: ConstPtr[i32], votes: Ptr[u64], lanes: Ptr[u32]):
    i = flat_id()
    big = x[i] > 40
    w = votes + i * 3
    w[0] = pk.wave.ballot(big)
    w[1] = u64(pk.wave.any(big))
    w[2] = u64(pk.wave.all(big))
    lanes[i] = pk.lane_id()


# small kernels: one kernel with many wave operations costs the host target far more to compile
WAVE_MOD = pk.Module("test_wave").add(*(k_wave_shuffles.instance(f"wave_shuffles_{t.name}", T=t) for t in WAVE_TYPES),
                                      *(k_wave_reduce.instance(f"wave_reduce_{t.name}", T=t) for t in WAVE_TYPES),
                                      k_wave_votes.instance("wave_votes"))


def _waves(nthreads, nblocks, width):
    """The global ids of each wave: consecutive threads of a block, the last one partial."""
    for b in range(nblocks):
        for w0 in range(0, nthreads, width):
            yield [b * nthreads + t for t in range(w0, min(w0 + width, nthreads))]


def _inputs(ty, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 100, n) if ty.is_signed or ty.is_float else rng.integers(0, 150, n)
    return x.astype(ty.np), rng.integers(0, 200, n).astype(np.uint32)


def _dims(grid, block):
    return int(np.prod(grid)), int(np.prod(block))


def check_shuffles(dev, ty, grid, block):
    nb, nt = _dims(grid, block)
    n, width = nb * nt, dev.target.wave_size
    x, src = _inputs(ty, n, 1)
    fn = dev.get_or_load_func(f"wave_shuffles_{ty.name}", WAVE_MOD)
    dx, dsrc = dev.to_device(x), dev.to_device(src)
    for d in (1, 5, 16, 31):
        dout = dev.zeros(n * 4, ty.np)
        fn[grid, block](dx, dsrc, dout, d)
        got = dout.to_host().reshape(n, 4)
        exp = np.zeros_like(got)
        for ids in _waves(nt, nb, width):
            vals = x[ids]
            for k, gi in enumerate(ids):
                def at(j):  # a lane outside the wave (or missing from a partial one) reads its own value
                    return vals[j] if 0 <= j < len(ids) else vals[k]
                exp[gi] = [at(int(src[gi]) % width), at(k ^ d), at(k - d) if k >= d else vals[k],
                           at(k + d) if k + d < width else vals[k]]
        np.testing.assert_array_equal(got, exp, err_msg=f"{ty} d={d} width={width}")


def check_reductions(dev, ty, grid, block):
    nb, nt = _dims(grid, block)
    n, width = nb * nt, dev.target.wave_size
    x, _ = _inputs(ty, n, 2)
    dout = dev.zeros(n * 3, ty.np)
    dev.get_or_load_func(f"wave_reduce_{ty.name}", WAVE_MOD)[grid, block](dev.to_device(x), dout)
    got = dout.to_host().reshape(n, 3)
    for ids in _waves(nt, nb, width):
        vals = x[ids]
        with np.errstate(all="ignore"):
            exp = [vals.sum(dtype=x.dtype), vals.min(), vals.max()]
        # the xor butterfly: the same result on every lane (integers-valued floats sum exactly)
        for gi in ids:
            assert got[gi].tolist() == exp, (ty, width, ids[0], got[gi], exp)


def check_votes(dev, grid, block):
    nb, nt = _dims(grid, block)
    n, width = nb * nt, dev.target.wave_size
    x, _ = _inputs(i32, n, 3)
    dv, dl = dev.zeros(n * 3, np.uint64), dev.zeros(n, np.uint32)
    dev.get_or_load_func("wave_votes", WAVE_MOD)[grid, block](dev.to_device(x), dv, dl)
    votes, lanes = dv.to_host().reshape(n, 3), dl.to_host()
    for ids in _waves(nt, nb, width):
        big = x[ids] > 40
        ballot = sum(1 << k for k in range(len(ids)) if big[k])
        for k, gi in enumerate(ids):
            assert lanes[gi] == k
            assert votes[gi].tolist() == [ballot, int(big.any()), int(big.all())], (width, ids[0], k)


FULL = [(2, 128), (3, (16, 8)), ((2, 2), (8, 4, 2)), ((2, 1, 2), (64, 2))]
PARTIAL = [(3, 40), (2, 100), (2, (7, 5)), (3, 1), ((2, 2), (3, 3, 3))]


@pytest.mark.parametrize("ty", WAVE_TYPES, ids=lambda t: t.name)
def test_wave_shuffles(wave_device, ty):
    for grid, block in FULL + PARTIAL:
        check_shuffles(wave_device, ty, grid, block)


@pytest.mark.parametrize("ty", WAVE_TYPES, ids=lambda t: t.name)
def test_wave_reductions_full_waves(wave_device, ty):
    for grid, block in FULL:
        check_reductions(wave_device, ty, grid, block)


def test_wave_votes_and_lane_ids(wave_device):
    for grid, block in FULL + PARTIAL:
        check_votes(wave_device, grid, block)


# regression: the xor butterfly once read a lane's own value where the partner lane was missing, so sums
# over-counted and min/max could miss lanes in a partial wave
@pytest.mark.parametrize("grid,block", PARTIAL[:3], ids=["40", "100", "7x5"])
def test_wave_reductions_partial_waves(wave_device, grid, block):
    for ty in WAVE_TYPES:
        check_reductions(wave_device, ty, grid, block)


@pk.kernel
def k_wave_size(out: Ptr[u32], *, W):
    buf = pk.shared.array(pk.wave_size, u32)      # a compile-time constant: usable as a shape
    t = pk.thread_idx.x
    buf[t % pk.wave_size] = t
    if pk.wave_size == 64:
        out[t] = u32(pk.wave_size) + u32(W)
    else:
        out[t] = u32(pk.wave_size) * 2


def test_wave_size_is_a_compile_time_constant_per_device(wave_device):
    width = wave_device.target.wave_size
    got = run(wave_device, k_wave_size.instance(W=1), 1, 8, np.zeros(8, np.uint32))[0]
    assert got.tolist() == [65 if width == 64 else 64] * 8


def test_wave_size_default_is_64():
    assert pk.device("cpu").target.wave_size in (32, 64)
    assert pk.device("cpu", wave_size=32).target.wave_size == 32
    assert pk.device("cpu", wave_size=64).target.wave_size == 64


@pk.func
def tile_or(fallback: u32, *, B) -> u32:
    return u32(B) if B > 0 else fallback


@pk.kernel
def k_tile_bytes(out: Ptr[u32]):
    out[pk.thread_idx.x] = tile_or(u32(1), B=pk.tile_bytes) + u32(pk.tile_bytes // 4)


def test_tile_bytes_is_a_compile_time_constant_per_target():
    """pk.tile_bytes is the target's grid-stride tile (0: one element a step); a device function typed
    with it as a compile-time argument is typed again for a target with other tiles."""
    for tiles, want in ((0, 1), (16, 20), (0, 1)):
        dev = pk.device("cpu", tile_bytes=tiles) if tiles else pk.device("cpu")
        got = run(dev, k_tile_bytes, 1, 4, np.zeros(4, np.uint32))[0]
        assert got.tolist() == [want] * 4


@pk.kernel
def k_select(n: usize, x: ConstPtr[f32], out: Ptr[f32], flags: Ptr[u8]):
    for i in pk.grid_stride(n):
        v = x[i]
        out[i] = pk.select(v > 0, v * 2, 7)            # a constant side takes the other side's type
        flags[i] = pk.select(pk.isnan(v), u8(1), u8(0)) + pk.select(True, u8(0), u8(5))


def test_select_evaluates_both_sides_without_branching(device):
    x = np.array([1.5, -2.0, 0.0, np.nan, 3.0], np.float32)
    out, flags = device.zeros(5, f32), device.zeros(5, np.uint8)
    k_select.launch(1, 32, 5, device.to_device(x), out, flags, device=device)
    np.testing.assert_array_equal(out.to_host(), [3.0, 7.0, 7.0, 7.0, 6.0])
    np.testing.assert_array_equal(flags.to_host(), [0, 0, 0, 1, 0])


@pk.kernel
def _pair_store(y: Ptr[pk.u64], v: pk.u64, *, ASSUME):
    i = usize(pk.global_id())
    out = y + 2 * i
    if ASSUME:
        out = pk.assume_aligned(out, 16)
    out[0] = v
    out[1] = v + pk.u64(1)


def test_assume_aligned_merges_stores():
    """``pk.assume_aligned`` promises LLVM the low bits of a pointer: two adjacent 8-byte stores
    through it become one 16-byte store on CUDA (``st.global.v2``), and stay two without it; the
    values are the same on the CPU."""
    from pykern.compiler import compile_kernels
    from pykern.targets.registry import make_target
    kernels = {a: _pair_store.instance(f"pair_store_{a}", ASSUME=a) for a in (False, True)}
    for k in kernels.values():
        y = np.zeros(8, dtype=np.uint64)
        k[1, 4](y, 7)
        assert y.tolist() == [7, 8] * 4
    for assumed, k in kernels.items():
        ptx = compile_kernels([k], make_target("cuda"), "assume")[0].decode()
        assert ("st.global.v2.b64" in ptx) == assumed, ptx
