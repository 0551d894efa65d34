"""Arithmetic built-ins: the float functions LLVM has intrinsics for (``pk.sqrt``, ``pk.fma`` ...), the
fast approximations, ``pk.minimum``/``pk.maximum`` and Python's ``min``/``max``/``abs``,
``pk.select``, and the packed-byte dot products (``pk.dot4_i8``, ``pk.dot4_u8i8``).

(The math library written in the language, ``pk.math.exp`` and the rest, is ``pykern/math.py``.)
"""
from __future__ import annotations

from llvmlite import ir

from ...ir import nodes as N
from ...ir import types as T
from ..values import CT
from .core import Builtin, lowering, typing_rule

sqrt, fma, fabs, floor, ceil, trunc, rint = (Builtin(n) for n in ("sqrt", "fma", "fabs", "floor", "ceil", "trunc",
                                                                  "rint"))
copysign, fmin, fmax, minimum, maximum = (Builtin(n) for n in ("copysign", "fmin", "fmax", "minimum", "maximum"))
isnan, isinf, fast_exp2, fast_rcp, select = (Builtin(n) for n in ("isnan", "isinf", "fast_exp2", "fast_rcp",
                                                                  "select"))
dot4_i8, dot4_u8i8 = Builtin("dot4_i8"), Builtin("dot4_u8i8")

_I32 = ir.IntType(32)
_F32 = ir.FloatType()


# ---- float functions ------------------------------------------------------------------------------
def float_args(tp, node, n: int, name: str):
    """The ``n`` arguments of a float function converted to their common float type (f32 if all
    are literals), and that type."""
    vals = tp.args_exact(node, node.args, n, name)
    typed = [v for v in vals if not isinstance(v, CT)]
    ty = typed[0].ty if typed else T.f32
    for v in typed[1:]:
        ty = tp.promote(N.Const(ty, 0), v, node, name)
    if not (isinstance(ty, T.DType) and ty.is_float):
        raise tp.error(node, f"{name}() needs float arguments, got {ty!r}")
    return [tp.cast_to(tp.materialize(v, node, ty), ty) for v in vals], ty


#: the float functions that are one LLVM intrinsic (``llvm.<name>.f32``): marker -> (name, arity)
_LLVM_FLOAT = {sqrt: ("sqrt", 1), floor: ("floor", 1), ceil: ("ceil", 1), trunc: ("trunc", 1), rint: ("rint", 1),
               fma: ("fma", 3), copysign: ("copysign", 2), fmin: ("minnum", 2), fmax: ("maxnum", 2)}


@typing_rule(*_LLVM_FLOAT)
def _type_float_fn(tp, node, fn):
    vals, ty = float_args(tp, node, _LLVM_FLOAT[fn][1], fn.name)
    return tp.intrinsic(fn, ty, vals, node)


@lowering(*_LLVM_FLOAT)
def _lower_float_fn(lo, e):
    name = _LLVM_FLOAT[e.builtin.marker][0]
    return lo.float_op(e, lambda args: lo.call_intrinsic(name, args))


@typing_rule(isnan, isinf)
def _type_float_class(tp, node, fn):
    vals, _ = float_args(tp, node, 1, fn.name)
    return tp.intrinsic(fn, T.bool_, vals, node)


@lowering(isnan)
def _lower_isnan(lo, e):
    v = lo.widen(lo.expr(e.args[0]), e.args[0].ty)
    return lo.b.fcmp_unordered("uno", v, v)


@lowering(isinf)
def _lower_isinf(lo, e):
    v = lo.widen(lo.expr(e.args[0]), e.args[0].ty)
    return lo.b.fcmp_ordered("==", lo.call_intrinsic("fabs", [v]), ir.Constant(v.type, float("inf")))


@typing_rule(fast_exp2, fast_rcp)
def _type_fast(tp, node, fn):
    vals, ty = float_args(tp, node, 1, fn.name)
    if ty is not T.f32:
        raise tp.error(node, f"{fn.name}() is for f32 (the hardware instruction), got {ty!r}")
    return tp.intrinsic(fn, ty, vals, node)


@lowering(fast_exp2)
def _lower_fast_exp2(lo, e):
    # llvm.exp2.f32 lowers on every target: ex2.approx.f32 (NVIDIA), v_exp_f32 with range
    # handling (AMDGPU), exp2f (host) -- the one transcendental intrinsic that never fails
    return lo.call_intrinsic("exp2", [lo.expr(e.args[0])])


@lowering(fast_rcp)
def _lower_fast_rcp(lo, e):
    # an approximate-functions fdiv: rcp.approx.f32 (NVIDIA), v_rcp_f32 (AMDGPU), an exact
    # division on the host; no branch to a slow path, unlike an IEEE division on GPUs
    return lo.b.fdiv(ir.Constant(_F32, 1.0), lo.expr(e.args[0]), flags=("afn",))


# ---- abs, min, max (pk's and Python's) ------------------------------------------------------------
@typing_rule(fabs, abs)
def _type_abs(tp, node, fn):
    name = "abs" if fn is abs else "fabs"
    (v,) = tp.args_exact(node, node.args, 1, name)
    if isinstance(v, CT):
        return CT(abs(v.value))
    if not isinstance(v.ty, T.DType) or v.ty.is_bool:
        raise tp.error(node, f"{name}() needs a number, got {v.ty!r}")
    if v.ty.is_int and not v.ty.is_signed:
        return v
    return tp.intrinsic(fabs, v.ty, [v], node)


