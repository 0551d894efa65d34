"""The language's own features on the emulator: shared memory (static and dynamic), barriers, fences,
atomics on global and shared memory, every wave operation (full and partial waves), 2-D/3-D ids and
the hidden arguments behind them, local arrays in scratch, f16/bf16/f8 conversions, integer semantics
and the math library. Each kernel here is launched by its case on the capturing device."""
from __future__ import annotations

import numpy as np

import pykern as pk
import pykern.math as pkm
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i8, i32, i64, u8, u16, u32, u64, usize

from tests.amd._registry import case, rng
from tests.amd._stdlib_cases import values

T = pk.TypeVar("T")


@pk.kernel
def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * x[i] + y[i]


@case("lang/grid_stride")
def _grid_stride(dev):
    gen = rng("lang/grid_stride")
    for n, grid, block in ((1000, 4, 256), (77, 1, 48), (3000, 3, 96)):
        x, y = dev.to_device(values(f32, n, gen)), dev.to_device(values(f32, n, gen))
        saxpy.launch(grid, block, n, 1.75, x, y, device=dev)


@pk.kernel
def ids_3d(out: Ptr[u32]):
    """Every id and size in three dimensions (AMDGPU: workitem/workgroup ids and the hidden
    ``hidden_block_count_*`` / ``hidden_group_size_*`` arguments of code object v5)."""
    bx = pk.block_idx.x
    by = pk.block_idx.y
    bz = pk.block_idx.z
    nx = pk.block_dim.x
    ny = pk.block_dim.y
    t = (pk.thread_idx.z * ny + pk.thread_idx.y) * nx + pk.thread_idx.x
    b = (bz * pk.grid_dim.y + by) * pk.grid_dim.x + bx
    k = (b * pk.block_dim.z * ny * nx + t) * 8
    out[k] = pk.thread_idx.x
    out[k + 1] = pk.thread_idx.y
    out[k + 2] = pk.thread_idx.z
    out[k + 3] = b
    out[k + 4] = pk.grid_dim.x * 100 + pk.grid_dim.y * 10 + pk.grid_dim.z
    out[k + 5] = nx * 10000 + ny * 100 + pk.block_dim.z
    out[k + 6] = pk.lane_id()
    out[k + 7] = u32(pk.global_id())


@case("lang/ids_3d")
def _ids(dev):
    for grid, block in (((3, 2, 2), (5, 3, 2)), ((2, 1, 1), (70, 1, 1)), ((1, 3, 1), (8, 4, 1))):
        count = int(np.prod(grid)) * int(np.prod(block))
        ids_3d.launch(grid, block, dev.zeros(count * 8, u32), device=dev)


@pk.kernel
def reverse_block(x: ConstPtr[f32], out: Ptr[f32]):
    tile = pk.shared.array(64, f32)
    scratch = pk.shared.dynamic(f32)
    t = pk.thread_idx.x
    tile[t] = x[pk.global_id()]
    scratch[t] = f32(t) * 0.5
    pk.syncthreads()
    pk.threadfence_block()
    out[pk.global_id()] = tile[pk.block_dim.x - 1 - t] * scratch[(t + 1) % pk.block_dim.x]


@pk.kernel
def block_sum(n: usize, x: ConstPtr[i32], out: Ptr[i32]):
    """A tree reduction through LDS with a barrier at every level (block size a power of two)."""
    sm = pk.shared.array(256, i32)
    t = pk.thread_idx.x
    i = usize(pk.global_id())
    sm[t] = x[i] if i < n else 0
    pk.syncthreads()
    step = pk.block_dim.x // 2
    while step > 0:
        if t < step:
            sm[t] += sm[t + step]
        pk.syncthreads()
        step //= 2
    if t == 0:
        out[pk.block_idx.x] = sm[0]


@case("lang/shared_barriers")
def _shared(dev):
    gen = rng("lang/shared_barriers")
    x = dev.to_device(values(f32, 128, gen))
    reverse_block.launch(2, 64, x, dev.zeros(128, f32), shared_mem=64 * 4, device=dev)
    x = dev.to_device(gen.integers(-1000, 1000, size=1000).astype(np.int32))
    block_sum.launch(4, 256, 1000, x, dev.zeros(4, i32), device=dev)
    block_sum.launch(8, 64, 500, x, dev.zeros(8, i32), device=dev)


