"""Matrix multiply-accumulate on a wave's 16x16 tiles: ``pk.mma`` (NVIDIA tensor cores, AMD MFMA and
WMMA, a portable lowering elsewhere).

A wave (all its lanes together, like CUDA's ``nvcuda::wmma``) loads 16x16 tiles into *fragments*,
multiplies them and stores the result::

    a = pk.mma.load_a(pa, lda)                  # A: 16 x K, row-major: f16/bf16 (K = 16) or i8 (K = 32)
    b = pk.mma.load_b(pb, ldb)                  # B: K x 16, row-major (layout="col": column-major)
    c = pk.mma.zeros(pk.f32)                    # (pk.i32 for i8) or pk.mma.load_c(pc, ldc)
    c = pk.mma.mma(a, b, c)                     # c += a @ b
    pk.mma.store(pc, ldc, c)

and combines accumulators element by element, for block-scaled integer products (a quantized
matrix multiply: each 32-deep i8 step is one block with its own scales)::

    f = pk.mma.scale_add(f, p, rs, cs)          # f[r][c] = fma(rs[r] * cs[c], f32(p[r][c]), f[r][c])
    f = pk.mma.outer_add(f, rv, cv)             # f[r][c] = fma(rv[r], cv[c], f[r][c]) (mins, sums)

with ``f`` an f32 accumulator, ``p`` an i32 one and ``rs``/``cs``/``rv``/``cv`` pointers (or shared
arrays) to 16 f32 or f16 values, one per row / column of the tile.

Fragments are opaque values (``ir.types.FragmentType``): how a lane holds its share differs per
instruction and wave width (``targets/matrix.py``), so a kernel only hands them to these
operations and one source runs on every target. Every lane of a full wave must take part in each
call (no divergent branch around it, a block size that is a multiple of ``pk.wave_size``).
"""
from __future__ import annotations

import ast

from llvmlite import ir

from ...ir import nodes as N
from ...ir import types as T
from ..values import CT
from .core import Namespace, lowering, typing_rule

mma = Namespace("mma", ["load_a", "load_b", "load_c", "zeros", "mma", "store", "scale_add", "outer_add"])

#: the inputs' element types -> the accumulator's
_INPUTS = {"f16": T.f32, "bf16": T.f32, "i8": T.i32}
_ACCUMULATORS = (T.f32, T.i32)
_ROLE_NAMES = {"a": "an A fragment (pk.mma.load_a)", "b": "a B fragment (pk.mma.load_b)",
               "acc": "an accumulator (pk.mma.zeros, load_c or mma)"}


def _describe(v) -> str:
    if isinstance(v, CT):
        return "a compile-time value"
    if isinstance(v.ty, T.FragmentType):
        return _ROLE_NAMES[v.ty.role] + f" of {v.ty.elem!r}"
    return f"a {v.ty!r} value"


def _pointer(tp, node, arg, fn: str, elems) -> N.Expr:
    p = tp.visit(arg)
    p = p if isinstance(p, CT) else tp.array_as_ptr(p)
    if isinstance(p, CT) or not isinstance(p.ty, T.PtrType) or p.ty.elem not in elems:
        names = ", ".join(repr(e) for e in elems)
        got = "a compile-time value" if isinstance(p, CT) else repr(p.ty)
        raise tp.error(arg, f"pk.mma.{fn}() takes a pointer (or shared array) of {names}, got {got}")
    return p


def _stride(tp, arg) -> N.Expr:
    return tp.cast_to(tp.index_expr(tp.visit(arg), arg), T.i32)


def _arity(tp, node, n: int, fn: str, usage: str) -> None:
    if len(node.args) != n:
        raise tp.error(node, f"pk.mma.{fn}() takes {n} argument{'s' if n != 1 else ''} ({usage}), "
                             f"got {len(node.args)}")


# ---- typing ---------------------------------------------------------------------------------------
@typing_rule(mma.load_a)
def _type_load_a(tp, node, fn):
    _arity(tp, node, 2, "load_a", "pointer to the tile's first element, row stride in elements")
    p = _pointer(tp, node, node.args[0], "load_a", [T.dtype_by_name(n) for n in _INPUTS])
    return tp.intrinsic(fn, T.FragmentType("a", p.ty.elem), [p, _stride(tp, node.args[1])], node, role="a")


