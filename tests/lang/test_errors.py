"""Bad kernels: every CompileError names the message, the user's file and line, and shows a caret.

Each case marks the line the error must point at with a ``# <-`` comment; the test finds that line
in this file and checks the error's location against it.
"""
from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap

import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, f64, i32, u32, usize

MARK = "# <-"


def marked_line(fn) -> int:
    """The absolute line number of the marked line in ``fn``'s source."""
    fn = getattr(fn, "__wrapped__", fn)
    lines, first = inspect.getsourcelines(fn)
    hits = [first + k for k, l in enumerate(lines) if MARK in l]
    assert len(hits) == 1, f"{fn.__name__} needs exactly one marked line"
    return hits[0]


def check(exc: pk.CompileError, where, message: str) -> None:
    assert re.search(message, exc.message), f"message {exc.message!r} does not match {message!r}"
    line = marked_line(where)
    assert exc.loc is not None and exc.loc.file == __file__, exc.loc
    assert exc.loc.line == line, f"error at line {exc.loc.line}, expected {line}: {exc}"
    text = str(exc).splitlines()
    assert text[0].startswith(f"{__file__}:{line}:{exc.loc.col + 1}: "), text[0]
    src_line = open(__file__).read().splitlines()[line - 1]
    assert text[1] == "    " + src_line
    caret = text[2]
    assert caret.strip() and set(caret.strip()) == {"^"}, caret
    assert caret.index("^") - 4 == exc.loc.col
    assert caret.index("^") - 4 < len(src_line) and src_line[exc.loc.col] != " "


def compile_error(kern) -> pk.CompileError:
    with pytest.raises(pk.CompileError) as info:
        kern.instance().typed(pk.device("cpu").target)
    return info.value


# ============================================================================ unsupported syntax
@pk.kernel
def e_class(p: Ptr[f32]):
    class A:  # <-
        pass


@pk.kernel
def e_listcomp(p: Ptr[f32]):
    x = [i for i in range(3)]  # <-


@pk.kernel
def e_setcomp(p: Ptr[f32]):
    x = {i for i in range(3)}  # <-


@pk.kernel
def e_dictcomp(p: Ptr[f32]):
    x = {i: i for i in range(3)}  # <-


@pk.kernel
def e_try(p: Ptr[f32]):
    try:  # <-
        p[0] = 1.0
    except Exception:
        pass


@pk.kernel
def e_with(p: Ptr[f32]):
    with p:  # <-
        pass


@pk.kernel
def e_lambda(p: Ptr[f32]):
    f = lambda v: v  # <-  # noqa: E731


@pk.kernel
def e_genexp(p: Ptr[f32]):
    g = (v for v in range(3))  # <-


@pk.kernel
def e_yield(p: Ptr[f32]):
    yield 1  # <-


@pk.kernel
def e_global(p: Ptr[f32]):
    global MARK  # <-


@pk.kernel
def e_import(p: Ptr[f32]):
    import math  # <-  # noqa: F401


@pk.kernel
def e_del(p: Ptr[f32]):
    x = 1
    del x  # <-


@pk.kernel
def e_assert(p: Ptr[f32]):
    assert p is not None  # <-


@pk.kernel
def e_raise(p: Ptr[f32]):
    raise ValueError  # <-


@pk.kernel
def e_fstring(p: Ptr[f32]):
    s = f"{1}"  # <-


@pk.kernel
def e_dict(p: Ptr[f32]):
    d = {1: 2}  # <-


@pk.kernel
def e_list(p: Ptr[f32]):
    d = [1, 2]  # <-


@pk.kernel
def e_set(p: Ptr[f32]):
    d = {1, 2}  # <-


@pk.func
def one(x: f32) -> f32:
    return x


@pk.kernel
def e_starred(p: Ptr[f32]):
    p[0] = one(*p)  # <-


@pk.kernel
def e_walrus(p: Ptr[f32]):
    if (n := 3) > 2:  # <-
        p[0] = 1.0


@pk.kernel
def e_match(p: Ptr[f32]):
    match 3:  # <-
        case 3:
            pass


@pk.kernel
def e_nested_def(p: Ptr[f32]):
    def inner():  # <-
        pass