@lowering(fabs)
def _lower_abs(lo, e):
    ty = e.ty
    if ty.is_int:
        v = lo.expr(e.args[0])
        neg = lo.b.icmp_signed("<", v, ir.Constant(v.type, 0))
        return lo.b.select(neg, lo.b.sub(ir.Constant(v.type, 0), v), v)
    if ty in (T.bf16, T.f8e4m3):  # clear the sign bit: exact, NaN-preserving
        return lo.b.and_(lo.expr(e.args[0]), ir.Constant(lo.ltype(ty), (1 << (ty.bits - 1)) - 1))
    return lo.float_op(e, lambda args: lo.call_intrinsic("fabs", args))


#: the markers of min and max, pk's and Python's -> (the IR's built-in, the name errors use, fold)
_MINMAX = {minimum: (minimum, "min", min), min: (minimum, "min", min),
           maximum: (maximum, "max", max), max: (maximum, "max", max)}


@typing_rule(*_MINMAX)
def _type_minmax(tp, node, fn):
    op, name, fold = _MINMAX[fn]
    if len(node.args) != 2:
        raise tp.error(node, f"{name}() takes 2 arguments in kernels")
    a, b = tp.visit(node.args[0]), tp.visit(node.args[1])
    if isinstance(a, CT) and isinstance(b, CT):
        return CT(fold(a.value, b.value))
    a, b, ty = tp.unify(a, b, node, name + "()")
    return tp.intrinsic(op, ty, [a, b], node)


#: the lowering's (and LLVM's) name of each operation
_MINMAX_OPS = {minimum: "minimum", maximum: "maximum"}


@lowering(minimum, maximum)
def _lower_minmax(lo, e):
    op = _MINMAX_OPS[e.builtin.marker]
    if e.ty.is_float:
        return lo.float_op(e, lambda args: lo.call_intrinsic(op, args))
    return lo.arith(op, lo.expr(e.args[0]), lo.expr(e.args[1]), e.ty)


# ---- select ---------------------------------------------------------------------------------------
@typing_rule(select)
def _type_select(tp, node, _):
    """``pk.select(c, a, b)``: ``a if c else b`` with both evaluated, no branch (straight-line code
    the GPU runs without divergence and the tiles of a grid-stride loop can interleave)."""
    c, a, b = tp.args_exact(node, node.args, 3, "select")
    if isinstance(c, CT):
        return a if c.value else b
    a, b, ty = tp.unify(a, b, node, "pk.select()")
    return tp.intrinsic(select, ty, [tp.truth(c, node.args[0]), a, b], node)


@lowering(select)
def _lower_select(lo, e):
    c, a, b = (lo.expr(x) for x in e.args)
    return lo.b.select(c, a, b)


# ---- packed bytes ---------------------------------------------------------------------------------
@typing_rule(dot4_i8, dot4_u8i8)
def _type_dot4(tp, node, fn):
    """``pk.dot4_i8(a, b, acc)`` / ``pk.dot4_u8i8``: the four byte products of two 32-bit words
    added to ``acc`` (i32, wrapping), bytes of ``b`` signed, of ``a`` signed or unsigned."""
    name = fn.name
    vals = tp.args_exact(node, node.args, 3, name)
    words = []
    for v, an, what in zip(vals[:2], node.args, ("a", "b")):
        v = tp.materialize(v, an, T.i32)
        if not (isinstance(v.ty, T.DType) and v.ty.is_int and v.ty.bits == 32):
            raise tp.error(an, f"{name}()'s {what} is four packed bytes in an i32 or u32, got {v.ty!r}")
        words.append(v if v.ty is T.i32 else N.Bitcast(T.i32, v, loc=tp.loc(an)))
    acc = tp.materialize(vals[2], node.args[2], T.i32)
    if acc.ty is not T.i32:
        raise tp.error(node.args[2], f"{name}()'s accumulator is an i32, got {acc.ty!r}")
    return tp.intrinsic(fn, T.i32, words + [acc], node)


def dot4_bytes(b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value, x_signed: bool) -> ir.Value:
    """``acc + sum(x.byte[k] * y.byte[k])`` in wrapping i32 arithmetic, bytes of ``y`` signed, of ``x``
    signed or not: ``pk.dot4_*`` where the target has no instruction (the products fit in 17 bits)."""
    total = acc
    for k in range(4):
        bx, by = (b.trunc(b.lshr(v, ir.Constant(_I32, 8 * k)), ir.IntType(8)) for v in (x, y))
        bx = (b.sext if x_signed else b.zext)(bx, _I32)
        total = b.add(total, b.mul(bx, b.sext(by, _I32)))
    return total


@lowering(dot4_i8, dot4_u8i8)
def _lower_dot4(lo, e):
    """The target's dot instruction where it has one (``Target.dot4``), else the four byte products
    in i32 arithmetic (the same wrapping sum)."""
    a, b, acc = (lo.expr(x) for x in e.args)
    signed = e.builtin.marker is dot4_i8
    fast = lo.target.dot4(lo.b, a, b, acc, signed)
    return fast if fast is not None else dot4_bytes(lo.b, a, b, acc, signed)