@pk.kernel
def atomics(n: usize, x: ConstPtr[u32], g32: Ptr[u32], gi32: Ptr[i32], g64: Ptr[u64], gf: Ptr[f32], gd: Ptr[f64],
            old: Ptr[u32]):
    local = pk.shared.array(8, u32)
    t = pk.thread_idx.x
    if t < 8:
        local[t] = 0
    pk.syncthreads()
    for i in pk.grid_stride(n):
        v = x[i]
        pk.atomic.add(local, v % 8, 1)
        pk.atomic.max(g32, 0, v)
        pk.atomic.min(g32, 1, v)
        pk.atomic.add(g32, 2, v % 16)
        pk.atomic.sub(gi32, 0, i32(v % 8))
        pk.atomic.max(gi32, 1, i32(v) - 500)
        pk.atomic.min(gi32, 2, i32(v) - 500)
        pk.atomic.add(g64, 0, u64(v) << 20)
        pk.atomic.max(g64, 1, u64(v) * 3)
        pk.atomic.add(gf, 0, f32(v % 4))  # small integers: exact in any order
        pk.atomic.add(gd, 0, f64(v % 8))
    pk.syncthreads()
    if t < 8:
        pk.atomic.add(g32, 3 + t, local[t])
    if t == 0:
        prev = pk.atomic.cas(g32, 11, 0, 7 + pk.block_idx.x)  # only the first block's swap succeeds
        old[pk.block_idx.x] = prev
        pk.atomic.exchange(g32, 12, 99)


@case("lang/atomics")
def _atomics(dev):
    gen = rng("lang/atomics")
    x = dev.to_device(gen.integers(0, 1000, size=777).astype(np.uint32))
    g32 = dev.to_device(np.array([0, 0xFFFFFFFF] + [0] * 11, np.uint32))
    atomics.launch(3, 128, 777, x, g32, dev.zeros(3, i32), dev.zeros(2, u64), dev.zeros(1, f32), dev.zeros(1, f64),
                   dev.zeros(3, u32), device=dev)