@pk.kernel
def e_slice(p: Ptr[f32]):
    q = p[1:3]  # <-


@pk.kernel
def e_string(p: Ptr[f32]):
    s = "text" + "x"  # <-


@pk.kernel
def e_in(p: Ptr[f32], n: i32):
    if n in (1, 2):  # <-
        p[0] = 1.0


# ============================================================================ names, calls, recursion
@pk.kernel
def e_unknown_name(p: Ptr[f32]):
    p[0] = undefined_thing  # <-  # noqa: F821


@pk.func
def rec(n: i32) -> i32:
    if n <= 0:
        return 0
    return rec(n - 1) + 1  # <-


@pk.kernel
def e_recursion(p: Ptr[i32]):
    p[0] = rec(3)


@pk.func
def ping(n: i32) -> i32:
    return pong(n - 1)


@pk.func
def pong(n: i32) -> i32:
    return ping(n - 1)  # <-


@pk.kernel
def e_mutual_recursion(p: Ptr[i32]):
    p[0] = ping(3)


@pk.kernel
def e_arity_builtin(p: Ptr[f32]):
    pk.syncthreads(1)  # <-


@pk.kernel
def e_arity_atomic(p: Ptr[f32]):
    pk.atomic.add(p, 0)  # <-


@pk.kernel
def e_arity_func(p: Ptr[f32]):
    p[0] = one(p[0], p[1])  # <-


@pk.kernel
def e_arity_cast(p: Ptr[f32]):
    p[0] = pk.f32(1, 2)  # <-


@pk.kernel
def e_call_kernel(p: Ptr[f32]):
    e_arity_cast(p)  # <-


@pk.kernel
def e_print(p: Ptr[f32]):
    print(p[0])  # <-


@pk.kernel
def e_len(p: Ptr[f32]):
    n = len(p)  # <-


@pk.kernel
def e_int(p: Ptr[f32]):
    n = int(p[0])  # <-


@pk.kernel
def e_keyword(p: Ptr[f32]):
    p[0] = one(x=p[0])  # <-


@pk.kernel
def e_range_outside_for(p: Ptr[f32]):
    r = range(3)  # <-


@pk.kernel
def e_for_over_pointer(p: Ptr[f32]):
    for v in p:  # <-
        pass


@pk.kernel
def e_parallel_range_keyword(p: Ptr[f32], n: u32):
    for j in pk.parallel_range(u32(0), n, pk.thread_idx.x, pk.block_dim.x, reverse=True):  # <-
        p[j] = 0.0


@pk.kernel
def e_parallel_range_descending(p: Ptr[f32], n: u32):
    for j in pk.parallel_range(u32(0), n, pk.thread_idx.x, pk.block_dim.x, descending=1):  # <-
        p[j] = 0.0


@pk.kernel
def e_load_policy(p: Ptr[f32]):
    p[0] = pk.load(p, 1, eviction="evict_soon")  # <-


@pk.kernel
def e_load_shared(p: Ptr[f32]):
    s = pk.shared.array(32, f32)
    p[0] = pk.load(s, 1, eviction="evict_last")  # <-


@pk.kernel
def e_store_const(p: ConstPtr[f32]):
    pk.store(p, 0, f32(1), eviction="evict_first")  # <-


@pk.kernel
def e_call_value(p: Ptr[f32]):
    p(0)  # <-


# ============================================================================ types
@pk.kernel
def e_assign_other_type(p: Ptr[f32], n: i32):
    v = n
    v = p[0]  # <-


@pk.kernel
def e_int_plus_float(p: Ptr[f32], n: i32):
    p[0] = p[0] + n  # <-


@pk.kernel
def e_signed_unsigned(a: i32, b: u32, p: Ptr[i32]):
    p[0] = a + b  # <-


@pk.kernel
def e_store_wrong_type(p: Ptr[f32], n: i32):
    p[0] = n  # <-


@pk.func
def wrong_return(x: f32) -> i32:
    return x  # <-


@pk.kernel
def e_return_wrong_type(p: Ptr[i32], x: f32):
    p[0] = wrong_return(x)


