"""``lower.render.module_text`` writes exactly ``str(module)``: the IR text is what LLVM compiles and
what the IR-level cache key hashes, so a faster renderer must not move a byte. Compared on stdlib
kernels of every module for each target kind (wave 64 and 32) and on hand-built instructions with
the flags, alignment and metadata the stdlib's kernels may not carry."""
from __future__ import annotations

import pytest
from llvmlite import ir

from pykern.compiler import collector_paused, lower_module, rendered
from pykern.lower.render import module_text
from pykern.targets import registry


def _sample(module):
    """A few kernels of every kind of the module: the first ones and every ninth."""
    kernels = module.kernels
    return [k for i, k in enumerate(kernels) if i < 2 or i % 9 == 0]


@pytest.mark.parametrize("kind,arch", [("cuda", "sm_90"), ("amdgpu", "gfx90a"), ("amdgpu", "gfx1100"), ("cpu", None)])
def test_stdlib_modules_render_as_llvmlite_does(kind, arch):
    import stdlib_kernels

    target = registry.make_target(kind, arch)
    for module in stdlib_kernels.MODULES:
        with collector_paused():
            mod, _ = lower_module(_sample(module), target, module.name)
            fast = module_text(mod)
        assert fast == str(mod), (module.name, kind, arch)


def test_hand_built_instructions_render_as_llvmlite_does():
    mod = ir.Module("render")
    mod.triple = "nvptx64-nvidia-cuda"
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.PointerType(addrspace=1), ir.IntType(32), ir.FloatType()]), "f")
    p, n, x = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("a b")
    b = ir.IRBuilder(entry)
    slot = b.alloca(ir.FloatType(), name="slot")
    st = b.store(x, slot)
    st.align = 4
    md = mod.add_metadata([ir.Constant(ir.IntType(32), 1)])
    ld = b.load(slot, name="v")
    ld.align = 4
    ld.set_metadata("invariant.load", md)
    s = b.fadd(ld, x, name="s", flags=("fast",))
    q = b.add(n, n, name="q", flags=("nsw",))
    b.add(n, n).set_metadata("range", md)
    c = b.fcmp_ordered("<", s, x, name="c", flags=("nnan",))
    i = b.icmp_unsigned("<", q, n)
    w = b.zext(i, ir.IntType(64), name="w")
    g = b.gep(p, [w], inbounds=True, source_etype=ir.FloatType(), name="g")
    b.gep(p, [w, ir.Constant(ir.IntType(32), 0)], source_etype=ir.ArrayType(ir.FloatType(), 4))
    sel = b.select(c, s, x, name="sel", flags=("nnan",))
    b.store(sel, g)
    b.cbranch(i, loop, done)
    b.position_at_end(loop)
    phi = b.phi(ir.FloatType(), name="phi", flags=("fast",))
    phi.add_incoming(sel, entry)
    phi.add_incoming(phi, loop)
    b.call(ir.Function(mod, ir.FunctionType(ir.VoidType(), []), "g"), [])
    br = b.branch(done)
    br.set_metadata("llvm.loop", md)
    b.position_at_end(done)
    b.ret(sel)
    assert module_text(mod) == str(mod)


def test_the_compile_path_uses_it():
    """``compiler.rendered`` (the text the IR key hashes and ``optimize`` parses) is the same text."""
    import stdlib_kernels

    target = registry.make_target("cuda", "sm_90")
    kernels = stdlib_kernels.module("fill").kernels[:3]
    expect = str(lower_module(kernels, target, "fill")[0])
    mod, _ = lower_module(kernels, target, "fill")
    assert rendered(mod) == expect and str(mod) == expect
