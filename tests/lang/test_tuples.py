"""Several results from a device function (``-> tuple[...]``) and tuple unpacking, run on the CPU at
both wave widths against NumPy/Python; their errors (message and caret); and the code a helper that
returns a tuple gives, compared with the same computation written out by hand (PTX for sm_90,
AMDGPU assembly for gfx90a and gfx1100, the optimised LLVM IR)."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, i32, u32, u64, usize
from pykern.compiler import lower_module
from pykern.ir import printer
from pykern.targets.registry import make_target

X = pk.TypeVar("X")


def run(dev, kern, grid, block, *args):
    """Launch ``kern`` on ``dev``; NumPy arrays are copied in and the results returned in order."""
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kern.launch(grid, block, *dargs, device=dev)
    return [d.to_host() for a, d in zip(args, dargs) if isinstance(a, np.ndarray)]


# ---------------------------------------------------------------------------- device functions
@pk.func
def split3(i: u32, n2: u32, n3: u32) -> tuple[u32, u32, u32]:
    """A row-major index of shape (*, n2, n3) as its three coordinates."""
    r = i // n3
    b = r // n2
    return b, r - b * n2, i - r * n3


@pk.func
def parts(x: f32) -> tuple[i32, f32, bool]:
    """Results of three different types: the integer part, the fraction, the sign."""
    whole = i32(x)
    return whole, x - f32(whole), x < 0


@pk.func
def div_mod(n: X, d: X) -> tuple[X, X]:
    q = n // d
    return q, n - q * d


@pk.func
def sorted2(a: i32, b: i32) -> tuple[i32, i32]:
    """Early returns, each a tuple; a literal result takes its declared type."""
    if a > b:
        return b, a
    if a == b:
        return a, 0
    return a, b


@pk.func
def base3_digits(n: u32) -> tuple[u32, u32, u32]:
    """Nested calls: a tuple returned as it is, another unpacked inside."""
    q, d0 = div_mod(n, u32(3))
    t = div_mod(q, u32(3))
    d1 = t[1]
    return d0, d1, div_mod(t[0], u32(3))[1]


@pk.func
def swapped_digits(n: u32) -> tuple[u32, u32, u32]:
    return base3_digits(n)  # a callee's tuple passes through unchanged


@pk.func
def lane_and_width() -> tuple[u32, u32]:
    return pk.lane_id(), pk.wave_size  # a compile-time int converts to the declared u32


# ---------------------------------------------------------------------------- kernels
@pk.kernel
def k_split(n: usize, n2: u32, n3: u32, out: Ptr[u32]):
    for i in pk.grid_stride(n):
        b, c, o = split3(u32(i), n2, n3)
        out[3 * i] = b
        out[3 * i + 1] = c
        out[3 * i + 2] = o


@pk.kernel
def k_parts(n: usize, x: ConstPtr[f32], whole: Ptr[i32], frac: Ptr[f32], neg: Ptr[u32]):
    for i in pk.grid_stride(n):
        w, f, s = parts(x[i])
        whole[i], frac[i] = w, f  # subscript targets
        neg[i] = u32(s)


@pk.kernel
def k_swap(n: usize, x: ConstPtr[i32], out: Ptr[i32]):
    for i in pk.grid_stride(n):
        a = x[i]
        b = a * 10
        c = a * 100
        a, b = b, a                # swap: the right-hand side is evaluated first
        a, b, c = b, c, a          # rotate
        out[3 * i], out[3 * i + 1], out[3 * i + 2] = a, b, c


@pk.kernel
def k_fib(n: usize, out: Ptr[u64]):
    for i in pk.grid_stride(n):
        a, b = u64(0), u64(1)
        for _ in range(i):
            a, b = b, a + b
        out[i] = a


@pk.kernel
def k_nested(n: usize, out: Ptr[u32]):
    for i in pk.grid_stride(n):
        d0, d1, d2 = swapped_digits(u32(i))
        [e0, e1] = div_mod(base3_digits(u32(i))[2], u32(2))   # a list target, a call indexed in an argument
        out[5 * i], out[5 * i + 1], out[5 * i + 2] = d0, d1, d2
        out[5 * i + 3], out[5 * i + 4] = e0, e1


@pk.kernel
def k_tuple_variable(n: usize, x: ConstPtr[i32], out: Ptr[i32]):
    for i in pk.grid_stride(n):
        t = sorted2(x[2 * i], x[2 * i + 1])
        lo, hi = t
        acc = t[0] * 1000 + t[-1]
        pair = (hi, lo)            # a written tuple of run-time values, as a variable
        t = sorted2(pair[0], 7)    # reassigned: the same tuple type
        (p, q), r = (1, 2), acc    # nested targets of compile-time values
        out[2 * i] = acc + (p + q) * 0 + t[0] * 0
        out[2 * i + 1] = t[1] + r * 0


@pk.kernel
def k_generic(n: usize, d: usize, q: Ptr[u64], r: Ptr[u64]):
    for i in pk.grid_stride(n):
        q[i], r[i] = div_mod(i, d)          # tuple[X, X] at X = usize
        a, b = div_mod(u32(i), u32(d))      # and at X = u32
        q[i] += u64(a) - u64(a) + u64(b) - u64(b)


@pk.kernel
def k_lanes(n: usize, lane: Ptr[u32], width: Ptr[u32]):
    i = pk.global_id()
    if i < n:
        lane[i], width[i] = lane_and_width()


@pk.kernel
def k_discard(n: usize, out: Ptr[u32]):
    i = pk.global_id()
    if i < n:
        split3(u32(i), u32(2), u32(3))     # a tuple result may be dropped, as a scalar one
        out[i] = 1


def test_decomposition(wave_device):
    n2, n3, n = 7, 5, 500
    (out,) = run(wave_device, k_split, 4, 64, n, n2, n3, np.zeros(3 * n, np.uint32))
    i = np.arange(n)
    np.testing.assert_array_equal(out.reshape(-1, 3), np.stack([i // (n2 * n3), i // n3 % n2, i % n3], 1))


def test_results_of_different_types(wave_device):
    x = np.random.default_rng(1).uniform(-50, 50, 300).astype(np.float32)
    _, whole, frac, neg = run(wave_device, k_parts, 2, 64, x.size, x, np.zeros(300, np.int32),
                           np.zeros(300, np.float32), np.zeros(300, np.uint32))
    np.testing.assert_array_equal(whole, np.trunc(x).astype(np.int32))
    np.testing.assert_array_equal(frac, x - np.trunc(x).astype(np.int32).astype(np.float32))
    np.testing.assert_array_equal(neg, (x < 0).astype(np.uint32))


def test_swap_and_rotate(wave_device):
    x = np.arange(-20, 20, dtype=np.int32)
    _, out = run(wave_device, k_swap, 1, 64, x.size, x, np.zeros(3 * x.size, np.int32))
    a, b, c = x, 10 * x, 100 * x
    a, b = b, a
    a, b, c = b, c, a
    np.testing.assert_array_equal(out.reshape(-1, 3), np.stack([a, b, c], 1))


def test_fibonacci_pair_update(wave_device):
    (out,) = run(wave_device, k_fib, 1, 64, 90, np.zeros(90, np.uint64))
    fib, a, b = [], 0, 1
    for _ in range(90):
        fib.append(a)
        a, b = b, a + b
    np.testing.assert_array_equal(out, np.array(fib, np.uint64))


def test_nested_calls(wave_device):
    n = 27 * 3
    (out,) = run(wave_device, k_nested, 2, 64, n, np.zeros(5 * n, np.uint32))
    i = np.arange(n)
    digits = [i % 3, i // 3 % 3, i // 9 % 3]
    np.testing.assert_array_equal(out.reshape(-1, 5), np.stack(digits + [digits[2] // 2, digits[2] % 2], 1))


def test_tuple_variable(wave_device):
    x = np.random.default_rng(2).integers(-9, 10, 200).astype(np.int32)
    _, out = run(wave_device, k_tuple_variable, 2, 64, 100, x, np.zeros(200, np.int32))
    lo, hi = np.minimum(x[0::2], x[1::2]), np.maximum(x[0::2], x[1::2])
    lo = np.where(x[0::2] == x[1::2], x[0::2], lo)
    hi = np.where(x[0::2] == x[1::2], 0, hi)
    acc = lo * 1000 + hi
    second = np.where(hi > 7, hi, np.where(hi == 7, 0, 7))     # sorted2(hi, 7)[1]
    np.testing.assert_array_equal(out.reshape(-1, 2), np.stack([acc, second], 1))


def test_generic_tuple_results(wave_device):
    q, r = run(wave_device, k_generic, 2, 64, 300, 7, np.zeros(300, np.uint64), np.zeros(300, np.uint64))
    np.testing.assert_array_equal(q, np.arange(300) // 7)
    np.testing.assert_array_equal(r, np.arange(300) % 7)


def test_wave_width_in_a_tuple(wave_device):
    lane, width = run(wave_device, k_lanes, 2, 128, 256, np.zeros(256, np.uint32), np.zeros(256, np.uint32))
    ws = wave_device.target.wave_size
    np.testing.assert_array_equal(width, np.full(256, ws, np.uint32))
    np.testing.assert_array_equal(lane, np.arange(256) % 128 % ws)


def test_dropped_tuple_result(wave_device):
    (out,) = run(wave_device, k_discard, 1, 64, 10, np.zeros(10, np.uint32))
    np.testing.assert_array_equal(out, np.ones(10, np.uint32))


def test_typed_ir_shows_tuples():
    text = printer.function(k_tuple_variable.instance().typed(pk.device("cpu").target))
    assert "def sorted2(a: i32, b: i32) -> tuple[i32, i32]:" in text
    assert "return (b, a)" in text
    assert re.search(r"lo = \$t\d+\[0\]|lo = t\[0\]", text), text


# ---------------------------------------------------------------------------- errors
@pk.func
def three() -> tuple[u32, u32, u32]:
    return u32(1), u32(2), u32(3)


@pk.func
def one() -> u32:
    return u32(1)


@pk.func
def returns_two_for_one() -> u32:
    return u32(1), u32(2)  # <- u32(1), u32(2)


@pk.func
def returns_one_for_two() -> tuple[u32, u32]:
    return u32(1)  # <- u32(1)


@pk.func
def returns_three_for_two() -> tuple[u32, u32]:
    return 1, 2, 3  # <- 1, 2, 3


@pk.func
def returns_wrong_element() -> tuple[u32, u32]:
    x = f32(1.5)
    return u32(1), x  # <- return


@pk.func
def untyped_tuple() -> tuple:  # <- tuple
    return 1, 2


@pk.func
def tuple_of_tuples() -> tuple[u32, tuple[u32, u32]]:  # <- tuple[u32, tuple[u32, u32]]
    return 1, (2, 3)


@pk.kernel
def e_count_mismatch(out: Ptr[u32]):
    a, b = three()  # <- a, b


@pk.kernel
def e_too_many_names(out: Ptr[u32]):
    x = out[0]
    a, b, c = x, x  # <- a, b, c


@pk.kernel
def e_unpack_scalar(out: Ptr[u32]):
    a, b = one()  # <- one()


@pk.kernel
def e_unpack_compile_time(out: Ptr[u32]):
    a, b = 4  # <- 4


@pk.kernel
def e_tuple_in_arithmetic(out: Ptr[u32]):
    x = three()
    out[0] = x + 1  # <- x


@pk.kernel
def e_call_in_arithmetic(out: Ptr[u32]):
    out[0] = three() * 2  # <- three()


@pk.kernel
def e_store_tuple(out: Ptr[u32]):
    out[0] = three()  # <- three()


@pk.kernel
def e_tuple_argument(out: Ptr[u32]):
    out[0] = one() + div_mod(three(), u32(2))[0]  # <- three()


@pk.kernel
def e_tuple_to_scalar_variable(out: Ptr[u32]):
    x = out[0]
    x = three()  # <- x = three()


@pk.kernel
def e_starred(out: Ptr[u32]):
    a, *rest = three()  # <- *rest


@pk.kernel
def e_tuple_of_arrays(out: Ptr[u32]):
    buf = pk.shared.array(4, u32)
    t = (buf, out[0])  # <- buf


@pk.kernel
def e_tuple_condition(out: Ptr[u32]):
    if three():  # <- three()
        out[0] = 1


@pk.kernel
def e_tuple_is_immutable(out: Ptr[u32]):
    t = three()
    t[0] = u32(5)  # <- t[0]


@pk.kernel
def e_tuple_index_runtime(out: Ptr[u32]):
    t = three()
    out[0] = t[out[1]]  # <- out[1]


@pk.kernel
def e_tuple_index_range(out: Ptr[u32]):
    out[0] = three()[3]  # <- 3


@pk.kernel
def e_tuple_annotation(out: Ptr[u32]):
    t: tuple[u32, u32] = (out[0], out[1])  # <- tuple[u32, u32]


@pk.kernel
def e_runtime_tuple_as_shape(out: Ptr[u32]):
    n = out[0]
    k = len((n, 2))  # <- n


def _calls(func):
    """A kernel that calls ``func`` (whose own line holds the error)."""
    @pk.kernel
    def k(out: Ptr[u32]):
        func()
    return k


ERRORS = [
    (e_count_mismatch, e_count_mismatch, r"2 names to unpack, but three\(\) returns 3 values"),
    (e_too_many_names, e_too_many_names, "3 names to unpack, but the right-hand side has 2 values"),
    (e_unpack_scalar, e_unpack_scalar, r"cannot unpack a u32 value: only a tuple unpacks"),
    (e_unpack_compile_time, e_unpack_compile_time, r"cannot unpack int 4: only a tuple unpacks"),
    (e_tuple_in_arithmetic, e_tuple_in_arithmetic,
     r"'x' holds 3 values \(tuple\[u32, u32, u32\]\), not one value: unpack it \(`a, b, c = ...`\)"),
    (e_call_in_arithmetic, e_call_in_arithmetic, r"three\(\) returns 3 values \(tuple\[u32, u32, u32\]\), not one value"),
    (e_store_tuple, e_store_tuple, "a tuple of 3 values cannot be stored to memory: unpack it and store each element"),
    (e_tuple_argument, e_tuple_argument, r"three\(\) returns 3 values .*, not one value"),
    (e_tuple_to_scalar_variable, e_tuple_to_scalar_variable,
     r"cannot assign a tuple\[u32, u32, u32\] value to 'x' of type u32"),
    (e_starred, e_starred, r"starred assignment \(`a, \*rest = ...`\) is not supported in kernels"),
    (e_tuple_of_arrays, e_tuple_of_arrays, "a tuple holds scalars and pointers, not arrays"),
    (e_tuple_condition, e_tuple_condition, r"three\(\) returns 3 values"),
    (e_tuple_is_immutable, e_tuple_is_immutable, "a tuple's elements cannot be assigned: tuples are immutable"),
    (e_tuple_index_runtime, e_tuple_index_runtime, "a tuple is indexed with a compile-time int"),
    (e_tuple_index_range, e_tuple_index_range, "index 3 is out of range for a tuple of 3 values"),
    (e_tuple_annotation, e_tuple_annotation, "a tuple type is only for a device function's result"),
    (e_runtime_tuple_as_shape, e_runtime_tuple_as_shape, "a tuple element must be known at compile time here"),
    (_calls(returns_two_for_one), returns_two_for_one,
     r"this function returns one u32, not 2 values: annotate its result `-> tuple\[...\]`"),
    (_calls(returns_one_for_two), returns_one_for_two, r"this function returns tuple\[u32, u32\], got u32"),
    (_calls(returns_three_for_two), returns_three_for_two, r"this function returns 2 values \(tuple\[u32, u32\]\), not 3"),
    (_calls(returns_wrong_element), returns_wrong_element, r"cannot assign a f32 value to 'result 1' of type u32"),
    (_calls(untyped_tuple), untyped_tuple, r"name the type of each result: `-> tuple\[u32, u32\]`"),
    (_calls(tuple_of_tuples), tuple_of_tuples, "a tuple holds scalars and pointers, not tuples: flatten the result"),
]


@pytest.mark.parametrize("kern,where,message", ERRORS, ids=lambda v: getattr(v, "__name__", None)
                         or getattr(v, "name", None) or "")
def test_error(kern, where, message):
    """The message, the marked line, and a caret under the text the ``# <-`` comment names (its last occurrence in the line)."""
    with pytest.raises(pk.CompileError) as info:
        kern.instance().typed(pk.device("cpu").target)
    exc = info.value
    assert re.search(message, exc.message), f"message {exc.message!r} does not match {message!r}"
    fn = getattr(where, "__wrapped__", where)
    lines, first = inspect.getsourcelines(getattr(fn, "source", None).pyfunc if hasattr(fn, "source") else fn)
    (k, marked), = [(k, ln) for k, ln in enumerate(lines) if "# <- " in ln]
    src_line, caret_at = marked.rstrip("\n"), marked.split("# <- ")[1].strip()
    assert exc.loc.file == __file__ and exc.loc.line == first + k, (exc.loc, first + k)
    assert exc.loc.col == src_line.split("#")[0].rindex(caret_at), (str(exc), caret_at)
    text = str(exc).splitlines()
    assert text[1] == "    " + src_line
    assert text[2].index("^") - 4 == exc.loc.col and set(text[2].strip()) == {"^"}


