"""The front end: a Python AST visitor that type-checks a kernel and builds the typed IR.

One ``visit_*`` per supported construct; anything else reaches ``generic_visit`` and is reported as
unsupported at its location. Expressions evaluate either to a typed ``Expr`` or to a compile-time
Python value (``CT``): literals, dtypes, device functions, module attributes, compile-time
parameters. Compile-time values fold (``if T is f32:`` compiles one branch) and adopt the type of
the typed operand they meet (``x * 2``). All typing rules are in ``promote`` and ``coerce``.
"""
from __future__ import annotations

import ast
import builtins as py_builtins
import math
import types as pytypes
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T
from . import builtins as B
from .flow import check_flow
from .source import FuncDef, KernelObject, SourceFunction


@dataclass
class CT:
    """A compile-time value during typing."""

    value: Any


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl",
           ast.RShift: "shr", ast.Pow: "pow"}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_FLOAT_RANK = {T.f8e4m3: 0, T.f16: 1, T.bf16: 1, T.f32: 2, T.f64: 3}
_UNSUPPORTED = {
    ast.ClassDef: "class definitions", ast.Lambda: "lambdas", ast.ListComp: "list comprehensions",
    ast.SetComp: "set comprehensions", ast.DictComp: "dict comprehensions",
    ast.GeneratorExp: "generator expressions", ast.Try: "try statements", ast.With: "with statements",
    ast.Yield: "generators (yield)", ast.YieldFrom: "generators (yield from)", ast.Await: "await",
    ast.AsyncFunctionDef: "async functions", ast.FunctionDef: "nested functions",
    ast.Global: "global statements", ast.Nonlocal: "nonlocal statements", ast.Import: "imports",
    ast.ImportFrom: "imports", ast.Delete: "del", ast.Raise: "raise", ast.Assert: "assert",
    ast.List: "lists", ast.Dict: "dicts", ast.Set: "sets", ast.Starred: "starred expressions",
    ast.JoinedStr: "f-strings", ast.NamedExpr: "the walrus operator", ast.AsyncFor: "async for",
    ast.AsyncWith: "async with", ast.Match: "match statements", ast.Slice: "slices",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "try statements"

_PY_BUILTINS = {"range": range, "min": min, "max": max, "abs": abs, "bool": T.bool_, "None": None,
                "True": True, "False": False, "len": len, "print": print, "int": int, "float": float}
_BUILTIN_INT = {T.bool_: 0}
#: the keyword arguments a built-in takes (its handler reads them); any other keyword is an error
_BUILTIN_KEYWORDS: dict[str, tuple[str, ...]] = {"load": ("eviction", "align"), "store": ("eviction",)}
_UNBOUND = object()
#: a local array lives in registers only when every index is a compile-time constant (pk.static_range);
#: otherwise in the thread's stack (scratch on AMDGPU, local memory on NVIDIA): keep it small either way
MAX_LOCAL_ARRAY_BYTES = 4096
#: pk.static_range copies its body once per value: a bound on the copies (of a loop, and of nested
#: loops' innermost body in all) keeps compile time sane
MAX_STATIC_UNROLL = 1024


def type_kernel(inst, target) -> N.Function:  # inst: a lang.kernel.KernelInstance
    """Type-check a kernel instance for ``target`` (only its wave size matters to typing)."""
    return Typer(inst.kdef.source, dict(inst.params), target, [], kernel_name=inst.name,
                 max_block_size=inst.max_block_size).type_function(None)


class Typer(ast.NodeVisitor):
    def __init__(self, src: SourceFunction, bindings: dict[str, Any], target, stack: list,
                 kernel_name: str | None = None, max_block_size: int = 1024):
        self.src, self.bindings, self.target, self.stack = src, bindings, target, stack
        self.kernel_name = kernel_name
        self.is_kernel = kernel_name is not None
        self.locals: dict[str, T.Type] = {}
        self.arrays: dict[str, T.ArrayType] = {}
        self.array_names: dict[str, N.ArrayRef] = {}
        self.in_static_loop = False  # typing a pk.static_range body (break/continue would be wrong)
        self.static_vars: set[str] = set()
        self.ret_type: T.Type = T.void
        self.uses_sync = False
        self.loop_depth = 0
        self._tmp = 0
        self.pending: list[N.Stmt] = []  # hidden assignments a statement needs first (chains)
        self.node: ast.AST = src.tree

    # ------------------------------------------------------------------ helpers
    def error(self, node: ast.AST | None, msg: str) -> CompileError:
        return self.src.error(node or self.node, msg)

    def loc(self, node: ast.AST) -> N.Loc:
        return self.src.loc(node)

    def visit(self, node):
        self.node = node
        kind = _UNSUPPORTED.get(type(node))
        if kind:
            raise self.error(node, f"{kind} are not supported in kernels" if kind.endswith("s")
                             else f"{kind} is not supported in kernels")
        return super().visit(node)

    def generic_visit(self, node):
        raise self.error(node, f"unsupported syntax in a kernel: {type(node).__name__}")

    def ct_eval(self, node: ast.AST, what: str) -> Any:
        val = self.visit(node)
        if not isinstance(val, CT):
            raise self.error(node, f"{what} must be known at compile time")
        return val.value

    def resolve_type(self, node: ast.AST) -> T.Type:
        val = self.ct_eval(node, "a type annotation")
        if isinstance(val, T.TypeVar):
            raise self.error(node, f"type variable {val.name} is not bound here")
        if isinstance(val, T.GenericPtr):
            raise self.error(node, f"type variable {val.var} is not bound here")
        if val is bool:
            return T.bool_
        if isinstance(val, (T.DType, T.PtrType)):
            return val
        raise self.error(node, f"{val!r} is not a pykern type")

    # ------------------------------------------------------------------ entry
    def type_function(self, arg_types: list[T.Type] | None) -> N.Function:
        tree = self.src.tree
        params: list[tuple[str, T.Type]] = []
        for i, a in enumerate(tree.args.args):
            if arg_types is not None:  # device function: bind type variables from the call
                self._bind_typevars(a.annotation, arg_types[i], a)
            ty = self.resolve_type(a.annotation)
            if arg_types is not None and isinstance(ty, T.PtrType) and isinstance(arg_types[i], T.PtrType) \
                    and arg_types[i].elem == ty.elem and arg_types[i].space != ty.space:
                ty = T.PtrType(ty.elem, arg_types[i].space, ty.const)  # Ptr[T] params take shared pointers too
            if arg_types is not None and ty != arg_types[i] and not (
                    isinstance(ty, T.PtrType) and ty.const and isinstance(arg_types[i], T.PtrType)
                    and arg_types[i].elem == ty.elem):
                raise self.error(a, f"argument '{a.arg}' expects {ty!r}, got {arg_types[i]!r}")
            params.append((a.arg, ty))
            self.locals[a.arg] = ty
        returns_none = isinstance(tree.returns, ast.Constant) and tree.returns.value is None
        if tree.returns is not None:
            if self.is_kernel and not returns_none:  # `-> None` is what type checkers want written
                raise self.error(tree.returns, "kernels return nothing: annotate `-> None` or nothing")
            if not (isinstance(tree.returns, ast.Constant) and tree.returns.value is None):
                self.ret_type = self.resolve_type(tree.returns)
        body = self.block(tree.body)
        name = self.kernel_name or self.src.name
        fn = N.Function(name, params, self.ret_type, body, dict(self.locals), dict(self.arrays),
                        self.loc(tree), self.uses_sync)
        check_flow(fn)  # reads of unassigned variables, functions that can end without their result
        return fn

    def _bind_typevars(self, ann: ast.AST, actual: T.Type, node) -> None:
        """Bind ``T`` in annotations ``T`` / ``Ptr[T]`` from the actual argument type."""
        if isinstance(ann, ast.Subscript):
            inner = ann.slice
            if isinstance(actual, T.PtrType):
                self._bind_typevars(inner, actual.elem, node)
            return
        if isinstance(ann, ast.Name) and ann.id not in self.bindings:
            val = self._lookup_global(ann.id)
            if isinstance(val, T.TypeVar):
                self.bindings[ann.id] = actual

    def block(self, stmts: list[ast.stmt]) -> list[N.Stmt]:
        out: list[N.Stmt] = []
        for s in stmts:
            try:
                r = self.visit(s)
            except RecursionError:
                raise self.error(s, "this statement nests too deeply to compile (an expression of hundreds of "
                                    "terms?): split it into several statements") from None
            if isinstance(r, list):
                out.extend(r)
            elif r is not None:
                out.append(r)
        return out

    # ------------------------------------------------------------------ names
    def _lookup_global(self, name: str) -> Any:
        for scope in (self.bindings, self.src.closure, self.src.globals):
            if name in scope:
                return scope[name]
        if name in _PY_BUILTINS:
            return _PY_BUILTINS[name]
        raise KeyError(name)

    def visit_Name(self, node: ast.Name):
        if node.id in self.array_names:
            return self.array_names[node.id]
        if node.id in self.locals:
            return N.Var(self.locals[node.id], node.id, loc=self.loc(node))
        try:
            val = self._lookup_global(node.id)
        except KeyError:
            raise self.error(node, f"name '{node.id}' is not defined") from None
        if isinstance(val, T.TypeVar) and val.name in self.bindings:
            val = self.bindings[val.name]
        return CT(val)

    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)) or node.value is None:
            return CT(node.value)
        raise self.error(node, f"{type(node.value).__name__} constants are not supported in kernels")

    def visit_Tuple(self, node: ast.Tuple):
        return CT(tuple(self.ct_eval(e, "a tuple element") for e in node.elts))

    def visit_Attribute(self, node: ast.Attribute):
        base = self.visit(node.value)
        if not isinstance(base, CT):
            raise self.error(node, f"values of type {base.ty!r} have no attribute '{node.attr}'")
        obj = base.value
        if isinstance(obj, B.Dim3):
            axis = "xyz".find(node.attr)
            if axis < 0 or len(node.attr) != 1:
                raise self.error(node, f"{obj.name} has attributes x, y, z; not '{node.attr}'")
            return N.Intrinsic(T.u32, obj.name, [], {"axis": axis}, loc=self.loc(node))
        try:
            val = getattr(obj, node.attr)
        except AttributeError:
            raise self.error(node, f"{_describe(obj)} has no attribute '{node.attr}'") from None
        if isinstance(val, B.WaveSize):
            return CT(self.target.wave_size)
        if isinstance(val, B.TileBytes):
            return CT(self.target.tile_bytes)
        return CT(val)

    # ------------------------------------------------------------------ typing rules
    def materialize(self, v, node, ty: T.Type | None = None) -> N.Expr:
        """Turn a compile-time value into a typed constant (of ``ty`` or its default type)."""
        if not isinstance(v, CT):
            return v
        val = v.value
        if isinstance(val, B.WaveSize):
            val = self.target.wave_size
        elif isinstance(val, B.TileBytes):
            val = self.target.tile_bytes
        if ty is None:
            if isinstance(val, bool):
                ty = T.bool_
            elif isinstance(val, int):
                ty = T.i32 if -2**31 <= val < 2**31 else T.i64
            elif isinstance(val, float):
                ty = T.f32
            else:
                raise self.error(node, f"{_describe(val)} is not a value a kernel can compute with")
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
                               f"e.g. pk.{_name(tb)}(...)")

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
            raise self.error(node, f"arithmetic on bool is not supported; convert with pk.i32(...)")
        if ty.is_float and op in ("and", "or", "xor"):
            raise self.error(node, f"bitwise operators need integers, got {ty!r}")
        if ty.is_int and op == "div":
            raise self.error(node, "'/' is float division; use '//' for integers (it truncates toward zero)")
        if ty.is_float and op == "mod":  # exact C fmod, the same bits on every target (pykern.math's)
            return self.call_typed(B.OPERATOR_FUNCS["float_mod"], [a, b], node)
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
            raise self.error(node, f"cannot compute {_describe(x)} {op} {_describe(y)} at compile time") from None

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
                if short:
                    return CT(bool(v.value)) if out is None else N.Logical(T.bool_, op, out, self.const(bool(v.value), T.bool_, src), loc=self.loc(node))
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
                raise self.error(node, f"cannot compare {_describe(a.value)} with {_describe(b.value)}") from None
        a, b, ty = self.unify(a, b, node, "comparison")
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
                raise self.error(node, f"an index must be an integer, got {_describe(v.value)}")
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
        base = self.visit(node.value)
        if isinstance(base, CT):
            idx = self.visit(node.slice)
            if not isinstance(idx, CT):
                raise self.error(node.slice, "only pointers and arrays can be indexed at run time")
            try:
                return CT(base.value[idx.value]), None
            except Exception as exc:
                raise self.error(node, f"cannot index {_describe(base.value)}: {exc}") from None
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

    def visit_Subscript(self, node: ast.Subscript):
        base, idx = self.subscript(node)
        if idx is None:
            return base
        return N.Load(base.ty.elem, base, idx, loc=self.loc(node))

    # ------------------------------------------------------------------ calls
    def visit_Call(self, node: ast.Call):
        callee = self.visit(node.func)
        if not isinstance(callee, CT):
            raise self.error(node.func, f"a {callee.ty!r} value is not callable")
        fn = callee.value
        if node.keywords and not isinstance(fn, (B.Builtin, FuncDef)):
            raise self.error(node.keywords[0], "keyword arguments are not supported here")
        if isinstance(fn, B.Builtin):
            unknown = [k for k in node.keywords if k.arg not in _BUILTIN_KEYWORDS.get(fn.name, ())]
            if unknown:  # never ignored: order=, rounding= ... would silently do nothing
                takes = _BUILTIN_KEYWORDS.get(fn.name)
                raise self.error(unknown[0], f"pk.{fn.name}() has no keyword argument '{unknown[0].arg}'" +
                                 (f"; it takes {', '.join(k + '=' for k in takes)}" if takes else ""))
            handler = getattr(self, "builtin_" + fn.name.replace(".", "_"))
            return handler(node, node.args)
        if isinstance(fn, T.DType):
            return self.explicit_cast(fn, node)
        if isinstance(fn, FuncDef):
            return self.call_func(fn, node)
        if fn in (min, max):
            return self.builtin_minmax("minimum" if fn is min else "maximum", node)
        if fn is abs:
            return self.builtin_fabs(node, node.args, name="abs")
        if fn is range:
            raise self.error(node, "range() can only be used as the iterable of a for loop")
        if fn is len and len(node.args) == 1 and not node.keywords:
            return CT(len(self.ct_eval(node.args[0], "len()'s argument (a compile-time tuple)")))
        if fn is bool:
            return self.explicit_cast(T.bool_, node)
        if fn in (int, float):
            raise self.error(node.func, f"{fn.__name__}() is ambiguous in a kernel: use pk.i32(...), pk.f32(...), ...")
        if isinstance(fn, KernelObject):
            raise self.error(node.func, "kernels cannot be called from kernels; make it a @pykern.func")
        raise self.error(node.func, f"{_describe(fn)} cannot be called in a kernel")

    def args_exact(self, node, args, n: int, name: str) -> list:
        if len(args) != n:
            raise self.error(node, f"{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
        return [self.visit(a) for a in args]

    def explicit_cast(self, ty: T.DType, node: ast.Call):
        (v,) = self.args_exact(node, node.args, 1, ty.name)
        if isinstance(v, CT):
            val = v.value
            if isinstance(val, (int, float, bool)):
                if ty.is_int and isinstance(val, float):
                    val = int(val)
                if ty.is_int and not isinstance(val, bool):
                    lo, hi = ty.int_range
                    val = ((val - lo) % (hi - lo + 1)) + lo  # wraps, as the run-time cast does
                if ty.is_bool:
                    val = bool(val)
                return self.const(val, ty, node)
            raise self.error(node.args[0], f"cannot convert {_describe(val)} to {ty!r}")
        if not isinstance(v.ty, T.DType):
            raise self.error(node.args[0], f"cannot convert a {v.ty!r} value to {ty!r}")
        return self.cast_to(v, ty)

    def call_func(self, fdef: FuncDef, node: ast.Call):
        src = fdef.source
        for kw in node.keywords:
            if kw.arg in {a.arg for a in src.tree.args.args}:
                raise self.error(kw, f"pass '{kw.arg}' by position: keyword arguments are for {fdef.name}()'s "
                                     f"compile-time (keyword-only) parameters")
        if len(node.args) != len(src.tree.args.args):
            raise self.error(node, f"{fdef.name}() takes {len(src.tree.args.args)} arguments, got {len(node.args)}")
        if fdef in self.stack or (not self.is_kernel and fdef.source is self.src):
            raise self.error(node, f"recursive call of {fdef.name}: device functions cannot recurse")
        compile_time = self.compile_time_args(fdef, node)
        # an array passes as a pointer into its memory (the callee is typed for that space)
        args = [self.array_as_ptr(self.visit(a)) for a in node.args]
        # literal arguments adopt the parameter's type where it is concrete, else a typed sibling's
        typed = [a for a in args if not isinstance(a, CT)]
        arg_types = []
        for a, p, an in zip(args, src.tree.args.args, node.args):
            if isinstance(a, CT):
                ann = self._peek_annotation(fdef, p.annotation)
                ty = ann if isinstance(ann, T.DType) else (typed[0].ty if typed else None)
                a = self.materialize(a, an, ty)
            arg_types.append(a.ty)
        args = [self.materialize(a, an, t) for a, an, t in zip(args, node.args, arg_types)]
        key = (tuple(arg_types), self.target.wave_size, self.target.tile_bytes, tuple(compile_time.items()))
        fn = fdef._typed.get(key)
        if fn is None:
            sub = Typer(src, dict(compile_time), self.target, self.stack + [fdef])
            fn = sub.type_function(arg_types)
            fdef._typed[key] = fn
        self.uses_sync |= fn.uses_sync
        return N.Call(fn.ret, fn, args, loc=self.loc(node))

    def compile_time_args(self, fdef: FuncDef, node: ast.Call) -> dict[str, Any]:
        """A device function's keyword-only parameters, passed by keyword: compile-time values (as a
        kernel instance's), one typed copy of the function per set of values."""
        params = fdef.source.compile_params
        values = {}
        for kw in node.keywords:
            if kw.arg not in params:
                raise self.error(kw, f"{fdef.name}() has no compile-time parameter '{kw.arg}'"
                                     + (f"; it takes {', '.join(params)}" if params else ""))
            values[kw.arg] = self.ct_eval(kw.value, f"{fdef.name}()'s compile-time argument '{kw.arg}'")
        missing = [p for p in params if p not in values]
        if missing:
            raise self.error(node, f"{fdef.name}() needs its compile-time argument(s) {', '.join(missing)} "
                                   f"by keyword")
        return {p: values[p] for p in params}

    def call_typed(self, fdef: FuncDef, args: list[N.Expr], node) -> N.Call:
        """A call of a library device function on already typed arguments."""
        arg_types = [a.ty for a in args]
        key = (tuple(arg_types), self.target.wave_size, self.target.tile_bytes)
        fn = fdef._typed.get(key)
        if fn is None:
            fn = fdef._typed[key] = Typer(fdef.source, {}, self.target, self.stack + [fdef]).type_function(arg_types)
        self.uses_sync |= fn.uses_sync
        return N.Call(fn.ret, fn, args, loc=self.loc(node))

    def _peek_annotation(self, fdef: FuncDef, ann: ast.AST):
        try:
            return Typer(fdef.source, {}, self.target, []).ct_eval(ann, "")
        except CompileError:
            return None

    # ------------------------------------------------------------------ built-ins
    def intrinsic(self, name, ty, args, node, **attrs):
        return N.Intrinsic(ty, name, args, attrs, loc=self.loc(node))

    def builtin_grid_stride(self, node, args):
        raise self.error(node, "pk.grid_stride() and pk.parallel_range() can only be the iterable of a for loop")

    builtin_parallel_range = builtin_grid_stride

    def builtin_static_range(self, node, args):
        raise self.error(node, "pk.static_range() can only be the iterable of a for loop")

    def global_id(self, node) -> N.Expr:
        def idx(name):
            return N.Cast(T.u64, N.Intrinsic(T.u32, name, [], {"axis": 0}, loc=self.loc(node)), loc=self.loc(node))
        return N.BinOp(T.u64, "add", N.BinOp(T.u64, "mul", idx("block_idx"), idx("block_dim")), idx("thread_idx"),
                       loc=self.loc(node))

    def builtin_global_id(self, node, args):
        self.args_exact(node, args, 0, "global_id")
        return self.global_id(node)

    def builtin_lane_id(self, node, args):
        self.args_exact(node, args, 0, "lane_id")
        return self.intrinsic("lane_id", T.u32, [], node)

    def builtin_syncthreads(self, node, args):
        self.args_exact(node, args, 0, "syncthreads")
        self.uses_sync = True
        return self.intrinsic("barrier", T.void, [], node)

    def _fence(self, scope):
        def handler(node, args):
            self.args_exact(node, args, 0, "threadfence")
            return self.intrinsic("fence", T.void, [], node, scope=scope)
        return handler

    builtin_threadfence = property(lambda self: self._fence("device"))
    builtin_threadfence_block = property(lambda self: self._fence("block"))
    builtin_threadfence_system = property(lambda self: self._fence("system"))

    def builtin_bitcast(self, node, args):
        if len(args) != 2:
            raise self.error(node, "bitcast(x, T) takes 2 arguments")
        v, ty = self.visit(args[0]), self.ct_eval(args[1], "the target type of bitcast")
        v = self.array_as_ptr(self.materialize(v, node))
        if isinstance(v.ty, T.PtrType) and isinstance(ty, T.PtrType):  # the same address, other elements
            return N.Bitcast(T.PtrType(ty.elem, v.ty.space, v.ty.const or ty.const), v, loc=self.loc(node))
        if not (isinstance(ty, T.DType) and isinstance(v.ty, T.DType) and ty.bits == v.ty.bits):
            raise self.error(node, f"bitcast needs types of the same size, got {v.ty!r} and {ty!r}")
        return N.Bitcast(ty, v, loc=self.loc(node))

    def builtin_is_aligned(self, node, args):
        if len(args) != 2:
            raise self.error(node, "is_aligned(p, nbytes) takes 2 arguments")
        p = self.visit(args[0])
        if isinstance(p, CT) or not isinstance(p.ty, (T.PtrType, T.ArrayType)):
            raise self.error(args[0], "is_aligned() takes a pointer")
        nbytes = self.ct_eval(args[1], "is_aligned()'s byte count")
        if not (isinstance(nbytes, int) and nbytes > 0 and nbytes & (nbytes - 1) == 0):
            raise self.error(args[1], f"is_aligned() needs a power of two, got {nbytes!r}")
        return self.intrinsic("is_aligned", T.bool_, [self.array_as_ptr(p)], node, nbytes=nbytes)

    def float_args(self, node, args, n, name):
        vals = self.args_exact(node, args, n, name)
        typed = [v for v in vals if not isinstance(v, CT)]
        ty = typed[0].ty if typed else T.f32
        for v in typed[1:]:
            ty = self.promote(N.Const(ty, 0), v, node, name)
        if not (isinstance(ty, T.DType) and ty.is_float):
            raise self.error(node, f"{name}() needs float arguments, got {ty!r}")
        return [self.cast_to(self.materialize(v, node, ty), ty) for v in vals], ty

    def _math(name, n, pred=False):  # noqa: N805 - builds builtin_<name> methods
        def handler(self, node, args):
            vals, ty = self.float_args(node, args, n, name)
            return self.intrinsic(name, T.bool_ if pred else ty, vals, node)
        return handler

    builtin_sqrt, builtin_floor, builtin_ceil, builtin_trunc, builtin_rint = map(
        _math, ("sqrt", "floor", "ceil", "trunc", "rint"), [1] * 5)
    builtin_fma = _math("fma", 3)
    builtin_copysign, builtin_fmin, builtin_fmax = map(_math, ("copysign", "fmin", "fmax"), [2] * 3)
    builtin_isnan, builtin_isinf = _math("isnan", 1, True), _math("isinf", 1, True)

    def memory_access(self, node, args, n: int, name: str):
        """``pk.load(p, i, eviction=...)`` / ``pk.store(p, i, v, eviction=...)``: ``p[i]`` of a
        global pointer, and the cache policy (a compile-time string)."""
        if len(args) != n:
            raise self.error(node, f"pk.{name}() takes {n} arguments and eviction=")
        base, idx = self.subscript(ast.copy_location(ast.Subscript(value=args[0], slice=args[1], ctx=ast.Load()), node))
        if idx is None or not isinstance(base.ty, T.PtrType) or base.ty.space != "global":
            raise self.error(args[0], f"pk.{name}() takes a pointer to global memory")
        eviction = ""
        for k in node.keywords:
            if k.arg == "align" and name == "load":
                continue
            if k.arg != "eviction":
                raise self.error(k, f"pk.{name}() takes the keyword eviction=" + (" or align=" if name == "load" else ""))
            literal = isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
            eviction = k.value.value if literal else self.ct_eval(k.value, "eviction=")
            if eviction not in N.EVICTION_POLICIES:
                raise self.error(k.value, f"eviction= is one of {', '.join(map(repr, N.EVICTION_POLICIES))}, "
                                          f"got {eviction!r}")
        return base, idx, eviction

    def builtin_load(self, node, args):
        base, idx, eviction = self.memory_access(node, args, 2, "load")
        align = 0
        for k in node.keywords:
            if k.arg == "align":  # the address is only known to be a multiple of align bytes
                align = self.ct_eval(k.value, "align=")
                elem = base.ty.elem.nbytes
                if not (isinstance(align, int) and 0 < align <= elem and align & (align - 1) == 0):
                    raise self.error(k.value, f"align= is a power of two from 1 to the element's {elem} bytes, "
                                              f"got {align!r}")
                if eviction:
                    raise self.error(k, "pk.load() takes eviction= or align=, not both")
        return N.Load(base.ty.elem, base, idx, eviction, align if align and align < base.ty.elem.nbytes else 0,
                      loc=self.loc(node))

    def builtin_dot4_i8(self, node, args, a_signed=True):
        """``pk.dot4_i8(a, b, acc)`` / ``pk.dot4_u8i8``: the four byte products of two 32-bit words
        added to ``acc`` (i32, wrapping), bytes of ``b`` signed, of ``a`` signed or unsigned."""
        name = "dot4_i8" if a_signed else "dot4_u8i8"
        vals = self.args_exact(node, args, 3, name)
        words = []
        for v, an, what in zip(vals[:2], node.args, ("a", "b")):
            v = self.materialize(v, an, T.i32)
            if not (isinstance(v.ty, T.DType) and v.ty.is_int and v.ty.bits == 32):
                raise self.error(an, f"{name}()'s {what} is four packed bytes in an i32 or u32, got {v.ty!r}")
            words.append(v if v.ty is T.i32 else N.Bitcast(T.i32, v, loc=self.loc(an)))
        acc = self.materialize(vals[2], node.args[2], T.i32)
        if acc.ty is not T.i32:
            raise self.error(node.args[2], f"{name}()'s accumulator is an i32, got {acc.ty!r}")
        return self.intrinsic("dot4", T.i32, words + [acc], node, a_signed=a_signed)

    def builtin_dot4_u8i8(self, node, args):
        return self.builtin_dot4_i8(node, args, a_signed=False)

    def builtin_store(self, node, args):
        base, idx, eviction = self.memory_access(node, args, 3, "store")
        if base.ty.const:
            raise self.error(args[0], "cannot write through a ConstPtr: the data is read-only")
        val = self.coerce_assign(self.visit(args[2]), base.ty.elem, args[2], "element")
        self.pending.append(N.Store(base, idx, val, eviction, loc=self.loc(node)))
        return CT(None)

    def builtin_select(self, node, args):
        """``pk.select(c, a, b)``: ``a if c else b`` with both evaluated, no branch (straight-line code
        the GPU runs without divergence and the tiles of a grid-stride loop can interleave)."""
        c, a, b = self.args_exact(node, args, 3, "select")
        if isinstance(c, CT):
            return a if c.value else b
        a, b, ty = self.unify(a, b, node, "pk.select()")
        return self.intrinsic("select", ty, [self.truth(c, node.args[0]), a, b], node)

    def builtin_fast_exp2(self, node, args):
        vals, ty = self.float_args(node, args, 1, "fast_exp2")
        if ty is not T.f32:
            raise self.error(node, f"fast_exp2() is for f32 (the hardware instruction), got {ty!r}")
        return self.intrinsic("fast_exp2", ty, vals, node)

    def builtin_fast_rcp(self, node, args):
        vals, ty = self.float_args(node, args, 1, "fast_rcp")
        if ty is not T.f32:
            raise self.error(node, f"fast_rcp() is for f32 (the hardware instruction), got {ty!r}")
        return self.intrinsic("fast_rcp", ty, vals, node)

    def builtin_fabs(self, node, args, name="fabs"):
        (v,) = self.args_exact(node, args, 1, name)
        if isinstance(v, CT):
            return CT(abs(v.value))
        if not isinstance(v.ty, T.DType) or v.ty.is_bool:
            raise self.error(node, f"{name}() needs a number, got {v.ty!r}")
        if v.ty.is_int and not v.ty.is_signed:
            return v
        return self.intrinsic("abs", v.ty, [v], node)

    def builtin_minmax(self, name, node):
        if len(node.args) != 2:
            raise self.error(node, f"{name[:3]}() takes 2 arguments in kernels")
        a, b = self.visit(node.args[0]), self.visit(node.args[1])
        if isinstance(a, CT) and isinstance(b, CT):
            return CT((min if name == "minimum" else max)(a.value, b.value))
        a, b, ty = self.unify(a, b, node, name[:3] + "()")
        return self.intrinsic(name, ty, [a, b], node)

    def builtin_minimum(self, node, args):
        return self.builtin_minmax("minimum", node)

    def builtin_maximum(self, node, args):
        return self.builtin_minmax("maximum", node)

    # --- shared and local arrays
    _ARRAY_DECLS = ("shared.array", "shared.dynamic", "local.array")

    def builtin_shared_array(self, node, args):
        space = "local" if self.ct_eval(node.func, "").name == "local.array" else "shared"
        raise self.error(node, f"declare {space} arrays as 'name = pk.{space}.array(shape, dtype)'")

    builtin_shared_dynamic = builtin_local_array = builtin_shared_array

    def declare_array(self, name: str, call: ast.Call, target_node) -> None:
        fn = self.ct_eval(call.func, "")
        space = fn.name.split(".")[0]
        if call.keywords:
            raise self.error(call.keywords[0], f"pk.{fn.name}() takes no keyword arguments")
        redeclared = name in self.array_names  # allowed once per copy of a pk.static_range body (below)
        if name in self.locals or redeclared and not self.in_static_loop:
            raise self.error(target_node, f"'{name}' is already defined; {space} arrays need their own name")
        if fn.name.endswith(".array"):
            if len(call.args) != 2:
                raise self.error(call, f"pk.{fn.name}(shape, dtype) takes 2 arguments")
            shape = self.ct_eval(call.args[0], f"the shape of a {space} array")
            shape = (shape,) if isinstance(shape, int) else shape
            if not (isinstance(shape, tuple) and shape and all(isinstance(s, int) and s > 0 for s in shape)):
                raise self.error(call.args[0], f"a {space} array's shape must be positive ints, got {shape!r}")
            dtype = self.ct_eval(call.args[1], f"the dtype of a {space} array")
        else:
            if len(call.args) != 1:
                raise self.error(call, "pk.shared.dynamic(dtype) takes 1 argument")
            if any(t.shape is None for t in self.arrays.values()):
                raise self.error(call, "a kernel has one dynamic shared array")
            shape, dtype = None, self.ct_eval(call.args[0], "the dtype of a shared array")
        if not isinstance(dtype, T.DType):
            raise self.error(call, f"a {space} array's element type must be a dtype, got {_describe(dtype)}")
        ty = T.ArrayType(dtype, shape, space)
        if redeclared:  # the same declaration in the next copy of a static_range body: the same array
            if self.arrays[name] != ty:
                raise self.error(target_node, f"'{name}' is already a {self.arrays[name]!r} array")
            return
        if space == "local" and ty.count * dtype.nbytes > MAX_LOCAL_ARRAY_BYTES:
            raise self.error(call, f"a local array takes at most {MAX_LOCAL_ARRAY_BYTES} bytes per thread, "
                                   f"this one {ty.count * dtype.nbytes}")
        self.arrays[name] = ty
        self.array_names[name] = N.ArrayRef(ty, name, loc=self.loc(call))

    # --- atomics
    _ATOMIC_ARITY = {"add": 3, "sub": 3, "min": 3, "max": 3, "exchange": 3, "cas": 4}

    def atomic(self, op: str, node, args):
        n = self._ATOMIC_ARITY[op]
        if len(args) != n:
            raise self.error(node, f"atomic.{op}() takes {n} arguments (pointer, index, {'expected, new' if op == 'cas' else 'value'})")
        base = self.visit(args[0])
        if isinstance(base, CT) or not isinstance(base.ty, (T.PtrType, T.ArrayType)):
            raise self.error(args[0], "the first argument of an atomic must be a pointer or a shared array")
        if base.ty.space == "local":
            raise self.error(args[0], "atomics on a local array: it is private to the thread, use plain updates")
        if isinstance(base.ty, T.PtrType) and base.ty.const:
            raise self.error(args[0], "atomic on a ConstPtr: the data is read-only")
        elem = base.ty.elem
        if elem.is_bool:
            raise self.error(args[0], "atomics on bool are not supported; use u32")
        idx = self.index_expr(self.visit(args[1]), args[1])
        vals = [self.coerce(self.visit(a), elem, a) for a in args[2:]]
        space = base.ty.space  # global or shared (local was refused above)
        return N.Intrinsic(elem, "atomic", [base, idx] + vals, {"op": op, "space": space}, loc=self.loc(node))

    def __getattr__(self, name: str):
        if name.startswith("builtin_atomic_"):
            op = name[len("builtin_atomic_"):]
            return lambda node, args: self.atomic(op, node, args)
        raise AttributeError(name)

    # --- wave operations
    def wave_value(self, node, arg) -> N.Expr:
        v = self.materialize(self.visit(arg), arg)
        if not isinstance(v.ty, T.DType):
            raise self.error(arg, f"wave operations take numbers, got {v.ty!r}")
        return v

    def _shuffle(kind):  # noqa: N805
        def handler(self, node, args):
            if len(args) != 2:
                raise self.error(node, f"wave.{kind}() takes 2 arguments (value, lane)")
            v = self.wave_value(node, args[0])
            lane = self.visit(args[1])
            lane = self.coerce(lane, T.u32, args[1]) if isinstance(lane, CT) \
                else self.cast_to(self.index_expr(lane, args[1]), T.u32)
            self.uses_sync = True
            return self.intrinsic("shuffle", v.ty, [v, lane], node, kind=kind)
        return handler

    builtin_wave_shuffle = _shuffle("idx")
    builtin_wave_shuffle_xor = _shuffle("xor")
    builtin_wave_shuffle_up = _shuffle("up")
    builtin_wave_shuffle_down = _shuffle("down")

    def _vote(kind):  # noqa: N805
        def handler(self, node, args):
            if len(args) != 1:
                raise self.error(node, f"wave.{kind}() takes 1 argument")
            c = self.condition(args[0])
            c = self.materialize(c, args[0])
            self.uses_sync = True
            return self.intrinsic("ballot", T.u64 if kind == "ballot" else T.bool_, [c], node, kind=kind)
        return handler

    builtin_wave_ballot, builtin_wave_any, builtin_wave_all = _vote("ballot"), _vote("any"), _vote("all")

    def _reduce(kind):  # noqa: N805
        def handler(self, node, args):
            if len(args) != 1:
                raise self.error(node, f"wave.{kind}() takes 1 argument")
            v = self.wave_value(node, args[0])
            if v.ty.is_bool:
                raise self.error(node, f"wave.{kind}() needs a number, got bool")
            self.uses_sync = True
            return self.intrinsic("wave_reduce", v.ty, [v], node, kind=kind)
        return handler

    builtin_wave_sum, builtin_wave_min, builtin_wave_max = _reduce("sum"), _reduce("min"), _reduce("max")

    # ------------------------------------------------------------------ statements
    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        self.pending: list = []
        v = self.visit(node.value)
        if isinstance(v, CT):
            return self.pending or None  # pk.store() leaves its Store there
        return self.pending + [N.ExprStmt(v, loc=self.loc(node))]

    def assign_to(self, target: ast.AST, value, node) -> list[N.Stmt]:
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.array_names:
                raise self.error(target, f"'{name}' is a {self.arrays[name].space} array and cannot be reassigned")
            if name in self.static_vars:
                raise self.error(target, f"'{name}' is a pk.static_range() variable (a compile-time int) "
                                         f"and cannot be assigned")
            if name in self.locals:
                ty = self.locals[name]
                val = self.coerce_assign(value, ty, node, name)
            else:
                try:
                    g = self._lookup_global(name)
                    if isinstance(g, (T.DType, FuncDef, B.Builtin)) or g is range:
                        raise self.error(target, f"'{name}' names {_describe(g)}; choose another variable name")
                except KeyError:
                    pass
                val = self.materialize(value, node)
                if isinstance(val.ty, T.ArrayType):
                    raise self.error(node, "arrays cannot be copied into variables")
                if val.ty == T.void:
                    raise self.error(node, "this expression has no value")
                self.locals[name] = val.ty
            return [N.Assign(name, val, loc=self.loc(node))]
        if isinstance(target, ast.Subscript):
            base, idx = self.subscript(target)
            if idx is None:
                raise self.error(target, "cannot assign to a compile-time value")
            if isinstance(base.ty, T.PtrType) and base.ty.const:
                raise self.error(target, "cannot write through a ConstPtr: the data is read-only")
            val = self.coerce_assign(value, base.ty.elem, node, "element")
            return [N.Store(base, idx, val, loc=self.loc(node))]
        if isinstance(target, ast.Tuple):
            raise self.error(target, "tuple unpacking is not supported in kernels")
        raise self.error(target, f"cannot assign to {type(target).__name__}")

    def coerce_assign(self, value, ty, node, name):
        if isinstance(value, CT):
            return self.const(value.value, ty, node)
        if value.ty != ty:
            raise self.error(node, f"cannot assign a {value.ty!r} value to '{name}' of type {ty!r}; "
                                   f"convert explicitly with pk.{_name(ty)}(...)")
        return value

    def visit_Assign(self, node: ast.Assign):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment is not supported")
        (target,) = node.targets
        if isinstance(node.value, ast.Call) and isinstance(target, ast.Name):
            fn = self._maybe_ct(node.value.func)
            if isinstance(fn, B.Builtin) and fn.name in self._ARRAY_DECLS:
                self.declare_array(target.id, node.value, target)
                return None
        self.pending = []
        value = self.visit(node.value)
        if isinstance(value, CT) and isinstance(value.value, T.DType) and isinstance(target, ast.Name):
            return self.alias_type(target, value.value)
        return self.pending + self.assign_to(target, value, node)

    def alias_type(self, target: ast.Name, ty: T.DType) -> None:
        """``W = u32 if T is f16 else T``: a compile-time name for a type (no run-time variable)."""
        name = target.id
        if name in self.locals or name in self.array_names:
            raise self.error(target, f"'{name}' is a run-time variable; a type needs a name of its own")
        bound = self.bindings.get(name, _UNBOUND)
        if bound is not _UNBOUND and bound != ty:
            raise self.error(target, f"'{name}' already names {_describe(bound)}")
        self.bindings[name] = ty

    def _maybe_ct(self, node):
        try:
            v = self.visit(node)
        except CompileError:
            return None
        return v.value if isinstance(v, CT) else None

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "annotations are only for simple variables")
        ty = self.resolve_type(node.annotation)
        name = node.target.id
        if name in self.locals and self.locals[name] != ty:
            raise self.error(node, f"'{name}' already has type {self.locals[name]!r}")
        self.locals[name] = ty
        if node.value is None:
            return None
        self.pending = []
        value = self.visit(node.value)
        return self.pending + self.assign_to(node.target, value, node)

    def visit_AugAssign(self, node: ast.AugAssign):
        load = ast.copy_location(ast.BinOp(left=_as_load(node.target), op=node.op, right=node.value), node)
        self.pending = []
        value = self.visit(load)
        return self.pending + self.assign_to(node.target, value, node)

    def visit_Pass(self, node):
        return None

    def visit_If(self, node: ast.If):
        self.pending = []
        c = self.condition(node.test)
        pre = self.pending
        if isinstance(c, CT):
            return pre + self.block(node.body if c.value else node.orelse)
        return pre + [N.If(c, self.block(node.body), self.block(node.orelse), loc=self.loc(node))]

    def visit_While(self, node: ast.While):
        if node.orelse:
            raise self.error(node.orelse[0], "while ... else is not supported")
        self.pending = []
        c = self.condition(node.test)
        if self.pending:
            raise self.error(node.test, "comparison chains in a while condition: compare in two steps")
        if isinstance(c, CT):
            if not c.value:
                return None
            c = self.const(True, T.bool_, node.test)
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        return N.While(c, body, loc=self.loc(node))

    def visit_For(self, node: ast.For):
        if node.orelse:
            raise self.error(node.orelse[0], "for ... else is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a plain name")
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        kind = fn.value.name if isinstance(fn, CT) and isinstance(fn.value, B.Builtin) else None
        if kind == "static_range":
            return self.static_loop(node)
        if not isinstance(fn, CT) or not (fn.value is range or kind in ("grid_stride", "parallel_range")):
            raise self.error(it, "for loops iterate over range(...), pk.static_range(...), pk.grid_stride(...) "
                                 "or pk.parallel_range(...)")
        self.pending = []
        offset, descending = None, False
        if fn.value is range:
            start, stop, step, sign = self.range_args(it)
        elif kind == "grid_stride" and it.keywords:
            raise self.error(it.keywords[0], "pk.grid_stride() takes no keyword arguments")
        elif kind == "parallel_range":
            if len(it.args) != 4 or any(k.arg != "descending" for k in it.keywords):
                raise self.error(it, "pk.parallel_range(lo, hi, worker, workers, descending=False) takes 4 "
                                     "arguments and one keyword")
            for k in it.keywords:
                descending = self.ct_eval(k.value, "parallel_range()'s descending")
                if not isinstance(descending, bool):
                    raise self.error(k.value, f"descending= takes a compile-time bool, got {descending!r}")
            lo, hi, worker, workers = (self.visit(a) for a in it.args)
            typed = [v for v in (lo, hi, worker, workers) if not isinstance(v, CT)]
            ty = typed[0].ty if typed else T.u32
            for v in typed[1:]:
                ty = self.promote(N.Const(ty, 0), v, it, "parallel_range()")
            if not (isinstance(ty, T.DType) and ty.is_int and not ty.is_signed):
                raise self.error(it, f"parallel_range() takes unsigned integers, got {ty!r}")
            lo, hi, start, step = (self.coerce(v, ty, a) for v, a in zip((lo, hi, worker, workers), it.args))
            offset = lo
            stop = N.BinOp(ty, "sub", hi, lo, loc=self.loc(it))
            sign = 1
        else:
            if len(it.args) != 1:
                raise self.error(it, "pk.grid_stride(n) takes 1 argument")
            stop = self.coerce(self.visit(it.args[0]), T.u64, it.args[0])
            start = self.global_id(it)
            dim = lambda name: N.Cast(T.u64, N.Intrinsic(T.u32, name, [], {"axis": 0}))  # noqa: E731
            step, sign = N.BinOp(T.u64, "mul", dim("block_dim"), dim("grid_dim")), 1
        pre = self.pending
        name = node.target.id
        if name in self.locals and self.locals[name] != start.ty:
            raise self.error(node.target, f"loop variable '{name}' has type {self.locals[name]!r} "
                                          f"but the range is {start.ty!r}")
        self.locals[name] = start.ty
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        return pre + [N.ForRange(name, start, stop, step, sign, body, fn.value is not range, offset,
                                  descending, loc=self.loc(node))]

    def static_loop(self, node: ast.For) -> list[N.Stmt]:
        """``for k in pk.static_range(...)``: the body once per value, with ``k`` a compile-time int
        (so ``a[k]`` of a local array has a constant index, and the array can live in registers)."""
        it, name = node.iter, node.target.id
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(it, "pk.static_range() takes 1 to 3 positional arguments")
        bounds = [self.ct_eval(a, "a pk.static_range() bound") for a in it.args]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in bounds):
            raise self.error(it, f"pk.static_range() takes ints, got {tuple(bounds)!r}")
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.error(it.args[2], "pk.static_range() step must not be zero")
        values = range(*bounds)
        if len(values) > MAX_STATIC_UNROLL:
            raise self.error(it, f"pk.static_range() unrolls at most {MAX_STATIC_UNROLL} copies, got {len(values)}")
        copies = getattr(self, "static_copies", 1) * max(1, len(values))  # nested loops multiply
        if copies > MAX_STATIC_UNROLL:
            raise self.error(it, f"nested pk.static_range() loops unroll at most {MAX_STATIC_UNROLL} copies of "
                                 f"the innermost body in all, these give {copies}")
        if name in self.locals or name in self.array_names:
            raise self.error(node.target, f"'{name}' is a run-time variable; a pk.static_range() loop needs "
                                          f"a fresh name")
        saved = (self.bindings.get(name, _UNBOUND), self.loop_depth, self.in_static_loop, set(self.static_vars),
                 getattr(self, "static_copies", 1))
        self.loop_depth, self.in_static_loop, self.static_copies = 0, True, copies
        self.static_vars.add(name)
        out: list[N.Stmt] = []
        try:
            for v in values:
                self.bindings[name] = v
                out.extend(self.block(node.body))
        finally:
            old, self.loop_depth, self.in_static_loop, self.static_vars, self.static_copies = saved
            if old is _UNBOUND:
                self.bindings.pop(name, None)
            else:
                self.bindings[name] = old
        return out

    def range_args(self, it: ast.Call):
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(it, "range() takes 1 to 3 positional arguments")
        vals = [self.visit(a) for a in it.args]
        if len(vals) == 1:
            vals = [CT(0)] + vals
        if len(vals) == 2:
            vals.append(CT(1))
        typed = [v for v in vals if not isinstance(v, CT)]
        if typed:
            ty = typed[0].ty
            for v in typed[1:]:
                ty = self.promote(N.Const(ty, 0), v, it, "range()")
        else:
            ty = T.i32 if all(-2**31 <= v.value < 2**31 for v in vals if isinstance(v.value, int)) else T.i64
        if not (isinstance(ty, T.DType) and ty.is_int):
            raise self.error(it, f"range() needs integers, got {ty!r}")
        step_ct = vals[2]
        sign = 0
        if isinstance(step_ct, CT):
            if step_ct.value == 0:
                raise self.error(it.args[-1], "range() step must not be zero")
            sign = 1 if step_ct.value > 0 else -1
        elif not ty.is_signed:
            sign = 1
        start, stop, step = (self.cast_to(self.materialize(v, it, ty), ty) for v in vals)
        return start, stop, step, sign

    def visit_Break(self, node):
        if not self.loop_depth:
            raise self.error(node, "'break' in a pk.static_range() body: its copies are not a loop"
                             if self.in_static_loop else "'break' outside a loop")
        return N.Break(loc=self.loc(node))

    def visit_Continue(self, node):
        if not self.loop_depth:
            raise self.error(node, "'continue' in a pk.static_range() body: its copies are not a loop"
                             if self.in_static_loop else "'continue' outside a loop")
        return N.Continue(loc=self.loc(node))

    def visit_Return(self, node: ast.Return):
        if node.value is None:
            if self.ret_type != T.void:
                raise self.error(node, f"this function must return a {self.ret_type!r}")
            return N.Return(None, loc=self.loc(node))
        if self.is_kernel:
            raise self.error(node, "kernels cannot return a value; write results through a pointer")
        if self.ret_type == T.void:
            raise self.error(node, "returning a value from a function without a return annotation")
        self.pending = []
        v = self.coerce_assign(self.visit(node.value), self.ret_type, node, "the return value")
        return self.pending + [N.Return(v, loc=self.loc(node))]


def _as_load(target: ast.AST) -> ast.AST:
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Load()), target)
    return target


def _describe(obj: Any) -> str:
    if isinstance(obj, pytypes.ModuleType):
        return f"module {obj.__name__}"
    if isinstance(obj, (FuncDef, KernelObject, B.Builtin, T.DType)):
        return repr(obj)
    if callable(obj):
        return f"Python function {getattr(obj, '__name__', obj)!r}"
    return f"{type(obj).__name__} {obj!r}"


def _name(ty) -> str:
    return ty.name if isinstance(ty, T.DType) else repr(ty)


def _opsym(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
            ast.Pow: "**"}[type(op)]