@pk.kernel
def wave_ops(x: ConstPtr[T], out: Ptr[T], votes: Ptr[u64], *, T):
    """Every wave operation, every lane of the block present (a block that is not a multiple of the
    wave leaves its last wave partial: the lanes past the block are absent)."""
    i = pk.global_id()
    v = x[i]
    lane = pk.lane_id()
    k = i * 9
    out[k] = pk.wave.shuffle(v, (lane * 7 + 3) % u32(pk.wave_size))
    out[k + 1] = pk.wave.shuffle_xor(v, 5)
    out[k + 2] = pk.wave.shuffle_up(v, 3)
    out[k + 3] = pk.wave.shuffle_down(v, 2)
    out[k + 4] = pk.wave.sum(v)
    out[k + 5] = pk.wave.min(v)
    out[k + 6] = pk.wave.max(v)
    out[k + 7] = T(pk.wave.all(v > T(0))) + T(2) * T(pk.wave.any(v > T(50)))
    out[k + 8] = pk.wave.shuffle(v, 0)
    ballot = pk.wave.ballot(v > T(0))
    if lane == 0:
        votes[i // u64(pk.wave_size)] = ballot


WAVE_TYPES = (i32, u32, i64, u64, f32, f64)
WAVE_OPS = {t: wave_ops.instance(f"wave_ops_{t.name}", T=t) for t in WAVE_TYPES}


@case("lang/wave_ops")
def _wave_ops(dev):
    gen = rng("lang/wave_ops")
    for t, inst in WAVE_OPS.items():
        for grid, block in ((2, 64), (1, 96), (1, 48)):  # full waves; wave64's partial last wave; a ragged block
            n = grid * block
            raw = gen.integers(-100, 100, size=n) if t.is_signed or t.is_float else gen.integers(0, 100, size=n)
            if t.is_float:  # small integers: wave sums are exact in any order
                raw = raw.astype(np.float64)
            x = dev.to_device(raw.astype(t.np))
            inst.launch(grid, block, x, dev.zeros(n * 9, t), dev.zeros(n // 32 + 2, u64), device=dev)


@pk.kernel
def conversions(n: usize, x: ConstPtr[f32], d: ConstPtr[f64], out16: Ptr[f16], outb: Ptr[bf16], out8: Ptr[f8e4m3],
                back: Ptr[f32], dn16: Ptr[f16], dnb: Ptr[bf16], dn8: Ptr[f8e4m3], ints: Ptr[i32], small: Ptr[i8],
                wide: Ptr[u64]):
    for i in pk.grid_stride(n):
        v = x[i]
        h = f16(v)
        b = bf16(v)
        e = f8e4m3(v)
        out16[i] = h
        outb[i] = b
        out8[i] = e
        back[3 * i] = f32(h)
        back[3 * i + 1] = f32(b)
        back[3 * i + 2] = f32(e)
        dn16[i] = f16(d[i])
        dnb[i] = bf16(d[i])
        dn8[i] = f8e4m3(d[i])
        ints[2 * i] = i32(v * 1e9)          # saturating, NaN -> 0
        ints[2 * i + 1] = i32(f16(v) * f16(3.0))
        small[i] = i8(v * 40.0)
        wide[i] = u64(d[i] * 1e18)


@case("lang/conversions")
def _conversions(dev):
    gen = rng("lang/conversions")
    n = 300
    x = values(f32, n, gen) * np.float32(1.0)
    x[40:80] = gen.uniform(-500, 500, size=40)  # past f8's range: saturation
    x[80:100] = gen.uniform(-1e-5, 1e-5, size=20)  # f16/f8 subnormals
    d = values(f64, n, gen)
    d[30:60] = gen.uniform(-70000, 70000, size=30)
    d[60:90] = np.float64(x[60:90]) * (1 + 2.0 ** -30)  # close to ties of the narrow types
    outs = [dev.zeros(n, t) for t in (f16, bf16, f8e4m3)] + [dev.zeros(3 * n, f32)] + \
        [dev.zeros(n, t) for t in (f16, bf16, f8e4m3)] + [dev.zeros(2 * n, i32), dev.zeros(n, i8), dev.zeros(n, u64)]
    conversions.launch(2, 64, n, dev.to_device(x), dev.to_device(d), *outs, device=dev)


@pk.kernel
def integers(n: usize, a: ConstPtr[T], b: ConstPtr[T], out: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        x = a[i]
        y = b[i]
        k = 8 * i
        out[k] = x // y           # all bits set when y == 0, MIN // -1 wraps
        out[k + 1] = x % y
        out[k + 2] = x * y
        out[k + 3] = x << (y % T(pk.wave_size))
        out[k + 4] = x >> T(3)
        out[k + 5] = (x & y) | (x ^ T(0x5A))
        out[k + 6] = x - y
        out[k + 7] = T(x < y) + T(x == y) * T(2)


INTEGER_TYPES = (i8, u8, u16, i32, u32, i64, u64)
INTEGERS = {t: integers.instance(f"integers_{t.name}", T=t) for t in INTEGER_TYPES}


@case("lang/integers")
def _integers(dev):
    gen = rng("lang/integers")
    for t, inst in INTEGERS.items():
        a, b = values(t, 200, gen), values(t, 200, gen)
        b[5:15] = 0
        inst.launch(2, 64, 200, dev.to_device(a), dev.to_device(b), dev.zeros(1600, t), device=dev)


@pk.kernel
def math_lib(n: usize, x: ConstPtr[T], y: ConstPtr[T], out: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        v = x[i]
        w = y[i]
        k = 24 * i
        out[k] = pkm.exp(v)
        out[k + 1] = pkm.exp2(v)
        out[k + 2] = pkm.expm1(v)
        out[k + 3] = pkm.log(v)
        out[k + 4] = pkm.log2(v)
        out[k + 5] = pkm.log1p(v)
        out[k + 6] = pkm.sqrt(v)
        out[k + 7] = pkm.rsqrt(v)
        out[k + 8] = pkm.sin(v)
        out[k + 9] = pkm.cos(v)
        out[k + 10] = pkm.tan(v)
        out[k + 11] = pkm.tanh(v)
        out[k + 12] = pkm.erf(v)
        out[k + 13] = pkm.erfc(v)
        out[k + 14] = pkm.normcdf(v)
        out[k + 15] = pkm.pow(v, w)
        out[k + 16] = pkm.fmod(v, w)
        out[k + 17] = pkm.round(v) + pk.rint(v) + pk.floor(w) + pk.ceil(w) + pk.trunc(v)
        out[k + 18] = pk.fma(v, w, T(0.5))
        out[k + 19] = pk.copysign(pk.fabs(v), w)
        out[k + 20] = pk.fmin(v, w) + pk.fmax(v, w)
        out[k + 21] = pk.minimum(v, w) - pk.maximum(v, w)
        out[k + 22] = T(pk.isnan(v)) + T(2) * T(pk.isinf(v))
        out[k + 23] = v / w


MATH = {t: math_lib.instance(f"math_lib_{t.name}", T=t) for t in (f32, f64)}


@case("lang/math")
def _math(dev):
    gen = rng("lang/math")
    n = 400
    for t, inst in MATH.items():
        x, y = values(t, n, gen), values(t, n, gen)
        x[100:200] = gen.uniform(-100, 100, size=100)      # beyond the first period, large exponents
        x[200:220] = gen.uniform(-1e7, 1e7, size=20)       # sin/cos argument reduction (Payne-Hanek past 2^21)
        x[220:300] = np.abs(x[220:300]) * 10.0             # log's domain
        y[300:350] = np.round(y[300:350])                  # pow with integral exponents of negative bases
        inst.launch(2, 128, n, dev.to_device(x), dev.to_device(y), dev.zeros(24 * n, t), device=dev)


@pk.kernel
def fast_math(n: usize, x: ConstPtr[f32], out: Ptr[f32]):
    for i in pk.grid_stride(n):
        d = x[i]
        r = pk.fast_rcp(d)
        out[3 * i] = pk.fast_exp2(d)
        out[3 * i + 1] = r
        out[3 * i + 2] = pk.fma(pk.fma(-d, r, 1.0), r, r)


@case("lang/fast_math", ulps={"fast_math": 2},
      why="pk.fast_exp2 / pk.fast_rcp are the hardware's v_exp_f32 / v_rcp_f32 on AMDGPU (about 1 ulp, "
          "docs/language.md) and exact on the host")
def _fast_math(dev):
    gen = rng("lang/fast_math")
    x = gen.uniform(-60, 60, size=200).astype(np.float32)
    fast_math.launch(1, 128, 200, dev.to_device(x), dev.zeros(600, f32), device=dev)


@pk.kernel
def local_arrays(n: usize, x: ConstPtr[u32], out: Ptr[u32]):
    """A local array indexed at run time (AMDGPU scratch memory) and one the compiler keeps in registers."""
    hist = pk.local.array(16, u32)
    fixed = pk.local.array(4, u32)
    for k in pk.static_range(16):
        hist[k] = 0
    for k in pk.static_range(4):
        fixed[k] = u32(k) * 3
    i = usize(pk.global_id())
    j = i
    while j < n:
        hist[x[j] % 16] += 1
        j += usize(pk.grid_dim.x * pk.block_dim.x)
    for k in pk.static_range(16):
        out[i * 16 + k] = hist[(u32(k) + u32(i)) % 16] + fixed[k % 4]


@pk.kernel
def control_flow(n: usize, x: ConstPtr[i32], out: Ptr[i32]):
    """Divergent loops with break/continue, nested conditions and early returns within a wave."""
    i = pk.global_id()
    if i >= n:
        return
    v = x[i]
    total: i32 = 0
    k: i32 = 0
    while k < v % 50:
        k += 1
        if k % 3 == 0:
            continue
        if total > 200:
            break
        total += k
    out[i] = total if v % 2 == 0 else -total


@case("lang/local_and_control_flow")
def _local(dev):
    gen = rng("lang/local_and_control_flow")
    x = dev.to_device(gen.integers(0, 1 << 30, size=500).astype(np.uint32))
    local_arrays.launch(2, 32, 500, x, dev.zeros(64 * 16, u32), device=dev)
    y = dev.to_device(gen.integers(-1000, 1000, size=150).astype(np.int32))
    control_flow.launch(3, 64, 150, y, dev.zeros(150, i32), device=dev)


@pk.kernel
def cache_policies(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        v = pk.load(x, i, eviction="evict_last") + pk.load(x, (i + 1) % n, eviction="evict_first")
        pk.store(y, i, v, eviction="evict_first")
        pk.threadfence()
        pk.threadfence_system()


@case("lang/cache_policies_and_fences")
def _policies(dev):
    gen = rng("lang/cache_policies_and_fences")
    cache_policies.launch(2, 64, 300, dev.to_device(values(f32, 300, gen)), dev.zeros(300, f32), device=dev)


@pk.kernel
def dot_products(n: usize, a: ConstPtr[u32], b: ConstPtr[u32], packed: ConstPtr[u16], out: Ptr[i32]):
    """pk.dot4_i8 / pk.dot4_u8i8 (v_dot4(c)_i32_i8 or v_dot4_i32_iu8 where the arch has them) and a
    word read at a 2-byte alignment (pk.load(..., align=2))."""
    for i in pk.grid_stride(n):
        x = a[i]
        y = b[i]
        out[3 * i] = pk.dot4_i8(x, y, i32(i) - 50)
        out[3 * i + 1] = pk.dot4_u8i8(x, y, i32(-7))
        word = pk.load(pk.bitcast(packed + 1, ConstPtr[u32]), i, align=2)
        out[3 * i + 2] = pk.dot4_i8(word, y, i32(0))


@case("lang/dot_products")
def _dots(dev):
    gen = rng("lang/dot_products")
    words = lambda n: gen.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)  # noqa: E731
    a, b = words(200), words(200)
    a[:4] = [0x80808080, 0x7F7F7F7F, 0xFFFFFFFF, 0]  # the extremes of both byte interpretations
    b[:4] = [0x80808080, 0x80808080, 0x7F7F7F7F, 0xFFFFFFFF]
    packed = gen.integers(0, 1 << 16, size=2 * 200 + 2, dtype=np.uint64).astype(np.uint16)
    dot_products.launch(2, 64, 200, dev.to_device(a), dev.to_device(b), dev.to_device(packed), dev.zeros(600, i32),
                        device=dev)


@pk.kernel
def half_atomics(n: usize, x: ConstPtr[u32], h: Ptr[f16], b: Ptr[bf16]):
    """f16/bf16 atomic add and sub (LLVM's 16-bit float atomics on AMDGPU) on small integers, exact in
    any order of the adds."""
    for i in pk.grid_stride(n):
        v = x[i] % 4
        pk.atomic.add(h, v, f16(1.0))
        pk.atomic.sub(h, 4 + v, f16(2.0))
        pk.atomic.add(b, v, bf16(1.0))
        pk.atomic.sub(b, 4 + v, bf16(0.5))


@case("lang/half_atomics")
def _half_atomics(dev):
    gen = rng("lang/half_atomics")
    x = dev.to_device(gen.integers(0, 100, size=300).astype(np.uint32))
    half_atomics.launch(2, 64, 300, x, dev.zeros(8, f16), dev.zeros(8, bf16), device=dev)


@pk.kernel
def mul24(n: usize, a: ConstPtr[i32], b: ConstPtr[i32], out: Ptr[i32]):
    """Products of operands sign-extended from 24 bits, taken whole in 64 bits: what LLVM selects
    v_mul_i32_i24 and v_mul_hi_i32_i24 for (LLVM forms loop counts this way too, e.g. im2col1d's)."""
    for i in pk.grid_stride(n):
        x = (a[i] << 8) >> 8
        y = (b[i] << 8) >> 8
        p = i64(x) * i64(y)
        out[2 * i] = i32(p >> 32)
        out[2 * i + 1] = i32(p)


@case("lang/mul24")
def _mul24(dev):
    gen = rng("lang/mul24")
    a, b = values(i32, 300, gen), values(i32, 300, gen)
    a[:6] = (64, 64, 64, 64, -5, 0x7FFFFF)
    b[:6] = (-1, 0x00FFFFFF, 0x00800000, 5, -3, 0x7FFFFF)
    mul24.launch(2, 64, 300, dev.to_device(a), dev.to_device(b), dev.zeros(600, i32), device=dev)


@case("lang/mma")
def _mma(dev):
    """pk.mma: one tile from global memory (both B layouts, leading dimensions other than 16) and a
    K-loop GEMM through shared memory, f16, bf16 and i8: v_mfma_* on CDNA, v_wmma_* on RDNA3/RDNA4. The
    float inputs are small integers, so every partial sum is exact and the result is the same in any
    order of the additions (the CPU's sequential sum, the instruction's own)."""
    from tests.lang.test_mma import accumulator, depth, gemm, k_tile
    gen = rng("lang/mma")
    small = lambda dtype, shape: gen.integers(-8, 9, size=shape).astype(np.float32).astype(dtype.np)  # noqa: E731
    width = dev.target.wave_size
    for dtype in (f16, bf16, i8):
        kd = depth(dtype)
        values_of = (lambda shape: gen.integers(-128, 128, size=shape).astype(np.int8)) if dtype is i8 else \
            (lambda shape, dtype=dtype: small(dtype, shape))
        for layout in ("row", "col"):
            a, b = values_of((16, kd + 8)), values_of((kd, 40) if layout == "row" else (16, 40))
            c = gen.integers(-64, 65, size=(16, 20)).astype(accumulator(dtype).np)
            k_tile.instance(f"mma_tile_{layout}_{dtype.name}", T=dtype, C=accumulator(dtype), layout=layout).launch(
                1, 64, dev.to_device(a), kd + 8, dev.to_device(b), 40, dev.to_device(c), 20, device=dev)
        for col in (False, True):
            m, n, k = 64, 48, 3 * kd
            a = values_of((m, k + 8))
            b = values_of((n, k + 8) if col else (k, n + 16))
            gemm(dtype, col, f"mma_gemm_{'col' if col else 'row'}_{dtype.name}").launch(
                ((n + 31) // 32, m // 32), 4 * width, m, n, k, dev.to_device(a), k + 8, dev.to_device(b), b.shape[1],
                dev.zeros((m, n + 4), accumulator(dtype)), n + 4, device=dev)


@case("lang/mma_places")
def _mma_places(dev):
    """pk.mma's fragments at any address: one tile from global memory and from shared arrays at an
    aligned base and stride (the wide loads), a base one element off and an odd stride (the element
    loads), f16 and i8; small integer values, so any order of the additions is exact."""
    from tests.lang.test_mma import PLACES, accumulator, depth, k_tile_at
    gen = rng("lang/mma_places")
    for dtype in (f16, i8):
        kd = depth(dtype)
        for shared in (False, True):
            kern = k_tile_at.instance(f"mma_at_{'shared' if shared else 'global'}_{dtype.name}", T=dtype,
                                      C=accumulator(dtype), layout="col", shared=shared)
            for off, extra in PLACES[:3]:
                a = gen.integers(-8, 9, 2048).astype(dtype.np)
                b = gen.integers(-8, 9, 2048).astype(dtype.np)
                c = gen.integers(-64, 65, 16 * (16 + extra) + off).astype(accumulator(dtype).np)
                kern.launch(1, 64, dev.to_device(a), off, kd + extra, dev.to_device(b), off, kd + extra,
                            dev.to_device(c), off, 16 + extra, device=dev)


@case("lang/mma_scaled")
def _mma_scaled(dev):
    """pk.mma.scale_add and outer_add: two i8 blocks scaled into an f32 tile and a rank-1 update, f32
    and f16 scales (fma's single rounding: the CPU's llvm.fma and the GPU's v_fma_f32 agree bit for bit)."""
    from tests.lang.test_mma import k_scaled
    gen = rng("lang/mma_scaled")
    for scale in (f32, f16):
        a = gen.integers(-128, 128, (16, 64)).astype(np.int8)
        b = gen.integers(-128, 128, (16, 64)).astype(np.int8)
        rs, cs, cv = (gen.standard_normal(32).astype(scale.np) for _ in range(3))
        rv = gen.standard_normal(16).astype(np.float32)
        c = gen.standard_normal((16, 17)).astype(np.float32)
        k_scaled.instance(f"mma_scaled_{scale.name}_i8", S=scale).launch(
            1, 64, dev.to_device(a), dev.to_device(b), dev.to_device(rs), dev.to_device(cs), dev.to_device(rv),
            dev.to_device(cv), dev.to_device(c), 17, device=dev)


@pk.kernel
def lds_d16(x: ConstPtr[f16], out: Ptr[f16]):
    """16-bit values read back from shared memory eight apart, which LLVM packs in pairs with
    ds_load_u16_d16 / ds_load_u16_d16_hi on RDNA: the reproducer of that MISMATCHES row."""
    s = pk.shared.array(512, f16)
    t = i32(pk.thread_idx.x)
    for e in range(t, 512, 64):
        s[e] = x[e]
    pk.syncthreads()
    for j in pk.static_range(8):
        out[t * 8 + j] = s[(t % 16) + 32 * j]


@case("lang/lds_d16")
def _lds_d16(dev):
    gen = rng("lang/lds_d16")
    lds_d16.launch(1, 64, dev.to_device(values(f16, 512, gen)), dev.zeros(512, f16), device=dev)
