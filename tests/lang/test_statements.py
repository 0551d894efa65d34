"""Statements of the kernel language, run as real kernels and checked against Python/NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, i32, i64, u32, usize


def run(dev, kern, grid, block, *args, shared_mem=0):
    """Launch ``kern`` on ``dev``; NumPy arrays are copied in and the results returned in order."""
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, shared_mem=shared_mem, device=dev)
    outs = [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]
    return outs


# ---------------------------------------------------------------------------- assignment
@pk.kernel
def k_assign(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    a = x[i]
    b = a
    b = b + 1
    acc: i32 = 0
    acc += a
    acc -= 2
    acc *= 3
    acc //= 2
    acc %= 1000
    acc <<= 2
    acc >>= 1
    acc |= 1
    acc &= 0xFFFF
    acc ^= 5
    out[i] = acc + b
    out[i] += 10
    out[i] *= 2


def test_assign_and_augmented(device):
    x = np.arange(-20, 44, dtype=np.int32)
    got = run(device, k_assign, 1, 64, np.zeros(64, np.int32), x)[0]

    def ref(a):
        def cdiv(p, q):
            return int(np.trunc(p / q))
        acc = a
        acc -= 2
        acc *= 3
        acc = cdiv(acc, 2)
        acc = acc - 1000 * cdiv(acc, 1000)
        acc <<= 2
        acc >>= 1
        acc |= 1
        acc &= 0xFFFF
        acc ^= 5
        return ((acc + a + 1) + 10) * 2
    assert got.tolist() == [ref(int(a)) for a in x]


@pk.kernel
def k_annotated(out: Ptr[f32]):
    i = pk.global_id()
    v: f32 = 3            # an int literal adopts the annotation
    w: f32
    w = 0.5
    n: usize = i
    out[i] = v * w + pk.f32(n)


def test_annotated_locals(device):
    got = run(device, k_annotated, 1, 32, np.zeros(32, np.float32))[0]
    np.testing.assert_array_equal(got, 1.5 + np.arange(32, dtype=np.float32))


def test_one_static_type_per_local():
    @pk.kernel
    def bad(out: Ptr[f32], x: ConstPtr[i32]):
        v = x[0]
        v = out[0]
        out[0] = pk.f32(v)

    with pytest.raises(pk.CompileError, match=r"cannot assign a f32 value to 'v' of type i32"):
        bad.instance().typed(pk.device("cpu").target)


# ---------------------------------------------------------------------------- if / elif / else
@pk.kernel
def k_if(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    v = x[i]
    r = 0
    if v < 0:
        r = -1
    elif v == 0:
        r = 100
    elif v < 10:
        r = v * 2
    else:
        if v % 2 == 0:
            r = 7
        else:
            pass
    out[i] = r


def test_if_elif_else(device):
    x = np.arange(-16, 48, dtype=np.int32)
    got = run(device, k_if, 1, 64, np.zeros(64, np.int32), x)[0]
    exp = [-1 if v < 0 else 100 if v == 0 else v * 2 if v < 10 else (7 if v % 2 == 0 else 0) for v in x.tolist()]
    assert got.tolist() == exp


# ---------------------------------------------------------------------------- loops
@pk.kernel
def k_while(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    n = x[i]
    steps = 0
    while n != 1:            # Collatz
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    out[i] = steps


def test_while(device):
    x = np.arange(1, 65, dtype=np.int32)

    def collatz(n):
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s
    assert run(device, k_while, 1, 64, np.zeros(64, np.int32), x)[0].tolist() == [collatz(int(v)) for v in x]


@pk.kernel
def k_ranges(out: Ptr[i64], starts: ConstPtr[i32], stops: ConstPtr[i32], steps: ConstPtr[i32]):
    i = pk.global_id()
    a = starts[i]
    b = stops[i]
    s = steps[i]
    r1: i64 = 0
    for k in range(b):                       # 1 argument
        r1 += pk.i64(k)
    r2: i64 = 0
    for k in range(a, b):                    # 2 arguments
        r2 = r2 * 3 + pk.i64(k)
    r3: i64 = 0
    for k in range(b, a, -2):                # constant negative step
        r3 = r3 * 5 + pk.i64(k)
    r4: i64 = 0
    for k in range(a, b, s):                 # dynamic step, either sign
        r4 = r4 * 7 + pk.i64(k) + 1
    r5: i64 = 0
    for k in range(10, 0, -3):
        r5 = r5 * 11 + pk.i64(k)
    out[i * 5] = r1
    out[i * 5 + 1] = r2
    out[i * 5 + 2] = r3
    out[i * 5 + 3] = r4
    out[i * 5 + 4] = r5


def test_for_range(device):
    rng = np.random.default_rng(0)
    n = 64
    starts = rng.integers(-10, 10, n).astype(np.int32)
    stops = rng.integers(-10, 10, n).astype(np.int32)
    steps = rng.choice([-3, -2, -1, 1, 2, 3], n).astype(np.int32)
    got = run(device, k_ranges, 1, n, np.zeros(5 * n, np.int64), starts, stops, steps)[0].reshape(n, 5)
    for row, a, b, s in zip(got.tolist(), starts.tolist(), stops.tolist(), steps.tolist()):
        r2 = r3 = r4 = r5 = 0
        for k in range(a, b):
            r2 = r2 * 3 + k
        for k in range(b, a, -2):
            r3 = r3 * 5 + k
        for k in range(a, b, s):
            r4 = r4 * 7 + k + 1
        for k in range(10, 0, -3):
            r5 = r5 * 11 + k
        assert row == [sum(range(b)), r2, r3, r4, r5], (a, b, s)


@pk.kernel
def k_unsigned_range(out: Ptr[u32], n: u32, step: u32):
    i = pk.global_id()
    acc: u32 = 0
    for k in range(u32(3), n, step):
        acc += k
    out[i] = acc


def test_unsigned_range_dynamic_step(device):
    got = run(device, k_unsigned_range, 1, 4, np.zeros(4, np.uint32), 50, 7)[0]
    assert got.tolist() == [sum(range(3, 50, 7))] * 4


@pk.kernel
def k_break_continue(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    limit = x[i]
    acc = 0
    for k in range(100):
        if k % 3 == 0:
            continue
        if k > limit:
            break
        acc += k
    n = 0
    while True:
        n += 1
        if n % 2 == 1:
            continue
        if n >= limit:
            break
    # nested loops: break leaves only the inner one
    pairs = 0
    for a in range(5):
        for b in range(5):
            if b > a:
                break
            pairs += 1
    out[i * 3] = acc
    out[i * 3 + 1] = n
    out[i * 3 + 2] = pairs


def test_break_continue(device):
    x = np.arange(0, 64, dtype=np.int32)
    got = run(device, k_break_continue, 1, 64, np.zeros(192, np.int32), x)[0].reshape(64, 3)
    for (acc, n, pairs), lim in zip(got.tolist(), x.tolist()):
        ea = 0
        for k in range(100):
            if k % 3 == 0:
                continue
            if k > lim:
                break
            ea += k
        en = 0
        while True:
            en += 1
            if en % 2 == 1:
                continue
            if en >= lim:
                break
        assert (acc, n, pairs) == (ea, en, 15)


# ---------------------------------------------------------------------------- return
@pk.kernel
def k_early_return(n: usize, out: Ptr[i32]):
    i = pk.global_id()
    if i >= n:
        return
    out[i] = 1
    if i % 3 == 0:
        return
    out[i] = 2


@pk.func
def classify(v: i32) -> i32:
    if v < 0:
        return -1
    for k in range(10):
        if k * k >= v:
            return k       # return from inside a loop
    return 99


@pk.func
def nothing(p: Ptr[i32], i: usize) -> None:
    if p is None:
        return
    p[i] = 5


@pk.kernel
def k_func_return(out: Ptr[i32], x: ConstPtr[i32], maybe: Ptr[i32]):
    i = pk.global_id()
    out[i] = classify(x[i])
    nothing(maybe, i)


def test_early_return_kernel(device):
    got = run(device, k_early_return, 1, 64, 40, np.zeros(64, np.int32))[0]
    exp = [0 if i >= 40 else 1 if i % 3 == 0 else 2 for i in range(64)]
    assert got.tolist() == exp


def test_early_return_device_function(device):
    x = np.arange(-5, 123, dtype=np.int32)

    def ref(v):
        if v < 0:
            return -1
        for k in range(10):
            if k * k >= v:
                return k
        return 99
    out, _, maybe = run(device, k_func_return, 2, 64, np.zeros(128, np.int32), x, np.zeros(128, np.int32))
    assert out.tolist() == [ref(v) for v in x.tolist()]
    assert (maybe == 5).all()
    out = run(device, k_func_return, 2, 64, np.zeros(128, np.int32), x, None)[0]   # null: nothing written
    assert out.tolist() == [ref(v) for v in x.tolist()]


# ---------------------------------------------------------------------------- device functions
@pk.func
def sq(x: f32) -> f32:
    return x * x


@pk.func
def hyp2(a: f32, b: f32) -> f32:
    return sq(a) + sq(b)


@pk.func
def hyp(a: f32, b: f32) -> f32:
    return pk.sqrt(hyp2(a, b))


@pk.kernel
def k_nested_calls(out: Ptr[f32], a: ConstPtr[f32], b: ConstPtr[f32]):
    i = pk.global_id()
    out[i] = hyp(a[i], b[i])


def test_device_functions_call_device_functions(device):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 64)).astype(np.float32)
    got = run(device, k_nested_calls, 1, 64, np.zeros(64, np.float32), a, b)[0]
    np.testing.assert_array_equal(got, np.sqrt(a * a + b * b))


# ---------------------------------------------------------------------------- grid stride
@pk.kernel
def k_grid_stride(n: usize, out: Ptr[u32]):
    for i in pk.grid_stride(n):
        out[i] += u32(1)


def test_grid_stride_covers_each_index_once(device):
    got = run(device, k_grid_stride, 3, 32, 1000, np.zeros(1000, np.uint32))[0]
    assert (got == 1).all()
