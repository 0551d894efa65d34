"""Typing expressions: literals meet typed values, operators, comparisons, conditions, subscripts.

All implicit conversions are decided here, in ``promote`` (the common type of two operands) and
``coerce`` (a value where a type is expected); everything else asks for an explicit cast.
Compile-time operands fold (``2 * 3`` is ``CT(6)``) and adopt the type of the typed operand they
meet (``x * 2``).
"""
from __future__ import annotations

import ast
import math
from typing import Any

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T
from .builtins import OPERATOR_FUNCS, TargetConstant
from .values import CT, TupleVal, describe, is_tuple, type_name

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl",
           ast.RShift: "shr", ast.Pow: "pow"}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_FLOAT_RANK = {T.f8e4m3: 0, T.f16: 1, T.bf16: 1, T.f32: 2, T.f64: 3}


class ExprTyper:
    """The expression half of ``frontend.Typer`` (a mixin: it uses the typer's ``visit``, ``error``
    and state)."""

    # ------------------------------------------------------------------ conversions
    def materialize(self, v, node, ty: T.Type | None = None) -> N.Expr:
        """Turn a compile-time value into a typed constant (of ``ty`` or its default type)."""
        if not isinstance(v, CT):
            return v
        val = v.value
        if isinstance(val, TargetConstant):
            val = val.value(self.target)
        if ty is None:
            if isinstance(val, bool):
                ty = T.bool_
            elif isinstance(val, int):
                ty = T.i32 if -2**31 <= val < 2**31 else T.i64
            elif isinstance(val, float):
                ty = T.f32
            else:
                raise self.error(node, f"{describe(val)} is not a value a kernel can compute with")
        return self.const(val, ty, node)

    def const(self, val: Any, ty: T.Type, node) -> N.Const:
        if not isinstance(ty, T.DType):
            if val is None and isinstance(ty, T.PtrType):
                return N.Const(ty, None, loc=self.loc(node))
            raise self.error(node, f"a constant cannot have type {ty!r}")
        if isinstance(val, bool) and not ty.is_bool:
            raise self.error(node, f"a bool constant cannot be used as {ty!r}")
        if ty.is_bool:
            if not isinstance(val, bool):
                raise self.error(node, f"expected a bool, got {val!r}")
        elif ty.is_int:
            if not isinstance(val, int):
                raise self.error(node, f"a {type(val).__name__} constant cannot be used as {ty!r}; cast explicitly")
            lo, hi = ty.int_range
            if not lo <= val <= hi:
                raise self.error(node, f"constant {val} does not fit in {ty!r} (range {lo}..{hi})")
        elif ty.is_float:
            if not isinstance(val, (int, float)):
                raise self.error(node, f"expected a number for {ty!r}, got {val!r}")
            val = float(val)
        return N.Const(ty, val, loc=self.loc(node))

    def promote(self, a: N.Expr, b: N.Expr, node, what: str) -> T.DType:
        """The common type of two typed operands. Rules, in order:
        1. equal types combine; 2. two floats give the wider (f16 with bf16 gives f32);
        3. two ints of the same signedness give the wider; 4. an unsigned int with a wider signed
        int gives the signed one; 5. anything else (int with float, i32 with u32, bool with
        numbers, pointers) is an error that asks for an explicit cast."""
        ta, tb = a.ty, b.ty
        if ta == tb and isinstance(ta, T.DType):
            return ta
        if isinstance(ta, T.PtrType) and isinstance(tb, T.PtrType) and (ta.elem, ta.space) == (tb.elem, tb.space):
            return T.PtrType(ta.elem, ta.space, ta.const or tb.const)  # Ptr meets ConstPtr: read-only
        if isinstance(ta, T.DType) and isinstance(tb, T.DType):
            if ta.is_float and tb.is_float:
                ra, rb = _FLOAT_RANK[ta], _FLOAT_RANK[tb]
                return T.f32 if ra == rb else (ta if ra > rb else tb)
            if ta.is_int and tb.is_int:
                if ta.is_signed == tb.is_signed:
                    return ta if ta.bits >= tb.bits else tb
                s, u = (ta, tb) if ta.is_signed else (tb, ta)
                if s.bits > u.bits:
                    return s
        raise self.error(node, f"{what}: operand types {ta!r} and {tb!r} differ; convert one explicitly, "
                               f"e.g. pk.{type_name(tb)}(...)")

    def coerce(self, e, ty: T.Type, node) -> N.Expr:
        """``e`` converted to ``ty`` where that is implicit (a literal, or a lossless widening)."""
        if isinstance(e, CT):
            return self.const(e.value, ty, node)
        if e.ty == ty:
            return e
        if isinstance(e.ty, T.PtrType) and isinstance(ty, T.PtrType) and ty.const and \
                (e.ty.elem, e.ty.space) == (ty.elem, ty.space):
            return N.Cast(ty, e, loc=self.loc(node))
        if isinstance(e.ty, T.DType) and isinstance(ty, T.DType):
            try:
                if self.promote(e, N.Const(ty, 0), node, "") == ty:
                    return N.Cast(ty, e, loc=self.loc(node))
            except CompileError:
                pass
        raise self.error(node, f"expected {ty!r}, got {e.ty!r}")

    def unify(self, a, b, node, what: str):
        if isinstance(a, CT) and not isinstance(b, CT):
            a = self.const(a.value, b.ty, node) if isinstance(b.ty, T.DType) else self.materialize(a, node)
        elif isinstance(b, CT) and not isinstance(a, CT):
            b = self.const(b.value, a.ty, node) if isinstance(a.ty, T.DType) else self.materialize(b, node)
        elif isinstance(a, CT):
            a, b = self.materialize(a, node), self.materialize(b, node)
            if a.ty != b.ty:
                ty = self.promote(a, b, node, what)
                a, b = self.materialize(CT(a.value), node, ty), self.materialize(CT(b.value), node, ty)
        ty = self.promote(a, b, node, what)
        return self.cast_to(a, ty), self.cast_to(b, ty), ty

    def cast_to(self, e: N.Expr, ty: T.Type) -> N.Expr:
        return e if e.ty == ty else N.Cast(ty, e, loc=e.loc)

    def condition(self, node: ast.AST) -> N.Expr | CT:
        c = self.visit(node)
        if isinstance(c, CT):
            return CT(bool(c.value)) if isinstance(c.value, (bool, int, float, type(None), T.DType)) else c
        if _int_const(c):  # a compile-time local (``if per > 4``): the branch is chosen here
            return CT(bool(c.value))
        return self.truth(c, node)

    def truth(self, c: N.Expr, node) -> N.Expr:
        if c.ty == T.bool_:
            return c
        if isinstance(c.ty, T.DType) and c.ty.is_int:
            return N.Compare(T.bool_, "ne", c, N.Const(c.ty, 0), loc=self.loc(node))
        if isinstance(c.ty, T.PtrType):
            raise self.error(node, "a pointer is not a condition: write 'p is not None'")
        raise self.error(node, f"a {c.ty!r} value is not a condition: compare it explicitly")

    # ------------------------------------------------------------------ expressions
    def visit_BinOp(self, node: ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"operator {type(node.op).__name__} is not supported")
        a, b = self.visit(node.left), self.visit(node.right)
        if isinstance(a, CT) and isinstance(b, CT):
            return CT(self.fold_binop(op, a.value, b.value, node))
        if op in ("add", "sub") and not isinstance(a, CT) and isinstance(a.ty, (T.PtrType, T.ArrayType)):
            idx = self.index_expr(b, node.right)
            if op == "sub":
                idx = N.UnaryOp(idx.ty, "neg", idx, loc=self.loc(node)) if idx.ty.is_signed else \
                    self.error(node, "subtract a signed offset from a pointer (cast the index to i64)")
                if isinstance(idx, CompileError):
                    raise idx
            ptr = self.array_as_ptr(a)
            return N.PtrAdd(ptr.ty, ptr, idx, loc=self.loc(node))
        if op == "pow":
            return self.power(a, b, node)
        if op in ("shl", "shr"):
            a = self.materialize(a, node) if isinstance(a, CT) else a
            b = self.coerce(b, a.ty, node) if isinstance(b, CT) else b
            if not (isinstance(a.ty, T.DType) and a.ty.is_int and isinstance(b.ty, T.DType) and b.ty.is_int):
                raise self.error(node, "shifts need integer operands")
            return N.BinOp(a.ty, op, a, self.cast_to(b, a.ty), loc=self.loc(node))
        a, b, ty = self.unify(a, b, node, f"'{_opsym(node.op)}'")
        if ty.is_bool and op not in ("and", "or", "xor"):
            raise self.error(node, "arithmetic on bool is not supported; convert with pk.i32(...)")
        if ty.is_float and op in ("and", "or", "xor"):
            raise self.error(node, f"bitwise operators need integers, got {ty!r}")
        if ty.is_int and op == "div":
            raise self.error(node, "'/' is float division; use '//' for integers (it truncates toward zero)")
        if ty.is_float and op == "mod":  # exact C fmod, the same bits on every target (pykern.math's)
            return self.call_typed(OPERATOR_FUNCS["float_mod"], [a, b], node)
        return N.BinOp(ty, op, a, b, loc=self.loc(node))

    def power(self, a, b, node):
        if not (isinstance(b, CT) and isinstance(b.value, int) and 0 <= b.value <= 16):
            raise self.error(node, "'**' needs a small constant non-negative integer exponent; "
                                   "use pk.math.pow for others")
        a = self.materialize(a, node)
        if not isinstance(a.ty, T.DType) or a.ty.is_bool:
            raise self.error(node, f"cannot raise {a.ty!r} to a power")
        if b.value == 0:
            return self.const(1, a.ty, node)
        out = a
        for _ in range(b.value - 1):
            out = N.BinOp(a.ty, "mul", out, a, loc=self.loc(node))
        return out

    def fold_binop(self, op: str, x, y, node):
        try:
            if op == "floordiv" and isinstance(x, int) and isinstance(y, int):
                q = abs(x) // abs(y)
                return q if (x >= 0) == (y >= 0) else -q
            if op == "mod" and isinstance(x, int) and isinstance(y, int):
                return x - y * self.fold_binop("floordiv", x, y, node)
            fn = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "div": lambda: x / y,
                  "floordiv": lambda: math.floor(x / y), "mod": lambda: math.fmod(x, y), "and": lambda: x & y,
                  "or": lambda: x | y, "xor": lambda: x ^ y, "shl": lambda: x << y, "shr": lambda: x >> y,
                  "pow": lambda: x ** y}[op]
            return fn()
        except ZeroDivisionError:
            raise self.error(node, "division by zero in a constant expression") from None
        except TypeError:
            raise self.error(node, f"cannot compute {describe(x)} {op} {describe(y)} at compile time") from None

    def visit_UnaryOp(self, node: ast.UnaryOp):
        v = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            if isinstance(v, CT):
                return CT(not v.value)
            return N.UnaryOp(T.bool_, "not", self.truth(v, node.operand), loc=self.loc(node))
        if isinstance(v, CT):
            if isinstance(node.op, ast.USub):
                return CT(-v.value)
            if isinstance(node.op, ast.Invert):
                return CT(~v.value)
            return v
        if not isinstance(v.ty, T.DType) or v.ty.is_bool:
            raise self.error(node, f"unary operator on a {v.ty!r} value")
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            if not v.ty.is_int:
                raise self.error(node, f"'~' needs an integer, got {v.ty!r}")
            return N.UnaryOp(v.ty, "invert", v, loc=self.loc(node))
        return N.UnaryOp(v.ty, "neg", v, loc=self.loc(node))

    def visit_BoolOp(self, node: ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        vals = [self.condition(v) for v in node.values]
        out = None
        for v, src in zip(vals, node.values):
            if isinstance(v, CT):  # fold: True and x -> x; False and x -> False
                short = (op == "and") != bool(v.value)
                if short:  # x and False -> False where x has no effect to keep (a call's stores, an atomic)
                    if out is None or _pure(out):
                        return CT(bool(v.value))
                    return N.Logical(T.bool_, op, out, self.const(bool(v.value), T.bool_, src), loc=self.loc(node))
                continue
            out = v if out is None else N.Logical(T.bool_, op, out, v, loc=self.loc(node))
        return out if out is not None else CT(op == "and")

    def visit_Compare(self, node: ast.Compare):
        terms = [self.visit(node.left)]
        parts = []
        for op, right in zip(node.ops, node.comparators):
            lhs, rhs = terms[-1], self.visit(right)
            if len(node.ops) > 1 and not isinstance(rhs, (CT, N.Var, N.Const)) and right is not node.comparators[-1]:
                rhs = self.spill(rhs, right)
            terms.append(rhs)
            parts.append(self.compare(op, lhs, rhs, node, right))
        out = parts[0]
        for p in parts[1:]:
            if isinstance(out, CT) and isinstance(p, CT):
                out = CT(out.value and p.value)
            else:
                out = N.Logical(T.bool_, "and", self.materialize(out, node), self.materialize(p, node), loc=self.loc(node))
        return out

    def spill(self, e: N.Expr, node) -> N.Var:
        """Evaluate ``e`` once into a hidden local (comparison chains)."""
        self._tmp += 1
        name = f"$t{self._tmp}"
        self.locals[name] = e.ty
        self.pending.append(N.Assign(name, e, loc=self.loc(node)))
        return N.Var(e.ty, name, loc=self.loc(node))

    def compare(self, op: ast.cmpop, a, b, node, right):
        if isinstance(op, (ast.Is, ast.IsNot)):
            neg = isinstance(op, ast.IsNot)
            if isinstance(a, CT) and isinstance(b, CT):
                return CT((a.value is b.value) != neg)
            ptr, other = (a, b) if not isinstance(a, CT) else (b, a)
            if isinstance(other, CT) and other.value is None and isinstance(ptr.ty, T.PtrType):
                return N.IsNull(T.bool_, ptr, neg, loc=self.loc(node))
            raise self.error(right, "'is' compares a pointer with None (or compile-time values)")
        if isinstance(op, (ast.In, ast.NotIn)):
            raise self.error(right, "'in' is not supported in kernels")
        name = _CMPOPS[type(op)]
        if isinstance(a, CT) and isinstance(b, CT):
            try:
                return CT({"eq": a.value == b.value, "ne": a.value != b.value}.get(name) if name in ("eq", "ne")
                          else {"lt": a.value < b.value, "le": a.value <= b.value, "gt": a.value > b.value,
                                "ge": a.value >= b.value}[name])
            except TypeError:
                raise self.error(node, f"cannot compare {describe(a.value)} with {describe(b.value)}") from None
        a, b, ty = self.unify(a, b, node, "comparison")
        if _int_const(a) and _int_const(b):  # compile-time locals of one integer type: exact
            return CT({"eq": a.value == b.value, "ne": a.value != b.value, "lt": a.value < b.value,
                       "le": a.value <= b.value, "gt": a.value > b.value, "ge": a.value >= b.value}[name])
        return N.Compare(T.bool_, name, a, b, loc=self.loc(node))

    def visit_IfExp(self, node: ast.IfExp):
        c = self.condition(node.test)
        if isinstance(c, CT):
            return self.visit(node.body if c.value else node.orelse)
        a, b = self.visit(node.body), self.visit(node.orelse)
        a, b, ty = self.unify(a, b, node, "conditional expression")
        return N.IfExp(ty, c, a, b, loc=self.loc(node))

    def index_expr(self, v, node) -> N.Expr:
        if isinstance(v, CT):
            if not isinstance(v.value, int) or isinstance(v.value, bool):
                raise self.error(node, f"an index must be an integer, got {describe(v.value)}")
            return self.const(v.value, T.i64, node)
        if not (isinstance(v.ty, T.DType) and v.ty.is_int):
            raise self.error(node, f"an index must be an integer, got {v.ty!r}")
        return v

    def array_as_ptr(self, ref: N.Expr) -> N.Expr:
        """An array as a pointer into its memory (shared or local); anything else as it is."""
        if isinstance(ref, CT) or not isinstance(ref.ty, T.ArrayType):
            return ref
        return N.Cast(T.PtrType(ref.ty.elem, ref.ty.space), ref, loc=ref.loc)

    def subscript(self, node: ast.Subscript):
        base = self.visit(node.value, tuples=True)
        if is_tuple(base):
            return self.tuple_item(base, node), None
        if isinstance(base, CT):
            idx = self.visit(node.slice)
            if not isinstance(idx, CT):
                raise self.error(node.slice, "only pointers and arrays can be indexed at run time")
            try:
                return CT(base.value[idx.value]), None
            except Exception as exc:
                raise self.error(node, f"cannot index {describe(base.value)}: {exc}") from None
        if isinstance(base.ty, T.ArrayType):
            shape = base.ty.shape or (None,)
            idx_nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if len(idx_nodes) != len(shape):
                raise self.error(node.slice, f"this {base.ty.space} array has {len(shape)} dimension(s)")
            flat = None
            for dim, idx_node in zip(shape, idx_nodes):
                i = self.visit(idx_node)
                if dim is not None and isinstance(i, CT) and isinstance(i.value, int) and not 0 <= i.value < dim:
                    raise self.error(idx_node, f"index {i.value} is out of bounds for a dimension of {dim}")
                i = self.index_expr(i, idx_node)
                i = self.cast_to(i, T.i64) if not i.ty == T.i64 else i
                if flat is None:
                    flat = i
                else:
                    flat = N.BinOp(T.i64, "add", N.BinOp(T.i64, "mul", flat, N.Const(T.i64, dim)), i)
            return base, flat
        if not isinstance(base.ty, T.PtrType):
            raise self.error(node.value, f"a {base.ty!r} value cannot be indexed")
        if isinstance(node.slice, ast.Tuple):
            raise self.error(node.slice, "pointers take one index")
        return base, self.index_expr(self.visit(node.slice), node.slice)

    def tuple_item(self, base, node: ast.Subscript):
        """``t[k]`` of a tuple of run-time values, ``k`` a compile-time int (negative counts from the end)."""
        k = self.visit(node.slice)
        n = len(base.items) if isinstance(base, TupleVal) else len(base.ty.items)
        if not (isinstance(k, CT) and isinstance(k.value, int) and not isinstance(k.value, bool)):
            raise self.error(node.slice, "a tuple is indexed with a compile-time int")
        if not -n <= k.value < n:
            raise self.error(node.slice, f"index {k.value} is out of range for a tuple of {n} values")
        k = k.value % n
        if isinstance(base, TupleVal) and all(isinstance(v, CT) or _pure(v) for v in base.items):
            return base.items[k]  # nothing else of the tuple has an effect to keep
        if isinstance(base, TupleVal):
            items = [self.materialize(v, node) for v in base.items]
            base = N.MakeTuple(T.TupleType(tuple(v.ty for v in items)), items, loc=self.loc(node.value))
        return N.TupleItem(base.ty.items[k], base, k, loc=self.loc(node))

    def visit_Subscript(self, node: ast.Subscript):
        base, idx = self.subscript(node)
        if idx is None:
            return base
        return N.Load(base.ty.elem, base, idx, loc=self.loc(node))


def _int_const(e) -> bool:
    """A typed integer or bool constant (its value is exact: ``const`` checked its range)."""
    return isinstance(e, N.Const) and isinstance(e.ty, T.DType) and (e.ty.is_int or e.ty.is_bool)


#: expressions that compute a value and nothing else (no call, no built-in: those may store, sync
#: or be atomic); a load only reads
_PURE = (N.Const, N.Var, N.BinOp, N.UnaryOp, N.Compare, N.Logical, N.IfExp, N.Cast, N.Bitcast, N.Load,
         N.PtrAdd, N.IsNull, N.ArrayRef, N.MakeTuple, N.TupleItem)


def _pure(e: N.Expr) -> bool:
    """Dropping ``e`` unevaluated changes nothing but its value."""
    return all(isinstance(n, _PURE) for n in N.walk([e]))


def _opsym(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
            ast.Pow: "**"}[type(op)]