@typing_rule(mma.load_b, keywords=("layout",))
def _type_load_b(tp, node, fn):
    _arity(tp, node, 2, "load_b", "pointer to the tile's first element, stride in elements")
    layout = "row"
    for k in node.keywords:
        # a literal string (kernels have no string values), or a compile-time parameter's
        layout = k.value.value if isinstance(k.value, ast.Constant) else tp.ct_eval(k.value, "layout=")
        if layout not in ("row", "col"):
            raise tp.error(k.value, f"layout= is 'row' (B[k][n] at k * ld + n) or 'col' (at n * ld + k), "
                                    f"got {layout!r}")
    p = _pointer(tp, node, node.args[0], "load_b", [T.dtype_by_name(n) for n in _INPUTS])
    return tp.intrinsic(fn, T.FragmentType("b", p.ty.elem, layout), [p, _stride(tp, node.args[1])], node,
                        role="b")


@typing_rule(mma.load_c)
def _type_load_c(tp, node, fn):
    _arity(tp, node, 2, "load_c", "pointer to the tile's first element, row stride in elements")
    p = _pointer(tp, node, node.args[0], "load_c", _ACCUMULATORS)
    return tp.intrinsic(fn, T.FragmentType("acc", p.ty.elem), [p, _stride(tp, node.args[1])], node, role="acc")


@typing_rule(mma.zeros)
def _type_zeros(tp, node, fn):
    _arity(tp, node, 1, "zeros", "the accumulator's type, pk.f32 or pk.i32")
    ty = tp.ct_eval(node.args[0], "pk.mma.zeros()'s type")
    if ty not in _ACCUMULATORS:
        raise tp.error(node.args[0], f"pk.mma.zeros() takes the accumulator's type "
                                     f"({', '.join(repr(t) for t in _ACCUMULATORS)}), got {ty!r}")
    return tp.intrinsic(fn, T.FragmentType("acc", ty), [], node)


def _fragment(tp, arg, role: str, what: str) -> N.Expr:
    v = tp.visit(arg)
    if isinstance(v, CT) or not isinstance(v.ty, T.FragmentType) or v.ty.role != role:
        raise tp.error(arg, f"pk.mma.mma()'s {what} is {_ROLE_NAMES[role]}, got {_describe(v)}")
    return v


@typing_rule(mma.mma)
def _type_mma(tp, node, fn):
    _arity(tp, node, 3, "mma", "a, b, c: returns c + a @ b")
    a = _fragment(tp, node.args[0], "a", "first argument")
    b = _fragment(tp, node.args[1], "b", "second argument")
    c = _fragment(tp, node.args[2], "acc", "third argument")
    if a.ty.elem is not b.ty.elem:
        raise tp.error(node, f"pk.mma.mma() multiplies fragments of one type, got A of {a.ty.elem!r} and "
                             f"B of {b.ty.elem!r}")
    if _INPUTS[a.ty.elem.name] is not c.ty.elem:
        raise tp.error(node.args[2], f"pk.mma.mma() on {a.ty.elem!r} accumulates in "
                                     f"{_INPUTS[a.ty.elem.name]!r}, got an accumulator of {c.ty.elem!r}")
    tp.uses_sync = True  # the portable lowering exchanges values across the wave
    return tp.intrinsic(fn, c.ty, [a, b, c], node, b_layout=b.ty.layout)


@typing_rule(mma.store)
def _type_store(tp, node, fn):
    _arity(tp, node, 3, "store", "pointer to the tile's first element, row stride in elements, accumulator")
    c = tp.visit(node.args[2])
    if isinstance(c, CT) or not isinstance(c.ty, T.FragmentType) or c.ty.role != "acc":
        raise tp.error(node.args[2], f"pk.mma.store() stores {_ROLE_NAMES['acc']}, got {_describe(c)}")
    p = _pointer(tp, node, node.args[0], "store", [c.ty.elem])
    if p.ty.const:
        raise tp.error(node.args[0], "cannot write through a ConstPtr: the data is read-only")
    return tp.intrinsic(fn, T.void, [p, _stride(tp, node.args[1]), c], node)


