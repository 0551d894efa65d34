"""``pk.dot4_i8`` / ``pk.dot4_u8i8`` (four byte products added to an i32) and ``pk.load(..., align=n)``
(a word read at an address known only to be a multiple of ``n``): the built-ins quantized kernels read
their blocks with.

The values are checked against NumPy on every device, including the extreme bytes (-128, 127, 255)
and a wrapping accumulator; the instructions each target lowers them to are checked in the assembly.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, i32, u8, u16, u32, usize
from pykern.compiler import compile_kernels, lower_module
from pykern.errors import CompileError
from pykern.targets.registry import make_target


@pk.kernel
def k_dot4(n: usize, a: ConstPtr[u32], b: ConstPtr[i32], acc: ConstPtr[i32], ss: Ptr[i32], us: Ptr[i32]):
    for i in pk.grid_stride(n):
        ss[i] = pk.dot4_i8(a[i], b[i], acc[i])
        us[i] = pk.dot4_u8i8(a[i], b[i], acc[i])


def reference(a: np.ndarray, b: np.ndarray, acc: np.ndarray, a_signed: bool) -> np.ndarray:
    """The byte products summed in int64, wrapped to i32 as the hardware's unclamped sum."""
    ab = a.view(np.int8 if a_signed else np.uint8).reshape(-1, 4).astype(np.int64)
    bb = b.view(np.int8).reshape(-1, 4).astype(np.int64)
    total = acc.astype(np.int64) + (ab * bb).sum(axis=1)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def test_dot4_values(device):
    rng = np.random.default_rng(4)
    n = 4099
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    acc = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    # the extremes: every byte -128 / 127 / 255, and accumulators at the ends of the range
    a[:4] = [0x80808080, 0x7F7F7F7F, 0xFFFFFFFF, 0]
    b[:4] = np.array([0x80808080, 0x80808080, 0x7F7F7F7F, 0x01020304], np.uint32).view(np.int32)
    acc[:4] = [2**31 - 1, -2**31, 2**31 - 1, -1]
    ss, us = device.zeros(n, i32), device.zeros(n, i32)
    k_dot4.launch(4, 256, n, device.to_device(a), device.to_device(b), device.to_device(acc), ss, us, device=device)
    np.testing.assert_array_equal(ss.to_host(), reference(a, b, acc, True))
    np.testing.assert_array_equal(us.to_host(), reference(a, b, acc, False))


@pk.kernel
def k_dot4_literals(out: Ptr[i32]):
    out[0] = pk.dot4_i8(0x01020304, -1, 10)        # literals are i32 words: bytes 4 3 2 1 times -1
    out[1] = pk.dot4_u8i8(u32(0xFF000000), 0x7F000000, 0)


def test_dot4_literals(device):
    out = device.zeros(2, i32)
    k_dot4_literals.launch(1, 1, out, device=device)
    assert out.to_host().tolist() == [10 - 10, 255 * 127]


# ---- the instructions each target uses -------------------------------------------------------------
DOT4 = k_dot4.instance("dot4")


@pytest.mark.parametrize("arch,signed,mixed", [
    ("gfx90a", "v_dot4c_i32_i8", None), ("gfx942", "v_dot4c_i32_i8", None), ("gfx1030", "v_dot4c_i32_i8", None),
    ("gfx1100", "v_dot4_i32_iu8", "v_dot4_i32_iu8"), ("gfx1201", "v_dot4_i32_iu8", "v_dot4_i32_iu8")])
def test_amdgpu_dot_instructions(arch, signed, mixed):
    """sdot4 on every arch; sudot4 (neg_lo marks the signed operands) on gfx11+, two sdot4 elsewhere."""
    target = make_target("amdgpu", arch)
    asm = target.assembly(lower_module([DOT4], target, "dot4")[0])
    dots = re.findall(r"^\s*(v_dot4c?_i32_i?u?8)\S*\s.*?(neg_lo:\[\d,\d,\d\])?$", asm, re.M)
    if mixed:
        assert (signed, "neg_lo:[1,1,0]") in dots and (mixed, "neg_lo:[0,1,0]") in dots
    else:
        assert len(dots) >= 3 and all(d[0] == signed for d in dots)  # one, plus two for the unsigned dot


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_dp4a(arch):
    ptx = compile_kernels([DOT4], make_target("cuda", arch), "dot4")[0].decode()
    assert "dp4a.s32.s32" in ptx and "dp4a.u32.s32" in ptx