@pk.kernel
def e_int_div(p: Ptr[i32], n: i32):
    p[0] = n / 2  # <-


@pk.kernel
def e_pointer_condition(p: Ptr[f32]):
    if p:  # <-
        p[0] = 1.0


@pk.kernel
def e_float_condition(p: Ptr[f32]):
    while p[0]:  # <-
        p[0] -= 1.0


@pk.kernel
def e_const_out_of_range(p: Ptr[f32]):
    v: pk.u8 = 300  # <-


@pk.kernel
def e_bool_arith(p: Ptr[i32], a: pk.bool_):
    p[0] = pk.i32(a + a)  # <-


@pk.kernel
def e_invert_float(p: Ptr[f32]):
    p[0] = ~p[0]  # <-


@pk.kernel
def e_shift_float(p: Ptr[f32]):
    p[0] = p[0] << 1  # <-


@pk.kernel
def e_pow_dynamic(p: Ptr[f32], n: i32):
    p[0] = p[0] ** n  # <-


@pk.kernel
def e_bitcast_size(p: Ptr[f32]):
    v = pk.bitcast(p[0], pk.u64)  # <-


@pk.kernel
def e_index_float(p: Ptr[f32]):
    p[0] = p[p[1]]  # <-


@pk.kernel
def e_index_scalar(p: Ptr[f32], n: i32):
    p[0] = n[0]  # <-


@pk.kernel
def e_attribute_on_value(p: Ptr[f32], n: i32):
    p[0] = n.real  # <-


@pk.kernel
def e_dim3_attr(p: Ptr[u32]):
    p[0] = pk.thread_idx.w  # <-


@pk.kernel
def e_name_shadows_dtype(p: Ptr[f32]):
    f32 = 1  # <-


@pk.kernel
def e_loop_var_type(p: Ptr[f32], n: usize):
    k = 1.5
    for k in range(n):  # <-
        pass


# ============================================================================ memory
@pk.kernel
def e_write_const(p: ConstPtr[f32]):
    p[0] = 1.0  # <-


@pk.kernel
def e_augassign_const(p: ConstPtr[f32]):
    p[0] += 1.0  # <-


@pk.kernel
def e_atomic_const(p: ConstPtr[i32]):
    pk.atomic.add(p, 0, 1)  # <-


@pk.kernel
def e_atomic_dtype(p: Ptr[pk.f8e4m3]):
    pk.atomic.add(p, 0, 1.0)  # <-


@pk.kernel
def e_atomic_bool(p: Ptr[pk.bool_]):
    pk.atomic.exchange(p, 0, True)  # <-


@pk.kernel
def e_shared_size(p: Ptr[f32], n: i32):
    buf = pk.shared.array(n, f32)  # <-


@pk.kernel
def e_shared_shape(p: Ptr[f32]):
    buf = pk.shared.array(0, f32)  # <-


@pk.kernel
def e_shared_reassigned(p: Ptr[f32]):
    buf = pk.shared.array(4, f32)
    buf = p  # <-


@pk.kernel
def e_two_dynamic(p: Ptr[f32]):
    a = pk.shared.dynamic(f32)
    b = pk.shared.dynamic(f32)  # <-


@pk.kernel
def e_shared_dims(p: Ptr[f32]):
    buf = pk.shared.array((4, 4), f32)
    p[0] = buf[1]  # <-


@pk.kernel
def e_wave_pointer(p: Ptr[f32]):
    v = pk.wave.sum(p)  # <-


# ============================================================================ control flow
@pk.kernel
def e_zero_step(p: Ptr[f32]):
    for i in range(0, 10, 0):  # <-
        pass


# ('break'/'continue' outside a loop never reach pykern: Python's own compiler rejects them)
@pk.kernel
def e_for_else(p: Ptr[f32]):
    for i in range(3):
        pass
    else:
        p[0] = 1.0  # <-


@pk.kernel
def e_loop_target(p: Ptr[i32]):
    for p[0] in range(3):  # <-
        pass


@pk.kernel
def e_kernel_returns_value(p: Ptr[f32]):
    return 1  # <-


@pk.kernel
def e_tuple_unpacking(p: Ptr[f32]):
    a, *b = 1, 2  # <-