def _scale_vector(tp, arg, fn: str) -> N.Expr:
    return _pointer(tp, None, arg, fn, [T.f32, T.f16])


def _f32_acc(tp, arg, fn: str) -> N.Expr:
    v = tp.visit(arg)
    if isinstance(v, CT) or not isinstance(v.ty, T.FragmentType) or v.ty.role != "acc" or v.ty.elem is not T.f32:
        raise tp.error(arg, f"pk.mma.{fn}()'s first argument is an f32 accumulator, got {_describe(v)}")
    return v


@typing_rule(mma.scale_add)
def _type_scale_add(tp, node, fn):
    _arity(tp, node, 4, "scale_add", "f32 accumulator, i32 accumulator, 16 row scales, 16 column scales")
    acc = _f32_acc(tp, node.args[0], "scale_add")
    prod = tp.visit(node.args[1])
    if isinstance(prod, CT) or not isinstance(prod.ty, T.FragmentType) or prod.ty.role != "acc" \
            or prod.ty.elem is not T.i32:
        raise tp.error(node.args[1], f"pk.mma.scale_add()'s second argument is an i32 accumulator "
                                     f"(pk.mma.mma on i8), got {_describe(prod)}")
    rows, cols = (_scale_vector(tp, a, "scale_add") for a in node.args[2:])
    return tp.intrinsic(fn, acc.ty, [acc, prod, rows, cols], node)


@typing_rule(mma.outer_add)
def _type_outer_add(tp, node, fn):
    _arity(tp, node, 3, "outer_add", "f32 accumulator, 16 row values, 16 column values")
    acc = _f32_acc(tp, node.args[0], "outer_add")
    rows, cols = (_scale_vector(tp, a, "outer_add") for a in node.args[1:])
    return tp.intrinsic(fn, acc.ty, [acc, rows, cols], node)


# ---- lowering: the target's MatrixUnit (targets/matrix.py) ------------------------------------------
def _unit(lo, frag: T.FragmentType):
    return lo.target.fragment_unit(frag)


@lowering(mma.load_a, mma.load_b, mma.load_c)
def _lower_load(lo, e: N.Intrinsic):
    ptr, ld = lo.expr(e.args[0]), lo.expr(e.args[1])
    return _unit(lo, e.ty).load(lo.frame, e.ty.role, e.ty.layout, ptr, ld)


@lowering(mma.zeros)
def _lower_zeros(lo, e: N.Intrinsic):
    return _unit(lo, e.ty).zeros("acc")


@lowering(mma.mma)
def _lower_mma(lo, e: N.Intrinsic):
    a, b, c = (lo.expr(x) for x in e.args)
    return _unit(lo, e.args[0].ty).mma(lo.frame, a, b, c, e.attrs["b_layout"])


@lowering(mma.store)
def _lower_store(lo, e: N.Intrinsic):
    ptr, ld, c = (lo.expr(x) for x in e.args)
    _unit(lo, e.args[2].ty).store(lo.frame, ptr, ld, c)


def _vector(lo, e: N.Expr):
    """A scale vector's pointer and LLVM element type."""
    return lo.expr(e), ir.HalfType() if e.ty.elem is T.f16 else ir.FloatType()


@lowering(mma.scale_add)
def _lower_scale_add(lo, e: N.Intrinsic):
    acc, prod = lo.expr(e.args[0]), lo.expr(e.args[1])
    unit = _unit(lo, e.args[0].ty)
    if unit.layouts["acc"] != _unit(lo, e.args[1].ty).layouts["acc"]:  # every unit today (matrix.py)
        raise AssertionError(f"{lo.target!r}: the f32 and i32 accumulators' layouts differ")
    return unit.scale_add(lo.frame, acc, prod, _vector(lo, e.args[2]), _vector(lo, e.args[3]))


@lowering(mma.outer_add)
def _lower_outer_add(lo, e: N.Intrinsic):
    return _unit(lo, e.ty).outer_add(lo.frame, lo.expr(e.args[0]), _vector(lo, e.args[1]), _vector(lo, e.args[2]))
