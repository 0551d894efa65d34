"""The front end: a Python AST visitor that type-checks a kernel and builds the typed IR.

One ``visit_*`` per supported construct; anything else reaches ``generic_visit`` and is reported as
unsupported at its location. ``Typer`` is assembled from three mixins, one per concern:
``expressions.ExprTyper`` (operators, conversions: all implicit typing rules are its ``promote`` and
``coerce``), ``calls.CallTyper`` (built-ins, casts, device functions) and ``statements.StmtTyper``.
This module holds what they share: the entry point, names, blocks and errors. The built-ins' own
typing rules are in ``builtins/``, found through the registry by the object a kernel names.
Expressions evaluate either to a typed ``Expr`` or to a compile-time Python value (``values.CT``).
"""
from __future__ import annotations

import ast
import typing
from typing import Any

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T
from .builtins import TargetConstant, definition
from .builtins.core import PerTarget
from .calls import CallTyper
from .expressions import ExprTyper
from .flow import check_flow
from .source import SourceFunction
from .statements import StmtTyper
from .values import CT, TupleVal, describe, is_tuple

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
                "True": True, "False": False, "len": len, "tuple": tuple, "print": print, "int": int, "float": float}


#: a per-target value read as a global: the host could not see which value a launch needs, and the
#: typed-IR caches are not keyed by it; an instance parameter is both
_PER_TARGET_READ = ("'{}' is a pk.per_target value: pass it to the kernel as a compile-time parameter of its "
                    "instance (a device function's by keyword), where each target gets its own value")


def type_kernel(inst, target) -> N.Function:  # inst: a lang.kernel.KernelInstance
    """Type-check a kernel instance for ``target`` (its wave size, ``pk.tile_bytes`` and the values
    of its ``pk.per_target`` parameters matter to typing)."""
    return Typer(inst.kdef.source, inst.params_for(target), target, [], kernel_name=inst.name,
                 max_block_size=inst.max_block_size).type_function(None)