@pk.kernel
def e_chained_assignment(p: Ptr[f32]):
    a = b = 1  # <-


@pk.kernel
def e_while_else(p: Ptr[f32]):
    while False:
        pass
    else:
        p[0] = 1.0  # <-


@pk.func
def no_annotation_returns(x: f32):
    return x  # <-


@pk.kernel
def e_return_without_annotation(p: Ptr[f32]):
    p[0] = no_annotation_returns(p[0])


@pk.func
def must_return(x: f32) -> f32:
    return  # <-


@pk.kernel
def e_fast_rcp_f64(p: Ptr[f64]):
    p[0] = pk.fast_rcp(p[1])  # <-


@pk.kernel
def e_static_range_runtime_bound(p: Ptr[f32], n: i32):
    for k in pk.static_range(n):  # <-
        p[k] = 0.0


@pk.kernel
def e_static_range_break(p: Ptr[f32]):
    for k in pk.static_range(4):
        if p[k] > 0.0:
            break  # <-


@pk.kernel
def e_static_range_assign(p: Ptr[f32]):
    for k in pk.static_range(4):
        k = 2  # <-


@pk.kernel
def e_local_atomic(p: Ptr[u32]):
    buf = pk.local.array(4, u32)
    pk.atomic.add(buf, 0, u32(1))  # <-


@pk.kernel
def e_local_out_of_bounds(p: Ptr[f32]):
    buf = pk.local.array(4, f32)
    p[0] = buf[4]  # <-


@pk.kernel
def e_local_too_big(p: Ptr[f32]):
    buf = pk.local.array(2048, f32)  # <-


@pk.kernel
def e_local_as_value(p: Ptr[f32]):
    p[0] = pk.local.array(4, f32)[0]  # <-


# ---- issue 25: silent wrong answers and hangs that are now compile errors
@pk.kernel
def e_assigned_in_one_branch(p: Ptr[f32], n: i32):
    if n > 0:
        x = 2.0
    p[0] = x  # <-


@pk.kernel
def e_assigned_only_in_a_loop(p: Ptr[f32], n: i32):
    for i in range(n):
        acc = p[i]
    p[0] = acc  # <-


@pk.kernel
def e_assigned_in_a_while_body(p: Ptr[f32], n: i32):
    while n > 0:
        n -= 1
        last = p[n]
    p[0] = last  # <-


@pk.func
def maybe_returns(x: f32) -> f32:
    if x > 0.0:  # <-
        return x


@pk.kernel
def e_missing_return(p: Ptr[f32]):
    p[0] = maybe_returns(p[1])


@pk.kernel
def e_nested_static_range(p: Ptr[f32]):
    for a in pk.static_range(1000):
        for b in pk.static_range(1000):  # <-
            p[0] += 1.0


@pk.kernel
def e_unknown_builtin_keyword(p: Ptr[u32]):
    pk.atomic.add(p, 0, u32(1), order="relaxed")  # <-


@pk.kernel
def e_grid_stride_keyword(p: Ptr[f32], n: usize):
    for i in pk.grid_stride(n, order=1):  # <-
        p[i] = 1.0


@pk.kernel
def e_shared_array_keyword(p: Ptr[f32]):
    a = pk.shared.array(4, f32, align=16)  # <-
    p[0] = a[0]


@pk.func
def scaled(x: f32, *, factor) -> f32:
    return x * factor


@pk.kernel
def e_func_missing_compile_time(p: Ptr[f32]):
    p[0] = scaled(p[1])  # <-


@pk.kernel
def e_func_unknown_compile_time(p: Ptr[f32]):
    p[0] = scaled(p[1], factor=2.0, bias=1.0)  # <-


@pk.kernel
def e_func_runtime_compile_time(p: Ptr[f32]):
    p[0] = scaled(p[1], factor=p[2])  # <-


@pk.kernel
def e_write_through_const_bitcast(p: ConstPtr[f32]):
    pk.bitcast(p, Ptr[u32])[0] = 1  # <-


@pk.kernel
def e_is_aligned_not_power(p: Ptr[f32]):
    p[0] = 1.0 if pk.is_aligned(p, 6) else 0.0  # <-