def test_cpu_is_integer_arithmetic():
    ir_text = str(lower_module([DOT4], make_target("cpu"), "dot4")[0])
    assert "llvm.amdgcn" not in ir_text and "llvm.nvvm" not in ir_text
    assert len(re.findall(r"= mul i32", ir_text)) >= 8  # four products for each of the two dots


# ---- aligned-to-n loads ----------------------------------------------------------------------------
@pk.kernel
def k_read_words(n: usize, blocks: ConstPtr[u8], words: Ptr[u32], halves: Ptr[pk.f16]):
    """Blocks of 18 bytes (an f16, then 16 bytes): the f16 is 2-byte aligned, the words after it too."""
    for i in pk.grid_stride(n):
        block = blocks + i * 18
        halves[i] = pk.bitcast(block, ConstPtr[pk.f16])[0]
        for k in pk.static_range(4):
            words[4 * i + k] = pk.load(pk.bitcast(block + 2 + 4 * k, ConstPtr[u32]), 0, align=2)


def test_load_align_reads_words_at_any_even_offset(device):
    rng = np.random.default_rng(1)
    n = 333
    raw = rng.integers(0, 256, n * 18, dtype=np.uint8)
    words, halves = device.zeros(4 * n, u32), device.zeros(n, pk.f16)
    k_read_words.launch(2, 64, n, device.to_device(raw), words, halves, device=device)
    blocks = raw.reshape(n, 18)
    np.testing.assert_array_equal(words.to_host(), blocks[:, 2:].copy().view("<u4").reshape(-1))
    np.testing.assert_array_equal(halves.to_host().view(np.uint16), blocks[:, :2].copy().view("<u2").reshape(-1))


@pk.kernel
def k_one_word(blocks: ConstPtr[u8], words: Ptr[u32], *, align):
    i = pk.global_id()
    words[i] = pk.load(pk.bitcast(blocks + i * 18 + 2, ConstPtr[u32]), 0, align=align)


@pytest.mark.parametrize("align,loads", [(2, ["b16", "b16"]), (4, ["b32"])])
def test_load_align_on_nvptx(align, loads):
    """NVPTX needs naturally aligned words: an align=2 word is two 16-bit loads (candle's
    get_int_from_uint8); align=4 (the default for u32) one 32-bit load."""
    ptx = compile_kernels([k_one_word.instance("one_word", align=align)], make_target("cuda"), "words")[0].decode()
    assert re.findall(r"ld\.global(?:\.nc)?\.[bu](\d+)", ptx) == [x[1:] for x in loads]


def test_load_align_errors():
    @pk.kernel
    def too_wide(p: ConstPtr[u16], out: Ptr[u16]):
        out[0] = pk.load(p, 0, align=4)

    @pk.kernel
    def not_power(p: ConstPtr[u32], out: Ptr[u32]):
        out[0] = pk.load(p, 0, align=3)

    @pk.kernel
    def both(p: ConstPtr[u32], out: Ptr[u32]):
        out[0] = pk.load(p, 0, align=2, eviction="evict_first")

    @pk.kernel
    def on_store(p: Ptr[u32]):
        pk.store(p, 0, 1, align=2)

    for kern, msg in ((too_wide, "align= is a power of two from 1 to the element's 2 bytes, got 4"),
                      (not_power, "got 3"), (both, "not both"), (on_store, "pk.store() has no keyword argument 'align'")):
        with pytest.raises(CompileError, match=re.escape(msg)):
            compile_kernels([kern.instance(kern.name)], make_target("cpu"), "bad")


def test_dot4_errors():
    @pk.kernel
    def narrow(a: ConstPtr[u16], out: Ptr[i32]):
        out[0] = pk.dot4_i8(a[0], 1, 0)

    @pk.kernel
    def wide_acc(a: ConstPtr[u32], out: Ptr[i32]):
        out[0] = pk.dot4_u8i8(a[0], 1, pk.i64(0))

    @pk.kernel
    def arity(a: ConstPtr[u32], out: Ptr[i32]):
        out[0] = pk.dot4_i8(a[0], 1)

    for kern, msg in ((narrow, "dot4_i8()'s a is four packed bytes in an i32 or u32, got u16"),
                      (wide_acc, "dot4_u8i8()'s accumulator is an i32, got i64"),
                      (arity, "dot4_i8() takes 3 arguments, got 2")):
        with pytest.raises(CompileError, match=re.escape(msg)):
            compile_kernels([kern.instance(kern.name)], make_target("cpu"), "bad")
