"""A kernel under two names (candle's second names, 72 of the stdlib's kernels) is compiled once and
written under both: PTX entries that differ only in their names, AMDGPU kernels whose symbols,
descriptors and metadata are the primary's; the CPU target compiles both names. And the per-module
loop-strength-reduction choice: the stdlib kernels that opt out on CUDA only, reset after."""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, i32, usize
from pykern.compiler import compile_kernels, kernel_aliases, lower_module
from pykern.targets.aliases import _entry_block, object_with_aliases, ptx_with_aliases
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.codeobject import CodeObject
from pykern.targets.cpu import CpuTarget
from pykern.targets.nvptx import NvptxTarget


@pk.kernel
def scale(n: usize, x: ConstPtr[T], y: Ptr[T], *, T, k):
    """A grid-stride loop with shared memory, so the copied entry has labels, a loop and a
    ``.shared`` reference to carry over."""
    buf = pk.shared.array(64, T)
    i = pk.global_id()
    t = pk.thread_idx.x
    if i < n:
        buf[t] = x[i] * T(k)
    pk.syncthreads()
    if i < n:
        y[i] = buf[t]


MOD = pk.Module("test_aliases").add(scale.instance("scale3_f32", T=f32, k=3), scale.instance("scale3_again", T=f32, k=3),
                                    scale.instance("scale2_f32", T=f32, k=2), scale.instance("scale3_i32", T=i32, k=3),
                                    scale.instance("scale3_third", T=f32, k=3))
ALIASES = {"scale3_again": "scale3_f32", "scale3_third": "scale3_f32"}


def _no_labels(text: str, name: str) -> str:
    """An entry's text with its name, its shared arrays' names, LLVM's function-numbered labels and
    the comments before it made neutral."""
    text = re.sub(rf"(\.globl\t|\.entry ){re.escape(name)}\b|\b{re.escape(name)}(?=_param_)",
                  lambda m: (m.group(1) or "") + "K", text)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    text = re.sub(r"\w+_\$_", "S_$_", text)  # a demoted shared array keeps its own kernel's name
    return re.sub(r"\$L__BB\d+_", "$L__BBn_", text)


def test_aliases_found_only_on_gpu_targets():
    assert kernel_aliases(MOD.kernels, NvptxTarget("sm_90")) == ALIASES
    assert kernel_aliases(MOD.kernels, AmdgpuTarget("gfx90a")) == ALIASES
    assert kernel_aliases(MOD.kernels, CpuTarget()) == {}


def test_alias_lowered_once():
    module, sigs = lower_module(MOD.kernels, NvptxTarget("sm_90"), "test_aliases")
    assert [s.name for s in sigs] == MOD.names()
    assert {f.name for f in module.functions if not f.is_declaration} == {"scale3_f32", "scale2_f32", "scale3_i32"}
    by = {s.name: s for s in sigs}
    assert by["scale3_again"].params == by["scale3_f32"].params


def test_ptx_alias_entry_is_the_primarys():
    target = NvptxTarget("sm_90")
    ptx, sigs = compile_kernels(MOD.kernels, target, "test_aliases")
    ptx = ptx.decode()
    for alias, primary in ALIASES.items():
        a, p = _entry_block(ptx, alias), _entry_block(ptx, primary)
        assert f"{alias}_param_0" in a and f"{primary}_param" not in a and f".entry {primary}(" not in a
        assert _no_labels(a, alias) == _no_labels(p, primary)
    # the alias entry of a separately compiled module (no alias there) is the same code
    alone = pk.Module("alone").add(scale.instance("scale3_again", T=f32, k=3))
    own = compile_kernels(alone.kernels, target, "alone")[0].decode()
    assert _no_labels(_entry_block(ptx, "scale3_again"), "scale3_again") == \
        _no_labels(_entry_block(own, "scale3_again"), "scale3_again")


