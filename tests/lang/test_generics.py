"""Generic kernels: one definition, many instances (dtypes, device functions, ints as parameters)."""
from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f8e4m3, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, usize

T = pk.TypeVar("T")
NUMERIC = [i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64]


def run(dev, kern, grid, block, *args, shared_mem=0):
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, shared_mem=shared_mem, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


# ---------------------------------------------------------------------------- one kernel, many dtypes
@pk.func
def square(x: T) -> T:
    return x * x


@pk.func
def neg_or_flip(x: T) -> T:
    if T is u8 or T is u16 or T is u32 or T is u64:
        return ~x           # only compiled for unsigned types ('~' is illegal on floats)
    else:
        return -x


@pk.kernel
def apply(n: usize, x: ConstPtr[T], y: Ptr[T], *, T, op):
    for i in pk.grid_stride(n):
        y[i] = op(x[i])


GEN = pk.Module("test_generic_apply")
for _t in NUMERIC:
    GEN.add(apply.instance(f"usquare_{_t.tag}", T=_t, op=square),
            apply.instance(f"uneg_{_t.tag}", T=_t, op=neg_or_flip))


@pytest.mark.parametrize("ty", NUMERIC, ids=lambda t: t.name)
def test_one_kernel_over_many_dtypes(device, ty):
    x = (np.arange(-50, 50) if ty.is_signed or ty.is_float else np.arange(0, 100)).astype(ty.np)
    n = len(x)
    dx = device.to_device(x)
    for name, ref in ((f"usquare_{ty.tag}", lambda v: v * v), (f"uneg_{ty.tag}", lambda v: ~v if not (ty.is_signed or ty.is_float) else -v)):
        fn = device.get_or_load_func(name, GEN)
        dy = device.zeros(n, ty.np)
        fn[2, 64](n, dx, dy)
        if ty.is_float:
            exp = ref(x.astype(np.float32)).astype(ty.np)
        else:
            with np.errstate(all="ignore"):
                exp = ref(x)
        np.testing.assert_array_equal(dy.to_host(), exp)


def test_instance_names_follow_candle():
    assert "usquare_f32" in GEN and "uneg_bf16" in GEN and len(GEN) == 2 * len(NUMERIC)
    assert GEN.get("usquare_u8").params == {"T": u8, "op": square}


# ---------------------------------------------------------------------------- compile-time folding
@pk.kernel
def k_fold(out: Ptr[T], *, T):
    i = pk.global_id()
    if T is f32:
        out[i] = T(1.5) + this_name_does_not_exist  # noqa: F821 - never compiled for other types
    elif T is i32:
        out[i] = T(i) << 2
    else:
        out[i] = T(7)


def test_only_the_taken_branch_compiles(device):
    got = run(device, k_fold.instance("fold_i32", T=i32), 1, 8, np.zeros(8, np.int32))[0]
    assert got.tolist() == [i * 4 for i in range(8)]
    got = run(device, k_fold.instance("fold_f64", T=f64), 1, 8, np.zeros(8, np.float64))[0]
    assert got.tolist() == [7.0] * 8
    with pytest.raises(pk.CompileError, match="name 'this_name_does_not_exist' is not defined"):
        k_fold.instance("fold_f32", T=f32).typed(device.target)


# ---------------------------------------------------------------------------- ints as parameters
@pk.kernel
def k_block_sum(x: ConstPtr[f32], out: Ptr[f32], *, BS):
    buf = pk.shared.array(BS, f32)
    t = pk.thread_idx.x
    buf[t] = x[pk.global_id()]
    pk.syncthreads()
    s = BS // 2
    while s > 0:
        if t < u32(s):
            buf[t] += buf[t + u32(s)]
        pk.syncthreads()
        s = s // 2
    if t == 0:
        out[pk.block_idx.x] = buf[0]


@pytest.mark.parametrize("bs", [32, 128, 256])
def test_block_size_as_compile_time_parameter(device, bs):
    x = np.arange(4 * bs, dtype=np.float32) % 17
    got = run(device, k_block_sum.instance(f"block_sum_{bs}", BS=bs), 4, bs, x, np.zeros(4, np.float32))[1]
    np.testing.assert_array_equal(got, x.reshape(4, bs).sum(1))


# ---------------------------------------------------------------------------- device function params
@pk.func
def add_op(a: T, b: T) -> T:
    return a + b


@pk.func
def max_op(a: T, b: T) -> T:
    return max(a, b)


@pk.kernel
def k_fold_op(n: usize, x: ConstPtr[T], out: Ptr[T], *, T, op, init):
    acc: T = init
    for i in range(n):
        acc = op(acc, x[i])
    out[0] = acc


@pytest.mark.parametrize("ty", [i32, u64, f32, f64], ids=lambda t: t.name)
def test_device_function_as_compile_time_parameter(device, ty):
    x = (np.arange(1, 40) * 3 % 23).astype(ty.np)
    s = run(device, k_fold_op.instance(T=ty, op=add_op, init=0), 1, 1, len(x), x, np.zeros(1, ty.np))[1]
    m = run(device, k_fold_op.instance(T=ty, op=max_op, init=0), 1, 1, len(x), x, np.zeros(1, ty.np))[1]
    assert s[0] == x.sum() and m[0] == x.max()


# ---------------------------------------------------------------------------- cheap instantiation
@pk.kernel
def k_big(n: usize, x: ConstPtr[T], y: Ptr[T], *, T, K):
    for i in pk.grid_stride(n):
        v = x[i]
        for k in range(K):
            v = v * 2 + 1
            if v > 100:
                v = v - 50
        y[i] = v


def test_instantiation_is_cheap():
    start = time.perf_counter()
    insts = [k_big.instance(f"big_{k}", T=f32, K=k) for k in range(200)]
    elapsed = time.perf_counter() - start
    assert len({i.name for i in insts}) == 200
    assert elapsed < 0.2, f"200 instances took {elapsed:.3f}s: instantiation must not re-parse the source"
    # typing is per instance and cached per wave size
    target = pk.device("cpu").target
    start = time.perf_counter()
    typed = [i.typed(target) for i in insts[:50]]
    per_instance = (time.perf_counter() - start) / 50
    assert per_instance < 0.05, f"typing one instance took {per_instance * 1e3:.1f}ms"
    assert insts[0].typed(target) is typed[0]


def test_instance_parameter_checks():
    with pytest.raises(TypeError, match="missing compile-time parameters"):
        k_big.instance("x", T=f32)
    with pytest.raises(TypeError, match="unknown"):
        k_big.instance("x", T=f32, K=1, Z=2)
    with pytest.raises(TypeError, match="generic over"):
        k_big[1, 1](1, None, None)


def test_generic_device_function_typed_per_argument_type(device):
    # the same generic device function is used at f16 and at i8 in one kernel
    @pk.kernel
    def k_two(a: Ptr[f16], b: Ptr[i8]):
        a[0] = square(a[0])
        b[0] = square(b[0])

    a, b = run(device, k_two, 1, 1, np.array([1.5], np.float16), np.array([12], np.int8))
    assert a[0] == np.float16(2.25) and b[0] == np.int8(144 - 256)


def test_storage_types_in_generic_kernel(device):
    x = np.array([1, 2, 3, 100], np.float32).astype(ml_dtypes.float8_e4m3fn)
    y = run(device, apply.instance(T=f8e4m3, op=square), 1, 4, 4, x, np.zeros(4, ml_dtypes.float8_e4m3fn))[1]
    assert y.astype(np.float32).tolist() == [1, 4, 9, 448]   # 10000 saturates