@pk.kernel
def e_assume_aligned_not_power(p: Ptr[f32]):
    pk.assume_aligned(p, 12)[0] = 1.0  # <-


@pk.kernel
def e_assume_aligned_not_pointer(x: f32, p: Ptr[f32]):
    p[0] = pk.assume_aligned(x, 16)  # <-


@pk.kernel
def e_type_alias_over_variable(p: Ptr[f32]):
    x = p[0]
    x = f32  # <-


@pk.kernel
def e_bare_return_in_func(p: Ptr[f32]):
    p[0] = must_return(p[0])


CASES = [
    (e_class, "class definitions are not supported"),
    (e_listcomp, "list comprehensions are not supported"),
    (e_setcomp, "set comprehensions are not supported"),
    (e_dictcomp, "dict comprehensions are not supported"),
    (e_try, "try statements are not supported"),
    (e_with, "with statements are not supported"),
    (e_lambda, "lambdas are not supported"),
    (e_genexp, "generator expressions are not supported"),
    (e_yield, r"generators \(yield\)"),
    (e_global, "global statements are not supported"),
    (e_import, "imports are not supported"),
    (e_del, "del is not supported"),
    (e_assert, "assert is not supported"),
    (e_raise, "raise is not supported"),
    (e_fstring, "f-strings are not supported"),
    (e_dict, "dicts are not supported"),
    (e_list, "lists are not supported"),
    (e_set, "sets are not supported"),
    (e_starred, "starred expressions are not supported"),
    (e_walrus, "the walrus operator is not supported"),
    (e_match, "match statements are not supported"),
    (e_nested_def, "nested functions are not supported"),
    (e_slice, "slices are not supported"),
    (e_string, "str constants are not supported"),
    (e_in, "'in' is not supported"),
    (e_unknown_name, "name 'undefined_thing' is not defined"),
    ((e_recursion, rec), "recursive call of rec: device functions cannot recurse"),
    ((e_mutual_recursion, pong), "recursive call of ping"),
    (e_arity_builtin, r"syncthreads\(\) takes 0 arguments, got 1"),
    (e_arity_atomic, r"atomic.add\(\) takes 3 arguments"),
    (e_arity_func, r"one\(\) takes 1 arguments, got 2"),
    (e_arity_cast, r"f32\(\) takes 1 argument, got 2"),
    (e_call_kernel, "kernels cannot be called from kernels"),
    (e_print, "Python function 'print' cannot be called in a kernel"),
    (e_len, r"len\(\)'s argument \(a compile-time tuple\) must be known at compile time"),
    (e_int, r"int\(\) is ambiguous in a kernel"),
    (e_keyword, "pass 'x' by position: keyword arguments are for one\\(\\)'s compile-time"),
    (e_range_outside_for, r"range\(\) can only be used as the iterable of a for loop"),
    (e_for_over_pointer, r"for loops iterate over range\(...\), pk.static_range\(...\), pk.grid_stride\(...\) or pk.parallel_range"),
    (e_parallel_range_keyword, r"pk.parallel_range\(lo, hi, worker, workers, descending=False\) takes 4 arguments"),
    (e_parallel_range_descending, r"descending= takes a compile-time bool, got 1"),
    (e_load_policy, r"eviction= is one of 'evict_first', 'evict_last', got 'evict_soon'"),
    (e_load_shared, r"pk.load\(\) takes a pointer to global memory"),
    (e_store_const, r"cannot write through a ConstPtr"),
    (e_call_value, r"a Ptr\[f32\] value is not callable"),
    (e_assign_other_type, r"cannot assign a f32 value to 'v' of type i32; convert explicitly with pk.i32"),
    (e_int_plus_float, r"'\+': operand types f32 and i32 differ"),
    (e_signed_unsigned, r"'\+': operand types i32 and u32 differ"),
    (e_store_wrong_type, r"cannot assign a i32 value to 'element' of type f32"),
    ((e_return_wrong_type, wrong_return), r"cannot assign a f32 value to 'the return value' of type i32"),
    (e_int_div, "'/' is float division; use '//' for integers"),
    (e_pointer_condition, "a pointer is not a condition: write 'p is not None'"),
    (e_float_condition, "a f32 value is not a condition"),
    (e_const_out_of_range, r"constant 300 does not fit in u8 \(range 0..255\)"),
    (e_bool_arith, "arithmetic on bool is not supported"),
    (e_invert_float, "'~' needs an integer, got f32"),
    (e_shift_float, "shifts need integer operands"),
    (e_pow_dynamic, "'\\*\\*' needs a small constant non-negative integer exponent"),
    (e_bitcast_size, "bitcast needs types of the same size, got f32 and u64"),
    (e_index_float, "an index must be an integer, got f32"),
    (e_index_scalar, "a i32 value cannot be indexed"),
    (e_attribute_on_value, "values of type i32 have no attribute 'real'"),
    (e_dim3_attr, "thread_idx has attributes x, y, z; not 'w'"),
    (e_name_shadows_dtype, "'f32' names f32; choose another variable name"),
    (e_loop_var_type, "loop variable 'k' has type f32 but the range is u64"),
    (e_write_const, "cannot write through a ConstPtr: the data is read-only"),
    (e_augassign_const, "cannot write through a ConstPtr"),
    (e_atomic_const, "atomic on a ConstPtr: the data is read-only"),
    (e_atomic_bool, "atomics on bool are not supported; use u32"),
    (e_shared_size, "the shape of a shared array must be known at compile time"),
    (e_shared_shape, "a shared array's shape must be positive ints, got \\(0,\\)"),
    (e_shared_reassigned, "'buf' is a shared array and cannot be reassigned"),
    (e_two_dynamic, "a kernel has one dynamic shared array"),
    (e_shared_dims, r"this shared array has 2 dimension\(s\)"),
    (e_wave_pointer, r"wave operations take numbers, got Ptr\[f32\]"),
    (e_zero_step, r"range\(\) step must not be zero"),
    (e_for_else, "for ... else is not supported"),
    (e_loop_target, "the loop variable must be a plain name"),
    (e_kernel_returns_value, "kernels cannot return a value; write results through a pointer"),
    (e_tuple_unpacking, r"starred assignment \(`a, \*rest = ...`\) is not supported in kernels"),
    (e_chained_assignment, "chained assignment is not supported"),
    (e_while_else, "while ... else is not supported"),
    ((e_return_without_annotation, no_annotation_returns), "returning a value from a function without a return annotation"),
    ((e_bare_return_in_func, must_return), "this function must return a f32"),
    (e_fast_rcp_f64, r"fast_rcp\(\) is for f32 \(the hardware instruction\), got f64"),
    ((e_func_missing_compile_time, e_func_missing_compile_time),
     r"scaled\(\) needs its compile-time argument\(s\) factor by keyword"),
    (e_func_unknown_compile_time, r"scaled\(\) has no compile-time parameter 'bias'; it takes factor"),
    (e_func_runtime_compile_time, r"scaled\(\)'s compile-time argument 'factor' must be known at compile time"),
    (e_write_through_const_bitcast, "cannot write through a ConstPtr"),
    (e_is_aligned_not_power, r"is_aligned\(\) needs a power of two, got 6"),
    (e_assume_aligned_not_power, r"assume_aligned\(\) needs a power of two, got 12"),
    (e_assume_aligned_not_pointer, r"assume_aligned\(\) takes a pointer"),
    (e_type_alias_over_variable, "'x' is a run-time variable; a type needs a name of its own"),
    (e_static_range_runtime_bound, "a pk.static_range\\(\\) bound must be known at compile time"),
    (e_static_range_break, r"'break' in a pk.static_range\(\) body: its copies are not a loop"),
    (e_static_range_assign, r"'k' is a pk.static_range\(\) variable \(a compile-time int\) and cannot be assigned"),
    (e_local_atomic, "atomics on a local array: it is private to the thread"),
    (e_local_out_of_bounds, "index 4 is out of bounds for a dimension of 4"),
    (e_local_too_big, "a local array takes at most 4096 bytes per thread, this one 8192"),
    (e_local_as_value, r"declare local arrays as 'name = pk.local.array\(shape, dtype\)'"),
    (e_assigned_in_one_branch, "'x' may be read before it is assigned: it is not assigned on every path"),
    (e_assigned_only_in_a_loop, "'acc' may be read before it is assigned"),
    (e_assigned_in_a_while_body, "'last' may be read before it is assigned"),
    ((e_missing_return, maybe_returns), r"maybe_returns\(\) must return a f32 on every path"),
    (e_nested_static_range, r"nested pk.static_range\(\) loops unroll at most 1024 copies .* these give 1000000"),
    (e_unknown_builtin_keyword, r"pk.atomic.add\(\) has no keyword argument 'order'"),
    (e_grid_stride_keyword, r"pk.grid_stride\(\) takes no keyword arguments"),
    (e_shared_array_keyword, r"pk.shared.array\(\) takes no keyword arguments"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: (c[0][0] if isinstance(c[0], tuple) else c[0]).name)
def test_compile_error(case):
    target, message = case
    kern, where = target if isinstance(target, tuple) else (target, target)
    check(compile_error(kern), where, message)


def test_atomic_on_unsupported_dtype_is_the_targets_decision():
    # which dtypes have atomics is the target's call (the error names it); the host has no fp8 add
    import ml_dtypes
    import numpy as np
    with pytest.raises(pk.CompileError) as info:
        e_atomic_dtype[1, 1](np.zeros(1, ml_dtypes.float8_e4m3fn))
    check(info.value, e_atomic_dtype, "atomic add on f8e4m3 is not supported on cpu")


def test_at_least_40_distinct_cases():
    assert len({m for _, m in CASES}) >= 40


def test_error_raised_again_at_launch():
    # the error surfaces at the first launch too, unchanged
    import numpy as np
    with pytest.raises(pk.CompileError) as info:
        e_int_div[1, 1](np.zeros(1, np.int32), 3)
    check(info.value, e_int_div, "'/' is float division")


# ============================================================================ errors at definition time
def test_missing_annotation():
    with pytest.raises(pk.CompileError) as info:
        @pk.kernel
        def k(p: Ptr[f32],
              n):  # <-
            pass
    check(info.value, test_missing_annotation, r"parameter 'n' needs a type annotation")


def test_star_args():
    with pytest.raises(pk.CompileError) as info:
        @pk.kernel
        def k(p: Ptr[f32], *rest):  # <-
            pass
    check(info.value, test_star_args, r"\*args parameters are not supported in kernels")


def test_default_values():
    with pytest.raises(pk.CompileError) as info:
        @pk.kernel
        def k(p: Ptr[f32], n: i32 = 3):  # <-
            pass
    check(info.value, test_default_values, "run-time parameters cannot have default values")


def test_kernel_return_annotation():
    @pk.kernel
    def k(p: Ptr[f32]) -> f32:  # <-
        pass
    check(compile_error(k), test_kernel_return_annotation, "kernels return nothing: annotate `-> None` or nothing")


def test_bad_annotation():
    @pk.kernel
    def k(p: Ptr[f32], n: 3):  # <-
        pass
    check(compile_error(k), test_bad_annotation, "3 is not a pykern type")


def test_closure_values_resolve_at_compile_time():
    n = "not a number"

    @pk.kernel
    def k(p: Ptr[f32]):
        p[0] = n  # <-
    check(compile_error(k), test_closure_values_resolve_at_compile_time,
          "str 'not a number' is not a value a kernel can compute with|expected a number")


# ============================================================================ no crash
def test_bad_code_never_kills_the_process(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(textwrap.dedent('''
        import numpy as np
        import pykern as pk
        from pykern import Ptr, f32, i32, u32

        @pk.kernel
        def deep(p: Ptr[f32]):
            p[0] = ((((((((((((((((((((p[0] + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1) + 1)

        @pk.kernel
        def huge_shared(p: Ptr[f32]):
            buf = pk.shared.array((1 << 20, 1 << 20), f32)
            buf[0, 0] = 1.0
            p[0] = buf[0, 0]

        @pk.kernel
        def bad_types(p: Ptr[f32], n: i32):
            p[0] = p[0] + n

        @pk.kernel
        def shared_in_branch(p: Ptr[u32]):
            buf = pk.shared.array(32, u32)
            if pk.thread_idx.x < 4:
                buf[pk.thread_idx.x] = u32(1)
            pk.syncthreads()
            p[pk.thread_idx.x] = buf[0]

        @pk.kernel
        def shift_by_huge(p: Ptr[u32], n: u32):
            p[0] = n << 100

        for kern, args in ((deep, (np.zeros(1, np.float32),)), (huge_shared, (np.zeros(1, np.float32),)),
                           (bad_types, (np.zeros(1, np.float32), 1)), (shared_in_branch, (np.zeros(32, np.uint32),)),
                           (shift_by_huge, (np.zeros(1, np.uint32), 3))):
            try:
                kern[1, 32](*args)
                print(kern, "ran")
            except Exception as exc:
                print(kern, "raised", type(exc).__name__)
        print("survived")
    '''))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "survived" in proc.stdout
    assert "LLVM ERROR" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "bad_types> raised CompileError" in proc.stdout


def test_oversized_shared_array_is_a_compile_error(tmp_path):
    script = tmp_path / "huge_shared.py"
    script.write_text(textwrap.dedent('''
        import numpy as np
        import pykern as pk
        from pykern import Ptr, f32, u64

        @pk.kernel
        def huge(p: Ptr[f32], n: u64):
            buf = pk.shared.array((1 << 20, 1 << 20), f32)
            t = pk.thread_idx.x
            buf[u64(t) * n, 0] = 1.0
            pk.syncthreads()
            p[t] = buf[u64(t) * n, 0]

        try:
            huge[1, 4](np.zeros(4, np.float32), 100000)
            print("ran")
        except pk.CompileError as exc:
            print("CompileError", exc)
    '''))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("CompileError") and "shared" in proc.stdout, proc.stdout


# ============================================================================ issue 25
def test_async_kernel():
    with pytest.raises(pk.CompileError) as info:
        @pk.kernel
        async def k(p: Ptr[f32]):  # <-
            p[0] = 1.0
    check(info.value, test_async_kernel, r"'k' is an async def: kernels and device functions are plain functions")


def test_async_device_function():
    with pytest.raises(pk.CompileError, match="'g' is an async def"):
        @pk.func
        async def g(x: f32) -> f32:
            return x


def test_all_paths_assigning_or_leaving_is_fine():
    """No false alarms: both branches assign, the other branch leaves, a loop assigns what it reads,
    a compile-time branch, while True with a return."""
    import numpy as np

    @pk.func
    def sign_of(x: f32) -> f32:
        if x > 0.0:
            return 1.0
        elif x < 0.0:
            return -1.0
        else:
            return 0.0

    @pk.func
    def first_positive(p: Ptr[f32], n: i32) -> i32:
        i = 0
        while True:
            if i >= n or p[i] > 0.0:
                return i
            i += 1

    @pk.kernel
    def k(p: Ptr[f32], n: i32, *, T):
        if n > 0:
            x = 2.0
        else:
            x = 3.0
        for i in range(n):
            if i < 0:
                continue
            y = p[i]
            p[i] = y + x
        if T.is_float:
            z = 1.0
        p[0] = z + sign_of(p[1]) + f32(first_positive(p, n))

    p = np.array([-5.0, 2.0, 0.0], np.float32)
    k.instance(T=f32)[1, 1](p, 3)
    assert p.tolist() == [3.0, 4.0, 2.0]  # z + sign(4) + index of the first positive


def test_a_500_term_expression_is_a_compile_error_not_a_recursion_error(tmp_path, monkeypatch):
    src = ("import pykern as pk\nfrom pykern import Ptr, f32\n\n\n@pk.kernel\ndef k(p: Ptr[f32]):\n"
           "    p[0] = " + " + ".join(f"p[{i % 4}]" for i in range(500)) + "\n")
    (tmp_path / "long_expression.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    import long_expression
    with pytest.raises(pk.CompileError) as info:
        long_expression.k.instance().typed(pk.device("cpu").target)
    assert "nests too deeply to compile" in info.value.message and "split it into several statements" in info.value.message
    assert info.value.loc.file == str(tmp_path / "long_expression.py") and info.value.loc.line == 7
