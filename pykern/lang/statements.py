"""Typing statements: assignments (and their implicit declarations), ``if``, ``while``, ``for`` over
``range`` (a built-in iterable's ``for`` is typed by its registry entry), ``break``/``continue``
and ``return``."""
from __future__ import annotations

import ast

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T
from .builtins import Builtin, TargetConstant, definition
from .source import FuncDef
from .values import CT, TupleVal, describe, is_tuple, type_name

_UNBOUND = object()


class StmtTyper:
    """The statement half of ``frontend.Typer`` (a mixin)."""

    # ------------------------------------------------------------------ statements
    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        self.pending: list = []
        v = self.visit(node.value, tuples=True)
        if isinstance(v, CT):
            return self.pending or None  # pk.store() leaves its Store there
        parts = [e for e in v.items if not isinstance(e, CT)] if isinstance(v, TupleVal) else [v]
        return self.pending + [N.ExprStmt(e, loc=self.loc(node)) for e in parts]

    def assign_to(self, target: ast.AST, value, node) -> list[N.Stmt]:
        if isinstance(target, (ast.Tuple, ast.List)):
            return self.unpack(target, value, node)
        if isinstance(target, ast.Name) and is_tuple(value):
            return self.assign_tuple(target, value, node)
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
                    if isinstance(g, (T.DType, FuncDef, Builtin)) or g is range:
                        raise self.error(target, f"'{name}' names {describe(g)}; choose another variable name")
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
                raise self.error(target, "a tuple's elements cannot be assigned: tuples are immutable"
                                 if not isinstance(base, CT) else "cannot assign to a compile-time value")
            if is_tuple(value):
                raise self.error(node.value, f"a tuple of {_count(value)} values cannot be stored to memory: "
                                             f"unpack it and store each element")
            if isinstance(base.ty, T.PtrType) and base.ty.const:
                raise self.error(target, "cannot write through a ConstPtr: the data is read-only")
            val = self.coerce_assign(value, base.ty.elem, node, "element")
            return [N.Store(base, idx, val, loc=self.loc(node))]
        raise self.error(target, f"cannot assign to {type(target).__name__}")

    def unpack(self, target: ast.Tuple | ast.List, value, node) -> list[N.Stmt]:
        """``a, b = value``: Python's order (the whole right-hand side first, then the names left to
        right, so ``a, b = b, a`` swaps). A typed tuple (a device function's result) is evaluated
        once into a hidden variable and read element by element (``TupleItem``); a written tuple's
        run-time elements are each evaluated into a hidden variable first; compile-time elements
        are assigned as ``a = 0`` would be (a name assigned once stays a compile-time value)."""
        for e in target.elts:
            if isinstance(e, ast.Starred):
                raise self.error(e, "starred assignment (`a, *rest = ...`) is not supported in kernels: "
                                    "name every value")
        if isinstance(value, CT):
            if not isinstance(value.value, tuple):
                raise self.error(node.value, f"cannot unpack {describe(value.value)}: only a tuple unpacks")
            items = [CT(v) for v in value.value]
        elif isinstance(value, TupleVal):
            items = [v if isinstance(v, (CT, N.Const)) else self.spill(v, node.value) for v in value.items]
        elif is_tuple(value):
            held = value if isinstance(value, N.Var) else self.spill(value, node.value)
            items = [N.TupleItem(t, held, k, loc=self.loc(node.value)) for k, t in enumerate(value.ty.items)]
        else:
            raise self.error(node.value, f"cannot unpack a {value.ty!r} value: only a tuple unpacks (a device "
                                         f"function's `return a, b`, or `a, b` itself)")
        if len(items) != len(target.elts):
            source = f"{value.func.name}() returns" if isinstance(value, N.Call) else "the right-hand side has"
            raise self.error(target, f"{len(target.elts)} names to unpack, but {source} {len(items)} values")
        out: list[N.Stmt] = []
        for e, v in zip(target.elts, items):
            if isinstance(v, CT) and isinstance(e, ast.Name) and self.compile_time_local(e, v):
                continue
            out += self.assign_to(e, v, node)
        return out

    def assign_tuple(self, target: ast.Name, value, node) -> list[N.Stmt]:
        """``t = f(x)``: a variable of the result's ``TupleType``, to unpack or index later."""
        name = target.id
        if name in self.array_names or name in self.static_vars:
            return self.assign_to(target, self.materialize(CT(0), node), node)  # its own error
        ty = self.locals.get(name)
        if isinstance(value, TupleVal):
            want = ty.items if isinstance(ty, T.TupleType) and len(ty.items) == len(value.items) else None
            items = [self.coerce_assign(v, t, node, name) if want else self.materialize(v, node)
                     for v, t in zip(value.items, want or value.items)]
            value = N.MakeTuple(T.TupleType(tuple(v.ty for v in items)), items, loc=self.loc(node.value))
        if ty is None:
            self.locals[name] = value.ty
        elif ty != value.ty:
            raise self.error(node, f"cannot assign a {value.ty!r} value to '{name}' of type {ty!r}")
        return [N.Assign(name, value, loc=self.loc(node))]

    def coerce_assign(self, value, ty, node, name):
        if isinstance(value, CT):
            return self.const(value.value, ty, node)
        if value.ty != ty:
            raise self.error(node, f"cannot assign a {value.ty!r} value to '{name}' of type {ty!r}; "
                                   f"convert explicitly with pk.{type_name(ty)}(...)")
        return value

    def visit_Assign(self, node: ast.Assign):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment is not supported")
        (target,) = node.targets
        if isinstance(node.value, ast.Call) and isinstance(target, ast.Name):
            fn = self._maybe_ct(node.value.func)
            d = definition(fn)
            if d is not None and d.declare is not None:  # name = pk.shared.array(...) and its kind
                d.declare(self, target.id, node.value, target, fn)
                return None
        self.pending = []
        value = self.visit(node.value, tuples=True)
        if isinstance(value, CT) and isinstance(value.value, T.DType) and isinstance(target, ast.Name):
            return self.alias_type(target, value.value)
        if isinstance(value, CT) and isinstance(target, ast.Name) and self.compile_time_local(target, value):
            return self.pending or None
        out = self.assign_to(target, value, node)  # may add hidden assignments to pending (unpacking)
        return self.pending + out

    def compile_time_local(self, target: ast.Name, value: CT) -> bool:
        """``per = spec.cache // T.nbytes``, ``ln = spec.layernorm``, ``shape = (4, 8)``: a name the
        function assigns once, unconditionally, from a compile-time value stays compile-time, so an
        ``if`` on it is chosen while compiling instead of lowered with both branches. A number keeps
        the type a variable would have had (``const_locals``: a typed constant, the same arithmetic);
        a bool, None, a tuple or any other Python object is a compile-time binding (the last were
        errors as variables). Returns False where the name must stay a run-time variable: assigned
        elsewhere too, inside a run-time branch or loop, already a variable, or shadowing a global."""
        name = target.id
        if (self.runtime_depth or name in self.locals or name in self.array_names or name in self.static_vars
                or assignment_counts(self.src).get(name, 0) != 1):
            return False
        if name not in self.const_locals:
            try:
                self._lookup_global(name)
                return False  # the variable would shadow it: keep today's rules (and messages)
            except KeyError:
                pass
        val = value.value
        if isinstance(val, TargetConstant):
            val = val.value(self.target)
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            self.const_locals[name] = CT(val)
        else:
            self.const_locals[name] = self.materialize(CT(val), target)
        return True

    def alias_type(self, target: ast.Name, ty: T.DType) -> None:
        """``W = u32 if T is f16 else T``: a compile-time name for a type (no run-time variable)."""
        name = target.id
        if name in self.locals or name in self.array_names:
            raise self.error(target, f"'{name}' is a run-time variable; a type needs a name of its own")
        bound = self.bindings.get(name, _UNBOUND)
        if bound is not _UNBOUND and bound != ty:
            raise self.error(target, f"'{name}' already names {describe(bound)}")
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
        self.runtime_depth += 1
        body, orelse = self.block(node.body), self.block(node.orelse)
        self.runtime_depth -= 1
        return pre + [N.If(c, body, orelse, loc=self.loc(node))]

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
        self.runtime_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        self.runtime_depth -= 1
        return N.While(c, body, loc=self.loc(node))

    def visit_For(self, node: ast.For):
        if node.orelse:
            raise self.error(node.orelse[0], "for ... else is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a plain name")
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        d = definition(fn.value) if isinstance(fn, CT) else None
        if d is not None and d.loop is not None:  # pk.grid_stride(...) and the other built-in iterables
            return d.loop(self, node, fn.value)
        if not isinstance(fn, CT) or fn.value is not range:
            raise self.error(it, "for loops iterate over range(...), pk.static_range(...), pk.grid_stride(...) "
                                 "or pk.parallel_range(...)")
        self.pending = []
        start, stop, step, sign = self.range_args(it)
        return self.counted_loop(node, start, stop, step, sign)

    def counted_loop(self, node: ast.For, start: N.Expr, stop: N.Expr, step: N.Expr, sign: int, grid: bool = False,
                     offset: N.Expr | None = None, descending: bool = False) -> list[N.Stmt]:
        """The ``for`` statement over ``range(start, stop, step)`` (``N.ForRange``'s fields), after the
        statements ``self.pending`` holds for its bounds."""
        pre = self.pending
        name = node.target.id
        if name in self.locals and self.locals[name] != start.ty:
            raise self.error(node.target, f"loop variable '{name}' has type {self.locals[name]!r} "
                                          f"but the range is {start.ty!r}")
        self.locals[name] = start.ty
        self.loop_depth += 1
        self.runtime_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        self.runtime_depth -= 1
        return pre + [N.ForRange(name, start, stop, step, sign, body, grid, offset, descending, loc=self.loc(node))]

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
        value = self.visit(node.value, tuples=True)
        if isinstance(self.ret_type, T.TupleType):
            v = self.tuple_result(value, node)
        elif is_tuple(value) or (isinstance(value, CT) and isinstance(value.value, tuple)):
            raise self.error(node.value, f"this function returns one {self.ret_type!r}, not {_count(value)} values: "
                                         f"annotate its result `-> tuple[...]`")
        else:
            v = self.coerce_assign(value, self.ret_type, node, "the return value")
        return self.pending + [N.Return(v, loc=self.loc(node))]

    def tuple_result(self, value, node) -> N.Expr:
        """``return a, b`` in a ``-> tuple[...]`` function: each element converted to its declared
        type as a single result is (a literal adopts it; anything else must already have it)."""
        want = self.ret_type.items
        if isinstance(value, CT) and isinstance(value.value, tuple):
            value = TupleVal([CT(v) for v in value.value])
        if isinstance(value, TupleVal):
            if len(value.items) != len(want):
                raise self.error(node.value, f"this function returns {len(want)} values ({self.ret_type!r}), "
                                             f"not {len(value.items)}")
            items = [self.coerce_assign(v, t, node, f"result {k}") for k, (v, t) in enumerate(zip(value.items, want))]
            return N.MakeTuple(self.ret_type, items, loc=self.loc(node.value))
        if not is_tuple(value) or value.ty != self.ret_type:
            got = describe(value.value) if isinstance(value, CT) else repr(value.ty)
            raise self.error(node.value, f"this function returns {self.ret_type!r}, got {got}")
        return value


def _count(value) -> int:
    """How many values a tuple (written, typed or compile-time) holds."""
    if isinstance(value, TupleVal):
        return len(value.items)
    if isinstance(value, CT):
        return len(value.value)
    return len(value.ty.items)


def assignment_counts(src) -> dict[str, int]:
    """How many statements of ``src``'s function assign each plain name (``=``, ``+=``, annotated,
    ``for`` targets), counted once per source function."""
    counts = getattr(src, "_assignment_counts", None)
    if counts is None:
        counts = {}
        for n in ast.walk(src.tree):
            targets: list = []
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.For)):
                targets = [n.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        counts[name.id] = counts.get(name.id, 0) + 1
        src._assignment_counts = counts
    return counts


def _as_load(target: ast.AST) -> ast.AST:
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Load()), target)
    return target