def test_ptx_alias_copies_past_a_column_0_brace_of_inline_asm():
    """NVPTX closes a cache-hinted load's inline asm block (``pk.load(..., cache=...)``) with a ``}`` at
    column 0: the entry's end is its matching brace, not the first such line (reduce's
    softmax_rows_f64 alias was cut there and ptxas rejected the module)."""
    ptx = ("//\n.version 8.0\n\n\t// .globl\tk\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
           "\tld.param.b64 \t%rd1, [k_param_0];\n\t// begin inline asm\n\t{\n\t.reg .b64 pol;\n"
           "\tld.global.b64 %rd2, [%rd1];\n}\n\t// end inline asm\n\tret;\n\n}\n")
    out = ptx_with_aliases(ptx, {"k2": "k"})
    copy = out[len(ptx):]
    assert copy.count("{") == copy.count("}") == 2 and copy.rstrip().endswith("ret;\n\n}")
    assert "k2_param_0" in copy and "k_param" not in copy
    assert _entry_block(out, "k2") == copy.lstrip("\n")


def test_ptx_without_aliases_unchanged():
    assert ptx_with_aliases("text", {}) == "text"


@pytest.mark.needs_lld
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_hsaco_alias_is_a_full_kernel(arch):
    """``alias`` and ``alias.kd`` are global symbols at the primary's code and descriptor, with
    their types; the metadata note has an entry for the alias, the primary's with its own names."""
    co = CodeObject(compile_kernels(MOD.kernels, AmdgpuTarget(arch), "test_aliases")[0])
    assert set(co.kernels) == set(MOD.names())
    for alias, primary in ALIASES.items():
        for suffix in ("", ".kd"):
            a, p = co.symbols[alias + suffix], co.symbols[primary + suffix]
            assert (a.value, a.size, a.type, a.bind, a.section) == (p.value, p.size, p.type, p.bind, p.section)
        meta = {k[".name"]: k for k in co.metadata["amdhsa.kernels"]}
        a, p = dict(meta[alias]), dict(meta[primary])
        assert (a.pop(".name"), a.pop(".symbol")) == (alias, alias + ".kd")
        p.pop(".name"), p.pop(".symbol")
        assert a == p
        assert co.kernels[alias].descriptor == co.kernels[primary].descriptor


def test_object_without_aliases_unchanged():
    assert object_with_aliases(b"\x7fELF...", {}) == b"\x7fELF..."


@pytest.mark.parametrize("name,k", [("scale3_f32", 3), ("scale3_again", 3), ("scale3_third", 3), ("scale2_f32", 2)])
def test_every_name_launches(device, name, k):
    """Both names of one compiled kernel load and compute (the CPU target compiles each name)."""
    dev = device
    x = np.arange(256, dtype=np.float32) - 100
    y = dev.empty(256, f32)
    dev.get_or_load_func(name, MOD)[4, 64](256, dev.to_device(x), y)
    np.testing.assert_array_equal(y.to_host(), x * k)


def _stdlib_like_module(name):
    return pk.Module(name).add(scale.instance(f"{name}_k", T=f32, k=1))


def test_loop_strength_reduction_choice():
    import stdlib_kernels

    cuda, cpu = NvptxTarget("sm_90"), CpuTarget()
    unary = stdlib_kernels.module("unary").kernels[:2]
    assert lower_module(unary, cuda, "unary")[0].loop_strength_reduction is False
    assert lower_module(unary, cpu, "unary")[0].loop_strength_reduction is True
    # a kernel compiled alone (the runtime's first use) gets its module's choice
    assert lower_module(unary[:1], cuda, f"unary.{unary[0].name}")[0].loop_strength_reduction is False
    quantized = stdlib_kernels.module("quantized").kernels[:1]
    assert lower_module(quantized, cuda, "quantized")[0].loop_strength_reduction is True
    # a user's module that happens to be called "unary" keeps LLVM's default (kernels choose, not names)
    assert lower_module(_stdlib_like_module("unary").kernels, cuda, "unary")[0].loop_strength_reduction is True


def test_codegen_options_put_lsr_back():
    """With LSR off for one emission, the next module's code is what LLVM's default gives."""
    target = NvptxTarget("sm_90")
    kernels = _stdlib_like_module("user").kernels
    before = target.assembly(lower_module(kernels, target, "user")[0])
    module, _ = lower_module(kernels, target, "user")
    module.loop_strength_reduction = False
    target.assembly(module)
    assert target.assembly(lower_module(kernels, target, "user")[0]) == before
