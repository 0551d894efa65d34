"""What the front end decides while compiling, and the lowering's SSA locals (issue 29: a cold build's
time went into IR that compile-time values should never have produced).

Each case runs on the CPU target against NumPy, and checks the typed IR or the LLVM IR for what must
(not) be there: a folded branch leaves no ``if``, dead code after a compile-time ``return`` is not
typed, top-level locals of an inlined function need no alloca.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f16, f32, i32, u8, u32
from pykern.compiler import lower_module
from pykern.errors import CompileError
from pykern.ir import nodes as N
from pykern.ir import printer
from pykern.lower.llvm import ssa_locals

SPEC = SimpleNamespace(layernorm=True, cache=16, shape=(4, 8))


def typed_text(kern, device, **params) -> str:
    inst = kern.instance(**params) if params else kern.instance()
    return printer.function(inst.typed(device.target))


def run(dev, kern, grid, block, *args):
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


@pytest.fixture
def cpu():
    return pk.device("cpu")


# ---------------------------------------------------------------------------- compile-time locals
@pk.kernel
def k_ct_locals(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    per = SPEC.cache // 4        # an int from a compile-time value: a typed constant, not a variable
    ln = SPEC.layernorm          # a bool: compile-time
    shape = SPEC.shape           # a tuple: was an error as a variable
    v = x[i]
    if per > 2:
        v = v + per
    else:
        v = v - 1000
    if ln:
        v = v * shape[1]
    out[i] = v


def test_compile_time_locals_fold(cpu):
    x = np.arange(64, dtype=np.int32)
    got = run(cpu, k_ct_locals, 1, 64, np.zeros(64, np.int32), x)[0]
    np.testing.assert_array_equal(got, (x + 4) * 8)
    text = typed_text(k_ct_locals, cpu)
    assert "1000" not in text and "if " not in text, text  # both ifs chosen while compiling


@pk.kernel
def k_ct_number_types(out: Ptr[i32], outf: Ptr[f32], x: ConstPtr[u8], h: ConstPtr[f16]):
    i = pk.global_id()
    k = 300      # a variable holding 300 was an i32: u8 + k is i32 arithmetic (no "300 does not fit u8")
    c = 0.1      # an f32: f16 * c is f32 arithmetic, not f16
    out[i] = x[i] + k
    outf[i] = h[i] * c


def test_compile_time_numbers_keep_the_variable_type(cpu):
    x = np.arange(250, 250 + 64, dtype=np.uint32).astype(np.uint8)
    h = (np.arange(64, dtype=np.float32) / 7 + 1000).astype(np.float16)
    got, gotf = run(cpu, k_ct_number_types, 1, 64, np.zeros(64, np.int32), np.zeros(64, np.float32), x, h)[:2]
    np.testing.assert_array_equal(got, x.astype(np.int32) + 300)
    np.testing.assert_array_equal(gotf, h.astype(np.float32) * np.float32(0.1))


@pk.kernel
def k_assigned_twice(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    n = 3
    if x[i] > 10:
        n = 5   # a second assignment: n stays a run-time variable
    out[i] = n


@pk.kernel
def k_assigned_in_branch(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    if x[i] > 10:
        m = 7   # assigned under a run-time if: the flow check still sees a variable
    out[i] = m


def test_run_time_assignments_stay_variables(cpu):
    x = np.arange(64, dtype=np.int32)
    got = run(cpu, k_assigned_twice, 1, 64, np.zeros(64, np.int32), x)[0]
    np.testing.assert_array_equal(got, np.where(x > 10, 5, 3))
    with pytest.raises(CompileError, match="may be read before it is assigned"):
        k_assigned_in_branch.instance().typed(cpu.target)


# ---------------------------------------------------------------------------- dead code
@pk.func
def pick(v: i32, *, first) -> i32:
    if first:
        return v + 1
    pk.syncthreads()   # after the compile-time if's return: never typed, so no barrier either
    return v - 1


@pk.kernel
def k_dead_after_return(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    out[i] = pick(x[i], first=True)


def test_code_after_a_compile_time_return_is_not_typed(cpu):
    fn = k_dead_after_return.instance().typed(cpu.target)
    assert not fn.uses_sync  # the CPU target runs it without coroutines
    x = np.arange(64, dtype=np.int32)
    np.testing.assert_array_equal(run(cpu, k_dead_after_return, 1, 64, np.zeros(64, np.int32), x)[0], x + 1)


# ---------------------------------------------------------------------------- and/or with constants
FLAG = False


@pk.kernel
def k_and_false(out: Ptr[i32], x: ConstPtr[i32]):
    i = pk.global_id()
    v = 1
    if x[i] > 3 and FLAG:
        v = 2
    if x[i] < 0 or not FLAG:
        v = v + 10
    out[i] = v


@pk.kernel
def k_and_false_effect(out: Ptr[i32], counter: Ptr[u32]):
    i = pk.global_id()
    v = 1
    if pk.atomic.add(counter, 0, u32(1)) >= 0 and FLAG:  # the atomic still runs
        v = 2
    out[i] = v


def test_and_or_with_compile_time_operands(cpu):
    x = np.arange(-8, 56, dtype=np.int32)
    np.testing.assert_array_equal(run(cpu, k_and_false, 1, 64, np.zeros(64, np.int32), x)[0], 11)
    assert "if " not in typed_text(k_and_false, cpu)
    out, counter = run(cpu, k_and_false_effect, 1, 64, np.zeros(64, np.int32), np.zeros(1, np.uint32))
    np.testing.assert_array_equal(out, 1)
    assert counter[0] == 64


# ---------------------------------------------------------------------------- SSA locals
@pk.func
def scaled(v: f32, s: f32) -> f32:
    t = v * s          # top level: an SSA value
    t = t + 1.0        # reassigned at the top level: still one
    s = s * 2.0        # a parameter reassigned at the top level
    acc = t
    for k in range(2):
        acc = acc + s  # assigned in a loop: an alloca
    return acc


@pk.kernel
def k_ssa(out: Ptr[f32], x: ConstPtr[f32], s: f32):
    i = pk.global_id()
    y = x[i]
    for k in pk.static_range(3):
        y = scaled(y, s)
    out[i] = y


def test_top_level_locals_are_ssa_values(cpu):
    fn = k_ssa.instance().typed(cpu.target)
    (callee,) = {id(n.func): n.func for n in N.walk(fn.body) if isinstance(n, N.Call)}.values()
    assert ssa_locals(callee) == {"v", "t", "s"}
    module, _ = lower_module([k_ssa.instance()], cpu.target, "ssa")
    text = str(module)
    assert '%"t"' not in text and '%"acc"' in text  # no alloca for t; acc lives in one
    x = np.linspace(-2, 2, 64, dtype=np.float32)

    def ref(y, s):
        for _ in range(3):
            t = y * s + np.float32(1)
            y = t + np.float32(2) * (s * np.float32(2))
        return y
    got = run(cpu, k_ssa, 1, 64, np.zeros(64, np.float32), x, np.float32(0.5))[0]
    np.testing.assert_allclose(got, ref(x, np.float32(0.5)), rtol=1e-6)