# ---------------------------------------------------------------------------- the code it gives
@pk.func
def div_magic(n: u32, d: u32, magic: u64) -> u32:
    """``n // d`` by multiplication (conv's ``div_by`` for u32 indices)."""
    t = (u64(n) * u64(u32(magic))) >> 32
    return u32((t + u64(n)) >> (magic >> 32))


@pk.func
def decompose(i: u32, n3: u32, n2: u32, nc: u32, m3: u64, m2: u64, mc: u64) -> tuple[u32, u32, u32, u32]:
    r = div_magic(i, n3, m3)
    o3 = i - r * n3
    q = div_magic(r, n2, m2)
    o2 = r - q * n2
    b = div_magic(q, nc, mc)
    return b, q - b * nc, o2, o3


@pk.kernel
def by_hand(numel: usize, n3: u32, n2: u32, nc: u32, m3: u64, m2: u64, mc: u64, src: ConstPtr[f32], dst: Ptr[f32]):
    for i in pk.grid_stride(numel):
        r = div_magic(u32(i), n3, m3)
        o3 = u32(i) - r * n3
        q = div_magic(r, n2, m2)
        o2 = r - q * n2
        b = div_magic(q, nc, mc)
        c = q - b * nc
        dst[i] = src[usize(b) * 7 + usize(c) * 5 + usize(o2) * 3 + usize(o3)]