class Typer(StmtTyper, CallTyper, ExprTyper, ast.NodeVisitor):
    """Types one function (a kernel, or a device function for one set of argument types) for one
    target; ``stack`` holds the device functions being typed above it (recursion is refused)."""

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
        self.static_copies = 1  # copies of the body being typed that nested pk.static_range loops make
        self.ret_type: T.Type = T.void
        self.uses_sync = False
        self.loop_depth = 0
        self.runtime_depth = 0  # run-time ifs and loops around the statement being typed
        self.const_locals: dict[str, Any] = {}  # compile-time locals (StmtTyper.compile_time_local)
        self._tmp = 0
        self.pending: list[N.Stmt] = []  # hidden assignments a statement needs first (chains)
        self.node: ast.AST = src.tree

    # ------------------------------------------------------------------ helpers
    def error(self, node: ast.AST | None, msg: str) -> CompileError:
        return self.src.error(node or self.node, msg)

    def loc(self, node: ast.AST) -> N.Loc:
        return self.src.loc(node)

    def visit(self, node, tuples: bool = False):
        """Type ``node``. A tuple of run-time values (``values.is_tuple``) is refused here unless the
        caller takes one (``tuples``: an assignment's or a return's value, a subscript's base, an
        expression statement), so every other context, an operand, an argument or a condition,
        reports it where it was written instead of failing somewhere in the typing rules."""
        self.node = node
        kind = _UNSUPPORTED.get(type(node))
        if kind:
            raise self.error(node, f"{kind} are not supported in kernels" if kind.endswith("s")
                             else f"{kind} is not supported in kernels")
        out = super().visit(node)
        if not tuples and is_tuple(out):
            raise self.tuple_as_value(node, out)
        return out

    def tuple_as_value(self, node: ast.AST, value) -> CompileError:
        if isinstance(value, TupleVal):
            first = next(e for e, v in zip(node.elts, value.items) if not isinstance(v, CT)) \
                if isinstance(node, ast.Tuple) else node
            return self.error(first, "a tuple element must be known at compile time here: a tuple of run-time "
                                     "values can only be unpacked (`a, b = ...`), returned, indexed with a "
                                     "constant or assigned to a name")
        n = len(value.ty.items)
        if isinstance(value, N.Call):
            what = f"{value.func.name}() returns {n} values ({value.ty!r})"
        elif isinstance(value, N.Var):
            what = f"'{value.name}' holds {n} values ({value.ty!r})"
        else:
            what = f"this is a tuple of {n} values ({value.ty!r})"
        return self.error(node, f"{what}, not one value: unpack it (`{', '.join('abcdefgh'[:min(n, 8)])} = ...`) "
                                f"or index it with a constant")

    def generic_visit(self, node):
        raise self.error(node, f"unsupported syntax in a kernel: {type(node).__name__}")

    def ct_eval(self, node: ast.AST, what: str) -> Any:
        val = self.visit(node)
        if not isinstance(val, CT):
            raise self.error(node, f"{what} must be known at compile time")
        return val.value

    def resolve_type(self, node: ast.AST, tuples: bool = False) -> T.Type:
        """The type an annotation names; ``tuple[u32, f32]`` (a ``TupleType``) only where ``tuples``
        (a device function's result)."""
        val = self.ct_eval(node, "a type annotation")
        if val is tuple or typing.get_origin(val) is tuple:
            if not tuples:
                raise self.error(node, "a tuple type is only for a device function's result (`-> tuple[u32, u32]`); "
                                       "variables take it from the value they are assigned")
            args = typing.get_args(val)
            if not args or Ellipsis in args:
                raise self.error(node, "name the type of each result: `-> tuple[u32, u32]`")
            items = []
            for a in args:
                if a is tuple or typing.get_origin(a) is tuple:
                    raise self.error(node, "a tuple holds scalars and pointers, not tuples: flatten the result")
                ty = self.resolve_ct_type(node, a)
                if not isinstance(ty, (T.DType, T.PtrType)):
                    raise self.error(node, f"a tuple holds scalars and pointers, not {ty!r}")
                items.append(ty)
            return T.TupleType(tuple(items))
        return self.resolve_ct_type(node, val)

    def resolve_ct_type(self, node: ast.AST, val) -> T.Type:
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
                self.ret_type = self.resolve_type(tree.returns, tuples=not self.is_kernel)
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
            if out and isinstance(out[-1], (N.Return, N.Break, N.Continue)):
                break  # the rest of the block is unreachable (often after a compile-time if's return)
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
        held = self.const_locals.get(node.id)
        if held is not None:
            return held if isinstance(held, CT) else N.Const(held.ty, held.value, loc=self.loc(node))
        try:
            val = self._lookup_global(node.id)
        except KeyError:
            raise self.error(node, f"name '{node.id}' is not defined") from None
        if isinstance(val, T.TypeVar) and val.name in self.bindings:
            val = self.bindings[val.name]
        if isinstance(val, PerTarget):
            raise self.error(node, _PER_TARGET_READ.format(node.id))
        return CT(val)

    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)) or node.value is None:
            return CT(node.value)
        raise self.error(node, f"{type(node.value).__name__} constants are not supported in kernels")

    def visit_Tuple(self, node: ast.Tuple):
        items = [self.visit(e) for e in node.elts]
        if all(isinstance(v, CT) for v in items):
            return CT(tuple(v.value for v in items))
        for e, v in zip(node.elts, items):
            if not isinstance(v, CT) and isinstance(v.ty, T.ArrayType):
                raise self.error(e, "a tuple holds scalars and pointers, not arrays: pass the array itself")
        return TupleVal(items)

    def visit_Attribute(self, node: ast.Attribute):
        base = self.visit(node.value)
        if not isinstance(base, CT):
            raise self.error(node, f"values of type {base.ty!r} have no attribute '{node.attr}'")
        obj = base.value
        d = definition(obj)
        if d is not None and d.attribute is not None:  # pk.thread_idx.x and its kind
            return d.attribute(self, node, obj)
        try:
            val = getattr(obj, node.attr)
        except AttributeError:
            raise self.error(node, f"{describe(obj)} has no attribute '{node.attr}'") from None
        if isinstance(val, TargetConstant):  # pk.wave_size, pk.tile_bytes
            return CT(val.value(self.target))
        if isinstance(val, PerTarget):
            raise self.error(node, _PER_TARGET_READ.format(node.attr))
        return CT(val)
