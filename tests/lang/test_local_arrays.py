"""``pk.local.array`` (a thread's own array) and ``pk.static_range`` (a loop unrolled at compile time).

Together they keep a few values per thread in registers: with every index a compile-time constant,
LLVM's SROA turns the array into SSA values, so the generated code has no stack (no PTX ``.local``
depot, no AMDGPU scratch). A run-time index keeps the array in the thread's stack, and still works.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, i32, u32, usize
from pykern.compiler import compile_kernels
from pykern.targets.codeobject import CodeObject
from pykern.targets.registry import make_target

CACHE = 8


@pk.kernel
def normalise_strided(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
    """Each thread keeps its CACHE elements (t, t + nt, ...) in registers, then writes each over their sum."""
    t = usize(pk.global_id())
    nt = usize(pk.block_dim.x) * usize(pk.grid_dim.x)
    v = pk.local.array(CACHE, f32)
    s: f32 = 0.0
    for k in pk.static_range(CACHE):
        j = t + k * nt
        v[k] = x[j] if j < n else 0.0
        s += v[k]
    for k in pk.static_range(CACHE):
        if t + k * nt < n:
            y[t + k * nt] = v[k] / s


def test_registers_hold_a_strided_row(device):
    n = 1000  # not a multiple of the 128 threads: the last elements are masked
    x = np.random.default_rng(1).random(n).astype(np.float32)
    y = device.zeros(n, pk.f32)
    normalise_strided.launch(1, 128, n, device.to_device(x), y, device=device)
    idx = np.arange(128)[:, None] + 128 * np.arange(CACHE)[None, :]
    ref = np.zeros(n, np.float32)
    for row in idx:
        row = row[row < n]
        ref[row] = x[row] / np.cumsum(x[row], dtype=np.float32)[-1]  # the kernel's order of additions
    np.testing.assert_array_equal(y.to_host(), ref)


@pytest.mark.parametrize("target, arch", [("cuda", "sm_90"), pytest.param("amdgpu", "gfx942", marks=pytest.mark.needs_lld),
                                          pytest.param("amdgpu", "gfx1100", marks=pytest.mark.needs_lld)])
def test_constant_indices_leave_no_stack(target, arch):
    code, _ = compile_kernels([normalise_strided._only_instance()], make_target(target, arch), "local")
    text = code.decode(errors="replace")
    if target == "cuda":
        assert not re.search(r"\.local\b|__local_depot", text)
    else:  # the code object's metadata: no private segment (scratch), no spills
        (kern,) = CodeObject(code).kernels.values()
        assert kern.scratch == 0 and kern.spills == 0, kern


@pk.kernel
def reverse_runtime_index(x: ConstPtr[i32], y: Ptr[i32]):
    """A run-time index: the array lives in the thread's stack."""
    buf = pk.local.array(16, i32)
    base = usize(pk.thread_idx.x) * 16
    for k in range(16):
        buf[k] = x[base + usize(k)]
    for k in range(16):
        y[base + usize(k)] = buf[15 - k]


def test_runtime_indices(device):
    x = np.arange(64 * 16, dtype=np.int32)
    y = device.zeros(x.size, pk.i32)
    reverse_runtime_index.launch(1, 64, device.to_device(x), y, device=device)
    np.testing.assert_array_equal(y.to_host(), x.reshape(64, 16)[:, ::-1].ravel())


@pk.func
def fill_squares(p: Ptr[u32], count: u32):
    for k in range(count):
        p[k] = k * k


@pk.func
def inner(seed: u32) -> u32:
    buf = pk.local.array(4, u32)  # the same name as the caller's: a separate array
    for k in pk.static_range(4):
        buf[k] = seed + u32(k)
    return buf[0] + buf[3]


@pk.func
def outer(seed: u32) -> u32:
    buf = pk.local.array(4, u32)
    fill_squares(buf, 4)  # a local array passed as a pointer into the thread's memory
    total = inner(seed) + inner(seed + 1)
    for k in pk.static_range(4):
        total += buf[k]
    return total


@pk.kernel
def nested_arrays(out: Ptr[u32]):
    grid = pk.local.array((2, 3), u32)  # two dimensions, row-major
    for r in pk.static_range(2):
        for c in pk.static_range(3):
            grid[r, c] = u32(r * 10 + c)
    t = pk.thread_idx.x
    out[t] = outer(t) + grid[1, 2] + grid[0, 1]


def test_device_functions_and_two_dimensions(device):
    out = device.zeros(32, pk.u32)
    nested_arrays.launch(1, 32, out, device=device)
    t = np.arange(32, dtype=np.uint32)
    inner_ = lambda s: s + (s + 3)  # noqa: E731
    np.testing.assert_array_equal(out.to_host(), inner_(t) + inner_(t + 1) + (0 + 1 + 4 + 9) + 12 + 1)


@pk.kernel
def grid_stride_with_table(n: usize, x: ConstPtr[i32], y: Ptr[i32]):
    """A grid-stride body that uses a local array declared outside it: tiles run their copies of
    the body in element order, so the array sees the updates in that order."""
    table = pk.local.array(4, i32)
    for k in pk.static_range(4):
        table[k] = i32(k * 100)
    for i in pk.grid_stride(n):
        table[i % 4] = table[i % 4] + x[i]
        y[i] = table[i % 4]


@pytest.mark.parametrize("tile_bytes", [None, 16])
def test_grid_stride_body_keeps_its_order(tile_bytes):
    """On the CPU with and without the GPU's grid-stride tiles (one thread, so the order is the
    element order)."""
    device = pk.device("cpu", tile_bytes=tile_bytes) if tile_bytes else pk.device("cpu")
    n = 37
    x = np.arange(n, dtype=np.int32)
    y = device.zeros(n, pk.i32)
    grid_stride_with_table.launch(1, 1, n, device.to_device(x), y, device=device)
    table, ref = [0, 100, 200, 300], []
    for i in range(n):
        table[i % 4] += int(x[i])
        ref.append(table[i % 4])
    np.testing.assert_array_equal(y.to_host(), ref)


@pk.kernel
def static_steps(out: Ptr[i32]):
    acc = 0
    for k in pk.static_range(10, 0, -3):  # 10, 7, 4, 1: a compile-time int in each copy
        if k > 5:
            acc += k
        else:
            acc -= k
    out[0] = acc


def test_static_range_steps(device):
    out = device.zeros(1, pk.i32)
    static_steps.launch(1, 1, out, device=device)
    assert out.to_host()[0] == 10 + 7 - 4 - 1



@pk.kernel
def declared_in_unrolled_body(out: Ptr[i32]):
    for k in pk.static_range(3):
        pair = pk.local.array(2, i32)  # one declaration per copy: the same array, fresh values each time
        pair[0] = k
        pair[1] = k * 10
        out[k] = pair[0] + pair[1]


def test_declaration_inside_static_range(device):
    out = device.zeros(3, pk.i32)
    declared_in_unrolled_body.launch(1, 1, out, device=device)
    assert out.to_host().tolist() == [0, 11, 22]