@pk.kernel
def by_helper(numel: usize, n3: u32, n2: u32, nc: u32, m3: u64, m2: u64, mc: u64, src: ConstPtr[f32], dst: Ptr[f32]):
    for i in pk.grid_stride(numel):
        b, c, o2, o3 = decompose(u32(i), n3, n2, nc, m3, m2, mc)
        dst[i] = src[usize(b) * 7 + usize(c) * 5 + usize(o2) * 3 + usize(o3)]


def _canonical(ir_text: str) -> list[str]:
    """Optimised LLVM IR with its value names numbered in order of appearance (the two versions
    differ only in the names LLVM gave the hidden variables)."""
    names: dict[str, str] = {}
    out = []
    for line in ir_text.splitlines():
        out.append(re.sub(r"%[\w.]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), line))
    return out


@pytest.mark.parametrize("kind,arch", [("cuda", "sm_90"), ("amdgpu", "gfx90a"), ("amdgpu", "gfx1100")])
def test_helper_gives_the_hand_written_code(kind, arch):
    target = make_target(kind, arch)
    opt, asm = [], []
    for kern in (by_hand, by_helper):
        inst = kern.instance("decompose_kernel")  # one name: the texts may then match exactly
        opt.append(_canonical(str(target.optimize(lower_module([inst], target, "m")[0]))))
        asm.append(target.assembly(lower_module([inst], target, "m")[0]))
    assert opt[0] == opt[1]
    assert asm[0] == asm[1]
    body = [ln for ln in asm[0].splitlines() if ln.strip() and not ln.lstrip().startswith(("//", ";", "."))]
    assert len(body) > 50  # a real kernel (the three divisions, the grid-stride tiles), not an empty one


@pytest.mark.parametrize("width", [32, 64])
def test_helper_gives_the_hand_written_code_on_the_cpu(width):
    target = pk.device("cpu", wave_size=width).target
    texts = [_canonical(str(target.optimize(lower_module([k.instance("decompose_kernel")], target, "m")[0])))
             for k in (by_hand, by_helper)]
    assert texts[0] == texts[1]
