"""Kernels whose LLVM IR is another's up to the kernel's name (``compiler.identical_kernels``: u8 and
i8 twins, u32 and i32, the same body under another definition) are optimised and code-generated once
and written under both names, as candle's second names are; what stays apart is what LLVM would
compile differently: other IR, other launch bounds, other shared arrays, other parameter names."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, i8, i32, u8, u32, usize
from pykern.compiler import compile_kernels, identical_kernels, lower_module
from pykern.targets.aliases import _entry_block
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.codeobject import CodeObject
from pykern.targets.cpu import CpuTarget
from pykern.targets.nvptx import NvptxTarget


def _no_labels(text: str, name: str) -> str:
    """An entry's text with its name, its shared arrays' names, LLVM's function-numbered labels and
    the comments and blank lines before it made neutral (a module says which arrays it demoted ahead
    of its first entry, a kernel compiled alone ahead of its own)."""
    text = re.sub(rf"(\.globl\t|\.entry ){re.escape(name)}\b|\b{re.escape(name)}(?=_param_)",
                  lambda m: (m.group(1) or "") + "K", text)
    text = "\n".join(line for line in text.splitlines() if line.strip() and not line.startswith("//"))
    text = re.sub(r"\w+_\$_", "S_$_", text)
    return re.sub(r"\$L__BB\d+_", "$L__BBn_", text)


@pk.kernel
def shift(n: usize, x: ConstPtr[T], y: Ptr[T], *, T, S):
    """A shared array of ``S`` elements a block (the kernel's own global) and a barrier."""
    buf = pk.shared.array(S, T)
    i = pk.global_id()
    t = pk.thread_idx.x
    if i < n:
        buf[t] = x[i] + T(1)
    pk.syncthreads()
    if i < n:
        y[i] = buf[t]


@pk.kernel
def shift_copy(n: usize, x: ConstPtr[T], y: Ptr[T], *, T, S):
    """``shift``'s body under another definition."""
    buf = pk.shared.array(S, T)
    i = pk.global_id()
    t = pk.thread_idx.x
    if i < n:
        buf[t] = x[i] + T(1)
    pk.syncthreads()
    if i < n:
        y[i] = buf[t]


@pk.kernel
def shift_renamed(n: usize, src: ConstPtr[T], dst: Ptr[T], *, T, S):
    """``shift`` with other parameter names: AMDGPU's metadata names the arguments, so not a twin."""
    buf = pk.shared.array(S, T)
    i = pk.global_id()
    t = pk.thread_idx.x
    if i < n:
        buf[t] = src[i] + T(1)
    pk.syncthreads()
    if i < n:
        dst[i] = buf[t]


@pk.kernel(max_block_size=256)
def shift_256(n: usize, x: ConstPtr[T], y: Ptr[T], *, T, S):
    """``shift`` under other launch bounds (other attributes): not a twin."""
    buf = pk.shared.array(S, T)
    i = pk.global_id()
    t = pk.thread_idx.x
    if i < n:
        buf[t] = x[i] + T(1)
    pk.syncthreads()
    if i < n:
        y[i] = buf[t]


MOD = pk.Module("test_identical").add(
    shift.instance("shift_u32", T=u32, S=64), shift.instance("shift_i32", T=i32, S=64),
    shift.instance("shift_i32_again", T=i32, S=64),          # candle-style second name of shift_i32
    shift.instance("shift_f32", T=f32, S=64), shift.instance("shift_u8", T=u8, S=64),
    shift.instance("shift_i8", T=i8, S=64), shift.instance("shift_u32_s128", T=u32, S=128),
    shift_copy.instance("copy_u32", T=u32, S=64), shift_renamed.instance("renamed_u32", T=u32, S=64),
    shift_256.instance("bounds_u32", T=u32, S=64))
#: shift_i32 is a twin of shift_u32, so its own second name names shift_u32 too
TWINS = {"shift_i32": "shift_u32", "shift_i32_again": "shift_u32", "shift_i8": "shift_u8", "copy_u32": "shift_u32"}
PRIMARIES = {"shift_u32", "shift_f32", "shift_u8", "shift_u32_s128", "renamed_u32", "bounds_u32"}


@pytest.mark.parametrize("target", [NvptxTarget("sm_90"), AmdgpuTarget("gfx90a"), AmdgpuTarget("gfx1100")], ids=str)
def test_twins_found_and_taken_out(target):
    module, sigs = lower_module(MOD.kernels, target, "test_identical")
    assert module.kernel_aliases == TWINS
    assert [s.name for s in sigs] == MOD.names()
    assert {f.name for f in module.functions if f.blocks} == PRIMARIES
    # a twin's own shared array goes with it; its signature is its own (its name)
    assert not [g for g in module.globals if g.startswith(("shift_i32.", "shift_i8.", "copy_u32."))]
    assert [g for g in module.globals if g.startswith("shift_u32.")]
    by = {s.name: s for s in sigs}
    assert by["shift_i32"].name == "shift_i32" and by["shift_i32"].params == by["shift_u32"].params


def test_cpu_target_compiles_every_name():
    module, _ = lower_module(MOD.kernels, CpuTarget(), "test_identical")
    assert module.kernel_aliases == {}
    assert {f.name for f in module.functions if f.blocks} >= set(MOD.names())


def test_nothing_to_merge_leaves_aliases_alone():
    module, _ = lower_module([MOD.kernels[0], MOD.kernels[3]], NvptxTarget("sm_90"), "m")
    assert identical_kernels(module, ["shift_u32", "shift_f32"], {"x": "shift_u32"}) == {"x": "shift_u32"}


def test_ptx_twin_entry_is_its_own_compile():
    """The twin's entry (the primary's copied) equals the twin compiled alone, labels' function
    numbers and shared arrays' names aside."""
    target = NvptxTarget("sm_90")
    ptx = compile_kernels(MOD.kernels, target, "test_identical")[0].decode()
    for twin in TWINS:
        inst = next(k for k in MOD.kernels if k.name == twin)
        alone = compile_kernels([inst], target, "alone")[0].decode()
        assert _no_labels(_entry_block(ptx, twin), twin) == _no_labels(_entry_block(alone, twin), twin)


@pytest.mark.needs_lld
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_hsaco_twin_is_its_own_compile(arch):
    """The twin's symbols are the primary's; its metadata, descriptor and code size are what
    compiling it alone gives."""
    target = AmdgpuTarget(arch)
    co = CodeObject(compile_kernels(MOD.kernels, target, "test_identical")[0])
    assert set(co.kernels) == set(MOD.names())
    meta = {k[".name"]: k for k in co.metadata["amdhsa.kernels"]}
    for twin, primary in TWINS.items():
        assert co.symbols[twin].value == co.symbols[primary].value
        inst = next(k for k in MOD.kernels if k.name == twin)
        alone = CodeObject(compile_kernels([inst], target, "alone")[0])
        own = {k[".name"]: k for k in alone.metadata["amdhsa.kernels"]}[twin]
        assert meta[twin] == own
        # the same descriptor and code size (where the code sits is the link's)
        assert dataclasses.replace(alone.kernels[twin].descriptor, entry_offset=0) == \
            dataclasses.replace(co.kernels[twin].descriptor, entry_offset=0)
        assert alone.symbols[twin].size == co.symbols[twin].size


@pytest.mark.parametrize("name,dtype", [("shift_u32", np.uint32), ("shift_i32", np.int32), ("shift_i32_again", np.int32),
                                        ("copy_u32", np.uint32), ("shift_u8", np.uint8), ("shift_i8", np.int8),
                                        ("shift_f32", np.float32)])
def test_every_name_launches(device, name, dtype):
    x = (np.arange(200) - 100).astype(dtype)
    y = device.to_device(np.zeros(200, dtype))
    device.get_or_load_func(name, MOD)[4, 64](200, device.to_device(x), y)
    np.testing.assert_array_equal(y.to_host(), x + dtype(1))


# ---- ``pk.kernel(moves=...)``: values a kernel only moves compile as the integer of their size ----------
@pk.kernel(moves=("T",))
def pick(n: usize, c: ConstPtr[u8], x: ConstPtr[T], y: ConstPtr[T], out: Ptr[T], *, T):
    """where-like: loads, a select, stores and a zero; nothing computed on T."""
    for i in pk.grid_stride(n):
        out[i] = pk.select(c[i] != 0, x[i], y[i]) if i % 7 != 0 else T(0)


MOVED = pk.Module("test_moves").add(*(pick.instance(f"pick_{t}", T=t) for t in (f32, u32, i32, pk.f16, pk.bf16,
                                                                               pk.f64, pk.i64, u8)))


@pytest.mark.parametrize("target", [NvptxTarget("sm_90"), AmdgpuTarget("gfx1100")], ids=str)
def test_moved_types_compile_once_a_size(target):
    module, sigs = lower_module(MOVED.kernels, target, "test_moves")
    assert module.kernel_aliases == {"pick_u32": "pick_f32", "pick_i32": "pick_f32", "pick_bf16": "pick_f16",
                                     "pick_i64": "pick_f64"}
    assert [s.name for s in sigs] == MOVED.names()
    # the typed IR the launch checks keeps the declared type; the body is the integer's
    inst = MOVED.get("pick_bf16")
    assert inst.typed(target).params[2][1] == pk.ConstPtr[pk.bf16]
    assert inst.body(target).params[2][1] == pk.ConstPtr[pk.u16]


@pytest.mark.parametrize("dtype", [np.float32, np.uint32, np.int32, np.float16, np.float64, np.int64, np.uint8])
def test_moved_types_launch_with_their_own_types(device, dtype):
    """Each name with arrays of its own dtype: the values' bits moved unchanged (NaN, -0.0); another
    dtype of the same size refused."""
    n = 300
    rng = np.random.default_rng(3)
    c = (rng.integers(0, 2, n)).astype(np.uint8)
    x = rng.standard_normal(n).astype(dtype) if np.dtype(dtype).kind == "f" else rng.integers(-90, 90, n).astype(dtype)
    y = (x * 2).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[1], y[2] = np.nan, -0.0  # the bits move unchanged
    name = "pick_" + {"float32": "f32", "uint32": "u32", "int32": "i32", "float16": "f16", "float64": "f64",
                      "int64": "i64", "uint8": "u8"}[np.dtype(dtype).name]
    out = device.to_device(np.full(n, 5, dtype))
    device.get_or_load_func(name, MOVED)[3, 64](n, device.to_device(c), device.to_device(x), device.to_device(y), out)
    want = np.where(c != 0, x, y)
    want[::7] = 0
    np.testing.assert_array_equal(out.to_host().view(f"u{np.dtype(dtype).itemsize}"),
                                  want.view(f"u{np.dtype(dtype).itemsize}"))
    with pytest.raises(pk.LaunchError, match="expects"):
        size = np.dtype(dtype).itemsize
        other = np.zeros(n, f"i{size}" if np.dtype(dtype).kind != "i" else (f"f{size}" if size > 1 else "u1"))
        device.get_or_load_func(name, MOVED)[3, 64](n, device.to_device(c), device.to_device(other),
                                                    device.to_device(other), out)


def test_moves_must_name_type_parameters():
    with pytest.raises(ValueError, match=r"moves names \['Q'\], not compile-time parameters"):
        pk.kernel(moves=("Q",))(pick.__wrapped__)
    bad = pk.kernel(moves=("T",))(pick.__wrapped__).instance("pick_bool", T=pk.bool_)
    with pytest.raises(TypeError, match="scalar dtype of 1, 2, 4 or 8 bytes"):
        bad.body(CpuTarget())
